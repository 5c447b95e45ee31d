//! The log layer's broker keys (`log.dirs`, the retention and flush
//! schedules, producer expiry; Kafka's `ServerLogConfigs`), the settings
//! built from them, and how the broker's keys become topic defaults.
//!
//! Topic keys and their broker defaults (`log.segment.bytes`, ...) are in
//! [`super::config::LOG_CONFIGS`]; `log.retention.hours`,
//! `log.retention.minutes` and `log.roll.hours` are coarser synonyms of two
//! of those defaults and live here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::config::LOG_CONFIGS;
use crate::config_def::{broker_key, ConfigDef, ConfigTable, ConfigValues};

pub const LOG_DIRS: ConfigDef = broker_key!(
    "log.dirs",
    String,
    "data",
    None,
    "comma-separated directories that hold the partitions"
);
pub const LOG_FLUSH_BEFORE_ACK: ConfigDef = broker_key!(
    "log.flush.before.ack",
    Boolean,
    "false",
    None,
    "sediment: fsync each append before acknowledging it (survives power loss, costs latency)"
);
pub const LOG_RETENTION_CHECK_INTERVAL_MS: ConfigDef = broker_key!(
    "log.retention.check.interval.ms",
    Long,
    "300000",
    Some(1.0),
    "how often retention runs"
);
pub const LOG_FLUSH_SCHEDULER_INTERVAL_MS: ConfigDef = broker_key!(
    "log.flush.scheduler.interval.ms",
    Long,
    "9223372036854775807",
    Some(1.0),
    "accepted for compatibility with Kafka and not used: sediment checks flush.ms every second"
);
pub const PRODUCER_ID_EXPIRATION_MS: ConfigDef = broker_key!("producer.id.expiration.ms", Int, "86400000", Some(1.0),
    "how long a producer's state (epoch, last sequences) is kept after its last write when it has no open transaction");
pub const PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS: ConfigDef = broker_key!(
    "producer.id.expiration.check.interval.ms",
    Int,
    "600000",
    Some(1.0),
    "how often producer state past producer.id.expiration.ms is removed"
);
pub const LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS: ConfigDef = broker_key!(
    "log.flush.offset.checkpoint.interval.ms",
    Int,
    "60000",
    Some(0.0),
    "how often the recovery point is checkpointed"
);
pub const LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS: ConfigDef = broker_key!(
    "log.flush.start.offset.checkpoint.interval.ms",
    Int,
    "60000",
    Some(0.0),
    "how often log start offsets are checkpointed"
);
pub const LOG_RETENTION_HOURS: ConfigDef = broker_key!(
    "log.retention.hours",
    Int,
    "168",
    None,
    "retention.ms default in hours, when log.retention.ms and .minutes are unset"
);
pub const LOG_RETENTION_MINUTES: ConfigDef = broker_key!(
    "log.retention.minutes",
    Int,
    "",
    None,
    "retention.ms default in minutes, when log.retention.ms is unset"
);
pub const LOG_ROLL_HOURS: ConfigDef = broker_key!(
    "log.roll.hours",
    Int,
    "168",
    Some(1.0),
    "segment.ms default in hours, when log.roll.ms is unset"
);

/// Shown with the topic creation keys (`config::broker_defs`).
pub const NUM_PARTITIONS: ConfigDef = broker_key!(
    "num.partitions",
    Int,
    "1",
    Some(1.0),
    "partitions of an auto-created topic or a CreateTopics without a count"
);

/// The log layer's keys, as the template and the reference show them.
pub const STORAGE_CONFIGS: ConfigTable = ConfigTable {
    title: "Storage",
    note: "",
    keys: &[
        &LOG_DIRS,
        &LOG_FLUSH_BEFORE_ACK,
        &LOG_RETENTION_CHECK_INTERVAL_MS,
        &LOG_FLUSH_SCHEDULER_INTERVAL_MS,
        &PRODUCER_ID_EXPIRATION_MS,
        &PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
        &LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS,
        &LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS,
        &LOG_RETENTION_HOURS,
        &LOG_RETENTION_MINUTES,
        &LOG_ROLL_HOURS,
    ],
};

/// Broker-level settings of the log layer.
#[derive(Debug, Clone)]
pub struct LogManagerConfig {
    pub log_dirs: Vec<PathBuf>,
    /// The broker's `log.*` defaults, keyed by the topic key they default.
    pub topic_defaults: BTreeMap<String, String>,
    /// fsync every append before it is acknowledged.
    pub flush_before_ack: bool,
    pub retention_check_interval_ms: i64,
    pub flush_scheduler_interval_ms: i64,
    pub flush_offset_checkpoint_interval_ms: i64,
    pub flush_start_offset_checkpoint_interval_ms: i64,
    /// A producer with no open transaction whose last write is older than
    /// this is forgotten (Kafka's `producer.id.expiration.ms`).
    pub producer_id_expiration_ms: i64,
    pub producer_id_expiration_check_interval_ms: i64,
    /// `remote.log.storage.system.enable`: topics may set `remote.storage.enable`.
    pub remote_log_storage_system_enable: bool,
    /// In a cluster the cluster's metadata says which partitions of a topic
    /// are here (a subset): a start does not complete a topic's missing
    /// partitions, except those of the coordinators' internal topics, which
    /// each broker keeps whole.
    pub partitions_placed_by_cluster: bool,
}

impl LogManagerConfig {
    /// Kafka's defaults over one log dir.
    pub fn new(log_dir: impl Into<PathBuf>) -> Self {
        Self {
            log_dirs: vec![log_dir.into()],
            topic_defaults: BTreeMap::new(),
            flush_before_ack: false,
            retention_check_interval_ms: 300_000,
            flush_scheduler_interval_ms: i64::MAX,
            flush_offset_checkpoint_interval_ms: 60_000,
            flush_start_offset_checkpoint_interval_ms: 60_000,
            producer_id_expiration_ms: 86_400_000,
            producer_id_expiration_check_interval_ms: 600_000,
            remote_log_storage_system_enable: false,
            partitions_placed_by_cluster: false,
        }
    }
}

impl LogManagerConfig {
    /// The settings of `values`; `remote_log_storage_system_enable` is a
    /// key of `remote`.
    pub fn from_values(values: &dyn ConfigValues, remote_log_storage_system_enable: bool) -> Self {
        let dirs = log_dirs(values);
        let mut c = Self::new(dirs.first().cloned().unwrap_or_else(|| PathBuf::from("data")));
        c.log_dirs = dirs;
        c.topic_defaults = topic_defaults(values);
        c.flush_before_ack = values.boolean(&LOG_FLUSH_BEFORE_ACK);
        c.retention_check_interval_ms = values.int(&LOG_RETENTION_CHECK_INTERVAL_MS);
        c.flush_scheduler_interval_ms = values.int(&LOG_FLUSH_SCHEDULER_INTERVAL_MS);
        c.flush_offset_checkpoint_interval_ms =
            values.int(&LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS);
        c.flush_start_offset_checkpoint_interval_ms =
            values.int(&LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS);
        c.producer_id_expiration_ms = values.int(&PRODUCER_ID_EXPIRATION_MS);
        c.producer_id_expiration_check_interval_ms =
            values.int(&PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS);
        c.remote_log_storage_system_enable = remote_log_storage_system_enable;
        c
    }
}

/// `log.dirs`, split.
pub fn log_dirs(values: &dyn ConfigValues) -> Vec<PathBuf> {
    values.list(&LOG_DIRS).into_iter().map(PathBuf::from).collect()
}

/// The topic-level defaults the broker's keys set, keyed by topic key:
/// every topic key's broker key that is set, and the coarser synonyms
/// (hours, minutes) when the exact key is not.
pub fn topic_defaults(values: &dyn ConfigValues) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let explicit_int =
        |def: &ConfigDef| values.explicit_value(def).and_then(|v| v.parse::<i64>().ok());
    let retention =
        |n: i64, unit: i64| if n < 0 { "-1".to_string() } else { (n * unit).to_string() };
    // Kafka's coarser synonyms first, so the exact *.ms keys win.
    if let Some(h) = explicit_int(&LOG_RETENTION_HOURS) {
        out.insert("retention.ms".to_string(), retention(h, 3_600_000));
    }
    if let Some(m) = explicit_int(&LOG_RETENTION_MINUTES) {
        out.insert("retention.ms".to_string(), retention(m, 60_000));
    }
    if let Some(h) = explicit_int(&LOG_ROLL_HOURS) {
        out.insert("segment.ms".to_string(), (h * 3_600_000).to_string());
    }
    for def in LOG_CONFIGS {
        if let Some(v) = values.explicit_value(def) {
            out.insert(def.name.to_string(), v.to_string());
        }
    }
    out
}

/// The broker keys that stand for the same setting, in Kafka's order (the
/// most precise first): what DescribeConfigs lists as synonyms.
pub fn synonyms(key: &str) -> &'static [&'static str] {
    const RETENTION: &[&str] =
        &["log.retention.ms", LOG_RETENTION_MINUTES.name, LOG_RETENTION_HOURS.name];
    const ROLL: &[&str] = &["log.roll.ms", LOG_ROLL_HOURS.name];
    [RETENTION, ROLL].into_iter().find(|names| names[0] == key).unwrap_or(&[])
}

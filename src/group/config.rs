//! The group coordinator's broker keys (`offsets.*`, `group.*`, Kafka's
//! `GroupCoordinatorConfig`), the settings built from them and Kafka's
//! checks across them.

use crate::config_def::{broker_key, ConfigDef, ConfigTable, ConfigValues, InvalidValue};

/// The names `group.consumer.assignors` accepts: Kafka's short names and
/// class names.
const CONSUMER_ASSIGNORS: &[&str] = &[
    "uniform",
    "range",
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
];

pub const OFFSETS_TOPIC_NUM_PARTITIONS: ConfigDef = broker_key!(
    "offsets.topic.num.partitions",
    Int,
    "50",
    Some(1.0),
    "partitions of __consumer_offsets (fixed once the topic exists)"
);
pub const OFFSETS_TOPIC_SEGMENT_BYTES: ConfigDef = broker_key!(
    "offsets.topic.segment.bytes",
    Int,
    "104857600",
    Some(1.0),
    "segment.bytes of __consumer_offsets"
);
pub const OFFSETS_TOPIC_REPLICATION_FACTOR: ConfigDef = broker_key!(
    "offsets.topic.replication.factor",
    Int,
    "3",
    Some(1.0),
    "replication factor of __consumer_offsets in a cluster (a single node keeps one copy)"
);
pub const OFFSETS_COMMIT_TIMEOUT_MS: ConfigDef = broker_key!(
    "offsets.commit.timeout.ms",
    Int,
    "5000",
    Some(1.0),
    "in a cluster, how long a group write waits for the ISR of its __consumer_offsets partition"
);
pub const OFFSETS_RETENTION_MINUTES: ConfigDef = broker_key!(
    "offsets.retention.minutes",
    Int,
    "10080",
    Some(1.0),
    "how long an empty group's committed offsets are kept"
);
pub const OFFSETS_RETENTION_CHECK_INTERVAL_MS: ConfigDef = broker_key!(
    "offsets.retention.check.interval.ms",
    Long,
    "600000",
    Some(1.0),
    "how often expired offsets are looked for"
);
pub const OFFSET_METADATA_MAX_BYTES: ConfigDef = broker_key!(
    "offset.metadata.max.bytes",
    Int,
    "4096",
    Some(0.0),
    "largest metadata string of a committed offset"
);
pub const GROUP_INITIAL_REBALANCE_DELAY_MS: ConfigDef = broker_key!(
    "group.initial.rebalance.delay.ms",
    Int,
    "3000",
    Some(0.0),
    "how long a new group waits for more members before its first rebalance"
);
pub const GROUP_MIN_SESSION_TIMEOUT_MS: ConfigDef = broker_key!(
    "group.min.session.timeout.ms",
    Int,
    "6000",
    Some(0.0),
    "smallest session.timeout.ms a member may ask for"
);
pub const GROUP_MAX_SESSION_TIMEOUT_MS: ConfigDef = broker_key!(
    "group.max.session.timeout.ms",
    Int,
    "1800000",
    Some(0.0),
    "largest session.timeout.ms a member may ask for"
);
pub const GROUP_MAX_SIZE: ConfigDef = broker_key!(
    "group.max.size",
    Int,
    "2147483647",
    Some(1.0),
    "largest number of members in a group"
);
pub const GROUP_COORDINATOR_REBALANCE_PROTOCOLS: ConfigDef = broker_key!("group.coordinator.rebalance.protocols", List, "classic,consumer", None, &["classic", "consumer"],
    "the group protocols served: classic always; consumer enables ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848)");
pub const GROUP_CONSUMER_SESSION_TIMEOUT_MS: ConfigDef = broker_key!(
    "group.consumer.session.timeout.ms",
    Int,
    "45000",
    Some(1.0),
    "a consumer group member that has not heartbeated for this long is fenced"
);
pub const GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS: ConfigDef = broker_key!(
    "group.consumer.min.session.timeout.ms",
    Int,
    "45000",
    Some(1.0),
    "smallest allowed group.consumer.session.timeout.ms"
);
pub const GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS: ConfigDef = broker_key!(
    "group.consumer.max.session.timeout.ms",
    Int,
    "60000",
    Some(1.0),
    "largest allowed group.consumer.session.timeout.ms"
);
pub const GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS: ConfigDef = broker_key!(
    "group.consumer.heartbeat.interval.ms",
    Int,
    "5000",
    Some(1.0),
    "how often consumer group members are told to heartbeat"
);
pub const GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS: ConfigDef = broker_key!(
    "group.consumer.min.heartbeat.interval.ms",
    Int,
    "5000",
    Some(1.0),
    "smallest allowed group.consumer.heartbeat.interval.ms"
);
pub const GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS: ConfigDef = broker_key!(
    "group.consumer.max.heartbeat.interval.ms",
    Int,
    "15000",
    Some(1.0),
    "largest allowed group.consumer.heartbeat.interval.ms"
);
pub const GROUP_CONSUMER_MAX_SIZE: ConfigDef = broker_key!(
    "group.consumer.max.size",
    Int,
    "2147483647",
    Some(1.0),
    "largest number of members in a consumer group"
);
pub const GROUP_CONSUMER_ASSIGNORS: ConfigDef = broker_key!("group.consumer.assignors", List, "uniform,range", None, CONSUMER_ASSIGNORS,
    "server-side assignors of consumer groups; a member's group.remote.assignor picks one, else the first");
pub const GROUP_CONSUMER_MIGRATION_POLICY: ConfigDef = broker_key!("group.consumer.migration.policy", String, "bidirectional", None, &["disabled", "upgrade", "downgrade", "bidirectional"],
    "online conversion between classic and consumer groups: upgrade (a consumer-protocol member joins a classic group), downgrade (the last consumer-protocol member leaves), both, or neither");

/// The coordinator's keys, as the template and the reference show them.
pub const GROUP_CONFIGS: ConfigTable = ConfigTable {
    title: "Consumer groups",
    note: "",
    keys: &[
        &OFFSETS_TOPIC_NUM_PARTITIONS,
        &OFFSETS_TOPIC_SEGMENT_BYTES,
        &OFFSETS_TOPIC_REPLICATION_FACTOR,
        &OFFSETS_COMMIT_TIMEOUT_MS,
        &OFFSETS_RETENTION_MINUTES,
        &OFFSETS_RETENTION_CHECK_INTERVAL_MS,
        &OFFSET_METADATA_MAX_BYTES,
        &GROUP_INITIAL_REBALANCE_DELAY_MS,
        &GROUP_MIN_SESSION_TIMEOUT_MS,
        &GROUP_MAX_SESSION_TIMEOUT_MS,
        &GROUP_MAX_SIZE,
        &GROUP_COORDINATOR_REBALANCE_PROTOCOLS,
        &GROUP_CONSUMER_SESSION_TIMEOUT_MS,
        &GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS,
        &GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS,
        &GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
        &GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS,
        &GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS,
        &GROUP_CONSUMER_MAX_SIZE,
        &GROUP_CONSUMER_ASSIGNORS,
        &GROUP_CONSUMER_MIGRATION_POLICY,
    ],
};

/// The coordinator's settings, with Kafka's defaults.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub offsets_topic_partitions: i32,
    pub offsets_topic_segment_bytes: i64,
    /// In a cluster (a single node keeps one copy).
    pub offsets_topic_replication_factor: i32,
    pub offsets_commit_timeout_ms: i64,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: i64,
    pub initial_rebalance_delay_ms: i64,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_size: usize,
    pub offset_metadata_max_bytes: usize,
    /// `group.coordinator.rebalance.protocols` names `consumer`.
    pub consumer_protocol_enabled: bool,
    pub consumer_session_timeout_ms: i32,
    pub consumer_heartbeat_interval_ms: i32,
    /// The bounds of a group's own `consumer.session.timeout.ms` and
    /// `consumer.heartbeat.interval.ms` (group configs): (min, max).
    pub consumer_session_timeout_bounds: (i32, i32),
    pub consumer_heartbeat_interval_bounds: (i32, i32),
    pub consumer_max_size: usize,
    /// `group.consumer.assignors`, as short names (`uniform`, `range`).
    pub consumer_assignors: Vec<String>,
    pub consumer_migration_policy: MigrationPolicy,
}

/// `group.consumer.migration.policy`: which online conversions between a
/// classic group and a consumer group are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    Disabled,
    Upgrade,
    Downgrade,
    Bidirectional,
}

impl MigrationPolicy {
    /// The policy a (checked) config value names.
    pub fn from_name(name: &str) -> Self {
        match name {
            "upgrade" => Self::Upgrade,
            "downgrade" => Self::Downgrade,
            "disabled" => Self::Disabled,
            _ => Self::Bidirectional,
        }
    }

    /// A classic group may become a consumer group.
    pub fn upgrades(self) -> bool {
        matches!(self, Self::Upgrade | Self::Bidirectional)
    }

    /// A consumer group may become a classic group.
    pub fn downgrades(self) -> bool {
        matches!(self, Self::Downgrade | Self::Bidirectional)
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            offsets_topic_partitions: 50,
            offsets_topic_segment_bytes: 104_857_600,
            offsets_topic_replication_factor: 3,
            offsets_commit_timeout_ms: 5000,
            offsets_retention_ms: 7 * 24 * 3_600_000,
            offsets_retention_check_interval_ms: 600_000,
            initial_rebalance_delay_ms: 3000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            max_size: i32::MAX as usize,
            offset_metadata_max_bytes: 4096,
            consumer_protocol_enabled: true,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5000,
            consumer_session_timeout_bounds: (45_000, 60_000),
            consumer_heartbeat_interval_bounds: (5000, 15_000),
            consumer_max_size: i32::MAX as usize,
            consumer_assignors: vec!["uniform".to_string(), "range".to_string()],
            consumer_migration_policy: MigrationPolicy::Bidirectional,
        }
    }
}

impl GroupConfig {
    /// The settings of `values`.
    pub fn from_values(values: &dyn ConfigValues) -> Self {
        let protocols = values.list(&GROUP_COORDINATOR_REBALANCE_PROTOCOLS);
        Self {
            offsets_topic_partitions: values.int(&OFFSETS_TOPIC_NUM_PARTITIONS) as i32,
            offsets_topic_segment_bytes: values.int(&OFFSETS_TOPIC_SEGMENT_BYTES),
            offsets_topic_replication_factor: values.int(&OFFSETS_TOPIC_REPLICATION_FACTOR) as i32,
            offsets_commit_timeout_ms: values.int(&OFFSETS_COMMIT_TIMEOUT_MS),
            offsets_retention_ms: values.int(&OFFSETS_RETENTION_MINUTES) * 60_000,
            offsets_retention_check_interval_ms: values.int(&OFFSETS_RETENTION_CHECK_INTERVAL_MS),
            initial_rebalance_delay_ms: values.int(&GROUP_INITIAL_REBALANCE_DELAY_MS),
            min_session_timeout_ms: values.int(&GROUP_MIN_SESSION_TIMEOUT_MS) as i32,
            max_session_timeout_ms: values.int(&GROUP_MAX_SESSION_TIMEOUT_MS) as i32,
            max_size: values.int(&GROUP_MAX_SIZE) as usize,
            offset_metadata_max_bytes: values.int(&OFFSET_METADATA_MAX_BYTES) as usize,
            consumer_protocol_enabled: protocols.iter().any(|p| p == "consumer"),
            consumer_session_timeout_ms: values.int(&GROUP_CONSUMER_SESSION_TIMEOUT_MS) as i32,
            consumer_heartbeat_interval_ms: values.int(&GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS)
                as i32,
            consumer_session_timeout_bounds: (
                values.int(&GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS) as i32,
                values.int(&GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS) as i32,
            ),
            consumer_heartbeat_interval_bounds: (
                values.int(&GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS) as i32,
                values.int(&GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS) as i32,
            ),
            consumer_max_size: values.int(&GROUP_CONSUMER_MAX_SIZE) as usize,
            consumer_assignors: values
                .list(&GROUP_CONSUMER_ASSIGNORS)
                .iter()
                .filter_map(|a| super::assignor::by_name(a).map(|a| a.name().to_string()))
                .collect(),
            consumer_migration_policy: MigrationPolicy::from_name(
                values.value(&GROUP_CONSUMER_MIGRATION_POLICY).trim(),
            ),
        }
    }

    /// Kafka's checks across the keys: the session timeout and heartbeat
    /// interval within their bounds, the interval below the session
    /// timeout, the classic protocol always on.
    ///
    /// # Errors
    /// The first rule broken, naming the key.
    pub fn check(values: &dyn ConfigValues) -> Result<(), InvalidValue> {
        if !values.list(&GROUP_COORDINATOR_REBALANCE_PROTOCOLS).iter().any(|p| p == "classic") {
            return Err(InvalidValue::new(
                &GROUP_COORDINATOR_REBALANCE_PROTOCOLS,
                "classic must be enabled",
            ));
        }
        for (key, min, max) in [
            (
                &GROUP_CONSUMER_SESSION_TIMEOUT_MS,
                &GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS,
                &GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS,
            ),
            (
                &GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
                &GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS,
                &GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS,
            ),
        ] {
            let (v, lo, hi) = (values.int(key), values.int(min), values.int(max));
            if v < lo || v > hi {
                let (min, max) = (min.name, max.name);
                let reason = format!("{v} is outside [{min} {lo}, {max} {hi}]");
                return Err(InvalidValue::new(key, reason));
            }
        }
        if values.int(&GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS)
            >= values.int(&GROUP_CONSUMER_SESSION_TIMEOUT_MS)
        {
            return Err(InvalidValue::new(
                &GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
                "must be below group.consumer.session.timeout.ms",
            ));
        }
        Ok(())
    }
}

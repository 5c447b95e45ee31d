//! Topic-level log configuration, with Kafka's keys, defaults and bounds.
//!
//! A `LogConfig` is resolved from three layers: the topic's own overrides
//! (persisted in the partition directory), the broker's defaults (its `log.*`
//! keys, passed in already renamed to topic keys) and Kafka's built-in defaults.
//! `LOG_CONFIGS` is the single table of keys: validation, DescribeConfigs and
//! the documented config all read it.

use std::collections::BTreeMap;

use super::compaction_strategy::CompactionStrategy;
use super::compression::Compression;
use super::error::{LogError, Result};
use super::record_batch::TimestampType;
use crate::config_def::{ConfigDef, ConfigType};

const LONG_MAX: &str = "9223372036854775807";

macro_rules! def {
    ($name:literal, $broker:literal, $kind:ident, $default:expr, $min:expr, $max:expr, $one_of:expr, $doc:literal) => {
        ConfigDef {
            name: $name,
            broker_key: $broker,
            kind: ConfigType::$kind,
            default: $default,
            min: $min,
            max: $max,
            one_of: $one_of,
            doc: $doc,
        }
    };
}

/// Read by `remote` too (a default of true needs the system on).
pub const REMOTE_STORAGE_ENABLE: ConfigDef = def!("remote.storage.enable", "remote.storage.enable", Boolean, "false", None, None, &[],
    "copy the topic's closed segments to the object store (remote.log.storage.system.enable must be on); sediment allows it on compacted topics and mirrors their cleaning; as a broker key (sediment), the default of every topic");

/// Every topic-level key sediment understands.
pub const LOG_CONFIGS: &[ConfigDef] = &[
    def!("cleanup.policy", "log.cleanup.policy", List, "delete", None, None, &["delete", "compact"],
        "delete removes old segments by time or size; compact keeps the latest record per key; both may be listed"),
    def!("compression.type", "compression.type", String, "producer", None, None,
        &["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"],
        "codec of stored batches: producer keeps the producer's; any other is applied on produce, recompressing batches sent with another codec (uncompressed stores them inflated)"),
    def!("compression.gzip.level", "compression.gzip.level", Int, "-1", Some(-1.0), Some(9.0), &[],
        "gzip level when compression.type=gzip recompresses: -1 (zlib's default) or 1 to 9"),
    def!("compression.lz4.level", "compression.lz4.level", Int, "9", Some(1.0), Some(17.0), &[],
        "lz4 level when compression.type=lz4 recompresses: accepted and without effect (sediment's lz4 encoder has one level, lz4's fast one)"),
    def!("compression.zstd.level", "compression.zstd.level", Int, "3", Some(-131072.0), Some(22.0), &[],
        "zstd level when compression.type=zstd recompresses"),
    def!("delete.retention.ms", "log.cleaner.delete.retention.ms", Long, "86400000", Some(0.0), None, &[],
        "how long tombstones survive after the first clean that sees them"),
    def!("file.delete.delay.ms", "log.segment.delete.delay.ms", Long, "60000", Some(0.0), None, &[],
        "delay between renaming a removed segment to .deleted and unlinking it"),
    def!("flush.messages", "log.flush.interval.messages", Long, LONG_MAX, Some(1.0), None, &[],
        "fsync after this many appended messages"),
    def!("flush.ms", "log.flush.interval.ms", Long, LONG_MAX, Some(0.0), None, &[],
        "fsync when the oldest unflushed append is this old"),
    def!("index.interval.bytes", "log.index.interval.bytes", Int, "4096", Some(0.0), None, &[],
        "bytes appended between two offset-index entries"),
    def!("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", Long, LONG_MAX, Some(1.0), None, &[],
        "longest a record may stay uncompacted"),
    def!("max.message.bytes", "message.max.bytes", Int, "1048588", Some(0.0), None, &[],
        "largest record batch accepted"),
    def!("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", Long, "3600000", Some(0.0), None, &[],
        "how far in the future a CreateTime timestamp may be"),
    def!("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", Long, LONG_MAX, Some(0.0), None, &[],
        "how far in the past a CreateTime timestamp may be"),
    def!("message.timestamp.type", "log.message.timestamp.type", String, "CreateTime", None, None,
        &["CreateTime", "LogAppendTime"], "whether records keep the producer's timestamp or get the broker's"),
    def!("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", Double, "0.5", Some(0.0), Some(1.0), &[],
        "dirty share of the log above which it is cleaned"),
    def!("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", Long, "0", Some(0.0), None, &[],
        "shortest time a record stays uncompacted"),
    def!("min.insync.replicas", "min.insync.replicas", Int, "1", Some(1.0), None, &[],
        "in-sync replicas acks=all needs (at most the replication factor counts)"),
    def!("retention.bytes", "log.retention.bytes", Long, "-1", None, None, &[],
        "largest size of a partition before old segments are removed (with remote.storage.enable, of the whole log, the store's segments too); -1 is unlimited"),
    def!("retention.ms", "log.retention.ms", Long, "604800000", Some(-1.0), None, &[],
        "age after which segments are removed (with remote.storage.enable, the store's too); -1 is unlimited"),
    def!("segment.bytes", "log.segment.bytes", Int, "1073741824", Some(14.0), None, &[],
        "size at which the active segment rolls"),
    def!("segment.index.bytes", "log.index.size.max.bytes", Int, "10485760", Some(4.0), None, &[],
        "largest size of an offset or time index; a full index rolls the segment"),
    def!("segment.jitter.ms", "log.roll.jitter.ms", Long, "0", Some(0.0), None, &[],
        "random jitter subtracted from segment.ms"),
    def!("segment.ms", "log.roll.ms", Long, "604800000", Some(1.0), None, &[],
        "age at which the active segment rolls"),
    def!("unclean.leader.election.enable", "unclean.leader.election.enable", Boolean, "false", None, None, &[],
        "in a cluster, whether a partition whose in-sync replicas are all gone is led by another live replica (losing what only they held) instead of staying offline; no effect on a single node"),
    REMOTE_STORAGE_ENABLE,
    def!("remote.log.delete.on.disable", "remote.log.delete.on.disable", Boolean, "false", None, None, &[],
        "must be true to turn remote.storage.enable from true to false: the store's copy of the topic is then retired and deleted after sediment.remote.storage.delete.delay.ms (false keeps it and refuses the change, as Kafka); as a broker key (sediment), the default of every topic"),
    def!("local.retention.ms", "log.local.retention.ms", Long, "-2", Some(-2.0), None, &[],
        "with remote.storage.enable, how long a closed segment stays on local disk once the store's manifest lists it (by its newest record's timestamp); -2 takes retention.ms, -1 keeps it forever; at most retention.ms when that is not -1; applies to compacted topics too"),
    def!("local.retention.bytes", "log.local.retention.bytes", Long, "-2", Some(-2.0), None, &[],
        "with remote.storage.enable, the local size above which the oldest closed segments the store's manifest lists leave local disk; -2 takes retention.bytes, -1 is unlimited; at most retention.bytes when that is not -1"),
    def!("sediment.tombstone.retention.wait.for.groups", "sediment.tombstone.retention.wait.for.groups", Boolean, "false", None, None, &[],
        "sediment extension: keep a tombstone past its delete horizon while a consumer group with committed offsets on the partition has not committed beyond it (at most sediment.tombstone.retention.max.wait.ms longer)"),
    def!("leader.replication.throttled.replicas", "", List, "", None, None, &[],
        "replicas throttled on their leader's side by leader.replication.throttled.rate: partitionId:brokerId pairs, or * for every replica of the topic (kafka-reassign-partitions --throttle sets it)"),
    def!("follower.replication.throttled.replicas", "", List, "", None, None, &[],
        "replicas throttled on their follower's side by follower.replication.throttled.rate: partitionId:brokerId pairs, or * for every replica of the topic (kafka-reassign-partitions --throttle sets it)"),
    def!("sediment.compaction.strategy", "", String, "offset", None, None, &["offset", "timestamp", "header"],
        "sediment extension (KIP-280's strategies): which copy of a key compaction keeps: offset (Kafka's rule, the highest offset), timestamp (the highest record timestamp) or header (the highest value of the header sediment.compaction.strategy.header, decimal or big-endian); ties and copies without the header go to the higher offset; coordinator topics always use offset; takes effect at the partition's next clean"),
    def!("sediment.compaction.strategy.header", "", String, "", None, None, &[],
        "sediment extension: the header whose value ranks the copies of a key under sediment.compaction.strategy=header (required with it)"),
    def!("sediment.compaction.min.segment.garbage.ratio", "", Double, "0", Some(0.0), Some(1.0), &[],
        "sediment extension: a segment of the clean region whose superseded share of records is below this is kept as it is, its superseded records listed beside it (<base>.stale) and removed when the share reaches it, at max.compaction.lag.ms, or when a tombstone of their key expires; 0 (the default) rewrites every segment a clean reaches, as Kafka does; no effect with remote.storage.enable"),
    def!("sediment.tombstone.retention.max.wait.ms", "sediment.tombstone.retention.max.wait.ms", Long, "604800000", Some(0.0), None, &[],
        "sediment extension: the most a tombstone is kept past its delete horizon for a consumer group that has not read it"),
];

/// The topic keys a broker key defaults (all but the two throttled-replica
/// lists, which Kafka sets per topic only).
pub fn broker_defaulted() -> impl Iterator<Item = &'static ConfigDef> {
    LOG_CONFIGS.iter().filter(|d| !d.broker_key.is_empty())
}

/// Look up a key's definition.
pub fn config_def(name: &str) -> Option<&'static ConfigDef> {
    LOG_CONFIGS.iter().find(|d| d.name == name)
}

/// Validate one value for a key.
///
/// # Errors
/// `InvalidConfig` naming the key for an unknown key, a value of the wrong type,
/// out of range or not among the allowed values.
pub fn validate_value(name: &str, value: &str) -> Result<()> {
    let def = config_def(name).ok_or_else(|| invalid(name, "unknown topic config".to_string()))?;
    let value = value.trim();
    if name == "compression.gzip.level" && value == "0" {
        return Err(invalid(name, "0 is not -1 or between 1 and 9".into()));
    }
    let check_range = |v: f64| -> Result<()> {
        if let Some(min) = def.min {
            if v < min {
                return Err(invalid(name, format!("value {value} is below the minimum {min}")));
            }
        }
        if let Some(max) = def.max {
            if v > max {
                return Err(invalid(name, format!("value {value} is above the maximum {max}")));
            }
        }
        Ok(())
    };
    match def.kind {
        ConfigType::Boolean => {
            value
                .parse::<bool>()
                .map_err(|_| invalid(name, format!("{value:?} is not true or false")))?;
        }
        ConfigType::Int => check_range(
            value
                .parse::<i32>()
                .map_err(|_| invalid(name, format!("{value:?} is not a 32-bit integer")))?
                as f64,
        )?,
        ConfigType::Long => check_range(
            value
                .parse::<i64>()
                .map_err(|_| invalid(name, format!("{value:?} is not a 64-bit integer")))?
                as f64,
        )?,
        ConfigType::Double => {
            let v = value
                .parse::<f64>()
                .map_err(|_| invalid(name, format!("{value:?} is not a number")))?;
            if !v.is_finite() {
                return Err(invalid(name, format!("{value:?} is not a finite number")));
            }
            check_range(v)?;
        }
        ConfigType::Password => {}
        ConfigType::String => {
            if !def.one_of.is_empty() && !def.one_of.contains(&value) {
                return Err(invalid(
                    name,
                    format!("{value:?} is not one of {}", def.one_of.join(", ")),
                ));
            }
        }
        ConfigType::List => {
            let items: Vec<&str> =
                value.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
            if name.ends_with(".replication.throttled.replicas") {
                ThrottledReplicas::parse(value).map_err(|reason| invalid(name, reason))?;
            }
            if items.is_empty() && name == "cleanup.policy" {
                return Err(invalid(name, "must name at least one policy".into()));
            }
            for item in items {
                if !def.one_of.is_empty() && !def.one_of.contains(&item) {
                    return Err(invalid(
                        name,
                        format!("{item:?} is not one of {}", def.one_of.join(", ")),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The compaction strategy the resolved keys name; `header` needs a header
/// name (refused at create and alter, so a stored config always resolves).
fn strategy(get: &dyn Fn(&str) -> String) -> Result<CompactionStrategy> {
    let (name, header) =
        (get("sediment.compaction.strategy"), get("sediment.compaction.strategy.header"));
    CompactionStrategy::from_config(&name, &header).ok_or_else(|| {
        invalid(
            "sediment.compaction.strategy.header",
            format!("a header name is required with sediment.compaction.strategy={name}"),
        )
    })
}

fn invalid(key: &str, reason: String) -> LogError {
    LogError::InvalidConfig { key: key.to_string(), reason }
}

/// The replicas of a topic a replication throttle applies to (Kafka's
/// `leader/follower.replication.throttled.replicas`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ThrottledReplicas {
    #[default]
    None,
    /// `*`: every replica of the topic.
    All,
    /// `partitionId:brokerId` pairs.
    Listed(Vec<(i32, i32)>),
}

impl ThrottledReplicas {
    /// Kafka's format: `*`, or `partition:broker` pairs separated by commas
    /// (spaces allowed around them); empty is none.
    ///
    /// # Errors
    /// Kafka's message for anything else.
    pub fn parse(value: &str) -> std::result::Result<Self, String> {
        let items: Vec<&str> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        if items.is_empty() {
            return Ok(Self::None);
        }
        if items == ["*"] {
            return Ok(Self::All);
        }
        let number = |s: &str| -> Option<i32> {
            s.bytes().all(|c| c.is_ascii_digit()).then(|| s.parse().ok())?
        };
        let pair = |item: &str| {
            let (p, b) = item.split_once(':')?;
            Some((number(p)?, number(b)?))
        };
        items.iter().map(|i| pair(i)).collect::<Option<Vec<_>>>().map(Self::Listed).ok_or_else(
            || {
                format!(
                "{value:?} must be the literal '*' or a list of replicas in the following format: \
                 [partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )
            },
        )
    }

    /// Whether the replica of `partition` on broker `broker` is throttled.
    pub fn applies(&self, partition: i32, broker: i32) -> bool {
        match self {
            Self::None => false,
            Self::All => true,
            Self::Listed(pairs) => pairs.contains(&(partition, broker)),
        }
    }
}

/// Where a resolved value came from, as DescribeConfigs reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    TopicOverride,
    BrokerDefault,
    Default,
}

/// The resolved configuration of one topic's logs.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    pub compact: bool,
    pub delete: bool,
    pub compression_type: String,
    pub compression_gzip_level: i32,
    pub compression_lz4_level: i32,
    pub compression_zstd_level: i32,
    pub delete_retention_ms: i64,
    pub file_delete_delay_ms: i64,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub index_interval_bytes: usize,
    pub max_compaction_lag_ms: i64,
    pub max_message_bytes: usize,
    pub message_timestamp_after_max_ms: i64,
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_type: TimestampType,
    pub min_cleanable_dirty_ratio: f64,
    /// In-sync replicas an `acks=all` produce needs (replication).
    pub min_insync_replicas: i32,
    pub min_compaction_lag_ms: i64,
    pub retention_bytes: i64,
    pub retention_ms: i64,
    pub segment_bytes: usize,
    pub segment_index_bytes: usize,
    pub segment_jitter_ms: i64,
    pub segment_ms: i64,
    /// sediment's resurrection guard: wait for consumer groups before
    /// removing a tombstone, at most this long past its horizon.
    pub tombstone_wait_for_groups: bool,
    pub tombstone_max_wait_ms: i64,
    /// Which copy of a key compaction keeps (`sediment.compaction.strategy`).
    pub compaction_strategy: CompactionStrategy,
    /// `sediment.compaction.min.segment.garbage.ratio`: a clean-region
    /// segment whose superseded share is below it is kept (0: off).
    pub min_segment_garbage_ratio: f64,
    /// Closed segments are copied to the object store (`remote.storage.enable`).
    pub remote_storage_enable: bool,
    /// Turning remote storage off deletes the store's copy
    /// (`remote.log.delete.on.disable`); without it, turning off is refused.
    pub remote_log_delete_on_disable: bool,
    /// `local.retention.ms` as set (-2: `retention.ms`); see [`LogConfig::local_retention_ms`].
    pub local_retention_ms_setting: i64,
    /// `local.retention.bytes` as set (-2: `retention.bytes`).
    pub local_retention_bytes_setting: i64,
    /// Replicas whose leader throttles their fetches
    /// (`leader.replication.throttled.replicas`).
    pub leader_throttled_replicas: ThrottledReplicas,
    /// Replicas that throttle their own fetches
    /// (`follower.replication.throttled.replicas`).
    pub follower_throttled_replicas: ThrottledReplicas,
    /// The topic's own overrides, as set by CreateTopics/AlterConfigs.
    pub overrides: BTreeMap<String, String>,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self::resolve(&BTreeMap::new(), BTreeMap::new()).expect("Kafka's defaults are valid")
    }
}

impl LogConfig {
    /// Resolve overrides over broker defaults (both keyed by topic key) over Kafka's defaults.
    ///
    /// # Errors
    /// `InvalidConfig` naming the first bad key.
    pub fn resolve(
        broker_defaults: &BTreeMap<String, String>,
        overrides: BTreeMap<String, String>,
    ) -> Result<Self> {
        for (k, v) in broker_defaults.iter().chain(overrides.iter()) {
            validate_value(k, v)?;
        }
        let get = |name: &str| -> String {
            overrides
                .get(name)
                .or_else(|| broker_defaults.get(name))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|| config_def(name).expect("known key").default.to_string())
        };
        let long = |name: &str| get(name).parse::<i64>().expect("validated");
        let size = |name: &str| get(name).parse::<i64>().expect("validated").max(0) as usize;
        let throttled = |name: &str| ThrottledReplicas::parse(&get(name)).expect("validated");
        let policy = get("cleanup.policy");
        Ok(Self {
            compact: policy.split(',').any(|p| p.trim() == "compact"),
            delete: policy.split(',').any(|p| p.trim() == "delete"),
            compression_type: get("compression.type"),
            compression_gzip_level: long("compression.gzip.level") as i32,
            compression_lz4_level: long("compression.lz4.level") as i32,
            compression_zstd_level: long("compression.zstd.level") as i32,
            delete_retention_ms: long("delete.retention.ms"),
            file_delete_delay_ms: long("file.delete.delay.ms"),
            flush_messages: long("flush.messages"),
            flush_ms: long("flush.ms"),
            index_interval_bytes: size("index.interval.bytes"),
            max_compaction_lag_ms: long("max.compaction.lag.ms"),
            max_message_bytes: size("max.message.bytes"),
            message_timestamp_after_max_ms: long("message.timestamp.after.max.ms"),
            message_timestamp_before_max_ms: long("message.timestamp.before.max.ms"),
            message_timestamp_type: if get("message.timestamp.type") == "LogAppendTime" {
                TimestampType::LogAppendTime
            } else {
                TimestampType::CreateTime
            },
            min_cleanable_dirty_ratio: get("min.cleanable.dirty.ratio").parse().expect("validated"),
            min_compaction_lag_ms: long("min.compaction.lag.ms"),
            min_insync_replicas: long("min.insync.replicas") as i32,
            retention_bytes: long("retention.bytes"),
            retention_ms: long("retention.ms"),
            segment_bytes: size("segment.bytes"),
            segment_index_bytes: size("segment.index.bytes"),
            segment_jitter_ms: long("segment.jitter.ms"),
            segment_ms: long("segment.ms"),
            tombstone_wait_for_groups: get("sediment.tombstone.retention.wait.for.groups")
                == "true",
            tombstone_max_wait_ms: long("sediment.tombstone.retention.max.wait.ms"),
            compaction_strategy: strategy(&get)?,
            min_segment_garbage_ratio: get("sediment.compaction.min.segment.garbage.ratio")
                .parse()
                .expect("validated"),
            remote_storage_enable: get("remote.storage.enable") == "true",
            remote_log_delete_on_disable: get("remote.log.delete.on.disable") == "true",
            local_retention_ms_setting: long("local.retention.ms"),
            local_retention_bytes_setting: long("local.retention.bytes"),
            leader_throttled_replicas: throttled("leader.replication.throttled.replicas"),
            follower_throttled_replicas: throttled("follower.replication.throttled.replicas"),
            overrides,
        })
    }

    /// How long a closed segment the store holds stays on local disk
    /// (Kafka's `localRetentionMs`: `local.retention.ms`, or `retention.ms`
    /// for -2); negative keeps it.
    pub fn local_retention_ms(&self) -> i64 {
        match self.local_retention_ms_setting {
            -2 => self.retention_ms,
            v => v,
        }
    }

    /// The local size above which closed segments the store holds leave
    /// local disk (Kafka's `localRetentionBytes`); negative is unlimited.
    pub fn local_retention_bytes(&self) -> i64 {
        match self.local_retention_bytes_setting {
            -2 => self.retention_bytes,
            v => v,
        }
    }

    /// Kafka's checks of a remote-enabled topic's local retention against
    /// its total retention (`validateRemoteStorageRetentionSize/Time`):
    /// with `retention.*` bounded, `local.retention.*` is -2 or a bound not
    /// above it. Run when a topic is created or altered, not on load, so a
    /// changed broker default never takes a partition offline.
    ///
    /// # Errors
    /// `InvalidConfig` naming the `local.retention.*` key.
    pub fn check_local_retention(&self) -> Result<()> {
        if !self.remote_storage_enable {
            return Ok(());
        }
        let pairs = [
            (
                "local.retention.bytes",
                "retention.bytes",
                self.local_retention_bytes_setting,
                self.retention_bytes,
            ),
            (
                "local.retention.ms",
                "retention.ms",
                self.local_retention_ms_setting,
                self.retention_ms,
            ),
        ];
        for (key, total_key, local, total) in pairs {
            if total == -1 || local == -2 {
                continue;
            }
            if local == -1 {
                return Err(invalid(
                    key,
                    format!("-1 (unlimited) is not allowed while {total_key} is {total}"),
                ));
            }
            if local > total {
                return Err(invalid(key, format!("{local} is more than {total_key} ({total})")));
            }
        }
        Ok(())
    }

    /// The codec and level `compression.type` imposes on appended batches;
    /// `None` for `producer` (batches keep their codec).
    pub fn target_compression(&self) -> Option<(Compression, i32)> {
        let codec = Compression::from_config_name(&self.compression_type)?;
        let level = match codec {
            Compression::Gzip => self.compression_gzip_level,
            Compression::Lz4 => self.compression_lz4_level,
            Compression::Zstd => self.compression_zstd_level,
            Compression::None | Compression::Snappy => 0,
        };
        Some((codec, level))
    }

    /// The effective value of `name` and where it came from.
    pub fn value_of(
        &self,
        name: &str,
        broker_defaults: &BTreeMap<String, String>,
    ) -> Option<(String, ConfigSource)> {
        let def = config_def(name)?;
        Some(if let Some(v) = self.overrides.get(name) {
            (v.clone(), ConfigSource::TopicOverride)
        } else if let Some(v) = broker_defaults.get(name) {
            (v.clone(), ConfigSource::BrokerDefault)
        } else {
            (def.default.to_string(), ConfigSource::Default)
        })
    }

    /// Serialize the overrides as `key=value` lines (the persisted form).
    pub fn overrides_to_properties(&self) -> String {
        self.overrides.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
    }

    /// Parse `key=value` lines written by `overrides_to_properties`.
    pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
        text.lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .filter_map(|l| {
                l.split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<LogConfig> {
        let overrides = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        LogConfig::resolve(&BTreeMap::new(), overrides)
    }

    #[test]
    fn the_compaction_strategy_is_a_topic_key_and_header_needs_a_name() {
        assert_eq!(config(&[]).unwrap().compaction_strategy, CompactionStrategy::Offset);
        let c = config(&[("sediment.compaction.strategy", "timestamp")]).unwrap();
        assert_eq!(c.compaction_strategy, CompactionStrategy::Timestamp);
        let pairs = [
            ("sediment.compaction.strategy", "header"),
            ("sediment.compaction.strategy.header", "version"),
        ];
        let c = config(&pairs).unwrap();
        assert_eq!(c.compaction_strategy, CompactionStrategy::Header("version".into()));
        match config(&[("sediment.compaction.strategy", "header")]) {
            Err(LogError::InvalidConfig { key, .. }) => {
                assert_eq!(key, "sediment.compaction.strategy.header")
            }
            other => panic!("{other:?}"),
        }
        assert!(config(&[("sediment.compaction.strategy", "newest")]).is_err());
        assert!(broker_defaulted().all(|d| !d.name.starts_with("sediment.compaction.strategy")));
    }

    #[test]
    fn the_segment_garbage_ratio_is_a_topic_key_from_0_to_1() {
        let key = "sediment.compaction.min.segment.garbage.ratio";
        assert_eq!(config(&[]).unwrap().min_segment_garbage_ratio, 0.0);
        assert_eq!(config(&[(key, "0.2")]).unwrap().min_segment_garbage_ratio, 0.2);
        assert!(config(&[(key, "1.5")]).is_err());
        assert!(config(&[(key, "-0.1")]).is_err());
        assert!(config(&[(key, "x")]).is_err());
        assert!(broker_defaulted().all(|d| d.name != key));
    }

    #[test]
    fn local_retention_takes_retention_for_minus_two_and_is_bounded_by_it() {
        let c = config(&[("retention.ms", "5000"), ("retention.bytes", "900")]).unwrap();
        assert_eq!((c.local_retention_ms(), c.local_retention_bytes()), (5000, 900));
        let c = config(&[("local.retention.ms", "0"), ("local.retention.bytes", "-1")]).unwrap();
        assert_eq!((c.local_retention_ms(), c.local_retention_bytes()), (0, -1));
        let remote = ("remote.storage.enable", "true");
        for (bad_key, pairs) in [
            (
                "local.retention.ms",
                [remote, ("retention.ms", "5000"), ("local.retention.ms", "6000")],
            ),
            (
                "local.retention.ms",
                [remote, ("retention.ms", "5000"), ("local.retention.ms", "-1")],
            ),
            (
                "local.retention.bytes",
                [remote, ("retention.bytes", "10"), ("local.retention.bytes", "11")],
            ),
        ] {
            match config(&pairs).unwrap().check_local_retention() {
                Err(LogError::InvalidConfig { key, .. }) => assert_eq!(key, bad_key),
                other => panic!("{pairs:?}: {other:?}"),
            }
        }
        // Unbounded total retention, or a local bound within it: accepted.
        for pairs in [
            [remote, ("retention.ms", "-1"), ("local.retention.ms", "-1")],
            [remote, ("retention.ms", "5000"), ("local.retention.ms", "5000")],
            [remote, ("retention.bytes", "-1"), ("local.retention.bytes", "1000000")],
        ] {
            config(&pairs).unwrap().check_local_retention().unwrap();
        }
    }

    #[test]
    fn kafka_defaults() {
        let c = LogConfig::default();
        assert!(c.delete && !c.compact);
        assert_eq!(c.segment_bytes, 1 << 30);
        assert_eq!(c.index_interval_bytes, 4096);
        assert_eq!(c.max_message_bytes, 1048588);
        assert_eq!(c.delete_retention_ms, 86_400_000);
        assert_eq!(c.flush_messages, i64::MAX);
        assert_eq!(c.target_compression(), None, "compression.type=producer");
        let zstd = LogConfig::resolve(
            &[("compression.zstd.level".to_string(), "-7".to_string())].into(),
            [("compression.type".to_string(), "zstd".to_string())].into(),
        )
        .unwrap();
        assert_eq!(zstd.target_compression(), Some((Compression::Zstd, -7)));
        let gzip: BTreeMap<_, _> = [("compression.type".to_string(), "gzip".to_string())].into();
        let gzip = LogConfig::resolve(&BTreeMap::new(), gzip).unwrap();
        assert_eq!(gzip.target_compression(), Some((Compression::Gzip, -1)));
    }

    #[test]
    fn throttled_replicas_take_kafkas_format() {
        let parse = ThrottledReplicas::parse;
        assert_eq!(parse(""), Ok(ThrottledReplicas::None));
        assert_eq!(parse(" * "), Ok(ThrottledReplicas::All));
        let listed = parse("0:1, 1:2 ,0:3").unwrap();
        assert!(listed.applies(0, 1) && listed.applies(1, 2) && listed.applies(0, 3));
        assert!(!listed.applies(1, 1) && !listed.applies(0, 2));
        for bad in ["*,0:1", "0", "0:", ":1", "0 :1", "a:1", "-1:2", "0:1:2", "99999999999:1"] {
            let e = validate_value("leader.replication.throttled.replicas", bad).unwrap_err();
            assert!(e.to_string().contains("[partitionId]:[brokerId]"), "{bad}: {e}");
        }
        let c = config(&[("follower.replication.throttled.replicas", "3:7")]).unwrap();
        assert!(c.follower_throttled_replicas.applies(3, 7));
        assert_eq!(c.leader_throttled_replicas, ThrottledReplicas::None);
    }

    #[test]
    fn overrides_win_and_bad_values_name_the_key() {
        let broker: BTreeMap<_, _> = [("segment.bytes".to_string(), "1000".to_string())].into();
        let over: BTreeMap<_, _> =
            [("cleanup.policy".to_string(), "compact,delete".to_string())].into();
        let c = LogConfig::resolve(&broker, over).unwrap();
        assert!(c.compact && c.delete);
        assert_eq!(c.segment_bytes, 1000);
        assert_eq!(c.value_of("segment.bytes", &broker).unwrap().1, ConfigSource::BrokerDefault);
        for (k, v) in [
            ("cleanup.policy", "shred"),
            ("segment.bytes", "1"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("retention.ms", "soon"),
            ("compression.gzip.level", "0"),
            ("compression.gzip.level", "10"),
            ("compression.lz4.level", "0"),
            ("compression.zstd.level", "23"),
            ("compression.type", "brotli"),
            ("nope", "1"),
            ("local.retention.ms", "-3"),
            ("local.retention.bytes", "-3"),
        ] {
            match LogConfig::resolve(&BTreeMap::new(), [(k.to_string(), v.to_string())].into()) {
                Err(LogError::InvalidConfig { key, .. }) => assert_eq!(key, k),
                other => panic!("{k}={v}: {other:?}"),
            }
        }
    }
}

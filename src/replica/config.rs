//! Replication's keys (Kafka's names and defaults, `ReplicationConfigs`):
//! how followers fetch and when a leader drops a follower from the ISR.

use std::time::Duration;

use super::fetcher::FetcherConfig;
use crate::config_def::{broker_key, ConfigDef, ConfigTable, ConfigValues};

pub const REPLICA_LAG_TIME_MAX_MS: ConfigDef =
    broker_key!("replica.lag.time.max.ms", Long, "30000", Some(1.0),
    "replication: a follower that has not caught up with its leader for this long leaves the ISR");
pub const REPLICA_SOCKET_TIMEOUT_MS: ConfigDef = broker_key!("replica.socket.timeout.ms", Int, "30000", Some(1.0),
    "replication: the longest a follower's fetch request may take (at least replica.fetch.wait.max.ms)");
pub const REPLICA_FETCH_MAX_BYTES: ConfigDef = broker_key!(
    "replica.fetch.max.bytes",
    Int,
    "1048576",
    Some(0.0),
    "replication: bytes a follower fetches per partition per request (at least one batch)"
);
pub const REPLICA_FETCH_MIN_BYTES: ConfigDef = broker_key!(
    "replica.fetch.min.bytes",
    Int,
    "1",
    Some(1.0),
    "replication: bytes a follower's fetch waits for, up to replica.fetch.wait.max.ms"
);
pub const REPLICA_FETCH_WAIT_MAX_MS: ConfigDef = broker_key!(
    "replica.fetch.wait.max.ms",
    Int,
    "500",
    Some(0.0),
    "replication: the longest a follower's fetch waits at its leader for records"
);
pub const REPLICA_FETCH_BACKOFF_MS: ConfigDef = broker_key!(
    "replica.fetch.backoff.ms",
    Int,
    "1000",
    Some(0.0),
    "replication: how long a follower waits after a failed fetch"
);
pub const REPLICA_FETCH_RESPONSE_MAX_BYTES: ConfigDef = broker_key!(
    "replica.fetch.response.max.bytes",
    Int,
    "10485760",
    Some(0.0),
    "replication: bytes of one fetch response to a follower (at least one batch)"
);

pub const NUM_REPLICA_FETCHERS: ConfigDef = broker_key!(
    "num.replica.fetchers",
    Int,
    "1",
    Some(1.0),
    "replication: fetcher threads per leader this broker follows; a partition's thread is Kafka's (31 * topic hash + partition) mod this"
);

/// Replication's keys, as the template and the reference show them.
pub const REPLICATION_CONFIGS: ConfigTable = ConfigTable {
    title: "Replication",
    note: "Used in a cluster (sediment.cluster.etcd.endpoints), by followers and leaders.",
    keys: &[
        &REPLICA_LAG_TIME_MAX_MS,
        &REPLICA_SOCKET_TIMEOUT_MS,
        &REPLICA_FETCH_MAX_BYTES,
        &REPLICA_FETCH_MIN_BYTES,
        &REPLICA_FETCH_WAIT_MAX_MS,
        &REPLICA_FETCH_BACKOFF_MS,
        &REPLICA_FETCH_RESPONSE_MAX_BYTES,
        &NUM_REPLICA_FETCHERS,
        &super::replica_selector::REPLICA_SELECTOR_CLASS,
        &super::replication_quota::LEADER_REPLICATION_THROTTLED_RATE,
        &super::replication_quota::FOLLOWER_REPLICATION_THROTTLED_RATE,
        &super::replication_quota::REPLICATION_QUOTA_WINDOW_NUM,
        &super::replication_quota::REPLICATION_QUOTA_WINDOW_SIZE_SECONDS,
    ],
};

impl FetcherConfig {
    /// The fetchers' settings of `values`.
    pub fn from_values(values: &dyn ConfigValues) -> Self {
        let ms = |def: &ConfigDef| Duration::from_millis(values.int(def).max(0) as u64);
        Self {
            max_wait_ms: values.int(&REPLICA_FETCH_WAIT_MAX_MS) as i32,
            min_bytes: values.int(&REPLICA_FETCH_MIN_BYTES) as i32,
            response_max_bytes: values.int(&REPLICA_FETCH_RESPONSE_MAX_BYTES) as i32,
            partition_max_bytes: values.int(&REPLICA_FETCH_MAX_BYTES) as i32,
            backoff: ms(&REPLICA_FETCH_BACKOFF_MS),
            socket_timeout: ms(&REPLICA_SOCKET_TIMEOUT_MS),
            num_fetchers: values.int(&NUM_REPLICA_FETCHERS).max(1) as usize,
        }
    }
}

/// `replica.lag.time.max.ms` of `values`.
pub fn replica_lag_time_max(values: &dyn ConfigValues) -> Duration {
    Duration::from_millis(values.int(&REPLICA_LAG_TIME_MAX_MS).max(1) as u64)
}

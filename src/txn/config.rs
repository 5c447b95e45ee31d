//! The transaction coordinator's broker keys (`transaction.*`, Kafka's
//! `TransactionStateManagerConfig` and `TransactionLogConfig`) and the
//! settings built from them.

use super::transaction_version::TransactionVersion;
use crate::config_def::{broker_key, ConfigDef, ConfigTable, ConfigValues};

pub const TRANSACTION_STATE_LOG_NUM_PARTITIONS: ConfigDef = broker_key!(
    "transaction.state.log.num.partitions",
    Int,
    "50",
    Some(1.0),
    "partitions of __transaction_state (fixed once the topic exists)"
);
pub const TRANSACTION_STATE_LOG_SEGMENT_BYTES: ConfigDef = broker_key!(
    "transaction.state.log.segment.bytes",
    Int,
    "104857600",
    Some(1.0),
    "segment.bytes of __transaction_state"
);
pub const TRANSACTION_STATE_LOG_REPLICATION_FACTOR: ConfigDef = broker_key!(
    "transaction.state.log.replication.factor",
    Int,
    "3",
    Some(1.0),
    "replication factor of __transaction_state in a cluster (a single node keeps one copy)"
);
pub const TRANSACTION_STATE_LOG_MIN_ISR: ConfigDef = broker_key!(
    "transaction.state.log.min.isr",
    Int,
    "2",
    Some(1.0),
    "min.insync.replicas of __transaction_state in a cluster (at most its replication factor)"
);
pub const TRANSACTION_MAX_TIMEOUT_MS: ConfigDef = broker_key!(
    "transaction.max.timeout.ms",
    Int,
    "900000",
    Some(1.0),
    "largest transaction.timeout.ms a producer may ask for"
);
pub const TRANSACTIONAL_ID_EXPIRATION_MS: ConfigDef = broker_key!(
    "transactional.id.expiration.ms",
    Int,
    "604800000",
    Some(1.0),
    "how long a transactional id with no transaction is kept after its last update"
);
pub const TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS: ConfigDef = broker_key!(
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    Int,
    "10000",
    Some(1.0),
    "how often transactions past their timeout are looked for and aborted"
);
pub const TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS: ConfigDef = broker_key!(
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    Int,
    "3600000",
    Some(1.0),
    "how often expired transactional ids are looked for and removed"
);
pub const TRANSACTION_PARTITION_VERIFICATION_ENABLE: ConfigDef = broker_key!("transaction.partition.verification.enable", Boolean, "true", None,
    "check with the transaction coordinator that a partition is in the transaction before a transactional Produce or TxnOffsetCommit opens one there");

/// The `transaction.version` feature level this broker finalizes (Kafka sets
/// it cluster-wide with `kafka-features`; here every broker of a cluster must
/// have the same value).
pub const SEDIMENT_TRANSACTION_VERSION: ConfigDef = ConfigDef {
    max: Some(2.0),
    ..broker_key!("sediment.transaction.version", Int, "2", Some(0.0),
        "sediment: the transaction.version feature level advertised to clients: 2 (Kafka 4.x's default) has Java clients 4.0+ run transactions v2 (KIP-890: an epoch bump per transaction, partitions added by the broker); 0 keeps every client on the first protocol. Requests of either protocol are served whatever the level")
};

/// The coordinator's keys, as the template and the reference show them.
pub const TXN_CONFIGS: ConfigTable = ConfigTable {
    title: "Transactions",
    note: "",
    keys: &[
        &TRANSACTION_STATE_LOG_NUM_PARTITIONS,
        &TRANSACTION_STATE_LOG_SEGMENT_BYTES,
        &TRANSACTION_STATE_LOG_REPLICATION_FACTOR,
        &TRANSACTION_STATE_LOG_MIN_ISR,
        &TRANSACTION_MAX_TIMEOUT_MS,
        &TRANSACTIONAL_ID_EXPIRATION_MS,
        &TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS,
        &TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS,
        &TRANSACTION_PARTITION_VERIFICATION_ENABLE,
        &SEDIMENT_TRANSACTION_VERSION,
    ],
};

/// The transaction coordinator's settings, with Kafka's defaults
/// (Kafka's `TransactionConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionConfig {
    /// `transaction.state.log.num.partitions`: partitions of the topic when it
    /// is created.
    pub transaction_log_num_partitions: i32,
    /// `transaction.state.log.segment.bytes`.
    pub transaction_log_segment_bytes: i64,
    /// `transaction.state.log.replication.factor` (in a cluster).
    pub transaction_log_replication_factor: i32,
    /// `transaction.state.log.min.isr` (in a cluster).
    pub transaction_log_min_isr: i32,
    /// `transaction.max.timeout.ms`: the largest timeout a producer may ask for.
    pub transaction_max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: how long an id without a transaction
    /// is kept after its last update.
    pub transactional_id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_timed_out_transactions_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub remove_expired_transactional_ids_interval_ms: i64,
    /// `sediment.transaction.version`: the finalized `transaction.version`,
    /// also the level the coordinator's own aborts are written with.
    pub transaction_version: TransactionVersion,
}

impl Default for TransactionConfig {
    fn default() -> Self {
        Self {
            transaction_log_num_partitions: 50,
            transaction_log_segment_bytes: 104_857_600,
            transaction_log_replication_factor: 3,
            transaction_log_min_isr: 2,
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
            abort_timed_out_transactions_interval_ms: 10_000,
            remove_expired_transactional_ids_interval_ms: 3_600_000,
            transaction_version: TransactionVersion::LATEST,
        }
    }
}

impl TransactionConfig {
    /// The settings of `values`.
    pub fn from_values(values: &dyn ConfigValues) -> Self {
        Self {
            transaction_log_num_partitions: values.int(&TRANSACTION_STATE_LOG_NUM_PARTITIONS)
                as i32,
            transaction_log_segment_bytes: values.int(&TRANSACTION_STATE_LOG_SEGMENT_BYTES),
            transaction_log_replication_factor: values
                .int(&TRANSACTION_STATE_LOG_REPLICATION_FACTOR)
                as i32,
            transaction_log_min_isr: values.int(&TRANSACTION_STATE_LOG_MIN_ISR) as i32,
            transaction_max_timeout_ms: values.int(&TRANSACTION_MAX_TIMEOUT_MS) as i32,
            transactional_id_expiration_ms: values.int(&TRANSACTIONAL_ID_EXPIRATION_MS),
            abort_timed_out_transactions_interval_ms: values
                .int(&TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS),
            remove_expired_transactional_ids_interval_ms: values
                .int(&TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS),
            transaction_version: TransactionVersion(
                values.int(&SEDIMENT_TRANSACTION_VERSION).clamp(0, 2) as i16,
            ),
        }
    }
}

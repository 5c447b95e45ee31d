//! Errors of the storage layer. They carry the file, position or partition they
//! concern; `api/` maps them to Kafka error codes, nothing here knows those codes.
//!
//! This module imports nothing else from `log/`: every other module may use
//! it, so the errors of one (say `ProducerError` of the producer state) are
//! defined here rather than next to the code that raises them.

use std::path::PathBuf;

/// A record batch failed validation. Returned for bytes a producer sent and for
/// bytes read back from disk alike; the caller knows which it was.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("record batch truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("record batch length {0} is invalid")]
    InvalidLength(i64),
    #[error("record batch of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    #[error("unsupported record batch magic {0} (only v2 is accepted)")]
    UnsupportedMagic(i8),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("unknown compression codec {0}")]
    UnknownCompression(u8),
    #[error("decompression failed: {0}")]
    Decompression(String),
    /// Records that inflate past what the broker inflates for one batch
    /// (a multiple of `max.message.bytes`).
    #[error("{codec} records inflate past the limit of {limit} bytes")]
    InflatesPastLimit { codec: &'static str, limit: usize },
    #[error("corrupt record: {0}")]
    CorruptRecord(String),
    /// A record that is well formed but not allowed here (Kafka's InvalidRecordException).
    #[error("invalid record at index {index}: {reason}")]
    InvalidRecord { index: usize, reason: String },
    /// A batch that is well formed but not allowed here.
    #[error("invalid record batch: {0}")]
    InvalidBatch(String),
    #[error("record timestamp {timestamp} is outside the accepted range: {reason}")]
    InvalidTimestamp { timestamp: i64, reason: String },
}

/// A producer's batch or a transaction marker was refused (raised by `ProducerStateManager`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    #[error("producer {producer_id} epoch {epoch} is older than the current epoch {current}")]
    InvalidProducerEpoch { producer_id: i64, epoch: i16, current: i16 },
    #[error("producer {producer_id}: out of order sequence {first_seq} (epoch {epoch}), expected {expected}")]
    OutOfOrderSequence { producer_id: i64, epoch: i16, first_seq: i32, expected: i64 },
    #[error("producer {producer_id}: invalid base sequence {first_seq}")]
    InvalidSequence { producer_id: i64, first_seq: i32 },
    /// A non-transactional batch while the producer's transaction is open here.
    #[error("producer {producer_id}: non-transactional batch at offset {offset} while its transaction from offset {txn_first_offset} is open")]
    InvalidTxnState { producer_id: i64, offset: i64, txn_first_offset: i64 },
    /// A transactional batch that would open a transaction without a
    /// verification that still holds (a marker ended the transaction it was
    /// verified against, or it was never verified).
    #[error("producer {producer_id}: transactional batch is not part of an ongoing transaction")]
    UnverifiedTransaction { producer_id: i64 },
    /// A marker from a coordinator older than the one of the producer's last marker.
    #[error("producer {producer_id}: marker of coordinator epoch {coordinator_epoch} after one of epoch {current}")]
    TransactionCoordinatorFenced { producer_id: i64, coordinator_epoch: i32, current: i32 },
}

/// Errors of `Log`, `LogSegment`, the indexes and `LogManager`.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Batch(#[from] BatchError),
    #[error("{0}")]
    Producer(#[from] ProducerError),
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange { offset: i64, log_start: i64, log_end: i64 },
    #[error("corrupt data in {path} at position {position}: {reason}")]
    Corrupt { path: PathBuf, position: u64, reason: String },
    #[error("corrupt index {path}: {reason}")]
    CorruptIndex { path: PathBuf, reason: String },
    #[error("partition {partition} is offline: {reason}")]
    Offline { partition: String, reason: String },
    #[error("invalid config {key}: {reason}")]
    InvalidConfig { key: String, reason: String },
    #[error("topic {0} already exists")]
    TopicExists(String),
    #[error("unknown topic or partition {0}")]
    UnknownTopicOrPartition(String),
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopic { name: String, reason: String },
    #[error("log {0} has been deleted")]
    Deleted(String),
    /// A leader epoch older than one the log already holds.
    #[error("leader epoch {epoch} is older than the log's latest epoch {latest}")]
    StaleLeaderEpoch { epoch: i32, latest: i32 },
    /// The cleaner's swap found the log changed under it; nothing was renamed.
    #[error("cannot replace segments of {partition}: {reason}")]
    SwapConflict { partition: String, reason: String },
}

impl LogError {
    /// Wrap an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> LogError {
        let path = path.into();
        move |source| LogError::Io { path, source }
    }
}

pub type Result<T, E = LogError> = std::result::Result<T, E>;

//! The storage layer: partitions on disk in Apache Kafka's own format.
//!
//! A partition is a directory `<topic>-<partition>` holding segments named by
//! base offset; each segment is a `.log` file of RecordBatch v2 batches plus a
//! sparse `.index` (offset → position) and `.timeindex` (timestamp → offset).
//! Apache Kafka's `kafka-dump-log` reads what this layer writes.
//!
//! Guarantees:
//! * An append is validated as a whole (framing, CRC, counts, sizes, keys on
//!   compacted topics) before any byte is written; offsets are assigned by
//!   rewriting the base offset in place, which the CRC does not cover.
//! * Reads return whole batches as they are on disk, from the batch holding the
//!   requested offset or, across compaction gaps, the next offset present.
//! * Everything below a log's recovery point has been fsynced. On start the
//!   unflushed tail is scanned and a torn or corrupt end is truncated; damage
//!   below the recovery point takes the partition offline with the file and
//!   position in the error, never silently.
//! * The cleaner's leftovers (`.cleaned`, `.swap`, `.deleted`) are settled by
//!   Kafka's rules before a log opens.
//!
//! No network code lives here, and nothing here needs an async runtime.

pub mod batch_reader;
pub mod checkpoint;
pub mod compression;
pub mod config;
pub mod error;
pub mod index;
pub mod local_log;
pub mod manager;
pub mod producer_state;
pub mod record_batch;
pub mod segment;
pub mod validator;

pub use config::LogConfig;
pub use error::{BatchError, LogError};
pub use local_log::{
    FetchDataInfo, FetchRegionInfo, LoadParams, Log, LogAppendInfo, SegmentSnapshot, SwapOutcome,
    SwapStep, TopicPartition,
};
pub use manager::{LogManager, LogManagerConfig, TopicInfo};

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
//!
//! The modules form an acyclic graph; each uses only modules listed before it
//! (and `crate::clock`):
//!
//! 1. `error`: the layer's error types; imports nothing from `log/`.
//! 2. `topic_partition`: a partition's name and directory.
//! 3. `compression` (error): the four codecs, bounded decompression.
//! 4. `record_batch` (compression, error): RecordBatch v2, records in place.
//! 5. `producer_state` (error, record_batch): idempotent producers' sequences.
//! 6. `config` (error, record_batch): per-topic settings.
//! 7. `validator` (error, record_batch): what an append accepts.
//! 8. `index` (error): the offset and time indexes.
//! 9. `segment` (error, index, record_batch): one `.log` file and its indexes.
//! 10. `checkpoint` (error, topic_partition): offset checkpoint files.
//! 11. `log_loader` (error, producer_state, segment, topic_partition): opening
//!     a partition directory and recovering it after a crash.
//! 12. `local_log` (config, error, log_loader, producer_state, record_batch,
//!     segment, topic_partition, validator): `Log`, append, read, roll, retention.
//! 13. `replace_segments` (error, local_log, segment): the cleaner's crash-safe swap.
//! 14. `manager` (checkpoint, config, error, local_log, log_loader,
//!     topic_partition): `LogManager`, every partition of the broker.

pub mod batch_reader;
pub mod checkpoint;
pub mod compression;
pub mod config;
pub mod disk;
pub mod error;
pub mod index;
pub mod local_log;
pub mod log_loader;
pub mod manager;
pub mod meta_properties;
pub mod producer_id_manager;
pub mod producer_state;
pub mod record_batch;
pub mod replace_segments;
pub mod segment;
pub mod topic_partition;
pub mod validator;

pub use config::LogConfig;
pub use error::{BatchError, LogError, ProducerError};
pub use local_log::{FetchDataInfo, FetchRegionInfo, Log, LogAppendInfo};
pub use log_loader::LoadParams;
pub use manager::{LogManager, LogManagerConfig, TopicInfo};
pub use replace_segments::{SegmentSnapshot, SwapOutcome, SwapStep};
pub use topic_partition::TopicPartition;

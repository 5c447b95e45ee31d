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
//! # Locks
//!
//! One policy for the whole broker: every lock is a `parking_lot` lock, which
//! cannot be poisoned. A panic while a lock is held is a bug; it shows where it
//! happens (a cleaner thread that dies is counted in `DeadThreadCount`, a
//! request task that panics loses its connection, both logged), and everyone
//! else keeps using the lock. So no request is refused, and no partition drops
//! out of cleaning or out of `cleaner-status`, because some other thread once
//! panicked. Critical sections are short, check before they mutate, and never
//! span an `.await` (the guards are not `Send`, so the compiler enforces it).
//! Where two locks are held at once, the outer one is a `LogManager` map or
//! the cleaner manager's state and the inner one a partition's `Log`, never
//! the reverse.
//!
//! # Modules
//!
//! The modules form an acyclic graph; each uses only modules listed before it
//! (and `crate::clock`):
//!
//! 1. `error`: the layer's error types; imports nothing from `log/`.
//! 2. `topic_partition`: a partition's name and directory.
//! 3. `disk`: size and free space of the file system holding a log dir.
//! 4. `compression` (error): the four codecs, bounded decompression.
//! 5. `record_batch` (compression, error): RecordBatch v2, records in place.
//! 6. `batch_reader` (error, record_batch): the one reader of batches from a
//!    file: framing, size limits and CRC checked, a caller-owned buffer, a hook
//!    per chunk (the cleaner's throttle and cancellation).
//! 7. `producer_state` (error, record_batch): idempotent producers' sequences.
//! 8. `config` (error, record_batch): per-topic settings.
//! 9. `validator` (error, record_batch): what an append accepts.
//! 10. `index` (error): the offset and time indexes.
//! 11. `segment` (batch_reader, error, index, record_batch): one `.log` file
//!     and its indexes.
//! 12. `checkpoint` (error, topic_partition): offset checkpoint files and the
//!     atomic write every small file of a log dir uses.
//! 13. `log_loader` (error, producer_state, segment, topic_partition): opening
//!     a partition directory and recovering it after a crash.
//! 14. `local_log` (config, error, log_loader, producer_state, record_batch,
//!     segment, topic_partition, validator): `Log`, append, read, roll, retention.
//! 15. `replace_segments` (error, local_log, segment): the cleaner's crash-safe swap.
//! 16. `coordinator_loader` (error, local_log, record_batch): reading a
//!     coordinator's compacted topic back at start, unreadable data reported.
//! 17. `manager` (checkpoint, config, error, local_log, log_loader,
//!     topic_partition): `LogManager`, every partition of the broker.
//! 18. `producer_id_manager` (checkpoint, error): producer id blocks on disk.
//! 19. `meta_properties` (checkpoint, error, manager): `meta.properties`.

pub mod batch_reader;
pub mod checkpoint;
pub mod compression;
pub mod config;
pub mod coordinator_loader;
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

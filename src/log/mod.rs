//! The storage layer: partitions on disk in Apache Kafka's own format.
//!
//! A partition is a directory `<topic>-<partition>` holding segments named by
//! base offset; each segment is a `.log` file of RecordBatch v2 batches plus a
//! sparse `.index` (offset → position) and `.timeindex` (timestamp → offset),
//! and, once an aborted transaction's marker lands in it, a `.txnindex`.
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
//! * Transactions: the producer state tracks each producer's open
//!   transaction; the last stable offset (LSO) is the first offset of the
//!   earliest open transaction, or the high watermark when none is open.
//!   Markers are appended by the broker itself (origin `Coordinator`), never
//!   accepted from a client.
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
//! 4. `dir_failure` (error): which log dirs failed, as their logs report
//!    it (`LogDirFailureChannel`).
//! 5. `compression` (error): the four codecs, bounded decompression.
//! 6. `record_batch` (compression, error): RecordBatch v2, records in place.
//! 7. `batch_reader` (error, record_batch): the one reader of batches from a
//!    file: framing, size limits and CRC checked, a caller-owned buffer, a hook
//!    per chunk (the cleaner's throttle and cancellation).
//! 8. `control_record` (compression, error, record_batch): transaction
//!    markers, the 78-byte control batch.
//! 9. `producer_append_info` (control_record, error, record_batch): one
//!    append's checks per producer, `AppendOrigin`.
//! 10. `producer_state` (error, producer_append_info): producers' sequences,
//!     open transactions, the first unstable offset.
//! 11. `config` (error, record_batch): per-topic settings.
//! 12. `validator` (control_record, error, producer_append_info, record_batch):
//!     what an append accepts.
//! 13. `index` (error): the offset and time indexes.
//! 14. `transaction_index` (error): the `.txnindex` of aborted transactions.
//! 15. `log_file_utils`: the names of a partition directory's files.
//! 16. `file_region`: batches of a segment file a fetch sends unread.
//! 17. `segment` (batch_reader, dir_failure, error, file_region, index,
//!     log_file_utils, record_batch, transaction_index): one `.log` file and
//!     its indexes.
//! 18. `checkpoint` (error, topic_partition): offset checkpoint files and the
//!     atomic write every small file of a log dir uses.
//! 19. `leader_epoch_cache` (checkpoint, error): the partition's leader
//!     epochs and where each began, `leader-epoch-checkpoint`.
//! 20. `log_loader` (control_record, error, log_file_utils, producer_state,
//!     leader_epoch_cache, segment, topic_partition, transaction_index): opening a partition
//!     directory, recovering it after a crash, replaying the producer state.
//! 21. `unified_log` (checkpoint, config, control_record, dir_failure, error,
//!     leader_epoch_cache, log_loader, producer_state, record_batch, segment, topic_partition,
//!     transaction_index, validator):
//!     `Log` (Kafka's `UnifiedLog` and `LocalLog` in one type): append, roll,
//!     the LSO. Its other concepts are its children, each an `impl Log` over
//!     the same type: `flush` (fsyncs, in place or deferred past the lock),
//!     `read` (Fetch and ListOffsets by isolation level),
//!     `retention` (retention, local retention below the store's highest
//!     offset, DeleteRecords), `store_retention` and `replace_segments` (the
//!     cleaner's crash-safe swap).
//! 22. `coordinator_loader` (error, unified_log, record_batch): reading a
//!     coordinator's compacted topic back at start, unreadable data reported.
//! 23. `manager` (checkpoint, config, dir_failure, error, unified_log,
//!     log_loader, topic_partition): `LogManager`, every partition of the
//!     broker; a failed log dir's partitions go offline.
//! 24. `producer_id_manager` (checkpoint, error): producer id blocks on disk.
//! 25. `meta_properties` (checkpoint, error, manager): `meta.properties`.

pub mod batch_reader;
pub mod checkpoint;
pub mod compaction_strategy;
pub mod compression;
pub mod config;
pub mod control_record;
pub mod coordinator_loader;
pub mod dir_failure;
pub mod dir_lock;
pub mod disk;
pub mod error;
pub mod file_region;
pub mod index;
pub mod leader_epoch_cache;
pub mod log_file_utils;
pub mod log_loader;
pub mod manager;
pub mod manager_config;
pub mod meta_properties;
pub mod producer_append_info;
pub mod producer_id_manager;
pub mod producer_snapshot;
pub mod producer_state;
pub mod record_batch;
pub mod segment;
pub mod topic_partition;
pub mod transaction_index;
pub mod unified_log;
pub mod validator;

pub use config::LogConfig;
pub use error::{BatchError, LogError, ProducerError};
pub use log_loader::LoadParams;
pub use manager::{LogManager, TopicInfo};
pub use manager_config::LogManagerConfig;
pub use topic_partition::TopicPartition;
pub use unified_log::replace_segments::{SegmentSnapshot, SwapOutcome, SwapStep};
pub use unified_log::{
    FetchDataInfo, FetchIsolation, FetchRegionInfo, Log, LogAppendInfo, StoreSegment,
};

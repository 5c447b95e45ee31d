//! Log compaction: the cleaner keeps, for every key of a compacted partition,
//! at least its newest record, and removes older ones in the background.
//!
//! # Regions
//!
//! A partition log, oldest to newest:
//!
//! ```text
//! log start        first dirty offset        first uncleanable offset     log end
//!     | clean region     |   dirty region          |   uncleanable region     |
//!     | one record/key   |   keys may repeat       |   active segment, plus   |
//!     | (cleaned before) |   (closed segments)     |   min.compaction.lag.ms  |
//!     |                  |                         |   and open transactions  |
//! ```
//!
//! The first dirty offset is the partition's entry in the log dir's
//! `cleaner-offset-checkpoint` ([`CleanerOffsetCheckpoint`]). The first
//! uncleanable offset is the smallest of the active segment's base, the first
//! unstable offset and the first segment younger than `min.compaction.lag.ms`
//! ([`cleanable_offsets`]). Nothing at or past it is read for the map or
//! changed. When the first unstable offset is what sets it,
//! [`LogToClean::open_transaction`] names the oldest open transaction's
//! producer id, first offset and age, and `cleaner-status` says so
//! ([`Ineligible::OpenTransaction`] when nothing else is cleanable), with
//! the transactional id, which the log does not know: the manager asks the
//! [`ProducerIdResolver`] the broker gave it (the transaction coordinator).
//!
//! # One clean ([`Cleaner::clean`])
//!
//! 1. **Map.** Walk the dirty region batch by batch and record, for each key,
//!    the offset of its newest record in the [`OffsetMap`] (16-byte MD5 of the
//!    key + 8-byte offset per entry, at most `floor(budget / 24 × load factor)`
//!    keys). Stop before the first batch whose new keys would overfill the map:
//!    the mapped range `[first dirty, end)` always ends at a batch boundary, so
//!    even one segment holding more keys than the map makes progress. `end` is
//!    the new checkpoint. Control batches and aborted transactions' records are
//!    not mapped; nothing at or past the first unstable offset is (an open
//!    transaction may still abort).
//! 2. **Recopy.** Every segment from the log start through the one holding
//!    `end - 1` is rewritten, in groups of adjacent segments whose combined
//!    size stays under `segment.bytes` and whose indexes stay under
//!    `segment.index.bytes` (small cleaned segments merge). The clean region
//!    is re-read too: a dirty record may supersede a clean one. A group the
//!    clean does not change is kept as it is (see "Kept groups" below).
//! 3. **Filter, per batch.** A record is kept if its offset is past the
//!    mapped range, or it has a key and its offset is at least the map's offset
//!    for that key. Key-less records are dropped and counted (a compacted
//!    topic cannot say which is newest; the broker refuses them on append).
//!    Whether a record of the mapped range is its key's newest is read from
//!    one bit per offset set from the map (`newest_offsets.rs`), not by
//!    hashing its key again, when the budget leaves room for the bits.
//!    A record the bits do not cover (the clean region) is looked up in the
//!    map; a batch's keys are fingerprinted together and their slots
//!    prefetched before the lookups, as the map pass does for its inserts.
//!    A run of plain batches none of whose records is its key's newest is
//!    dropped without being read again: the map pass recorded where each
//!    batch is (`mapped_batches.rs`), so a first clean of a log with many
//!    versions per key reads most of it once.
//!    A batch whose records all stay is copied byte for byte; otherwise the
//!    survivors are written into a new batch that keeps the base offset, last
//!    offset delta, producer id/epoch/base sequence, each record's offset
//!    delta and timestamp, and the codec (recompressed). A producer's last
//!    data batch stays even when empty, so its sequence state survives
//!    (step 5).
//! 4. **Tombstones** (a key with a null value; an empty value is a value).
//!    The first clean that keeps a tombstone stamps the batch's delete horizon,
//!    `now + delete.retention.ms`, as KIP-534 does: attribute bit 0x40, horizon
//!    in the base timestamp field, every record's timestamp delta rewritten
//!    against the new base so its timestamp is unchanged; the max timestamp is
//!    unchanged. A later clean at or past the horizon drops the tombstone.
//!    Consumers therefore have at least `delete.retention.ms` after the first
//!    clean to see every deletion.
//! 5. **Transactions** ([`transactions`], Kafka's `CleanedTransactionMetadata`).
//!    The aborted transactions are the `.txnindex` entries of the log read
//!    with the segments. A data batch of an aborted transaction is not mapped
//!    and loses all its records whatever their keys; committed transactional
//!    data is deduplicated like plain data. A marker (control batch) is
//!    *needed* while a batch of its transaction was seen earlier in this
//!    clean (an aborted one's batches count although dropped); the first
//!    clean in which it is not needed stamps its delete horizon (as a
//!    tombstone's), and a clean at or past it drops it, so a reader has
//!    `delete.retention.ms` after the data went. A marker emptied before is
//!    never needed. The cleaned segment's `.txnindex` receives, unchanged,
//!    the entry of each ABORT marker kept because its batches were seen; the
//!    other entries of the group go with the data they described.
//!    A producer's last records stay, emptied if nothing else of them does
//!    (Kafka's `lastRecordsOfActiveProducers`, from the producer state): the
//!    batch holding its last cached data offset, or, with none cached, its
//!    marker of the current epoch.
//!    Batches at or past the first uncleanable offset (never past the first
//!    unstable offset) that share a segment with cleaned ones are copied
//!    unchanged.
//! 6. **Swap**, per group, crash-safe at every step ([`Log::replace_segments`]):
//!    write `<base>.log.cleaned` and its indexes (writeback started every
//!    8 MiB behind the writes, so the fsync waits for the tail), fsync;
//!    rename to `.swap` (descending offsets); fsync the directory; rename
//!    the replaced segments to `.deleted`; strip `.swap`; fsync the
//!    directory; unlink `.deleted` after `file.delete.delay.ms`. `Log::open` completes or rolls back an
//!    interrupted swap from the suffixes alone. A kept group has no swap.
//!
//! # Kept groups
//!
//! A group is *unchanged* when every batch of it is forwarded byte for byte
//! (or rewritten into exactly its own bytes), so nothing is dropped, no
//! delete horizon is stamped and no batch is rewritten, and the `.txnindex`
//! entries a cleaned segment would get are exactly the group's own. Its
//! cleaned output would equal its segments' bytes, so they are kept as they
//! are: same files, inodes, bytes and mtimes, with their own indexes, which
//! are valid for those bytes (Kafka's DumpLogSegments agrees with them as it
//! did when they were written). The group is read once and nothing is
//! written: the `.cleaned` segment is created only at the group's first
//! change, starting with a copy of the batches forwarded before it
//! (`group_writer.rs`), so an unchanged group never has a `.cleaned` or
//! `.swap` file and adds no step to the crash protocol (a crash while a
//! changed group copies its prefix is a crash in swap step 1). A kept group
//! of several small segments is not merged: they stay separate files until
//! a clean changes something in their group, which then merges them as
//! usual. The [`CleanerStats`] count kept segments (`segments_kept`): they
//! are read (`bytes_read`) and not written, which `cleaner-recopy-percent`
//! (written per byte read) shows.
//!
//! # Kept segments under the garbage ratio
//!
//! With `sediment.compaction.min.segment.garbage.ratio` set, a survey of
//! the clean region (`garbage_survey.rs`) runs between steps 1 and 2: a
//! segment wholly below the first dirty offset whose superseded share is
//! below the ratio is not recopied at all; its superseded copies are listed
//! in its `<base>.stale` file (`stale_list.rs`), and groups are formed from
//! the other segments only, never across a kept one. A later rewrite of the
//! segment drops what the list names, and an expired tombstone stays while
//! a list names its key. So the invariant "at most one record per key below
//! `end`" becomes: at most one record per key that no list names.
//!
//! # Invariants
//!
//! * Offsets never change and order is kept: a record is kept or dropped,
//!   never moved or renumbered; the log end offset is untouched (the active
//!   segment is never cleaned).
//! * For every key, the plain or committed record with the highest offset is
//!   never removed (except a tombstone past its horizon), and after a clean
//!   the range below `end` holds at most one record per key that no stale
//!   list names (every record, with the ratio off). No record of an
//!   aborted transaction survives a clean that reaches it, and no aborted
//!   record left in the log loses its `.txnindex` entry.
//! * Nothing at or past the first unstable offset is changed.
//! * Every batch written has a valid CRC and spans the same offsets as the
//!   batch it replaces.
//! * A group that a clean does not change keeps its files untouched; every
//!   group it changes is replaced whole by one cleaned segment.
//! * The output of a group always reaches into the group's last segment (an
//!   empty "offset fence" batch if nothing else survives from it), so recovery
//!   from a `.swap`, which replaces the segments inside the swap's offsets,
//!   replaces the whole group.
//! * Memory is bounded by configuration: the map's budget (which also holds
//!   the newest-offset bits and the map pass's record of the batches, each
//!   only while it fits beside the map), plus read and write
//!   buffers that start at `io_buffer_size`, grow to at most the largest
//!   allowed batch when one batch needs it, and shrink back afterwards.
//! * Cancellation is checked before every chunk read and written; an aborted
//!   clean deletes its `.cleaned` output and changes nothing else.
//! * All I/O (read and write bytes) goes through the shared [`Throttler`].
//!   Each segment read keeps the kernel reading up to 64 MiB ahead
//!   (`POSIX_FADV_WILLNEED`), so a cold log streams from disk while the
//!   clean computes; those bytes are only in the page cache.
//! * Every batch a clean reads has its CRC checked at least once in that
//!   clean: the map pass checks the mapped range; the recopy checks every
//!   other batch, and a mapped one again only before dropping or
//!   re-encoding it (never a fresh CRC over bytes not checked in this
//!   clean). A batch forwarded byte for byte keeps its own CRC.
//!
//! # Running it
//!
//! Policy, mechanism and loop are separate types:
//!
//! * **Policy.** The [`LogCleanerManager`] (`manager.rs`) keeps, under one
//!   lock, its state (`manager_state.rs`): each partition's
//!   [`LogCleaningState`] (`cleaning_state.rs`), the checkpoints and the last
//!   cleans ([`LastClean`], `last_clean.rs`). It measures every compacted log
//!   as a [`LogToClean`] (`log_to_clean.rs`), judges it by the eligibility
//!   rules (`eligibility.rs`, written once, over that state) and hands the
//!   filthiest eligible one, by [`LogToClean::cleanable_ratio`], to a thread.
//!   [`ManagerStatus`] (`status.rs`, built in `manager_status.rs`) shows the
//!   same judgement, with the [`Ineligible`] reason.
//! * **Mechanism.** [`Cleaner::clean`] (`cleaner.rs`) drives one clean and
//!   swaps each group in; it lends its buffers (`buffers.rs`: the offset map
//!   and the I/O buffers) to the steps, none of which imports the cleaner:
//!   the snapshot and the groups (`source_segment.rs`), step 1
//!   (`build_offset_map.rs`), steps 2 to 5 (`clean_into.rs`, writing through
//!   `group_writer.rs`). Every segment is read through the log layer's one
//!   [`BatchReader`], with the throttle and the cancellation check as its
//!   per-chunk hook (`io_context.rs`); what a clean fails with is in
//!   `error.rs`.
//! * **Loop.** A [`LogCleaner`] thread (`log_cleaner.rs`) runs the clean and
//!   hands the [`CleanResult::end_offset`] back, which becomes the
//!   partition's `cleaner-offset-checkpoint` entry; the [`CleanerStats`] feed
//!   the metrics and the `log_cleaner` summary lines.
//! * **Segments only in the object store.** `store_segments.rs` runs the
//!   same map and recopy over a tiered log: downloaded store-only segments
//!   (tiered storage hands them in, `store_segment_source.rs`) followed by
//!   the local log, mapped up to
//!   the store's end, and only the store-only segments recopied into
//!   `.cleaned` files that are never swapped: tiered storage uploads them.
//!
//! [`BatchReader`]: crate::log::batch_reader::BatchReader
//! [`Log::replace_segments`]: crate::log::Log::replace_segments

pub mod batch_writer;
mod buffers;
mod build_offset_map;
pub mod checkpoint;
mod clean_into;
#[allow(clippy::module_inception)]
pub mod cleaner;
pub mod cleaning_state;
pub mod collaborators;
pub mod config;
pub mod eligibility;
mod error;
mod garbage_survey;
mod group_writer;
mod io_context;
pub mod key_audit;
pub mod last_clean;
pub mod log_cleaner;
pub mod log_to_clean;
pub mod manager;
mod manager_state;
mod manager_status;
mod mapped_batches;
mod newest_offsets;
pub mod offset_map;
mod source_segment;
pub mod stale_list;
pub mod stats;
pub mod status;
pub mod store_segment_source;
pub mod store_segments;
pub mod throttler;
pub mod tiered_store;
pub mod tombstone_guard;
pub mod transactions;

pub use checkpoint::CleanerOffsetCheckpoint;
pub use cleaner::{
    CancellationToken, CleanResult, Cleaner, CleanerConfig, CleanerError, CrashPoint,
};
pub use cleaning_state::{CleaningStateError, LogCleaningState};
pub use collaborators::{CleanerCollaborators, ConsumerOffsets, ProducerIdResolver, TieredStore};
pub use config::LogCleanerConfig;
pub use eligibility::CleaningCandidate;
pub use last_clean::LastClean;
pub use log_cleaner::{CleanerThreadsStatus, LogCleaner, LogCleanerError, LogCleanerHandle};
pub use log_to_clean::{
    cleanable_offsets, max_compaction_delay, oldest_dirty_timestamp, LogToClean, OpenTransaction,
};
pub use manager::{GrabbedLog, LogCleanerManager};
pub use offset_map::OffsetMap;
pub use stats::CleanerStats;
pub use status::{Ineligible, LogDirCleaningStatus, ManagerStatus, PartitionCleaningStatus};
pub use throttler::Throttler;
pub use tiered_store::{StoreCleanState, StoreCleaning};

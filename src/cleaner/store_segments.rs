//! A clean of the segments that are only in the object store (a sediment
//! extension: Kafka's tiered storage refuses compacted topics). `remote`
//! downloads them, verified, and hands them here beside the local log they
//! precede. The map covers the dirty range of the whole tiered log — from the
//! store's clean point through the store-only segments and on into the local
//! log — and only the store-only segments are recopied, into `.cleaned`
//! segments in a directory of the caller's, never swapped: the caller uploads
//! them and switches the manifest.
//!
//! Invariants:
//! * Nothing at or past `map_upper` is mapped. The caller passes the end of
//!   the store's latest manifest, so a record leaves the store only for a
//!   newer one the store holds: a restore from the store never misses a
//!   latest value. (A record still in the local files below that end is in
//!   the objects the manifest lists: a local clean only removes records.)
//! * Nothing of the local log is written; it is read through descriptors
//!   duplicated under its read lock, so appends, fetches, retention and the
//!   local cleaner go on.
//! * The store-only segments start at the log start (nothing is older), so
//!   tombstones and markers whose delete horizon passed leave as in a local
//!   clean of a log all on disk — except while the topic keeps tombstones for
//!   consumer groups (`sediment.tombstone.retention.wait.for.groups`), whose
//!   offsets the store side does not see: then every tombstone stays.
//! * A group the clean leaves unchanged yields no segment: its objects stay.
//! * The store's segments come from a [`StoreSegmentSource`] and are fetched
//!   as they are read: the map pass fetches one at a time, the recopy one
//!   group at a time, and each is let go once read, so a clean of a store
//!   larger than the local disk holds no more than that beside the read
//!   cache. A segment the cache evicted between the passes is fetched
//!   again; the cache verifies every download against the manifest's CRC,
//!   so the recopy reads the bytes the map pass checked.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use parking_lot::RwLock;

use super::clean_into::{last_data_offsets, Recopy};
use super::cleaner::Cleaner;
use super::error::CleanerError;
use super::garbage_survey::StalePlan;
use super::io_context::{CancellationToken, IoContext};
use super::log_to_clean::LogToClean;
use super::source_segment::{group_segments, LogSnapshot, SourceSegment};
use super::stats::CleanerStats;
pub use super::store_segment_source::{FetchedSegment, StoreSegmentMeta, StoreSegmentSource};
use super::tombstone_guard::KeptTombstones;
use super::transactions::CleanedTransactionMetadata;
use crate::log::segment::LogSegment;
use crate::log::Log;

/// The store-only part of a log and what bounds its clean.
#[derive(Debug)]
pub struct StoreSegmentsToClean<'a> {
    /// The segments only in the store.
    pub source: Arc<dyn StoreSegmentSource>,
    /// How many of them, from the first, may be rewritten (the rest are
    /// only mapped).
    pub recopy: usize,
    /// Where the `.cleaned` segments are written.
    pub dir: &'a Path,
    /// The store's clean point: the map starts here.
    pub first_dirty_offset: i64,
    /// The store's end: nothing at or past it is mapped.
    pub map_upper: i64,
}

/// One cleaned group: the store segments it replaces (indexes into
/// [`StoreSegmentSource::segments`]) and its `.cleaned` segment, durable.
#[derive(Debug)]
pub struct CleanedStoreGroup {
    pub replaced: Range<usize>,
    pub segment: LogSegment,
}

/// What a clean of the store-only segments did.
#[derive(Debug)]
pub struct StoreCleanResult {
    /// The first offset not mapped.
    pub end_offset: i64,
    /// The base of the first segment the recopy left alone (not rewritable,
    /// or past the map): the store's clean point is at most this.
    pub recopied_end: i64,
    pub stats: CleanerStats,
    pub groups: Vec<CleanedStoreGroup>,
}

impl Cleaner {
    /// Map the tiered log's dirty range and recopy the store-only segments
    /// below its end, group by group, into `.cleaned` segments in
    /// `to_clean.dir`.
    ///
    /// # Errors
    /// As [`Cleaner::clean`]; on any error the `.cleaned` files written are
    /// deleted.
    pub fn clean_store_segments(
        &mut self,
        log: &RwLock<Log>,
        to_clean: &StoreSegmentsToClean<'_>,
        now_ms: i64,
        cancel: &CancellationToken,
    ) -> Result<StoreCleanResult, CleanerError> {
        let mut stats = CleanerStats { start_ms: self.clock.now_ms(), ..Default::default() };
        // Described (and their `.txnindex` entries read, which may fetch)
        // before the log's read lock is taken: appends wait for no download.
        let count = to_clean.source.segments().len();
        let store = (0..count)
            .map(|i| SourceSegment::in_store(&to_clean.source, i))
            .collect::<Result<Vec<_>, _>>()?;
        let (snapshot, range) = store_snapshot(&log.read(), to_clean, store, now_ms)?;
        let store_count = to_clean.recopy.min(to_clean.source.segments().len());
        let grow_limit = self.grow_limit(&snapshot);
        let throttler = Arc::clone(&self.throttler);
        let tp = range.topic_partition.clone();
        let io = IoContext { throttler: &throttler, cancel, partition: &tp, grow_limit };

        let mapped = self.buffers.build_offset_map(&snapshot, &range, &io, &mut stats);
        let end = mapped.inspect_err(|_| self.buffers.mapped.clear())?;
        self.note_map(&mut stats, end < range.first_uncleanable_offset);
        let end = end.max(range.first_dirty_offset);
        self.buffers.prepare_recopy(range.first_dirty_offset, end);
        let to_copy = snapshot.segments[..store_count]
            .iter()
            .take_while(|s| s.snapshot.base_offset < end)
            .count();
        let groups = group_segments(
            &snapshot.segments[..to_copy],
            snapshot.config.segment_bytes as u64,
            snapshot.config.segment_index_bytes,
        );
        // Under a version strategy a tombstone in the store may outrank a
        // copy of its key in the local log, which this clean maps but never
        // rewrites: removing the tombstone would bring that copy back, so
        // every tombstone stays (the local copy leaves once local
        // retention moves it to the store and a store clean rewrites it).
        let keep_tombstones =
            snapshot.config.tombstone_wait_for_groups || snapshot.strategy.is_versioned();
        let no_lists = StalePlan::default();
        let mut recopy = Recopy {
            io: &io,
            first_dirty: range.first_dirty_offset,
            end,
            upper: snapshot.upper,
            now_ms: if keep_tombstones { i64::MIN } else { now_ms },
            horizon_to_stamp: now_ms.saturating_add(snapshot.config.delete_retention_ms),
            last_records: &snapshot.last_records,
            last_data_offsets: last_data_offsets(&snapshot.last_records),
            txn: CleanedTransactionMetadata::new(snapshot.aborted_transactions(&range)),
            stats: &mut stats,
            guard: None,
            kept_tombstones: KeptTombstones::default(),
            strategy: &snapshot.strategy,
            log_start: snapshot.log_start_offset,
            // Store segments have no lists: the threshold is off for tiered topics.
            stale: &no_lists,
            group_start: 0,
            listed: Vec::new(),
        };
        let mut cleaned = Vec::new();
        let copied = groups.into_iter().try_for_each(|group| {
            let written =
                self.write_cleaned(&snapshot, &snapshot.segments[group.clone()], &mut recopy);
            match written? {
                Some(segment) => {
                    recopy.stats.segments_written += 1;
                    recopy.stats.segments_replaced += group.len() as u64;
                    recopy.stats.end_size += segment.size();
                    cleaned.push(CleanedStoreGroup { replaced: group, segment });
                }
                None => {
                    let kept = &snapshot.segments[group];
                    recopy.stats.segments_kept += kept.len() as u64;
                    recopy.stats.end_size += kept.iter().map(|s| s.snapshot.size).sum::<u64>();
                }
            }
            Ok(())
        });
        self.buffers.finish_recopy();
        self.buffers.restore_buffers();
        // The map's grown table goes back until the next store clean.
        self.buffers.map.clear();
        let recopied_end = snapshot.segments.get(to_copy).map_or(end, |s| s.snapshot.base_offset);
        if let Err(e) = copied {
            for group in cleaned {
                let _ = group.segment.delete_files();
            }
            return Err(e);
        }
        stats.end_messages = stats.messages_written;
        stats.end_ms = self.clock.now_ms();
        Ok(StoreCleanResult { end_offset: end, recopied_end, stats, groups: cleaned })
    }
}

/// The snapshot of the whole tiered log: the store-only segments (`store`),
/// then the local log's (taken under its read lock), bounded by the store's end; and
/// the range to map, from the store's clean point.
fn store_snapshot(
    log: &Log,
    to_clean: &StoreSegmentsToClean<'_>,
    store: Vec<SourceSegment>,
    now_ms: i64,
) -> Result<(LogSnapshot, LogToClean), CleanerError> {
    let first_dirty = to_clean.first_dirty_offset.max(log.log_start_offset());
    let local_dirty = first_dirty.max(log.local_log_start_offset());
    let local_range = LogToClean::measure(log, Some(local_dirty), now_ms);
    let local = LogSnapshot::take(log, &local_range)?;
    let mut segments = store;
    segments.extend(local.segments);
    let upper = local.upper.min(to_clean.map_upper);
    let snapshot = LogSnapshot {
        dir: to_clean.dir.to_path_buf(),
        config: local.config,
        segment_config: local.segment_config,
        segments,
        upper,
        last_records: local.last_records,
        older_segments_in_store: false,
        strategy: local.strategy,
        log_start_offset: log.log_start_offset(),
    };
    Ok((snapshot, LogToClean::new(log, first_dirty, upper.max(first_dirty))))
}

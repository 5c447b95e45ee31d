//! `LastClean`: what one successful clean of a partition did, as the
//! manager remembers it (the last [`CLEAN_HISTORY`] per partition) and
//! `cleaner-status` shows it.

use serde::Serialize;

use super::cleaner::CleanResult;
use super::stats::CleanerStats;

/// How many cleans of each partition the manager remembers.
pub const CLEAN_HISTORY: usize = 10;

/// What one successful clean of a partition did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastClean {
    pub start_time_ms: i64,
    pub end_time_ms: i64,
    pub first_dirty_offset: i64,
    pub end_offset: i64,
    pub elapsed_ms: i64,
    pub bytes_read: u64,
    /// Bytes of batches the recopy dropped without reading them again
    /// (every record superseded, known from the map pass).
    pub bytes_dropped_unread: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_written: u64,
    pub keys_in_map: u64,
    /// The map filled before the end of the dirty range.
    pub map_filled: bool,
    pub aborted_batches_removed: u64,
    pub horizons_stamped: u64,
    pub start_size: u64,
    pub end_size: u64,
    pub start_messages: u64,
    pub end_messages: u64,
    pub buffer_utilization: f64,
    pub tombstones_removed: u64,
    /// Tombstones past their horizon kept for a group that has not read them.
    pub tombstones_guarded: u64,
    /// Copies below the first dirty offset that outranked their key's newer
    /// copies under a versioned compaction strategy.
    pub clean_copies_won: u64,
    /// Segments kept under `sediment.compaction.min.segment.garbage.ratio`.
    pub segments_kept_under_ratio: u64,
    /// Superseded copies listed in kept segments instead of removed.
    pub stale_copies_listed: u64,
    /// Listed copies removed by a rewrite of their segment.
    pub stale_copies_removed: u64,
    /// Expired tombstones kept one more clean for listed copies of their key.
    pub tombstones_held_for_stale: u64,
    /// `1 - end size / start size` (0 when nothing was recopied).
    pub size_reduction: f64,
}

impl LastClean {
    /// The record of `result`, a clean from `first_dirty_offset` that ended at `end_time_ms`.
    pub(super) fn new(end_time_ms: i64, first_dirty_offset: i64, result: &CleanResult) -> Self {
        Self::of_stats(end_time_ms, first_dirty_offset, result.end_offset, &result.stats)
    }

    /// The record of a clean from `first_dirty_offset` to `end_offset` that
    /// ended at `end_time_ms` having done what `s` counts (a store clean
    /// reports its own this way).
    pub fn of_stats(
        end_time_ms: i64,
        first_dirty_offset: i64,
        end_offset: i64,
        s: &CleanerStats,
    ) -> Self {
        Self {
            start_time_ms: s.start_ms,
            end_time_ms,
            first_dirty_offset,
            end_offset,
            elapsed_ms: s.elapsed_ms(),
            bytes_read: s.map_bytes_read + s.bytes_read,
            bytes_dropped_unread: s.bytes_dropped_unread,
            bytes_written: s.bytes_written,
            records_read: s.map_messages_read + s.messages_read,
            records_written: s.messages_written,
            keys_in_map: s.map_entries,
            map_filled: s.map_filled,
            aborted_batches_removed: s.aborted_batches_removed,
            horizons_stamped: s.horizons_stamped,
            start_size: s.start_size,
            end_size: s.end_size,
            start_messages: s.start_messages,
            end_messages: s.end_messages,
            buffer_utilization: s.buffer_utilization,
            tombstones_removed: s.tombstones_removed,
            tombstones_guarded: s.tombstones_guarded,
            clean_copies_won: s.clean_copies_won,
            segments_kept_under_ratio: s.segments_kept_under_ratio,
            stale_copies_listed: s.stale_copies_listed,
            stale_copies_removed: s.stale_copies_removed,
            tombstones_held_for_stale: s.tombstones_held_for_stale,
            size_reduction: if s.start_size == 0 {
                0.0
            } else {
                1.0 - s.end_size as f64 / s.start_size as f64
            },
        }
    }
}

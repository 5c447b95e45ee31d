//! The object store's part of a tiered compacted partition, as the cleaner's
//! views show it: `cleaner-status` (and the gauges read from it) and the key
//! audit. The cleaner holds no store client: the log knows, as numbers, the
//! segments the store's latest manifest lists ([`Log::store_segments`]),
//! and tiered storage gives the manager a [`TieredStore`] for what only it
//! knows (the store cleaner's measure, the store-only segments' files).
//!
//! Invariants:
//! * The tiered log is the store-only segments (below the local log start)
//!   followed by the local log; the two never overlap, so bytes of the two
//!   add up. [`StoreCleaning::tiered_dirty_ratio`] is the dirty ratio of that
//!   whole log: the store's dirty bytes and the local cleanable bytes over
//!   those and both clean sections.
//! * Nothing here moves a clean point or runs a clean: the local cleaner
//!   decides by the local ratio (Kafka's), the store cleaner by the store's.
//!
//! [`Log::store_segments`]: crate::log::Log::store_segments

use serde::Serialize;

use super::key_audit::{SegmentFile, StorePart};
use super::manager::LogCleanerManager;
use super::status::LastClean;
use crate::log::segment::SegmentConfig;
use crate::log::{Log, TopicPartition};

/// What tiered storage knows of a partition that the cleaner's views show.
/// Called with no lock of the cleaner or of a log held.
pub trait TieredStore: Send + Sync + std::fmt::Debug {
    /// The store cleaner's last measure of `tp`, if it measured it.
    fn store_clean_state(&self, tp: &TopicPartition) -> Option<StoreCleanState>;

    /// Read-only handles to the files of `tp`'s store segments that hold
    /// offsets in `[log_start, local_start)`, oldest first, fetched through
    /// the broker's read cache (blocking: a key audit's thread calls it).
    ///
    /// # Errors
    /// The store unreachable, a manifest or object missing or corrupt.
    fn store_only_segment_files(
        &self,
        tp: &TopicPartition,
        offsets: std::ops::Range<i64>,
        config: SegmentConfig,
    ) -> Result<Vec<SegmentFile>, String>;
}

/// The store cleaner's view of one partition (`sediment_remote_*` gauges
/// and the `store.cleaning` object of `cleaner-status`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StoreCleanState {
    /// The manifest's end: a store clean maps no further.
    pub end_offset: i64,
    /// The base offset of the manifest's last entry, which a store clean
    /// maps but never rewrites (the store's end never moves back).
    pub last_entry_base_offset: i64,
    /// The store's clean point: below it every record was recopied against
    /// a map of everything up to it.
    pub clean_offset: i64,
    pub clean_bytes: u64,
    /// Bytes no store clean has rewritten or mapped yet.
    pub dirty_bytes: u64,
    pub dirty_ratio: f64,
    /// How often the uploader's task looks again (`sediment.remote.storage.interval.ms`).
    pub check_interval_ms: i64,
    /// The last store clean failed: why, and when it is tried again.
    pub last_error: Option<String>,
    pub retry_at_ms: Option<i64>,
    pub last_clean: Option<LastClean>,
}

/// The `store` object of a partition in `cleaner-status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StoreCleaning {
    /// `.log` bytes and segments the store's latest manifest lists.
    pub remote_bytes: u64,
    pub remote_segments: usize,
    /// Of those, the ones below the local log start: only in the store.
    pub store_only_bytes: u64,
    pub store_only_segments: usize,
    pub local_log_start_offset: i64,
    /// The dirty ratio of the whole tiered log (the module doc); `None`
    /// until the store cleaner has measured the store.
    pub tiered_dirty_ratio: Option<f64>,
    /// `None` when the store cleaner does not run (`log.cleaner.enable=false`)
    /// or has not measured the partition yet.
    pub cleaning: Option<StoreCleanState>,
}

/// The whole tiered log's dirty ratio: the store's dirty bytes and the local
/// cleanable bytes over those and both clean sections (`local`: the local
/// clean and cleanable bytes).
fn tiered_ratio(store: &StoreCleanState, local: (u64, u64)) -> f64 {
    let (local_clean, local_cleanable) = local;
    let dirty = store.dirty_bytes + local_cleanable;
    let total = dirty + store.clean_bytes + local_clean;
    if total == 0 {
        0.0
    } else {
        dirty as f64 / total as f64
    }
}

impl StoreCleaning {
    /// The store's part of `log` as the log knows it (`None` when the store
    /// lists nothing of it), with the store cleaner's `state`; the local
    /// section's clean and cleanable bytes make the tiered ratio.
    pub fn of(log: &Log, state: Option<StoreCleanState>, local: (u64, u64)) -> Option<Self> {
        let listed = log.store_segments();
        if listed.is_empty() {
            return None;
        }
        let tiered_dirty_ratio = state.as_ref().map(|s| tiered_ratio(s, local));
        Some(Self {
            remote_bytes: listed.iter().map(|s| s.size_in_bytes).sum(),
            remote_segments: listed.len(),
            store_only_bytes: log.store_only_size(),
            store_only_segments: log.store_only_segments().count(),
            local_log_start_offset: log.local_log_start_offset(),
            tiered_dirty_ratio,
            cleaning: state,
        })
    }
}

impl LogCleanerManager {
    /// The store's part of `tp` for a key audit: `offsets` (from the log
    /// start to the local start) read through tiered storage, or why not.
    pub(super) fn store_part(
        &self,
        tp: &TopicPartition,
        offsets: std::ops::Range<i64>,
        config: SegmentConfig,
    ) -> StorePart {
        let Some(store) = self.tiered_store() else {
            return StorePart {
                offsets,
                segments: Err("tiered storage is not running on this broker".into()),
                state: None,
            };
        };
        StorePart {
            segments: store.store_only_segment_files(tp, offsets.clone(), config),
            state: store.store_clean_state(tp),
            offsets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tiered_ratio_adds_the_store_to_the_local_sections() {
        let store = StoreCleanState { clean_bytes: 100, dirty_bytes: 300, ..Default::default() };
        // (300 + 400) / (300 + 400 + 100 + 200)
        assert_eq!(tiered_ratio(&store, (200, 400)), 0.7);
        assert_eq!(tiered_ratio(&store, (0, 0)), 0.75, "the store alone");
        assert_eq!(tiered_ratio(&StoreCleanState::default(), (0, 0)), 0.0, "nothing at all");
    }
}

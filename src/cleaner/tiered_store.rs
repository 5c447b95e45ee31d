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
//!   whole log: the store-only dirty bytes and the local cleanable bytes
//!   over all store-only bytes and the local clean and cleanable bytes.
//! * Nothing here moves a clean point or runs a clean: the local cleaner
//!   decides by the local ratio (Kafka's), the store cleaner by the store's.
//!
//! [`Log::store_segments`]: crate::log::Log::store_segments

use serde::Serialize;

use super::last_clean::LastClean;
use super::log_to_clean::dirty_ratio;
use crate::log::Log;

/// The store cleaner's view of one partition (`sediment_remote_*` gauges
/// and the `store.cleaning` object of `cleaner-status`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StoreCleanState {
    /// The manifest's end.
    pub end_offset: i64,
    /// What a store clean's map reaches now: the manifest's end, and no
    /// further than the local log's first uncleanable offset
    /// (`min.compaction.lag.ms`, an open transaction, the active segment).
    pub map_bound: i64,
    /// Whether a store clean can rewrite anything: some store-only entry
    /// besides the manifest's last.
    pub rewritable: bool,
    /// The base offset of the manifest's last entry, which a store clean
    /// maps but never rewrites (the store's end never moves back).
    pub last_entry_base_offset: i64,
    /// The store's clean point: below it every record was recopied against
    /// a map of everything up to it.
    pub clean_offset: i64,
    pub clean_bytes: u64,
    /// Bytes no store clean has rewritten or mapped yet: store-only ones,
    /// and uploaded local segments whose records no store clean has mapped.
    pub dirty_bytes: u64,
    /// Of `dirty_bytes`, those of segments only in the store.
    pub store_only_dirty_bytes: u64,
    pub dirty_ratio: f64,
    /// How long until the uploader's task looks again, as an estimate like
    /// the local cleaner's (which assumes a free thread): the pause between
    /// rounds, `sediment.remote.storage.upload.interval.ms` doubled after a
    /// failed round up to a minute; a round itself (every partition's
    /// uploads and store cleans) adds its own time.
    pub check_within_ms: i64,
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

/// The whole tiered log's dirty ratio: the dirty bytes only in the store
/// and the local cleanable bytes over all store-only bytes and the local
/// clean and cleanable bytes (`local`).
fn tiered_ratio(store: &StoreCleanState, store_only_bytes: u64, local: (u64, u64)) -> f64 {
    let (local_clean, local_cleanable) = local;
    let store_dirty = store.store_only_dirty_bytes.min(store_only_bytes);
    let clean = store_only_bytes - store_dirty + local_clean;
    dirty_ratio(store_dirty + local_cleanable, clean)
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
        let store_only_bytes = log.store_only_size();
        let tiered_dirty_ratio = state.as_ref().map(|s| tiered_ratio(s, store_only_bytes, local));
        Some(Self {
            remote_bytes: listed.iter().map(|s| s.size_in_bytes).sum(),
            remote_segments: listed.len(),
            store_only_bytes,
            store_only_segments: log.store_only_segments().count(),
            local_log_start_offset: log.local_log_start_offset(),
            tiered_dirty_ratio,
            cleaning: state,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tiered_ratio_adds_the_store_to_the_local_sections() {
        // Dirty bytes of uploaded local segments are the local ones' business.
        let store =
            StoreCleanState { dirty_bytes: 900, store_only_dirty_bytes: 300, ..Default::default() };
        // (300 + 400) / (400 store-only + 200 + 400)
        assert_eq!(tiered_ratio(&store, 400, (200, 400)), 0.7);
        assert_eq!(tiered_ratio(&store, 400, (0, 0)), 0.75, "the store alone");
        assert_eq!(tiered_ratio(&StoreCleanState::default(), 0, (0, 0)), 0.0, "nothing at all");
    }
}

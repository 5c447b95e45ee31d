//! Compaction in the store: the segments of a compacted topic that are only
//! in the store (local retention deleted their local copies) are cleaned
//! there too, by the uploader's task right after a round's manifest, so one
//! task writes a partition's manifests and no two of its rounds overlap.
//!
//! When: the store's dirty ratio ([`StoreCleanPlan`]: bytes no store clean
//! has rewritten or mapped yet, over those and the bytes below the clean
//! point) is above the topic's `min.cleanable.dirty.ratio` (as for a local
//! clean) and some store-only segment besides the manifest's last can be
//! rewritten. The clean point (`Manifest::store_clean_offset`,
//! the log start until the first clean) is where the last store clean's map
//! ended, but never past the first segment it did not rewrite: only what
//! was recopied against that map is clean. A tombstone whose delete horizon
//! passed leaves at the next store clean the ratio calls for (the store has
//! no horizon-driven schedule).
//!
//! One store clean, with what a crash at each step leaves:
//! 1. Clean the store-only segments with a cleaner of the pool's share of
//!    the dedupe budget and the pool's I/O throttle, fetching each through
//!    the read cache (verified against the manifest) as the clean reads it
//!    and letting it go after (`cleaner::store_segments`): the map covers
//!    the whole tiered log from the clean point up to the manifest's end,
//!    the output goes to `.cleaned` files in a scratch directory under the
//!    cache's.
//!    Crash: scratch files, removed with the cache at the next start.
//! 2. Upload each cleaned segment's files under new keys (a key names its
//!    content) and read them back. Crash: objects no manifest lists; the
//!    sweep deletes them after the delay.
//! 3. Write the next manifest create-only: the latest with each cleaned
//!    group's entries replaced by its cleaned segment, and the new clean
//!    point. Crash before (`store-clean-before-manifest`): as 2. After
//!    (`store-clean-after-manifest`): done; the replaced objects are
//!    listed by no current manifest and the sweep deletes them after
//!    `sediment.remote.storage.delete.delay.ms` (readers that hold them
//!    meanwhile finish).
//!
//! Invariants:
//! * A record leaves the store only for a newer record of its key that the
//!   same manifest lists (the map stops at the manifest's end), so every
//!   key's latest value stays readable from the store alone, and a restore
//!   gets it.
//! * A cleaned entry keeps its own next offset (a cache download checks it):
//!   a clean that drops a segment's last records leaves a gap up to the next
//!   entry's base, which readers step over. The manifest's last entry is
//!   never cleaned here, so the store's end never moves back (the uploader's
//!   next manifest would read that as lost offsets).
//! * Offsets only leave the store with a newer copy of their key: the
//!   manifest keeps its log start, its end and the base offset of every
//!   entry (a cleaned entry left empty, base = next offset, is dropped by
//!   the uploader's next manifest, as any empty entry at the log start).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::cache::SegmentCache;
use super::cached_segments::CachedSegments;
use super::crash_point::{reached, STORE_CLEAN_AFTER_MANIFEST, STORE_CLEAN_BEFORE_MANIFEST};
use super::manifest::{self, Manifest, SegmentEntry};
use super::remote_log_manager::{tell_log, PartitionState, RemoteLogManager, MAX_BACKOFF};
use super::snapshot::{self, LocalSegment};
use super::{blocking, now_ms, RemoteError};
use crate::cleaner::log_to_clean::dirty_ratio;
use crate::cleaner::store_segments::{StoreSegmentSource, StoreSegmentsToClean};
use crate::cleaner::{
    CancellationToken, Cleaner, CleanerStats, LastClean, LogCleanerHandle, LogToClean,
    StoreCleanState,
};
use crate::log::manager::SharedLog;
use crate::log::TopicPartition;

/// The longest wait before a failed store clean of a partition is tried again.
const MAX_STORE_CLEAN_BACKOFF: Duration = Duration::from_secs(300);

/// The cleaner of store-only segments, and where it writes.
#[derive(Debug)]
pub struct StoreCleaner {
    cache: Arc<SegmentCache>,
    cleaner: Arc<Mutex<Cleaner>>,
    /// The cleaner pool: its share of the budget now (threads and budget
    /// can change while the broker runs; the map follows before a clean).
    pool: Arc<LogCleanerHandle>,
    /// Scratch for `.cleaned` segments: `<cache dir>/.clean/<tp>/`.
    scratch: PathBuf,
    /// Set when the broker shuts down: a store clean running on a blocking
    /// thread stops at its next chunk (aborting the upload task does not
    /// reach it) and deletes its `.cleaned` output.
    cancel: CancellationToken,
}

impl StoreCleaner {
    /// A cleaner with one thread's share of `pool`'s budget and its
    /// throttle, reading through `cache`.
    ///
    /// # Errors
    /// A dedupe share too small for one entry.
    pub fn new(cache: Arc<SegmentCache>, pool: Arc<LogCleanerHandle>) -> Result<Self, RemoteError> {
        let cleaner = Self::cleaner_for(&pool)?;
        let scratch = cache.dir().join(".clean");
        let cancel = CancellationToken::new();
        Ok(Self { cache, cleaner: Arc::new(Mutex::new(cleaner)), pool, scratch, cancel })
    }

    /// A cleaner with `pool`'s per-thread share, throttle and clock.
    fn cleaner_for(pool: &LogCleanerHandle) -> Result<Cleaner, RemoteError> {
        let (share, throttler) = (pool.config().per_thread(), Arc::clone(pool.throttler()));
        let clock = Arc::clone(pool.manager().clock());
        Cleaner::new(usize::MAX, share, throttler, clock)
            .map_err(|e| RemoteError::StoreClean { partition: "-".into(), reason: e.to_string() })
    }

    /// Before a clean (on its blocking thread, holding the cleaner): a new
    /// map when the pool's share changed since the last one (threads or
    /// budget reconfigured).
    fn follow_pool(cleaner: &mut Cleaner, pool: &LogCleanerHandle) -> Result<(), RemoteError> {
        if *cleaner.config() != pool.config().per_thread() {
            *cleaner = Self::cleaner_for(pool)?;
        }
        Ok(())
    }

    /// Stop the clean running now, and every later one, at its next chunk.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }
}

/// The store-only entries and the store's dirty ratio.
#[derive(Debug, PartialEq)]
pub(super) struct StoreCleanPlan {
    /// Indexes into the manifest's segments of those below the local start
    /// and above the log start: all are mapped.
    pub(super) store_only: std::ops::Range<usize>,
    /// How many of them (from the first) may be rewritten: all but the
    /// manifest's last entry.
    pub(super) recopy: usize,
    /// The store's clean point: below it every record was recopied against
    /// a map of everything up to it.
    pub(super) first_dirty: i64,
    /// The base of the entry after the rewritable ones: the clean point
    /// never passes it (what is not rewritten is not clean).
    pub(super) recopy_end: i64,
    pub(super) clean_bytes: u64,
    pub(super) dirty_bytes: u64,
    /// Of `dirty_bytes`, those of the store-only entries.
    pub(super) store_only_dirty_bytes: u64,
    pub(super) dirty_ratio: f64,
}

impl StoreCleanPlan {
    /// The plan for manifest `m` of a log with these starts. `mapped_to`:
    /// where the last store clean's map ended (this task's memory; 0 after a
    /// start); `upper`: what a map could reach now (the manifest's end and
    /// the log's cleanable bound). The ratio's dirty bytes are the
    /// rewritable store-only entries past the clean point and the entries
    /// past both `mapped_to` and the clean point below `upper` (records no
    /// store clean has mapped yet); its clean bytes the entries below the
    /// clean point.
    pub(super) fn of(m: &Manifest, starts: (i64, i64), mapped_to: i64, upper: i64) -> Self {
        let (local_start, log_start) = starts;
        let first_dirty = m.store_clean_offset.unwrap_or(m.log_start_offset).max(log_start);
        let below_local = m.segments.iter().take_while(|s| s.next_offset <= local_start).count();
        let start = m.segments[..below_local]
            .iter()
            .position(|s| s.next_offset > log_start)
            .unwrap_or(below_local);
        let recopy = below_local.min(m.segments.len().saturating_sub(1)).saturating_sub(start);
        let recopy_end = m.segments.get(start + recopy).map_or(m.end_offset, |s| s.base_offset);
        let mapped = mapped_to.max(first_dirty);
        let (mut clean, mut dirty, mut store_only_dirty) = (0u64, 0u64, 0u64);
        for (i, s) in m.segments.iter().enumerate().skip(start) {
            if s.next_offset <= first_dirty {
                clean += s.size();
            } else if i < start + recopy || (s.next_offset > mapped && s.base_offset < upper) {
                dirty += s.size();
                if i < below_local {
                    store_only_dirty += s.size();
                }
            }
        }
        let dirty_ratio = dirty_ratio(dirty, clean);
        Self {
            store_only: start..below_local,
            recopy,
            first_dirty,
            recopy_end,
            clean_bytes: clean,
            dirty_bytes: dirty,
            store_only_dirty_bytes: store_only_dirty,
            dirty_ratio,
        }
    }
}

/// One cleaned group, ready to upload: the entries it replaces and its own.
struct CleanedGroup {
    replaced: std::ops::Range<usize>,
    entry: SegmentEntry,
    files: LocalSegment,
}

/// What step 1 made: the end of the map, the new clean point, the groups.
struct Cleaned {
    map_end: i64,
    clean_point: i64,
    groups: Vec<CleanedGroup>,
    stats: CleanerStats,
}

/// Removes a store clean's scratch directory however the clean ends (what
/// it held of the cache goes back when its `CachedSegments` is dropped).
struct Scratch {
    dir: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl RemoteLogManager {
    /// Clean `tp`'s store-only segments when its store dirty ratio calls for
    /// it (the steps are in the module doc). A failure other than another
    /// writer or a lost manifest is counted and logged here, and the next
    /// try waits (doubling up to [`MAX_STORE_CLEAN_BACKOFF`]): uploads and
    /// sweeps of the partition go on.
    pub(super) async fn maybe_clean_store(
        &self,
        tp: &TopicPartition,
        log: &SharedLog,
        state: &mut PartitionState,
    ) -> Result<(), RemoteError> {
        if state.store_clean_retry.is_some_and(|(at, _)| Instant::now() < at) {
            return Ok(());
        }
        match self.clean_store(tp, log, state).await {
            Ok(()) => {
                if state.store_clean_retry.take().is_some() {
                    self.stats.store_clean_recovered(tp);
                }
                Ok(())
            }
            Err(e @ (RemoteError::Conflict { .. } | RemoteError::Regressed { .. })) => Err(e),
            Err(e) => {
                self.stats.error(e.kind());
                let wait = state
                    .store_clean_retry
                    .map_or(Duration::from_secs(1), |(_, w)| (w * 2).min(MAX_STORE_CLEAN_BACKOFF));
                tracing::warn!(partition = %tp, "tiered storage: cleaning the store's segments: {e}; next try in {wait:?}");
                state.store_clean_retry = Some((Instant::now() + wait, wait));
                let retry_at_ms = now_ms().saturating_add(wait.as_millis() as i64);
                self.stats.set_store_clean_outcome(tp, Err((e.to_string(), retry_at_ms)));
                Ok(())
            }
        }
    }

    async fn clean_store(
        &self,
        tp: &TopicPartition,
        log: &SharedLog,
        state: &mut PartitionState,
    ) -> Result<(), RemoteError> {
        let Some(cleaner) = self.store_cleaner() else { return Ok(()) };
        let Some((seq, latest)) = state.manifest.clone() else { return Ok(()) };
        let Some((plan, min_ratio)) = self.plan(tp, log, &latest, state.store_mapped_to) else {
            return Ok(());
        };
        // As the local cleaner: only a ratio above the minimum cleans.
        if plan.recopy == 0 || plan.dirty_ratio <= min_ratio {
            return Ok(());
        }
        let config = log.read().segment_config_for_cleaning();
        let scratch = Scratch { dir: cleaner.scratch.join(tp.to_string()) };
        let entries = &latest.segments[plan.store_only.clone()];
        let runtime = tokio::runtime::Handle::current();
        let source = Arc::new(CachedSegments::new(&cleaner.cache, tp, entries, config, runtime));
        let cleaned =
            clean_blocking(cleaner, log, source, &scratch.dir, &plan, latest.end_offset).await?;
        state.store_mapped_to = cleaned.map_end;
        if cleaned.groups.is_empty() && cleaned.clean_point <= plan.first_dirty {
            // Nothing rewritten and the clean point where it was: no manifest.
            return Ok(());
        }
        self.publish(tp, log, state, (seq, &latest), &plan, cleaned).await
    }

    /// The plan for `tp`'s latest manifest and the topic's
    /// `min.cleanable.dirty.ratio`, with the dirty ratio published; `None`
    /// when the partition is not a compacted one the store lists.
    fn plan(
        &self,
        tp: &TopicPartition,
        log: &SharedLog,
        latest: &Manifest,
        mapped_to: i64,
    ) -> Option<(StoreCleanPlan, f64)> {
        let l = log.read();
        let config = Arc::clone(l.config());
        if latest.retired || !config.compact {
            drop(l);
            self.stats.set_store_measure(tp, None);
            return None;
        }
        let starts = (l.local_log_start_offset(), l.log_start_offset());
        let local_dirty = latest.store_clean_offset.unwrap_or(0).max(starts.0);
        let bound = LogToClean::measure(&l, Some(local_dirty), now_ms());
        drop(l);
        let upper = bound.first_uncleanable_offset.min(latest.end_offset);
        let plan = StoreCleanPlan::of(latest, starts, mapped_to, upper);
        let interval = Duration::from_millis(self.config.upload_interval_ms);
        let measure = StoreCleanState {
            end_offset: latest.end_offset,
            last_entry_base_offset: latest
                .segments
                .last()
                .map_or(latest.end_offset, |s| s.base_offset),
            clean_offset: plan.first_dirty,
            clean_bytes: plan.clean_bytes,
            dirty_bytes: plan.dirty_bytes,
            store_only_dirty_bytes: plan.store_only_dirty_bytes,
            dirty_ratio: plan.dirty_ratio,
            map_bound: upper,
            rewritable: plan.recopy > 0,
            check_within_ms: MAX_BACKOFF.max(interval).as_millis() as i64,
            ..Default::default()
        };
        self.stats.set_store_measure(tp, (!plan.store_only.is_empty()).then_some(measure));
        Some((plan, config.min_cleanable_dirty_ratio))
    }

    /// Steps 2 and 3: upload the cleaned groups, then the manifest that lists
    /// them in place of what they replace.
    async fn publish(
        &self,
        tp: &TopicPartition,
        log: &SharedLog,
        state: &mut PartitionState,
        (seq, latest): (u64, &Manifest),
        plan: &StoreCleanPlan,
        cleaned: Cleaned,
    ) -> Result<(), RemoteError> {
        let groups = cleaned.groups;
        for g in &groups {
            for (file, object) in g.files.files.iter().zip(&g.entry.files) {
                let label = PathBuf::from(&object.key);
                self.upload(tp, file, object, label).await?;
            }
        }
        let mut next = latest.clone();
        let offset = plan.store_only.start;
        for g in groups.iter().rev() {
            let range = (g.replaced.start + offset)..(g.replaced.end + offset);
            next.segments.splice(range, [g.entry.clone()]);
        }
        next.store_clean_offset = Some(cleaned.clean_point.min(next.end_offset));
        next.written_at_ms = now_ms();
        let removed = latest
            .segments
            .iter()
            .map(SegmentEntry::size)
            .sum::<u64>()
            .saturating_sub(next.segments.iter().map(SegmentEntry::size).sum::<u64>());
        self.check_still_latest(tp, log, state).await?;
        reached(STORE_CLEAN_BEFORE_MANIFEST);
        manifest::write(&self.store, tp, seq + 1, &next).await?;
        reached(STORE_CLEAN_AFTER_MANIFEST);
        let replaced: usize = groups.iter().map(|g| g.replaced.len()).sum();
        tracing::info!(partition = %tp, seq = seq + 1, replaced, cleaned = groups.len(), removed_bytes = removed, clean_point = cleaned.clean_point, "segments in the store cleaned");
        self.stats.store_cleaned(removed);
        let last = LastClean::of_stats(now_ms(), plan.first_dirty, cleaned.map_end, &cleaned.stats);
        tell_log(log, &next);
        // Publish the ratio the next round starts from.
        self.plan(tp, log, &next, state.store_mapped_to);
        self.stats.set_store_clean_outcome(tp, Ok(last));
        state.manifest = Some((seq + 1, next));
        Ok(())
    }
}

/// Step 1 on a blocking thread: clean the store-only segments into `dir`, then
/// name each cleaned segment's files as a segment's and digest them.
async fn clean_blocking(
    cleaner: &StoreCleaner,
    log: &SharedLog,
    source: Arc<CachedSegments>,
    dir: &Path,
    plan: &StoreCleanPlan,
    map_upper: i64,
) -> Result<Cleaned, RemoteError> {
    let (first_dirty, recopy, recopy_end) = (plan.first_dirty, plan.recopy, plan.recopy_end);
    let (cancel, pool) = (cleaner.cancel.clone(), Arc::clone(&cleaner.pool));
    let (cleaner, log, dir) = (Arc::clone(&cleaner.cleaner), Arc::clone(log), dir.to_path_buf());
    let tp = log.read().topic_partition().clone();
    blocking(move || {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(RemoteError::io(&dir))?;
        let to_clean = StoreSegmentsToClean {
            source: Arc::clone(&source) as Arc<dyn StoreSegmentSource>,
            recopy,
            dir: &dir,
            first_dirty_offset: first_dirty,
            map_upper,
        };
        let mut cleaner = cleaner.lock();
        StoreCleaner::follow_pool(&mut cleaner, &pool)?;
        let result =
            cleaner.clean_store_segments(&log, &to_clean, now_ms(), &cancel).map_err(|e| {
                RemoteError::StoreClean { partition: tp.to_string(), reason: e.to_string() }
            })?;
        drop(cleaner);
        let mut groups = Vec::with_capacity(result.groups.len());
        for mut g in result.groups {
            g.segment.change_file_suffix("")?;
            let (base, next) = (g.segment.base_offset(), g.segment.next_offset());
            let files = snapshot::open_segment(&dir, base, next)?;
            let mut entry = snapshot::digest(&files, &dir, &mut Default::default())?;
            entry.max_timestamp = source.entries[g.replaced.clone()]
                .iter()
                .map(|e| e.max_timestamp)
                .max()
                .unwrap_or(-1);
            groups.push(CleanedGroup { replaced: g.replaced, entry, files });
        }
        // Only what was rewritten is clean: the first segment the recopy
        // left alone (or the entry after the rewritable ones) bounds it.
        let clean_point = result.end_offset.min(result.recopied_end).min(recopy_end);
        Ok(Cleaned { map_end: result.end_offset, clean_point, groups, stats: result.stats })
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{StoreCleanPlan, StoreCleaner};
    use crate::cleaner::{LogCleaner, LogCleanerConfig};
    use crate::log::TopicPartition;
    use crate::log::{LogManager, LogManagerConfig};
    use crate::remote::cache::testing::local_store;
    use crate::remote::cache::{SegmentCache, CACHE_DIR};
    use crate::remote::manifest::tests::{manifest, segment};
    use crate::remote::manifest::Manifest;
    use crate::remote::read_stats::RemoteReadStats;

    /// Four segments of 10 bytes: [0,5) [5,9) [9,12) [12,20).
    fn four() -> Manifest {
        let tp = TopicPartition::new("t", 0);
        manifest(&tp, vec![segment(0, 5), segment(5, 9), segment(9, 12), segment(12, 20)])
    }

    #[test]
    fn the_plan_maps_every_store_only_segment_and_rewrites_all_but_the_last_entry() {
        // Local start 12: three segments only in the store, all rewritable.
        let plan = StoreCleanPlan::of(&four(), (12, 0), 0, i64::MAX);
        assert_eq!((plan.store_only, plan.recopy, plan.first_dirty), (0..3, 3, 0));
        assert_eq!((plan.recopy_end, plan.dirty_ratio), (12, 1.0));
        // Everything in the store only: the last entry is mapped, not
        // rewritten, and the clean point stops at it.
        let plan = StoreCleanPlan::of(&four(), (20, 0), 0, i64::MAX);
        assert_eq!((plan.store_only, plan.recopy, plan.recopy_end), (0..4, 3, 12));
        // Below the log start nothing counts.
        let plan = StoreCleanPlan::of(&four(), (12, 6), 0, i64::MAX);
        assert_eq!((plan.store_only, plan.recopy, plan.first_dirty), (1..3, 2, 6));
        // Nothing only in the store: nothing to rewrite.
        assert_eq!(StoreCleanPlan::of(&four(), (0, 0), 0, i64::MAX).recopy, 0);
    }

    #[test]
    fn the_dirty_ratio_counts_what_no_store_clean_rewrote_or_mapped() {
        // Rewritable past the clean point, and local bytes never mapped.
        let cleaned = Manifest { store_clean_offset: Some(9), ..four() };
        assert_eq!(StoreCleanPlan::of(&cleaned, (12, 0), 9, i64::MAX).dirty_ratio, 0.5);
        // The local segment was mapped by the last clean: nothing is dirty.
        let all = Manifest { store_clean_offset: Some(12), ..four() };
        assert_eq!(StoreCleanPlan::of(&all, (12, 0), 20, i64::MAX).dirty_ratio, 0.0);
        // Not mapped, but past what a map may reach now (compaction lag).
        assert_eq!(StoreCleanPlan::of(&all, (12, 0), 0, 12).dirty_ratio, 0.0);
        assert_eq!(StoreCleanPlan::of(&all, (12, 0), 0, 13).dirty_ratio, 0.25);
    }

    #[test]
    fn the_store_cleaners_map_follows_the_pools_share() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let clock = crate::clock::system();
        let logs = LogManager::open(LogManagerConfig::new(dirs[0].path()), Arc::clone(&clock));
        let config = LogCleanerConfig {
            dedupe_buffer_size: 1 << 20,
            store_share: true,
            ..Default::default()
        };
        let mut pool =
            LogCleaner::start(config.clone(), Arc::new(logs.unwrap()), clock, Default::default());
        let pool = pool.as_mut().unwrap();
        let handle = Arc::clone(pool.handle());
        let cache_dir = dirs[1].path().join(CACHE_DIR);
        let store = local_store(dirs[2].path());
        let reads = RemoteReadStats::default();
        let cache = SegmentCache::open(&cache_dir, 1 << 20, store, Arc::default(), reads).unwrap();
        let cleaner = StoreCleaner::new(cache, Arc::clone(&handle)).unwrap();
        // One thread and the store cleaner: two shares.
        assert_eq!(cleaner.cleaner.lock().config().dedupe_buffer_size, (1 << 20) / 2);
        handle.reconfigure(LogCleanerConfig { num_threads: 3, ..config }).unwrap();
        StoreCleaner::follow_pool(&mut cleaner.cleaner.lock(), &handle).unwrap();
        assert_eq!(cleaner.cleaner.lock().config().dedupe_buffer_size, (1 << 20) / 4);
        pool.shutdown();
    }
}

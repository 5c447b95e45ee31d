//! Compaction in the store: the segments of a compacted topic that are only
//! in the store (local retention deleted their local copies) are cleaned
//! there too, by the uploader's task right after a round's manifest, so one
//! task writes a partition's manifests and no two of its rounds overlap.
//!
//! When: the store's dirty ratio — bytes the manifest lists at or past the
//! store's clean point over all bytes it lists — reaches the topic's
//! `min.cleanable.dirty.ratio` and some segment is only in the store. The
//! clean point (`Manifest::store_clean_offset`, the log start until the
//! first clean) is the end of the last store clean's map.
//!
//! One store clean, with what a crash at each step leaves:
//! 1. Download the store-only segments through the read cache (verified
//!    against the manifest; held, so not evicted, for the clean) and clean
//!    them with a cleaner of the pool's share of the dedupe budget and the
//!    pool's I/O throttle: the map covers the whole tiered log from the clean
//!    point up to the manifest's end (`cleaner::store_segments`), the output
//!    goes to `.cleaned` files in a scratch directory under the cache's.
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
//!   manifest keeps its log start, end and every entry's base offset.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::cache::{CachedSegment, SegmentCache};
use super::crash_point::{reached, RemoteCrashPoint};
use super::manifest::{self, Manifest, SegmentEntry};
use super::snapshot::{self, LocalSegment};
use super::uploader::{tell_log, PartitionState, RemoteLogManager};
use super::{blocking, now_ms, RemoteError};
use crate::cleaner::store_segments::StoreSegmentsToClean;
use crate::cleaner::{CancellationToken, Cleaner, CleanerConfig, Throttler};
use crate::clock::SharedClock;
use crate::log::manager::SharedLog;
use crate::log::TopicPartition;

/// The cleaner of store-only segments, and where it writes.
#[derive(Debug)]
pub struct StoreCleaner {
    cache: Arc<SegmentCache>,
    cleaner: Arc<Mutex<Cleaner>>,
    /// Scratch for `.cleaned` segments: `<cache dir>/.clean/<tp>/`.
    scratch: PathBuf,
}

impl StoreCleaner {
    /// A cleaner with `config` (one thread's share of the pool's budget)
    /// and the pool's `throttler`, reading through `cache`.
    ///
    /// # Errors
    /// A dedupe share too small for one entry.
    pub fn new(
        cache: Arc<SegmentCache>,
        config: CleanerConfig,
        throttler: Arc<Throttler>,
        clock: SharedClock,
    ) -> Result<Self, RemoteError> {
        let cleaner = Cleaner::new(usize::MAX, config, throttler, clock).map_err(|e| {
            RemoteError::StoreClean { partition: "-".into(), reason: e.to_string() }
        })?;
        let scratch = cache.dir().join(".clean");
        Ok(Self { cache, cleaner: Arc::new(Mutex::new(cleaner)), scratch })
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
    pub(super) first_dirty: i64,
    pub(super) dirty_ratio: f64,
}

impl StoreCleanPlan {
    pub(super) fn of(m: &Manifest, local_start: i64, log_start: i64) -> Self {
        let first_dirty = m.store_clean_offset.unwrap_or(m.log_start_offset).max(log_start);
        let below_local = m.segments.iter().take_while(|s| s.next_offset <= local_start).count();
        let start = m.segments[..below_local]
            .iter()
            .position(|s| s.next_offset > log_start)
            .unwrap_or(below_local);
        let recopy = below_local.min(m.segments.len().saturating_sub(1)).saturating_sub(start);
        let (mut clean, mut dirty) = (0u64, 0u64);
        for s in &m.segments[start..] {
            if s.next_offset <= first_dirty {
                clean += s.size();
            } else {
                dirty += s.size();
            }
        }
        let total = clean + dirty;
        let dirty_ratio = if total == 0 { 0.0 } else { dirty as f64 / total as f64 };
        Self { store_only: start..below_local, recopy, first_dirty, dirty_ratio }
    }
}

/// One cleaned group, ready to upload: the entries it replaces and its own.
struct CleanedGroup {
    replaced: std::ops::Range<usize>,
    entry: SegmentEntry,
    files: LocalSegment,
}

impl RemoteLogManager {
    /// Clean `tp`'s store-only segments when its store dirty ratio calls for
    /// it (the steps are in the module doc).
    pub(super) async fn maybe_clean_store(
        &self,
        tp: &TopicPartition,
        log: &SharedLog,
        state: &mut PartitionState,
    ) -> Result<(), RemoteError> {
        let Some(cleaner) = self.store_cleaner() else { return Ok(()) };
        let Some((seq, latest)) = state.manifest.clone() else { return Ok(()) };
        let (compact, min_ratio, local_start, log_start) = {
            let l = log.read();
            let c = l.config();
            (
                c.compact,
                c.min_cleanable_dirty_ratio,
                l.local_log_start_offset(),
                l.log_start_offset(),
            )
        };
        if latest.retired || !compact {
            return Ok(());
        }
        let plan = StoreCleanPlan::of(&latest, local_start, log_start);
        if plan.recopy == 0 || plan.dirty_ratio < min_ratio {
            return Ok(());
        }
        let entries = latest.segments[plan.store_only.clone()].to_vec();
        let config = log.read().segment_config_for_cleaning();
        let mut held = Vec::with_capacity(entries.len());
        for entry in &entries {
            held.push(cleaner.cache.get(tp, entry, config).await.map_err(RemoteError::Shared)?);
        }
        let dir = cleaner.scratch.join(tp.to_string());
        let cleaned = clean_blocking(cleaner, log, held, &dir, &plan, latest.end_offset).await;
        let result = match cleaned {
            // Nothing to rewrite and nothing newer mapped: no manifest.
            Ok((end, groups)) if groups.is_empty() && end <= plan.first_dirty => Ok(()),
            Ok((end, groups)) => {
                self.publish(tp, log, state, (seq, &latest), &plan, end, groups).await
            }
            Err(e) => Err(e),
        };
        let _ = std::fs::remove_dir_all(&dir);
        cleaner.cache.release();
        result
    }

    /// Steps 2 and 3: upload the cleaned groups, then the manifest that lists
    /// them in place of what they replace.
    #[allow(clippy::too_many_arguments)]
    async fn publish(
        &self,
        tp: &TopicPartition,
        log: &SharedLog,
        state: &mut PartitionState,
        (seq, latest): (u64, &Manifest),
        plan: &StoreCleanPlan,
        end: i64,
        groups: Vec<CleanedGroup>,
    ) -> Result<(), RemoteError> {
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
        next.store_clean_offset = Some(end.min(next.end_offset));
        next.written_at_ms = now_ms();
        let removed = latest
            .segments
            .iter()
            .map(SegmentEntry::size)
            .sum::<u64>()
            .saturating_sub(next.segments.iter().map(SegmentEntry::size).sum::<u64>());
        self.check_still_latest(tp, log, state).await?;
        reached(RemoteCrashPoint::StoreCleanBeforeManifest);
        manifest::write(&self.store, tp, seq + 1, &next).await?;
        reached(RemoteCrashPoint::StoreCleanAfterManifest);
        tracing::info!(partition = %tp, seq = seq + 1, replaced = groups.iter().map(|g| g.replaced.len()).sum::<usize>(), cleaned = groups.len(), removed_bytes = removed, clean_point = end, "segments in the store cleaned");
        self.stats.store_cleaned(removed);
        tell_log(log, &next);
        state.manifest = Some((seq + 1, next));
        Ok(())
    }
}

/// Step 1 on a blocking thread: clean the held segments into `dir`, then
/// name each cleaned segment's files as a segment's and digest them.
async fn clean_blocking(
    cleaner: &StoreCleaner,
    log: &SharedLog,
    held: Vec<Arc<CachedSegment>>,
    dir: &Path,
    plan: &StoreCleanPlan,
    map_upper: i64,
) -> Result<(i64, Vec<CleanedGroup>), RemoteError> {
    let (first_dirty, recopy) = (plan.first_dirty, plan.recopy);
    let (cleaner, log, dir) = (Arc::clone(&cleaner.cleaner), Arc::clone(log), dir.to_path_buf());
    let tp = log.read().topic_partition().clone();
    blocking(move || {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(RemoteError::io(&dir))?;
        let to_clean = StoreSegmentsToClean {
            segments: held.iter().map(|s| s.segment()).collect(),
            recopy,
            dir: &dir,
            first_dirty_offset: first_dirty,
            map_upper,
        };
        let result = cleaner
            .lock()
            .clean_store_segments(&log, &to_clean, now_ms(), &CancellationToken::new())
            .map_err(|e| RemoteError::StoreClean {
                partition: tp.to_string(),
                reason: e.to_string(),
            })?;
        let mut groups = Vec::with_capacity(result.groups.len());
        for mut g in result.groups {
            g.segment.change_file_suffix("")?;
            let (base, next) = (g.segment.base_offset(), g.segment.next_offset());
            let files = snapshot::open_segment(&dir, base, next)?;
            let mut entry = snapshot::digest(&files, &dir, &mut Default::default())?;
            entry.max_timestamp =
                held[g.replaced.clone()].iter().map(|s| s.entry.max_timestamp).max().unwrap_or(-1);
            groups.push(CleanedGroup { replaced: g.replaced, entry, files });
        }
        Ok((result.end_offset, groups))
    })
    .await
}

//! `Cleaner`: one clean of one partition (Kafka's `Cleaner.clean`/`doClean`).
//! The algorithm and its invariants are in the module doc of `cleaner/`; this
//! file drives a clean as a whole and swaps each group in (step 6). It lends
//! its buffers (`buffers.rs`) to the steps beside it, none of which knows the
//! `Cleaner`: the snapshot and the groups in `source_segment.rs`, the map
//! (step 1) in `build_offset_map.rs`, the recopy and its filter (steps 2 to
//! 5) in `clean_into.rs`, the output in `group_writer.rs`.
//!
//! Locking: the log's lock is taken briefly three times — a read lock to
//! snapshot the segments (each segment's file descriptor is duplicated, so
//! reads need no lock and survive renames), and the write lock for each
//! group's swap. Appends, fetches and retention run in between; the swap
//! refuses (and the clean aborts) if a segment it read has changed.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use super::buffers::CleanerBuffers;
use super::clean_into::{last_data_offsets, Recopy};
pub use super::error::{CleanerError, CrashPoint};
use super::garbage_survey::{StalePlan, Survey};
use super::group_writer::GroupWriter;
pub use super::io_context::CancellationToken;
use super::io_context::IoContext;
use super::log_to_clean::{oldest_dirty_timestamp, LogToClean};
use super::offset_map::OffsetMap;
use super::source_segment::{group_segments, LogSnapshot, SourceSegment};
use super::stale_list::StaleList;
use super::stats::CleanerStats;
use super::throttler::Throttler;
use super::tombstone_guard::KeptTombstones;
use super::transactions::CleanedTransactionMetadata;
use crate::clock::SharedClock;
use crate::log::error::LogError;
use crate::log::segment::{LogSegment, CLEANED_SUFFIX};
use crate::log::{Log, SegmentSnapshot, SwapOutcome};

/// Settings of one cleaner (Kafka's `log.cleaner.*`, already divided among threads).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    /// This cleaner's share of `log.cleaner.dedupe.buffer.size`.
    pub dedupe_buffer_size: usize,
    /// `log.cleaner.io.buffer.load.factor`.
    pub load_factor: f64,
    /// Starting size of each of the read and write buffers (Kafka: the
    /// thread's share of `log.cleaner.io.buffer.size`, halved).
    pub io_buffer_size: usize,
    /// The buffers grow up to this for a single large batch (`message.max.bytes`);
    /// the log's own `max.message.bytes` is allowed too if larger.
    pub max_message_size: usize,
}

impl Default for CleanerConfig {
    /// Kafka's defaults for one thread: 128 MiB map, 0.9, 512 KiB of I/O buffers.
    fn default() -> Self {
        Self {
            dedupe_buffer_size: 128 << 20,
            load_factor: 0.9,
            io_buffer_size: 256 << 10,
            max_message_size: 1_048_588,
        }
    }
}

/// What a clean did.
#[derive(Debug, Clone)]
pub struct CleanResult {
    /// The first offset not mapped: the new cleaner checkpoint.
    pub end_offset: i64,
    pub stats: CleanerStats,
    /// The tombstones the clean kept with a horizon; `None` when it
    /// recopied nothing (what the last clean found still holds).
    pub kept_tombstones: Option<KeptTombstones>,
}

/// Executes cleans, one at a time, with its own map and buffers.
#[derive(Debug)]
pub struct Cleaner {
    id: usize,
    pub(super) config: CleanerConfig,
    /// The map and the buffers, lent to the map pass and the recopy.
    pub(super) buffers: CleanerBuffers,
    pub(super) throttler: Arc<Throttler>,
    pub(super) clock: SharedClock,
}

impl Cleaner {
    /// A cleaner with its own offset map of `config.dedupe_buffer_size` bytes.
    ///
    /// # Errors
    /// A dedupe budget too small for one entry, or a bad load factor.
    pub fn new(
        id: usize,
        config: CleanerConfig,
        throttler: Arc<Throttler>,
        clock: SharedClock,
    ) -> Result<Self, CleanerError> {
        let buffers = CleanerBuffers::new(
            config.dedupe_buffer_size,
            config.load_factor,
            config.io_buffer_size,
        )?;
        Ok(Self { id, config, buffers, throttler, clock })
    }

    pub fn id(&self) -> usize {
        self.id
    }
    pub fn config(&self) -> &CleanerConfig {
        &self.config
    }
    /// The map as the last clean left it (for utilization metrics).
    pub fn offset_map(&self) -> &OffsetMap {
        &self.buffers.map
    }

    /// Clean `log` once: map the dirty range `[first dirty, first uncleanable)`
    /// (as much as the map holds), then recopy every segment from the log
    /// start through the end of the mapped range, swapping each group in.
    /// `now_ms` decides delete horizons (stamped ones that passed, new ones to
    /// stamp).
    ///
    /// # Errors
    /// I/O and corruption errors (with path and position), a map too small
    /// for one batch, a log that changed under the swap, and cancellation. A
    /// group that fails before its swap deletes its `.cleaned` files; groups
    /// already swapped stay (they are complete cleans of their range), and the
    /// caller should not advance the checkpoint.
    pub fn clean(
        &mut self,
        log: &RwLock<Log>,
        to_clean: &LogToClean,
        now_ms: i64,
        cancel: &CancellationToken,
    ) -> Result<CleanResult, CleanerError> {
        let tp = to_clean.topic_partition.clone();
        let mut stats = CleanerStats { start_ms: self.clock.now_ms(), ..Default::default() };
        let snapshot = LogSnapshot::take(&log.read(), to_clean)?;
        let grow_limit = self.grow_limit(&snapshot);
        let throttler = Arc::clone(&self.throttler);
        let io = IoContext { throttler: &throttler, cancel, partition: &tp, grow_limit };

        // Step 1: the offset map over the dirty range.
        let mapped = self.buffers.build_offset_map(&snapshot, to_clean, &io, &mut stats);
        let end = mapped.inspect_err(|_| self.buffers.mapped.clear())?;
        self.note_map(&mut stats, end < to_clean.first_uncleanable_offset);
        // With nothing new to map the clean region is still recopied: tombstones
        // and markers whose delete horizon has passed leave that way (the manager
        // schedules such cleans when a horizon expires).
        let end = end.max(to_clean.first_dirty_offset);
        if snapshot.segments.first().is_none_or(|s| s.snapshot.base_offset >= end) {
            self.buffers.mapped.clear();
            stats.end_ms = self.clock.now_ms();
            return Ok(CleanResult { end_offset: end, stats, kept_tombstones: None });
        }

        // Steps 2 to 6: recopy from the log start through the end of the
        // mapped range, group by group, each swapped in as soon as it is written.
        self.buffers.prepare_recopy(to_clean.first_dirty_offset, end);
        let to_copy = snapshot.segments.iter().take_while(|s| s.snapshot.base_offset < end).count();
        let planned =
            self.plan_segments(log, &snapshot, to_clean, to_copy, (now_ms, &io), &mut stats);
        let plan = planned.inspect_err(|_| self.buffers.finish_recopy())?;
        let groups = rewritten_groups(&snapshot, &plan, &mut stats);
        let mut recopy = Recopy {
            io: &io,
            first_dirty: to_clean.first_dirty_offset,
            end,
            upper: snapshot.upper,
            // A tombstone removed locally would let a copy of its key only in
            // the store come back for a reader from the log start.
            now_ms: if snapshot.older_segments_in_store { i64::MIN } else { now_ms },
            horizon_to_stamp: now_ms.saturating_add(snapshot.config.delete_retention_ms),
            last_records: &snapshot.last_records,
            last_data_offsets: last_data_offsets(&snapshot.last_records),
            txn: CleanedTransactionMetadata::new(snapshot.aborted_transactions(to_clean)),
            stats: &mut stats,
            guard: to_clean.tombstone_guard,
            kept_tombstones: KeptTombstones::default(),
            strategy: &snapshot.strategy,
            log_start: snapshot.log_start_offset,
            stale: &plan,
            group_start: 0,
            listed: Vec::new(),
        };
        let mut walked = 0;
        let copied = groups.into_iter().try_for_each(|group| {
            // The kept segments before the group: the walk moves past them.
            (walked..group.start).for_each(|i| plan.replay_kept(i, &mut recopy.txn));
            walked = group.end;
            recopy.group_start = group.start;
            self.clean_and_swap_group(log, &snapshot, group, &mut recopy)
        });
        self.buffers.finish_recopy();
        copied?;
        let mut kept_tombstones = recopy.kept_tombstones;
        kept_tombstones.merge(&plan.kept_tombstones);
        let kept_tombstones = Some(kept_tombstones);
        self.buffers.restore_buffers();
        let unwritten = CrashPoint::StaleListsUnwritten;
        if crate::failpoint::fires_in(unwritten.failpoint(), &snapshot.dir.display().to_string()) {
            return Err(CleanerError::InjectedCrash(unwritten));
        }
        finish_stale_lists(&snapshot, &plan)?;
        let deadline = plan.earliest_deadline().into_iter().chain(stats.stale_deadline_ms).min();
        stats.stale_deadline_ms = deadline;
        // An unreadable list: the next clean maps the log from its start.
        let end = if plan.reset_checkpoint { snapshot.log_start_offset.min(end) } else { end };
        stats.end_messages = stats.messages_written;
        stats.end_ms = self.clock.now_ms();
        // The summary line is the caller's to log (the thread loop logs it on
        // the `log_cleaner` target); here it is only a debug trace.
        tracing::debug!(
            "{}",
            stats.summary(self.id, &tp.to_string(), to_clean.first_dirty_offset, end)
        );
        Ok(CleanResult { end_offset: end, stats, kept_tombstones })
    }

    /// The largest batch a buffer may grow to for `snapshot`'s log: the
    /// broker's `message.max.bytes` or the log's own, if larger.
    pub(super) fn grow_limit(&self, snapshot: &LogSnapshot) -> usize {
        self.config
            .max_message_size
            .max(snapshot.config.max_message_bytes)
            .max(self.config.io_buffer_size)
    }

    /// The map's figures once step 1 is done.
    pub(super) fn note_map(&self, stats: &mut CleanerStats, filled: bool) {
        stats.map_complete_ms = self.clock.now_ms();
        let map = &self.buffers.map;
        stats.map_entries = map.len() as u64;
        stats.map_max_entries = map.max_entries() as u64;
        stats.buffer_utilization = map.utilization();
        stats.map_filled = filled;
    }

    /// Recopy the segments `group` of `snapshot` into a `.cleaned` segment and
    /// swap it in for them ([`Log::replace_segments`] holds the numbered steps
    /// after the first, each with what recovery does if the process dies there).
    /// A group the clean leaves unchanged is kept as it is: no file is written
    /// and nothing is swapped.
    fn clean_and_swap_group(
        &mut self,
        log: &RwLock<Log>,
        snapshot: &LogSnapshot,
        group: Range<usize>,
        recopy: &mut Recopy<'_>,
    ) -> Result<(), CleanerError> {
        // Crash points are injected in the first group only.
        let first_group = group.start == 0;
        let group = &snapshot.segments[group];
        let Some(cleaned) = self.write_cleaned(snapshot, group, recopy)? else {
            recopy.stats.segments_kept += group.len() as u64;
            recopy.stats.end_size += group.iter().map(|s| s.snapshot.size).sum::<u64>();
            return Ok(());
        };
        recopy.stats.end_size += cleaned.size();
        let stop = if first_group {
            CrashPoint::configured(&log.read().dir().display().to_string())
        } else {
            None
        };
        let stop = match stop {
            Some(CrashPoint::CleanedWritten) => {
                return Err(CleanerError::InjectedCrash(CrashPoint::CleanedWritten))
            }
            Some(CrashPoint::Swap(step)) => Some(step),
            // Not one of the first group's points (`configured` never gives it).
            Some(CrashPoint::StaleListsUnwritten) | None => None,
        };
        let old: Vec<SegmentSnapshot> = group.iter().map(|s| s.snapshot).collect();
        let cleaned_path = cleaned.log_path();
        let swapped = log.write().replace_segments(vec![cleaned], &old, stop);
        match swapped {
            Ok(SwapOutcome::Replaced) => {
                recopy.stats.segments_replaced += old.len() as u64;
                recopy.stats.segments_written += 1;
                Ok(())
            }
            Ok(SwapOutcome::StoppedAt(step)) => {
                Err(CleanerError::InjectedCrash(CrashPoint::Swap(step)))
            }
            Err(e @ LogError::SwapConflict { .. }) => {
                // Nothing was renamed: the `.cleaned` files are ours to remove.
                for suffix_path in cleaned_files(&cleaned_path) {
                    let _ = std::fs::remove_file(suffix_path);
                }
                Err(e.into())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Write the group's `.cleaned` segment and make it durable: step 1 of the
    /// swap; `None` when the group is unchanged (every batch forwarded byte
    /// for byte, and its `.txnindex` entries exactly those a cleaned segment
    /// would get), and nothing was written. On any failure the `.cleaned`
    /// files are deleted.
    pub(super) fn write_cleaned(
        &mut self,
        snapshot: &LogSnapshot,
        group: &[SourceSegment],
        recopy: &mut Recopy<'_>,
    ) -> Result<Option<LogSegment>, CleanerError> {
        let mut writer = GroupWriter {
            dir: &snapshot.dir,
            base_offset: group[0].snapshot.base_offset,
            config: snapshot.segment_config,
            now_ms: self.clock.now_ms(),
            flush_at: self.config.io_buffer_size,
            io: recopy.io,
            segment: None,
            written_back: 0,
        };
        let copied = self.buffers.clean_group(recopy, group, &mut writer);
        let finished = copied.and_then(|()| {
            // The `.txnindex` keeps the entries of the ABORT markers kept
            // because their dropped batches were in this clean; every other
            // entry of the group goes with the data it described.
            let kept_aborted = recopy.txn.take_kept_aborted();
            if !writer.started() {
                let had: Vec<_> =
                    group.iter().flat_map(|s| s.aborted_txns.iter().copied()).collect();
                if had == kept_aborted {
                    return Ok(false);
                }
                // Only the `.txnindex` differs: the whole group is the prefix.
                let whole = (group.len() - 1, group[group.len() - 1].snapshot.size);
                let mut scratch = std::mem::take(&mut self.buffers.bufs.inflated);
                let started = writer.start(group, whole, &mut scratch, recopy.stats);
                self.buffers.bufs.inflated = scratch;
                started?;
            }
            let Some(cleaned) = writer.segment.as_mut() else { return Ok(false) };
            for txn in kept_aborted {
                cleaned.txn_index_mut().append(&txn)?;
            }
            // Step 1 of the swap: the cleaned segment is complete and durable.
            cleaned.on_become_inactive()?;
            cleaned.flush()?;
            if let Some(modified) = group.last().and_then(|s| s.modified) {
                // Time-based retention reads segments without timestamps by mtime.
                let _ = cleaned.file().set_modified(modified);
            }
            Ok(true)
        });
        // Store segments: one group fetched at a time.
        group.iter().for_each(SourceSegment::release);
        match finished {
            Ok(true) => Ok(writer.segment),
            Ok(false) => Ok(None),
            Err(e) => {
                if let Some(cleaned) = writer.segment {
                    if let Err(d) = cleaned.delete_files() {
                        tracing::warn!(partition = %recopy.io.partition, error = %d, "could not delete the .cleaned files of an aborted clean");
                    }
                }
                Err(e)
            }
        }
    }
}

impl Cleaner {
    /// The [`StalePlan`] of a clean reaching the first `reach` segments:
    /// the lists loaded, and with `sediment.compaction.min.segment.garbage.ratio`
    /// on (and the topic not tiered) the clean region surveyed.
    fn plan_segments(
        &mut self,
        log: &RwLock<Log>,
        snapshot: &LogSnapshot,
        to_clean: &LogToClean,
        reach: usize,
        (now_ms, io): (i64, &IoContext<'_>),
        stats: &mut CleanerStats,
    ) -> Result<StalePlan, CleanerError> {
        let mut plan = StalePlan::load(snapshot, reach)?;
        let config = &snapshot.config;
        let ratio = config.min_segment_garbage_ratio;
        let tiered = config.remote_storage_enable || snapshot.older_segments_in_store;
        if ratio <= 0.0 || tiered || plan.reset_checkpoint {
            return Ok(plan);
        }
        // Kafka's bound for a dirty record, applied to what it supersedes:
        // the oldest dirty batch's time plus max.compaction.lag.ms.
        let first_dirty = to_clean.first_dirty_offset;
        let oldest = oldest_dirty_timestamp(&log.read(), first_dirty).unwrap_or(now_ms);
        let survey = Survey {
            io,
            first_dirty,
            now_ms,
            ratio,
            new_deadline_ms: oldest.saturating_add(config.max_compaction_lag_ms.max(0)),
            max_listed: self.config.dedupe_buffer_size / 20,
            aborted: snapshot.aborted_transactions(to_clean),
        };
        self.buffers.survey_clean_region(snapshot, &survey, &mut plan, stats)?;
        Ok(plan)
    }
}

/// The groups of the segments `plan` rewrites: adjacent ones only, never
/// across a kept segment (which is counted in `stats` as kept).
fn rewritten_groups(
    snapshot: &LogSnapshot,
    plan: &StalePlan,
    stats: &mut CleanerStats,
) -> Vec<Range<usize>> {
    let reach = plan.rewrite.len();
    let mut groups = Vec::new();
    let mut i = 0;
    while i < reach {
        if !plan.rewrite[i] {
            let size = snapshot.segments[i].snapshot.size;
            stats.segments_kept += 1;
            stats.segments_kept_under_ratio += 1;
            stats.start_size += size;
            stats.end_size += size;
            i += 1;
            continue;
        }
        let j = (i..reach).find(|j| !plan.rewrite[*j]).unwrap_or(reach);
        let run = group_segments(
            &snapshot.segments[i..j],
            snapshot.config.segment_bytes as u64,
            snapshot.config.segment_index_bytes,
        );
        groups.extend(run.into_iter().map(|g| g.start + i..g.end + i));
        i = j;
    }
    groups
}

/// After the swaps, before the checkpoint moves: write the kept segments'
/// lists that gained copies, and delete the lists of rewritten segments
/// (their copies are gone) and obsolete ones; then make it durable.
///
/// # Errors
/// I/O errors writing a list or syncing the directory.
fn finish_stale_lists(snapshot: &LogSnapshot, plan: &StalePlan) -> Result<(), CleanerError> {
    let dir = &snapshot.dir;
    let mut touched = false;
    for (i, list) in plan.lists.iter().enumerate() {
        let Some(list) = list else { continue };
        let path = StaleList::path(dir, list.base_offset);
        if plan.rewrite[i] {
            touched |= std::fs::remove_file(&path).is_ok();
        } else if plan.changed[i] {
            list.write(dir).map_err(LogError::io(path))?;
            touched = true;
        }
    }
    for path in &plan.obsolete {
        touched |= std::fs::remove_file(path).is_ok();
    }
    if touched {
        File::open(dir).and_then(|d| d.sync_all()).map_err(LogError::io(dir.clone()))?;
    }
    Ok(())
}

/// The files of a `.cleaned` segment, from its log file's path.
pub(super) fn cleaned_files(log_path: &Path) -> Vec<PathBuf> {
    let name = log_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default().to_string();
    let dir = log_path.parent().map(Path::to_path_buf).unwrap_or_default();
    ["log", "index", "timeindex", "txnindex"]
        .iter()
        .map(|ext| dir.join(format!("{stem}.{ext}{CLEANED_SUFFIX}")))
        .collect()
}

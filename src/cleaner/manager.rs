//! `LogCleanerManager`: the cleaner's policy and bookkeeping (Kafka's class of
//! the same name). It decides *which* log is cleaned next; the [`Cleaner`]
//! executes one clean and the [`LogCleaner`] threads loop. It owns:
//!
//! * the per-partition [`LogCleaningState`] (a partition without one is idle);
//! * the cleaner checkpoints of every log dir (cached; written through);
//! * the uncleanable partitions with their cause, and the log dirs where
//!   cleaning stopped after an I/O error;
//! * the figures the metrics read (dirtiest ratio, compaction delay, last run).
//!
//! # Choosing a log ([`LogCleanerManager::grab_filthiest_compacted_log`])
//!
//! Every compacted log is measured ([`LogToClean::measure`]) and judged by
//! the eligibility rules (`eligibility.rs`, written once and shared with
//! [`LogCleanerManager::status`]). The eligible log with the highest dirty
//! ratio is taken; a log eligible only because its latest delete horizon
//! passed is taken only when no log is dirty enough. The dirtiest ratio and
//! compaction delay gauges are refreshed over the logs whose own state
//! (in progress, paused, log dir offline, uncleanable backoff) does not rule
//! them out.
//!
//! # Cleaning states
//!
//! ```text
//!   (idle) ──grab──▶ InProgress ──done/release──▶ (idle)
//!                        │
//!                 abort_and_pause
//!                        ▼
//!                     Aborted ──done/release──▶ Paused(1)
//!   (idle) ──abort_and_pause──▶ Paused(1)
//!   Paused(n) ──abort_and_pause──▶ Paused(n+1)
//!   Paused(n+1) ──resume──▶ Paused(n);  Paused(1) ──resume──▶ (idle)
//! ```
//!
//! `abort_and_pause` returns only once no clean of the partition runs
//! (it waits for `Aborted` to become `Paused`). Any other transition (resuming
//! an idle partition, finishing a clean that is not in progress) is a
//! [`CleaningStateError`], never a silent no-op.
//!
//! # Failures
//!
//! * A clean that fails (corruption, a map too small for one batch) marks the partition uncleanable with its cause; the threads go on
//!   with the others, and it is tried again after
//!   `log.cleaner.uncleanable.retry.backoff.ms` (Kafka keeps it until a
//!   restart). It stays counted until a clean of it succeeds.
//! * An I/O error stops cleaning in that log dir until a restart (Kafka takes
//!   the dir offline): the disk, not the partition, is suspect.
//! * A clean that found its segments changed under the swap (retention ran) is
//!   simply released and chosen again later.
//!
//! [`Cleaner`]: super::Cleaner
//! [`LogCleaner`]: super::LogCleaner

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::checkpoint::CleanerOffsetCheckpoint;
use super::cleaner::CleanResult;
use super::cleaning_state::{CleaningStateError, LogCleaningState};
use super::collaborators::{
    CleanerCollaborators, ConsumerOffsets, ProducerIdResolver, TieredStore,
};
use super::eligibility::CleaningCandidate;
use super::io_context::CancellationToken;
use super::last_clean::{LastClean, CLEAN_HISTORY};
use super::log_to_clean::LogToClean;
use super::manager_state::{log_dir_of, ManagerState, Uncleanable};
use super::tombstone_guard::TombstoneGuard;
use crate::clock::SharedClock;
use crate::log::manager::{CleaningControl, SharedLog};
use crate::log::{LogManager, TopicPartition};

/// A log chosen for cleaning, with what the thread needs to clean it.
#[derive(Debug)]
pub struct GrabbedLog {
    pub to_clean: LogToClean,
    pub log: SharedLog,
    pub log_dir: PathBuf,
    pub cancel: CancellationToken,
    /// Chosen only because a delete horizon passed.
    pub for_delete_horizon: bool,
}

/// See the module doc.
#[derive(Debug)]
pub struct LogCleanerManager {
    pub(super) logs: Arc<LogManager>,
    pub(super) clock: SharedClock,
    pub(super) uncleanable_retry_backoff_ms: i64,
    inner: Mutex<ManagerState>,
    /// Signalled whenever a state leaves `Aborted` (abort_and_pause waits on it).
    state_changed: Condvar,
    /// Names the transactional id of an open transaction in the status.
    resolver: Option<Arc<dyn ProducerIdResolver>>,
    /// The groups' committed offsets (the group coordinator, set once it exists).
    consumer_offsets: Option<Arc<dyn ConsumerOffsets>>,
    /// Tiered storage's view of the store, when it runs.
    tiered_store: Option<Arc<dyn TieredStore>>,
}

impl LogCleanerManager {
    pub fn new(
        logs: Arc<LogManager>,
        clock: SharedClock,
        uncleanable_retry_backoff_ms: i64,
    ) -> Self {
        let now = clock.now_ms();
        let inner = ManagerState { time_of_last_run_ms: now, ..Default::default() };
        Self {
            logs,
            clock,
            uncleanable_retry_backoff_ms,
            inner: Mutex::new(inner),
            state_changed: Condvar::new(),
            resolver: None,
            consumer_offsets: None,
            tiered_store: None,
        }
    }

    /// This manager, reaching the layers above through `collaborators`.
    #[must_use]
    pub fn with_collaborators(mut self, collaborators: CleanerCollaborators) -> Self {
        self.resolver = collaborators.producer_ids;
        self.consumer_offsets = collaborators.consumer_offsets;
        self.tiered_store = collaborators.tiered_store;
        self
    }

    /// This manager, naming open transactions in its status by `resolver`.
    #[must_use]
    pub fn with_producer_id_resolver(mut self, resolver: Arc<dyn ProducerIdResolver>) -> Self {
        self.resolver = Some(resolver);
        self
    }

    pub(super) fn producer_id_resolver(&self) -> Option<&dyn ProducerIdResolver> {
        self.resolver.as_deref()
    }

    pub(super) fn consumer_offsets(&self) -> Option<&dyn ConsumerOffsets> {
        self.consumer_offsets.as_deref()
    }

    /// Where `cleaner-status`, the gauges and the key audit read the store's
    /// part of tiered partitions.
    pub(super) fn tiered_store(&self) -> Option<&dyn TieredStore> {
        self.tiered_store.as_deref()
    }

    /// The guard a clean of `grabbed` respects: only when its topic asks for
    /// it and some group has offsets on the partition. Called with no lock
    /// held (the coordinator takes its own).
    fn tombstone_guard(&self, grabbed: &GrabbedLog) -> Option<TombstoneGuard> {
        let config = Arc::clone(grabbed.log.read().config());
        if !config.tombstone_wait_for_groups {
            return None;
        }
        let committed = self.consumer_offsets()?.committed(&grabbed.to_clean.topic_partition);
        TombstoneGuard::new(&committed, config.tombstone_max_wait_ms)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, ManagerState> {
        // The state is plain maps; a thread that panicked mid-update leaves
        // them consistent enough to go on (each update is one insert/remove).
        self.inner.lock()
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    pub fn log_manager(&self) -> &Arc<LogManager> {
        &self.logs
    }

    /// The state of `tp` (`None`: idle).
    pub fn cleaning_state(&self, tp: &TopicPartition) -> Option<LogCleaningState> {
        self.lock().states.get(tp).map(|(s, _)| *s)
    }

    /// Choose the eligible log with the highest dirty ratio and mark it
    /// [`LogCleaningState::InProgress`]; `None` when nothing is eligible.
    /// Also refreshes the dirtiest ratio and the compaction delay gauges, over
    /// the logs whose own state does not rule them out.
    pub fn grab_filthiest_compacted_log(&self, now_ms: i64) -> Option<GrabbedLog> {
        let mut grabbed = self.grab_filthiest(now_ms)?;
        grabbed.to_clean.tombstone_guard = self.tombstone_guard(&grabbed);
        Some(grabbed)
    }

    /// The choice itself, under the manager's lock.
    fn grab_filthiest(&self, now_ms: i64) -> Option<GrabbedLog> {
        let all = self.logs.all_logs();
        let mut inner = self.lock();
        let mut candidates: Vec<(CleaningCandidate, SharedLog)> = Vec::new();
        let (mut dirtiest_ratio, mut max_delay) = (0.0, 0);
        for (tp, shared) in all {
            let log = shared.read();
            if !log.config().compact
                || inner
                    .ruled_out(&tp, &log_dir_of(&log), now_ms, self.uncleanable_retry_backoff_ms)
                    .is_some()
            {
                continue;
            }
            let to_clean = inner.measure(&log, now_ms);
            max_delay = max_delay.max(to_clean.compaction_delay_ms);
            if to_clean.total_bytes > 0 {
                dirtiest_ratio = f64::max(dirtiest_ratio, to_clean.cleanable_ratio());
            }
            let verdict =
                inner.eligibility(&log, &to_clean, now_ms, self.uncleanable_retry_backoff_ms);
            drop(log);
            if let Ok(candidate) = verdict {
                candidates.push((candidate, shared));
            }
        }
        inner.dirtiest_ratio = dirtiest_ratio;
        inner.max_compaction_delay_ms = max_delay;
        // Logs dirty enough first; among them (or else among the quiet logs
        // whose tombstones may now go) the highest ratio.
        let rank = |c: &CleaningCandidate| (!c.for_delete_horizon, c.to_clean.cleanable_ratio());
        let (chosen, log) = candidates.into_iter().max_by(|(a, _), (b, _)| {
            let (a, b) = (rank(a), rank(b));
            a.0.cmp(&b.0).then(a.1.total_cmp(&b.1))
        })?;
        let cancel = CancellationToken::new();
        inner.states.insert(
            chosen.to_clean.topic_partition.clone(),
            (LogCleaningState::InProgress, cancel.clone()),
        );
        Some(GrabbedLog {
            to_clean: chosen.to_clean,
            log,
            log_dir: chosen.log_dir,
            cancel,
            for_delete_horizon: chosen.for_delete_horizon,
        })
    }

    /// A clean finished: record its end offset in the checkpoint and its stats.
    /// A clean that was aborted meanwhile only moves to `Paused(1)`.
    ///
    /// # Errors
    /// A partition not in progress or aborted (illegal transition). A failed
    /// checkpoint write stops cleaning in that log dir (logged), not an error here.
    pub fn done_cleaning(
        &self,
        grabbed: &GrabbedLog,
        result: &CleanResult,
    ) -> Result<(), CleaningStateError> {
        let tp = &grabbed.to_clean.topic_partition;
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        match inner.states.get(tp).map(|(s, _)| *s) {
            Some(LogCleaningState::InProgress) => {
                let entries = {
                    let cp = inner.checkpoint(&grabbed.log_dir);
                    cp.insert(tp.clone(), result.end_offset);
                    cp.clone()
                };
                if let Err(e) = CleanerOffsetCheckpoint::new(&grabbed.log_dir).write(&entries) {
                    tracing::error!(target: "log_cleaner", dir = %grabbed.log_dir.display(), error = %e, "cannot write the cleaner checkpoint; cleaning stops in this log dir");
                    inner.offline_dirs.insert(grabbed.log_dir.clone(), e.to_string());
                }
                inner.states.remove(tp);
                inner.uncleanable.remove(tp);
                let first_dirty = grabbed.to_clean.first_dirty_offset;
                let history = inner.history.entry(tp.clone()).or_default();
                if history.len() == CLEAN_HISTORY {
                    history.pop_front();
                }
                history.push_back(LastClean::new(now, first_dirty, result));
                if let Some(kept) = &result.kept_tombstones {
                    inner.kept_tombstones.insert(tp.clone(), kept.clone());
                }
                // Only a horizon still ahead can make a later clean worth it;
                // one already passed (kept for a reason) must not loop.
                match result.stats.latest_delete_horizon_ms {
                    Some(h) if h > now => inner.delete_horizons.insert(tp.clone(), h),
                    _ => inner.delete_horizons.remove(tp),
                };
                inner.stale_deadlines.insert(tp.clone(), result.stats.stale_deadline_ms);
                Ok(())
            }
            Some(LogCleaningState::Aborted) => {
                inner
                    .states
                    .insert(tp.clone(), (LogCleaningState::Paused(1), CancellationToken::new()));
                self.state_changed.notify_all();
                Ok(())
            }
            other => Err(CleaningStateError {
                partition: tp.to_string(),
                action: "finish cleaning",
                state: other,
            }),
        }
    }

    /// A clean ended without a result (aborted, failed, or its segments
    /// changed): in progress becomes idle, aborted becomes `Paused(1)`.
    ///
    /// # Errors
    /// A partition not in progress or aborted.
    pub fn release(&self, tp: &TopicPartition) -> Result<(), CleaningStateError> {
        let mut inner = self.lock();
        match inner.states.get(tp).map(|(s, _)| *s) {
            Some(LogCleaningState::InProgress) => {
                inner.states.remove(tp);
                Ok(())
            }
            Some(LogCleaningState::Aborted) => {
                inner
                    .states
                    .insert(tp.clone(), (LogCleaningState::Paused(1), CancellationToken::new()));
                self.state_changed.notify_all();
                Ok(())
            }
            other => Err(CleaningStateError {
                partition: tp.to_string(),
                action: "release",
                state: other,
            }),
        }
    }

    /// Record that cleaning `tp` failed with `cause`; it is skipped until the
    /// retry backoff passes.
    pub fn mark_uncleanable(&self, tp: &TopicPartition, cause: String) {
        let now = self.clock.now_ms();
        tracing::error!(target: "log_cleaner", partition = %tp, retry_in_ms = self.uncleanable_retry_backoff_ms, "partition is uncleanable: {cause}");
        self.lock().uncleanable.insert(tp.clone(), Uncleanable { cause, since_ms: now });
    }

    /// Stop cleaning in `dir` (an I/O error there) until a restart.
    pub fn mark_log_dir_offline(&self, dir: &Path, cause: String) {
        tracing::error!(target: "log_cleaner", dir = %dir.display(), "I/O error; cleaning stops in this log dir: {cause}");
        self.lock().offline_dirs.insert(dir.to_path_buf(), cause);
    }

    /// A cleaner thread finished a pass (Kafka's `timeOfLastRun`).
    pub fn record_run(&self, now_ms: i64) {
        self.lock().time_of_last_run_ms = now_ms;
    }

    /// Abort and pause (see [`CleaningControl::abort_and_pause_cleaning`]).
    /// While another caller's abort is still being noticed (`Aborted`), waits
    /// for it to land first, so concurrent pauses nest instead of failing.
    pub fn abort_and_pause(&self, tp: &TopicPartition) {
        let mut inner = self.lock();
        loop {
            match inner.states.get_mut(tp) {
                None => {
                    inner.states.insert(
                        tp.clone(),
                        (LogCleaningState::Paused(1), CancellationToken::new()),
                    );
                    return;
                }
                Some((LogCleaningState::Paused(n), _)) => {
                    *n += 1;
                    return;
                }
                Some((state @ LogCleaningState::InProgress, cancel)) => {
                    cancel.cancel();
                    *state = LogCleaningState::Aborted;
                    break;
                }
                Some((LogCleaningState::Aborted, _)) => self.wait(&mut inner, tp),
            }
        }
        // Ours: wait for the thread to notice (it checks before every chunk).
        while matches!(inner.states.get(tp), Some((LogCleaningState::Aborted, _))) {
            self.wait(&mut inner, tp);
        }
        // The thread moved Aborted to Paused(1): that pause is ours.
    }

    fn wait(&self, inner: &mut MutexGuard<'_, ManagerState>, tp: &TopicPartition) {
        if self.state_changed.wait_for(inner, Duration::from_secs(10)).timed_out() {
            tracing::warn!(target: "log_cleaner", partition = %tp, "still waiting for a clean to abort");
        }
    }

    /// Undo one pause.
    ///
    /// # Errors
    /// `tp` is not paused.
    pub fn resume(&self, tp: &TopicPartition) -> Result<(), CleaningStateError> {
        let mut inner = self.lock();
        match inner.states.get_mut(tp) {
            Some((LogCleaningState::Paused(1), _)) => {
                inner.states.remove(tp);
                Ok(())
            }
            Some((LogCleaningState::Paused(n), _)) => {
                *n -= 1;
                Ok(())
            }
            other => Err(CleaningStateError {
                partition: tp.to_string(),
                action: "resume",
                state: other.map(|(s, _)| *s),
            }),
        }
    }

    /// Cancel every clean in progress (shutdown): each ends as aborted.
    pub fn cancel_all(&self) {
        for (_, cancel) in self.lock().states.values() {
            cancel.cancel();
        }
    }
}

impl CleaningControl for LogCleanerManager {
    fn abort_and_pause_cleaning(&self, tp: &TopicPartition) {
        self.abort_and_pause(tp);
    }

    fn handle_log_dir_failure(&self, log_dir: &Path, cause: &str, partitions: &[TopicPartition]) {
        self.mark_log_dir_offline(log_dir, cause.to_string());
        // Paused for good: the dir serves nothing more until a restart.
        for tp in partitions {
            self.abort_and_pause(tp);
        }
    }

    fn resume_cleaning(&self, tp: &TopicPartition) {
        if let Err(e) = self.resume(tp) {
            // A resume without its pause is a bug in the caller; keep serving.
            tracing::error!(target: "log_cleaner", "{e}");
        }
    }

    fn maybe_truncate_checkpoint(&self, log_dir: &Path, tp: &TopicPartition, offset: i64) {
        let mut inner = self.lock();
        let entries = {
            let cp = inner.checkpoint(log_dir);
            match cp.get_mut(tp) {
                Some(o) if *o > offset => *o = offset,
                _ => return,
            }
            cp.clone()
        };
        tracing::info!(target: "log_cleaner", partition = %tp, offset, "cleaner checkpoint lowered to the truncated log's end");
        if let Err(e) = CleanerOffsetCheckpoint::new(log_dir).write(&entries) {
            // On disk it stays above the log end, which the next clean
            // treats as a checkpoint past the end: from the log start.
            tracing::warn!(target: "log_cleaner", partition = %tp, error = %e, "could not lower the cleaner checkpoint");
        }
    }

    fn abort_cleaning_and_forget(&self, tp: &TopicPartition, log_dir: &Path) {
        self.abort_and_pause(tp);
        let mut inner = self.lock();
        inner.states.remove(tp);
        inner.uncleanable.remove(tp);
        inner.history.remove(tp);
        inner.kept_tombstones.remove(tp);
        inner.delete_horizons.remove(tp);
        inner.stale_deadlines.remove(tp);
        let entries = {
            let cp = inner.checkpoint(log_dir);
            if cp.remove(tp).is_none() {
                return;
            }
            cp.clone()
        };
        if let Err(e) = CleanerOffsetCheckpoint::new(log_dir).write(&entries) {
            // A stale entry is harmless: a re-created partition starts past its
            // log end, which resets to the log start.
            tracing::warn!(target: "log_cleaner", partition = %tp, error = %e, "could not drop the deleted partition from the cleaner checkpoint");
        }
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;

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

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::checkpoint::CleanerOffsetCheckpoint;
use super::cleaner::{CancellationToken, CleanResult};
use super::cleaning_state::{CleaningStateError, LogCleaningState};
use super::eligibility::CleaningCandidate;
use super::log_to_clean::LogToClean;
use super::status::{LastClean, ProducerIdResolver};
use crate::clock::SharedClock;
use crate::log::manager::{CleaningControl, SharedLog};
use crate::log::{Log, LogManager, TopicPartition};

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

#[derive(Debug, Clone)]
pub(super) struct Uncleanable {
    pub(super) cause: String,
    pub(super) since_ms: i64,
}

/// The manager's state, under its one mutex.
#[derive(Debug, Default)]
pub(super) struct Inner {
    pub(super) states: HashMap<TopicPartition, (LogCleaningState, CancellationToken)>,
    pub(super) uncleanable: HashMap<TopicPartition, Uncleanable>,
    pub(super) offline_dirs: BTreeMap<PathBuf, String>,
    checkpoints: HashMap<PathBuf, BTreeMap<TopicPartition, i64>>,
    pub(super) last_clean: HashMap<TopicPartition, LastClean>,
    pub(super) delete_horizons: HashMap<TopicPartition, i64>,
    pub(super) dirtiest_ratio: f64,
    pub(super) max_compaction_delay_ms: i64,
    pub(super) time_of_last_run_ms: i64,
}

impl Inner {
    /// The cached checkpoint of `dir`, read on first use. An unreadable file
    /// only costs work (everything is dirty again), so it is logged and ignored.
    fn checkpoint(&mut self, dir: &Path) -> &mut BTreeMap<TopicPartition, i64> {
        self.checkpoints.entry(dir.to_path_buf()).or_insert_with(|| {
            CleanerOffsetCheckpoint::new(dir).read().unwrap_or_else(|e| {
                tracing::warn!(target: "log_cleaner", dir = %dir.display(), error = %e, "unreadable cleaner checkpoint; cleaning from the log starts");
                BTreeMap::new()
            })
        })
    }

    /// The cleaner checkpoint of `tp`, if its log dir has one for it.
    pub(super) fn checkpoint_of(&mut self, log_dir: &Path, tp: &TopicPartition) -> Option<i64> {
        self.checkpoint(log_dir).get(tp).copied()
    }

    /// `log` measured from its cleaner checkpoint.
    pub(super) fn measure(&mut self, log: &Log, now_ms: i64) -> LogToClean {
        let checkpoint = self.checkpoint_of(&log_dir_of(log), log.topic_partition());
        LogToClean::measure(log, checkpoint, now_ms)
    }
}

pub(super) fn log_dir_of(log: &Log) -> PathBuf {
    log.dir().parent().map(Path::to_path_buf).unwrap_or_default()
}

/// See the module doc.
#[derive(Debug)]
pub struct LogCleanerManager {
    pub(super) logs: Arc<LogManager>,
    pub(super) clock: SharedClock,
    pub(super) uncleanable_retry_backoff_ms: i64,
    inner: Mutex<Inner>,
    /// Signalled whenever a state leaves `Aborted` (abort_and_pause waits on it).
    state_changed: Condvar,
    /// Names the transactional id of an open transaction in the status.
    resolver: Option<Arc<dyn ProducerIdResolver>>,
}

impl LogCleanerManager {
    pub fn new(
        logs: Arc<LogManager>,
        clock: SharedClock,
        uncleanable_retry_backoff_ms: i64,
    ) -> Self {
        let now = clock.now_ms();
        let inner = Inner { time_of_last_run_ms: now, ..Default::default() };
        Self {
            logs,
            clock,
            uncleanable_retry_backoff_ms,
            inner: Mutex::new(inner),
            state_changed: Condvar::new(),
            resolver: None,
        }
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

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
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
        let all = self.logs.all_logs();
        let mut inner = self.lock();
        let mut candidates: Vec<(CleaningCandidate, SharedLog)> = Vec::new();
        let (mut dirtiest_ratio, mut max_delay) = (0.0, 0);
        for (tp, shared) in all {
            let log = shared.read();
            if !log.config().compact
                || self.ruled_out(&inner, &tp, &log_dir_of(&log), now_ms).is_some()
            {
                continue;
            }
            let to_clean = inner.measure(&log, now_ms);
            max_delay = max_delay.max(to_clean.compaction_delay_ms);
            if to_clean.total_bytes > 0 {
                dirtiest_ratio = f64::max(dirtiest_ratio, to_clean.cleanable_ratio());
            }
            let verdict = self.eligibility(&inner, &log, &to_clean, now_ms);
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
                inner.last_clean.insert(tp.clone(), LastClean::new(now, first_dirty, result));
                // Only a horizon still ahead can make a later clean worth it;
                // one already passed (kept for a reason) must not loop.
                match result.stats.latest_delete_horizon_ms {
                    Some(h) if h > now => inner.delete_horizons.insert(tp.clone(), h),
                    _ => inner.delete_horizons.remove(tp),
                };
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

    fn wait(&self, inner: &mut MutexGuard<'_, Inner>, tp: &TopicPartition) {
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

    fn resume_cleaning(&self, tp: &TopicPartition) {
        if let Err(e) = self.resume(tp) {
            // A resume without its pause is a bug in the caller; keep serving.
            tracing::error!(target: "log_cleaner", "{e}");
        }
    }

    fn abort_cleaning_and_forget(&self, tp: &TopicPartition, log_dir: &Path) {
        self.abort_and_pause(tp);
        let mut inner = self.lock();
        inner.states.remove(tp);
        inner.uncleanable.remove(tp);
        inner.last_clean.remove(tp);
        inner.delete_horizons.remove(tp);
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
mod tests {
    use super::super::log_to_clean::OpenTransaction;
    use super::super::status::Ineligible;
    use super::*;
    use crate::clock::{Clock, MockClock};
    use crate::log::compression::Compression;
    use crate::log::record_batch::BatchBuilder;
    use crate::log::LogManagerConfig;

    struct Fixture {
        _dir: tempfile::TempDir,
        clock: Arc<MockClock>,
        logs: Arc<LogManager>,
        manager: LogCleanerManager,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let clock = MockClock::new(1_000_000);
        let logs =
            Arc::new(LogManager::open(LogManagerConfig::new(dir.path()), clock.clone()).unwrap());
        let manager = LogCleanerManager::new(Arc::clone(&logs), clock.clone(), 60_000);
        Fixture { _dir: dir, clock, logs, manager }
    }

    fn compacted(f: &Fixture, name: &str, extra: &[(&str, &str)]) -> TopicPartition {
        let mut overrides: BTreeMap<String, String> =
            [("cleanup.policy".to_string(), "compact".to_string())].into();
        for (k, v) in extra {
            overrides.insert(k.to_string(), v.to_string());
        }
        f.logs.create_topic(name, 1, overrides).unwrap();
        TopicPartition::new(name, 0)
    }

    /// Append `keys` (one record each, value = key) as one batch, then roll so they are closed.
    fn append_closed(f: &Fixture, tp: &TopicPartition, keys: &[&str]) {
        let log = f.logs.get_log(tp).unwrap();
        let mut log = log.write();
        let mut b = BatchBuilder::new(Compression::None, f.clock.now_ms());
        for k in keys {
            b.append(f.clock.now_ms(), Some(k.as_bytes()), Some(b"value-of-some-length"));
        }
        log.append_as_leader(&mut b.build()).unwrap();
        log.roll_if_not_empty().unwrap();
    }

    fn set_checkpoint(f: &Fixture, tp: &TopicPartition, offset: i64) {
        let dir = f.logs.get_log(tp).unwrap().read().dir().parent().unwrap().to_path_buf();
        CleanerOffsetCheckpoint::new(&dir).update(tp, offset).unwrap();
    }

    fn finish(f: &Fixture, g: &GrabbedLog) {
        let end = g.to_clean.first_uncleanable_offset;
        f.manager
            .done_cleaning(g, &CleanResult { end_offset: end, stats: Default::default() })
            .unwrap();
    }

    #[test]
    fn filthiest_first_then_the_next() {
        let f = fixture();
        // Each log: a clean segment of 4 records, then d dirty segments of 4.
        let a = compacted(&f, "a", &[("min.cleanable.dirty.ratio", "0.1")]);
        let b = compacted(&f, "b", &[("min.cleanable.dirty.ratio", "0.1")]);
        let c = compacted(&f, "c", &[("min.cleanable.dirty.ratio", "0.1")]);
        for (tp, dirty) in [(&a, 1), (&b, 3), (&c, 2)] {
            append_closed(&f, tp, &["k1", "k2", "k3", "k4"]);
            for _ in 0..dirty {
                append_closed(&f, tp, &["k1", "k2", "k3", "k4"]);
            }
            set_checkpoint(&f, tp, 4);
        }
        let now = f.clock.now_ms();
        let first = f.manager.grab_filthiest_compacted_log(now).unwrap();
        assert_eq!(first.to_clean.topic_partition, b, "3/4 dirty beats 2/3 and 1/2");
        assert!((first.to_clean.cleanable_ratio() - 0.75).abs() < 1e-9);
        assert_eq!(f.manager.status().max_dirty_percent, 75);
        assert_eq!(f.manager.cleaning_state(&b), Some(LogCleaningState::InProgress));
        // b is in progress: the next thread takes c, then a.
        let second = f.manager.grab_filthiest_compacted_log(now).unwrap();
        assert_eq!(second.to_clean.topic_partition, c);
        let third = f.manager.grab_filthiest_compacted_log(now).unwrap();
        assert_eq!(third.to_clean.topic_partition, a);
        assert!(f.manager.grab_filthiest_compacted_log(now).is_none());
        for g in [&first, &second, &third] {
            finish(&f, g);
        }
        // Checkpoints moved to the end of the cleaned ranges: nothing dirty now.
        assert!(f.manager.grab_filthiest_compacted_log(now).is_none());
        assert_eq!(f.manager.status().max_dirty_percent, 0);
        let cp = CleanerOffsetCheckpoint::new(f._dir.path()).read().unwrap();
        assert_eq!(cp[&b], 16);
        assert_eq!(cp[&a], 8);
    }

    #[test]
    fn under_the_ratio_waits_for_max_compaction_lag() {
        let f = fixture();
        let tp = compacted(
            &f,
            "lazy",
            &[("min.cleanable.dirty.ratio", "0.9"), ("max.compaction.lag.ms", "60000")],
        );
        append_closed(&f, &tp, &["k1", "k2", "k3", "k4"]);
        append_closed(&f, &tp, &["k1", "k2", "k3", "k4"]);
        set_checkpoint(&f, &tp, 4);
        assert!(
            f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none(),
            "ratio 0.5 is under 0.9"
        );
        let st = f.manager.status();
        assert!(
            matches!(st.partitions[0].ineligible, Some(Ineligible::UnderRatio { .. })),
            "{:?}",
            st.partitions[0]
        );
        f.clock.advance(59_999);
        assert!(
            f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none(),
            "lag not yet passed"
        );
        f.clock.advance(2);
        let g = f
            .manager
            .grab_filthiest_compacted_log(f.clock.now_ms())
            .expect("max.compaction.lag.ms passed");
        assert_eq!(g.to_clean.topic_partition, tp);
        assert_eq!(f.manager.status().max_compaction_delay_ms, 1, "the max-compaction-delay gauge");
        finish(&f, &g);
    }

    #[test]
    fn runtime_config_changes_are_read_at_each_decision() {
        let f = fixture();
        let tp = compacted(&f, "t", &[("min.cleanable.dirty.ratio", "0.9")]);
        append_closed(&f, &tp, &["k1", "k2"]);
        append_closed(&f, &tp, &["k1", "k2"]);
        set_checkpoint(&f, &tp, 2);
        assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none());
        let overrides: BTreeMap<String, String> =
            [("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0.1")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        f.logs.alter_topic_config("t", overrides).unwrap();
        assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_some());
    }

    /// The coordinator as the status sees it: one transactional id, for pid 42.
    #[derive(Debug)]
    struct OneTxnId;

    impl ProducerIdResolver for OneTxnId {
        fn transactional_id(&self, producer_id: i64) -> Option<String> {
            (producer_id == 42).then(|| "app-7".to_string())
        }
    }

    #[test]
    fn an_open_transaction_bounds_cleaning_and_is_named() {
        use crate::log::control_record::EndTransactionMarker;
        let f = fixture();
        let named = LogCleanerManager::new(Arc::clone(&f.logs), f.clock.clone(), 60_000)
            .with_producer_id_resolver(Arc::new(OneTxnId));
        let tp = compacted(&f, "txn", &[]);
        append_closed(&f, &tp, &["k1", "k1"]);
        let log = f.logs.get_log(&tp).unwrap();
        // The age counts from the broker's append, not the batch's timestamp.
        let mut b = BatchBuilder::new(Compression::None, 0).producer(42, 0, 0);
        b.transactional = true;
        b.append(0, Some(b"k1"), Some(b"uncommitted"));
        log.write().append_as_leader(&mut b.build()).unwrap();
        log.write().roll_if_not_empty().unwrap();
        append_closed(&f, &tp, &["k2"]);
        f.clock.advance(5000);
        // The transaction opens the dirty range: it is why nothing is cleaned.
        set_checkpoint(&f, &tp, 2);
        let open = |id: Option<&str>| OpenTransaction {
            producer_id: 42,
            first_offset: 2,
            age_ms: Some(5000),
            transactional_id: id.map(str::to_string),
        };
        for (manager, id) in [(&f.manager, None), (&named, Some("app-7"))] {
            let st = manager.status();
            let p = &st.partitions[0];
            assert_eq!(p.first_uncleanable_offset, 2, "the first unstable offset bounds the range");
            assert_eq!(p.open_transaction, Some(open(id)));
            assert_eq!(p.ineligible, Some(Ineligible::OpenTransaction(open(id))));
            let reason = p.reason.clone().unwrap();
            assert!(reason.contains("producer id 42") && reason.contains("for 5s"), "{reason}");
            match id {
                None => assert!(reason.contains("no transactional id known"), "{reason}"),
                Some(_) => assert!(reason.contains("transactional id \"app-7\""), "{reason}"),
            }
        }
        assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none());
        // Dirty data below it: cleanable up to it, and the holder still named.
        set_checkpoint(&f, &tp, 0);
        let named = LogCleanerManager::new(Arc::clone(&f.logs), f.clock.clone(), 60_000)
            .with_producer_id_resolver(Arc::new(OneTxnId));
        let st = named.status();
        assert!(st.partitions[0].eligible, "{:?}", st.partitions[0].ineligible);
        assert_eq!(st.partitions[0].open_transaction, Some(open(Some("app-7"))));
        // Committed: the bound is the active segment again.
        log.write().append_end_txn_marker(42, 0, EndTransactionMarker::commit(0)).unwrap();
        log.write().roll_if_not_empty().unwrap();
        let st = named.status();
        let p = &st.partitions[0];
        assert_eq!(p.open_transaction, None);
        assert_eq!(p.first_uncleanable_offset, log.read().active_segment().base_offset());
        assert!(p.eligible, "{:?}", p.ineligible);
    }

    #[test]
    fn min_lag_only_active_and_no_dirty_reasons() {
        let f = fixture();
        let lag = compacted(&f, "lag", &[("min.compaction.lag.ms", "60000")]);
        append_closed(&f, &lag, &["k1", "k1"]);
        let active = compacted(&f, "active", &[]);
        {
            let log = f.logs.get_log(&active).unwrap();
            let mut b = BatchBuilder::new(Compression::None, f.clock.now_ms());
            b.append(f.clock.now_ms(), Some(b"k"), Some(b"v"));
            log.write().append_as_leader(&mut b.build()).unwrap();
        }
        let st = f.manager.status();
        let reason =
            |t: &str| st.partitions.iter().find(|p| p.topic == t).unwrap().ineligible.clone();
        assert_eq!(reason("lag"), Some(Ineligible::InsideMinCompactionLag));
        assert_eq!(reason("active"), Some(Ineligible::OnlyActiveSegmentDirty));
        f.clock.advance(60_001);
        assert_eq!(
            f.manager
                .grab_filthiest_compacted_log(f.clock.now_ms())
                .unwrap()
                .to_clean
                .topic_partition,
            lag
        );
    }

    #[test]
    fn state_transitions_and_illegal_ones() {
        let f = fixture();
        let tp = compacted(&f, "s", &[]);
        append_closed(&f, &tp, &["k1", "k1"]);
        // Idle: resume and release are illegal.
        assert!(f.manager.resume(&tp).is_err());
        assert!(f.manager.release(&tp).is_err());
        // Paused nests and is never grabbed.
        f.manager.abort_and_pause(&tp);
        f.manager.abort_and_pause(&tp);
        assert_eq!(f.manager.cleaning_state(&tp), Some(LogCleaningState::Paused(2)));
        assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none());
        f.manager.resume(&tp).unwrap();
        f.manager.resume(&tp).unwrap();
        assert_eq!(f.manager.cleaning_state(&tp), None);
        // In progress, then aborted by another thread: that thread waits until
        // the cleaner releases, and then owns Paused(1).
        let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
        let manager = Arc::new(f.manager);
        let m2 = Arc::clone(&manager);
        let tp2 = tp.clone();
        let pauser = std::thread::spawn(move || m2.abort_and_pause(&tp2));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !g.cancel.is_cancelled() {
            assert!(std::time::Instant::now() < deadline, "abort never cancelled the clean");
            std::thread::yield_now();
        }
        assert_eq!(manager.cleaning_state(&tp), Some(LogCleaningState::Aborted));
        assert!(manager.resume(&tp).is_err(), "aborted is not paused yet");
        manager.release(&tp).unwrap();
        pauser.join().unwrap();
        assert_eq!(manager.cleaning_state(&tp), Some(LogCleaningState::Paused(1)));
        assert!(manager.release(&tp).is_err(), "a paused partition is not being cleaned");
        manager.resume(&tp).unwrap();
        assert_eq!(manager.cleaning_state(&tp), None);
    }

    #[test]
    fn uncleanable_is_skipped_until_the_backoff_and_counted() {
        let f = fixture();
        let bad = compacted(&f, "bad", &[]);
        let good = compacted(&f, "good", &[]);
        append_closed(&f, &bad, &["k1", "k1", "k1"]);
        append_closed(&f, &good, &["k1", "k1"]);
        let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
        let first = g.to_clean.topic_partition.clone();
        f.manager.mark_uncleanable(&first, "corrupt batch".into());
        f.manager.release(&first).unwrap();
        let next = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
        assert_ne!(next.to_clean.topic_partition, first);
        finish(&f, &next);
        let st = f.manager.status();
        assert_eq!(st.log_dirs[0].uncleanable_partitions, 1);
        assert!(st.log_dirs[0].uncleanable_bytes > 0);
        assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none());
        f.clock.advance(60_000);
        let retry = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
        assert_eq!(retry.to_clean.topic_partition, first);
        finish(&f, &retry);
        assert_eq!(
            f.manager.status().log_dirs[0].uncleanable_partitions,
            0,
            "a successful clean clears it"
        );
    }

    #[test]
    fn an_expired_delete_horizon_schedules_a_clean() {
        let f = fixture();
        let tp = compacted(&f, "h", &[("min.cleanable.dirty.ratio", "0.9")]);
        append_closed(&f, &tp, &["k1", "k2"]);
        let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
        let horizon = f.clock.now_ms() + 1000;
        let stats = crate::cleaner::CleanerStats {
            latest_delete_horizon_ms: Some(horizon),
            ..Default::default()
        };
        f.manager.done_cleaning(&g, &CleanResult { end_offset: 2, stats }).unwrap();
        assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none());
        f.clock.advance(1000);
        let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).expect("horizon passed");
        assert!(g.for_delete_horizon);
        finish(&f, &g);
        f.clock.advance(1000);
        assert!(
            f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none(),
            "no horizon left: no loop"
        );
    }

    #[test]
    fn deleting_a_topic_forgets_its_checkpoint() {
        let f = fixture();
        let tp = compacted(&f, "gone", &[]);
        append_closed(&f, &tp, &["k1", "k1"]);
        let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
        finish(&f, &g);
        let cp = CleanerOffsetCheckpoint::new(f._dir.path());
        assert_eq!(cp.read().unwrap().get(&tp), Some(&2));
        f.manager.abort_cleaning_and_forget(&tp, f._dir.path());
        assert_eq!(cp.read().unwrap().get(&tp), None);
        assert_eq!(f.manager.cleaning_state(&tp), None);
    }
}

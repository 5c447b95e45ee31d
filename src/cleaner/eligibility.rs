//! The eligibility rules of the [`LogCleanerManager`]: which compacted logs a
//! cleaner thread may take now, and why each other one may not. They are
//! written once, here; the choice
//! ([`LogCleanerManager::grab_filthiest_compacted_log`]) and
//! [`LogCleanerManager::status`] (which shows the [`Ineligible`] reason) both
//! use them.
//!
//! # The rules, in the order they are tried
//!
//! A compacted log is measured first ([`LogToClean::measure`]): the first
//! dirty offset (the checkpoint, reset to the log start when outside the log)
//! and the first uncleanable offset ([`cleanable_offsets`]) give clean bytes,
//! cleanable bytes and the dirty ratio `cleanable / (clean + cleanable)`. Then
//! the first rule that applies decides:
//!
//! 1. It is being cleaned or is paused: [`Ineligible::InProgress`], [`Ineligible::Paused`].
//! 2. Its log dir stopped cleaning after an I/O error: [`Ineligible::LogDirOffline`].
//! 3. A clean of it failed and `log.cleaner.uncleanable.retry.backoff.ms`
//!    has not passed: [`Ineligible::Uncleanable`].
//! 4. It holds no bytes: [`Ineligible::Empty`].
//! 5. It is eligible when its ratio exceeds `min.cleanable.dirty.ratio`, or
//!    its `max.compaction.lag.ms` has passed for the oldest dirty closed
//!    segment (the first batch's max timestamp) and it has cleanable bytes.
//!    It is eligible, too, once the earliest deadline of its stale lists
//!    (segments kept under `sediment.compaction.min.segment.garbage.ratio`,
//!    `garbage_survey.rs`) has passed, or at once when its last clean held
//!    a tombstone for listed copies it removed.
//! 6. Otherwise it is eligible only for its delete horizon when the latest
//!    delete horizon remembered from its last clean has passed, so expired
//!    tombstones leave even when nothing new is written (Kafka's
//!    `latestDeleteHorizon`); such a log is taken only when no log is
//!    eligible by rule 5.
//! 7. Otherwise, why nothing can be cleaned: [`Ineligible::UnderRatio`] when
//!    it has cleanable bytes, else [`Ineligible::NoDirtyRecords`] (the
//!    checkpoint is at the log end), [`Ineligible::OpenTransaction`] (the
//!    first unstable offset bounds the range: an open transaction's data is
//!    not judged before its marker), [`Ineligible::InsideMinCompactionLag`]
//!    (the dirty records are younger than `min.compaction.lag.ms`) or
//!    [`Ineligible::OnlyActiveSegmentDirty`].
//!
//! Rules 1 to 3 need nothing read from the log (`ManagerState::ruled_out`
//! is also used on its own, to skip measuring such logs). Each decision reads
//! the log's *current* config, so `kafka-configs --alter` takes effect at the
//! next decision.
//!
//! [`cleanable_offsets`]: super::cleanable_offsets

use std::path::{Path, PathBuf};

use super::cleaning_state::LogCleaningState;
use super::log_to_clean::LogToClean;
use super::manager_state::{log_dir_of, ManagerState};
use super::status::Ineligible;
use crate::log::{Log, TopicPartition};

/// A compacted log the eligibility rules let a thread clean now.
#[derive(Debug, Clone)]
pub struct CleaningCandidate {
    pub to_clean: LogToClean,
    pub log_dir: PathBuf,
    /// Eligible only because its latest delete horizon passed: it is taken
    /// only when no log is dirty enough (Kafka's `latestDeleteHorizon`).
    pub for_delete_horizon: bool,
}

impl ManagerState {
    /// The rules that need nothing read from the log: the partition is being
    /// cleaned or paused, its log dir stopped cleaning, or it failed and its
    /// retry backoff has not passed.
    pub(super) fn ruled_out(
        &self,
        tp: &TopicPartition,
        log_dir: &Path,
        now_ms: i64,
        retry_backoff_ms: i64,
    ) -> Option<Ineligible> {
        match self.states.get(tp).map(|(s, _)| *s) {
            Some(LogCleaningState::InProgress) => return Some(Ineligible::InProgress),
            Some(s) => return Some(Ineligible::Paused { state: s.to_string() }),
            None => {}
        }
        if let Some(cause) = self.offline_dirs.get(log_dir) {
            return Some(Ineligible::LogDirOffline { cause: cause.clone() });
        }
        let u = self.uncleanable.get(tp)?;
        let retry_at = u.since_ms.saturating_add(retry_backoff_ms);
        (now_ms < retry_at).then(|| Ineligible::Uncleanable {
            cause: u.cause.clone(),
            retry_in_ms: retry_at - now_ms,
        })
    }

    /// The eligibility rules of the module doc, in the order they are tried:
    /// the candidate, or why `log` (measured as `to_clean`) may not be cleaned now.
    pub(super) fn eligibility(
        &self,
        log: &Log,
        to_clean: &LogToClean,
        now_ms: i64,
        retry_backoff_ms: i64,
    ) -> Result<CleaningCandidate, Ineligible> {
        let tp = &to_clean.topic_partition;
        let log_dir = log_dir_of(log);
        if let Some(why) = self.ruled_out(tp, &log_dir, now_ms, retry_backoff_ms) {
            return Err(why);
        }
        if to_clean.total_bytes == 0 {
            return Err(Ineligible::Empty);
        }
        let ratio = to_clean.cleanable_ratio();
        let min_cleanable_dirty_ratio = log.config().min_cleanable_dirty_ratio;
        let overdue = to_clean.compaction_delay_ms > 0 && to_clean.cleanable_bytes > 0;
        // A kept segment's stale copies are due (their list's deadline, or
        // a tombstone waits for the copies the last clean removed).
        let stale_due =
            self.stale_deadlines.get(tp).is_some_and(|d| d.is_some_and(|d| d <= now_ms));
        let overdue = overdue || stale_due;
        let dirty_enough = overdue || ratio > min_cleanable_dirty_ratio;
        let horizon_passed = self.delete_horizons.get(tp).is_some_and(|h| *h <= now_ms);
        if dirty_enough || horizon_passed {
            let to_clean = to_clean.clone();
            return Ok(CleaningCandidate { to_clean, log_dir, for_delete_horizon: !dirty_enough });
        }
        Err(if to_clean.cleanable_bytes > 0 {
            Ineligible::UnderRatio { ratio, min_cleanable_dirty_ratio }
        } else if to_clean.first_dirty_offset >= log.log_end_offset() {
            Ineligible::NoDirtyRecords
        } else if let Some(t) = &to_clean.open_transaction {
            Ineligible::OpenTransaction(t.clone())
        } else if to_clean.first_uncleanable_offset < log.active_segment().base_offset() {
            Ineligible::InsideMinCompactionLag
        } else {
            Ineligible::OnlyActiveSegmentDirty
        })
    }
}

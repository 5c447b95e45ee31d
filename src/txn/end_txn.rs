//! Ending a transaction (Kafka's `TransactionCoordinator.endTransaction` and
//! the completion half of `TransactionMarkerChannelManager`): EndTxn from a
//! client, and the aborts the coordinator starts itself (a fence, a timeout).
//!
//! # Crash protocol
//!
//! The steps, and what a restart finds after a crash right after each
//! (recovery is [`TransactionCoordinator::load`]):
//!
//! 1. Under the id's mutex: validate (producer id, epoch, state) and prepare
//!    PrepareCommit/PrepareAbort as the pending transition. For a fence the
//!    bumped epoch is applied in memory here.
//!    *Crash:* nothing was written; the log says Ongoing. The client's retried
//!    EndTxn runs again, or the timeout aborts the transaction.
//! 2. Append the Prepare record to `__transaction_state`, then complete the
//!    transition and, at once under the same mutex hold, prepare the
//!    Complete transition (pending until step 4; meanwhile every request on
//!    the id gets CONCURRENT_TRANSACTIONS). A failed append drops the pending
//!    transition and answers the error (and marks a fence failed).
//!    *Crash:* the load finds PrepareCommit/PrepareAbort: the outcome is
//!    decided. Recovery writes every marker with the stored producer id and
//!    epoch, then the Complete record.
//! 3. With no mutex held, write the marker to each partition of the
//!    transaction, in topic/partition order, through the
//!    [`TransactionMarkerWriter`](super::TransactionMarkerWriter). A partition whose topic is gone counts as
//!    done. A marker that fails is kept, the others are still written, and
//!    the transaction stays pending (still Prepare* on disk and in memory)
//!    for [`TransactionCoordinator::retry_pending_completions`], which
//!    rewrites only the failed ones; the client has its answer (the outcome
//!    is decided) and the id answers CONCURRENT_TRANSACTIONS meanwhile.
//!    *Crash after k of n markers:* as after step 2, except that recovery
//!    writes a marker only where the producer still has an open transaction
//!    (the marker writer's `has_open_transaction`): the k partitions that
//!    had theirs, and any the transaction wrote nothing to, are skipped, so
//!    every partition ends with exactly one marker of the transaction (Kafka
//!    resends all n, and a partition appends a second, inert marker; the
//!    skipped ones change no offset, index or group either way).
//! 4. Append the Complete record (no partitions, start time kept) and
//!    complete the transition. A failed append keeps the transaction pending
//!    with no marker left, so the retry writes only the Complete record.
//!    *Crash after:* nothing to do; the load finds CompleteCommit/CompleteAbort.
//!
//! The Complete record is therefore never written before every marker is,
//! and no marker is written before the Prepare record is in the log.

use std::collections::BTreeSet;

use super::coordinator::{
    check_producer, concurrent, current_producer, ProducerIdAndEpoch, TransactionCoordinator,
};
use super::error::TxnError;
use super::marker_writer::{MarkerWriteError, TransactionResult, TxnMarker, COORDINATOR_EPOCH};
use super::schema::NO_PRODUCER_ID;
use super::state_manager::SharedTransactionMetadata;
use super::transaction_metadata::{TransactionMetadata, TransactionState};
use super::transaction_version::TransactionVersion;
use super::txn_transit_metadata::{TxnTransitMetadata, EXHAUSTED_EPOCH};
use crate::log::TopicPartition;

/// The Prepare state an EndTxn of `result` moves an Ongoing transaction to.
fn prepare_state(result: TransactionResult) -> TransactionState {
    match result {
        TransactionResult::Commit => TransactionState::PrepareCommit,
        TransactionResult::Abort => TransactionState::PrepareAbort,
    }
}

/// INVALID_TXN_STATE: an EndTxn of `result` the id's state does not allow.
fn invalid_state(m: &TransactionMetadata, result: TransactionResult) -> TxnError {
    TxnError::InvalidTxnState {
        transactional_id: m.transactional_id.clone(),
        state: m.state(),
        request: match result {
            TransactionResult::Commit => "EndTxn(commit)",
            TransactionResult::Abort => "EndTxn(abort)",
        },
    }
}

/// An EndTxn found a state no transition ever leaves in the cache (a bug).
fn never_reached(m: &TransactionMetadata) -> TxnError {
    TxnError::IllegalTransit {
        transactional_id: m.transactional_id.clone(),
        detail: format!("EndTxn found state {}", m.state()),
    }
}

/// A decided transaction whose markers (some of them) or Complete record are
/// still to be written.
#[derive(Debug)]
pub(super) struct PendingCompletion {
    metadata: SharedTransactionMetadata,
    /// The prepared CompleteCommit/CompleteAbort transition.
    complete: TxnTransitMetadata,
    marker: TxnMarker,
    /// Partitions still without their marker.
    remaining: BTreeSet<TopicPartition>,
}

/// What validating an EndTxn decided.
enum EndTxnStep {
    /// Nothing to write: a retry of an EndTxn that completed; the answer is
    /// the current producer id and epoch.
    Done(ProducerIdAndEpoch),
    Prepared(TxnTransitMetadata),
}

impl TransactionCoordinator {
    /// EndTxn from a client (v0-4, transaction protocol 1): commit or abort
    /// the id's Ongoing transaction. Returns once the outcome is decided
    /// (step 2 of the module doc); the markers and the Complete record are
    /// normally written before it returns too, else retried later.
    ///
    /// # Errors
    /// INVALID_REQUEST, COORDINATOR_LOAD_IN_PROGRESS,
    /// INVALID_PRODUCER_ID_MAPPING (unknown id, other producer id),
    /// PRODUCER_FENCED (other epoch), CONCURRENT_TRANSACTIONS (pending, or
    /// the same outcome still completing), INVALID_TXN_STATE (no transaction,
    /// or the other outcome decided), a storage error.
    pub fn end_transaction(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
    ) -> Result<(), TxnError> {
        let tv = TransactionVersion::TV_0;
        self.end_transaction_with(transactional_id, producer_id, producer_epoch, result, tv)
            .map(|_| ())
    }

    /// EndTxn at either protocol level (`tv`, from the request's version).
    /// Under transactions v2 (EndTxn v5) every EndTxn bumps the epoch, an
    /// abort with no transaction open is taken (epoch bumped, no marker), and
    /// a retry is recognised by the epoch before the bump; the answer is the
    /// producer id and epoch the client goes on with (a new producer id at
    /// epoch 0 once the epoch is exhausted).
    ///
    /// # Errors
    /// As [`Self::end_transaction`]; under v2 a producer at any epoch but the
    /// current one (or the one before it, for a retry) is PRODUCER_FENCED.
    pub fn end_transaction_with(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
        tv: TransactionVersion,
    ) -> Result<ProducerIdAndEpoch, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id"));
        }
        let shared = self.state.get_transaction_state(transactional_id)?.ok_or_else(|| {
            TxnError::InvalidProducerIdMapping { transactional_id: transactional_id.to_string() }
        })?;
        let step = {
            let mut m = shared.lock();
            if tv.supports_epoch_bump() {
                self.prepare_end_txn_v2(&mut m, producer_id, producer_epoch, result)?
            } else {
                self.prepare_end_txn(&mut m, producer_id, producer_epoch, result)?
            }
        };
        match step {
            EndTxnStep::Done(answer) => Ok(answer),
            EndTxnStep::Prepared(transit) => {
                self.write_prepare_then_complete(&shared, transit, false)
            }
        }
    }

    /// Step 1 for a client's EndTxn.
    fn prepare_end_txn(
        &self,
        m: &mut TransactionMetadata,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
    ) -> Result<EndTxnStep, TxnError> {
        use TransactionResult::{Abort, Commit};
        use TransactionState::*;
        check_producer(m, producer_id, producer_epoch, true)?;
        let id = m.transactional_id.clone();
        if m.pending_transition_in_progress() {
            return Err(concurrent(&id));
        }
        match (m.state(), result) {
            (Ongoing, _) => Ok(EndTxnStep::Prepared(m.prepare_abort_or_commit(
                prepare_state(result),
                TransactionVersion::TV_0,
                NO_PRODUCER_ID,
                self.now(),
            )?)),
            (CompleteCommit, Commit) | (CompleteAbort, Abort) => {
                Ok(EndTxnStep::Done(current_producer(m)))
            }
            (PrepareCommit, Commit) | (PrepareAbort, Abort) => Err(concurrent(&id)),
            (Dead | PrepareEpochFence, _) => Err(never_reached(m)),
            _ => Err(invalid_state(m, result)),
        }
    }

    /// Step 1 for a transactions-v2 EndTxn (Kafka 4.4's `endTransaction`):
    /// see [`Self::end_transaction_with`].
    fn prepare_end_txn_v2(
        &self,
        m: &mut TransactionMetadata,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
    ) -> Result<EndTxnStep, TxnError> {
        use TransactionResult::{Abort, Commit};
        use TransactionState::*;
        let id = m.transactional_id.clone();
        if m.pending_transition_in_progress() {
            return Err(concurrent(&id));
        }
        let retry_on_bump = i32::from(m.producer_epoch) == i32::from(producer_epoch) + 1;
        let retry_on_overflow = m.prev_producer_id == producer_id
            && producer_epoch == EXHAUSTED_EPOCH
            && m.producer_epoch == 0;
        let is_retry = retry_on_bump || retry_on_overflow;
        if m.producer_id != producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping { transactional_id: id });
        }
        let same_epoch = producer_epoch == m.producer_epoch;
        let valid_epoch = match m.state() {
            Ongoing | Empty | Dead | PrepareEpochFence => same_epoch,
            PrepareCommit | PrepareAbort => retry_on_bump,
            CompleteCommit | CompleteAbort => is_retry || same_epoch,
        };
        if !valid_epoch {
            return Err(TxnError::ProducerFenced { transactional_id: id });
        }
        let to = match (m.state(), result) {
            (Ongoing, _) => prepare_state(result),
            (CompleteCommit, Commit) | (CompleteAbort, Abort) if is_retry => {
                return Ok(EndTxnStep::Done(current_producer(m)));
            }
            // An abort with no transaction open: the epoch is bumped all the
            // same, so whatever the producer sent before is fenced.
            (Empty | CompleteCommit | CompleteAbort, Abort) if !is_retry => PrepareAbort,
            (PrepareCommit, Commit) | (PrepareAbort, Abort) => return Err(concurrent(&id)),
            (Dead | PrepareEpochFence, _) => return Err(never_reached(m)),
            _ => return Err(invalid_state(m, result)),
        };
        let next_producer_id = if m.is_producer_epoch_exhausted() {
            self.generate_producer_id()?
        } else {
            NO_PRODUCER_ID
        };
        let tv = TransactionVersion::TV_2;
        Ok(EndTxnStep::Prepared(m.prepare_abort_or_commit(to, tv, next_producer_id, self.now())?))
    }

    /// Fence the producer of the locked Ongoing transaction and prepare its
    /// PrepareAbort with the fenced epoch (Kafka's `prepareFenceProducerEpoch`
    /// followed by `endTransaction(isFromClient = false)`, under one mutex
    /// hold, so no request slips in between).
    pub(super) fn fence_and_prepare_abort(
        &self,
        m: &mut TransactionMetadata,
    ) -> Result<TxnTransitMetadata, TxnError> {
        let level = self.state.config().transaction_version;
        let next_producer_id = if level.supports_epoch_bump() && m.is_producer_epoch_exhausted() {
            self.generate_producer_id()?
        } else {
            NO_PRODUCER_ID
        };
        let fence = m.prepare_fence_producer_epoch()?;
        m.prepare_abort_after_fence(&fence, level, next_producer_id, self.now())
    }

    /// Steps 2 to 4 for a prepared PrepareCommit/PrepareAbort `transit`.
    /// Returns once step 2 succeeded, whatever steps 3 and 4 did, with the
    /// producer id and epoch the Complete record carries (what a
    /// transactions-v2 client goes on with).
    pub(super) fn write_prepare_then_complete(
        &self,
        shared: &SharedTransactionMetadata,
        transit: TxnTransitMetadata,
        is_epoch_fence: bool,
    ) -> Result<ProducerIdAndEpoch, TxnError> {
        let id = shared.lock().transactional_id.clone();
        if let Err(e) = self.state.append_transaction_to_log(&transit.to_metadata(&id)) {
            let mut m = shared.lock();
            m.abort_pending_transition();
            if is_epoch_fence {
                m.has_failed_epoch_fence = true;
            }
            return Err(e);
        }
        let completion = {
            let mut m = shared.lock();
            m.complete_transition(&transit)?;
            self.prepare_completion(shared, &mut m)?
        };
        let answer = ProducerIdAndEpoch {
            producer_id: completion.complete.producer_id,
            epoch: completion.complete.producer_epoch,
        };
        self.complete_transaction(id, completion);
        Ok(answer)
    }

    /// Prepare the Complete transition of the locked Prepare* transaction and
    /// what its markers are.
    fn prepare_completion(
        &self,
        shared: &SharedTransactionMetadata,
        m: &mut TransactionMetadata,
    ) -> Result<PendingCompletion, TxnError> {
        let result = match m.state() {
            TransactionState::PrepareCommit => TransactionResult::Commit,
            _ => TransactionResult::Abort,
        };
        let marker = TxnMarker {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            // The epoch this broker coordinates the id at (0 alone); a
            // deposed coordinator's markers are then refused where a newer
            // one's landed.
            coordinator_epoch: self
                .state
                .coordinator_epoch(&m.transactional_id)
                .unwrap_or(COORDINATOR_EPOCH),
            result,
        };
        let remaining = m.partitions.clone();
        let complete = m.prepare_complete(self.now())?;
        Ok(PendingCompletion { metadata: shared.clone(), complete, marker, remaining })
    }

    /// Steps 3 and 4; a transaction that cannot finish now is kept for
    /// [`TransactionCoordinator::retry_pending_completions`]. Returns whether
    /// it completed.
    fn complete_transaction(&self, transactional_id: String, mut pc: PendingCompletion) -> bool {
        let mut failed = BTreeSet::new();
        let remaining = std::mem::take(&mut pc.remaining);
        let total = remaining.len();
        self.maybe_crash(&transactional_id, 0, total);
        for (i, tp) in remaining.into_iter().enumerate() {
            let written = self.markers.write_marker(&tp, &pc.marker);
            self.maybe_crash(&transactional_id, i + 1, total);
            match written {
                Ok(()) => {}
                Err(MarkerWriteError::UnknownTopicOrPartition(_)) => {
                    tracing::info!(transactional_id, partition = %tp, "no marker for a deleted partition");
                }
                Err(e) => {
                    tracing::warn!(transactional_id, "{e}; will retry");
                    failed.insert(tp);
                }
            }
        }
        if !failed.is_empty() {
            pc.remaining = failed;
            self.pending_completions.lock().insert(transactional_id, pc);
            return false;
        }
        let record = pc.complete.to_metadata(&transactional_id);
        if let Err(e) = self.state.append_transaction_to_log(&record) {
            tracing::warn!(transactional_id, "writing the Complete record: {e}; will retry");
            self.pending_completions.lock().insert(transactional_id, pc);
            return false;
        }
        if let Err(e) = pc.metadata.lock().complete_transition(&pc.complete) {
            tracing::error!(transactional_id, "{e}");
        }
        true
    }

    /// Test-only crash injection (`crash_point`): die here if this step,
    /// `written` of `total` markers, is a configured one.
    fn maybe_crash(&self, transactional_id: &str, written: usize, total: usize) {
        super::crash_point::maybe_crash(transactional_id, written, total);
    }

    /// Complete a transaction the load found in PrepareCommit/PrepareAbort:
    /// the markers of the partitions where the producer's transaction is
    /// still open (step 3 of the module doc), then the Complete record.
    pub(super) fn complete_loaded_transaction(&self, transactional_id: &str) {
        let Ok(Some(shared)) = self.state.get_transaction_state(transactional_id) else {
            return;
        };
        let completion = {
            let mut m = shared.lock();
            use TransactionState::*;
            if !matches!(m.state(), PrepareCommit | PrepareAbort)
                || m.pending_transition_in_progress()
            {
                return;
            }
            match self.prepare_completion(&shared, &mut m) {
                Ok(mut c) => {
                    let pid = c.marker.producer_id;
                    c.remaining.retain(|tp| {
                        let skip = self.markers.has_open_transaction(tp, pid) == Some(false);
                        if skip {
                            tracing::info!(transactional_id, partition = %tp, "no open transaction of the producer: marker already written, or nothing written; skipped");
                        }
                        !skip
                    });
                    c
                }
                Err(e) => {
                    tracing::error!(transactional_id, "completing a loaded transaction: {e}");
                    return;
                }
            }
        };
        self.complete_transaction(transactional_id.to_string(), completion);
    }

    /// Retry every transaction whose markers or Complete record failed
    /// (the `txn-scheduler` runs it every
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`).
    /// Returns how many completed.
    pub fn retry_pending_completions(&self) -> usize {
        let pending = std::mem::take(&mut *self.pending_completions.lock());
        let mut completed = 0;
        for (id, pc) in pending {
            completed += usize::from(self.complete_transaction(id, pc));
        }
        completed
    }

    /// Transactional ids whose completion is waiting for a retry.
    pub fn pending_completion_ids(&self) -> Vec<String> {
        self.pending_completions.lock().keys().cloned().collect()
    }
}

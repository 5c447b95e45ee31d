//! Pending transitions (Kafka's `TxnTransitMetadata` and the `prepare*` /
//! `completeTransitionTo` half of `TransactionMetadata`).
//!
//! A state change is made in three steps, so the metadata never runs ahead of
//! `__transaction_state`:
//! 1. Under the metadata's mutex, a `prepare_*` function checks the change
//!    against the transition table, records the target as the pending state
//!    and returns the [`TxnTransitMetadata`] to write; the metadata itself is
//!    unchanged.
//! 2. With the mutex released, the transit's record is appended.
//! 3. Under the mutex again, [`TransactionMetadata::complete_transition`]
//!    applies the transit (append succeeded) or
//!    [`TransactionMetadata::abort_pending_transition`] drops it (append failed).
//!
//! Invariants:
//! * At most one transition is pending: preparing while one is pending is
//!   refused ([`TxnError::IllegalTransit`]); the coordinator answers other
//!   requests CONCURRENT_TRANSACTIONS while one is pending.
//! * Completing checks Kafka's conditions (same producer id and epoch, or a
//!   bump / a new producer id for Empty; partitions only grow into Ongoing
//!   and are unchanged into Prepare*; the timeout is unchanged except by
//!   InitProducerId) and refuses, changing nothing, if one does not hold.
//! * The only change made at prepare time is Kafka's epoch fence: a fence
//!   that moves on to PrepareAbort applies its bumped epoch at once (see
//!   [`TransactionMetadata::prepare_abort_after_fence`]).

use std::collections::BTreeSet;

use super::error::TxnError;
use super::schema::{NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use super::transaction_metadata::{TransactionMetadata, TransactionState, TransactionStateError};
use super::transaction_version::TransactionVersion;
use crate::log::TopicPartition;

/// An epoch at or above this cannot be bumped by InitProducerId: the
/// coordinator keeps the last one (`i16::MAX`) to fence with (Kafka's
/// `isEpochExhausted`).
pub const EXHAUSTED_EPOCH: i16 = i16::MAX - 1;

/// Whether `epoch` leaves no room for an InitProducerId bump.
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= EXHAUSTED_EPOCH
}

/// The metadata a prepared transition leads to: what is written, and what
/// [`TransactionMetadata::complete_transition`] applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnTransitMetadata {
    pub producer_id: i64,
    /// The producer id before this transition (Kafka sets it to the current one).
    pub prev_producer_id: i64,
    /// The producer id a transactions-v2 Prepare* hands over at Complete.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TransactionState,
    pub partitions: BTreeSet<TopicPartition>,
    pub txn_start_timestamp: i64,
    pub txn_last_update_timestamp: i64,
    pub client_transaction_version: i16,
}

impl TxnTransitMetadata {
    /// The metadata as it will be once completed: what is appended.
    pub fn to_metadata(&self, transactional_id: &str) -> TransactionMetadata {
        TransactionMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id: self.producer_id,
            prev_producer_id: self.prev_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            last_producer_epoch: self.last_producer_epoch,
            txn_timeout_ms: self.txn_timeout_ms,
            state: self.state,
            partitions: self.partitions.clone(),
            txn_start_timestamp: self.txn_start_timestamp,
            txn_last_update_timestamp: self.txn_last_update_timestamp,
            client_transaction_version: self.client_transaction_version,
            pending_state: None,
            has_failed_epoch_fence: false,
        }
    }
}

impl TransactionMetadata {
    /// The pending state, if a transition is prepared and not yet completed.
    pub fn pending_state(&self) -> Option<TransactionState> {
        self.pending_state
    }

    pub fn pending_transition_in_progress(&self) -> bool {
        self.pending_state.is_some()
    }

    pub fn has_failed_epoch_fence(&self) -> bool {
        self.has_failed_epoch_fence
    }

    pub fn is_producer_epoch_exhausted(&self) -> bool {
        is_epoch_exhausted(self.producer_epoch)
    }

    /// The current metadata as a transit to `state`, the base every
    /// `prepare_*` edits.
    fn transit_to(&self, state: TransactionState) -> TxnTransitMetadata {
        TxnTransitMetadata {
            producer_id: self.producer_id,
            prev_producer_id: self.producer_id,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: self.producer_epoch,
            last_producer_epoch: self.last_producer_epoch,
            txn_timeout_ms: self.txn_timeout_ms,
            state,
            partitions: self.partitions.clone(),
            txn_start_timestamp: self.txn_start_timestamp,
            txn_last_update_timestamp: self.txn_last_update_timestamp,
            client_transaction_version: self.client_transaction_version,
        }
    }

    fn illegal(&self, detail: String) -> TxnError {
        TxnError::IllegalTransit { transactional_id: self.transactional_id.clone(), detail }
    }

    /// Record `transit` as pending if nothing is pending and the table allows it.
    fn prepare(&mut self, transit: TxnTransitMetadata) -> Result<TxnTransitMetadata, TxnError> {
        if let Some(pending) = self.pending_state {
            let to = transit.state;
            return Err(self.illegal(format!("preparing {to} while {pending} is pending")));
        }
        if transit.producer_id < 0
            || (transit.state != TransactionState::Dead && transit.producer_epoch < 0)
        {
            let (pid, epoch) = (transit.producer_id, transit.producer_epoch);
            return Err(self.illegal(format!("producer id {pid} epoch {epoch}")));
        }
        if !self.state.can_transition_to(transit.state) {
            return Err(TxnError::IllegalState(TransactionStateError {
                transactional_id: self.transactional_id.clone(),
                from: self.state,
                to: transit.state,
            }));
        }
        self.pending_state = Some(transit.state);
        Ok(transit)
    }

    /// InitProducerId on an Empty or Complete* id: bump the epoch (Kafka's
    /// `prepareIncrementProducerEpoch`, with KIP-360's expected epoch).
    ///
    /// # Errors
    /// [`TxnError::ProducerFenced`] if `expected_epoch` is neither the current
    /// epoch nor the one before the last bump (or the epoch is exhausted);
    /// a bug (pending, illegal state) otherwise.
    pub fn prepare_increment_producer_epoch(
        &mut self,
        txn_timeout_ms: i32,
        expected_epoch: Option<i16>,
        now: i64,
    ) -> Result<TxnTransitMetadata, TxnError> {
        let mut t = self.transit_to(TransactionState::Empty);
        let bumped = self.producer_epoch.wrapping_add(1);
        let fenced =
            || TxnError::ProducerFenced { transactional_id: self.transactional_id.clone() };
        if self.is_producer_epoch_exhausted() {
            // Kafka throws here; a caller reaches it only with an expected
            // epoch that is not the current one, i.e. a stale producer.
            return Err(fenced());
        }
        match expected_epoch {
            None => (t.producer_epoch, t.last_producer_epoch) = (bumped, NO_PRODUCER_EPOCH),
            Some(e) if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch => {
                (t.producer_epoch, t.last_producer_epoch) = (bumped, self.producer_epoch);
            }
            // A retry of a bump that succeeded: the same answer again.
            Some(e) if e == self.last_producer_epoch => {}
            Some(_) => return Err(fenced()),
        }
        t.txn_timeout_ms = txn_timeout_ms;
        t.partitions.clear();
        t.txn_start_timestamp = -1;
        t.txn_last_update_timestamp = now;
        self.prepare(t)
    }

    /// InitProducerId on an exhausted epoch: a new producer id, epoch 0
    /// (Kafka's `prepareProducerIdRotation`). `record_last_epoch` (a KIP-360
    /// request) keeps the old epoch as the last one, so a retry is answered
    /// the same.
    ///
    /// # Errors
    /// A transaction is open (a bug), or a transition is pending.
    pub fn prepare_producer_id_rotation(
        &mut self,
        new_producer_id: i64,
        txn_timeout_ms: i32,
        now: i64,
        record_last_epoch: bool,
    ) -> Result<TxnTransitMetadata, TxnError> {
        use TransactionState::*;
        if matches!(self.state, Ongoing | PrepareAbort | PrepareCommit) {
            return Err(self.illegal(format!("rotating the producer id in {}", self.state)));
        }
        let mut t = self.transit_to(Empty);
        t.producer_id = new_producer_id;
        t.producer_epoch = 0;
        t.last_producer_epoch =
            if record_last_epoch { self.producer_epoch } else { NO_PRODUCER_EPOCH };
        t.txn_timeout_ms = txn_timeout_ms;
        t.partitions.clear();
        t.txn_start_timestamp = -1;
        t.txn_last_update_timestamp = now;
        self.prepare(t)
    }

    /// Fence the producer of an Ongoing transaction (InitProducerId by a new
    /// instance, or the timeout): PrepareEpochFence with the epoch bumped,
    /// unless a previous fence failed to be written or the epoch is at
    /// `i16::MAX` (Kafka's `prepareFenceProducerEpoch`). Never completed:
    /// [`TransactionMetadata::prepare_abort_after_fence`] follows at once.
    ///
    /// # Errors
    /// Not Ongoing, or a transition is pending (bugs).
    pub fn prepare_fence_producer_epoch(&mut self) -> Result<TxnTransitMetadata, TxnError> {
        if self.producer_epoch == i16::MAX {
            tracing::error!(
                transactional_id = %self.transactional_id,
                producer_id = self.producer_id,
                "fencing a producer whose epoch is i16::MAX; kept, not bumped"
            );
        }
        let mut t = self.transit_to(TransactionState::PrepareEpochFence);
        if !self.has_failed_epoch_fence && self.producer_epoch != i16::MAX {
            t.producer_epoch = self.producer_epoch + 1;
        }
        self.prepare(t)
    }

    /// Turn a pending fence into the PrepareAbort that follows it: the fence's
    /// epoch is applied now and the last epoch forgotten, as Kafka's
    /// `endTransaction` does, so the fenced producer is refused from here on
    /// even if the PrepareAbort cannot be written.
    ///
    /// # Errors
    /// No fence pending, or the state is not Ongoing (bugs).
    pub fn prepare_abort_after_fence(
        &mut self,
        fence: &TxnTransitMetadata,
        server_level: TransactionVersion,
        next_producer_id: i64,
        now: i64,
    ) -> Result<TxnTransitMetadata, TxnError> {
        if self.pending_state != Some(TransactionState::PrepareEpochFence)
            || fence.state != TransactionState::PrepareEpochFence
        {
            return Err(self.illegal("no epoch fence pending".to_string()));
        }
        let before = self.producer_epoch;
        self.pending_state = None;
        self.producer_epoch = fence.producer_epoch;
        self.last_producer_epoch = NO_PRODUCER_EPOCH;
        // The fence bumped the epoch already: the abort is written at that
        // epoch whatever the level (Kafka bumps once here under v2 too).
        let mut t = self.transit_to(TransactionState::PrepareAbort);
        t.txn_last_update_timestamp = now;
        t.client_transaction_version = server_level.level();
        if server_level.supports_epoch_bump() {
            // As Kafka 4.4's v2 abort: the epoch before is the last one (a
            // KIP-360 InitProducerId naming it is answered as a retry), and
            // an exhausted epoch hands over a new producer id at Complete.
            t.last_producer_epoch = before;
            t.next_producer_id = next_producer_id;
        }
        self.prepare(t)
    }

    /// EndTxn: PrepareCommit or PrepareAbort with the current partitions
    /// (Kafka's `prepareAbortOrCommit`). Under transactions v2 the epoch is
    /// bumped (the markers carry the new one, fencing every later write of
    /// this transaction) and `next_producer_id` is the id the Complete record
    /// hands over when the bump exhausted the epoch (-1: none). An abort with
    /// no transaction open (v2 only) starts and ends one with no partition.
    ///
    /// # Errors
    /// A state the table refuses, or a transition is pending (bugs).
    pub fn prepare_abort_or_commit(
        &mut self,
        state: TransactionState,
        tv: TransactionVersion,
        next_producer_id: i64,
        now: i64,
    ) -> Result<TxnTransitMetadata, TxnError> {
        let mut t = self.transit_to(state);
        t.txn_last_update_timestamp = now;
        t.client_transaction_version = tv.level();
        if tv.supports_epoch_bump() {
            t.producer_epoch = self.producer_epoch.saturating_add(1);
            t.last_producer_epoch = self.producer_epoch;
            t.next_producer_id = next_producer_id;
            if self.state != TransactionState::Ongoing {
                t.txn_start_timestamp = now;
            }
        }
        self.prepare(t)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with the union; a new
    /// transaction starts now.
    ///
    /// # Errors
    /// A state that cannot move to Ongoing, or a transition is pending.
    pub fn prepare_add_partitions(
        &mut self,
        added: &BTreeSet<TopicPartition>,
        tv: TransactionVersion,
        now: i64,
    ) -> Result<TxnTransitMetadata, TxnError> {
        use TransactionState::*;
        let mut t = self.transit_to(Ongoing);
        t.client_transaction_version = tv.level();
        if matches!(self.state, Empty | CompleteCommit | CompleteAbort) {
            t.txn_start_timestamp = now;
        }
        t.partitions.extend(added.iter().cloned());
        t.txn_last_update_timestamp = now;
        self.prepare(t)
    }

    /// All markers are written: CompleteCommit or CompleteAbort, partitions
    /// emptied, start time kept (Kafka's `prepareComplete`); a transactions-v2
    /// transaction that exhausted the epoch takes its next producer id, at
    /// epoch 0.
    ///
    /// # Errors
    /// Not in Prepare*, or a transition is pending (bugs).
    pub fn prepare_complete(&mut self, now: i64) -> Result<TxnTransitMetadata, TxnError> {
        // The Prepare record is durable: a fence that failed earlier is over.
        self.has_failed_epoch_fence = false;
        let to = match self.state {
            TransactionState::PrepareCommit => TransactionState::CompleteCommit,
            _ => TransactionState::CompleteAbort,
        };
        let mut t = self.transit_to(to);
        if self.next_producer_id != NO_PRODUCER_ID {
            (t.producer_id, t.producer_epoch) = (self.next_producer_id, 0);
        }
        t.partitions.clear();
        t.txn_last_update_timestamp = now;
        self.prepare(t)
    }

    /// The id expired: Dead, a tombstone is written (Kafka's `prepareDead`).
    ///
    /// # Errors
    /// A state that may not expire, or a transition is pending.
    pub fn prepare_dead(&mut self) -> Result<TxnTransitMetadata, TxnError> {
        let mut t = self.transit_to(TransactionState::Dead);
        t.partitions.clear();
        self.prepare(t)
    }

    /// The append of a prepared transition failed: nothing changes but the
    /// pending state, which is dropped (Kafka resets it the same way).
    pub fn abort_pending_transition(&mut self) {
        self.pending_state = None;
    }

    /// Apply `transit`, whose record was appended (Kafka's
    /// `completeTransitionTo`). A Dead transit marks the metadata dead (it was
    /// removed from the cache), so a request that held it sees it is gone.
    ///
    /// # Errors
    /// `transit` is not the pending transition, or breaks one of the rules of
    /// the module doc; the metadata is unchanged.
    pub fn complete_transition(&mut self, transit: &TxnTransitMetadata) -> Result<(), TxnError> {
        use TransactionState::*;
        if self.pending_state != Some(transit.state) {
            let pending = self.pending_state.map_or("nothing".to_string(), |s| s.to_string());
            let to = transit.state;
            return Err(self.illegal(format!("completing {to} while {pending} is pending")));
        }
        let same_producer = transit.producer_id == self.producer_id
            && transit.producer_epoch == self.producer_epoch;
        let valid = match transit.state {
            Empty => {
                let bumped = transit.producer_epoch == self.producer_epoch.wrapping_add(1)
                    || (transit.producer_epoch == 0 && transit.producer_id != self.producer_id);
                (transit.producer_epoch == self.producer_epoch || bumped)
                    && transit.partitions.is_empty()
                    && transit.txn_start_timestamp == -1
            }
            Ongoing => {
                same_producer
                    && transit.partitions.is_superset(&self.partitions)
                    && transit.txn_timeout_ms == self.txn_timeout_ms
            }
            PrepareCommit | PrepareAbort => self.is_valid_prepare(transit),
            CompleteCommit | CompleteAbort => {
                let handed_over = self.next_producer_id != NO_PRODUCER_ID
                    && transit.producer_id == self.next_producer_id
                    && transit.producer_epoch == 0;
                (same_producer || handed_over)
                    && transit.txn_timeout_ms == self.txn_timeout_ms
                    && transit.txn_start_timestamp != -1
            }
            Dead => true,
            PrepareEpochFence => false,
        };
        if !valid {
            return Err(self.illegal(format!("unexpected metadata {transit:?} from {self:?}")));
        }
        self.producer_id = transit.producer_id;
        self.prev_producer_id = transit.prev_producer_id;
        self.next_producer_id = transit.next_producer_id;
        self.producer_epoch = transit.producer_epoch;
        self.last_producer_epoch = transit.last_producer_epoch;
        self.txn_timeout_ms = transit.txn_timeout_ms;
        self.partitions = transit.partitions.clone();
        self.txn_start_timestamp = transit.txn_start_timestamp;
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp;
        self.client_transaction_version = transit.client_transaction_version;
        self.pending_state = None;
        self.state = transit.state;
        Ok(())
    }

    /// Kafka's rules into PrepareCommit/PrepareAbort: the partitions, timeout
    /// and start time of the Ongoing transaction, at its epoch or (v2) the
    /// next one; or, v2 only, an abort with no transaction open.
    fn is_valid_prepare(&self, transit: &TxnTransitMetadata) -> bool {
        let bumps = TransactionVersion(transit.client_transaction_version).supports_epoch_bump();
        // A fence's abort keeps the epoch the fence applied, at any level.
        let epoch_ok = transit.producer_epoch == self.producer_epoch
            || (bumps && transit.producer_epoch == self.producer_epoch.saturating_add(1));
        let common = transit.producer_id == self.producer_id
            && epoch_ok
            && transit.txn_timeout_ms == self.txn_timeout_ms;
        if self.state == TransactionState::Ongoing {
            common
                && transit.partitions == self.partitions
                && transit.txn_start_timestamp == self.txn_start_timestamp
        } else {
            common
                && bumps
                && transit.state == TransactionState::PrepareAbort
                && transit.partitions.is_empty()
        }
    }
}

//! The transaction coordinator (Kafka's `TransactionCoordinator`):
//! InitProducerId with a transactional id, AddPartitionsToTxn (the client
//! form), AddOffsetsToTxn, EndTxn (`end_txn`), and the timers (`timers`).
//! Library code: the APIs and the broker's `txn-scheduler` call it.
//!
//! Invariants:
//! * Every state change is a pending transition (`txn_transit_metadata`):
//!   prepared under the id's mutex, appended to `__transaction_state` with
//!   the mutex released, then completed under the mutex. A request that finds
//!   a transition pending, or the transaction in PrepareCommit/PrepareAbort,
//!   gets [`TxnError::ConcurrentTransactions`] and retries.
//! * The metadata never runs ahead of the log: a failed append drops the
//!   pending transition and answers the error, changing nothing but Kafka's
//!   epoch fence (its bumped epoch stays in memory; `has_failed_epoch_fence`
//!   keeps the next fence from bumping again).
//! * Epochs (docs/design/transactions.md, "Epochs, fencing, KIP-360"): InitProducerId bumps the epoch of an
//!   Empty/Complete* id, takes a new producer id (epoch 0) once the epoch is
//!   exhausted (>= 32766), and on an Ongoing transaction fences: the abort
//!   runs with epoch + 1 and the caller gets CONCURRENT_TRANSACTIONS, so its
//!   retry bumps again. KIP-360 (an expected producer id and epoch): valid if
//!   the id was just created, names the current producer id, or names the
//!   previous one with an exhausted epoch; the expected epoch must be the
//!   current one (bump) or the one before the last bump (a retry, answered
//!   the same); anything else is PRODUCER_FENCED.
//! * Lock order: the state manager's cache lock, then one metadata mutex,
//!   then the producer id manager's lock; no metadata mutex is held across an
//!   append, a marker write, or a call into the marker writer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;

use super::end_txn::PendingCompletion;
use super::error::TxnError;
use super::marker_writer::TransactionMarkerWriter;
use super::state_manager::{SharedTransactionMetadata, TransactionStateManager, TxnLoadOutcome};
use super::transaction_metadata::{TransactionMetadata, TransactionState};
use super::transaction_version::TransactionVersion;
use super::txn_transit_metadata::{is_epoch_exhausted, TxnTransitMetadata};
use crate::clock::SharedClock;
use crate::log::producer_id_manager::ProducerIdManager;
use crate::log::{LogError, TopicPartition};

/// A producer id and epoch, as InitProducerId answers and KIP-360 asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdAndEpoch {
    pub producer_id: i64,
    pub epoch: i16,
}

/// Where new producer ids come from (the broker's [`ProducerIdManager`]).
pub trait ProducerIdGenerator: Send + Sync + std::fmt::Debug {
    /// A producer id never issued before.
    ///
    /// # Errors
    /// The id could not be reserved durably.
    fn generate_producer_id(&self) -> Result<i64, LogError>;

    /// Issue no id below `floor` from now on (ids found in
    /// `__transaction_state` at load).
    fn raise_floor(&self, floor: i64);
}

impl ProducerIdGenerator for Mutex<ProducerIdManager> {
    fn generate_producer_id(&self) -> Result<i64, LogError> {
        self.lock().generate_producer_id()
    }

    fn raise_floor(&self, floor: i64) {
        self.lock().raise_floor(floor);
    }
}

/// What InitProducerId does once validated.
enum InitStep {
    /// Append this Empty transit and answer its producer id and epoch.
    Bump(TxnTransitMetadata),
    /// An Ongoing transaction was fenced: run this PrepareAbort, then answer
    /// CONCURRENT_TRANSACTIONS.
    Fence(TxnTransitMetadata),
}

/// The transaction coordinator of this node (one for every
/// `__transaction_state` partition).
#[derive(Debug)]
pub struct TransactionCoordinator {
    pub(super) state: Arc<TransactionStateManager>,
    producer_ids: Arc<dyn ProducerIdGenerator>,
    pub(super) markers: Arc<dyn TransactionMarkerWriter>,
    pub(super) clock: SharedClock,
    /// Decided transactions whose markers or Complete record could not be
    /// written yet, by id; `retry_pending_completions` takes them up.
    pub(super) pending_completions: Mutex<BTreeMap<String, PendingCompletion>>,
    /// In a cluster, how ids coordinated elsewhere are verified (set once).
    pub(super) remote_verifier: std::sync::OnceLock<Arc<dyn super::verify::RemoteVerifier>>,
}

impl TransactionCoordinator {
    pub fn new(
        state: Arc<TransactionStateManager>,
        producer_ids: Arc<dyn ProducerIdGenerator>,
        markers: Arc<dyn TransactionMarkerWriter>,
        clock: SharedClock,
    ) -> Self {
        Self {
            state,
            producer_ids,
            markers,
            clock,
            pending_completions: Mutex::new(BTreeMap::new()),
            remote_verifier: std::sync::OnceLock::new(),
        }
    }

    pub fn state_manager(&self) -> &Arc<TransactionStateManager> {
        &self.state
    }

    pub(super) fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// A producer id never issued before.
    pub(super) fn generate_producer_id(&self) -> Result<i64, TxnError> {
        Ok(self.producer_ids.generate_producer_id()?)
    }

    /// Issue no producer id below `floor` (ids a load found).
    pub(super) fn raise_producer_id_floor(&self, floor: i64) {
        self.producer_ids.raise_floor(floor);
    }

    /// Load `__transaction_state` (docs/design/transactions.md, "Loading at start"), raise the
    /// producer id floor above every id it holds, then complete each
    /// transaction found in PrepareCommit/PrepareAbort: every marker again,
    /// then the Complete record. One whose markers fail stays pending for
    /// [`TransactionCoordinator::retry_pending_completions`].
    pub fn load(&self) -> TxnLoadOutcome {
        let outcome = self.state.load();
        if let Some(max) = outcome.max_producer_id {
            self.producer_ids.raise_floor(max.saturating_add(1));
        }
        for txn in &outcome.pending_completion {
            self.complete_loaded_transaction(&txn.transactional_id);
        }
        outcome
    }

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId`).
    /// `expected` is KIP-360's producer id and epoch (v3+, both != -1).
    ///
    /// # Errors
    /// Per docs/design/transactions.md, "Behaviour and errors, per API": INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT,
    /// COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS (also after a
    /// fence), PRODUCER_FENCED, a storage error.
    pub fn init_producer_id(
        &self,
        transactional_id: &str,
        txn_timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
    ) -> Result<ProducerIdAndEpoch, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id"));
        }
        let max_ms = self.state.config().transaction_max_timeout_ms;
        if txn_timeout_ms <= 0 || txn_timeout_ms > max_ms {
            return Err(TxnError::InvalidTransactionTimeout { timeout_ms: txn_timeout_ms, max_ms });
        }
        self.state.coordinator_epoch(transactional_id)?;
        // A metadata found Dead was expired while we waited for it: look again.
        for _ in 0..3 {
            let shared = self.get_or_create(transactional_id, txn_timeout_ms)?;
            let step = {
                let mut m = shared.lock();
                if m.state() == TransactionState::Dead {
                    continue;
                }
                self.prepare_init_producer_id_transit(&mut m, txn_timeout_ms, expected)?
            };
            return match step {
                InitStep::Bump(transit) => {
                    self.append_and_complete(&shared, &transit)?;
                    Ok(ProducerIdAndEpoch {
                        producer_id: transit.producer_id,
                        epoch: transit.producer_epoch,
                    })
                }
                InitStep::Fence(transit) => {
                    self.write_prepare_then_complete(&shared, transit, true)?;
                    Err(concurrent(transactional_id))
                }
            };
        }
        Err(concurrent(transactional_id))
    }

    /// The cached metadata of `id`, or a new one (a fresh producer id, epoch
    /// -1, Empty) put in the cache.
    fn get_or_create(
        &self,
        transactional_id: &str,
        txn_timeout_ms: i32,
    ) -> Result<SharedTransactionMetadata, TxnError> {
        if let Some(shared) = self.state.get_transaction_state(transactional_id)? {
            return Ok(shared);
        }
        let producer_id = self.producer_ids.generate_producer_id()?;
        let created =
            TransactionMetadata::new(transactional_id, producer_id, -1, txn_timeout_ms, self.now());
        self.state.put_transaction_state_if_not_exists(created)
    }

    /// Validate an InitProducerId against the locked metadata and prepare its
    /// transition (Kafka's `prepareInitProducerIdTransit`).
    fn prepare_init_producer_id_transit(
        &self,
        m: &mut TransactionMetadata,
        txn_timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
    ) -> Result<InitStep, TxnError> {
        use TransactionState::*;
        let id = m.transactional_id.clone();
        if m.pending_transition_in_progress() {
            return Err(concurrent(&id));
        }
        if let Some(e) = expected {
            let valid = m.producer_epoch == -1
                || e.producer_id == m.producer_id
                || (e.producer_id == m.prev_producer_id && is_epoch_exhausted(e.epoch));
            if !valid {
                return Err(TxnError::ProducerFenced { transactional_id: id });
            }
        }
        match m.state() {
            PrepareAbort | PrepareCommit => Err(concurrent(&id)),
            Empty | CompleteCommit | CompleteAbort => {
                let now = self.now();
                let rotate = m.is_producer_epoch_exhausted()
                    && expected.is_none_or(|e| e.epoch == m.producer_epoch);
                let transit = if rotate {
                    let producer_id = self.producer_ids.generate_producer_id()?;
                    let record_last = expected.is_some();
                    m.prepare_producer_id_rotation(producer_id, txn_timeout_ms, now, record_last)?
                } else {
                    let expected_epoch = expected.map(|e| e.epoch);
                    m.prepare_increment_producer_epoch(txn_timeout_ms, expected_epoch, now)?
                };
                Ok(InitStep::Bump(transit))
            }
            Ongoing => Ok(InitStep::Fence(self.fence_and_prepare_abort(m)?)),
            Dead | PrepareEpochFence => Err(TxnError::IllegalTransit {
                transactional_id: id,
                detail: format!("InitProducerId found state {}", m.state()),
            }),
        }
    }

    /// AddPartitionsToTxn v0-3 (Kafka's `handleAddPartitionsToTransaction`):
    /// add `partitions` to the id's transaction, starting one if none is
    /// open. Partitions of unknown topics are the caller's to refuse first.
    ///
    /// # Errors
    /// INVALID_REQUEST, COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING
    /// (unknown id, other producer id), PRODUCER_FENCED (other epoch),
    /// CONCURRENT_TRANSACTIONS (pending transition, Prepare*), a storage error.
    pub fn add_partitions_to_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Result<(), TxnError> {
        let tv = TransactionVersion::TV_0;
        self.add_partitions_to_txn_with(
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            tv,
        )
    }

    /// AddPartitionsToTxn at either protocol level: `tv` is written with the
    /// transaction (transactions v2 when a partition leader or the group
    /// coordinator adds for a Produce v12+ or TxnOffsetCommit v5+).
    ///
    /// # Errors
    /// As [`TransactionCoordinator::add_partitions_to_txn`].
    pub fn add_partitions_to_txn_with(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
        tv: TransactionVersion,
    ) -> Result<(), TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id"));
        }
        let shared = self.state.get_transaction_state(transactional_id)?.ok_or_else(|| {
            TxnError::InvalidProducerIdMapping { transactional_id: transactional_id.to_string() }
        })?;
        let transit = {
            let mut m = shared.lock();
            // Transactions v2 checks for a completion under way first, as
            // Kafka 4.4 does: the producer may already hold the producer id
            // the completing transaction hands over, and is to retry.
            if tv.supports_epoch_bump() && m.pending_transition_in_progress() {
                return Err(concurrent(transactional_id));
            }
            check_producer(&m, producer_id, producer_epoch, true)?;
            use TransactionState::*;
            if m.pending_transition_in_progress()
                || matches!(m.state(), PrepareCommit | PrepareAbort)
            {
                return Err(concurrent(transactional_id));
            }
            if m.state() == Ongoing && partitions.is_subset(&m.partitions) {
                return Ok(());
            }
            let now = self.now();
            m.prepare_add_partitions(partitions, tv, now)?
        };
        self.append_and_complete(&shared, &transit)
    }

    /// AddOffsetsToTxn: add the group's `__consumer_offsets` partition
    /// (`offsets_partition`, which the group coordinator's `partition_for`
    /// gives, as Kafka's `KafkaApis` computes it) to the transaction.
    ///
    /// # Errors
    /// As [`TransactionCoordinator::add_partitions_to_txn`].
    pub fn add_offsets_to_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        offsets_partition: TopicPartition,
    ) -> Result<(), TxnError> {
        let partitions = BTreeSet::from([offsets_partition]);
        self.add_partitions_to_txn(transactional_id, producer_id, producer_epoch, &partitions)
    }

    /// Append `transit` and complete it; on failure drop it (Kafka's
    /// `appendTransactionToLog` and its callback).
    pub(super) fn append_and_complete(
        &self,
        shared: &SharedTransactionMetadata,
        transit: &TxnTransitMetadata,
    ) -> Result<(), TxnError> {
        let id = shared.lock().transactional_id.clone();
        match self.state.append_transaction_to_log(&transit.to_metadata(&id)) {
            Ok(_) => shared.lock().complete_transition(transit),
            Err(e) => {
                shared.lock().abort_pending_transition();
                Err(e)
            }
        }
    }
}

/// The checks every request on an existing id makes first: the id is alive,
/// the producer id is its, the epoch is its (exactly, for a client).
pub(super) fn check_producer(
    m: &TransactionMetadata,
    producer_id: i64,
    producer_epoch: i16,
    from_client: bool,
) -> Result<(), TxnError> {
    let id = || m.transactional_id.clone();
    if m.state() == TransactionState::Dead || m.producer_id != producer_id {
        return Err(TxnError::InvalidProducerIdMapping { transactional_id: id() });
    }
    if (from_client && producer_epoch != m.producer_epoch) || producer_epoch < m.producer_epoch {
        return Err(TxnError::ProducerFenced { transactional_id: id() });
    }
    Ok(())
}

/// The producer id and epoch the metadata has now.
pub(super) fn current_producer(m: &TransactionMetadata) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch { producer_id: m.producer_id, epoch: m.producer_epoch }
}

pub(super) fn concurrent(transactional_id: &str) -> TxnError {
    TxnError::ConcurrentTransactions { transactional_id: transactional_id.to_string() }
}

#[cfg(test)]
#[path = "coordinator_epoch_tests.rs"]
mod epoch_tests;
#[cfg(test)]
#[path = "coordinator_restart_tests.rs"]
mod restart_tests;
#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
#[cfg(test)]
#[path = "coordinator_tv2_tests.rs"]
mod tv2_tests;

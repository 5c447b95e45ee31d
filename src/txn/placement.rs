//! In a cluster, the transaction coordinator moves with the leadership of
//! `__transaction_state`'s partitions (docs/design/multi-broker.md, 7.2 and
//! 7.3, Kafka's `onElection` and `onResignation`):
//!
//! * A partition led here at leader epoch E is `Loading(E)`: its ids are
//!   rebuilt from the local log and answered COORDINATOR_LOAD_IN_PROGRESS
//!   meanwhile. It turns `Active(E)` only once the partition's high
//!   watermark reached the end it loaded to, so nothing is answered from
//!   records a further failover could remove. E is the coordinator epoch
//!   its markers carry: a partition that recorded a higher one refuses a
//!   deposed coordinator's markers.
//! * A partition no longer led here is dropped with its ids; their
//!   requests get NOT_COORDINATOR, and the clients find the new leader.
//! * A load for E is given up when the partition moved on meanwhile
//!   (resigned, or elected at another epoch): only the state still
//!   `Loading(E)` is installed.
//! * Every write names its partition's epoch: it is appended only while
//!   this broker leads the partition at that epoch, with an ISR at its
//!   min ISR, and counts once the ISR holds it (`acks=all`).
//!
//! Lock order: the placement's lock before the cache's.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::error::TxnError;
use super::state_manager::{
    TransactionStateManager, TxnLoadOutcome, TxnLoader, MAX_BATCH_RECORDS_BYTES,
    TRANSACTION_STATE_TOPIC,
};
use super::transaction_metadata::{TransactionMetadata, TransactionState};
use crate::log::coordinator_loader::{load_partition, LoadStats};
use crate::log::TopicPartition;
use crate::replica::coordinator_writes::{CoordinatorReplication, CoordinatorWriteError};

/// Where one partition's load stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    Loading(i32),
    Active(i32),
}

/// The partitions coordinated here, and how their writes become durable.
#[derive(Debug)]
pub(super) struct TxnPlacement {
    pub(super) replication: Arc<dyn CoordinatorReplication>,
    partitions: Mutex<HashMap<i32, Load>>,
}

impl TxnPlacement {
    /// The coordinator epoch of `partition`, if active here.
    pub(super) fn epoch_of(&self, partition: i32) -> Result<i32, TxnError> {
        match self.partitions.lock().get(&partition) {
            Some(Load::Active(epoch)) => Ok(*epoch),
            Some(Load::Loading(_)) => Err(TxnError::CoordinatorLoadInProgress),
            None => Err(TxnError::NotCoordinator),
        }
    }

    /// `partition` may be written now: active here, led at its epoch.
    pub(super) fn check_leader(&self, partition: i32) -> Result<(), TxnError> {
        let epoch = self.epoch_of(partition)?;
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, partition);
        Ok(self.replication.check_leader(&tp, epoch)?)
    }

    /// The partitions active here.
    pub(super) fn active(&self) -> HashSet<i32> {
        let partitions = self.partitions.lock();
        partitions.iter().filter(|(_, l)| matches!(l, Load::Active(_))).map(|(p, _)| *p).collect()
    }
}

impl TransactionStateManager {
    /// In a cluster: coordinate only the ids of partitions led here
    /// ([`Self::elect`]), and write with `replication`.
    pub fn place_by_cluster(&self, replication: Arc<dyn CoordinatorReplication>) {
        let placement = TxnPlacement { replication, partitions: Mutex::default() };
        if self.placement.set(placement).is_err() {
            return tracing::warn!("the transaction coordinator already follows the cluster");
        }
        self.loaded.store(true, Ordering::Release);
    }

    /// This broker now leads `partition` at `epoch`: `true` when its load
    /// should run (it was not loading or active at that epoch already).
    pub fn elect(&self, partition: i32, epoch: i32) -> bool {
        let Some(placed) = self.placement.get() else { return false };
        let mut partitions = placed.partitions.lock();
        match partitions.get(&partition) {
            Some(Load::Loading(e) | Load::Active(e)) if *e == epoch => false,
            _ => {
                partitions.insert(partition, Load::Loading(epoch));
                true
            }
        }
    }

    /// This broker no longer leads `partition`: its ids go. `true` when it
    /// was loading or coordinating them.
    pub fn resign(&self, partition: i32) -> bool {
        let Some(placed) = self.placement.get() else { return false };
        let mut partitions = placed.partitions.lock();
        if partitions.remove(&partition).is_none() {
            return false;
        }
        self.transactions.write().retain(|id, _| self.partition_for(id) != partition);
        true
    }

    /// The partitions this broker is loading or coordinating.
    pub fn placed_partitions(&self) -> Vec<i32> {
        self.placement
            .get()
            .map_or_else(Vec::new, |p| p.partitions.lock().keys().copied().collect())
    }

    /// Load `partition`, led here at `epoch` (module doc). `None` when it
    /// moved on meanwhile or has no local log; blocks until the partition's
    /// high watermark reached the end loaded.
    pub fn load_partition(&self, partition: i32, epoch: i32) -> Option<TxnLoadOutcome> {
        let placed = self.placement.get()?;
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, partition);
        let (loader, stats, end) = self.read_partition(&tp)?;
        loop {
            if placed.partitions.lock().get(&partition) != Some(&Load::Loading(epoch)) {
                return None;
            }
            match placed.replication.await_committed(&tp, end) {
                Ok(()) => break,
                Err(CoordinatorWriteError::NotLeader) => return None,
                Err(e) => {
                    tracing::info!(partition = %tp, end, "loading transactions: {e}; waiting")
                }
            }
        }
        let pending = pending_completion(&loader.transactions);
        let count = loader.transactions.len();
        {
            let mut partitions = placed.partitions.lock();
            if partitions.get(&partition) != Some(&Load::Loading(epoch)) {
                return None;
            }
            let mut transactions = self.transactions.write();
            transactions.retain(|id, _| self.partition_for(id) != partition);
            for (id, m) in loader.transactions {
                transactions.insert(id, Arc::new(Mutex::new(m)));
            }
            partitions.insert(partition, Load::Active(epoch));
        }
        *self.load_stats.lock() += stats;
        tracing::info!(partition = %tp, epoch, transactional_ids = count, to_complete = pending.len(), "coordinating the transactions of a partition");
        Some(TxnLoadOutcome {
            stats,
            pending_completion: pending,
            max_producer_id: loader.max_producer_id,
        })
    }

    /// The ids of `tp`'s local log, what the walk read and the end it read to.
    fn read_partition(&self, tp: &TopicPartition) -> Option<(TxnLoader, LoadStats, i64)> {
        let Some(log) = self.logs.get_log(tp) else {
            tracing::warn!(partition = %tp, "no local log to load transactions from");
            return None;
        };
        let mut loader = TxnLoader::default();
        let mut stats = LoadStats::default();
        let log = log.read();
        load_partition(&log, MAX_BATCH_RECORDS_BYTES, &mut loader, &mut stats);
        Some((loader, stats, log.log_end_offset()))
    }
}

impl super::coordinator::TransactionCoordinator {
    /// In a cluster, after each image this broker applied: `led` holds the
    /// `__transaction_state` partitions it leads, with their leader epochs.
    /// Partitions no longer led are dropped; those led at a new epoch start
    /// loading. Returns the loads to run, each with
    /// [`Self::load_partition`], off the caller's thread.
    pub fn on_leadership(&self, led: &HashMap<i32, i32>) -> Vec<(i32, i32)> {
        for p in self.state.placed_partitions() {
            if !led.contains_key(&p) && self.state.resign(p) {
                tracing::info!(
                    partition = p,
                    "no longer coordinating the transactions of {TRANSACTION_STATE_TOPIC}"
                );
            }
        }
        let mut loads = Vec::new();
        for (&p, &epoch) in led {
            if self.state.elect(p, epoch) {
                tracing::info!(
                    partition = p,
                    epoch,
                    "loading the transactions of {TRANSACTION_STATE_TOPIC}"
                );
                loads.push((p, epoch));
            }
        }
        loads
    }

    /// Load `partition` at `epoch`, then complete the transactions it left
    /// in PrepareCommit or PrepareAbort (their markers at the new
    /// coordinator epoch, then the Complete record). Blocks.
    pub fn load_partition(&self, partition: i32, epoch: i32) {
        let Some(outcome) = self.state.load_partition(partition, epoch) else { return };
        if let Some(max) = outcome.max_producer_id {
            self.raise_producer_id_floor(max.saturating_add(1));
        }
        for txn in &outcome.pending_completion {
            self.complete_loaded_transaction(&txn.transactional_id);
        }
    }
}

/// The loaded transactions in PrepareCommit or PrepareAbort, by id.
pub(super) fn pending_completion(
    transactions: &HashMap<String, TransactionMetadata>,
) -> Vec<TransactionMetadata> {
    let mut pending: Vec<TransactionMetadata> = transactions
        .values()
        .filter(|m| {
            matches!(m.state(), TransactionState::PrepareCommit | TransactionState::PrepareAbort)
        })
        .cloned()
        .collect();
    pending.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
    pending
}

//! The coordinator's timers (Kafka's `abortTimedOutTransactions` and
//! `removeExpiredTransactionalIds`), run by the broker's `txn-scheduler`
//! every `transaction.abort.timed.out.transaction.cleanup.interval.ms` and
//! `transaction.remove.expired.transaction.cleanup.interval.ms`; time is the
//! injected clock's.
//!
//! * A transaction Ongoing past its timeout (`start + timeout < now`) with no
//!   transition pending is aborted as a fence: its producer's epoch is bumped
//!   (so the producer, if still alive, is fenced), then the abort runs the
//!   steps of `end_txn`.
//! * An id in Empty, CompleteCommit or CompleteAbort with no transition
//!   pending and `last_update <= now - transactional.id.expiration.ms` is
//!   expired: a tombstone is appended (one batch per partition of
//!   `__transaction_state`), then the id is removed from the cache
//!   and its metadata marked Dead, so a request that still holds it starts
//!   over. A failed tombstone changes nothing.

use std::collections::BTreeMap;

use super::coordinator::TransactionCoordinator;
use super::state_manager::SharedTransactionMetadata;
use super::transaction_metadata::TransactionState;
use super::txn_transit_metadata::TxnTransitMetadata;

impl TransactionCoordinator {
    /// Abort every transaction past its timeout; returns how many aborts
    /// were decided (their PrepareAbort written).
    pub fn abort_timed_out_transactions(&self) -> usize {
        let Ok(all) = self.state.all_transaction_states() else {
            return 0;
        };
        let now = self.now();
        let mut aborted = 0;
        for (id, shared) in all {
            let transit = {
                let mut m = shared.lock();
                let deadline = m.txn_start_timestamp.saturating_add(i64::from(m.txn_timeout_ms));
                if m.pending_transition_in_progress()
                    || m.state() != TransactionState::Ongoing
                    || deadline >= now
                {
                    continue;
                }
                match self.fence_and_prepare_abort(&mut m) {
                    Ok(transit) => transit,
                    Err(e) => {
                        tracing::error!(transactional_id = %id, "aborting a timed-out transaction: {e}");
                        continue;
                    }
                }
            };
            tracing::info!(
                transactional_id = %id,
                producer_id = transit.producer_id,
                producer_epoch = transit.producer_epoch,
                "aborting a transaction past its timeout"
            );
            match self.write_prepare_then_complete(&shared, transit, true) {
                Ok(_) => aborted += 1,
                Err(e) => {
                    tracing::warn!(transactional_id = %id, "aborting a timed-out transaction: {e}")
                }
            }
        }
        aborted
    }

    /// Expire every transactional id unused for
    /// `transactional.id.expiration.ms`, one tombstone batch per
    /// `__transaction_state` partition (ids that would make it larger than
    /// `max.message.bytes` wait for the next pass, as on Kafka); returns how
    /// many were removed.
    pub fn remove_expired_transactional_ids(&self) -> usize {
        let Ok(all) = self.state.all_transaction_states() else {
            return 0;
        };
        let horizon = self.now().saturating_sub(self.state.config().transactional_id_expiration_ms);
        let mut by_partition: BTreeMap<i32, Vec<Expiring>> = BTreeMap::new();
        for (id, shared) in all {
            let batch = by_partition.entry(self.state.partition_for(&id)).or_default();
            let lengths = batch.iter().map(|e| e.id.len()).chain([id.len()]);
            if !self.state.tombstone_batch_fits(lengths) {
                continue;
            }
            let transit = {
                let mut m = shared.lock();
                if m.pending_transition_in_progress()
                    || !m.state().is_expiration_allowed()
                    || m.txn_last_update_timestamp > horizon
                {
                    continue;
                }
                match m.prepare_dead() {
                    Ok(transit) => transit,
                    Err(e) => {
                        tracing::error!(transactional_id = %id, "expiring: {e}");
                        continue;
                    }
                }
            };
            batch.push(Expiring { id, shared, transit });
        }
        by_partition.into_iter().map(|(p, batch)| self.expire_batch(p, batch)).sum()
    }

    /// Append the tombstones of one partition's prepared expiries, then
    /// remove the ids (or, if the append failed, drop the pending Dead).
    fn expire_batch(&self, partition: i32, batch: Vec<Expiring>) -> usize {
        if batch.is_empty() {
            return 0;
        }
        let ids: Vec<String> = batch.iter().map(|e| e.id.clone()).collect();
        let appended = self.state.append_tombstones(partition, &ids);
        if let Err(e) = &appended {
            tracing::warn!(partition, ids = ids.len(), "expiring transactional ids: {e}");
        }
        let mut removed = 0;
        for Expiring { id, shared, transit } in batch {
            let gone = appended.is_ok() && self.state.remove_transaction_state(&id, &shared);
            let mut m = shared.lock();
            if !gone {
                m.abort_pending_transition();
                continue;
            }
            match m.complete_transition(&transit) {
                Ok(()) => removed += 1,
                Err(e) => tracing::error!(transactional_id = %id, "expiring: {e}"),
            }
        }
        removed
    }
}

/// An id whose Dead transition is prepared, waiting for its tombstone.
struct Expiring {
    id: String,
    shared: SharedTransactionMetadata,
    transit: TxnTransitMetadata,
}

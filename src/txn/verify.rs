//! Verification of a transactional Produce (Kafka's
//! `handleVerifyPartitionsInTransaction`, which its `ReplicaManager` calls
//! before appending a transactional batch to a partition where the producer
//! has no open transaction): the batch may open a transaction only if the
//! coordinator has the partition in the id's Ongoing transaction, under the
//! same producer id and epoch. A late or stray transactional write (after an
//! abort, by a fenced producer, to a partition never added) is refused
//! instead of opening a transaction no marker would ever close.

use super::coordinator::{check_producer, concurrent, TransactionCoordinator};
use super::error::TxnError;
use super::transaction_metadata::TransactionState;
use crate::log::TopicPartition;

/// In a cluster, how a broker that does not coordinate a transactional id
/// asks the broker that does (Kafka's AddPartitionsToTxn v4 with
/// `verify_only`, sent by the partition's leader).
pub trait RemoteVerifier: Send + Sync + std::fmt::Debug {
    /// [`TransactionCoordinator::verify_partition_locally`], answered by
    /// the coordinator of `transactional_id`; an unreachable or changing
    /// coordinator is [`TxnError::CoordinatorNotAvailable`] (retriable).
    ///
    /// # Errors
    /// As the local check.
    fn verify(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &TopicPartition,
    ) -> Result<(), TxnError>;
}

impl TransactionCoordinator {
    /// Whether `partition` is in the Ongoing transaction of
    /// `transactional_id`, asked of its coordinator: this broker, or in a
    /// cluster the one that coordinates it when this one does not.
    ///
    /// # Errors
    /// As [`Self::verify_partition_locally`].
    pub fn verify_partition(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        if let Some(remote) = self.remote_verifier.get() {
            if matches!(
                self.state.coordinator_epoch(transactional_id),
                Err(TxnError::NotCoordinator)
            ) {
                return remote.verify(transactional_id, producer_id, producer_epoch, partition);
            }
        }
        self.verify_partition_locally(transactional_id, producer_id, producer_epoch, partition)
    }

    /// In a cluster: verify through `remote` the ids this broker does not
    /// coordinate.
    pub fn verify_remotely_with(&self, remote: std::sync::Arc<dyn RemoteVerifier>) {
        if self.remote_verifier.set(remote).is_err() {
            tracing::warn!("the transaction coordinator's remote verifier was already set");
        }
    }

    /// Whether `partition` is in the Ongoing transaction of `transactional_id`
    /// for this producer id and epoch, as this broker's coordinator has it
    /// (what a verify-only AddPartitionsToTxn answers). Reads only.
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, INVALID_PRODUCER_ID_MAPPING
    /// (unknown id, other producer id), PRODUCER_FENCED (other epoch),
    /// CONCURRENT_TRANSACTIONS (Prepare*), or
    /// [`TxnError::PartitionNotInTransaction`].
    pub fn verify_partition_locally(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        let shared = self.state.get_transaction_state(transactional_id)?.ok_or_else(|| {
            TxnError::InvalidProducerIdMapping { transactional_id: transactional_id.to_string() }
        })?;
        let m = shared.lock();
        check_producer(&m, producer_id, producer_epoch, true)?;
        if matches!(m.state(), TransactionState::PrepareCommit | TransactionState::PrepareAbort) {
            return Err(concurrent(transactional_id));
        }
        if m.state() == TransactionState::Ongoing && m.partitions.contains(partition) {
            Ok(())
        } else {
            Err(TxnError::PartitionNotInTransaction {
                transactional_id: transactional_id.to_string(),
                partition: partition.clone(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{open, set, tp, TIMEOUT};
    use super::*;
    use crate::clock::MockClock;

    #[test]
    fn only_an_added_partition_of_the_current_producer_passes() {
        let dir = tempfile::tempdir().unwrap();
        let clock = MockClock::new(super::super::test_support::NOW);
        let node = open(dir.path(), &clock);
        let c = &node.coordinator;
        let p = c.init_producer_id("a", TIMEOUT, None).unwrap();
        let (pid, epoch) = (p.producer_id, p.epoch);
        assert!(matches!(
            c.verify_partition("a", pid, epoch, &tp("t", 0)),
            Err(TxnError::PartitionNotInTransaction { .. })
        ));
        c.add_partitions_to_txn("a", pid, epoch, &set(&[("t", 0)])).unwrap();
        c.verify_partition("a", pid, epoch, &tp("t", 0)).unwrap();
        assert!(matches!(
            c.verify_partition("a", pid, epoch, &tp("t", 1)),
            Err(TxnError::PartitionNotInTransaction { .. })
        ));
        assert!(matches!(
            c.verify_partition("a", pid, epoch - 1, &tp("t", 0)),
            Err(TxnError::ProducerFenced { .. })
        ));
        assert!(matches!(
            c.verify_partition("a", pid + 1, epoch, &tp("t", 0)),
            Err(TxnError::InvalidProducerIdMapping { .. })
        ));
        assert!(matches!(
            c.verify_partition("b", pid, epoch, &tp("t", 0)),
            Err(TxnError::InvalidProducerIdMapping { .. })
        ));
    }
}

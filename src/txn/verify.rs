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

impl TransactionCoordinator {
    /// Whether `partition` is in the Ongoing transaction of `transactional_id`
    /// for this producer id and epoch. Reads only.
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING (unknown id,
    /// other producer id), PRODUCER_FENCED (other epoch),
    /// CONCURRENT_TRANSACTIONS (Prepare*), or
    /// [`TxnError::PartitionNotInTransaction`].
    pub fn verify_partition(
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

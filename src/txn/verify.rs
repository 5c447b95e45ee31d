//! Verification of a transactional Produce (Kafka's
//! `handleVerifyPartitionsInTransaction`, which its `ReplicaManager` calls
//! before appending a transactional batch to a partition where the producer
//! has no open transaction): the batch may open a transaction only if the
//! coordinator has the partition in the id's Ongoing transaction, under the
//! same producer id and epoch. A late or stray transactional write (after an
//! abort, by a fenced producer, to a partition never added) is refused
//! instead of opening a transaction no marker would ever close.
//!
//! Under transactions v2 (Produce v12+, TxnOffsetCommit v5+) the same call
//! adds the partition to the transaction instead (Kafka's `ADD_PARTITION`
//! operation), as the client no longer sends AddPartitionsToTxn: the
//! producer id and epoch must still be the transaction's current ones.

use super::coordinator::{check_producer, concurrent, TransactionCoordinator};
use super::error::TxnError;
use super::transaction_metadata::TransactionState;
use super::transaction_version::TransactionVersion;
use crate::log::TopicPartition;

/// How long a transactions-v2 add meeting CONCURRENT_TRANSACTIONS is asked
/// again, and how often (Kafka's `add.partitions.to.txn.retry.backoff.max.ms`
/// and `add.partitions.to.txn.retry.backoff.ms` defaults).
const ADD_PARTITION_RETRY_MAX: std::time::Duration = std::time::Duration::from_millis(100);
const ADD_PARTITION_RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(20);

/// In a cluster, how a broker that does not coordinate a transactional id
/// asks the broker that does (Kafka's AddPartitionsToTxn v4, sent by the
/// partition's leader: with `verify_only` at level 0, without at v2).
pub trait RemoteVerifier: Send + Sync + std::fmt::Debug {
    /// [`TransactionCoordinator::verify_partition_locally`] (or, under
    /// transactions v2, the add), answered by the coordinator of
    /// `transactional_id`; an unreachable or changing coordinator is
    /// [`TxnError::CoordinatorNotAvailable`] (retriable).
    ///
    /// # Errors
    /// As the local check.
    fn verify(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &TopicPartition,
        tv: TransactionVersion,
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
        let tv = TransactionVersion::TV_0;
        self.verify_partition_with(transactional_id, producer_id, producer_epoch, partition, tv)
    }

    /// [`Self::verify_partition`] at level 0; under transactions v2, add
    /// `partition` to the transaction (starting one if none is open), asked
    /// of the id's coordinator the same way.
    ///
    /// # Errors
    /// As [`Self::verify_partition_locally`]; adding never answers
    /// [`TxnError::PartitionNotInTransaction`].
    pub fn verify_partition_with(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &TopicPartition,
        tv: TransactionVersion,
    ) -> Result<(), TxnError> {
        let once =
            || self.verify_once(transactional_id, producer_id, producer_epoch, partition, tv);
        if !tv.supports_epoch_bump() {
            return once();
        }
        // The transaction before may be completing (its markers being
        // written): Kafka's leader asks again for a short while before it
        // answers CONCURRENT_TRANSACTIONS, which the producer retries.
        let start = std::time::Instant::now();
        loop {
            match once() {
                Err(TxnError::ConcurrentTransactions { .. })
                    if start.elapsed() < ADD_PARTITION_RETRY_MAX =>
                {
                    std::thread::sleep(ADD_PARTITION_RETRY_BACKOFF);
                }
                outcome => return outcome,
            }
        }
    }

    fn verify_once(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &TopicPartition,
        tv: TransactionVersion,
    ) -> Result<(), TxnError> {
        if let Some(remote) = self.remote_verifier.get() {
            if matches!(
                self.state.coordinator_epoch(transactional_id),
                Err(TxnError::NotCoordinator)
            ) {
                return remote.verify(transactional_id, producer_id, producer_epoch, partition, tv);
            }
        }
        if tv.supports_epoch_bump() {
            let partitions = std::collections::BTreeSet::from([partition.clone()]);
            return self.add_partitions_to_txn_with(
                transactional_id,
                producer_id,
                producer_epoch,
                &partitions,
                tv,
            );
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

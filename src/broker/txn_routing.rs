//! Transactions across the brokers of a cluster (docs/design/multi-broker.md,
//! 7.3), each transactional id coordinated by the leader of its
//! `__transaction_state` partition: the coordinator's markers reach each
//! partition's leader, and a leader asks the coordinator before a
//! transactional batch opens a transaction.
//!
//! * [`ClusterMarkerWriter`]: a marker for a partition led here is appended
//!   to the local log and counts once the partition's ISR holds it (Kafka
//!   writes markers with `acks=all`, so the Complete record never comes
//!   before a marker a failover could lose); one led elsewhere is sent to
//!   its leader as WriteTxnMarkers v1, which answers once its ISR holds it.
//!   A marker is never appended to a follower's log. Kafka's sender rules:
//!   UNKNOWN_TOPIC_OR_PARTITION means nothing to mark; every other code,
//!   an unreachable leader or a partition without one is retried by the
//!   coordinator (the transaction stays in Prepare* meanwhile).
//! * [`ClusterTxnVerifier`]: AddPartitionsToTxn v5 to the id's coordinator,
//!   with `verify_only` for a level-0 producer and without for transactions
//!   v2 (the coordinator adds the partition), answered as the local call
//!   would be (CONCURRENT_TRANSACTIONS included); a coordinator
//!   that cannot answer is retriable (NOT_ENOUGH_REPLICAS to the producer,
//!   as Kafka maps it).
//!
//! Both block on the network: they are called where the coordinator and
//! the produce path already run off the async workers.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::cluster::peers::BrokerChannels;
use crate::log::TopicPartition;
use crate::replica::coordinator_writes::{CoordinatorReplication, ReplicatedCoordinatorWrites};
use crate::replica::{Leading, ReplicaManager};
use crate::txn::{
    LogMarkerWriter, MarkerWriteError, RemoteVerifier, TransactionMarkerWriter, TransactionResult,
    TransactionStateManager, TransactionVersion, TxnError, TxnMarker, TRANSACTION_STATE_TOPIC,
};

/// See the module doc.
#[derive(Debug)]
pub struct ClusterMarkerWriter {
    pub local: Arc<LogMarkerWriter>,
    pub replica: Arc<ReplicaManager>,
    pub writes: ReplicatedCoordinatorWrites,
    pub peers: Arc<BrokerChannels>,
}

impl ClusterMarkerWriter {
    fn write_here(&self, tp: &TopicPartition, marker: &TxnMarker) -> Result<(), MarkerWriteError> {
        self.local.write_marker(tp, marker)?;
        let failed = |reason: String| MarkerWriteError::Failed { partition: tp.clone(), reason };
        let log = self.replica.logs().get_log(tp).ok_or_else(|| failed("the log went".into()))?;
        let end = crate::blocking::read(&log).log_end_offset();
        self.writes.await_committed(tp, end).map_err(|e| failed(e.to_string()))
    }

    fn send(&self, tp: &TopicPartition, marker: &TxnMarker) -> Result<(), MarkerWriteError> {
        let failed = |reason: String| MarkerWriteError::Failed { partition: tp.clone(), reason };
        let image = self.peers.image();
        let leader = image.topics.state(&tp.topic, tp.partition).map_or(-1, |s| s.state.leader);
        if leader < 0 || leader == self.replica.leadership().map_or(-1, |l| l.node_id()) {
            return Err(failed(format!("no leader to take it (leader {leader})")));
        }
        let topic = WritableTxnMarkerTopic::default()
            .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
            .with_partition_indexes(vec![tp.partition]);
        let request =
            WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
                .with_producer_id(ProducerId(marker.producer_id))
                .with_producer_epoch(marker.producer_epoch)
                .with_transaction_result(marker.result == TransactionResult::Commit)
                .with_topics(vec![topic])
                .with_coordinator_epoch(marker.coordinator_epoch)]);
        let call = || self.peers.call(leader, 1, &request);
        let response = crate::blocking::off_worker(call).map_err(|e| failed(e.to_string()))?;
        let code = response
            .markers
            .iter()
            .flat_map(|m| &m.topics)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == tp.partition)
            .map(|p| p.error_code)
            .ok_or_else(|| failed(format!("broker {leader} did not answer for the partition")))?;
        match code {
            0 => Ok(()),
            c if c == ResponseError::UnknownTopicOrPartition.code() => {
                Err(MarkerWriteError::UnknownTopicOrPartition(tp.clone()))
            }
            c => Err(failed(format!("broker {leader} answered error code {c}"))),
        }
    }
}

impl TransactionMarkerWriter for ClusterMarkerWriter {
    fn write_marker(
        &self,
        partition: &TopicPartition,
        marker: &TxnMarker,
    ) -> Result<(), MarkerWriteError> {
        match self.replica.leads(partition) {
            Leading::Yes => self.write_here(partition, marker),
            Leading::NotLeader => self.send(partition, marker),
            Leading::Unknown => Err(MarkerWriteError::UnknownTopicOrPartition(partition.clone())),
        }
    }

    fn has_open_transaction(&self, partition: &TopicPartition, producer_id: i64) -> Option<bool> {
        match self.replica.leads(partition) {
            Leading::Yes => self.local.has_open_transaction(partition, producer_id),
            // A follower's copy may lag: it cannot tell.
            Leading::NotLeader | Leading::Unknown => None,
        }
    }
}

/// See the module doc.
#[derive(Debug)]
pub struct ClusterTxnVerifier {
    pub peers: Arc<BrokerChannels>,
    /// For the partition of an id (the configured count).
    pub state: Arc<TransactionStateManager>,
}

impl RemoteVerifier for ClusterTxnVerifier {
    fn verify(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &TopicPartition,
        tv: TransactionVersion,
    ) -> Result<(), TxnError> {
        let unavailable = |why: String| {
            tracing::debug!(transactional_id, partition = %partition, "verification: {why}");
            TxnError::CoordinatorNotAvailable
        };
        let p = self.state.partition_for(transactional_id);
        let image = self.peers.image();
        let coordinator =
            image.topics.state(TRANSACTION_STATE_TOPIC, p).map_or(-1, |s| s.state.leader);
        if coordinator < 0 {
            return Err(unavailable(format!("{TRANSACTION_STATE_TOPIC}-{p} has no leader")));
        }
        let topic = AddPartitionsToTxnTopic::default()
            .with_name(TopicName(StrBytes::from_string(partition.topic.clone())))
            .with_partitions(vec![partition.partition]);
        let txn = AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_verify_only(!tv.supports_epoch_bump())
            .with_topics(vec![topic]);
        let request = AddPartitionsToTxnRequest::default().with_transactions(vec![txn]);
        // v5 only documents TRANSACTION_ABORTABLE; Kafka's brokers send 4+.
        let call = || self.peers.call(coordinator, 5, &request);
        let response = crate::blocking::off_worker(call).map_err(|e| unavailable(e.to_string()))?;
        if response.error_code != 0 {
            return Err(unavailable(format!("error code {}", response.error_code)));
        }
        let code = response
            .results_by_transaction
            .iter()
            .flat_map(|t| &t.topic_results)
            .flat_map(|t| &t.results_by_partition)
            .find(|p| p.partition_index == partition.partition)
            .map(|p| p.partition_error_code)
            .ok_or_else(|| unavailable("no answer for the partition".into()))?;
        let id = || transactional_id.to_string();
        if code == 0 {
            return Ok(());
        }
        match ResponseError::try_from_code(code) {
            Some(ResponseError::TransactionAbortable) => Err(TxnError::PartitionNotInTransaction {
                transactional_id: id(),
                partition: partition.clone(),
            }),
            Some(ResponseError::InvalidProducerIdMapping) => {
                Err(TxnError::InvalidProducerIdMapping { transactional_id: id() })
            }
            Some(ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch) => {
                Err(TxnError::ProducerFenced { transactional_id: id() })
            }
            Some(ResponseError::ConcurrentTransactions) => {
                Err(TxnError::ConcurrentTransactions { transactional_id: id() })
            }
            other => Err(unavailable(format!("error code {code} ({other:?})"))),
        }
    }
}

//! WriteTxnMarkers (v1): append COMMIT or ABORT markers to partitions. On
//! Kafka the transaction coordinator sends it to partition leaders; here the
//! coordinator writes its markers in-process, and this API serves the admin
//! abort path (`kafka-transactions abort`, `Admin.abortTransaction`), which
//! closes a hanging transaction the coordinator does not know of.
//!
//! Each marker goes through the coordinator's own writer
//! (`LogMarkerWriter::append_marker`): the partition's producer state checks
//! it, a fetch waiting for the last stable offset is woken, and a marker on
//! `__consumer_offsets` completes the group coordinator's pending
//! transactional offsets of the producer. Answers, per marker and partition,
//! as Kafka's `handleWriteTxnMarkersRequest`: NONE; UNKNOWN_TOPIC_OR_PARTITION
//! for a partition that does not exist; INVALID_PRODUCER_EPOCH for a producer
//! epoch below the partition's; TRANSACTION_COORDINATOR_FENCED for a
//! coordinator epoch below the one the partition recorded; KAFKA_STORAGE_ERROR
//! for an offline partition or a failed write (Kafka answers
//! UNKNOWN_TOPIC_OR_PARTITION for an offline one, which the coordinator would
//! take as "nothing to mark"). Markers are written in request order, and one
//! refused partition does not stop the others. A coordinator epoch above this
//! node's (always 0) is logged: the partition keeps it, and fences this
//! coordinator's own later markers of the producer there.
//!
//! In a cluster it is also how the transaction coordinator reaches the
//! leaders of its transactions' partitions (`broker::txn_routing`): a
//! partition led elsewhere gets NOT_LEADER_OR_FOLLOWER (an unknown one
//! UNKNOWN_TOPIC_OR_PARTITION) and nothing is appended, an ISR below its
//! min ISR NOT_ENOUGH_REPLICAS, and the answer waits until each appended
//! marker's ISR holds it (`acks=all`, REQUEST_TIMED_OUT after 30 s).
//!
//! Authorization, as Kafka's: ALTER on the cluster (the admin abort path;
//! not recorded when denied), else CLUSTER_ACTION on the cluster; denied:
//! CLUSTER_AUTHORIZATION_FAILED on every partition of every marker, nothing
//! written.

use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::ResponseError;

use super::error::error_code;
use super::RequestContext;
use crate::api::KafkaApis;
use crate::log::TopicPartition;
use crate::replica::Replicated;
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use crate::txn::{TransactionResult, TxnMarker, COORDINATOR_EPOCH};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let allowed = ctx.is_authorized(AclOperation::Alter, ResourceType::Cluster, CLUSTER_NAME)
        || ctx.authorize_cluster(AclOperation::ClusterAction);
    let markers = if allowed {
        let mut markers: Vec<_> = request.markers.iter().map(|m| write_marker(broker, m)).collect();
        if broker.cluster.is_some() {
            await_replication(broker, &mut markers);
        }
        markers
    } else {
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        request.markers.iter().map(|m| every_partition(m, denied)).collect()
    };
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// The marker's result: `code` of each of its partitions.
fn results(
    request: &WritableTxnMarker,
    mut code: impl FnMut(TopicPartition) -> i16,
) -> WritableTxnMarkerResult {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| {
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(code(TopicPartition::new(topic.name.as_str(), index)))
                })
                .collect();
            WritableTxnMarkerTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    WritableTxnMarkerResult::default().with_producer_id(request.producer_id).with_topics(topics)
}

/// `code` for every partition of the marker (Kafka's error response).
fn every_partition(request: &WritableTxnMarker, code: i16) -> WritableTxnMarkerResult {
    results(request, |_| code)
}

fn write_marker(broker: &KafkaApis, request: &WritableTxnMarker) -> WritableTxnMarkerResult {
    if broker.cluster.is_none() && request.coordinator_epoch > COORDINATOR_EPOCH {
        // The partitions record it, and refuse this node's coordinator (whose
        // epoch is fixed) any later marker of the producer there.
        tracing::warn!(
            producer_id = request.producer_id.0,
            coordinator_epoch = request.coordinator_epoch,
            "WriteTxnMarkers with a coordinator epoch above this node's ({COORDINATOR_EPOCH}): \
             the coordinator's own markers for this producer on these partitions will be fenced"
        );
    }
    let marker = TxnMarker {
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        coordinator_epoch: request.coordinator_epoch,
        result: if request.transaction_result {
            TransactionResult::Commit
        } else {
            TransactionResult::Abort
        },
    };
    results(request, |tp| match append(broker, &tp, &marker) {
        Ok(()) => 0,
        Err(e) => {
            tracing::info!(partition = %tp, producer_id = marker.producer_id, "WriteTxnMarkers: {e}");
            e.code().code()
        }
    })
}

/// Append `marker` to `tp` if this broker leads it (in a cluster, with an
/// ISR at its min ISR): a marker never lands on a follower's copy.
fn append(broker: &KafkaApis, tp: &TopicPartition, marker: &TxnMarker) -> Result<(), Refused> {
    if let Some(code) = broker.not_led(tp) {
        return Err(Refused::Code(code));
    }
    broker
        .replica
        .check_min_isr::<()>(tp)
        .map_err(|_| Refused::Code(ResponseError::NotEnoughReplicas))?;
    broker.markers.append_marker(tp, marker).map_err(Refused::Log)
}

/// Why a partition's marker was not appended.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("{0:?}")]
    Code(ResponseError),
    #[error("{0}")]
    Log(#[from] crate::log::LogError),
}

impl Refused {
    fn code(&self) -> ResponseError {
        match self {
            Refused::Code(code) => *code,
            Refused::Log(e) => error_code(e),
        }
    }
}

/// How long the markers wait for their partitions' ISRs (Kafka's
/// `request.timeout.ms` for this request, which carries no timeout).
const REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// In a cluster the markers are written with `acks=all`: each appended
/// one is answered once its partition's ISR holds it (the log end after
/// the appends); NOT_LEADER_OR_FOLLOWER if this broker stopped leading
/// meanwhile, REQUEST_TIMED_OUT if the ISR did not follow in time.
fn await_replication(broker: &KafkaApis, markers: &mut [WritableTxnMarkerResult]) {
    let mut pending = Vec::new();
    for m in markers.iter() {
        for t in &m.topics {
            for p in t.partitions.iter().filter(|p| p.error_code == 0) {
                let tp = TopicPartition::new(t.name.as_str(), p.partition_index);
                if let Some(log) = broker.logs.get_log(&tp) {
                    let end = crate::blocking::read(&log).log_end_offset();
                    pending.push((tp, end));
                }
            }
        }
    }
    if pending.is_empty() {
        return;
    }
    let runtime = tokio::runtime::Handle::current();
    let outcome = broker.replica.await_appended(&pending, REPLICATION_TIMEOUT, &runtime);
    let codes: std::collections::HashMap<TopicPartition, i16> = pending
        .into_iter()
        .zip(outcome)
        .map(|((tp, _), r)| {
            let code = match r {
                Replicated::Committed => 0,
                Replicated::NotLeader => ResponseError::NotLeaderOrFollower.code(),
                Replicated::TimedOut => ResponseError::RequestTimedOut.code(),
            };
            (tp, code)
        })
        .collect();
    for m in markers.iter_mut() {
        for t in &mut m.topics {
            for p in t.partitions.iter_mut().filter(|p| p.error_code == 0) {
                let tp = TopicPartition::new(t.name.as_str(), p.partition_index);
                if let Some(code) = codes.get(&tp) {
                    p.error_code = *code;
                }
            }
        }
    }
}

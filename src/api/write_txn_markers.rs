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
        request.markers.iter().map(|m| write_marker(broker, m)).collect()
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
    if request.coordinator_epoch > COORDINATOR_EPOCH {
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
    results(request, |tp| match broker.markers.append_marker(&tp, &marker) {
        Ok(()) => 0,
        Err(e) => {
            tracing::info!(partition = %tp, producer_id = marker.producer_id, "WriteTxnMarkers: {e}");
            error_code(&e).code()
        }
    })
}

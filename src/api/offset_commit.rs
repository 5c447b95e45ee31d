//! OffsetCommit (v2+): committed offsets are appended to `__consumer_offsets`
//! before they are acknowledged. v10 names topics by id.
//!
//! Authorization, as Kafka's `handleOffsetCommitRequest`: READ on the group
//! first (denied: GROUP_AUTHORIZATION_FAILED on every partition), then READ on
//! each topic (denied: TOPIC_AUTHORIZATION_FAILED on its partitions, which are
//! not committed). A partition of a topic that does not exist, or past the
//! topic's last, gets UNKNOWN_TOPIC_OR_PARTITION and is not committed. Only
//! the allowed, existing partitions reach the coordinator, and when none is
//! left it is not asked at all (so such a request creates no group).

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use kafka_protocol::ResponseError;

use super::error::group_code;
use super::offset_partitions::{by_topic_id, partition_codes, requested_offsets, PartitionChecks};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    if version >= 10 {
        return by_topic_id(broker, ctx, request, version);
    }
    by_name(broker, ctx, request, version)
}

/// v10 names topics by id (KIP-848): answered by name ([`by_topic_id`]).
fn by_topic_id(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group = request.group_id.0.as_str();
    let refused = (!ctx.authorize(AclOperation::Read, ResourceType::Group, group))
        .then_some(ResponseError::GroupAuthorizationFailed.code());
    let topics = by_topic_id!(broker, request, OffsetCommitResponseTopic,
        OffsetCommitResponsePartition, refused: refused,
        by_name: |named| by_name(broker, ctx, &named, version));
    OffsetCommitResponse::default().with_topics(topics)
}

fn by_name(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group = request.group_id.0.as_str();
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, group) {
        return every_partition(request, ResponseError::GroupAuthorizationFailed.code());
    }
    // Kafka: members of the consumer group protocol commit with v9+ (member epochs).
    if version < 9 && broker.groups.is_consumer_group_member(group, request.member_id.as_str()) {
        return every_partition(request, ResponseError::UnsupportedVersion.code());
    }
    let topics = request.topics.iter().map(|t| t.name.0.as_str());
    let checks = PartitionChecks::new(ctx, broker, topics);
    let offsets = requested_offsets!(&request.topics, checks, leader_epoch: version >= 6);
    let results = if offsets.is_empty() {
        Vec::new()
    } else {
        let instance = if version >= 7 {
            request.group_instance_id.as_ref().map(|s| s.to_string())
        } else {
            None
        };
        broker.groups.commit(
            group,
            request.generation_id_or_member_epoch,
            request.member_id.as_str(),
            instance.as_deref(),
            &offsets,
        )
    };
    let mut results = results.into_iter();
    let topics = partition_codes!(
        request.topics,
        OffsetCommitResponseTopic,
        OffsetCommitResponsePartition,
        |t, p| {
            checks
                .code(t.name.0.as_str(), p.partition_index, || group_code(results.next().flatten()))
        }
    );
    OffsetCommitResponse::default().with_topics(topics)
}

/// Kafka's error response: `code` on every partition of the request.
fn every_partition(request: &OffsetCommitRequest, code: i16) -> OffsetCommitResponse {
    let topics = partition_codes!(
        request.topics,
        OffsetCommitResponseTopic,
        OffsetCommitResponsePartition,
        |t, p| code
    );
    OffsetCommitResponse::default().with_topics(topics)
}

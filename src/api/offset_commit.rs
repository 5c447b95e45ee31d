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
use super::offset_partitions::{partition_codes, requested_offsets, PartitionChecks};
use super::{topic_name, RequestContext};
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

/// v10 names topics by id (KIP-848): each id is resolved to its topic and
/// committed as by name, the answer carrying the id; an id no topic has
/// gets UNKNOWN_TOPIC_ID on its partitions. Answers keep the request order.
fn by_topic_id(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    // A denied group learns nothing of the ids, as on Kafka.
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, request.group_id.0.as_str()) {
        let mut r = every_partition(request, ResponseError::GroupAuthorizationFailed.code());
        for (t, asked) in r.topics.iter_mut().zip(&request.topics) {
            t.topic_id = asked.topic_id;
        }
        return r;
    }
    let names: Vec<Option<String>> =
        request.topics.iter().map(|t| broker.topic_name_by_id(&t.topic_id)).collect();
    let mut named = request.clone();
    named.topics = request
        .topics
        .iter()
        .zip(&names)
        .filter_map(|(t, name)| Some(t.clone().with_name(topic_name(name.clone()?))))
        .collect();
    let mut answered = by_name(broker, ctx, &named, version).topics.into_iter();
    let topics = request
        .topics
        .iter()
        .zip(&names)
        .map(|(t, name)| match name {
            Some(_) => answered.next().unwrap_or_default().with_topic_id(t.topic_id),
            None => {
                let code = ResponseError::UnknownTopicId.code();
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        OffsetCommitResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(code)
                    })
                    .collect();
                OffsetCommitResponseTopic::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions)
            }
        })
        .collect();
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

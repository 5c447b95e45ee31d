//! OffsetDelete: remove a group's committed offsets for topics it does not
//! (or no longer) consume.
//!
//! Authorization, as Kafka's `handleOffsetDeleteRequest`: DELETE on the group
//! first (denied: the top-level GROUP_AUTHORIZATION_FAILED), then READ on
//! each topic (denied: TOPIC_AUTHORIZATION_FAILED on its partitions, whose
//! offsets stay). A partition of a topic that does not exist, or past the
//! topic's last, gets UNKNOWN_TOPIC_OR_PARTITION; the group is still checked
//! (a missing group is the top-level error), as Kafka does.

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use kafka_protocol::ResponseError;

use super::error::group_code;
use super::offset_partitions::{partition_codes, PartitionChecks};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group = request.group_id.0.as_str();
    if !ctx.authorize(AclOperation::Delete, ResourceType::Group, group) {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let topics = request.topics.iter().map(|t| t.name.0.as_str());
    let checks = PartitionChecks::new(ctx, broker, topics);
    let partitions: Vec<(String, i32)> = request
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.as_str(), p.partition_index)))
        .filter(|(t, p)| checks.passes(t, *p))
        .map(|(t, p)| (t.to_string(), p))
        .collect();
    match broker.groups.delete_offsets(group, &partitions) {
        Err(e) => OffsetDeleteResponse::default().with_error_code(group_code(Some(e))),
        Ok(results) => {
            let mut results = results.into_iter();
            let topics = partition_codes!(
                request.topics,
                OffsetDeleteResponseTopic,
                OffsetDeleteResponsePartition,
                |t, p| {
                    checks.code(t.name.0.as_str(), p.partition_index, || {
                        group_code(results.next().flatten())
                    })
                }
            );
            OffsetDeleteResponse::default().with_topics(topics)
        }
    }
}

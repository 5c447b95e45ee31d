//! ConsumerGroupDescribe (KIP-848): epochs, assignor, and every member's
//! subscription, current and target assignment. UNSUPPORTED_VERSION when
//! `group.coordinator.rebalance.protocols` leaves `consumer` out; DESCRIBE on
//! each group is checked first (GROUP_AUTHORIZATION_FAILED), the denied
//! groups answered before the described ones, as Kafka's `KafkaApis` does.
//! A classic or unknown group is GROUP_ID_NOT_FOUND with Kafka's message,
//! which tells the admin client to ask DescribeGroups instead.

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId,
};
use kafka_protocol::ResponseError;

use super::error::group_error_code;
use super::{str_bytes, topic_name, RequestContext};
use crate::api::KafkaApis;
use crate::group::GroupError;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    if !broker.groups.config().consumer_protocol_enabled {
        let groups = request
            .group_ids
            .iter()
            .map(|id| {
                DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_error_code(ResponseError::UnsupportedVersion.code())
            })
            .collect();
        return ConsumerGroupDescribeResponse::default().with_groups(groups);
    }
    let (allowed, denied): (Vec<&GroupId>, Vec<&GroupId>) = request
        .group_ids
        .iter()
        .partition(|id| ctx.authorize(AclOperation::Describe, ResourceType::Group, id.0.as_str()));
    let denied = denied.into_iter().map(|id| {
        DescribedGroup::default()
            .with_group_id(id.clone())
            .with_error_code(ResponseError::GroupAuthorizationFailed.code())
    });
    let described = allowed.into_iter().map(|id| {
        let out = describe(broker, id);
        if request.include_authorized_operations && out.error_code == 0 {
            let bits = ctx.authorized_operations(ResourceType::Group, id.0.as_str());
            out.with_authorized_operations(bits)
        } else {
            out
        }
    });
    ConsumerGroupDescribeResponse::default().with_groups(denied.chain(described).collect())
}

fn assignment(partitions: Vec<([u8; 16], String, Vec<i32>)>) -> Assignment {
    Assignment::default().with_topic_partitions(
        partitions
            .into_iter()
            .map(|(id, name, ps)| {
                TopicPartitions::default()
                    .with_topic_id(uuid::Uuid::from_bytes(id))
                    .with_topic_name(topic_name(name))
                    .with_partitions(ps)
            })
            .collect(),
    )
}

fn describe(broker: &KafkaApis, id: &GroupId) -> DescribedGroup {
    let out = DescribedGroup::default().with_group_id(id.clone());
    match broker.groups.consumer_describe(id.0.as_str()) {
        Err(e) => {
            let message = matches!(e, GroupError::NotFound(_)).then(|| str_bytes(e.to_string()));
            out.with_error_code(group_error_code(e).code()).with_error_message(message)
        }
        Ok(d) => out
            .with_group_state(str_bytes(d.state.name()))
            .with_group_epoch(d.group_epoch)
            .with_assignment_epoch(d.assignment_epoch)
            .with_assignor_name(str_bytes(d.assignor_name))
            .with_members(
                d.members
                    .into_iter()
                    .map(|m| {
                        Member::default()
                            .with_member_id(str_bytes(m.member_id))
                            .with_instance_id(m.instance_id.map(str_bytes))
                            .with_rack_id(m.rack_id.map(str_bytes))
                            .with_member_epoch(m.member_epoch)
                            .with_client_id(str_bytes(m.client_id))
                            .with_client_host(str_bytes(m.client_host))
                            .with_subscribed_topic_names(
                                m.subscribed_topic_names.into_iter().map(topic_name).collect(),
                            )
                            .with_subscribed_topic_regex(m.subscribed_topic_regex.map(str_bytes))
                            .with_assignment(assignment(m.assignment))
                            .with_target_assignment(assignment(m.target_assignment))
                            // 0: a classic-protocol member, 1: consumer protocol.
                            .with_member_type(if m.classic { 0 } else { 1 })
                    })
                    .collect(),
            ),
    }
}

//! ConsumerGroupHeartbeat (KIP-848): the consumer group protocol's only
//! membership API. Refused with UNSUPPORTED_VERSION when
//! `group.coordinator.rebalance.protocols` leaves `consumer` out, as Kafka's
//! `KafkaApis` does. Authorization, as Kafka checks it: READ on the group
//! (GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every subscribed topic
//! (TOPIC_AUTHORIZATION_FAILED when any is denied: a member may not learn
//! about topics it cannot see). With an authorizer, a regular expression
//! subscription is refused (INVALID_REQUEST): what it matches is not
//! filtered by the member's rights.

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::ResponseError;

use super::error::group_error_code;
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::group::consumer_group_records::Assignment as Partitions;
use crate::group::{ConsumerHeartbeat, GroupError};
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &ConsumerGroupHeartbeatRequest,
    version: i16,
) -> ConsumerGroupHeartbeatResponse {
    let fail = |code: ResponseError, message: Option<String>| {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code.code())
            .with_error_message(message.map(str_bytes))
    };
    if !broker.groups.config().consumer_protocol_enabled {
        return fail(ResponseError::UnsupportedVersion, None);
    }
    let group_id = request.group_id.0.as_str();
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, group_id) {
        return fail(ResponseError::GroupAuthorizationFailed, None);
    }
    if let Some(names) = &request.subscribed_topic_names {
        if names
            .iter()
            .any(|t| !ctx.authorize(AclOperation::Describe, ResourceType::Topic, t.0.as_str()))
        {
            return fail(ResponseError::TopicAuthorizationFailed, None);
        }
    }
    // Kafka filters what a regular expression matches by the member's
    // DESCRIBE rights as topics come and go; that is not done here, so with
    // an authorizer a member subscribes by topic names.
    if ctx.authorizer.is_some()
        && request.subscribed_topic_regex.as_ref().is_some_and(|r| !r.is_empty())
    {
        let message = "regular expression subscriptions are not served with an authorizer; subscribe by topic names";
        return fail(ResponseError::InvalidRequest, Some(message.to_string()));
    }
    let heartbeat = ConsumerHeartbeat {
        group_id: group_id.to_string(),
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.as_ref().map(ToString::to_string),
        rack_id: request.rack_id.as_ref().map(ToString::to_string),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|t| t.0.to_string()).collect()),
        subscribed_topic_regex: request.subscribed_topic_regex.as_ref().map(ToString::to_string),
        server_assignor: request.server_assignor.as_ref().map(ToString::to_string),
        owned: request.topic_partitions.as_ref().map(|tps| {
            let mut owned = Partitions::new();
            for tp in tps {
                owned
                    .entry(*tp.topic_id.as_bytes())
                    .or_default()
                    .extend(tp.partitions.iter().copied());
            }
            owned
        }),
        client_id: ctx.header.client_id.as_ref().map_or("", |c| c.as_str()).to_string(),
        client_host: ctx.session.client_host(),
        version,
    };
    match broker.groups.consumer_heartbeat(&heartbeat) {
        Ok(r) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(r.member_id)))
            .with_member_epoch(r.member_epoch)
            .with_heartbeat_interval_ms(r.heartbeat_interval_ms)
            .with_assignment(r.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(uuid::Uuid::from_bytes(id))
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Err(e) => {
            let message = match &e {
                GroupError::InvalidRequest(m) => Some(m.clone()),
                GroupError::UnsupportedAssignor(_) | GroupError::InvalidRegularExpression(_) => {
                    Some(e.to_string())
                }
                _ => None,
            };
            fail(group_error_code(e), message)
        }
    }
}

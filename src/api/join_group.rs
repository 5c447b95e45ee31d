//! JoinGroup: register or refresh a member and wait for the join round to
//! complete (see `group` for the protocol). READ on the group is checked
//! first: a denied member gets GROUP_AUTHORIZATION_FAILED and never joins.

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::ResponseError;

use super::error::group_code;
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::group::{GroupError, JoinRequest, JoinResult, Reply};
use crate::security::acl::{AclOperation, ResourceType};

pub async fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, request.group_id.0.as_str()) {
        // Kafka's error response: no generation, leader or member id; the
        // protocol name is null from v7 and empty before.
        return JoinGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code())
            .with_generation_id(-1)
            .with_protocol_name(if version >= 7 { None } else { Some(str_bytes("")) });
    }
    let client_id = ctx.header.client_id.as_ref().map_or("", |c| c.as_str());
    let client_host = ctx.session.client_host();
    let args = JoinRequest {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: client_id.to_string(),
        client_host,
        session_timeout_ms: request.session_timeout_ms,
        // v0 had no rebalance timeout: the session timeout served for both.
        rebalance_timeout_ms: if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
    };
    let member_id = args.member_id.clone();
    let result = match tokio::task::block_in_place(|| broker.groups.join(args)) {
        Reply::Now(r) => r,
        Reply::Wait(rx) => rx
            .await
            .unwrap_or_else(|_| JoinResult::error(GroupError::CoordinatorNotAvailable, member_id)),
    };
    let members = result
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let m = JoinGroupResponseMember::default()
                .with_member_id(str_bytes(id))
                .with_metadata(metadata);
            if version >= 5 {
                m.with_group_instance_id(instance.map(str_bytes))
            } else {
                m
            }
        })
        .collect();
    let mut response = JoinGroupResponse::default()
        .with_error_code(group_code(result.error))
        .with_generation_id(result.generation)
        // Before v7 the protocol name is a non-null string.
        .with_protocol_name(
            Some(str_bytes(result.protocol.clone().unwrap_or_default()))
                .filter(|_| version < 7 || result.protocol.is_some()),
        )
        .with_leader(str_bytes(result.leader))
        .with_member_id(str_bytes(result.member_id))
        .with_members(members);
    if version >= 7 {
        response.protocol_type = result.protocol_type.map(str_bytes);
    }
    if version >= 9 {
        response.skip_assignment = result.skip_assignment;
    }
    response
}

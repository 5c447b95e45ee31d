//! LeaveGroup: one member (v0–2) or a batch of members by id or instance id (v3+).
//! READ on the group is checked first: a denial is the top-level
//! GROUP_AUTHORIZATION_FAILED with no member answers, as Kafka's.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::ResponseError;

use super::error::group_code;
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, request.group_id.0.as_str()) {
        return LeaveGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| (m.member_id.to_string(), m.group_instance_id.as_ref().map(|s| s.to_string())))
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    match broker.groups.leave(request.group_id.0.as_str(), &members) {
        Err(e) => LeaveGroupResponse::default().with_error_code(group_code(Some(e))),
        Ok(results) if version >= 3 => {
            let responses = members
                .into_iter()
                .zip(results)
                .map(|((id, instance), e)| {
                    MemberResponse::default()
                        .with_member_id(str_bytes(id))
                        .with_group_instance_id(instance.map(str_bytes))
                        .with_error_code(group_code(e))
                })
                .collect();
            LeaveGroupResponse::default().with_members(responses)
        }
        Ok(results) => LeaveGroupResponse::default()
            .with_error_code(group_code(results.into_iter().next().flatten())),
    }
}

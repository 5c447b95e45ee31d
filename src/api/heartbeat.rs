//! Heartbeat: keeps a member's session alive and tells it when to rejoin.
//! READ on the group is checked first (GROUP_AUTHORIZATION_FAILED).

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use kafka_protocol::ResponseError;

use super::error::group_code;
use super::RequestContext;
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &HeartbeatRequest,
) -> HeartbeatResponse {
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, request.group_id.0.as_str()) {
        return HeartbeatResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let result = broker.groups.heartbeat(
        request.group_id.0.as_str(),
        request.generation_id,
        request.member_id.as_str(),
        request.group_instance_id.as_ref().map(|s| s.as_str()),
    );
    HeartbeatResponse::default().with_error_code(group_code(result.err()))
}

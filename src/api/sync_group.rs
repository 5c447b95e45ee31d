//! SyncGroup: the leader hands in the assignment; every member waits for its own.
//! READ on the group is checked first (GROUP_AUTHORIZATION_FAILED); as on
//! Kafka, a v5+ request without its protocol type or name is
//! INCONSISTENT_GROUP_PROTOCOL even for a denied principal.

use bytes::Bytes;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::ResponseError;

use super::error::group_code;
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::group::{GroupError, Reply, SyncResult};
use crate::security::acl::{AclOperation, ResourceType};

pub async fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, request.group_id.0.as_str()) {
        let incomplete =
            version >= 5 && (request.protocol_type.is_none() || request.protocol_name.is_none());
        let code = if incomplete {
            ResponseError::InconsistentGroupProtocol
        } else {
            ResponseError::GroupAuthorizationFailed
        };
        return SyncGroupResponse::default().with_error_code(code.code());
    }
    let assignments = request
        .assignments
        .iter()
        .map(|a| (a.member_id.to_string(), a.assignment.clone()))
        .collect();
    let reply = tokio::task::block_in_place(|| {
        broker.groups.sync(
            request.group_id.0.as_str(),
            request.generation_id,
            request.member_id.as_str(),
            request.protocol_type.as_ref().map(|s| s.as_str()),
            request.protocol_name.as_ref().map(|s| s.as_str()),
            assignments,
        )
    });
    let result = match reply {
        Reply::Now(r) => r,
        Reply::Wait(rx) => rx.await.unwrap_or(SyncResult {
            error: Some(GroupError::CoordinatorNotAvailable),
            protocol_type: None,
            protocol: None,
            assignment: Bytes::new(),
        }),
    };
    let mut response = SyncGroupResponse::default()
        .with_error_code(group_code(result.error))
        .with_assignment(result.assignment);
    if version >= 5 {
        response.protocol_type = result.protocol_type.map(str_bytes);
        response.protocol_name = result.protocol.map(str_bytes);
    }
    response
}

//! DeleteGroups: empty groups only; their offsets and metadata get tombstones.
//! v3 adds each refused group's reason.
//!
//! DELETE on each group is checked first: a denied group is answered
//! GROUP_AUTHORIZATION_FAILED and kept; as Kafka's `handleDeleteGroupsRequest`
//! builds its answer, the denied groups come after the others.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};
use kafka_protocol::ResponseError;

use super::error::group_code;
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::group::GroupError;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let (allowed, denied): (Vec<&GroupId>, Vec<&GroupId>) = request
        .groups_names
        .iter()
        .partition(|g| ctx.authorize(AclOperation::Delete, ResourceType::Group, g.0.as_str()));
    // v3+ says why a group was not deleted (the field is not sent before).
    let deleted = allowed.into_iter().map(|g| {
        let error = broker.groups.delete_group(g.0.as_str()).err();
        // A storage error's text names files: the client gets its kind only.
        let message = error.as_ref().map(|e| match e {
            GroupError::Storage(_) => str_bytes("The group's tombstones could not be written."),
            e => str_bytes(e.to_string()),
        });
        DeletableGroupResult::default()
            .with_group_id(g.clone())
            .with_error_code(group_code(error))
            .with_error_message(message)
    });
    let denied = denied.into_iter().map(|g| {
        DeletableGroupResult::default()
            .with_group_id(g.clone())
            .with_error_code(ResponseError::GroupAuthorizationFailed.code())
    });
    DeleteGroupsResponse::default().with_results(deleted.chain(denied).collect())
}

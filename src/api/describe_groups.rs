//! DescribeGroups: state, protocol and members (with metadata and assignment
//! once the group is stable). An unknown group is reported Dead, as in Kafka;
//! so is a consumer group before v6 (from v6, GROUP_ID_NOT_FOUND).
//!
//! DESCRIBE on each group is checked first: a denied group is answered
//! GROUP_AUTHORIZATION_FAILED with empty fields, and, as Kafka's
//! `handleDescribeGroupsRequest` builds its answer, the denied groups come
//! before the described ones. From v3, `include_authorized_operations` asks
//! for the group's authorized-operations bits (every supported bit with no
//! authorizer); otherwise the field stays `i32::MIN`.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};
use kafka_protocol::ResponseError;

use super::error::group_code;
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::group::GroupError;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let (allowed, denied): (Vec<&GroupId>, Vec<&GroupId>) = request
        .groups
        .iter()
        .partition(|id| ctx.authorize(AclOperation::Describe, ResourceType::Group, id.0.as_str()));
    let with_operations = version >= 3 && request.include_authorized_operations;
    let denied = denied.into_iter().map(|id| {
        DescribedGroup::default()
            .with_group_id(id.clone())
            .with_error_code(ResponseError::GroupAuthorizationFailed.code())
    });
    let described = allowed.into_iter().map(|id| {
        let out = describe(broker, id, version);
        if with_operations && out.error_code == 0 {
            let bits = ctx.authorized_operations(ResourceType::Group, id.0.as_str());
            out.with_authorized_operations(bits)
        } else {
            out
        }
    });
    DescribeGroupsResponse::default().with_groups(denied.chain(described).collect())
}

fn describe(broker: &KafkaApis, id: &GroupId, version: i16) -> DescribedGroup {
    let out = DescribedGroup::default().with_group_id(id.clone());
    match broker.groups.describe(id.0.as_str()) {
        // A consumer group is not a classic group: Kafka answers
        // GROUP_ID_NOT_FOUND with its message from v6, Dead before.
        Err(GroupError::NotFound(message)) if version >= 6 => out
            .with_error_code(ResponseError::GroupIdNotFound.code())
            .with_error_message(Some(str_bytes(message))),
        Err(GroupError::NotFound(_)) => out.with_group_state(str_bytes("Dead")),
        Err(e) => out.with_error_code(group_code(Some(e))),
        Ok(d) => {
            let members = d
                .members
                .into_iter()
                .map(|(member_id, instance, client_id, host, meta, asg)| {
                    let m = DescribedGroupMember::default()
                        .with_member_id(str_bytes(member_id))
                        .with_client_id(str_bytes(client_id))
                        .with_client_host(str_bytes(host))
                        .with_member_metadata(meta)
                        .with_member_assignment(asg);
                    if version >= 4 {
                        m.with_group_instance_id(instance.map(str_bytes))
                    } else {
                        m
                    }
                })
                .collect();
            out.with_group_state(str_bytes(d.state.name()))
                .with_protocol_type(str_bytes(d.protocol_type))
                .with_protocol_data(str_bytes(d.protocol))
                .with_members(members)
        }
    }
}

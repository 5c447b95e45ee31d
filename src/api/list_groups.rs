//! ListGroups, with the state (v4+) and type (v5+) filters. A principal
//! with DESCRIBE on the cluster sees every group; any other sees only the
//! groups it may describe (filter-only checks: no denial is recorded, as
//! Kafka's `logIfDenied = false`).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::error::group_code;
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let every_group =
        ctx.is_authorized(AclOperation::Describe, ResourceType::Cluster, CLUSTER_NAME);
    match broker.groups.list() {
        Err(e) => ListGroupsResponse::default().with_error_code(group_code(Some(e))),
        Ok(groups) => {
            let states: Vec<String> =
                request.states_filter.iter().map(|s| s.to_lowercase()).collect();
            let types: Vec<String> =
                request.types_filter.iter().map(|s| s.to_lowercase()).collect();
            let listed = groups
                .into_iter()
                .filter(|g| states.is_empty() || states.contains(&g.state.to_lowercase()))
                .filter(|g| {
                    every_group
                        || ctx.is_authorized(
                            AclOperation::Describe,
                            ResourceType::Group,
                            &g.group_id,
                        )
                })
                .filter(|g| types.is_empty() || types.iter().any(|t| t == g.group_type))
                .map(|g| {
                    let listed = ListedGroup::default()
                        .with_group_id(GroupId(str_bytes(g.group_id)))
                        .with_protocol_type(str_bytes(g.protocol_type));
                    let listed = if version >= 4 {
                        listed.with_group_state(str_bytes(g.state))
                    } else {
                        listed
                    };
                    if version >= 5 {
                        listed.with_group_type(str_bytes(g.group_type))
                    } else {
                        listed
                    }
                })
                .collect();
            ListGroupsResponse::default().with_groups(listed)
        }
    }
}

//! ListGroups, with the state (v4+) and type (v5+) filters. A principal
//! with DESCRIBE on the cluster sees every group; any other sees only the
//! groups it may describe (filter-only checks: no denial is recorded, as
//! Kafka's `logIfDenied = false`).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::error::group_code;
use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

pub fn handle(
    broker: &Broker,
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
                .filter(|(_, _, state)| {
                    states.is_empty() || states.contains(&state.name().to_lowercase())
                })
                .filter(|(id, _, _)| {
                    every_group
                        || ctx.is_authorized(AclOperation::Describe, ResourceType::Group, id)
                })
                // Every group here is a classic group.
                .filter(|_| types.is_empty() || types.iter().any(|t| t == "classic"))
                .map(|(id, protocol_type, state)| {
                    let g = ListedGroup::default()
                        .with_group_id(GroupId(str_bytes(id)))
                        .with_protocol_type(str_bytes(protocol_type));
                    let g =
                        if version >= 4 { g.with_group_state(str_bytes(state.name())) } else { g };
                    if version >= 5 {
                        g.with_group_type(str_bytes("classic"))
                    } else {
                        g
                    }
                })
                .collect();
            ListGroupsResponse::default().with_groups(listed)
        }
    }
}

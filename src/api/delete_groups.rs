//! DeleteGroups: empty groups only; their offsets and metadata get tombstones.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::error::group_code;
use crate::broker::Broker;

pub fn handle(broker: &Broker, request: &DeleteGroupsRequest) -> DeleteGroupsResponse {
    let results = request
        .groups_names
        .iter()
        .map(|g| {
            DeletableGroupResult::default()
                .with_group_id(g.clone())
                .with_error_code(group_code(broker.groups.delete_group(g.0.as_str()).err()))
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}

//! DescribeGroups: state, protocol and members (with metadata and assignment
//! once the group is stable). An unknown group is reported Dead, as in Kafka.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use super::error::group_code;
use super::str_bytes;
use crate::broker::Broker;

pub fn handle(
    broker: &Broker,
    request: &DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let groups = request
        .groups
        .iter()
        .map(|id| {
            let out = DescribedGroup::default().with_group_id(id.clone());
            match broker.groups.describe(id.0.as_str()) {
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
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

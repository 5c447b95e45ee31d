//! Heartbeat: keeps a member's session alive and tells it when to rejoin.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::error::group_code;
use crate::broker::Broker;

pub fn handle(broker: &Broker, request: &HeartbeatRequest) -> HeartbeatResponse {
    let result = broker.groups.heartbeat(
        request.group_id.0.as_str(),
        request.generation_id,
        request.member_id.as_str(),
        request.group_instance_id.as_ref().map(|s| s.as_str()),
    );
    HeartbeatResponse::default().with_error_code(group_code(result.err()))
}

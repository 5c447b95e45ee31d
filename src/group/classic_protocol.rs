//! The classic group protocol's requests and answers as the coordinator
//! takes and gives them (Kafka's `JoinGroupResult`, `SyncGroupResult`), and
//! [`Reply`]: answered now, or when the join round completes.

use bytes::Bytes;
use tokio::sync::oneshot;

use super::error::GroupError;

/// What a JoinGroup gets back.
#[derive(Debug, Clone)]
pub struct JoinResult {
    pub error: Option<GroupError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// (member id, group instance id, metadata): for the leader only.
    pub members: Vec<(String, Option<String>, Bytes)>,
    pub skip_assignment: bool,
}

impl JoinResult {
    pub fn error(e: GroupError, member_id: String) -> Self {
        Self {
            error: Some(e),
            generation: -1,
            protocol_type: None,
            protocol: None,
            leader: String::new(),
            member_id,
            members: vec![],
            skip_assignment: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct SyncResult {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    pub(super) fn error(e: GroupError) -> Self {
        Self { error: Some(e), protocol_type: None, protocol: None, assignment: Bytes::new() }
    }
}

/// A JoinGroup or SyncGroup answered now or after the round completes.
pub enum Reply<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

/// Arguments of a JoinGroup.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a new dynamic member first gets MEMBER_ID_REQUIRED with its id.
    pub require_known_member_id: bool,
    /// v9+: a static leader rejoining a stable group may skip the assignment.
    pub supports_skip_assignment: bool,
}

//! `GroupError`: what a group request can fail with, and `SchemaError`:
//! a `__consumer_offsets` record that does not decode. `api/` maps each variant
//! to Kafka's error code; nothing here knows the codes.

use std::sync::Arc;

use super::group_state::GroupStateError;
use crate::log::LogError;
use crate::readable::ReadError;
use crate::writable::WriteError;

/// Errors a group request can get.
///
/// `Clone`, because one failure can answer several waiting members (a failed
/// write of the leader's assignment fails every member's SyncGroup); the
/// storage cause is therefore shared behind an `Arc`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GroupError {
    #[error("the coordinator is loading")]
    CoordinatorLoadInProgress,
    #[error("the coordinator is not available")]
    CoordinatorNotAvailable,
    /// Another broker coordinates the group (NOT_COORDINATOR).
    #[error("this broker does not coordinate the group")]
    NotCoordinator,
    #[error("invalid group id")]
    InvalidGroupId,
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("a member id is required")]
    MemberIdRequired,
    #[error("illegal generation")]
    IllegalGeneration,
    #[error("a rebalance is in progress")]
    RebalanceInProgress,
    #[error("inconsistent group protocol")]
    InconsistentGroupProtocol,
    #[error("session timeout outside the broker's range")]
    InvalidSessionTimeout,
    #[error("the group is full")]
    GroupMaxSizeReached,
    #[error("the static member was replaced by a newer instance")]
    FencedInstanceId,
    #[error("the group is not empty")]
    NonEmptyGroup,
    #[error("the group does not exist")]
    GroupIdNotFound,
    /// GROUP_ID_NOT_FOUND with Kafka's message (the group is unknown or of
    /// the other kind).
    #[error("{0}")]
    NotFound(String),
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    #[error("offset metadata too large")]
    OffsetMetadataTooLarge,
    /// A transactional offset commit of a producer epoch older than the one
    /// the offsets partition knows.
    #[error("the producer's epoch is fenced")]
    InvalidProducerEpoch,
    /// A malformed request (Kafka's message is kept for the answer).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("the member epoch is fenced; the member must rejoin")]
    FencedMemberEpoch,
    #[error("the member epoch is stale")]
    StaleMemberEpoch,
    #[error("the static member's instance id is still in use")]
    UnreleasedInstanceId,
    #[error("server assignor {0} is not supported")]
    UnsupportedAssignor(String),
    #[error("{0}")]
    InvalidRegularExpression(String),
    /// A protocol the broker does not enable (`group.coordinator.rebalance.protocols`).
    #[error("the group protocol is not enabled")]
    UnsupportedVersion,
    /// A record of the request does not fit Kafka's schema (a string over
    /// 32,767 bytes): refused before anything is written, as Kafka's record
    /// serializer throws (UNKNOWN_SERVER_ERROR there too).
    #[error("{0}")]
    Schema(SchemaError),
    /// Writing (or creating) the offsets topic failed.
    #[error("storage error on the offsets topic: {0}")]
    Storage(#[source] Arc<LogError>),
    /// The coordinator attempted a state change its state machine forbids: a
    /// bug, refused rather than applied.
    #[error("{0}")]
    IllegalState(#[from] GroupStateError),
}

/// Kafka's mapping of a coordinator's failed `acks=all` write.
impl From<crate::replica::coordinator_writes::CoordinatorWriteError> for GroupError {
    fn from(e: crate::replica::coordinator_writes::CoordinatorWriteError) -> Self {
        use crate::replica::coordinator_writes::CoordinatorWriteError as W;
        match e {
            W::NotLeader => GroupError::NotCoordinator,
            W::NotEnoughReplicas | W::TimedOut => GroupError::CoordinatorNotAvailable,
        }
    }
}

impl From<LogError> for GroupError {
    fn from(e: LogError) -> Self {
        GroupError::Storage(Arc::new(e))
    }
}

/// Storage errors are equal when their causes read the same (`LogError`
/// holds I/O errors, which have no equality); every other variant compares
/// by value.
impl PartialEq for GroupError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (GroupError::Storage(a), GroupError::Storage(b)) => {
                Arc::ptr_eq(a, b) || a.to_string() == b.to_string()
            }
            (GroupError::IllegalState(a), GroupError::IllegalState(b)) => a == b,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

impl Eq for GroupError {}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("malformed __consumer_offsets record: {0}")]
pub struct SchemaError(String);

impl SchemaError {
    pub(super) fn new(reason: impl Into<String>) -> Self {
        SchemaError(reason.into())
    }
}

impl From<ReadError> for SchemaError {
    fn from(e: ReadError) -> Self {
        SchemaError(e.0)
    }
}

impl From<WriteError> for SchemaError {
    fn from(e: WriteError) -> Self {
        SchemaError(e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_keeps_its_cause() {
        let e = GroupError::from(LogError::TopicExists("t".into()));
        let source = std::error::Error::source(&e).expect("a source");
        assert_eq!(source.to_string(), "topic t already exists");
        assert_eq!(e, e.clone());
        assert_ne!(e, GroupError::from(LogError::Deleted("t".into())));
        assert_ne!(e, GroupError::CoordinatorNotAvailable);
    }
}

//! The one place Kafka error codes are chosen for this broker's typed errors:
//! storage errors (`LogError`, `BatchError`), group coordinator errors
//! (`GroupError`) and transaction coordinator errors (`TxnError`, whose code
//! also depends on the API and its version). Handlers call these and never pick a code for such an
//! error themselves, so a given failure is answered with the same code by
//! every API.
//!
//! The matches are exhaustive: a new error variant does not compile until it
//! is given a code here.

use kafka_protocol::error::ResponseError;

use crate::group::GroupError;
use crate::log::producer_state::ProducerError;
use crate::log::{BatchError, LogError};
use crate::remote::reader::RemoteReadError;
use crate::replica::fetch_session::SessionError;
use crate::txn::TxnError;

/// A Kafka error code for a failed read from the tiered storage store. An
/// offset the store does not hold is OFFSET_OUT_OF_RANGE (Kafka's answer for
/// an offset no remote segment holds); a store that fails, or an object that
/// fails its size or CRC check, is UNKNOWN_SERVER_ERROR, what Kafka answers
/// for a `RemoteStorageException` and what the Java client and librdkafka
/// log and retry after their backoff.
pub fn remote_read_error_code(e: &RemoteReadError) -> ResponseError {
    match e {
        RemoteReadError::NotInStore { .. } => ResponseError::OffsetOutOfRange,
        RemoteReadError::Disabled { .. }
        | RemoteReadError::OtherTopic { .. }
        | RemoteReadError::Remote(_) => ResponseError::UnknownServerError,
    }
}

/// A Kafka error code for a storage-layer error.
pub fn error_code(e: &LogError) -> ResponseError {
    match e {
        LogError::Io { .. }
        | LogError::Corrupt { .. }
        | LogError::CorruptIndex { .. }
        | LogError::Offline { .. }
        | LogError::SwapConflict { .. } => ResponseError::KafkaStorageError,
        LogError::Batch(b) => batch_error_code(b),
        LogError::Producer(ProducerError::InvalidProducerEpoch { .. }) => {
            ResponseError::InvalidProducerEpoch
        }
        LogError::Producer(ProducerError::OutOfOrderSequence { .. }) => {
            ResponseError::OutOfOrderSequenceNumber
        }
        LogError::Producer(ProducerError::InvalidSequence { .. }) => ResponseError::InvalidRecord,
        LogError::Producer(
            ProducerError::InvalidTxnState { .. } | ProducerError::UnverifiedTransaction { .. },
        ) => ResponseError::InvalidTxnState,
        LogError::Producer(ProducerError::TransactionCoordinatorFenced { .. }) => {
            ResponseError::TransactionCoordinatorFenced
        }
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        LogError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        LogError::TopicExists(_) => ResponseError::TopicAlreadyExists,
        LogError::UnknownTopicOrPartition(_) | LogError::Deleted(_) => {
            ResponseError::UnknownTopicOrPartition
        }
        LogError::InvalidTopic { .. } => ResponseError::InvalidTopicException,
        LogError::StaleLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
    }
}

/// Kafka's check of a request's `current_leader_epoch` against the
/// partition's `leader_epoch`: -1 (not given) passes, an older one is
/// FENCED_LEADER_EPOCH (the client is behind), a newer one
/// UNKNOWN_LEADER_EPOCH (this broker is; retriable).
pub fn leader_epoch_error(current_leader_epoch: i32, leader_epoch: i32) -> Option<ResponseError> {
    use std::cmp::Ordering;
    if current_leader_epoch == -1 {
        return None;
    }
    match current_leader_epoch.cmp(&leader_epoch) {
        Ordering::Less => Some(ResponseError::FencedLeaderEpoch),
        Ordering::Greater => Some(ResponseError::UnknownLeaderEpoch),
        Ordering::Equal => None,
    }
}

fn batch_error_code(e: &BatchError) -> ResponseError {
    match e {
        // Not retriable: the Java producer splits such a batch and resends.
        BatchError::TooLarge { .. } | BatchError::InflatesPastLimit { .. } => {
            ResponseError::MessageTooLarge
        }
        BatchError::UnsupportedMagic(_) => ResponseError::UnsupportedForMessageFormat,
        BatchError::InvalidRecord { .. } | BatchError::InvalidBatch(_) => {
            ResponseError::InvalidRecord
        }
        BatchError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
        BatchError::Truncated { .. }
        | BatchError::InvalidLength(_)
        | BatchError::CrcMismatch { .. }
        | BatchError::UnknownCompression(_)
        | BatchError::Decompression(_)
        | BatchError::CorruptRecord(_) => ResponseError::CorruptMessage,
    }
}

/// Kafka's code for a refused fetch session.
pub fn fetch_session_error_code(e: SessionError) -> ResponseError {
    match e {
        SessionError::IdNotFound => ResponseError::FetchSessionIdNotFound,
        SessionError::InvalidEpoch => ResponseError::InvalidFetchSessionEpoch,
        SessionError::TopicIdMismatch => ResponseError::FetchSessionTopicIdError,
    }
}

/// Kafka's code for a group coordinator error.
pub fn group_error_code(e: GroupError) -> ResponseError {
    match e {
        GroupError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupIdNotFound | GroupError::NotFound(_) => ResponseError::GroupIdNotFound,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        GroupError::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
        GroupError::InvalidRequest(_) => ResponseError::InvalidRequest,
        GroupError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        GroupError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        GroupError::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
        GroupError::UnsupportedAssignor(_) => ResponseError::UnsupportedAssignor,
        GroupError::InvalidRegularExpression(_) => ResponseError::InvalidRegularExpression,
        GroupError::UnsupportedVersion => ResponseError::UnsupportedVersion,
        GroupError::Storage(_) => ResponseError::KafkaStorageError,
        GroupError::IllegalState(_) | GroupError::Schema(_) => ResponseError::UnknownServerError,
    }
}

/// 0 for success, else the group error's code.
pub fn group_code(e: Option<GroupError>) -> i16 {
    e.map_or(0, |e| group_error_code(e).code())
}

/// The transaction APIs whose answers docs/design/transactions.md ("Error downgrades by request version") downgrades.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnApi {
    FindCoordinator,
    InitProducerId,
    AddPartitionsToTxn,
    AddOffsetsToTxn,
    EndTxn,
    ListTransactions,
    DescribeTransactions,
}

/// Kafka's code for a transaction coordinator error answered by `api` at
/// `version`: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for clients that
/// predate it (InitProducerId < 4, the others < 2).
pub fn txn_error_code(e: &TxnError, api: TxnApi, version: i16) -> ResponseError {
    let fenced_since = if api == TxnApi::InitProducerId { 4 } else { 2 };
    match e {
        TxnError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        TxnError::NotCoordinator => ResponseError::NotCoordinator,
        // Kafka's appendTransactionToLog: a failed write sends the client to
        // rediscover its coordinator (this node) and retry.
        TxnError::Storage(e) if matches!(**e, LogError::Batch(BatchError::TooLarge { .. })) => {
            ResponseError::UnknownServerError
        }
        TxnError::Storage(_) => ResponseError::NotCoordinator,
        TxnError::InvalidRequest(_) => ResponseError::InvalidRequest,
        TxnError::InvalidTransactionTimeout { .. } => ResponseError::InvalidTransactionTimeout,
        TxnError::InvalidProducerIdMapping { .. } => ResponseError::InvalidProducerIdMapping,
        TxnError::ProducerFenced { .. } if version < fenced_since => {
            ResponseError::InvalidProducerEpoch
        }
        TxnError::ProducerFenced { .. } => ResponseError::ProducerFenced,
        TxnError::ConcurrentTransactions { .. } => ResponseError::ConcurrentTransactions,
        TxnError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        TxnError::PartitionNotInTransaction { .. } => ResponseError::InvalidTxnState,
        TxnError::IllegalState(_)
        | TxnError::IllegalTransit { .. }
        | TxnError::InvalidRecord(_)
        | TxnError::Schema(_) => ResponseError::UnknownServerError,
    }
}

/// Kafka's code for a failed verification of a transactional Produce at
/// `version` (4.1.2's `ReplicaManager`): a partition not added is
/// TRANSACTION_ABORTABLE from v11, INVALID_TXN_STATE before; a fenced
/// producer INVALID_PRODUCER_EPOCH; a coordinator that cannot answer now,
/// NOT_ENOUGH_REPLICAS, which every client retries.
pub fn txn_produce_error_code(e: &TxnError, version: i16) -> ResponseError {
    match e {
        TxnError::PartitionNotInTransaction { .. } if version >= 11 => {
            ResponseError::TransactionAbortable
        }
        TxnError::PartitionNotInTransaction { .. } => ResponseError::InvalidTxnState,
        TxnError::InvalidProducerIdMapping { .. } => ResponseError::InvalidProducerIdMapping,
        TxnError::ProducerFenced { .. } => ResponseError::InvalidProducerEpoch,
        // Transactions v2 (Produce v12+): the transaction before is still
        // completing; the producer retries, as on Kafka.
        TxnError::ConcurrentTransactions { .. } if version >= 12 => {
            ResponseError::ConcurrentTransactions
        }
        TxnError::CoordinatorLoadInProgress
        | TxnError::CoordinatorNotAvailable
        | TxnError::NotCoordinator
        | TxnError::ConcurrentTransactions { .. }
        | TxnError::Storage(_) => ResponseError::NotEnoughReplicas,
        TxnError::InvalidRequest(_) => ResponseError::InvalidRequest,
        TxnError::InvalidTransactionTimeout { .. }
        | TxnError::InvalidTxnState { .. }
        | TxnError::IllegalState(_)
        | TxnError::IllegalTransit { .. }
        | TxnError::InvalidRecord(_)
        | TxnError::Schema(_) => ResponseError::UnknownServerError,
    }
}

/// Kafka's code for a failed verification of a TxnOffsetCommit at `version`
/// (4.1.2's verification guard, then `GroupCoordinatorService`'s mapping): an
/// offsets partition not in the transaction is TRANSACTION_ABORTABLE from v4,
/// INVALID_TXN_STATE before; a fenced producer INVALID_PRODUCER_EPOCH; a
/// coordinator that cannot answer now COORDINATOR_NOT_AVAILABLE, which the
/// producer retries after looking its group coordinator up again.
pub fn txn_offset_commit_error_code(e: &TxnError, version: i16) -> ResponseError {
    match e {
        TxnError::PartitionNotInTransaction { .. } if version >= 4 => {
            ResponseError::TransactionAbortable
        }
        TxnError::PartitionNotInTransaction { .. } => ResponseError::InvalidTxnState,
        e => match txn_produce_error_code(e, version) {
            ResponseError::NotEnoughReplicas => ResponseError::CoordinatorNotAvailable,
            code => code,
        },
    }
}

/// A Kafka error code for a failed write of a security store (its file, or
/// etcd in a cluster).
pub fn store_error_code(e: &crate::security::credentials::StoreError) -> ResponseError {
    match e {
        crate::security::credentials::StoreError::Io { .. }
        | crate::security::credentials::StoreError::Damaged { .. } => {
            ResponseError::KafkaStorageError
        }
        // Retriable: etcd may answer again.
        crate::security::credentials::StoreError::Unavailable(_) => ResponseError::RequestTimedOut,
    }
}

/// A Kafka error code for a refused broker dynamic config change: an
/// unknown key is INVALID_CONFIG, the rest INVALID_REQUEST (Kafka's
/// `ConfigAdminManager` wraps every validation failure so, KAFKA-13609).
pub fn dynamic_config_error_code(e: &crate::config::dynamic::DynamicConfigError) -> ResponseError {
    use crate::config::dynamic::DynamicConfigError as E;
    match e {
        E::Unknown(_) => ResponseError::InvalidConfig,
        E::NotDynamic(_) | E::PerBrokerOnly(_) | E::Invalid(_) => ResponseError::InvalidRequest,
        // etcd did not take it in time, or another broker raced it.
        E::Store(crate::security::store::StoreError::Unavailable(_)) => {
            ResponseError::RequestTimedOut
        }
        E::Store(_) => ResponseError::KafkaStorageError,
    }
}

/// Kafka's code for a topic change the cluster refused.
pub fn cluster_error_code(e: &crate::controller::TopicChangeError) -> ResponseError {
    use crate::controller::TopicChangeError as E;
    match e {
        E::Exists(_) => ResponseError::TopicAlreadyExists,
        E::Unknown(_) => ResponseError::UnknownTopicOrPartition,
        E::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
        E::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
        E::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        E::Unavailable(_) => ResponseError::RequestTimedOut,
        E::TimedOut(_) => ResponseError::RequestTimedOut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fenced() -> TxnError {
        TxnError::ProducerFenced { transactional_id: "x".into() }
    }

    #[test]
    fn producer_fenced_is_downgraded_for_old_versions() {
        let cases = [
            (TxnApi::InitProducerId, 3, ResponseError::InvalidProducerEpoch),
            (TxnApi::InitProducerId, 4, ResponseError::ProducerFenced),
            (TxnApi::AddPartitionsToTxn, 1, ResponseError::InvalidProducerEpoch),
            (TxnApi::AddPartitionsToTxn, 2, ResponseError::ProducerFenced),
            (TxnApi::AddOffsetsToTxn, 1, ResponseError::InvalidProducerEpoch),
            (TxnApi::EndTxn, 2, ResponseError::ProducerFenced),
        ];
        for (api, version, code) in cases {
            assert_eq!(txn_error_code(&fenced(), api, version), code, "{api:?} v{version}");
        }
        assert_eq!(txn_produce_error_code(&fenced(), 11), ResponseError::InvalidProducerEpoch);
    }

    #[test]
    fn produce_verification_codes_follow_kafka() {
        let not_added = TxnError::PartitionNotInTransaction {
            transactional_id: "x".into(),
            partition: crate::log::TopicPartition::new("t", 0),
        };
        assert_eq!(txn_produce_error_code(&not_added, 10), ResponseError::InvalidTxnState);
        assert_eq!(txn_produce_error_code(&not_added, 11), ResponseError::TransactionAbortable);
        for retriable in [
            TxnError::CoordinatorLoadInProgress,
            TxnError::ConcurrentTransactions { transactional_id: "x".into() },
        ] {
            assert_eq!(txn_produce_error_code(&retriable, 9), ResponseError::NotEnoughReplicas);
        }
    }

    #[test]
    fn txn_offset_commit_verification_codes_follow_kafka() {
        let not_added = TxnError::PartitionNotInTransaction {
            transactional_id: "x".into(),
            partition: crate::log::TopicPartition::new("__consumer_offsets", 0),
        };
        assert_eq!(txn_offset_commit_error_code(&not_added, 3), ResponseError::InvalidTxnState);
        assert_eq!(
            txn_offset_commit_error_code(&not_added, 4),
            ResponseError::TransactionAbortable
        );
        assert_eq!(txn_offset_commit_error_code(&fenced(), 4), ResponseError::InvalidProducerEpoch);
        let concurrent = TxnError::ConcurrentTransactions { transactional_id: "x".into() };
        assert_eq!(
            txn_offset_commit_error_code(&concurrent, 4),
            ResponseError::CoordinatorNotAvailable
        );
    }

    #[test]
    fn a_failed_state_append_sends_the_client_to_rediscover() {
        let io = LogError::Io { path: "p".into(), source: std::io::Error::other("disk") };
        let e = TxnError::from(io);
        assert_eq!(txn_error_code(&e, TxnApi::EndTxn, 4), ResponseError::NotCoordinator);
    }
}

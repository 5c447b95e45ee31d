//! The one place Kafka error codes are chosen for this broker's typed errors:
//! storage errors (`LogError`, `BatchError`) and group coordinator errors
//! (`GroupError`). Handlers call these and never pick a code for such an
//! error themselves, so a given failure is answered with the same code by
//! every API.
//!
//! The matches are exhaustive: a new error variant does not compile until it
//! is given a code here.

use kafka_protocol::error::ResponseError;

use crate::group::GroupError;
use crate::log::producer_state::ProducerError;
use crate::log::{BatchError, LogError};

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
        LogError::Producer(ProducerError::InvalidTxnState { .. }) => ResponseError::InvalidTxnState,
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
    }
}

fn batch_error_code(e: &BatchError) -> ResponseError {
    match e {
        BatchError::TooLarge { .. } => ResponseError::MessageTooLarge,
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

/// Kafka's code for a group coordinator error.
pub fn group_error_code(e: GroupError) -> ResponseError {
    match e {
        GroupError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
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
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        GroupError::Storage(_) => ResponseError::KafkaStorageError,
        GroupError::IllegalState(_) => ResponseError::UnknownServerError,
    }
}

/// 0 for success, else the group error's code.
pub fn group_code(e: Option<GroupError>) -> i16 {
    e.map_or(0, |e| group_error_code(e).code())
}

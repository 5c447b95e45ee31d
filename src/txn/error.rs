//! `TxnError`: what the transaction coordinator and its state can fail with,
//! one variant per Kafka outcome (docs/design/transactions.md, "Behaviour and errors, per API"). `api/` maps each
//! variant to Kafka's error code, and downgrades by request version there
//! (PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for old clients); nothing
//! here knows the codes.

use std::sync::Arc;

use super::schema::SchemaError;
use super::transaction_metadata::{LogValueError, TransactionState, TransactionStateError};
use crate::log::{LogError, TopicPartition};

/// Errors of the transaction coordinator.
///
/// `Clone`, because one failed append can answer several waiters; the storage
/// cause is therefore shared behind an `Arc`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TxnError {
    /// `__transaction_state` is still being loaded (COORDINATOR_LOAD_IN_PROGRESS).
    #[error("the transaction coordinator is loading")]
    CoordinatorLoadInProgress,
    /// A partition of `__transaction_state` is missing.
    #[error("the transaction coordinator is not available")]
    CoordinatorNotAvailable,
    /// Another broker coordinates transactional ids (NOT_COORDINATOR).
    #[error("this broker does not coordinate the transactional id")]
    NotCoordinator,
    /// Writing (or creating) `__transaction_state` failed, or a producer id
    /// could not be reserved.
    #[error("storage error on __transaction_state: {0}")]
    Storage(#[source] Arc<LogError>),
    /// A malformed request (INVALID_REQUEST), e.g. an empty transactional id.
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
    /// The requested transaction timeout is not in `1..=transaction.max.timeout.ms`
    /// (INVALID_TRANSACTION_TIMEOUT).
    #[error("transaction timeout {timeout_ms} ms is not in 1..={max_ms}")]
    InvalidTransactionTimeout { timeout_ms: i32, max_ms: i32 },
    /// The id is unknown, or its producer id is not the request's
    /// (INVALID_PRODUCER_ID_MAPPING).
    #[error("transactional id {transactional_id}: no such producer id mapping")]
    InvalidProducerIdMapping { transactional_id: String },
    /// The request's producer epoch is not the current one, or a KIP-360
    /// recovery names a producer that was replaced (PRODUCER_FENCED).
    #[error("transactional id {transactional_id}: producer fenced")]
    ProducerFenced { transactional_id: String },
    /// The transaction is completing, or another request on the id is in
    /// flight; the client retries (CONCURRENT_TRANSACTIONS).
    #[error("transactional id {transactional_id}: a concurrent transaction is in progress")]
    ConcurrentTransactions { transactional_id: String },
    /// The request does not fit the transaction's state, e.g. EndTxn with no
    /// transaction (INVALID_TXN_STATE).
    #[error("transactional id {transactional_id}: {request} is invalid in state {state}")]
    InvalidTxnState { transactional_id: String, state: TransactionState, request: &'static str },
    /// A transactional Produce to a partition that is not in the id's
    /// Ongoing transaction (TRANSACTION_ABORTABLE, INVALID_TXN_STATE for old
    /// clients).
    #[error("transactional id {transactional_id}: partition {partition} was not added to the transaction")]
    PartitionNotInTransaction { transactional_id: String, partition: TopicPartition },
    /// The coordinator attempted a state change its state machine forbids: a
    /// bug, refused rather than applied.
    #[error("{0}")]
    IllegalState(#[from] TransactionStateError),
    /// A transition was prepared while another was pending, or completed
    /// against metadata it was not prepared from (Kafka's
    /// IllegalStateException): a bug, refused rather than applied.
    #[error("transactional id {transactional_id}: illegal transition: {detail}")]
    IllegalTransit { transactional_id: String, detail: String },
    /// A metadata that cannot be written as a record (a bug, or a name too
    /// long for Kafka's schema).
    #[error("{0}")]
    InvalidRecord(#[from] LogValueError),
    #[error("{0}")]
    Schema(#[from] SchemaError),
}

impl From<LogError> for TxnError {
    fn from(e: LogError) -> Self {
        TxnError::Storage(Arc::new(e))
    }
}

/// Kafka's mapping of a coordinator's failed `acks=all` write.
impl From<crate::replica::coordinator_writes::CoordinatorWriteError> for TxnError {
    fn from(e: crate::replica::coordinator_writes::CoordinatorWriteError) -> Self {
        use crate::replica::coordinator_writes::CoordinatorWriteError as W;
        match e {
            W::NotLeader => TxnError::NotCoordinator,
            W::NotEnoughReplicas | W::TimedOut => TxnError::CoordinatorNotAvailable,
        }
    }
}

//! `TxnError`: what the transaction state manager can fail with. `api/` will
//! map each variant to Kafka's error code; nothing here knows the codes.

use std::sync::Arc;

use super::schema::SchemaError;
use super::transaction_metadata::{LogValueError, TransactionStateError};
use crate::log::LogError;

/// Errors of the transaction coordinator's state.
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
    /// Writing (or creating) `__transaction_state` failed.
    #[error("storage error on __transaction_state: {0}")]
    Storage(#[source] Arc<LogError>),
    /// The coordinator attempted a state change its state machine forbids: a
    /// bug, refused rather than applied.
    #[error("{0}")]
    IllegalState(#[from] TransactionStateError),
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

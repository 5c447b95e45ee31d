//! The transaction coordinator (Kafka's `TransactionCoordinator`) and its
//! state (`TransactionStateManager`, `TransactionMetadata`), kept in the
//! compacted internal topic `__transaction_state` in Kafka's record schemas,
//! so Apache Kafka's `kafka-dump-log --transaction-log-decoder` reads it. The
//! design, and what is still to come (transactional offsets, the admin
//! APIs), is `docs/design/transactions.md`.
//!
//! * Every transactional id has one [`TransactionMetadata`], whose
//!   [`TransactionState`] changes only along Kafka's transition table
//!   (`transaction_metadata` has it); an illegal transition is refused with an
//!   error and changes nothing.
//! * A state is durable once its record is appended to the id's partition of
//!   `__transaction_state`; the cache follows the log, never the reverse:
//!   a change is prepared (pending), appended, then completed
//!   (`txn_transit_metadata`), and a request meeting a pending change is told
//!   to retry (CONCURRENT_TRANSACTIONS).
//! * No marker is written before its transaction's Prepare record is in the
//!   log, and no Complete record before every marker (`end_txn` has the
//!   crash protocol).
//! * At start every partition is read from its log start (later records win,
//!   a tombstone deletes); until then the state answers
//!   COORDINATOR_LOAD_IN_PROGRESS. Nothing unreadable is skipped in silence.
//!   Transactions found decided but not complete (PrepareCommit,
//!   PrepareAbort) are finished by the coordinator's load.
//!
//! # Files (Kafka's names)
//!
//! * `schema`: `TransactionLogKey` and `TransactionLogValue`, v0 and v1.
//! * `transaction_metadata`: [`TransactionState`], its transitions, and
//!   [`TransactionMetadata`] with its log value.
//! * `txn_transit_metadata`: [`TxnTransitMetadata`], the pending transitions.
//! * `transaction_version`: [`TransactionVersion`], which protocol a request
//!   speaks (KIP-890's transactions v2: an epoch bump per EndTxn, partitions
//!   added by the broker).
//! * `config`: the coordinator's broker keys and [`TransactionConfig`].
//! * `state_manager`: [`TransactionStateManager`]:
//!   the topic, the partition of an id, appends, the load.
//! * `coordinator`: [`TransactionCoordinator`]: load, InitProducerId,
//!   AddPartitionsToTxn, AddOffsetsToTxn.
//! * `end_txn`: EndTxn, the coordinator's own aborts, markers and Complete.
//! * `timers`: timeout aborts and transactional id expiry.
//! * `marker_writer`: the [`TransactionMarkerWriter`] the coordinator writes
//!   markers through; `log_marker_writer`: the broker's, into the logs.
//! * `verify`: whether a transactional Produce may open a transaction on a
//!   partition (the partition was added to the id's transaction).
//! * `crash_point`: test-only, the fail points (`crate::failpoint`) that make
//!   the real binary SIGKILL itself at a step of `end_txn`'s crash protocol.
//! * `scheduler`: the broker's `txn-coordinator` thread (load, then timers).
//! * `error`: [`TxnError`].

pub mod config;
pub mod schema;

mod coordinator;
pub mod crash_point;
mod end_txn;
mod error;
mod log_marker_writer;
mod marker_writer;
mod placement;
mod scheduler;
mod state_manager;
mod timers;
mod transaction_metadata;
mod transaction_version;
mod txn_transit_metadata;
mod verify;

#[cfg(test)]
mod test_support;

pub use crate::log::coordinator_loader::LoadStats;
pub use config::TransactionConfig;
pub use coordinator::{ProducerIdAndEpoch, ProducerIdGenerator, TransactionCoordinator};
pub use error::TxnError;
pub use log_marker_writer::{AppendedHook, LogMarkerWriter, TxnCompletionListener};
pub use marker_writer::{
    MarkerWriteError, TransactionMarkerWriter, TransactionResult, TxnMarker, COORDINATOR_EPOCH,
};
pub use scheduler::TxnScheduler;
pub use state_manager::{
    SharedTransactionMetadata, TransactionStateManager, TxnLoadOutcome, TRANSACTION_STATE_TOPIC,
};
pub use transaction_metadata::{
    LogValueError, TransactionMetadata, TransactionState, TransactionStateError,
};
pub use transaction_version::TransactionVersion;
pub use txn_transit_metadata::{is_epoch_exhausted, TxnTransitMetadata, EXHAUSTED_EPOCH};
pub use verify::RemoteVerifier;

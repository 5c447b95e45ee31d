//! Writing transaction markers (the part of Kafka's
//! `TransactionMarkerChannelManager` a single node needs): once a
//! transaction's PrepareCommit or PrepareAbort record is durable, every
//! partition of the transaction receives a COMMIT or ABORT control batch
//! carrying the transaction's producer id and epoch, and only then is the
//! Complete record written.
//!
//! The coordinator talks to a [`TransactionMarkerWriter`]; the writer that
//! appends control batches to the data partitions and `__consumer_offsets`
//! through the log (origin Coordinator) implements it. Its contract:
//! * `write_marker` returns only once the marker is appended to the
//!   partition's log (as durable as any other append: the broker's flush
//!   policy), or with an error and no marker appended.
//! * Writing the same marker twice is harmless: a partition with no open
//!   transaction of the producer records no second completion. The
//!   coordinator relies on it after a crash (it rewrites every marker).
//! * A partition whose topic no longer exists answers
//!   [`MarkerWriteError::UnknownTopicOrPartition`]; the coordinator counts the
//!   marker as done (Kafka drops it too).
//! * A marker the partition refuses (an I/O error, a producer epoch below the
//!   partition's, a higher coordinator epoch recorded by an admin abort) is
//!   [`MarkerWriteError::Failed`]: the coordinator keeps the transaction in
//!   Prepare* and retries. Kafka's coordinator stops sending on the last two
//!   until it reloads, which on one node is the same outcome (the transaction
//!   stays pending), with a warning per retry instead of one.
//! * It is called with no transaction metadata mutex held and may take log
//!   locks and the group coordinator's locks.

use crate::log::TopicPartition;

/// The coordinator epoch every marker carries: one node leads every
/// `__transaction_state` partition, forever (docs/design/transactions.md, "Decisions in one screen").
pub const COORDINATOR_EPOCH: i32 = 0;

/// The outcome a marker writes (Kafka's `TransactionResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionResult {
    Commit,
    Abort,
}

/// One marker for one partition (Kafka's `TxnMarkerEntry`, one partition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub result: TransactionResult,
}

/// Why a marker was not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkerWriteError {
    /// The partition does not exist (its topic was deleted): nothing to mark.
    #[error("unknown topic or partition {0}")]
    UnknownTopicOrPartition(TopicPartition),
    /// The partition's log refused the append (I/O error, fenced epoch, ...):
    /// the coordinator retries later.
    #[error("writing a marker to {partition}: {reason}")]
    Failed { partition: TopicPartition, reason: String },
}

/// Appends transaction markers to data and `__consumer_offsets` partitions.
pub trait TransactionMarkerWriter: Send + Sync + std::fmt::Debug {
    /// Append `marker` to `partition` (see the module doc for the contract).
    ///
    /// # Errors
    /// The marker was not appended.
    fn write_marker(
        &self,
        partition: &TopicPartition,
        marker: &TxnMarker,
    ) -> Result<(), MarkerWriteError>;

    /// Whether `producer_id` has an open transaction on `partition`: `None`
    /// when the writer cannot tell (the partition is not here). Recovery
    /// skips a partition answering `Some(false)` (`end_txn`, step 3).
    fn has_open_transaction(&self, partition: &TopicPartition, producer_id: i64) -> Option<bool> {
        let _ = (partition, producer_id);
        None
    }
}

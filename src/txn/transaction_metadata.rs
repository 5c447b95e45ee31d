//! One transactional id's state (Kafka's `TransactionMetadata`) and the
//! [`TransactionState`] machine, with Kafka's state ids as they are stored in
//! `__transaction_state` (`TransactionStatus`).
//!
//! # States
//!
//! | id | state             | written to the log                | id may expire |
//! |----|-------------------|-----------------------------------|---------------|
//! | 0  | Empty             | yes                               | yes           |
//! | 1  | Ongoing           | yes                               | no            |
//! | 2  | PrepareCommit     | yes                               | no            |
//! | 3  | PrepareAbort      | yes                               | no            |
//! | 4  | CompleteCommit    | yes                               | yes           |
//! | 5  | CompleteAbort     | yes                               | yes           |
//! | 6  | Dead              | no: a tombstone is written        | -             |
//! | 7  | PrepareEpochFence | no: in memory, then PrepareAbort  | -             |
//!
//! A loaded value with a state id outside 0-5 is corrupt.
//!
//! # Transitions (Kafka's valid previous states)
//!
//! | to                | allowed from                                   |
//! |-------------------|------------------------------------------------|
//! | Empty             | Empty, CompleteCommit, CompleteAbort           |
//! | Ongoing           | Empty, Ongoing, CompleteCommit, CompleteAbort  |
//! | PrepareCommit     | Ongoing                                        |
//! | PrepareAbort      | Ongoing, PrepareEpochFence, and for an EndTxn  |
//! |                   | v5 abort: Empty, CompleteCommit, CompleteAbort |
//! | CompleteCommit    | PrepareCommit                                  |
//! | CompleteAbort     | PrepareAbort                                   |
//! | Dead              | Empty, CompleteCommit, CompleteAbort           |
//! | PrepareEpochFence | Ongoing                                        |
//!
//! Only transactions v2 (`transaction_version`) moves Empty, CompleteCommit
//! or CompleteAbort to PrepareAbort: an abort with no transaction open, which
//! bumps the epoch and writes no marker; `txn_transit_metadata` refuses it to
//! a level-0 transit. [`TransactionMetadata::transition`] refuses anything else with a
//! [`TransactionStateError`] and leaves the metadata as it was: an illegal
//! transition is a coordinator bug, and applying it would write a state Kafka
//! could never reach. The only other way a state is set is
//! [`TransactionMetadata::from_log_value`], when the state manager loads.
//!
//! # What is written (Kafka 4.1.2's `TransactionLog.valueToBytes`)
//!
//! | state                                 | partitions                   |
//! |---------------------------------------|------------------------------|
//! | Empty                                 | null (the set must be empty) |
//! | Ongoing, PrepareCommit, PrepareAbort  | the set, grouped by topic    |
//! | CompleteCommit, CompleteAbort         | empty (the set must be empty)|
//!
//! The next producer id is written while a transactions-v2 EndTxn that ran
//! out of epochs is in PrepareCommit/PrepareAbort (the Complete record then
//! takes it, at epoch 0), so a restart completes it the same way. The
//! previous producer id is written when it is not the current one (after a
//! new id was taken), so a retry naming the old id is still recognised after
//! a restart; Kafka 4.4 writes it always, 4.1.2 never. The next epoch is not
//! written (neither Kafka sets it); it is read when a Kafka wrote it.
//! `last_producer_epoch` is memory only: -1 after a load, as on Kafka.

use std::collections::BTreeSet;

use super::schema::{
    PartitionsSchema, TransactionLogValue, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, VALUE_VERSION,
};
use crate::log::TopicPartition;

/// A transaction's state (Kafka's `TransactionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransactionState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TransactionState {
    /// Every state, in id order.
    pub const ALL: [TransactionState; 8] = [
        TransactionState::Empty,
        TransactionState::Ongoing,
        TransactionState::PrepareCommit,
        TransactionState::PrepareAbort,
        TransactionState::CompleteCommit,
        TransactionState::CompleteAbort,
        TransactionState::Dead,
        TransactionState::PrepareEpochFence,
    ];

    /// The id stored as `TransactionStatus`.
    pub fn id(self) -> i8 {
        self as i8
    }

    pub fn from_id(id: i8) -> Option<Self> {
        usize::try_from(id).ok().and_then(|i| Self::ALL.get(i)).copied()
    }

    /// The name ListTransactions and DescribeTransactions report (Kafka's
    /// `org.apache.kafka.clients.admin.TransactionState` names).
    pub fn name(self) -> &'static str {
        match self {
            TransactionState::Empty => "Empty",
            TransactionState::Ongoing => "Ongoing",
            TransactionState::PrepareCommit => "PrepareCommit",
            TransactionState::PrepareAbort => "PrepareAbort",
            TransactionState::CompleteCommit => "CompleteCommit",
            TransactionState::CompleteAbort => "CompleteAbort",
            TransactionState::Dead => "Dead",
            TransactionState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether a transactional id in this state may expire.
    pub fn is_expiration_allowed(self) -> bool {
        use TransactionState::*;
        matches!(self, Empty | CompleteCommit | CompleteAbort)
    }

    /// Whether a record of this state is ever appended to the log.
    pub fn is_logged(self) -> bool {
        !matches!(self, TransactionState::Dead | TransactionState::PrepareEpochFence)
    }

    /// The states a transaction may move to `self` from (the table in the
    /// module doc).
    pub fn valid_previous_states(self) -> &'static [TransactionState] {
        use TransactionState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Empty, Ongoing, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteCommit, CompleteAbort],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether a transaction in `self` may move to `to`.
    pub fn can_transition_to(self, to: TransactionState) -> bool {
        to.valid_previous_states().contains(&self)
    }
}

impl std::fmt::Display for TransactionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A refused [`TransactionState`] transition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transactional id {transactional_id}: illegal state transition {from} -> {to}")]
pub struct TransactionStateError {
    pub transactional_id: String,
    pub from: TransactionState,
    pub to: TransactionState,
}

/// A metadata that has no log value, or a log value that is no metadata.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogValueError {
    #[error("unknown transaction state id {0}")]
    UnknownState(i8),
    /// Dead and PrepareEpochFence are never written: read, the record is
    /// corrupt; to be written, the caller has a bug.
    #[error("state {0} is never written to the log")]
    NotLogged(TransactionState),
    #[error("state {0} with null partitions")]
    NullPartitions(TransactionState),
    #[error("state {0} with partitions; it has none")]
    UnexpectedPartitions(TransactionState),
}

/// One transactional id's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// Kafka's `prevProducerId`: the producer id before the last one was
    /// taken (KIP-360 recovery); -1 if none.
    pub prev_producer_id: i64,
    /// The producer id a transactions-v2 EndTxn that exhausted the epoch
    /// hands over once its transaction completes; -1 if none.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump, so a retried InitProducerId gets the
    /// same answer (KIP-360); memory only, -1 after a load.
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    /// Changed only by `transition`, `complete_transition` (and
    /// `from_log_value`).
    pub(super) state: TransactionState,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the current transaction started (its first partition added); -1 if none.
    pub txn_start_timestamp: i64,
    pub txn_last_update_timestamp: i64,
    /// The transaction protocol version written with the state (0 for a
    /// client on the first protocol; see `schema`).
    pub client_transaction_version: i16,
    /// The state a prepared transition is taking the metadata to, until its
    /// record is appended and the transition completed or given up (memory
    /// only, Kafka's `pendingState`); see `txn_transit_metadata`.
    pub(super) pending_state: Option<TransactionState>,
    /// A fence's PrepareAbort could not be appended: the epoch was bumped in
    /// memory already, and the next fence must not bump it again (memory only).
    pub(super) has_failed_epoch_fence: bool,
}

impl TransactionMetadata {
    /// A transactional id seen for the first time: Empty, no transaction.
    pub fn new(
        transactional_id: impl Into<String>,
        producer_id: i64,
        producer_epoch: i16,
        txn_timeout_ms: i32,
        now: i64,
    ) -> Self {
        Self {
            transactional_id: transactional_id.into(),
            producer_id,
            prev_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms,
            state: TransactionState::Empty,
            partitions: BTreeSet::new(),
            txn_start_timestamp: -1,
            txn_last_update_timestamp: now,
            client_transaction_version: 0,
            pending_state: None,
            has_failed_epoch_fence: false,
        }
    }

    pub fn state(&self) -> TransactionState {
        self.state
    }

    /// Move to `to` if the table allows it; otherwise leave everything as it
    /// is.
    ///
    /// # Errors
    /// The transition is not in the table.
    pub fn transition(&mut self, to: TransactionState) -> Result<(), TransactionStateError> {
        if !self.state.can_transition_to(to) {
            return Err(TransactionStateError {
                transactional_id: self.transactional_id.clone(),
                from: self.state,
                to,
            });
        }
        self.state = to;
        Ok(())
    }

    /// The record value of this state, as Kafka 4.1.2 writes it (see the
    /// module doc): partitions grouped by topic in name order.
    ///
    /// # Errors
    /// A state that is never written, or partitions where the state has none.
    pub fn to_log_value(&self) -> Result<TransactionLogValue, LogValueError> {
        use TransactionState::*;
        let partitions = match self.state {
            Dead | PrepareEpochFence => return Err(LogValueError::NotLogged(self.state)),
            Empty | CompleteCommit | CompleteAbort if !self.partitions.is_empty() => {
                return Err(LogValueError::UnexpectedPartitions(self.state));
            }
            Empty => None,
            _ => Some(group_by_topic(&self.partitions)),
        };
        Ok(TransactionLogValue {
            producer_id: self.producer_id,
            // Only a previous id other than the current one says anything
            // (Kafka 4.4 writes it always; 4.1.2 never).
            previous_producer_id: if self.prev_producer_id == self.producer_id {
                NO_PRODUCER_ID
            } else {
                self.prev_producer_id
            },
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            next_producer_epoch: NO_PRODUCER_EPOCH,
            transaction_timeout_ms: self.txn_timeout_ms,
            transaction_status: self.state.id(),
            transaction_partitions: partitions,
            transaction_last_update_timestamp_ms: self.txn_last_update_timestamp,
            transaction_start_timestamp_ms: self.txn_start_timestamp,
            client_transaction_version: self.client_transaction_version,
        })
    }

    /// The record value's bytes, at the version sediment writes.
    ///
    /// # Errors
    /// As [`TransactionMetadata::to_log_value`], and a topic name too long
    /// for Kafka's schema.
    pub fn encode_log_value(&self) -> Result<Vec<u8>, super::error::TxnError> {
        Ok(self.to_log_value()?.encode(VALUE_VERSION)?)
    }

    /// The metadata a loaded record describes (Kafka's
    /// `TransactionLog.readTxnRecordValue`): partitions of an Empty state are
    /// ignored; the previous producer id is kept, the last epoch is -1.
    ///
    /// # Errors
    /// An unknown state id, a state that is never written, or null
    /// partitions for a state that has them.
    pub fn from_log_value(
        transactional_id: impl Into<String>,
        value: &TransactionLogValue,
    ) -> Result<Self, LogValueError> {
        let state = TransactionState::from_id(value.transaction_status)
            .ok_or(LogValueError::UnknownState(value.transaction_status))?;
        if !state.is_logged() {
            return Err(LogValueError::NotLogged(state));
        }
        let partitions = match (&value.transaction_partitions, state) {
            (_, TransactionState::Empty) => BTreeSet::new(),
            (None, _) => return Err(LogValueError::NullPartitions(state)),
            (Some(entries), _) => entries
                .iter()
                .flat_map(|e| e.partition_ids.iter().map(|p| TopicPartition::new(&*e.topic, *p)))
                .collect(),
        };
        Ok(Self {
            transactional_id: transactional_id.into(),
            producer_id: value.producer_id,
            prev_producer_id: value.previous_producer_id,
            next_producer_id: value.next_producer_id,
            producer_epoch: value.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms: value.transaction_timeout_ms,
            state,
            partitions,
            txn_start_timestamp: value.transaction_start_timestamp_ms,
            txn_last_update_timestamp: value.transaction_last_update_timestamp_ms,
            client_transaction_version: value.client_transaction_version,
            pending_state: None,
            has_failed_epoch_fence: false,
        })
    }
}

/// `partitions` (sorted by topic, then partition) as the value's entries, one
/// per topic.
fn group_by_topic(partitions: &BTreeSet<TopicPartition>) -> Vec<PartitionsSchema> {
    let mut entries: Vec<PartitionsSchema> = Vec::new();
    for tp in partitions {
        match entries.last_mut() {
            Some(e) if e.topic == tp.topic => e.partition_ids.push(tp.partition),
            _ => entries.push(PartitionsSchema {
                topic: tp.topic.clone(),
                partition_ids: vec![tp.partition],
            }),
        }
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::TransactionState::*;
    use super::*;

    /// The table of the module doc, written out pair by pair.
    const LEGAL: [(TransactionState, TransactionState); 19] = [
        (Empty, Empty),
        (CompleteCommit, Empty),
        (CompleteAbort, Empty),
        (Empty, Ongoing),
        (Ongoing, Ongoing),
        (CompleteCommit, Ongoing),
        (CompleteAbort, Ongoing),
        (Ongoing, PrepareCommit),
        (Ongoing, PrepareAbort),
        (PrepareEpochFence, PrepareAbort),
        (Empty, PrepareAbort),
        (CompleteCommit, PrepareAbort),
        (CompleteAbort, PrepareAbort),
        (PrepareCommit, CompleteCommit),
        (PrepareAbort, CompleteAbort),
        (Empty, Dead),
        (CompleteCommit, Dead),
        (CompleteAbort, Dead),
        (Ongoing, PrepareEpochFence),
    ];

    fn in_state(state: TransactionState) -> TransactionMetadata {
        let mut m = TransactionMetadata::new("t", 7, 3, 60_000, 100);
        m.state = state;
        m.partitions.insert(TopicPartition::new("a", 1));
        m
    }

    #[test]
    fn ids_and_names_are_kafkas() {
        let names = [
            "Empty",
            "Ongoing",
            "PrepareCommit",
            "PrepareAbort",
            "CompleteCommit",
            "CompleteAbort",
            "Dead",
            "PrepareEpochFence",
        ];
        for (id, (state, name)) in TransactionState::ALL.iter().zip(names).enumerate() {
            assert_eq!(state.id(), id as i8);
            assert_eq!(TransactionState::from_id(id as i8), Some(*state));
            assert_eq!(state.name(), name);
            assert_eq!(TransactionState::from_name(name), Some(*state));
        }
        assert_eq!(TransactionState::from_id(8), None);
        assert_eq!(TransactionState::from_id(-1), None);
        assert_eq!(TransactionState::from_name("Stable"), None);
        let expiring: Vec<_> =
            TransactionState::ALL.into_iter().filter(|s| s.is_expiration_allowed()).collect();
        assert_eq!(expiring, [Empty, CompleteCommit, CompleteAbort]);
    }

    #[test]
    fn every_legal_transition_is_taken_and_every_other_refused_unchanged() {
        let legal: BTreeSet<_> = LEGAL.into_iter().collect();
        assert_eq!(legal.len(), LEGAL.len(), "no pair listed twice");
        let mut refused = 0;
        for from in TransactionState::ALL {
            for to in TransactionState::ALL {
                let mut m = in_state(from);
                let before = m.clone();
                let result = m.transition(to);
                if legal.contains(&(from, to)) {
                    assert_eq!(result, Ok(()), "{from} -> {to}");
                    assert_eq!(m.state(), to);
                    assert_eq!(TransactionMetadata { state: from, ..m }, before, "only the state");
                } else {
                    let e = TransactionStateError { transactional_id: "t".into(), from, to };
                    assert_eq!(result, Err(e), "{from} -> {to}");
                    assert_eq!(m, before, "{from} -> {to} changed nothing");
                    refused += 1;
                }
            }
        }
        assert_eq!(refused, 64 - LEGAL.len());
    }

    #[test]
    fn log_values_follow_the_per_state_rules() {
        let mut ongoing = in_state(Ongoing);
        ongoing.partitions.extend([
            TopicPartition::new("b", 0),
            TopicPartition::new("a", 0),
            TopicPartition::new("b", 2),
        ]);
        ongoing.txn_start_timestamp = 50;
        ongoing.client_transaction_version = 1;
        let v = ongoing.to_log_value().unwrap();
        let entries = vec![
            PartitionsSchema { topic: "a".into(), partition_ids: vec![0, 1] },
            PartitionsSchema { topic: "b".into(), partition_ids: vec![0, 2] },
        ];
        assert_eq!(v.transaction_partitions, Some(entries));
        assert_eq!((v.transaction_status, v.producer_id, v.producer_epoch), (1, 7, 3));
        assert_eq!(
            (v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms),
            (50, 100)
        );
        assert_eq!((v.transaction_timeout_ms, v.client_transaction_version), (60_000, 1));
        assert_eq!(TransactionMetadata::from_log_value("t", &v).unwrap(), ongoing);

        for state in [Empty, CompleteCommit, CompleteAbort] {
            let mut m = in_state(state);
            assert_eq!(m.to_log_value(), Err(LogValueError::UnexpectedPartitions(state)));
            m.partitions.clear();
            let v = m.to_log_value().unwrap();
            let want = if state == Empty { None } else { Some(vec![]) };
            assert_eq!(v.transaction_partitions, want);
            assert_eq!(TransactionMetadata::from_log_value("t", &v).unwrap(), m);
        }
        for state in [Dead, PrepareEpochFence] {
            assert_eq!(in_state(state).to_log_value(), Err(LogValueError::NotLogged(state)));
        }
        // The memory-only last epoch is -1 after a load.
        ongoing.last_producer_epoch = 2;
        let loaded = TransactionMetadata::from_log_value("t", &ongoing.to_log_value().unwrap());
        assert_eq!(loaded.unwrap().last_producer_epoch, -1);
    }

    #[test]
    fn loaded_values_are_checked() {
        let base = in_state(PrepareCommit).to_log_value().unwrap();
        for (status, e) in [
            (8, LogValueError::UnknownState(8)),
            (-3, LogValueError::UnknownState(-3)),
            (6, LogValueError::NotLogged(Dead)),
            (7, LogValueError::NotLogged(PrepareEpochFence)),
        ] {
            let v = TransactionLogValue { transaction_status: status, ..base.clone() };
            assert_eq!(TransactionMetadata::from_log_value("t", &v), Err(e));
        }
        let v = TransactionLogValue { transaction_partitions: None, ..base.clone() };
        let e = LogValueError::NullPartitions(PrepareCommit);
        assert_eq!(TransactionMetadata::from_log_value("t", &v), Err(e));
        // Partitions of an Empty value are ignored, as Kafka's reader does.
        let v = TransactionLogValue { transaction_status: 0, ..base.clone() };
        assert!(TransactionMetadata::from_log_value("t", &v).unwrap().partitions.is_empty());
        // A previous producer id a later Kafka wrote is kept.
        let v = TransactionLogValue { previous_producer_id: 5, ..base };
        assert_eq!(TransactionMetadata::from_log_value("t", &v).unwrap().prev_producer_id, 5);
    }
}

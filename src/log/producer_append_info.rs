//! One append's effect on the producer state (Kafka's `ProducerAppendInfo`,
//! `ProducerStateEntry` and `AppendOrigin`): each batch of a producer is
//! checked against that producer's entry as the batches before it in the same
//! append left it, and the entries after the append are collected, so nothing
//! changes unless the whole append is accepted.
//!
//! The checks depend on who appends (the origin):
//! * `Client` (Produce): a batch whose epoch is below the entry's is fenced
//!   (`InvalidProducerEpoch`); sequences must follow (a retry of one of the
//!   last five batches is reported as a duplicate); a non-transactional batch
//!   while the producer has a transaction open here is `InvalidTxnState`; a
//!   transactional batch with none open starts one at its base offset.
//! * `Coordinator` (transaction markers, and later the coordinators' own
//!   records): the epoch check and the transaction rules, no sequence check.
//!   A marker whose coordinator epoch is below the entry's is
//!   `TransactionCoordinatorFenced`. A marker completes the producer's open
//!   transaction, if any (a [`CompletedTxn`]; a marker with no open
//!   transaction, such as a retried one, completes nothing), takes the
//!   marker's epoch (dropping the cached batches if it changed) and its
//!   coordinator epoch.
//! * `Recovery` (the loader replaying the log) and `Replication` (a follower
//!   appending its leader's batches, Kafka's `REPLICATION`): no check at
//!   all, the same bookkeeping.
//!
//! An emptied control batch (its record removed by the cleaner) and a control
//! record of a type other than COMMIT or ABORT change nothing.

use std::collections::VecDeque;

use super::control_record::ControlBatch;
use super::error::ProducerError;
use super::producer_snapshot::SnapshotEntry;
use super::record_batch::{BatchHeader, NO_SEQUENCE, NO_TIMESTAMP};

/// Batches remembered per producer, as in Kafka (`max.in.flight` ≤ 5).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
/// Kafka's `RecordBatch.NO_PRODUCER_EPOCH`: a producer seen only now.
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// Who appends, which decides the checks (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer's request: every check.
    Client,
    /// The broker itself (transaction markers): epochs, no sequences.
    Coordinator,
    /// Replaying the log at load: no checks.
    Recovery,
    /// A follower appending its leader's batches (Kafka's `REPLICATION`):
    /// no checks, the leader made them; the same bookkeeping.
    Replication,
}

impl AppendOrigin {
    /// Whether the batches were checked before (by the leader, or when
    /// first appended): no refusal applies.
    pub fn is_unchecked(self) -> bool {
        matches!(self, Self::Recovery | Self::Replication)
    }
}

/// A batch as the producer state sees it: its header with the final base
/// offset, and for a control batch what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub header: BatchHeader,
    /// `Some` exactly for control batches.
    pub control: Option<ControlBatch>,
}

/// A cached batch of an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

/// A transaction whose marker was just appended (Kafka's `CompletedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    /// First offset of the transaction's data here.
    pub first_offset: i64,
    /// Offset of the marker.
    pub last_offset: i64,
    pub is_aborted: bool,
}

/// A transaction open in the partition (Kafka's `TxnMetadata` of its
/// `ProducerStateManager`), by its first offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OngoingTxn {
    pub producer_id: i64,
    /// Offset of the transaction's first batch here.
    pub first_offset: i64,
    /// When that batch was appended: the broker's clock for an append
    /// ([`ProducerAppendInfo::set_append_time`]); for a replay the batch's max
    /// timestamp, else (none, or restored from a snapshot) what the loader
    /// dates it to; `NO_TIMESTAMP` until then.
    pub start_timestamp_ms: i64,
}

/// What the partition knows of one producer (Kafka's `ProducerStateEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
    last_timestamp: i64,
    coordinator_epoch: i32,
    current_txn_first_offset: Option<i64>,
}

impl Default for ProducerStateEntry {
    fn default() -> Self {
        Self {
            epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
            last_timestamp: NO_TIMESTAMP,
            coordinator_epoch: -1,
            current_txn_first_offset: None,
        }
    }
}

impl ProducerStateEntry {
    pub fn epoch(&self) -> i16 {
        self.epoch
    }
    /// The coordinator epoch of the last marker (-1 before any).
    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }
    /// Max timestamp of the producer's last batch or marker.
    pub fn last_timestamp(&self) -> i64 {
        self.last_timestamp
    }
    /// First offset of the producer's open transaction here.
    pub fn current_txn_first_offset(&self) -> Option<i64> {
        self.current_txn_first_offset
    }
    /// The last sequence number of the producer's last cached batch, -1
    /// (Kafka's `NO_SEQUENCE`) when none is cached.
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }
    /// The cached batches, oldest first.
    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batches.iter()
    }

    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
    }

    /// What a snapshot keeps of this producer: its last cached batch only.
    pub fn to_snapshot(&self, producer_id: i64) -> SnapshotEntry {
        let last = self.batches.back();
        SnapshotEntry {
            producer_id,
            epoch: self.epoch,
            last_sequence: last.map_or(NO_SEQUENCE, |b| b.last_seq),
            last_offset: last.map_or(-1, |b| b.last_offset),
            // A batch holds at most i32::MAX offsets (its last offset delta is an i32).
            offset_delta: last.map_or(0, |b| (b.last_offset - b.first_offset) as i32),
            timestamp: self.last_timestamp,
            coordinator_epoch: self.coordinator_epoch,
            current_txn_first_offset: self.current_txn_first_offset.unwrap_or(-1),
        }
    }

    /// The entry a snapshot's `e` restores (Kafka's `readSnapshot`): the
    /// batch's timestamp is the producer's last timestamp.
    pub fn from_snapshot(e: &SnapshotEntry) -> Self {
        let mut batches = VecDeque::new();
        if e.last_offset >= 0 {
            batches.push_back(BatchMetadata {
                first_seq: decrement_sequence(e.last_sequence, e.offset_delta),
                last_seq: e.last_sequence,
                first_offset: e.last_offset - e.offset_delta as i64,
                last_offset: e.last_offset,
                max_timestamp: e.timestamp,
            });
        }
        Self {
            epoch: e.epoch,
            batches,
            last_timestamp: e.timestamp,
            coordinator_epoch: e.coordinator_epoch,
            current_txn_first_offset: (e.current_txn_first_offset >= 0)
                .then_some(e.current_txn_first_offset),
        }
    }

    /// Forget the cached batches below `offset`; the epoch and the open
    /// transaction stay.
    pub(super) fn truncate_below(&mut self, offset: i64) {
        self.batches.retain(|b| b.last_offset >= offset);
    }
}

/// `seq - by`, wrapping below 0 to i32::MAX as Kafka's sequences do.
fn decrement_sequence(seq: i32, by: i32) -> i32 {
    if seq < by {
        (i32::MAX as i64 - (by as i64 - seq as i64) + 1) as i32
    } else {
        seq - by
    }
}

fn last_sequence(header: &BatchHeader) -> i32 {
    // Sequences wrap at i32::MAX back to 0, as Kafka's DefaultRecordBatch does.
    let last = header.base_sequence as i64 + header.last_offset_delta as i64;
    if last > i32::MAX as i64 {
        (last - i32::MAX as i64 - 1) as i32
    } else {
        last as i32
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// The checks and the resulting state of one append, for every producer in it.
#[derive(Debug, Clone)]
pub struct ProducerAppendInfo {
    origin: AppendOrigin,
    /// The producers touched, with their entries after the append.
    pub(super) updated: Vec<(i64, ProducerStateEntry)>,
    /// Transactions the append opens.
    pub(super) started: Vec<OngoingTxn>,
    /// Transactions its markers complete, in offset order.
    pub(super) completed: Vec<CompletedTxn>,
}

impl ProducerAppendInfo {
    pub fn new(origin: AppendOrigin) -> Self {
        Self { origin, updated: Vec::new(), started: Vec::new(), completed: Vec::new() }
    }

    pub fn origin(&self) -> AppendOrigin {
        self.origin
    }

    /// The transactions this append's markers complete.
    pub fn completed(&self) -> &[CompletedTxn] {
        &self.completed
    }

    /// Date the transactions this append opens at `now_ms`, the broker's
    /// time of the append (their age is measured from it, not from a
    /// client's clock); a replay keeps the batches' max timestamps.
    pub fn set_append_time(&mut self, now_ms: i64) {
        for txn in &mut self.started {
            txn.start_timestamp_ms = now_ms;
        }
    }

    /// The entry of `pid` as this append has left it so far, if it touched it.
    pub(super) fn entry(&self, pid: i64) -> Option<&ProducerStateEntry> {
        self.updated.iter().find(|(p, _)| *p == pid).map(|(_, e)| e)
    }

    /// Check one batch of a producer whose entry before it is `current`, and
    /// account it. `Ok(Some(meta))` when a client's batch repeats a cached
    /// one (a retry; nothing is accounted).
    ///
    /// # Errors
    /// The refusals of the module doc; nothing of this batch is accounted.
    pub fn append(
        &mut self,
        batch: &ProducerBatch,
        current: Option<&ProducerStateEntry>,
    ) -> Result<Option<BatchMetadata>, ProducerError> {
        let header = &batch.header;
        let pid = header.producer_id;
        if pid < 0 {
            return Ok(None);
        }
        let mut entry = current.cloned().unwrap_or_default();
        match batch.control {
            None => {
                if let Some(dup) = self.append_data(header, current, &mut entry)? {
                    return Ok(Some(dup));
                }
            }
            Some(ControlBatch::Marker(marker)) => {
                self.check_epoch(header, current)?;
                if !self.origin.is_unchecked() && marker.coordinator_epoch < entry.coordinator_epoch
                {
                    return Err(ProducerError::TransactionCoordinatorFenced {
                        producer_id: pid,
                        coordinator_epoch: marker.coordinator_epoch,
                        current: entry.coordinator_epoch,
                    });
                }
                if let Some(first_offset) = entry.current_txn_first_offset.take() {
                    self.completed.push(CompletedTxn {
                        producer_id: pid,
                        first_offset,
                        last_offset: header.base_offset,
                        is_aborted: marker.is_abort(),
                    });
                }
                entry.set_epoch(header.producer_epoch);
                entry.coordinator_epoch = marker.coordinator_epoch;
                entry.last_timestamp = header.max_timestamp;
            }
            Some(ControlBatch::Empty | ControlBatch::Other(_)) => return Ok(None),
        }
        match self.updated.iter_mut().find(|(p, _)| *p == pid) {
            Some((_, e)) => *e = entry,
            None => self.updated.push((pid, entry)),
        }
        Ok(None)
    }

    fn check_epoch(
        &self,
        header: &BatchHeader,
        current: Option<&ProducerStateEntry>,
    ) -> Result<(), ProducerError> {
        match current {
            Some(e) if !self.origin.is_unchecked() && header.producer_epoch < e.epoch => {
                Err(ProducerError::InvalidProducerEpoch {
                    producer_id: header.producer_id,
                    epoch: header.producer_epoch,
                    current: e.epoch,
                })
            }
            _ => Ok(()),
        }
    }

    /// A data batch: epoch, sequence (clients) and transaction checks, then
    /// its metadata into `entry`.
    fn append_data(
        &mut self,
        header: &BatchHeader,
        current: Option<&ProducerStateEntry>,
        entry: &mut ProducerStateEntry,
    ) -> Result<Option<BatchMetadata>, ProducerError> {
        let pid = header.producer_id;
        if self.origin == AppendOrigin::Client {
            if header.base_sequence < 0 {
                return Err(ProducerError::InvalidSequence {
                    producer_id: pid,
                    first_seq: header.base_sequence,
                });
            }
            self.check_epoch(header, current)?;
            if let Some(dup) = check_sequence(header, current)? {
                return Ok(Some(dup));
            }
        } else {
            self.check_epoch(header, current)?;
        }
        if !self.origin.is_unchecked()
            && entry.current_txn_first_offset.is_some()
            && !header.is_transactional()
        {
            return Err(ProducerError::InvalidTxnState {
                producer_id: pid,
                offset: header.base_offset,
                txn_first_offset: entry.current_txn_first_offset.unwrap_or_default(),
            });
        }
        entry.set_epoch(header.producer_epoch);
        if header.base_sequence >= 0 {
            if entry.batches.len() == NUM_BATCHES_TO_RETAIN {
                entry.batches.pop_front();
            }
            entry.batches.push_back(BatchMetadata {
                first_seq: header.base_sequence,
                last_seq: last_sequence(header),
                first_offset: header.base_offset,
                last_offset: header.base_offset + header.last_offset_delta as i64,
                max_timestamp: header.max_timestamp,
            });
        }
        entry.last_timestamp = header.max_timestamp;
        if header.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(header.base_offset);
            self.started.push(OngoingTxn {
                producer_id: pid,
                first_offset: header.base_offset,
                start_timestamp_ms: header.max_timestamp,
            });
        }
        Ok(None)
    }
}

/// A client's sequence rules against the producer's entry before the batch:
/// `Some` for a retry of a cached batch.
fn check_sequence(
    header: &BatchHeader,
    current: Option<&ProducerStateEntry>,
) -> Result<Option<BatchMetadata>, ProducerError> {
    // A producer the partition has never seen may start at any sequence.
    let Some(entry) = current else { return Ok(None) };
    let pid = header.producer_id;
    let first_seq = header.base_sequence;
    let last_seq = last_sequence(header);
    if header.producer_epoch == entry.epoch {
        if let Some(dup) =
            entry.batches.iter().find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
        {
            return Ok(Some(*dup));
        }
        if let Some(last) = entry.batches.back() {
            if !in_sequence(last.last_seq, first_seq) {
                return Err(ProducerError::OutOfOrderSequence {
                    producer_id: pid,
                    epoch: header.producer_epoch,
                    first_seq,
                    expected: last.last_seq as i64 + 1,
                });
            }
        }
    } else if first_seq != 0 && entry.epoch != NO_PRODUCER_EPOCH {
        // A bumped epoch starts its sequences again at 0.
        return Err(ProducerError::OutOfOrderSequence {
            producer_id: pid,
            epoch: header.producer_epoch,
            first_seq,
            expected: 0,
        });
    }
    Ok(None)
}

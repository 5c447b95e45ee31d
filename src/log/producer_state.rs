//! Producer state of one partition (Kafka's `ProducerStateManager`): for
//! every producer id its epoch, its last five batches (idempotence), the
//! coordinator epoch of its last marker and its open transaction, if any; and
//! for the partition the open transactions by first offset, which give the
//! first unstable offset.
//!
//! Rules (the checks of one append are in `producer_append_info`):
//! * An append is checked as a whole with [`ProducerStateManager::append_batch`]
//!   into a [`ProducerAppendInfo`]; only once it is in the log does
//!   [`ProducerStateManager::update`] install the entries and the
//!   transactions it opened. The transactions its markers complete are then
//!   completed one by one, in offset order: the log first computes the LSO
//!   the transaction index records ([`ProducerStateManager::last_stable_offset`]),
//!   then [`ProducerStateManager::complete_txn`].
//! * The first undecided offset is the smallest first offset of an open
//!   transaction. On one node every appended offset is replicated, so it is
//!   also the first unstable offset (Kafka's set of completed but
//!   unreplicated transactions is always empty here).
//! * A producer the partition has never seen may start at any sequence, as in
//!   Kafka (its state may have been removed by retention).
//! * Every open transaction has a start time, what its age (metrics,
//!   `cleaner-status`) is measured from: the broker's time of the append
//!   that opened it; after a restart the max timestamp of its first batch,
//!   or the load time when that batch has none (an age then never too high).
//!
//! * A Produce that may open a transaction asks the coordinator first, holding
//!   no log lock. A [`VerificationGuard`] taken before that question and
//!   checked at the append closes the window in which the transaction is
//!   ended meanwhile: every marker for the producer drops its guard, so a
//!   batch verified against a transaction that has since ended cannot open a
//!   new one no marker would close (Kafka's `VerificationStateEntry`). Guards
//!   are not part of a snapshot; one lost to a reload refuses one append,
//!   which the client retries.
//!
//! The state is derived from the log: after a restart the loader rebuilds it
//! from the newest valid snapshot (`producer_snapshot`) and the batches after
//! it, or by replaying every batch header (and the record of every control
//! batch) when there is none. A snapshot keeps each producer's last batch
//! only, so the state it restores equals a full replay's in
//! [`ProducerStateManager::snapshot_entries`], and a retry of the last batch
//! is still a duplicate.

use std::collections::{BTreeMap, HashMap};

use super::producer_snapshot::SnapshotEntry;

pub use super::error::ProducerError;
pub use super::producer_append_info::{
    AppendOrigin, BatchMetadata, CompletedTxn, OngoingTxn, ProducerAppendInfo, ProducerBatch,
    ProducerStateEntry, NUM_BATCHES_TO_RETAIN,
};
use super::record_batch::NO_TIMESTAMP;

/// A producer's last records, as the cleaner keeps them (Kafka's `LastRecord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastRecord {
    /// The last offset of its last data batch, if any is cached.
    pub last_data_offset: Option<i64>,
    pub producer_epoch: i16,
}

/// Handed to a Produce before it asks the coordinator whether a batch may
/// open a transaction; the append that opens it must show the same guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerificationGuard(u64);

/// A producer being verified with the coordinator (Kafka's
/// `VerificationStateEntry`): the guard, the epoch asked at, and whether
/// the request speaks transactions v2 (its markers come at a bumped epoch).
#[derive(Debug, Clone, Copy)]
struct Verifying {
    guard: VerificationGuard,
    epoch: i16,
    epoch_bump: bool,
}

#[derive(Debug, Default, Clone)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerStateEntry>,
    /// Open transactions by first offset.
    ongoing_txns: BTreeMap<i64, OngoingTxn>,
    /// Producers being verified with the coordinator, by producer id.
    verification_guards: HashMap<i64, Verifying>,
    next_guard: u64,
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Producers with state.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The highest producer id seen, to keep newly issued ids above it.
    pub fn max_producer_id(&self) -> Option<i64> {
        self.producers.keys().copied().max()
    }

    /// The entry of one producer.
    pub fn entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer with state, by producer id (Kafka's `activeProducers`,
    /// what DescribeProducers reports).
    pub fn active_producers(&self) -> impl Iterator<Item = (i64, &ProducerStateEntry)> + '_ {
        self.producers.iter().map(|(&pid, e)| (pid, e))
    }

    /// The smallest first offset of an open transaction (Kafka's
    /// `firstUndecidedOffset`).
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing_txns.keys().next().copied()
    }

    /// Open transactions, by first offset: (first offset, producer id).
    pub fn ongoing_txns(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing_txns.iter().map(|(&first, t)| (first, t.producer_id))
    }

    /// The open transaction with the smallest first offset: the one the first
    /// unstable offset belongs to, and the oldest.
    pub fn oldest_ongoing_txn(&self) -> Option<OngoingTxn> {
        self.ongoing_txns.values().next().copied()
    }

    /// Date every open transaction with no start time yet (restored from a
    /// snapshot, or replayed from a batch without a timestamp) by
    /// `start(first_offset)`.
    pub fn date_ongoing_txns(&mut self, mut start: impl FnMut(i64) -> i64) {
        for txn in self.ongoing_txns.values_mut() {
            if txn.start_timestamp_ms == NO_TIMESTAMP {
                txn.start_timestamp_ms = start(txn.first_offset);
            }
        }
    }

    /// What the cleaner must keep of each producer with state (Kafka's
    /// `lastRecordsOfActiveProducers`): the last offset of its last data
    /// batch still cached, and its epoch (whose marker is kept when no data
    /// batch is cached).
    pub fn last_records_of_active_producers(&self) -> HashMap<i64, LastRecord> {
        self.producers
            .iter()
            .map(|(&pid, e)| {
                let last_data_offset = e.batches().last().map(|b| b.last_offset);
                (pid, LastRecord { last_data_offset, producer_epoch: e.epoch() })
            })
            .collect()
    }

    /// Check one batch of an append and account it in `info` (the producer's
    /// entry is the one the append's earlier batches left, else the stored
    /// one). `Ok(Some(meta))`: a client's retry of the cached batch `meta`.
    ///
    /// # Errors
    /// The refusals of `producer_append_info`; `info` is unchanged then.
    pub fn append_batch(
        &self,
        info: &mut ProducerAppendInfo,
        batch: &ProducerBatch,
    ) -> Result<Option<BatchMetadata>, ProducerError> {
        let pid = batch.header.producer_id;
        // Cloned only when an earlier batch of this append touched the producer.
        match info.entry(pid).cloned() {
            Some(entry) => info.append(batch, Some(&entry)),
            None => info.append(batch, self.producers.get(&pid)),
        }
    }

    /// Install what an append (now in the log) did to its producers and the
    /// transactions it opened. Returns the transactions its markers complete;
    /// the caller completes each with [`ProducerStateManager::complete_txn`].
    pub fn update(&mut self, info: ProducerAppendInfo) -> Vec<CompletedTxn> {
        for (pid, entry) in info.updated {
            self.producers.insert(pid, entry);
        }
        for txn in info.started {
            self.verification_guards.remove(&txn.producer_id);
            self.ongoing_txns.insert(txn.first_offset, txn);
        }
        info.completed
    }

    /// Remove the producers with no open transaction whose last batch's
    /// timestamp is at least `expiration_ms` before `now_ms` (Kafka's
    /// `isProducerExpired`: the client's timestamp, as the entry keeps it), and
    /// their verification guards; returns how many were removed.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        let guards = &mut self.verification_guards;
        self.producers.retain(|pid, e| {
            let expired = e.current_txn_first_offset().is_none()
                && now_ms.saturating_sub(e.last_timestamp()) >= expiration_ms;
            if expired {
                guards.remove(pid);
            }
            !expired
        });
        before - self.producers.len()
    }

    /// The guard a Produce holds while it asks the coordinator about a batch
    /// of `producer_id` at `epoch` that would open a transaction here; `None`
    /// when the producer's transaction at that epoch is already open (nothing
    /// to verify). A transaction open at an older epoch does not count: under
    /// transactions v2 it is the one before, whose marker (at this epoch) has
    /// not landed yet, and the batch must not join it. Concurrent requests of
    /// one producer at one epoch share a guard; a request at a newer epoch
    /// takes the producer's place, one at an older epoch gets a guard that
    /// never holds (the coordinator fences it anyway). `epoch_bump`: the
    /// request speaks transactions v2.
    pub fn maybe_start_verification(
        &mut self,
        producer_id: i64,
        epoch: i16,
        epoch_bump: bool,
    ) -> Option<VerificationGuard> {
        if self
            .producers
            .get(&producer_id)
            .is_some_and(|e| e.epoch() == epoch && e.current_txn_first_offset().is_some())
        {
            return None;
        }
        self.next_guard += 1;
        let fresh = VerificationGuard(self.next_guard);
        match self.verification_guards.get(&producer_id) {
            Some(v) if v.epoch == epoch => return Some(v.guard),
            Some(v) if v.epoch > epoch => return Some(fresh),
            _ => {}
        }
        let entry = Verifying { guard: fresh, epoch, epoch_bump };
        self.verification_guards.insert(producer_id, entry);
        Some(fresh)
    }

    /// Whether `guard` is still the producer's: no marker for it came since.
    pub fn verification_holds(&self, producer_id: i64, guard: Option<VerificationGuard>) -> bool {
        guard.is_some_and(|g| {
            self.verification_guards.get(&producer_id).is_some_and(|v| v.guard == g)
        })
    }

    /// The coordinator refused the batch verified under `guard`: drop it
    /// (only it: another request may have taken the producer's place).
    pub fn end_verification(&mut self, producer_id: i64, guard: VerificationGuard) {
        if self.verification_guards.get(&producer_id).is_some_and(|v| v.guard == guard) {
            self.verification_guards.remove(&producer_id);
        }
    }

    /// A marker of the producer at `marker_epoch` was written: the
    /// transaction a guard was verified against has ended, so the guard goes
    /// (Kafka's `UnifiedLog.updateProducers`), except a transactions-v2
    /// guard at the marker's epoch or later: that is the next transaction,
    /// which asked while this (the previous one's) marker was on its way.
    pub fn end_verification_at_marker(&mut self, producer_id: i64, marker_epoch: i16) {
        let keep = self
            .verification_guards
            .get(&producer_id)
            .is_some_and(|v| v.epoch_bump && v.epoch >= marker_epoch);
        if !keep {
            self.verification_guards.remove(&producer_id);
        }
    }

    /// The LSO right after `completed`'s marker, before it is completed: the
    /// first offset of the earliest open transaction of another producer,
    /// else the offset after the marker (Kafka's `lastStableOffset(CompletedTxn)`).
    pub fn last_stable_offset(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing_txns
            .iter()
            .find(|(_, t)| t.producer_id != completed.producer_id)
            .map_or(completed.last_offset + 1, |(&first, _)| first)
    }

    /// Mark a transaction returned by [`ProducerStateManager::update`] complete.
    pub fn complete_txn(&mut self, completed: &CompletedTxn) {
        let removed = self.ongoing_txns.remove(&completed.first_offset);
        debug_assert_eq!(
            removed.map(|t| t.producer_id),
            Some(completed.producer_id),
            "{completed:?} was not open"
        );
    }

    /// Replay one batch read back from the log (origin Recovery): the
    /// transactions it completes are returned, not yet completed.
    pub fn replay(&mut self, batch: &ProducerBatch) -> Vec<CompletedTxn> {
        let mut info = ProducerAppendInfo::new(AppendOrigin::Recovery);
        // Recovery checks nothing, so this cannot fail.
        if let Err(e) = self.append_batch(&mut info, batch) {
            debug_assert!(false, "replay refused a batch: {e}");
            return Vec::new();
        }
        self.update(info)
    }

    /// The state as a snapshot holds it, by producer id.
    pub fn snapshot_entries(&self) -> Vec<SnapshotEntry> {
        let mut out: Vec<SnapshotEntry> =
            self.producers.iter().map(|(&pid, e)| e.to_snapshot(pid)).collect();
        out.sort_unstable();
        out
    }

    /// The state a snapshot's entries restore (Kafka's `loadProducerEntry`).
    pub fn from_snapshot(entries: &[SnapshotEntry]) -> Self {
        let mut state = Self::new();
        for e in entries {
            let entry = ProducerStateEntry::from_snapshot(e);
            if let Some(first) = entry.current_txn_first_offset() {
                // A snapshot holds no start time: the loader dates it.
                let txn = OngoingTxn {
                    producer_id: e.producer_id,
                    first_offset: first,
                    start_timestamp_ms: NO_TIMESTAMP,
                };
                state.ongoing_txns.insert(first, txn);
            }
            state.producers.insert(e.producer_id, entry);
        }
        state
    }

    /// Forget every cached batch below `offset` (after truncation or log-start
    /// moves past them); a producer whose batches are all gone keeps its
    /// epoch, and open transactions stay open.
    pub fn truncate_below(&mut self, offset: i64) {
        for entry in self.producers.values_mut() {
            entry.truncate_below(offset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::control_record::{ControlBatch, EndTransactionMarker};
    use crate::log::record_batch::{
        BatchHeader, CONTROL_FLAG_MASK, NO_SEQUENCE, TRANSACTIONAL_FLAG_MASK,
    };

    fn header(pid: i64, epoch: i16, seq: i32, count: i32, base_offset: i64) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: base_offset,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: count,
        }
    }

    fn data(pid: i64, epoch: i16, seq: i32, count: i32, base: i64) -> ProducerBatch {
        ProducerBatch { header: header(pid, epoch, seq, count, base), control: None }
    }

    fn txn_data(pid: i64, epoch: i16, seq: i32, count: i32, base: i64) -> ProducerBatch {
        let mut h = header(pid, epoch, seq, count, base);
        h.attributes = TRANSACTIONAL_FLAG_MASK;
        ProducerBatch { header: h, control: None }
    }

    fn marker(pid: i64, epoch: i16, base: i64, m: EndTransactionMarker) -> ProducerBatch {
        let mut h = header(pid, epoch, NO_SEQUENCE, 1, base);
        h.attributes = TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK;
        ProducerBatch { header: h, control: Some(ControlBatch::Marker(m)) }
    }

    /// Append `batches` as one append of `origin`; on success install it and
    /// complete its transactions, returning them with their LSOs.
    fn append(
        s: &mut ProducerStateManager,
        origin: AppendOrigin,
        batches: &[ProducerBatch],
    ) -> Result<Vec<(CompletedTxn, i64)>, ProducerError> {
        let mut info = ProducerAppendInfo::new(origin);
        for b in batches {
            s.append_batch(&mut info, b)?;
        }
        let mut out = Vec::new();
        for c in s.update(info) {
            out.push((c, s.last_stable_offset(&c)));
            s.complete_txn(&c);
        }
        Ok(out)
    }

    fn check(
        s: &ProducerStateManager,
        b: &ProducerBatch,
    ) -> Result<Option<BatchMetadata>, ProducerError> {
        s.append_batch(&mut ProducerAppendInfo::new(AppendOrigin::Client), b)
    }

    #[test]
    fn duplicates_gaps_and_fencing() {
        let mut s = ProducerStateManager::new();
        let client = AppendOrigin::Client;
        // An unknown producer may start anywhere.
        assert_eq!(check(&s, &data(7, 0, 10, 2, 0)), Ok(None));
        append(&mut s, client, &[data(7, 0, 10, 2, 0)]).unwrap();
        append(&mut s, client, &[data(7, 0, 12, 3, 2)]).unwrap();
        match check(&s, &data(7, 0, 10, 2, 99)) {
            Ok(Some(m)) => assert_eq!((m.first_offset, m.last_offset), (0, 1)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            check(&s, &data(7, 0, 16, 1, 5)),
            Err(ProducerError::OutOfOrderSequence { expected: 15, .. })
        ));
        // A new epoch restarts at 0; the old epoch is fenced afterwards.
        assert!(matches!(
            check(&s, &data(7, 1, 3, 1, 5)),
            Err(ProducerError::OutOfOrderSequence { expected: 0, .. })
        ));
        append(&mut s, client, &[data(7, 1, 0, 1, 5)]).unwrap();
        assert!(matches!(
            check(&s, &data(7, 0, 15, 1, 6)),
            Err(ProducerError::InvalidProducerEpoch { .. })
        ));
        // Only five batches are remembered.
        for i in 1..=5 {
            append(&mut s, client, &[data(7, 1, i, 1, 5 + i as i64)]).unwrap();
        }
        assert!(matches!(
            check(&s, &data(7, 1, 0, 1, 0)),
            Err(ProducerError::OutOfOrderSequence { .. })
        ));
        assert!(matches!(
            check(&s, &data(8, 0, -1, 1, 0)),
            Err(ProducerError::InvalidSequence { .. })
        ));
    }

    #[test]
    fn open_transactions_are_dated_by_append_replay_or_the_loader() {
        let mut s = ProducerStateManager::new();
        // An append: the broker's time (max timestamps here equal base offsets).
        let mut info = ProducerAppendInfo::new(AppendOrigin::Client);
        s.append_batch(&mut info, &txn_data(1, 0, 0, 2, 10)).unwrap();
        info.set_append_time(5_000);
        s.update(info);
        // A replay: the batch's max timestamp.
        s.replay(&txn_data(2, 0, 0, 1, 12));
        let started = |s: &ProducerStateManager| -> Vec<(i64, i64)> {
            s.ongoing_txns.values().map(|t| (t.producer_id, t.start_timestamp_ms)).collect()
        };
        let oldest = s.oldest_ongoing_txn().unwrap();
        assert_eq!((oldest.producer_id, oldest.first_offset), (1, 10));
        assert_eq!(started(&s), vec![(1, 5_000), (2, 12)]);
        // A snapshot holds no start time; dating fills only those missing.
        let mut restored = ProducerStateManager::from_snapshot(&s.snapshot_entries());
        assert_eq!(started(&restored), vec![(1, NO_TIMESTAMP), (2, NO_TIMESTAMP)]);
        restored.date_ongoing_txns(|first| first * 100);
        restored.date_ongoing_txns(|_| unreachable!("all dated"));
        assert_eq!(started(&restored), vec![(1, 1_000), (2, 1_200)]);
        s.replay(&marker(1, 0, 13, EndTransactionMarker::commit(0)))
            .iter()
            .for_each(|c| s.complete_txn(c));
        assert_eq!(s.oldest_ongoing_txn().map(|t| t.producer_id), Some(2));
    }

    #[test]
    fn sequence_wraps() {
        let mut s = ProducerStateManager::new();
        append(&mut s, AppendOrigin::Client, &[data(1, 0, i32::MAX - 1, 2, 0)]).unwrap();
        assert_eq!(check(&s, &data(1, 0, 0, 1, 2)), Ok(None));
    }

    #[test]
    fn batches_of_one_append_are_checked_in_order() {
        let mut s = ProducerStateManager::new();
        append(&mut s, AppendOrigin::Client, &[data(1, 0, 0, 2, 0)]).unwrap();
        append(&mut s, AppendOrigin::Client, &[data(1, 0, 2, 1, 2), data(1, 0, 3, 1, 3)]).unwrap();
        assert!(check(&s, &data(1, 0, 4, 1, 4)).unwrap().is_none());
        // A gap inside one append refuses all of it.
        let before = s.entry(1).cloned();
        assert!(append(&mut s, AppendOrigin::Client, &[data(1, 0, 4, 1, 4), data(1, 0, 9, 1, 5)])
            .is_err());
        assert_eq!(s.entry(1).cloned(), before);
    }

    #[test]
    fn a_marker_completes_the_open_transaction() {
        let mut s = ProducerStateManager::new();
        append(&mut s, AppendOrigin::Client, &[txn_data(5, 0, 0, 3, 10)]).unwrap();
        assert_eq!(s.first_undecided_offset(), Some(10));
        assert_eq!(s.entry(5).unwrap().current_txn_first_offset(), Some(10));
        // Later batches of the same transaction do not move its start.
        append(&mut s, AppendOrigin::Client, &[txn_data(5, 0, 3, 1, 20)]).unwrap();
        assert_eq!(s.first_undecided_offset(), Some(10));
        let done = append(
            &mut s,
            AppendOrigin::Coordinator,
            &[marker(5, 0, 21, EndTransactionMarker::abort(3))],
        )
        .unwrap();
        let txn =
            CompletedTxn { producer_id: 5, first_offset: 10, last_offset: 21, is_aborted: true };
        assert_eq!(done, vec![(txn, 22)]);
        assert_eq!(s.first_undecided_offset(), None);
        let entry = s.entry(5).unwrap();
        assert_eq!((entry.current_txn_first_offset(), entry.coordinator_epoch()), (None, 3));
        assert_eq!(entry.batches().count(), 2, "the same epoch keeps the cached batches");
        // The producer continues its sequence in the next transaction.
        assert_eq!(check(&s, &txn_data(5, 0, 4, 1, 22)), Ok(None));
        let done = append(
            &mut s,
            AppendOrigin::Coordinator,
            &[txn_data(5, 0, 4, 1, 22), marker(5, 0, 23, EndTransactionMarker::commit(3))],
        )
        .unwrap();
        assert!(!done[0].0.is_aborted);
    }

    #[test]
    fn non_transactional_write_while_a_transaction_is_open_is_refused() {
        let mut s = ProducerStateManager::new();
        append(&mut s, AppendOrigin::Client, &[txn_data(5, 0, 0, 1, 0)]).unwrap();
        let before = s.entry(5).cloned();
        for origin in [AppendOrigin::Client, AppendOrigin::Coordinator] {
            assert_eq!(
                append(&mut s, origin, &[data(5, 0, 1, 1, 1)]),
                Err(ProducerError::InvalidTxnState {
                    producer_id: 5,
                    offset: 1,
                    txn_first_offset: 0
                })
            );
        }
        assert_eq!(s.entry(5).cloned(), before);
        // Another producer is not affected, and after the marker the producer may write plainly.
        append(&mut s, AppendOrigin::Client, &[data(6, 0, 0, 1, 1)]).unwrap();
        append(
            &mut s,
            AppendOrigin::Coordinator,
            &[marker(5, 0, 2, EndTransactionMarker::commit(0))],
        )
        .unwrap();
        append(&mut s, AppendOrigin::Client, &[data(5, 0, 1, 1, 3)]).unwrap();
        // Recovery checks nothing.
        append(&mut s, AppendOrigin::Client, &[txn_data(5, 0, 2, 1, 4)]).unwrap();
        assert!(append(&mut s, AppendOrigin::Recovery, &[data(5, 0, 3, 1, 5)]).is_ok());
    }

    #[test]
    fn stale_marker_epochs_are_fenced() {
        let mut s = ProducerStateManager::new();
        append(&mut s, AppendOrigin::Client, &[txn_data(5, 2, 0, 1, 0)]).unwrap();
        assert_eq!(
            append(
                &mut s,
                AppendOrigin::Coordinator,
                &[marker(5, 1, 1, EndTransactionMarker::abort(0))]
            ),
            Err(ProducerError::InvalidProducerEpoch { producer_id: 5, epoch: 1, current: 2 })
        );
        assert_eq!(s.first_undecided_offset(), Some(0), "the transaction stays open");
        // A marker with a bumped epoch (the coordinator fenced the producer)
        // completes it and fences the old epoch's data.
        let done = append(
            &mut s,
            AppendOrigin::Coordinator,
            &[marker(5, 3, 1, EndTransactionMarker::abort(0))],
        )
        .unwrap();
        assert_eq!(done.len(), 1);
        assert_eq!(
            s.entry(5).unwrap().batches().count(),
            0,
            "a new epoch drops the cached batches"
        );
        assert!(matches!(
            check(&s, &txn_data(5, 2, 1, 1, 2)),
            Err(ProducerError::InvalidProducerEpoch { current: 3, .. })
        ));
        // A marker of an older coordinator is fenced too.
        append(
            &mut s,
            AppendOrigin::Coordinator,
            &[marker(5, 3, 2, EndTransactionMarker::commit(4))],
        )
        .unwrap();
        assert_eq!(
            append(
                &mut s,
                AppendOrigin::Coordinator,
                &[marker(5, 3, 3, EndTransactionMarker::commit(2))]
            ),
            Err(ProducerError::TransactionCoordinatorFenced {
                producer_id: 5,
                coordinator_epoch: 2,
                current: 4
            })
        );
    }

    #[test]
    fn a_duplicate_marker_completes_nothing() {
        let mut s = ProducerStateManager::new();
        append(&mut s, AppendOrigin::Client, &[txn_data(5, 0, 0, 1, 0)]).unwrap();
        let m = EndTransactionMarker::abort(0);
        assert_eq!(
            append(&mut s, AppendOrigin::Coordinator, &[marker(5, 0, 1, m)]).unwrap().len(),
            1
        );
        let entry = s.entry(5).cloned();
        assert_eq!(
            append(&mut s, AppendOrigin::Coordinator, &[marker(5, 0, 2, m)]).unwrap(),
            vec![]
        );
        assert_eq!(s.first_undecided_offset(), None);
        assert_eq!(
            s.entry(5).unwrap().current_txn_first_offset(),
            entry.unwrap().current_txn_first_offset()
        );
        // So is a marker for a producer never seen here.
        assert_eq!(
            append(&mut s, AppendOrigin::Coordinator, &[marker(9, 0, 3, m)]).unwrap(),
            vec![]
        );
        assert_eq!(s.entry(9).unwrap().epoch(), 0);
    }

    #[test]
    fn last_stable_offset_with_interleaved_producers() {
        let mut s = ProducerStateManager::new();
        let client = AppendOrigin::Client;
        append(&mut s, client, &[txn_data(1, 0, 0, 2, 0)]).unwrap(); // 0..=1
        append(&mut s, client, &[data(9, 0, 0, 1, 2)]).unwrap(); // plain at 2
        append(&mut s, client, &[txn_data(2, 0, 0, 2, 3)]).unwrap(); // 3..=4
        append(&mut s, client, &[txn_data(1, 0, 2, 1, 5)]).unwrap(); // 5
        append(&mut s, client, &[txn_data(3, 0, 0, 1, 6)]).unwrap(); // 6
        assert_eq!(s.ongoing_txns().collect::<Vec<_>>(), vec![(0, 1), (3, 2), (6, 3)]);
        assert_eq!(s.first_undecided_offset(), Some(0));
        // Producer 2 aborts first: the LSO stays at producer 1's start.
        let done = append(
            &mut s,
            AppendOrigin::Coordinator,
            &[marker(2, 0, 7, EndTransactionMarker::abort(0))],
        )
        .unwrap();
        assert_eq!(done[0].1, 0);
        assert_eq!(s.first_undecided_offset(), Some(0));
        // Producer 1 commits: the LSO moves to producer 3's start.
        let done = append(
            &mut s,
            AppendOrigin::Coordinator,
            &[marker(1, 0, 8, EndTransactionMarker::commit(0))],
        )
        .unwrap();
        assert_eq!(done[0].1, 6);
        assert_eq!(s.first_undecided_offset(), Some(6));
        let done = append(
            &mut s,
            AppendOrigin::Coordinator,
            &[marker(3, 0, 9, EndTransactionMarker::abort(0))],
        )
        .unwrap();
        assert_eq!(
            done[0],
            (
                CompletedTxn { producer_id: 3, first_offset: 6, last_offset: 9, is_aborted: true },
                10
            )
        );
        assert_eq!(s.first_undecided_offset(), None);
    }

    #[test]
    fn emptied_and_unknown_control_batches_change_nothing() {
        let mut s = ProducerStateManager::new();
        append(&mut s, AppendOrigin::Client, &[txn_data(5, 0, 0, 1, 0)]).unwrap();
        let mut b = marker(5, 0, 1, EndTransactionMarker::abort(0));
        for control in [
            ControlBatch::Empty,
            ControlBatch::Other(crate::log::control_record::ControlRecordType::Unknown(2)),
        ] {
            b.control = Some(control);
            assert!(s.replay(&b).is_empty());
        }
        assert_eq!(s.first_undecided_offset(), Some(0));
    }

    #[test]
    fn a_v2_guard_for_the_next_transaction_outlives_the_previous_ones_marker() {
        let mut m = ProducerStateManager::new();
        // Level 0: a marker at the guard's epoch ends what it was verified
        // against.
        let g = m.maybe_start_verification(1, 0, false);
        m.end_verification_at_marker(1, 0);
        assert!(!m.verification_holds(1, g));
        // v2: the guard was taken at the bumped epoch for the next
        // transaction; the previous one's marker comes at that epoch.
        let g = m.maybe_start_verification(1, 1, true);
        m.end_verification_at_marker(1, 1);
        assert!(m.verification_holds(1, g));
        // A later marker (a coordinator abort of that transaction) ends it.
        m.end_verification_at_marker(1, 2);
        assert!(!m.verification_holds(1, g));
        // Requests at one epoch share a guard; an older epoch's never holds
        // and does not displace it; a newer epoch's takes the place.
        let g = m.maybe_start_verification(1, 5, true);
        assert_eq!(m.maybe_start_verification(1, 5, true), g);
        let stale = m.maybe_start_verification(1, 4, true);
        assert!(!m.verification_holds(1, stale) && m.verification_holds(1, g));
        let newer = m.maybe_start_verification(1, 6, true);
        assert!(m.verification_holds(1, newer) && !m.verification_holds(1, g));
    }
}

//! Transactions in one partition log, through the log API (the only way to
//! write them until the coordinator exists): interleaved producers move the
//! last stable offset exactly as Kafka's rules say, an ABORT writes the
//! `.txnindex` entry Kafka would, read_committed reads and ListOffsets stop
//! at the LSO, markers are fenced, and `.txnindex` files follow their
//! segments through rolls, retention and deletion.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use sediment::clock::{MockClock, SharedClock};
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::producer_state::ProducerError;
use sediment::log::record_batch::{BatchBuilder, BatchHeader};
use sediment::log::transaction_index::AbortedTxn;
use sediment::log::unified_log::LATEST_TIMESTAMP;
use sediment::log::{
    BatchError, FetchIsolation, LoadParams, Log, LogConfig, LogError, TopicPartition,
};

const NOW: i64 = 1_700_000_000_000;

fn open(dir: &Path, pairs: &[(&str, &str)], clock: SharedClock) -> Log {
    let config = LogConfig::resolve(&Default::default(), common::overrides(pairs)).unwrap();
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    Log::open(dir, TopicPartition::new("txn", 0), Arc::new(config), load, false, clock).unwrap()
}

/// A transactional batch of `n` records of producer `pid` (epoch 0) from sequence `seq`.
fn txn_batch(pid: i64, seq: i32, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, NOW).producer(pid, 0, seq);
    b.transactional = true;
    for i in 0..n {
        b.append(NOW, Some(format!("k{pid}-{}", seq as usize + i).as_bytes()), Some(b"v"));
    }
    b.build()
}

fn plain(n: usize) -> Vec<u8> {
    let records: Vec<common::RecordSpec<'_>> =
        (0..n).map(|_| (NOW, Some(&b"plain"[..]), Some(&b"v"[..]))).collect();
    common::batch(Compression::None, &records)
}

fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn { producer_id: pid, first_offset: first, last_offset: last, last_stable_offset: lso }
}

/// Offsets of the batches in `bytes` and the offset after the last one.
fn batch_bases(bytes: &[u8]) -> (Vec<i64>, i64) {
    let (mut bases, mut end, mut pos) = (Vec::new(), -1, 0);
    while pos < bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).unwrap();
        bases.push(h.base_offset);
        end = h.next_offset();
        pos += h.size_in_bytes();
    }
    (bases, end)
}

#[test]
fn interleaved_producers_move_the_lso_and_aborts_are_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let clock: SharedClock = MockClock::new(NOW);
    let mut log = open(dir.path(), &[], clock);
    let commit = EndTransactionMarker::commit(0);
    let abort = EndTransactionMarker::abort(0);
    let mut lso = Vec::new();
    log.append_as_leader(&mut plain(2)).unwrap(); // 0-1
    lso.push(log.last_stable_offset());
    log.append_as_leader(&mut txn_batch(1, 0, 2)).unwrap(); // 2-3: P1 opens
    lso.push(log.last_stable_offset());
    log.append_as_leader(&mut txn_batch(2, 0, 1)).unwrap(); // 4: P2 opens
    log.append_as_leader(&mut plain(1)).unwrap(); // 5
    log.append_as_leader(&mut txn_batch(1, 2, 1)).unwrap(); // 6
    log.append_end_txn_marker(2, 0, abort).unwrap(); // 7: P2 aborts, P1 still open
    lso.push(log.last_stable_offset());
    log.append_as_leader(&mut txn_batch(3, 0, 1)).unwrap(); // 8: P3 opens
    log.append_end_txn_marker(1, 0, commit).unwrap(); // 9: P1 commits
    lso.push(log.last_stable_offset());
    log.append_as_leader(&mut plain(1)).unwrap(); // 10
    log.append_end_txn_marker(3, 0, abort).unwrap(); // 11: P3 aborts, nothing open
    lso.push(log.last_stable_offset());
    log.append_as_leader(&mut txn_batch(4, 0, 2)).unwrap(); // 12-13: P4 stays open
    lso.push(log.last_stable_offset());
    assert_eq!(lso, vec![2, 2, 2, 8, 12, 12]);
    assert_eq!((log.first_unstable_offset(), log.high_watermark()), (Some(12), 14));

    // The index holds the two aborts with Kafka's LSO after each marker.
    let entries = [txn(2, 4, 7, 2), txn(3, 8, 11, 12)];
    let golden: Vec<u8> = entries.iter().flat_map(AbortedTxn::to_bytes).collect();
    assert_eq!(std::fs::read(dir.path().join("00000000000000000000.txnindex")).unwrap(), golden);
    assert_eq!(log.collect_aborted_transactions(0, 14).unwrap(), entries);
    assert_eq!(log.collect_aborted_transactions(0, 4).unwrap(), vec![], "P2's data starts at 4");
    assert_eq!(log.collect_aborted_transactions(8, 9).unwrap(), vec![entries[1]]);
    assert_eq!(log.collect_aborted_transactions(12, 14).unwrap(), vec![]);

    // read_committed stops before the open transaction and names the aborts.
    let info = log.read_region_with_isolation(0, 1 << 20, true, FetchIsolation::TxnCommitted);
    let info = info.unwrap();
    assert_eq!(info.last_stable_offset, 12);
    let bytes = info.records.unwrap().read_to_bytes().unwrap();
    assert_eq!(batch_bases(&bytes).1, 12);
    assert_eq!(info.aborted_transactions, Some(entries.to_vec()));
    // Only what overlaps the batches returned: the batch at 2 alone meets no abort.
    let info = log.read_region_with_isolation(2, 1, true, FetchIsolation::TxnCommitted).unwrap();
    assert_eq!(batch_bases(&info.records.unwrap().read_to_bytes().unwrap()), (vec![2], 4));
    assert_eq!(info.aborted_transactions, Some(vec![]));
    let info = log.read_region_with_isolation(4, 1, true, FetchIsolation::TxnCommitted).unwrap();
    assert_eq!(info.aborted_transactions, Some(vec![entries[0]]));
    // At or past the LSO: nothing, no error.
    for at in [12, 13, 14] {
        let info = log.read_region_with_isolation(at, 1 << 20, true, FetchIsolation::TxnCommitted);
        let info = info.unwrap();
        assert!(info.records.is_none(), "read_committed at {at}");
        assert_eq!((info.aborted_transactions, info.high_watermark), (Some(vec![]), 14));
    }
    // read_uncommitted reads to the end and names nothing; both report the LSO.
    let info = log.read_region(0, 1 << 20, true).unwrap();
    assert_eq!(batch_bases(&info.records.unwrap().read_to_bytes().unwrap()).1, 14);
    assert_eq!((info.aborted_transactions, info.last_stable_offset), (None, 12));

    // ListOffsets: LATEST by isolation; a lookup landing at or past the LSO finds nothing.
    let committed = FetchIsolation::TxnCommitted;
    assert_eq!(
        log.fetch_offset_for_isolation(LATEST_TIMESTAMP, committed).unwrap(),
        Some((-1, 12))
    );
    let uncommitted = FetchIsolation::HighWatermark;
    assert_eq!(
        log.fetch_offset_for_isolation(LATEST_TIMESTAMP, uncommitted).unwrap(),
        Some((-1, 14))
    );
    assert_eq!(log.fetch_offset_for_isolation(NOW, committed).unwrap(), Some((NOW, 0)));
    log.append_as_leader(&mut txn_batch(4, 2, 1)).unwrap();
    let mut late = common::batch(Compression::None, &[(NOW + 5, Some(b"late"), Some(b"v"))]);
    log.append_as_leader(&mut late).unwrap(); // 15, after the open transaction
    assert_eq!(log.fetch_offset_for_isolation(NOW + 5, uncommitted).unwrap(), Some((NOW + 5, 15)));
    assert_eq!(log.fetch_offset_for_isolation(NOW + 5, committed).unwrap(), None);
}

#[test]
fn markers_and_batches_outside_their_transaction_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock: SharedClock = MockClock::new(NOW);
    let mut log = open(dir.path(), &[], clock);
    log.append_as_leader(&mut txn_batch(7, 0, 1)).unwrap();
    let bump = |epoch: i16| {
        let mut b = BatchBuilder::new(Compression::None, NOW).producer(7, epoch, 1);
        b.append(NOW, Some(b"k"), Some(b"v"));
        b.build()
    };
    // A plain batch of a producer whose transaction is open.
    let err = log.append_as_leader(&mut bump(0)).unwrap_err();
    assert!(matches!(err, LogError::Producer(ProducerError::InvalidTxnState { .. })), "{err}");
    // A client may not write a marker.
    let mut marker = EndTransactionMarker::abort(0).build_batch(7, 0, NOW);
    let err = log.append_as_leader(&mut marker).unwrap_err();
    assert!(matches!(err, LogError::Batch(BatchError::InvalidBatch(_))), "{err}");
    assert_eq!(log.log_end_offset(), 1, "nothing refused was written");

    // The coordinator fences the producer: its abort carries epoch 1.
    log.append_end_txn_marker(7, 1, EndTransactionMarker::abort(3)).unwrap();
    assert_eq!(log.last_stable_offset(), 2);
    // A late marker of epoch 0, or of an older coordinator, is refused.
    let err = log.append_end_txn_marker(7, 0, EndTransactionMarker::commit(3)).unwrap_err();
    assert!(matches!(err, LogError::Producer(ProducerError::InvalidProducerEpoch { .. })));
    let err = log.append_end_txn_marker(7, 1, EndTransactionMarker::commit(2)).unwrap_err();
    assert!(matches!(err, LogError::Producer(ProducerError::TransactionCoordinatorFenced { .. })));
    // A retried marker appends, completes nothing and indexes nothing.
    let index = dir.path().join("00000000000000000000.txnindex");
    let before = std::fs::read(&index).unwrap();
    assert_eq!(before.len(), 34);
    log.append_end_txn_marker(7, 1, EndTransactionMarker::abort(3)).unwrap();
    assert_eq!((log.log_end_offset(), log.last_stable_offset()), (3, 3));
    assert_eq!(std::fs::read(&index).unwrap(), before);
    // The fenced epoch's data is refused; the new epoch starts at sequence 0.
    let err = log.append_as_leader(&mut txn_batch(7, 1, 1)).unwrap_err();
    assert!(matches!(err, LogError::Producer(ProducerError::InvalidProducerEpoch { .. })));
    let mut next = BatchBuilder::new(Compression::None, NOW).producer(7, 2, 0);
    next.append(NOW, Some(b"k"), Some(b"v"));
    log.append_as_leader(&mut next.build()).unwrap();
}

#[test]
fn txn_indexes_follow_their_segments() {
    let dir = tempfile::tempdir().unwrap();
    let clock_impl = MockClock::new(NOW);
    let clock: SharedClock = clock_impl.clone();
    let config = [("file.delete.delay.ms", "1000"), ("retention.ms", "-1")];
    let mut log = open(dir.path(), &config, clock);
    let abort = EndTransactionMarker::abort(0);
    // Three segments, each with one aborted transaction whose marker is in it.
    for (round, base) in [(0i32, 0i64), (1, 2), (2, 4)] {
        log.append_as_leader(&mut txn_batch(5, round, 1)).unwrap();
        log.append_end_txn_marker(5, 0, abort).unwrap();
        log.roll_if_not_empty().unwrap();
        let name = format!("{base:020}.txnindex");
        let entry = txn(5, base, base + 1, base + 2);
        assert_eq!(std::fs::read(dir.path().join(name)).unwrap(), entry.to_bytes());
    }
    // A transaction spanning a roll: its entry goes with the marker's segment.
    log.append_as_leader(&mut txn_batch(5, 3, 1)).unwrap(); // 6
    log.roll_if_not_empty().unwrap();
    log.append_end_txn_marker(5, 0, abort).unwrap(); // 7, segment 7
    assert!(!dir.path().join(format!("{:020}.txnindex", 6)).exists());
    let spanning = txn(5, 6, 7, 8);
    assert_eq!(
        std::fs::read(dir.path().join(format!("{:020}.txnindex", 7))).unwrap(),
        spanning.to_bytes()
    );
    assert_eq!(log.collect_aborted_transactions(6, 8).unwrap(), vec![spanning]);

    // DeleteRecords past the first segment: retention renames its files, then unlinks them.
    log.maybe_increment_log_start_offset(2).unwrap();
    assert_eq!(log.delete_old_segments().unwrap(), 1);
    let first = dir.path().join("00000000000000000000.txnindex");
    assert!(!first.exists());
    assert!(dir.path().join("00000000000000000000.txnindex.deleted").exists());
    clock_impl.advance(1_000);
    log.delete_expired_files(NOW + 1_000, false).unwrap();
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with("00000000000000000000.")), "{names:?}");
    assert_eq!(log.collect_aborted_transactions(2, 8).unwrap().len(), 3);

    // The first unstable offset never lies below the log start.
    log.append_as_leader(&mut txn_batch(6, 0, 3)).unwrap(); // 8-10, open
    log.maybe_increment_log_start_offset(9).unwrap();
    assert_eq!((log.first_unstable_offset(), log.last_stable_offset()), (Some(9), 9));

    // Deleting the log removes every index.
    let path = dir.path().to_path_buf();
    log.delete().unwrap();
    assert!(!path.exists());
}

/// A Produce verified against a transaction that a marker ended before its
/// append (a timeout or admin abort racing it) may not open a new one: it is
/// refused, and a fresh verification after the marker lets it through.
#[test]
fn a_marker_between_verification_and_append_refuses_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), &[], MockClock::new(NOW));
    let guard = log.maybe_start_verification(1, 0, false);
    assert!(guard.is_some(), "no transaction open: the batch must be verified");
    // The coordinator aborts meanwhile; its marker reaches this partition first.
    log.append_end_txn_marker(1, 0, EndTransactionMarker::abort(0)).unwrap();
    let err = log.append_as_leader_verified(&mut txn_batch(1, 0, 1), guard).unwrap_err();
    assert!(
        matches!(err, LogError::Producer(ProducerError::UnverifiedTransaction { producer_id: 1 })),
        "{err:?}"
    );
    assert_eq!(log.first_unstable_offset(), None, "nothing opened");

    let guard = log.maybe_start_verification(1, 0, false);
    let first = log.append_as_leader_verified(&mut txn_batch(1, 0, 1), guard).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(first.first_offset));
    // Its transaction is open: the next batch needs no guard, and one taken
    // by a concurrent request is not needed either.
    assert_eq!(log.maybe_start_verification(1, 0, false), None);
    log.append_as_leader_verified(&mut txn_batch(1, 1, 1), None).unwrap();
    // Once a marker closes it, a batch checked while it was open is refused.
    log.append_end_txn_marker(1, 0, EndTransactionMarker::commit(0)).unwrap();
    let err = log.append_as_leader_verified(&mut txn_batch(1, 2, 1), None).unwrap_err();
    assert!(matches!(err, LogError::Producer(ProducerError::UnverifiedTransaction { .. })));
    // Verification is per producer: another one's guard is not this one's.
    let other = log.maybe_start_verification(2, 0, false);
    let err = log.append_as_leader_verified(&mut txn_batch(1, 2, 1), other).unwrap_err();
    assert!(matches!(err, LogError::Producer(ProducerError::UnverifiedTransaction { .. })));
}

/// Producer state expires as in Kafka (`producer.id.expiration.ms`): a
/// producer with no open transaction whose last batch is old enough is
/// forgotten, one with an open transaction is kept whatever its age.
#[test]
fn idle_producers_expire_unless_their_transaction_is_open() {
    const EXPIRATION: i64 = 60_000;
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), &[], MockClock::new(NOW));
    let mut idempotent = BatchBuilder::new(Compression::None, NOW).producer(5, 0, 0);
    idempotent.append(NOW, Some(b"k"), Some(b"v"));
    let idempotent = idempotent.build();
    log.append_as_leader(&mut idempotent.clone()).unwrap();
    log.append_as_leader(&mut txn_batch(6, 0, 1)).unwrap();

    assert_eq!(log.remove_expired_producers(NOW + EXPIRATION - 1, EXPIRATION), 0);
    // A retry of the cached batch is still answered as a duplicate.
    let retry = log.append_as_leader(&mut idempotent.clone()).unwrap();
    assert_eq!((retry.first_offset, retry.records_count), (0, 0));

    assert_eq!(log.remove_expired_producers(NOW + EXPIRATION, EXPIRATION), 1);
    assert!(log.producer_state().entry(5).is_none(), "idle idempotent producer expired");
    assert!(log.producer_state().entry(6).is_some(), "open transaction kept");
    // Forgotten: the same batch is now appended again, as Kafka would.
    let again = log.append_as_leader(&mut idempotent.clone()).unwrap();
    assert_eq!(again.records_count, 1);

    log.append_end_txn_marker(6, 0, EndTransactionMarker::commit(0)).unwrap();
    assert_eq!(log.remove_expired_producers(NOW + 10 * EXPIRATION, EXPIRATION), 2);
    assert!(log.producer_state().is_empty());
}

#[test]
fn a_txnindex_that_cannot_open_stops_the_log_and_a_reopen_recovers_the_abort() {
    let root = tempfile::tempdir().unwrap();
    // A log dir of its own: the fail point is scoped to it.
    let (log_dir, dir) = (root.path().join("logs"), root.path().join("logs").join("txn-0"));
    let clock: SharedClock = MockClock::new(NOW);
    let mut log = open(&dir, &[], Arc::clone(&clock));
    log.append_as_leader(&mut txn_batch(7, 0, 3)).unwrap();
    let armed = sediment::failpoint::arm(
        sediment::log::transaction_index::OPEN_FAILPOINT,
        &log_dir.to_string_lossy(),
    );
    let refused = log.append_end_txn_marker(7, 0, EndTransactionMarker::abort(0));
    drop(armed);
    assert!(matches!(refused, Err(LogError::Io { .. })), "{refused:?}");
    // The marker is in the file, its index entry is not: the log takes no
    // more writes rather than serve a transaction its files do not record.
    assert!(log.failure().is_some());
    assert!(matches!(log.append_as_leader(&mut plain(1)), Err(LogError::Offline { .. })));
    drop(log);
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: false };
    let config = Arc::new(LogConfig::resolve(&Default::default(), Default::default()).unwrap());
    let log = Log::open(&dir, TopicPartition::new("txn", 0), config, load, false, clock).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.collect_aborted_transactions(0, 4).unwrap(), vec![txn(7, 0, 3, 4)]);
}

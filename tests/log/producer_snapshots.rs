//! Producer state snapshots (`<offset>.snapshot`): written at every roll and
//! at close, read by Apache Kafka's own DumpLogSegments, and used by the
//! loader only when whole. Every damaged case reopens to the state a full
//! replay of the log gives: the producers' snapshot entries (epoch, last
//! batch, coordinator epoch, open transaction), the first unstable offset,
//! the LSO, the aborted transactions, and a retry of each idempotent
//! producer's last batch is still a duplicate.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sediment::clock::{MockClock, SharedClock};
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::producer_snapshot::{self, SnapshotEntry};
use sediment::log::record_batch::BatchBuilder;
use sediment::log::transaction_index::AbortedTxn;
use sediment::log::{LoadParams, Log, LogConfig, TopicPartition};

const NOW: i64 = 1_700_000_000_000;
const CONFIG: [(&str, &str); 2] = [("segment.bytes", "600"), ("index.interval.bytes", "100")];
/// Idempotent (not transactional) producers.
const IDEMPOTENT: [i64; 2] = [100, 101];
/// Transactional producers.
const TXN: [i64; 3] = [10, 11, 12];

fn open(dir: &Path, load: LoadParams, clock: SharedClock) -> Log {
    let config = LogConfig::resolve(&Default::default(), common::overrides(&CONFIG)).unwrap();
    Log::open(dir, TopicPartition::new("snap", 0), Arc::new(config), load, false, clock).unwrap()
}

fn fresh() -> LoadParams {
    LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true }
}

fn crashed(recovery_point: i64) -> LoadParams {
    LoadParams { recovery_point, log_start_offset: 0, clean_shutdown: false }
}

fn idempotent_batch(pid: i64, seq: i32, i: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, NOW + i as i64).producer(pid, 0, seq);
    b.append(NOW + i as i64, Some(b"k"), Some(format!("v{i}").as_bytes()));
    b.append(NOW + i as i64, Some(b"k2"), Some(format!("w{i}").as_bytes()));
    b.build()
}

/// Interleaved idempotent batches, transactional batches, COMMIT and ABORT
/// markers (coordinator epochs grow), ending with a transaction open.
/// Returns each idempotent producer's last batch, to retry.
fn write_stream(log: &mut Log, ops: usize) -> Vec<Vec<u8>> {
    let mut seqs = [0i32; 5];
    let mut last = vec![Vec::new(); IDEMPOTENT.len()];
    for i in 0..ops {
        match i % 6 {
            0 | 3 => {
                let k = i / 3 % IDEMPOTENT.len();
                let bytes = idempotent_batch(IDEMPOTENT[k], seqs[3 + k], i);
                seqs[3 + k] += 2;
                log.append_as_leader(&mut bytes.clone()).unwrap();
                last[k] = bytes;
            }
            1 | 4 => {
                let k = (i / 6 + i % 6 / 4) % TXN.len();
                let mut b = BatchBuilder::new(Compression::None, NOW).producer(TXN[k], 1, seqs[k]);
                b.transactional = true;
                b.append(NOW + i as i64, Some(b"t"), Some(format!("x{i}").as_bytes()));
                seqs[k] += 1;
                log.append_as_leader(&mut b.build()).unwrap();
            }
            _ => {
                let k = (i / 6 + i % 6 / 5 * 2) % TXN.len();
                let epoch = (i / 6) as i32;
                let marker = if i % 4 == 1 {
                    EndTransactionMarker::commit(epoch)
                } else {
                    EndTransactionMarker::abort(epoch)
                };
                // A marker for a producer with no open transaction is fine too.
                log.append_end_txn_marker(TXN[k], 1, marker).unwrap();
            }
        }
    }
    let mut b = BatchBuilder::new(Compression::None, NOW).producer(TXN[0], 1, seqs[0]);
    b.transactional = true;
    b.append(NOW, Some(b"open"), Some(b"open"));
    log.append_as_leader(&mut b.build()).unwrap();
    last
}

#[derive(Debug, PartialEq)]
struct State {
    log_end: i64,
    lso: i64,
    first_unstable: Option<i64>,
    producers: Vec<SnapshotEntry>,
    aborted: Vec<AbortedTxn>,
}

fn state(log: &Log) -> State {
    State {
        log_end: log.log_end_offset(),
        lso: log.last_stable_offset(),
        first_unstable: log.first_unstable_offset(),
        producers: log.producer_state().snapshot_entries(),
        aborted: log.collect_aborted_transactions(0, log.log_end_offset()).unwrap(),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn snapshots(dir: &Path) -> Vec<PathBuf> {
    common::files_with(dir, "snapshot")
}

/// The state of a full replay of `dir`'s log: a copy without its snapshots,
/// every segment recovered.
fn full_replay(dir: &Path, clock: &SharedClock) -> State {
    let copy = tempfile::tempdir().unwrap();
    copy_dir(dir, copy.path());
    for p in snapshots(copy.path()) {
        std::fs::remove_file(p).unwrap();
    }
    state(&open(copy.path(), crashed(0), clock.clone()))
}

/// Each idempotent producer's last batch, retried, is answered as a duplicate.
fn assert_retries_are_duplicates(log: &mut Log, last: &[Vec<u8>]) {
    let end = log.log_end_offset();
    for bytes in last {
        let info = log.append_as_leader(&mut bytes.clone()).unwrap();
        assert_eq!(info.records_count, 0, "a duplicate appends nothing");
        assert!(info.last_offset < end && info.last_offset - info.first_offset == 1);
    }
    assert_eq!(log.log_end_offset(), end);
}

fn last_segment_base(dir: &Path) -> i64 {
    let log_file = common::files_with(dir, "log").pop().unwrap();
    log_file.file_stem().unwrap().to_string_lossy().parse().unwrap()
}

/// A log closed cleanly, with snapshots at its rolls and its end.
fn closed_log(clock: &SharedClock) -> (tempfile::TempDir, Vec<Vec<u8>>, State) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), fresh(), clock.clone());
    let last = write_stream(&mut log, 90);
    let before = state(&log);
    assert!(before.first_unstable.is_some() && before.lso < before.log_end);
    assert_eq!(before.producers.len(), TXN.len() + IDEMPOTENT.len());
    assert!(before.producers.iter().filter(|e| e.coordinator_epoch > 0).count() >= 2);
    assert!(before.aborted.len() >= 5, "{:?}", before.aborted);
    log.close().unwrap();
    drop(log);
    let snaps = snapshots(dir.path());
    assert!(snaps.len() >= 4, "one per roll and one at close: {snaps:?}");
    let end = producer_snapshot::snapshot_path(dir.path(), before.log_end);
    assert_eq!(snaps.last(), Some(&end));
    (dir, last, before)
}

#[test]
fn a_clean_reopen_starts_from_the_shutdown_snapshot() {
    let clock: SharedClock = MockClock::new(NOW);
    let (dir, last, before) = closed_log(&clock);
    assert_eq!(full_replay(dir.path(), &clock), before);
    let load = LoadParams { recovery_point: before.log_end, ..fresh() };
    let mut log = open(dir.path(), load, clock.clone());
    assert_eq!(state(&log), before);
    assert_retries_are_duplicates(&mut log, &last);
    drop(log);

    // The loader really reads the snapshot: a producer only it names appears.
    let path = producer_snapshot::snapshot_path(dir.path(), before.log_end);
    let mut entries = producer_snapshot::read(&path).unwrap();
    let ghost = SnapshotEntry {
        producer_id: 999,
        epoch: 4,
        last_sequence: 7,
        last_offset: 3,
        offset_delta: 1,
        timestamp: NOW,
        coordinator_epoch: -1,
        current_txn_first_offset: -1,
    };
    entries.push(ghost);
    producer_snapshot::write(dir.path(), before.log_end, &entries).unwrap();
    let log = open(dir.path(), load, clock.clone());
    assert!(log.producer_state().snapshot_entries().contains(&ghost));
}

/// An open transaction is aged from the broker's time of its first append;
/// after a reopen (from the shutdown snapshot, which holds no start time, or
/// by a full replay) from its first batch's max timestamp.
#[test]
fn an_open_transaction_keeps_a_start_time_across_a_reopen() {
    let clock = MockClock::new(NOW + 60_000);
    let shared: SharedClock = clock.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), fresh(), shared.clone());
    log.append_as_leader(&mut idempotent_batch(IDEMPOTENT[0], 0, 0)).unwrap();
    let mut b = BatchBuilder::new(Compression::None, NOW).producer(TXN[0], 0, 0);
    b.transactional = true;
    b.append(NOW, Some(b"k"), Some(b"open"));
    b.append(NOW + 7, Some(b"k"), Some(b"open"));
    log.append_as_leader(&mut b.build()).unwrap();
    let started = |log: &Log| {
        let t = log.producer_state().oldest_ongoing_txn().expect("open");
        (t.producer_id, t.first_offset, t.start_timestamp_ms)
    };
    assert_eq!(started(&log), (TXN[0], 2, NOW + 60_000), "the broker's clock, not the batch's");
    let end = log.log_end_offset();
    log.close().unwrap();
    drop(log);
    clock.advance(1_000);
    let from_snapshot = LoadParams { recovery_point: end, ..fresh() };
    let log = open(dir.path(), from_snapshot, shared.clone());
    assert_eq!(started(&log), (TXN[0], 2, NOW + 7), "the first batch's max timestamp");
    drop(log);
    for s in snapshots(dir.path()) {
        std::fs::remove_file(s).unwrap();
    }
    let log = open(dir.path(), crashed(0), shared);
    assert_eq!(started(&log), (TXN[0], 2, NOW + 7), "the same from a full replay");
}

#[test]
fn damaged_or_missing_snapshots_fall_back_to_the_same_state() {
    let clock: SharedClock = MockClock::new(NOW);
    let (dir, last, before) = closed_log(&clock);
    let newest = |d: &Path| snapshots(d).last().cloned().unwrap();
    type Damage = fn(&Path);
    let cases: [(&str, Damage); 4] = [
        ("deleted", |p| std::fs::remove_file(p).unwrap()),
        ("truncated", |p| {
            let b = std::fs::read(p).unwrap();
            std::fs::write(p, &b[..b.len() - 5]).unwrap();
        }),
        ("crc flipped", |p| {
            let mut b = std::fs::read(p).unwrap();
            let n = b.len();
            b[n - 3] ^= 0x40;
            std::fs::write(p, &b).unwrap();
        }),
        ("every one deleted", |p| {
            for s in snapshots(p.parent().unwrap()) {
                std::fs::remove_file(s).unwrap();
            }
        }),
    ];
    let last_base = last_segment_base(dir.path());
    for (what, damage) in cases {
        for load in [LoadParams { recovery_point: before.log_end, ..fresh() }, crashed(last_base)] {
            let copy = tempfile::tempdir().unwrap();
            copy_dir(dir.path(), copy.path());
            let damaged = newest(copy.path());
            damage(&damaged);
            let mut log = open(copy.path(), load, clock.clone());
            assert_eq!(state(&log), before, "{what}, {load:?}");
            assert!(!damaged.exists() || what == "deleted", "{what}: the bad snapshot is deleted");
            assert_retries_are_duplicates(&mut log, &last);
        }
    }
}

#[test]
fn a_snapshot_newer_than_a_torn_tail_is_not_used() {
    let clock: SharedClock = MockClock::new(NOW);
    let (dir, last, before) = closed_log(&clock);
    let shutdown_snapshot = snapshots(dir.path()).pop().unwrap();
    // The last segment loses its last batch (the open transaction's) and a bit more.
    let log_file = common::files_with(dir.path(), "log").pop().unwrap();
    let len = std::fs::metadata(&log_file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&log_file).unwrap();
    f.set_len(len - 30).unwrap();
    drop(f);
    let base = last_segment_base(dir.path());
    let expected = full_replay(dir.path(), &clock);
    assert!(expected.log_end < before.log_end, "the tail was cut");
    assert_ne!(expected.producers, before.producers, "the cut changed the producer state");
    let mut log = open(dir.path(), crashed(base), clock.clone());
    assert_eq!(state(&log), expected);
    assert!(!shutdown_snapshot.exists(), "a snapshot above the log end is deleted");
    assert!(snapshots(dir.path()).iter().all(|p| *p < shutdown_snapshot));
    assert_retries_are_duplicates(&mut log, &last);
}

#[test]
fn retention_deletes_snapshots_with_their_segments() {
    let clock: SharedClock = MockClock::new(NOW);
    let (dir, _, before) = closed_log(&clock);
    let mut log =
        open(dir.path(), LoadParams { recovery_point: before.log_end, ..fresh() }, clock.clone());
    let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
    let cut = bases[bases.len() / 2];
    log.maybe_increment_log_start_offset(cut).unwrap();
    log.delete_old_segments().unwrap();
    let left: Vec<i64> = snapshots(dir.path())
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().parse().unwrap())
        .collect();
    assert!(left.iter().all(|&o| o >= cut), "{left:?} below {cut}");
    assert!(left.contains(&before.log_end));
}

/// Apache Kafka 4.1.2's DumpLogSegments reads a snapshot we wrote and prints
/// the producers we hold.
#[test]
fn kafka_dump_log_reads_our_snapshot() {
    let clock: SharedClock = MockClock::new(NOW);
    let (dir, _, before) = closed_log(&clock);
    let path = producer_snapshot::snapshot_path(dir.path(), before.log_end);
    let out = common::kafka_dump_log(&[&path], &[]);
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("producerId:")).collect();
    assert_eq!(lines.len(), before.producers.len(), "{out}");
    for e in &before.producers {
        let txn = match e.current_txn_first_offset {
            -1 => "OptionalLong.empty".to_string(),
            o => format!("OptionalLong[{o}]"),
        };
        let mut expected = format!(
            "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {txn} lastTimestamp: {} ",
            e.producer_id, e.epoch, e.coordinator_epoch, e.timestamp
        );
        if e.last_offset >= 0 {
            expected.push_str(&format!(
                "firstSequence: {} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}",
                e.last_sequence - e.offset_delta,
                e.last_sequence,
                e.last_offset,
                e.offset_delta,
                e.timestamp
            ));
        }
        assert!(lines.iter().any(|l| l.trim_end() == expected.trim_end()), "{expected}\n{out}");
    }
    assert!(before.producers.iter().any(|e| e.current_txn_first_offset >= 0));
    assert!(before.producers.iter().any(|e| e.last_offset >= 0 && e.offset_delta == 1));

    // Our dump tool prints the same lines; a flipped bit is a problem to it.
    let opts = sediment::tools::dump_log::DumpOptions {
        print_data_log: false,
        deep_iteration: false,
        max_batch_size: 1 << 20,
    };
    let mut ours = String::new();
    let problems =
        sediment::tools::dump_log::dump_files(std::slice::from_ref(&path), opts, &mut ours)
            .unwrap();
    assert_eq!(problems, 0);
    let producer_lines = |s: &str| -> Vec<String> {
        s.lines().filter(|l| l.starts_with("producerId:")).map(|l| l.trim_end().into()).collect()
    };
    assert_eq!(producer_lines(&ours), producer_lines(&out));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[12] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let mut damaged = String::new();
    assert_eq!(sediment::tools::dump_log::dump_files(&[path], opts, &mut damaged).unwrap(), 1);
    assert!(damaged.contains("CRC"), "{damaged}");
}

mod model {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// An idempotent batch of producer `IDEMPOTENT[k]`.
        Idempotent(usize),
        /// A transactional batch of producer `TXN[k]`.
        TxnData(usize),
        /// A marker for `TXN[k]` (commit or abort).
        Marker(usize, bool),
        Roll,
        /// Close cleanly (or crash) and reopen; damage the newest snapshot first.
        Reopen {
            clean: bool,
            damage: u8,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..IDEMPOTENT.len()).prop_map(Op::Idempotent),
            4 => (0..TXN.len()).prop_map(Op::TxnData),
            3 => ((0..TXN.len()), any::<bool>()).prop_map(|(k, c)| Op::Marker(k, c)),
            1 => Just(Op::Roll),
            1 => (any::<bool>(), 0..4u8).prop_map(|(clean, damage)| Op::Reopen { clean, damage }),
        ]
    }

    fn damage_newest(dir: &Path, how: u8) {
        let Some(p) = snapshots(dir).pop() else { return };
        let mut b = std::fs::read(&p).unwrap();
        match how {
            1 => std::fs::remove_file(&p).unwrap(),
            2 => std::fs::write(&p, &b[..b.len() / 2]).unwrap(),
            3 => {
                let n = b.len();
                b[n - 1] ^= 1;
                std::fs::write(&p, &b).unwrap();
            }
            _ => {}
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        /// After any run of appends, rolls, clean and unclean restarts and
        /// damaged snapshots, the reopened state is the full replay's, and
        /// the last idempotent batch retried is a duplicate.
        #[test]
        fn reopened_state_is_the_full_replay(ops in proptest::collection::vec(op(), 1..60)) {
            let clock: SharedClock = MockClock::new(NOW);
            let dir = tempfile::tempdir().unwrap();
            let mut log = open(dir.path(), fresh(), clock.clone());
            let mut seqs = [0i32; 5];
            let mut coordinator_epoch = 0;
            let mut last: Option<Vec<u8>> = None;
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Idempotent(k) => {
                        let bytes = idempotent_batch(IDEMPOTENT[k], seqs[3 + k], i);
                        seqs[3 + k] += 2;
                        log.append_as_leader(&mut bytes.clone()).unwrap();
                        last = Some(bytes);
                    }
                    Op::TxnData(k) => {
                        let mut b = BatchBuilder::new(Compression::None, NOW).producer(TXN[k], 1, seqs[k]);
                        b.transactional = true;
                        b.append(NOW + i as i64, Some(b"t"), Some(b"x"));
                        seqs[k] += 1;
                        log.append_as_leader(&mut b.build()).unwrap();
                    }
                    Op::Marker(k, commit) => {
                        coordinator_epoch += 1;
                        let m = if commit {
                            EndTransactionMarker::commit(coordinator_epoch)
                        } else {
                            EndTransactionMarker::abort(coordinator_epoch)
                        };
                        log.append_end_txn_marker(TXN[k], 1, m).unwrap();
                    }
                    Op::Roll => log.roll_if_not_empty().unwrap(),
                    Op::Reopen { clean, damage } => {
                        let before = state(&log);
                        let load = if clean {
                            log.close().unwrap();
                            LoadParams { recovery_point: before.log_end, ..fresh() }
                        } else {
                            crashed(log.recovery_point())
                        };
                        drop(log);
                        damage_newest(dir.path(), damage);
                        log = open(dir.path(), load, clock.clone());
                        prop_assert_eq!(&state(&log), &before);
                        prop_assert_eq!(&full_replay(dir.path(), &clock), &before);
                        if let Some(bytes) = &last {
                            assert_retries_are_duplicates(&mut log, std::slice::from_ref(bytes));
                        }
                    }
                }
            }
        }
    }
}

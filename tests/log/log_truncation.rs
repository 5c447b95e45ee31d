//! Leader epochs and truncation in the log layer (`leader_epoch_cache`,
//! `unified_log/truncate.rs`): what a follower's log does when it diverged
//! from its leader's, checked on the files, after a reopen, and after a
//! crash at each step of the truncation (fail point `log-truncate-crash`).
//!
//! The log built here: idempotent producer 7 writes a batch of two records
//! per append under leader epochs 0, then 2 (from offset 10), then 5 (from
//! offset 20), over several segments, with producer 9's aborted transaction
//! (data at 12, marker at 13) in between and producer 11's open one at 22;
//! then it is cut at 16, inside epoch 2.

use std::path::Path;
use std::sync::Arc;

use sediment::clock::MockClock;
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::leader_epoch_cache::{LeaderEpochFileCache, LEADER_EPOCH_CHECKPOINT};
use sediment::log::record_batch::BatchBuilder;
use sediment::log::unified_log::TRUNCATE_CRASH_POINT;
use sediment::log::{FetchIsolation, LoadParams, Log, LogConfig, TopicPartition};

use crate::common::{files_with, kafka_dump_log, read_all};

const NOW: i64 = 1_700_000_000_000;
const CUT: i64 = 16;

fn open(dir: &Path, recovery_point: i64, clean_shutdown: bool) -> Log {
    let mut overrides = std::collections::BTreeMap::new();
    // A segment every few batches, so the cut falls in the middle segment.
    overrides.insert("segment.bytes".to_string(), "400".to_string());
    let config = Arc::new(LogConfig::resolve(&Default::default(), overrides).unwrap());
    let load = LoadParams { recovery_point, log_start_offset: 0, clean_shutdown };
    Log::open(dir, TopicPartition::new("t", 0), config, load, false, MockClock::new(NOW)).unwrap()
}

fn batch(pid: i64, seq: i32, transactional: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, NOW).producer(pid, 0, seq);
    b.transactional = transactional;
    b.append(NOW, Some(format!("k{pid}-{seq}").as_bytes()), Some(b"v"));
    if !transactional {
        b.append(NOW, Some(format!("k{pid}-{seq}b").as_bytes()), Some(b"v"));
    }
    b.build()
}

/// Producer 7's appends up to offset `until`, then the other producers, as
/// the module doc lays out; returns producer 7's next sequence.
fn build(log: &mut Log) -> i32 {
    let mut seq = 0;
    let mut seven = |log: &mut Log, until: i64| {
        while log.log_end_offset() < until {
            log.append_as_leader(&mut batch(7, seq, false)).unwrap();
            seq += 2;
        }
    };
    seven(log, 10);
    log.become_leader(2).unwrap();
    seven(log, 12);
    log.append_as_leader(&mut batch(9, 0, true)).unwrap();
    log.append_end_txn_marker(9, 0, EndTransactionMarker::abort(0)).unwrap();
    seven(log, 20);
    log.become_leader(5).unwrap();
    seven(log, 22);
    log.append_as_leader(&mut batch(11, 0, true)).unwrap();
    seven(log, 30);
    seq
}

fn epochs(log: &Log) -> Vec<(i32, i64)> {
    log.leader_epoch_cache().entries().iter().map(|e| (e.epoch, e.start_offset)).collect()
}

/// What the log holds once cut at `CUT`, however it got there.
fn assert_cut(log: &mut Log, what: &str) {
    assert_eq!(log.log_end_offset(), CUT, "{what}: log end");
    let offsets: Vec<i64> = read_all(log, 0, 1 << 20).iter().map(|r| r.offset).collect();
    assert_eq!(offsets.last(), Some(&(CUT - 1)), "{what}: last record");
    assert!(offsets.iter().all(|&o| o < CUT), "{what}: {offsets:?}");
    assert_eq!(epochs(log), vec![(0, 0), (2, 10)], "{what}: epochs");
    assert_eq!(log.end_offset_for_epoch(2), Some((2, CUT)), "{what}");
    assert_eq!(log.end_offset_for_epoch(5), None, "{what}: epoch 5 is gone");
    // Producer 11's transaction was cut away: nothing is open.
    assert_eq!(log.first_unstable_offset(), None, "{what}: open transaction");
    // Producer 9's abort (marker at 13) is still indexed for read_committed.
    let aborted = log.collect_aborted_transactions(0, CUT).unwrap();
    assert_eq!(aborted.iter().map(|t| t.first_offset).collect::<Vec<_>>(), vec![12], "{what}");
    let file = std::fs::read_to_string(log.dir().join(LEADER_EPOCH_CHECKPOINT)).unwrap();
    assert_eq!(file, "0\n2\n0 0\n2 10\n", "{what}: checkpoint file");
}

/// Producer 7 resumes after the cut with the sequence of its last kept
/// batch: accepted (its state was rebuilt to the cut), and one of the
/// removed batches' sequences is refused as out of order.
fn assert_producer_resumes(log: &mut Log, what: &str) {
    // Producer 7's batches below the cut: offsets 0..12 (sequences 0 to
    // 11) and 14..16 (12 and 13), two records each.
    let kept_next_seq = 14;
    let gap = log.append_as_leader(&mut batch(7, kept_next_seq + 4, false));
    assert!(gap.is_err(), "{what}: a sequence from the removed part went in: {gap:?}");
    let info = log.append_as_leader(&mut batch(7, kept_next_seq, false)).unwrap();
    assert_eq!(info.first_offset, CUT, "{what}");
}

#[test]
fn truncate_to_cuts_files_epochs_transactions_and_producers() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), 0, true);
    build(&mut log);
    assert_eq!(epochs(&log), vec![(0, 0), (2, 10), (5, 20)]);
    assert!(log.segments().len() >= 4, "several segments");
    assert_eq!(log.first_unstable_offset(), Some(22));
    assert!(log.truncate_to(CUT).unwrap());
    assert!(!log.truncate_to(CUT).unwrap(), "a second cut at the end changes nothing");
    assert_cut(&mut log, "after the cut");
    // The same after a clean reopen, and the log goes on.
    log.close().unwrap();
    drop(log);
    let mut log = open(dir.path(), CUT, true);
    assert_cut(&mut log, "reopened");
    assert_producer_resumes(&mut log, "reopened");
    assert_eq!(epochs(&log), vec![(0, 0), (2, 10)], "epoch 2 goes on");
    log.close().unwrap();
    // Kafka's own reader takes the cut files and their indexes.
    let mut files = files_with(dir.path(), "log");
    files.extend(files_with(dir.path(), "index"));
    files.extend(files_with(dir.path(), "txnindex"));
    let dump = kafka_dump_log(&files, &["--deep-iteration"]);
    let batches: Vec<&str> = dump.lines().filter(|l| l.starts_with("baseOffset:")).collect();
    let last = batches.last().copied().unwrap_or_default();
    assert!(
        last.starts_with("baseOffset: 16 lastOffset: 17")
            && last.contains("partitionLeaderEpoch: 2"),
        "the last batch is the one appended after the cut: {last}"
    );
    assert!(dump.contains("producerId: 9 firstOffset: 12 lastOffset: 13"), "{dump}");
    assert!(!dump.contains("Mismatches"), "{dump}");
}

#[test]
fn a_cut_inside_a_batch_ends_the_log_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), 0, true);
    build(&mut log);
    // Offsets 16 and 17 are one batch of producer 7.
    assert!(log.truncate_to(17).unwrap());
    assert_eq!(log.log_end_offset(), 16);
}

#[test]
fn a_crash_after_each_step_reopens_to_a_prefix_that_truncates_the_same() {
    for step in ["1", "2", "3"] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), 0, true);
        build(&mut log);
        log.flush().unwrap();
        let recovery_point = log.recovery_point();
        {
            let scope = format!("{}:{step}", log.dir().display());
            let _armed = sediment::failpoint::arm(TRUNCATE_CRASH_POINT, &scope);
            let crashed = log.truncate_to(CUT);
            assert!(crashed.is_err(), "step {step}: the fail point stopped it");
            assert!(log.failure().is_some(), "step {step}: a log stopped halfway takes no writes");
        }
        // No close: the files as the crash left them, the checkpoint from before.
        drop(log);
        let mut log = open(dir.path(), recovery_point, false);
        let end = log.log_end_offset();
        assert!(end >= CUT, "step {step}: the reopened log lost kept records (end {end})");
        let records = read_all(&log, 0, 1 << 20);
        let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "step {step}: {offsets:?}");
        assert!(
            epochs(&log).iter().all(|&(_, start)| start < end),
            "step {step}: an epoch past the end: {:?}",
            epochs(&log)
        );
        // The follower fetches again, finds the same divergence and cuts again.
        log.truncate_to(CUT).unwrap();
        assert_cut(&mut log, &format!("crash after step {step}, cut again"));
        assert_producer_resumes(&mut log, &format!("crash after step {step}"));
    }
}

#[test]
fn a_missing_or_damaged_checkpoint_is_rebuilt_from_the_batches() {
    for damage in ["", "0\n2\n2 10\n0 0\n"] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), 0, true);
        build(&mut log);
        log.close().unwrap();
        drop(log);
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
        if damage.is_empty() {
            std::fs::remove_file(&path).unwrap();
        } else {
            std::fs::write(&path, damage).unwrap();
        }
        let log = open(dir.path(), 30, true);
        assert_eq!(epochs(&log), vec![(0, 0), (2, 10), (5, 20)], "damage {damage:?}");
        let back = LeaderEpochFileCache::read(dir.path()).unwrap().unwrap();
        assert_eq!(back.entries(), log.leader_epoch_cache().entries(), "written back");
        assert_eq!(log.leader_epoch(), 5, "the log leads on at its latest epoch");
    }
}

#[test]
fn truncate_fully_starts_an_empty_log_at_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), 0, true);
    build(&mut log);
    log.truncate_fully_and_start_at(100).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 100));
    assert!(epochs(&log).is_empty());
    assert_eq!(log.segments().len(), 1);
    assert!(read_all(&log, 100, 1 << 20).is_empty());
    // A producer starts afresh: any sequence of a new producer epoch is
    // its first, and the log takes it at 100.
    let info = log.append_as_leader(&mut batch(7, 0, false)).unwrap();
    assert_eq!(info.first_offset, 100);
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), 102, true);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 102));
    let read = log.read_region_with_isolation(100, 1 << 20, true, FetchIsolation::HighWatermark);
    assert!(read.unwrap().records.is_some());
}

/// A follower's truncation and the scheduler both write the dir's
/// checkpoint files: written at once, one writer's rename found the shared
/// `<file>.tmp` gone (ENOENT) and took the log dir offline, halting a
/// broker in the cluster's failover test. They take turns now.
#[test]
fn truncations_and_the_scheduler_write_checkpoints_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    let logs = Arc::new(crate::common::manager(dir.path(), &[], MockClock::new(NOW)));
    logs.create_topic("t", 1, Default::default()).unwrap();
    let tp = TopicPartition::new("t", 0);
    let truncating = std::thread::spawn({
        let logs = Arc::clone(&logs);
        move || {
            for offset in 0..200 {
                logs.truncate_fully_and_start_at(&tp, offset, None).unwrap();
            }
        }
    });
    for _ in 0..200 {
        logs.checkpoint_all().unwrap();
    }
    truncating.join().expect("no checkpoint write failed");
    assert!(logs.offline_dirs().is_empty(), "{:?}", logs.offline_dirs());
}

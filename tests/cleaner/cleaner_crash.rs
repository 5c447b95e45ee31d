//! Crash safety of the cleaner's swap. For every step of the protocol the
//! files are left exactly as a crash there would leave them (the clean is
//! stopped at that step; the two "midway" states rename one more file by hand,
//! the way the protocol renames them), the log is reopened with `Log::open`,
//! and then:
//! * no `.cleaned`, `.swap` or `.deleted` file is left;
//! * the log holds either the state before the clean or the state with the
//!   first group swapped in (which one is fixed by the step), nothing
//!   duplicated, every batch valid, every key's latest value readable;
//! * a full clean afterwards gives exactly what an uninterrupted clean gives.
//!
//! The first group is made of segments whose records are all superseded, so
//! its output is only the offset fence; recovery must still replace every one
//! of its segments.
//!
//! A child process is also SIGKILLed at random moments of throttled cleans.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::common::{
    all_batches, append, clean_fully, clean_once, cleaner, open_log, read_all, stray_files, Rec,
};
use sediment::cleaner::{
    cleanable_offsets, CancellationToken, Cleaner, CleanerConfig, CleanerError, CrashPoint,
    LogToClean, Throttler,
};
use sediment::clock::{self, Clock, MockClock, SharedClock};
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::record_batch::BatchBuilder;
use sediment::log::transaction_index::AbortedTxn;
use sediment::log::{LoadParams, Log, LogConfig, SwapStep, TopicPartition};

const NOW: i64 = 1_700_000_000_000;
const CONFIG: [(&str, &str); 4] = [
    ("cleanup.policy", "compact"),
    ("segment.bytes", "1000"),
    ("index.interval.bytes", "50"),
    ("file.delete.delay.ms", "0"),
];

/// 60 one-record batches over keys k0..k4, two per segment; offset 58 is a tombstone.
fn build(dir: &Path, clock: SharedClock) -> Vec<Rec> {
    let mut log = open_log(dir, "crash", &CONFIG, clock);
    for i in 0..60i64 {
        let key = format!("k{}", i % 5);
        let value = format!("value-{i}");
        let value = if i == 58 { None } else { Some(value.as_bytes()) };
        let codec = if i % 3 == 0 { Compression::Lz4 } else { Compression::None };
        append(&mut log, codec, &[(NOW - 1000 + i, Some(key.as_bytes()), value)]);
        if i % 2 == 1 {
            log.roll_if_not_empty().unwrap();
        }
    }
    read_all(&log, 0, 1 << 20)
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn latest_per_key(records: &[Rec]) -> BTreeMap<Vec<u8>, Rec> {
    records.iter().map(|r| (r.key.clone().unwrap(), r.clone())).collect()
}

fn check_invariants(log: &Log, original: &[Rec]) -> Vec<Rec> {
    assert!(stray_files(log.dir()).is_empty(), "left over: {:?}", stray_files(log.dir()));
    all_batches(log); // every CRC
    let records = read_all(log, 0, 1 << 20);
    assert!(
        records.windows(2).all(|w| w[0].offset < w[1].offset),
        "offsets strictly increase, nothing duplicated"
    );
    for r in &records {
        assert!(original.contains(r), "{r:?} was never written");
    }
    assert_eq!(
        latest_per_key(&records),
        latest_per_key(original),
        "every key's latest value is readable"
    );
    assert_eq!(log.log_end_offset(), 60);
    records
}

/// Stop a clean at `point`, optionally disturb the files as a crash midway through
/// the next step would, reopen, and check; `committed` says which state to expect.
fn crash_at(point: CrashPoint, midway: Option<fn(&Path)>, committed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let reference = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let original = build(dir.path(), clock.clone());
    copy_dir(dir.path(), reference.path());

    // What an uninterrupted clean gives, and where its first group ends.
    let ref_log = RwLock::new(open_log(reference.path(), "crash", &CONFIG, clock.clone()));
    let mut c = cleaner(1 << 20, clock.clone());
    clean_fully(&mut c, &ref_log, 0, clock.now_ms());
    let ref_log = ref_log.into_inner();
    let fully_cleaned = read_all(&ref_log, 0, 1 << 20);
    let bases: Vec<i64> = ref_log.segments().map(|s| s.base_offset()).collect();
    let first_group_end = bases[1];
    assert!(
        first_group_end >= 6,
        "the first group merges several segments (ends at {first_group_end})"
    );
    assert!(
        fully_cleaned.iter().all(|r| r.offset >= first_group_end),
        "the first group keeps no record, only its fence"
    );

    let log = RwLock::new(open_log(dir.path(), "crash", &CONFIG, clock.clone()));
    let mut c = cleaner(1 << 20, clock.clone());
    // Armed for this log's directory only: other tests' cleans go on.
    let armed =
        sediment::failpoint::arm(point.failpoint(), &log.read().dir().display().to_string());
    let to_clean = {
        let l = log.read();
        let (d, u) = cleanable_offsets(&l, None, None, clock.now_ms());
        LogToClean::new(&l, d, u)
    };
    match c.clean(&log, &to_clean, clock.now_ms(), &CancellationToken::new()) {
        Err(CleanerError::InjectedCrash(p)) => assert_eq!(p, point),
        other => panic!("expected the injected crash, got {other:?}"),
    }
    drop(armed);
    drop(log); // the process is gone: nothing more happens to these files
    if let Some(disturb) = midway {
        disturb(dir.path());
    }

    let reopened = open_log(dir.path(), "crash", &CONFIG, clock.clone());
    let records = check_invariants(&reopened, &original);
    let expected: Vec<Rec> = if committed {
        original.iter().filter(|r| r.offset >= first_group_end).cloned().collect()
    } else {
        original.clone()
    };
    assert_eq!(records, expected, "state after recovery (committed: {committed})");

    // The recovered log cleans to the same result as an uninterrupted clean.
    let reopened = RwLock::new(reopened);
    let mut c = cleaner(1 << 20, clock.clone());
    clean_fully(&mut c, &reopened, 0, clock.now_ms());
    assert_eq!(read_all(&reopened.read(), 0, 1 << 20), fully_cleaned);
}

fn rename(dir: &Path, from: &str, to: &str) {
    std::fs::rename(dir.join(from), dir.join(to)).unwrap();
}

#[test]
fn crash_after_cleaned_files_are_written_rolls_back() {
    crash_at(CrashPoint::CleanedWritten, None, false);
}

#[test]
fn crash_midway_through_renaming_to_swap_rolls_back() {
    // Step 2 renames the log file last: `.index.swap` next to `.log.cleaned`.
    crash_at(
        CrashPoint::CleanedWritten,
        Some(|d| {
            rename(d, "00000000000000000000.index.cleaned", "00000000000000000000.index.swap")
        }),
        false,
    );
}

#[test]
fn a_complete_swap_log_next_to_a_cleaned_index_commits() {
    // Not a state step 2 leaves any more (its log goes last), but one Kafka's
    // order (log first) leaves: the `.log.swap` commits, its index is rebuilt.
    crash_at(
        CrashPoint::CleanedWritten,
        Some(|d| rename(d, "00000000000000000000.log.cleaned", "00000000000000000000.log.swap")),
        true,
    );
}

#[test]
fn crash_after_swap_rename_commits() {
    crash_at(CrashPoint::Swap(SwapStep::SwapRenamed), None, true);
}

#[test]
fn crash_midway_through_renaming_old_segments_to_deleted_commits() {
    crash_at(CrashPoint::Swap(SwapStep::FirstDeletedRenamed), None, true);
}

#[test]
fn crash_after_old_segments_are_deleted_commits() {
    crash_at(CrashPoint::Swap(SwapStep::DeletedRenamed), None, true);
}

#[test]
fn crash_midway_through_stripping_swap_commits() {
    // Step 5 strips the log file first: `.log` next to `.index.swap`.
    crash_at(
        CrashPoint::Swap(SwapStep::DeletedRenamed),
        Some(|d| rename(d, "00000000000000000000.log.swap", "00000000000000000000.log")),
        true,
    );
}

#[test]
fn crash_after_swap_is_stripped_commits() {
    crash_at(CrashPoint::Swap(SwapStep::SwapStripped), None, true);
}

#[test]
fn aborted_clean_deletes_its_cleaned_output() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let original = build(dir.path(), clock.clone());
    let log = RwLock::new(open_log(dir.path(), "crash", &CONFIG, clock.clone()));
    let mut c = cleaner(1 << 20, clock.clone());
    let cancel = CancellationToken::new();
    cancel.cancel();
    let to_clean = {
        let l = log.read();
        LogToClean::new(&l, 0, l.active_segment().base_offset())
    };
    assert!(matches!(c.clean(&log, &to_clean, NOW, &cancel), Err(CleanerError::Aborted { .. })));
    assert!(stray_files(dir.path()).is_empty(), "{:?}", stray_files(dir.path()));
    assert_eq!(read_all(&log.read(), 0, 1 << 20), original, "an aborted clean changes nothing");
    // The same cleaner runs the next clean normally.
    clean_once(&mut c, &log, 0, NOW);
}

// ---- transaction indexes through the swap ----

/// 30 segments of two batches each; every third holds a transaction of
/// producer 7 and its ABORT marker, so it has a `.txnindex`. Returns the
/// aborted transactions of the log.
fn build_with_aborts(dir: &Path, clock: SharedClock) -> Vec<AbortedTxn> {
    let mut log = open_log(dir, "crash", &CONFIG, clock);
    for i in 0..30i32 {
        let key = format!("k{}", i % 5);
        if i % 3 == 0 {
            let mut b = BatchBuilder::new(Compression::None, NOW - 1000).producer(7, 0, i / 3);
            b.transactional = true;
            b.append(NOW - 1000, Some(key.as_bytes()), Some(b"aborted"));
            log.append_as_leader(&mut b.build()).unwrap();
            log.append_end_txn_marker(7, 0, EndTransactionMarker::abort(0)).unwrap();
        } else {
            for v in ["a", "b"] {
                append(
                    &mut log,
                    Compression::None,
                    &[(NOW - 1000, Some(key.as_bytes()), Some(v.as_bytes()))],
                );
            }
        }
        log.roll_if_not_empty().unwrap();
    }
    log.collect_aborted_transactions(0, log.log_end_offset()).unwrap()
}

/// Reopen without recovering anything (a clean shutdown), so the `.txnindex`
/// files are what the swap left, not rebuilt.
fn reopen_as_left(dir: &Path, clock: SharedClock) -> Log {
    let config = LogConfig::resolve(&Default::default(), common::overrides(&CONFIG)).unwrap();
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    Log::open(dir, TopicPartition::new("crash", 0), Arc::new(config), load, false, clock).unwrap()
}

/// Stop a clean of a log with aborted transactions at `point`, disturb the
/// files as a crash midway through the next step would, reopen without
/// recovery: no leftover and no orphaned `.txnindex`, and every aborted
/// transaction still listed, before and after a full clean.
fn crash_with_aborts_at(point: CrashPoint, midway: Option<fn(&Path)>, committed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let aborted = build_with_aborts(dir.path(), clock.clone());
    assert_eq!(aborted.len(), 10);
    let log = RwLock::new(reopen_as_left(dir.path(), clock.clone()));
    let segments_before = log.read().segments().len();
    let mut c = cleaner(1 << 20, clock.clone());
    // Armed for this log's directory only: other tests' cleans go on.
    let armed =
        sediment::failpoint::arm(point.failpoint(), &log.read().dir().display().to_string());
    let to_clean = {
        let l = log.read();
        let (d, u) = cleanable_offsets(&l, None, None, clock.now_ms());
        LogToClean::new(&l, d, u)
    };
    match c.clean(&log, &to_clean, clock.now_ms(), &CancellationToken::new()) {
        Err(CleanerError::InjectedCrash(p)) => assert_eq!(p, point),
        other => panic!("expected the injected crash, got {other:?}"),
    }
    drop(armed);
    drop(log);
    if let Some(disturb) = midway {
        disturb(dir.path());
    }
    let reopened = reopen_as_left(dir.path(), clock.clone());
    assert!(stray_files(dir.path()).is_empty(), "left over: {:?}", stray_files(dir.path()));
    assert_eq!(reopened.segments().len() < segments_before, committed, "committed: {committed}");
    for index in common::files_with(dir.path(), "txnindex") {
        assert!(index.with_extension("log").exists(), "orphaned {}", index.display());
    }
    assert_eq!(reopened.collect_aborted_transactions(0, 60).unwrap(), aborted);
    let reopened = RwLock::new(reopened);
    clean_fully(&mut cleaner(1 << 20, clock.clone()), &reopened, 0, clock.now_ms());
    // The clean removed every aborted record; an entry stays only while its
    // marker stays for a batch of its transaction (here the producer's last
    // data batch, kept empty for its sequence), unchanged.
    let l = reopened.read();
    let left = l.collect_aborted_transactions(0, 60).unwrap();
    assert!(left.iter().all(|t| aborted.contains(t)), "{left:?}");
    for (h, recs) in all_batches(&l) {
        if h.producer_id == 7 && !h.is_control() {
            assert!(recs.is_empty(), "aborted records left at {}", h.base_offset);
            assert!(left.iter().any(|t| (t.first_offset..=t.last_offset).contains(&h.base_offset)));
        }
    }
}

#[test]
fn txn_indexes_survive_every_step_of_the_swap() {
    crash_with_aborts_at(CrashPoint::CleanedWritten, None, false);
    crash_with_aborts_at(
        CrashPoint::CleanedWritten,
        Some(|d| {
            for ext in ["txnindex", "index", "timeindex"] {
                let name = format!("00000000000000000000.{ext}");
                rename(d, &format!("{name}.cleaned"), &format!("{name}.swap"));
            }
        }),
        false,
    );
    crash_with_aborts_at(CrashPoint::Swap(SwapStep::SwapRenamed), None, true);
    // Step 4 renames an old segment's log first: its `.txnindex` is still there.
    crash_with_aborts_at(
        CrashPoint::Swap(SwapStep::SwapRenamed),
        Some(|d| rename(d, "00000000000000000000.log", "00000000000000000000.log.deleted")),
        true,
    );
    crash_with_aborts_at(CrashPoint::Swap(SwapStep::FirstDeletedRenamed), None, true);
    crash_with_aborts_at(CrashPoint::Swap(SwapStep::DeletedRenamed), None, true);
    // Step 5 strips the log first: the `.txnindex.swap` beside it is stripped
    // too (it cannot be rebuilt from the segment alone).
    crash_with_aborts_at(
        CrashPoint::Swap(SwapStep::DeletedRenamed),
        Some(|d| rename(d, "00000000000000000000.log.swap", "00000000000000000000.log")),
        true,
    );
    crash_with_aborts_at(CrashPoint::Swap(SwapStep::SwapStripped), None, true);
}

// ---- SIGKILL mid-clean ----

const CHILD_ENV: &str = "SEDIMENT_CLEANER_CRASH_CHILD_DIR";
const CHILD_CONFIG: [(&str, &str); 4] = [
    ("cleanup.policy", "compact"),
    ("segment.bytes", "24000"),
    ("index.interval.bytes", "400"),
    ("file.delete.delay.ms", "0"),
];

fn build_big(dir: &Path) -> Vec<Rec> {
    let mut log = open_log(dir, "kill", &CHILD_CONFIG, clock::system());
    for i in 0..4000i64 {
        let key = format!("key-{}", (i * 7919) % 700);
        let value = format!("value-{i}-{}", "x".repeat((i % 40) as usize));
        append(
            &mut log,
            if i % 4 == 0 { Compression::Zstd } else { Compression::None },
            &[(NOW + i, Some(key.as_bytes()), Some(value.as_bytes()))],
        );
        if i % 60 == 59 {
            log.roll_if_not_empty().unwrap();
        }
    }
    log.roll_if_not_empty().unwrap();
    read_all(&log, 0, 1 << 20)
}

/// Runs only as the child of `sigkill_mid_clean_recovers`: cleans the log in
/// the given dir with a slow throttle and a small map, printing as it goes.
#[test]
#[ignore = "child process of the SIGKILL test"]
fn crash_child_cleaner() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let clock = clock::system();
    let log = RwLock::new(open_log(Path::new(&dir), "kill", &CHILD_CONFIG, clock.clone()));
    let throttler = Arc::new(Throttler::new(
        400_000.0,
        50,
        clock.clone(),
        sediment::cleaner::throttler::thread_sleeper(),
    ));
    let config = CleanerConfig {
        dedupe_buffer_size: 24 * 400,
        io_buffer_size: 4096,
        ..CleanerConfig::default()
    };
    let mut c = Cleaner::new(0, config, throttler, clock.clone()).unwrap();
    println!("cleaning");
    let mut checkpoint = 0;
    loop {
        let result = clean_once(&mut c, &log, checkpoint, clock.now_ms());
        println!("cleaned to {}", result.end_offset);
        if result.end_offset == checkpoint {
            break;
        }
        checkpoint = result.end_offset;
    }
    println!("done");
}

#[test]
fn sigkill_mid_clean_recovers() {
    let template = tempfile::tempdir().unwrap();
    let original = build_big(template.path());
    for (round, delay_ms) in [150u64, 1100, 200].into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(template.path(), dir.path());
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "cleaner_crash::crash_child_cleaner",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The harness prints "test cleaner_crash::crash_child_cleaner ... " on
        // the same line. A child that never got there (a wrong test name)
        // would make the kill below test nothing.
        let started = lines.by_ref().any(|line| line.unwrap().ends_with("cleaning"));
        assert!(started, "round {round}: the child never started cleaning");
        if round == 2 {
            // The last kill lands in a later pass, after a first clean completed.
            let cleaned = lines.by_ref().any(|line| line.unwrap().starts_with("cleaned to"));
            assert!(cleaned, "round {round}: the child's first clean never completed");
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let progress: Vec<String> = lines.map_while(Result::ok).collect();
        assert!(
            !progress.iter().any(|l| l.contains("done")),
            "round {round}: the child finished before the kill; slow it down ({progress:?})"
        );

        let log = open_log(dir.path(), "kill", &CHILD_CONFIG, clock::system());
        let records = read_all(&log, 0, 1 << 20);
        assert!(stray_files(dir.path()).is_empty(), "{:?}", stray_files(dir.path()));
        all_batches(&log);
        assert!(records.windows(2).all(|w| w[0].offset < w[1].offset));
        for r in &records {
            assert!(
                original
                    .binary_search_by_key(&r.offset, |o| o.offset)
                    .is_ok_and(|i| &original[i] == r),
                "{r:?} was never written"
            );
        }
        assert_eq!(
            latest_per_key(&records),
            latest_per_key(&original),
            "round {round}: every key's latest value"
        );
        assert_eq!(log.log_end_offset(), 4000);
    }
}

//! A clean touches only what changed: a group of segments from which it drops
//! nothing, in which it stamps no horizon and rewrites no batch, keeps its
//! files (same inode, bytes and mtime) and gets no `.cleaned` or `.swap`; a
//! group that changes only after some unchanged batches starts its cleaned
//! segment with a copy of them.
//! * A changelog: a stable key set cleaned once, then one hot key updated:
//!   the next clean rewrites only the segment with the superseded record.
//! * A group whose first change comes late: the cleaned segment equals an
//!   uninterrupted clean, its indexes pass Kafka's DumpLogSegments, and a
//!   crash before and after its swap recovers (swap steps 1 and 3).
//! * Property: many rounds of updates to a few hot keys over a stable key
//!   set, cleaned with a tiny map, equal the "latest value per key" oracle
//!   after every clean, and every segment kept is untouched on disk; a clean
//!   with nothing new keeps every segment.

use crate::common;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use parking_lot::RwLock;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

use crate::common::{
    all_batches, append, clean_fully, clean_once, cleaner, open_log, read_all, stray_files, Rec,
};
use sediment::cleaner::{
    cleanable_offsets, CancellationToken, CleanResult, CleanerError, CrashPoint, LogToClean,
};
use sediment::clock::{Clock, MockClock, SharedClock};
use sediment::log::compression::Compression;
use sediment::log::{Log, SwapStep};

const NOW: i64 = 1_700_000_000_000;
const CONFIG: [(&str, &str); 4] = [
    ("cleanup.policy", "compact"),
    ("segment.bytes", "1200"),
    ("index.interval.bytes", "100"),
    ("file.delete.delay.ms", "0"),
];

/// Inode, mtime (ns) and bytes of every segment's `.log`, by base offset.
fn files(log: &Log) -> HashMap<i64, (u64, i128, Vec<u8>)> {
    log.segments()
        .map(|s| {
            let meta = std::fs::metadata(s.log_path()).unwrap();
            let mtime = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
            (s.base_offset(), (meta.ino(), mtime, std::fs::read(s.log_path()).unwrap()))
        })
        .collect()
}

/// Segments whose `.log` is the same file as before; asserts such a file's
/// bytes and mtime are unchanged too.
fn same_files(before: &HashMap<i64, (u64, i128, Vec<u8>)>, log: &Log) -> usize {
    let mut same = 0;
    for (base, (ino, mtime, bytes)) in files(log) {
        if let Some((ino0, mtime0, bytes0)) = before.get(&base) {
            if *ino0 == ino {
                assert_eq!((&mtime, &bytes), (mtime0, bytes0), "segment {base} changed in place");
                same += 1;
            }
        }
    }
    same
}

fn put(log: &mut Log, key: &str, value: &str, ts: i64) {
    append(log, Compression::None, &[(ts, Some(key.as_bytes()), Some(value.as_bytes()))]);
}

#[test]
fn a_clean_rewrites_only_the_segment_with_a_superseded_record() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let log = RwLock::new(open_log(dir.path(), "kept", &CONFIG, clock.clone()));
    {
        let mut l = log.write();
        put(&mut l, "hot", "v0", NOW - 1);
        for i in 0..60 {
            put(&mut l, &format!("cold-{i}"), &format!("value-{i}"), NOW + i);
        }
        l.roll_if_not_empty().unwrap();
    }
    let mut c = cleaner(1 << 20, clock.clone());
    let checkpoint = clean_fully(&mut c, &log, 0, NOW);
    let segments = log.read().segments().count() - 1;
    assert!(segments >= 4, "the stable keys span several segments ({segments})");
    let before = files(&log.read());
    // Nothing new: every group is read and none is written.
    let again = clean_once(&mut c, &log, checkpoint, NOW);
    assert_eq!(again.stats.segments_kept, segments as u64);
    assert_eq!((again.stats.segments_written, again.stats.bytes_written), (0, 0));
    assert!(again.stats.bytes_read > 0);
    assert_eq!(again.stats.recopy_percent(), 0.0, "read, not written");
    assert_eq!(same_files(&before, &log.read()), segments + 1);

    // One hot update: only the segment holding the old "hot" record changes.
    clock.advance(10);
    let expected: Vec<Rec> = {
        let mut l = log.write();
        put(&mut l, "hot", "v1", NOW + 100);
        l.roll_if_not_empty().unwrap();
        read_all(&l, 0, 1 << 20).into_iter().filter(|r| r.value.as_deref() != Some(b"v0")).collect()
    };
    let before = files(&log.read());
    let result = clean_once(&mut c, &log, checkpoint, clock.now_ms());
    let l = log.read();
    assert_eq!(read_all(&l, 0, 1 << 20), expected);
    assert!(
        stray_files(l.dir()).iter().all(|f| f.ends_with(".deleted")),
        "{:?}",
        stray_files(l.dir())
    );
    assert_eq!(result.stats.segments_replaced, 1, "{:?}", result.stats);
    let kept = result.stats.segments_kept as usize;
    assert_eq!(kept + 1, l.segments().count() - 1, "every other cleaned segment was kept");
    // The kept ones and the active segment are the same files, unchanged.
    assert_eq!(same_files(&before, &l), kept + 1);
    assert!(result.stats.recopy_percent() < 50.0, "{}", result.stats.recopy_percent());
}

const LATE_CONFIG: [(&str, &str); 4] = [
    ("cleanup.policy", "compact"),
    ("segment.bytes", "4000"),
    ("index.interval.bytes", "100"),
    ("file.delete.delay.ms", "0"),
];

/// 40 one-record batches over distinct keys in two segments that form one
/// group, then one record superseding key 30 (in the second segment): the
/// group changes only after all of its first segment.
fn build_late_change(dir: &Path, clock: SharedClock) -> Vec<Rec> {
    let mut log = open_log(dir, "late", &LATE_CONFIG, clock);
    for i in 0..40 {
        put(&mut log, &format!("key-{i:02}"), &format!("value-{i}"), NOW + i);
        if i == 19 {
            log.roll_if_not_empty().unwrap();
        }
    }
    log.roll_if_not_empty().unwrap();
    put(&mut log, "key-30", "newer", NOW + 50);
    log.roll_if_not_empty().unwrap();
    read_all(&log, 0, 1 << 20)
}

fn open_late(dir: &Path, clock: SharedClock) -> RwLock<Log> {
    RwLock::new(open_log(dir, "late", &LATE_CONFIG, clock))
}

fn clean_with_crash(log: &RwLock<Log>, clock: &SharedClock, point: CrashPoint) {
    let mut c = cleaner(1 << 20, clock.clone());
    // Armed for this log's directory only: other tests' cleans go on.
    let armed =
        sediment::failpoint::arm(point.failpoint(), &log.read().dir().display().to_string());
    let to_clean = {
        let l = log.read();
        let (d, u) = cleanable_offsets(&l, None, None, clock.now_ms());
        LogToClean::new(&l, d, u)
    };
    match c.clean(log, &to_clean, clock.now_ms(), &CancellationToken::new()) {
        Err(CleanerError::InjectedCrash(p)) => assert_eq!(p, point),
        other => panic!("expected the injected crash, got {other:?}"),
    }
    drop(armed);
}

#[test]
fn a_group_that_changes_late_starts_with_a_copy_of_its_unchanged_batches() {
    let clock = MockClock::new(NOW);
    let dir = tempfile::tempdir().unwrap();
    let original = build_late_change(dir.path(), clock.clone());
    let expected: Vec<Rec> = original.iter().filter(|r| r.offset != 30).cloned().collect();
    let log = open_late(dir.path(), clock.clone());
    assert_eq!(log.read().segments().count(), 4, "two segments of the group, the update, active");
    let mut c = cleaner(1 << 20, clock.clone());
    let result: CleanResult = clean_once(&mut c, &log, 0, NOW);
    let s = &result.stats;
    assert!(s.segments_replaced >= 2 && s.segments_written == 1, "{s:?}");
    assert!(s.unchanged_bytes_copied > 1000, "the first segment was copied: {s:?}");
    let l = log.read();
    assert_eq!(read_all(&l, 0, 1 << 20), expected);
    all_batches(&l);
    assert!(stray_files(l.dir()).iter().all(|f| f.ends_with(".deleted")));
    // Every offset still finds its batch through the rebuilt index.
    for r in &expected {
        let data = l.read(r.offset, 1 << 20, true).unwrap();
        assert_eq!(common::decode(&data.records).iter().find(|x| x.offset >= r.offset), Some(r));
    }
    drop(l);
    log.write().delete_expired_files(clock.now_ms(), true).unwrap();
    if std::env::var_os("SEDIMENT_SKIP_KAFKA_TOOLS").is_none() {
        let part = dir.path();
        let out = common::kafka_dump_log(&common::files_with(part, "log"), &["--deep-iteration"]);
        let batches: Vec<&str> = out.lines().filter(|x| x.starts_with("baseOffset:")).collect();
        assert_eq!(batches.len(), expected.len(), "{out}");
        assert!(batches.iter().all(|x| x.contains("isvalid: true")), "{out}");
        for ext in ["index", "timeindex"] {
            let out = common::kafka_dump_log(&common::files_with(part, ext), &[]);
            for bad in ["Mismatch", "mismatch", "not found", "out of order", "rror"] {
                assert!(!out.contains(bad), "{ext}: kafka-dump-log reports {bad:?}:\n{out}");
            }
        }
    }

    // A crash in swap step 1 (the prefix copied, `.cleaned` fsynced) rolls
    // back; one after step 3 commits. Both clean to the same log afterwards.
    for (point, committed) in
        [(CrashPoint::CleanedWritten, false), (CrashPoint::Swap(SwapStep::SwapRenamed), true)]
    {
        let dir = tempfile::tempdir().unwrap();
        build_late_change(dir.path(), clock.clone());
        let log = open_late(dir.path(), clock.clone());
        let shared: SharedClock = clock.clone();
        clean_with_crash(&log, &shared, point);
        drop(log);
        let log = open_late(dir.path(), clock.clone());
        assert!(stray_files(dir.path()).is_empty(), "{:?}", stray_files(dir.path()));
        let records = read_all(&log.read(), 0, 1 << 20);
        assert_eq!(records, if committed { expected.clone() } else { original.clone() });
        clean_fully(&mut cleaner(1 << 20, clock.clone()), &log, 0, NOW);
        assert_eq!(read_all(&log.read(), 0, 1 << 20), expected);
    }
}

// ---- property: hot updates over a stable key set ----

#[derive(Debug, Clone)]
enum Op {
    /// Update these hot keys (0..6), one batch.
    Hot(Vec<u8>),
    /// Write these stable keys (100..), once each, in one batch.
    Cold(u8),
    Roll,
    Clean,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop::collection::vec(0u8..6, 1..3).prop_map(Op::Hot),
        4 => (1u8..4).prop_map(Op::Cold),
        2 => Just(Op::Roll),
        2 => Just(Op::Clean),
    ]
}

struct Model {
    records: Vec<Rec>,
    checkpoint: i64,
    next_cold: u32,
}

fn clean_and_check(
    log: &RwLock<Log>,
    cleaner: &mut sediment::cleaner::Cleaner,
    model: &mut Model,
) -> Result<CleanResult, TestCaseError> {
    let before = files(&log.read());
    let result = clean_once(cleaner, log, model.checkpoint, NOW);
    let end = result.end_offset;
    let mut newest: HashMap<Vec<u8>, i64> = HashMap::new();
    for r in model.records.iter().filter(|r| r.offset < end) {
        newest.insert(r.key.clone().unwrap_or_default(), r.offset);
    }
    model
        .records
        .retain(|r| r.offset >= end || newest[r.key.as_deref().unwrap_or_default()] == r.offset);
    model.checkpoint = end;
    let l = log.read();
    prop_assert_eq!(&read_all(&l, 0, 1 << 20), &model.records, "after cleaning to {}", end);
    all_batches(&l);
    let stray = stray_files(l.dir());
    prop_assert!(stray.iter().all(|f| f.ends_with(".deleted")), "{:?}", stray);
    // Kept segments are the same files, unchanged (plus the untouched ones
    // past the cleaned range and the active segment).
    prop_assert!(same_files(&before, &l) as u64 >= result.stats.segments_kept);
    Ok(result)
}

/// Run `ops`; returns the segments kept by the cleans before the last one.
fn run(ops: Vec<Op>) -> Result<u64, TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let log = RwLock::new(open_log(dir.path(), "prop", &CONFIG, clock.clone()));
    let mut cleaner = cleaner(24 * 20, clock.clone()); // 18 keys per clean
    let mut model = Model { records: Vec::new(), checkpoint: 0, next_cold: 100 };
    let mut kept = 0;
    for op in ops.into_iter().chain([Op::Roll]) {
        let mut l = log.write();
        match op {
            Op::Hot(keys) => {
                let specs: Vec<(String, String)> = keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| (format!("hot-{k}"), format!("v{i}")))
                    .collect();
                let recs: Vec<_> = specs
                    .iter()
                    .map(|(k, v)| (NOW, Some(k.as_bytes()), Some(v.as_bytes())))
                    .collect();
                let info = append(&mut l, Compression::None, &recs);
                for (i, (k, v)) in specs.into_iter().enumerate() {
                    model.records.push(Rec {
                        offset: info.first_offset + i as i64,
                        timestamp: NOW,
                        key: Some(k.into_bytes()),
                        value: Some(v.into_bytes()),
                    });
                }
            }
            Op::Cold(n) => {
                let specs: Vec<String> =
                    (0..n).map(|i| format!("cold-{}", model.next_cold + u32::from(i))).collect();
                model.next_cold += u32::from(n);
                let recs: Vec<_> =
                    specs.iter().map(|k| (NOW, Some(k.as_bytes()), Some(&b"stable"[..]))).collect();
                let codec = if n == 2 { Compression::Lz4 } else { Compression::None };
                let info = append(&mut l, codec, &recs);
                for (i, k) in specs.into_iter().enumerate() {
                    model.records.push(Rec {
                        offset: info.first_offset + i as i64,
                        timestamp: NOW,
                        key: Some(k.into_bytes()),
                        value: Some(b"stable".to_vec()),
                    });
                }
            }
            Op::Roll => l.roll_if_not_empty().unwrap(),
            Op::Clean => {
                drop(l);
                kept += clean_and_check(&log, &mut cleaner, &mut model)?.stats.segments_kept;
                log.write().delete_expired_files(NOW, true).unwrap();
            }
        }
    }
    // Clean to the end, then once more with nothing new: every segment is kept.
    loop {
        let result = clean_and_check(&log, &mut cleaner, &mut model)?;
        kept += result.stats.segments_kept;
        log.write().delete_expired_files(NOW, true).unwrap();
        if result.end_offset >= log.read().active_segment().base_offset() {
            break;
        }
    }
    let last = clean_and_check(&log, &mut cleaner, &mut model)?;
    let cleaned = log.read().segments().count() as u64 - 1;
    prop_assert_eq!(last.stats.segments_kept, cleaned);
    prop_assert_eq!(last.stats.bytes_written, 0);
    Ok(kept)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn hot_updates_over_stable_keys_match_the_oracle(ops in prop::collection::vec(op(), 20..80)) {
        run(ops)?;
    }
}

#[test]
fn the_workloads_keep_segments_before_their_last_clean() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut kept = 0;
    for _ in 0..8 {
        let ops = prop::collection::vec(op(), 60..80).new_tree(&mut runner).unwrap().current();
        kept += run(ops).unwrap();
    }
    // The workloads exercise keeping while there is still something to clean.
    assert!(kept > 0);
}

/// The recopy checks the CRC of every batch the map pass of the same clean
/// did not read (here the clean region), although it forwards mapped
/// batches without checking them again: a damaged clean-region batch fails
/// the clean, and nothing is changed.
#[test]
fn a_damaged_batch_in_the_clean_region_fails_the_clean() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let log = RwLock::new(open_log(dir.path(), "crc", &CONFIG, clock.clone()));
    {
        let mut l = log.write();
        for i in 0..30 {
            put(&mut l, &format!("key-{i}"), "value", NOW + i);
        }
        l.roll_if_not_empty().unwrap();
    }
    let mut c = cleaner(1 << 20, clock.clone());
    let checkpoint = clean_fully(&mut c, &log, 0, NOW);
    let first = log.read().segments().next().unwrap().log_path();
    // Flip a byte of the second batch's value, in place, as the disk would.
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&first).unwrap();
    let mut head = [0u8; 12];
    f.read_exact_at(&mut head, 0).unwrap();
    let second = 12 + u64::from(u32::from_be_bytes(head[8..12].try_into().unwrap()));
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, second + 75).unwrap();
    f.write_all_at(&[byte[0] ^ 0xFF], second + 75).unwrap();
    {
        let mut l = log.write();
        put(&mut l, "key-29", "newer", NOW + 40);
        l.roll_if_not_empty().unwrap();
    }
    let to_clean = {
        let l = log.read();
        let (d, u) = cleanable_offsets(&l, Some(checkpoint), None, NOW);
        LogToClean::new(&l, d, u)
    };
    assert_eq!(to_clean.first_dirty_offset, checkpoint);
    let err = c.clean(&log, &to_clean, NOW, &CancellationToken::new()).unwrap_err();
    assert!(err.to_string().contains("CRC"), "{err}");
    assert!(stray_files(dir.path()).is_empty(), "{:?}", stray_files(dir.path()));
}

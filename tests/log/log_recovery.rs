//! Crash and corruption tests: a child process SIGKILLed while appending, torn
//! and garbage tails, truncated and missing indexes, damage below the recovery
//! point, and the cleaner's leftover files, each reopened through `LogManager`.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{batch, read_all, system_manager};
use sediment::log::compression::Compression;
use sediment::log::TopicPartition;

const CHILD_ENV: &str = "SEDIMENT_CRASH_CHILD_DIR";

/// The records of batch `i` in the crash test, so the parent can check contents.
fn crash_batch(i: usize) -> Vec<u8> {
    let key = format!("key-{i}");
    let value = format!("value-{i}-{}", "v".repeat(i % 50));
    let codec = if i % 3 == 0 { Compression::Lz4 } else { Compression::None };
    batch(
        codec,
        &[
            (1_700_000_000_000 + i as i64, Some(key.as_bytes()), Some(value.as_bytes())),
            (1_700_000_000_000 + i as i64, Some(b"same"), Some(value.as_bytes())),
        ],
    )
}

/// Runs only as the child of `sigkill_while_appending_loses_no_acknowledged_batch`:
/// appends forever, printing the index of every batch the log acknowledged.
#[test]
#[ignore = "child process of the SIGKILL test"]
fn crash_child_appender() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let manager = system_manager(Path::new(&dir));
    manager
        .create_topic(
            "crash",
            1,
            common::overrides(&[("segment.bytes", "20000"), ("index.interval.bytes", "500")]),
        )
        .unwrap();
    let log = manager.get_log(&TopicPartition::new("crash", 0)).unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        log.write().append_as_leader(&mut crash_batch(i)).unwrap();
        writeln!(out, "{i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_while_appending_loses_no_acknowledged_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "log_recovery::crash_child_appender",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acked = None;
    let reader = BufReader::new(child.stdout.take().unwrap());
    for line in reader.lines() {
        let line = line.unwrap();
        if let Ok(i) = line.trim().parse::<usize>() {
            acked = Some(i);
            if i >= 3000 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let acked = acked.expect("the child acknowledged appends");

    let manager = system_manager(dir.path());
    let log = manager.get_log(&TopicPartition::new("crash", 0)).expect("log reopened");
    let log = log.read();
    assert!(log.segments().len() > 5, "the child rolled segments");
    let records = read_all(&log, 0, 1 << 20);
    assert!(
        records.len() >= 2 * (acked + 1),
        "{} records for {} acknowledged batches",
        records.len(),
        acked + 1
    );
    assert_eq!(records.len() % 2, 0, "only whole batches survive");
    for (n, r) in records.iter().enumerate() {
        let i = n / 2;
        let expected = common::decode(&{
            let mut b = crash_batch(i);
            sediment::log::record_batch::set_base_offset(&mut b, (2 * i) as i64);
            b
        });
        assert_eq!(r, &expected[n % 2], "record {n}");
    }
}

fn write_records(dir: &Path, topic: &str, batches: usize, extra: &[(&str, &str)]) -> PathBuf {
    let manager = system_manager(dir);
    let mut cfg = vec![("segment.bytes", "4000"), ("index.interval.bytes", "300")];
    cfg.extend_from_slice(extra);
    manager.create_topic(topic, 1, common::overrides(&cfg)).unwrap();
    let log = manager.get_log(&TopicPartition::new(topic, 0)).unwrap();
    for i in 0..batches {
        let v = format!("value-{i}");
        log.write()
            .append_as_leader(&mut batch(
                Compression::None,
                &[(1000 + i as i64, Some(format!("k{i}").as_bytes()), Some(v.as_bytes()))],
            ))
            .unwrap();
    }
    manager.shutdown().unwrap();
    dir.join(format!("{topic}-0"))
}

fn segment_files(part: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(part)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    v.sort();
    v
}

fn reopen_and_read(dir: &Path, topic: &str) -> Vec<common::Rec> {
    let manager = system_manager(dir);
    let offline = manager.offline_partitions();
    assert!(offline.is_empty(), "offline: {offline:?}");
    let log = manager.get_log(&TopicPartition::new(topic, 0)).unwrap();
    let log = log.read();
    read_all(&log, log.log_start_offset(), 1 << 20)
}

#[test]
fn garbage_after_the_last_batch_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let part = write_records(dir.path(), "garbage", 100, &[]);
    let last = segment_files(&part, ".log").pop().unwrap();
    let clean_len = std::fs::metadata(&last).unwrap().len();
    // A torn batch: a header claiming 500 bytes followed by too few, then junk.
    let mut f = std::fs::OpenOptions::new().append(true).open(&last).unwrap();
    let mut torn = batch(Compression::None, &[(5, Some(b"k"), Some(&[9u8; 500]))]);
    torn.truncate(200);
    f.write_all(&torn).unwrap();
    drop(f);
    // Both after a clean shutdown (marker present) and after a crash (marker removed).
    for crash in [false, true] {
        if crash {
            let _ = std::fs::remove_file(dir.path().join(".kafka_cleanshutdown"));
            std::fs::OpenOptions::new()
                .append(true)
                .open(&last)
                .unwrap()
                .write_all(&[0xde; 77])
                .unwrap();
        }
        let records = reopen_and_read(dir.path(), "garbage");
        assert_eq!(records.len(), 100);
        assert_eq!(
            std::fs::metadata(&last).unwrap().len(),
            clean_len,
            "torn tail truncated (crash={crash})"
        );
    }
    // The log accepts appends after recovery, at the next offset.
    let manager = system_manager(dir.path());
    let log = manager.get_log(&TopicPartition::new("garbage", 0)).unwrap();
    let info = log
        .write()
        .append_as_leader(&mut batch(Compression::None, &[(1, Some(b"k"), Some(b"v"))]))
        .unwrap();
    assert_eq!(info.first_offset, 100);
}

#[test]
fn truncated_and_missing_indexes_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let part = write_records(dir.path(), "idx", 200, &[]);
    let indexes = segment_files(&part, ".index");
    let time_indexes = segment_files(&part, ".timeindex");
    assert!(indexes.len() >= 3);
    let original: Vec<Vec<u8>> =
        indexes.iter().chain(&time_indexes).map(|p| std::fs::read(p).unwrap()).collect();
    // Truncate one index mid-entry, delete another, zero-fill a time index.
    let len = std::fs::metadata(&indexes[0]).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&indexes[0]).unwrap().set_len(len - 3).unwrap();
    std::fs::remove_file(&indexes[1]).unwrap();
    let tlen = std::fs::metadata(&time_indexes[2]).unwrap().len();
    std::fs::write(&time_indexes[2], vec![0u8; tlen as usize]).unwrap();
    let records = reopen_and_read(dir.path(), "idx");
    assert_eq!(records.len(), 200);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.offset, i as i64);
        assert_eq!(r.value.as_deref(), Some(format!("value-{i}").as_bytes()));
    }
    let rebuilt: Vec<Vec<u8>> =
        indexes.iter().chain(&time_indexes).map(|p| std::fs::read(p).unwrap()).collect();
    assert_eq!(rebuilt, original, "rebuilt indexes equal the ones written during appends");
}

#[test]
fn damage_below_the_recovery_point_takes_the_partition_offline() {
    let dir = tempfile::tempdir().unwrap();
    let part = write_records(dir.path(), "damaged", 200, &[]);
    write_records(&dir.path().join("other"), "healthy", 10, &[]);
    let first = segment_files(&part, ".log").remove(0);
    // Flip a byte inside a batch of a closed, flushed segment, and remove its index
    // so the rebuild has to read the damaged batch.
    let mut bytes = std::fs::read(&first).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&first, &bytes).unwrap();
    std::fs::remove_file(first.with_extension("index")).unwrap();
    let manager = system_manager(dir.path());
    let offline = manager.offline_partitions();
    let reason =
        offline.get(&TopicPartition::new("damaged", 0)).expect("partition reported offline");
    assert!(reason.contains("00000000000000000000.log"), "{reason}");
    assert!(reason.contains("position"), "{reason}");
    assert_eq!(
        std::fs::read(&first).unwrap(),
        bytes,
        "nothing below the recovery point was truncated"
    );
}

#[test]
fn cleaner_leftovers_are_settled_by_kafka_rules() {
    let dir = tempfile::tempdir().unwrap();
    let part = write_records(dir.path(), "swaps", 250, &[]);
    let logs = segment_files(&part, ".log");
    assert!(logs.len() >= 4);
    let base = |p: &Path| p.file_name().unwrap().to_string_lossy()[..20].parse::<i64>().unwrap();
    let copy_as = |from: &Path, to_base: i64, suffix: &str| {
        for ext in ["log", "index", "timeindex"] {
            let src = from.with_extension(ext);
            std::fs::copy(&src, part.join(format!("{to_base:020}.{ext}{suffix}"))).unwrap();
        }
    };
    // A completed clean of segment 1 that crashed before stripping .swap: the swap
    // replaces the segment (same content here, so every record stays readable).
    copy_as(&logs[1], base(&logs[1]), ".swap");
    // A clean of segment 3 that crashed mid-way: .cleaned for 3, .swap at 3 too.
    copy_as(&logs[3], base(&logs[3]), ".cleaned");
    copy_as(&logs[3], base(&logs[3]), ".swap");
    // A segment already replaced, awaiting deletion.
    std::fs::write(part.join("00000000000000099999.log.deleted"), b"junk").unwrap();
    let records = reopen_and_read(dir.path(), "swaps");
    assert_eq!(records.len(), 250);
    assert!(records.iter().enumerate().all(|(i, r)| r.offset == i as i64));
    let leftovers: Vec<String> = std::fs::read_dir(&part)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned") || n.ends_with(".deleted"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(segment_files(&part, ".log").len(), logs.len());
}

#[test]
fn flush_before_ack_moves_the_recovery_point_with_every_append() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = sediment::log::LogManagerConfig::new(dir.path());
    config.flush_before_ack = true;
    let manager = sediment::log::LogManager::open(config, sediment::clock::system()).unwrap();
    manager.create_topic("sync", 1, Default::default()).unwrap();
    let log = manager.get_log(&TopicPartition::new("sync", 0)).unwrap();
    for i in 0..5 {
        let mut log = log.write();
        log.append_as_leader(&mut batch(Compression::None, &[(1, Some(b"k"), Some(b"v"))]))
            .unwrap();
        assert_eq!(log.recovery_point(), i + 1, "fsynced before the append returned");
    }
    // Without the setting (Kafka's defaults) the recovery point waits for a roll or flush.
    let manager = system_manager(&dir.path().join("lazy"));
    manager.create_topic("lazy", 1, Default::default()).unwrap();
    let log = manager.get_log(&TopicPartition::new("lazy", 0)).unwrap();
    let mut log = log.write();
    log.append_as_leader(&mut batch(Compression::None, &[(1, Some(b"k"), Some(b"v"))])).unwrap();
    assert_eq!(log.recovery_point(), 0);
}

#[test]
fn flush_messages_bounds_the_unflushed_tail() {
    let dir = tempfile::tempdir().unwrap();
    let manager = system_manager(dir.path());
    manager.create_topic("every3", 1, common::overrides(&[("flush.messages", "3")])).unwrap();
    let log = manager.get_log(&TopicPartition::new("every3", 0)).unwrap();
    let mut log = log.write();
    let mut points = Vec::new();
    for _ in 0..7 {
        log.append_as_leader(&mut batch(Compression::None, &[(1, Some(b"k"), Some(b"v"))]))
            .unwrap();
        points.push(log.recovery_point());
    }
    assert_eq!(points, vec![0, 0, 3, 3, 3, 6, 6]);
}

#[test]
fn flush_ms_flushes_on_the_periodic_task() {
    let dir = tempfile::tempdir().unwrap();
    let clock = sediment::clock::MockClock::new(1_000_000);
    let manager = common::manager(dir.path(), &[], clock.clone());
    manager.create_topic("timed", 1, common::overrides(&[("flush.ms", "1000")])).unwrap();
    let log = manager.get_log(&TopicPartition::new("timed", 0)).unwrap();
    log.write()
        .append_as_leader(&mut batch(Compression::None, &[(1, Some(b"k"), Some(b"v"))]))
        .unwrap();
    clock.advance(999);
    manager.run_periodic_tasks(false, false, None).unwrap();
    assert_eq!(log.read().recovery_point(), 0, "not yet due");
    clock.advance(1);
    manager.run_periodic_tasks(false, false, None).unwrap();
    assert_eq!(log.read().recovery_point(), 1, "fsynced once flush.ms passed");
}

/// What a crash in the middle of creating a topic leaves (partitions are
/// created from the highest down, each staged as `<tp>.creating` and renamed
/// into place): the highest partitions, a staged one, none below. The next
/// start completes the topic with the same id and config.
#[test]
fn a_topic_creation_cut_by_a_crash_is_completed_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let manager = system_manager(dir.path());
    let created =
        manager.create_topic("t", 6, common::overrides(&[("cleanup.policy", "compact")])).unwrap();
    manager.shutdown().unwrap();
    drop(manager);
    for p in 0..3 {
        std::fs::remove_dir_all(dir.path().join(format!("t-{p}"))).unwrap();
    }
    // The partition being staged when the process died: partial files only.
    let staged = dir.path().join("t-2.creating");
    std::fs::create_dir_all(&staged).unwrap();
    std::fs::write(staged.join("partition.metadata"), b"version: 0\n").unwrap();

    let manager = system_manager(dir.path());
    assert!(manager.offline_partitions().is_empty(), "{:?}", manager.offline_partitions());
    let info = manager.topic("t").expect("topic t");
    assert_eq!((info.partitions, info.id), (6, created.id));
    for p in 0..6 {
        let log = manager.get_log(&TopicPartition::new("t", p)).expect("every partition");
        assert!(log.read().config().compact, "t-{p}: the topic config");
    }
    assert!(!staged.exists(), "the staged leftover is gone");
    manager.shutdown().unwrap();
    drop(manager);
    // Nothing more to do at the next start; the partitions are real directories.
    let manager = system_manager(dir.path());
    assert_eq!(manager.topic("t").expect("topic t").partitions, 6);
    assert!(dir.path().join("t-0").join("partition.metadata").exists());
    manager.shutdown().unwrap();
    drop(manager);
    // A deletion cut by a crash (highest partitions first) leaves a prefix:
    // nothing is created back.
    std::fs::remove_dir_all(dir.path().join("t-5")).unwrap();
    let manager = system_manager(dir.path());
    assert_eq!(manager.topic("t").expect("topic t").partitions, 5);
    assert!(!dir.path().join("t-5").exists());
}

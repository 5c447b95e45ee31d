//! Format check of cleaned segments: Apache Kafka's own kafka-dump-log
//! (DumpLogSegments, via scripts/kafka-tool.sh) reads what the cleaner wrote
//! without errors, finds every batch valid, shows the delete horizon stamped
//! on batches holding tombstones, and the records at their original offsets;
//! and, with transactions, decodes the markers the cleaner kept (and the
//! horizon it stamped on them) and the rewritten `.txnindex` files.

use crate::common;

use parking_lot::RwLock;

use crate::common::{append, clean_fully, cleaner, open_log, read_all};
use sediment::clock::MockClock;
use sediment::log::compression::Compression;

const NOW: i64 = 1_700_000_000_000;

#[test]
fn kafka_dump_log_reads_cleaned_segments() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let config = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "2500"),
        ("index.interval.bytes", "150"),
        ("delete.retention.ms", "86400000"),
    ];
    let mut log = open_log(dir.path(), "dump", &config, clock.clone());
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for i in 0..80usize {
        let keys: Vec<String> = (0..3).map(|j| format!("key-{}", (i * 3 + j) % 25)).collect();
        let values: Vec<String> = (0..3).map(|j| format!("value-{i}-{j}")).collect();
        let records: Vec<_> = (0..3)
            .map(|j| {
                // Keys 5 and 6 end deleted: their last writes are tombstones.
                let tomb = i >= 70 && (keys[j] == "key-5" || keys[j] == "key-6");
                (
                    NOW - 10_000 + (i * 3 + j) as i64,
                    Some(keys[j].as_bytes()),
                    if tomb { None } else { Some(values[j].as_bytes()) },
                )
            })
            .collect();
        append(&mut log, codecs[i % codecs.len()], &records);
    }
    log.roll_if_not_empty().unwrap();
    let before = read_all(&log, 0, 1 << 20);
    let log = RwLock::new(log);
    let mut c = cleaner(1 << 20, clock.clone());
    clean_fully(&mut c, &log, 0, NOW);
    let log = log.into_inner();
    let expected = read_all(&log, 0, 1 << 20);
    assert_eq!(expected.len(), 25, "one record per key");
    assert!(expected.iter().any(|r| r.value.is_none()), "tombstones are still there");
    for r in &expected {
        assert!(before.contains(r), "{r:?} kept its offset, timestamp, key and value");
    }
    drop(log);

    let part = dir.path();
    let logs = common::files_with(part, "log");
    let out = common::kafka_dump_log(&logs, &["--deep-iteration", "--print-data-log"]);
    let batch_lines: Vec<&str> = out.lines().filter(|l| l.starts_with("baseOffset:")).collect();
    assert!(!batch_lines.is_empty(), "{out}");
    assert!(batch_lines.iter().all(|l| l.contains("isvalid: true")), "{out}");
    // The horizon KIP-534 stamps: clean time + delete.retention.ms, on the tombstones' batches only.
    let horizon = format!("deleteHorizonMs: OptionalLong[{}]", NOW + 86_400_000);
    let stamped: Vec<&&str> = batch_lines.iter().filter(|l| l.contains(&horizon)).collect();
    assert!(!stamped.is_empty(), "no batch shows the delete horizon:\n{out}");
    let records: Vec<&str> = out.lines().filter(|l| l.starts_with("| offset:")).collect();
    assert_eq!(records.len(), expected.len(), "{out}");
    for (line, r) in records.iter().zip(&expected) {
        assert!(
            line.starts_with(&format!("| offset: {} ", r.offset)),
            "{line} vs offset {}",
            r.offset
        );
        assert!(
            line.contains(&format!("CreateTime: {}", r.timestamp)),
            "{line}: the original timestamp survives the new base"
        );
        let key = String::from_utf8(r.key.clone().unwrap()).unwrap();
        let key_field = format!("key: {key}");
        assert!(
            line.contains(&format!("{key_field} ")) || line.ends_with(&key_field),
            "{line} vs {key}"
        );
        match &r.value {
            Some(v) => assert!(
                line.contains(&format!("payload: {}", String::from_utf8_lossy(v))),
                "{line}"
            ),
            None => assert!(line.contains("valueSize: -1"), "{line} is a tombstone"),
        }
    }

    // Kafka checks the cleaned segments' indexes against the logs.
    for ext in ["index", "timeindex"] {
        let out = common::kafka_dump_log(&common::files_with(part, ext), &[]);
        for bad in ["Mismatch", "mismatch", "not found", "out of order", "ERROR", "rror"] {
            assert!(!out.contains(bad), "{ext}: kafka-dump-log reports {bad:?}:\n{out}");
        }
    }
}

/// Transactions of three producers (commits and aborts, keys shared with
/// plain data) cleaned three times: when the aborted data goes (markers kept
/// with their `.txnindex` entries), when the markers' data is gone (horizon
/// stamped on them), and past that horizon (markers gone, entries with them).
/// After each, DumpLogSegments reads every segment and `.txnindex` without
/// error and agrees with sediment's view.
#[test]
fn kafka_dump_log_reads_cleaned_markers_and_txn_indexes() {
    use sediment::clock::Clock;
    use sediment::log::control_record::EndTransactionMarker;
    use sediment::log::record_batch::BatchBuilder;

    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let config = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "1500"),
        ("index.interval.bytes", "150"),
        ("delete.retention.ms", "1000"),
        ("file.delete.delay.ms", "0"),
    ];
    let mut log = open_log(dir.path(), "dumptxn", &config, clock.clone());
    let mut seqs = [0i32; 3];
    for i in 0..48usize {
        let pid = 1000 + (i % 3) as i64;
        if i % 4 == 3 {
            let abort = i % 8 == 3;
            let marker = if abort {
                EndTransactionMarker::abort(7)
            } else {
                EndTransactionMarker::commit(7)
            };
            log.append_end_txn_marker(pid, 0, marker).unwrap();
        } else if i % 5 == 0 {
            let k = format!("key-{}", i % 6);
            append(&mut log, Compression::None, &[(NOW, Some(k.as_bytes()), Some(b"plain"))]);
        } else {
            let s = &mut seqs[i % 3];
            let mut b = BatchBuilder::new(Compression::None, NOW).producer(pid, 0, *s);
            b.transactional = true;
            for j in 0..2 {
                b.append(NOW, Some(format!("key-{}", (i + j) % 6).as_bytes()), Some(b"txn"));
            }
            *s += 2;
            log.append_as_leader(&mut b.build()).unwrap();
        }
    }
    // Close every transaction, then roll so that everything is cleanable.
    for pid in 1000..1003 {
        log.append_end_txn_marker(pid, 0, EndTransactionMarker::commit(7)).unwrap();
    }
    log.roll_if_not_empty().unwrap();
    assert!(log.first_unstable_offset().is_none());
    let before = log.collect_aborted_transactions(0, log.log_end_offset()).unwrap();
    assert!(before.len() >= 3, "{before:?}");
    let log = RwLock::new(log);
    let mut c = cleaner(1 << 20, clock.clone());

    let mut checkpoint = 0;
    for (round, advance) in [(0, 0), (1, 0), (2, 1001)] {
        clock.advance(advance);
        let now = clock.now_ms();
        checkpoint = clean_fully(&mut c, &log, checkpoint, now);
        let l = log.read();
        let entries = l.collect_aborted_transactions(0, l.log_end_offset()).unwrap();
        assert!(entries.iter().all(|t| before.contains(t)), "round {round}: {entries:?}");
        let part = l.dir().to_path_buf();
        let out = common::kafka_dump_log(
            &common::files_with(&part, "log"),
            &["--deep-iteration", "--print-data-log"],
        );
        let batches: Vec<&str> = out.lines().filter(|x| x.starts_with("baseOffset:")).collect();
        assert!(batches.iter().all(|x| x.contains("isvalid: true")), "{out}");
        // No record of an aborted transaction is left (empty batches may be).
        let mut batch_pid = -1;
        for line in out.lines() {
            let field = |name: &str| {
                let mut it = line.split_whitespace().skip_while(|w| *w != name);
                it.nth(1).map(|v| v.parse::<i64>().unwrap())
            };
            if line.starts_with("baseOffset:") {
                let transactional = line.contains("isTransactional: true");
                batch_pid = if transactional { field("producerId:").unwrap() } else { -1 };
            } else if line.starts_with("| offset:") && !line.contains("endTxnMarker") {
                let offset = field("offset:").unwrap();
                let aborted = before.iter().any(|t| {
                    t.producer_id == batch_pid && t.first_offset <= offset && offset < t.last_offset
                });
                assert!(!aborted, "round {round}: aborted record left: {line}");
            }
        }
        let abort_lines: Vec<i64> = out
            .lines()
            .filter(|x| x.contains("endTxnMarker: ABORT"))
            .map(|x| x.split_whitespace().nth(2).unwrap().parse().unwrap())
            .collect();
        // A segment without entries has no `.txnindex` file, as in Kafka.
        let index_files = common::files_with(&part, "txnindex");
        let out_idx = if index_files.is_empty() {
            String::new()
        } else {
            common::kafka_dump_log(&index_files, &[])
        };
        let listed: Vec<String> =
            out_idx.lines().filter(|x| x.starts_with("version:")).map(String::from).collect();
        let expected: Vec<String> = entries
            .iter()
            .map(|t| {
                format!(
                    "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
                    t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
                )
            })
            .collect();
        assert_eq!(listed, expected, "round {round}: {out_idx}");
        // Every entry's ABORT marker is there.
        for t in &entries {
            assert!(abort_lines.contains(&t.last_offset), "round {round}: {t:?}\n{out}");
        }
        let control: Vec<&&str> =
            batches.iter().filter(|x| x.contains("isControl: true")).collect();
        let stamped: Vec<i64> = control
            .iter()
            .filter(|x| !x.contains("deleteHorizonMs: OptionalLong.empty"))
            .map(|x| x.split_whitespace().nth(1).unwrap().parse().unwrap())
            .collect();
        match round {
            // The aborted data went; its markers stay, with their entries,
            // unstamped (only markers of transactions without data are).
            0 => {
                assert_eq!(entries, before);
                assert!(entries.iter().all(|t| !stamped.contains(&t.last_offset)), "{out}");
            }
            // Their data is gone: the markers get the horizon of this clean.
            1 => {
                let horizon = format!("deleteHorizonMs: OptionalLong[{}]", now + 1000);
                assert!(control.iter().any(|x| x.contains(&horizon)), "{out}");
                assert!(entries.len() < before.len(), "{entries:?}");
            }
            // Past the horizon: the stamped markers are gone.
            _ => {
                assert!(abort_lines.len() < before.len(), "{out}");
                assert!(!stamped.iter().any(|o| before.iter().any(|t| t.last_offset == *o)));
            }
        }
    }
}

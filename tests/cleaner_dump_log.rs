//! Format check of cleaned segments: Apache Kafka's own kafka-dump-log
//! (DumpLogSegments, via scripts/kafka-tool.sh) reads what the cleaner wrote
//! without errors, finds every batch valid, shows the delete horizon stamped
//! on batches holding tombstones, and the records at their original offsets.

mod common;

use parking_lot::RwLock;

use common::{append, clean_fully, cleaner, open_log, read_all};
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

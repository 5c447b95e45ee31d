//! Format check: Apache Kafka's own kafka-dump-log (DumpLogSegments from
//! org.apache.kafka:kafka_2.13:4.1.2, fetched with Maven by scripts/kafka-jars.sh)
//! reads segments and indexes that sediment wrote, reports the same batches and
//! records, and finds no index mismatch.

use crate::common;

use std::path::{Path, PathBuf};

use crate::common::{batch, system_manager};
use sediment::log::compression::Compression;
use sediment::log::TopicPartition;

#[test]
fn kafka_dump_log_reads_our_segments_and_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let manager = system_manager(dir.path());
    manager
        .create_topic(
            "dump",
            1,
            common::overrides(&[("segment.bytes", "3000"), ("index.interval.bytes", "200")]),
        )
        .unwrap();
    let log = manager.get_log(&TopicPartition::new("dump", 0)).unwrap();
    let now = sediment::clock::system().now_ms();
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    let mut expected = Vec::new();
    for i in 0..60usize {
        let keys: Vec<String> = (0..3).map(|j| format!("key-{i}-{j}")).collect();
        let values: Vec<String> =
            (0..3).map(|j| format!("value-{i}-{j}-{}", "x".repeat(i % 7 * 10))).collect();
        let ts = now - 100_000 + (i as i64) * 1000;
        let records: Vec<_> = (0..3)
            .map(|j| {
                // Every 10th batch carries a tombstone, with a null value.
                let value = if i % 10 == 0 && j == 1 { None } else { Some(values[j].as_bytes()) };
                (ts + j as i64, Some(keys[j].as_bytes()), value)
            })
            .collect();
        let mut bytes = batch(codecs[i % codecs.len()], &records);
        let info = log.write().append_as_leader(&mut bytes).unwrap();
        for (j, r) in records.iter().enumerate() {
            expected.push((
                info.first_offset + j as i64,
                keys[j].clone(),
                r.2.map(|v| String::from_utf8_lossy(v).into_owned()),
            ));
        }
    }
    manager.shutdown().unwrap();
    let part = dir.path().join("dump-0");
    let logs = common::files_with(&part, "log");
    assert!(logs.len() > 3, "several segments were written");

    // Batches and records, as Kafka decodes them.
    let refs: Vec<&Path> = logs.iter().map(PathBuf::as_path).collect();
    let out = common::kafka_dump_log(&refs, &["--deep-iteration", "--print-data-log"]);
    let batches = out.lines().filter(|l| l.starts_with("baseOffset:")).count();
    assert_eq!(batches, 60, "{out}");
    assert!(
        out.lines().filter(|l| l.starts_with("baseOffset:")).all(|l| l.contains("isvalid: true")),
        "{out}"
    );
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        assert!(out.contains(&format!("compresscodec: {codec}")), "codec {codec} missing:\n{out}");
    }
    let records: Vec<&str> = out.lines().filter(|l| l.starts_with("| offset:")).collect();
    assert_eq!(records.len(), expected.len());
    for (line, (offset, key, value)) in records.iter().zip(&expected) {
        assert!(line.starts_with(&format!("| offset: {offset} ")), "{line} vs offset {offset}");
        assert!(line.contains(&format!("key: {key}")), "{line} vs key {key}");
        match value {
            Some(v) => assert!(line.contains(&format!("payload: {v}")), "{line} vs {v}"),
            None => assert!(line.contains("valueSize: -1"), "{line} should be a tombstone"),
        }
    }

    // Indexes: Kafka checks every entry against the log.
    for ext in ["index", "timeindex"] {
        let files = common::files_with(&part, ext);
        let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
        let out = common::kafka_dump_log(&refs, &[]);
        let entries =
            out.lines().filter(|l| l.starts_with("offset:") || l.starts_with("timestamp:")).count();
        assert!(entries > 5, "{ext}: too few entries to mean anything:\n{out}");
        for bad in ["Mismatch", "mismatch", "not found", "out of order", "ERROR", "rror"] {
            assert!(!out.contains(bad), "{ext}: kafka-dump-log reports {bad:?}:\n{out}");
        }
    }

    // Our own dump agrees on the record count and finds no problem.
    let mut ours = String::new();
    let all: Vec<PathBuf> = [
        common::files_with(&part, "log"),
        common::files_with(&part, "index"),
        common::files_with(&part, "timeindex"),
    ]
    .concat();
    let problems = sediment::tools::dump_log::dump_files(
        &all,
        sediment::tools::dump_log::DumpOptions {
            print_data_log: true,
            deep_iteration: true,
            max_batch_size: 1 << 20,
        },
        &mut ours,
    )
    .unwrap();
    assert_eq!(problems, 0, "{ours}");
    assert_eq!(ours.lines().filter(|l| l.starts_with("| offset:")).count(), expected.len());
}

/// Markers and `.txnindex` files as Kafka reads them: DumpLogSegments decodes
/// every control batch as the marker written (type and coordinator epoch),
/// finds every batch valid, and lists each `.txnindex` entry as sediment's
/// own reader does. The golden 78-byte ABORT batch of `control_record`'s unit
/// test is checked here against Kafka's CRC.
#[test]
fn kafka_dump_log_reads_markers_and_txn_indexes() {
    use sediment::log::control_record::EndTransactionMarker;
    use sediment::log::record_batch::BatchBuilder;

    // The golden batch alone in a segment.
    let golden_dir = tempfile::tempdir().unwrap();
    let golden = golden_dir.path().join("00000000000000000000.log");
    std::fs::write(&golden, EndTransactionMarker::abort(7).build_batch(1000, 5, 1_700_000_000_000))
        .unwrap();
    let out = common::kafka_dump_log(&[&golden], &["--deep-iteration"]);
    for expected in [
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1000 producerEpoch: 5",
        "isTransactional: true isControl: true",
        "size: 78 magic: 2 compresscodec: none crc: 3035349665 isvalid: true",
        "| offset: 0 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 7",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }

    // A partition with transactions of three producers over several segments.
    let dir = tempfile::tempdir().unwrap();
    let manager = system_manager(dir.path());
    let overrides =
        common::overrides(&[("segment.bytes", "1500"), ("index.interval.bytes", "200")]);
    manager.create_topic("txn", 1, overrides).unwrap();
    let log = manager.get_log(&TopicPartition::new("txn", 0)).unwrap();
    let now = sediment::clock::system().now_ms();
    let mut seqs = [0i32; 3];
    let mut markers = Vec::new();
    for i in 0..45usize {
        let pid = (i % 3) as i64;
        let mut log = log.write();
        if i % 4 == 3 {
            let marker = if i % 8 == 3 {
                EndTransactionMarker::abort(7)
            } else {
                EndTransactionMarker::commit(7)
            };
            let info = log.append_end_txn_marker(1000 + pid, 0, marker).unwrap();
            markers.push((info.first_offset, marker.is_abort()));
        } else {
            let mut b = BatchBuilder::new(Compression::None, now).producer(
                1000 + pid,
                0,
                seqs[pid as usize],
            );
            b.transactional = true;
            for j in 0..3 {
                b.append(now, Some(format!("key-{i}-{j}").as_bytes()), Some(b"value"));
            }
            seqs[pid as usize] += 3;
            log.append_as_leader(&mut b.build()).unwrap();
        }
    }
    let aborted = {
        let log = log.read();
        log.collect_aborted_transactions(0, log.log_end_offset()).unwrap()
    };
    assert!(aborted.len() >= 3, "{aborted:?}");
    manager.shutdown().unwrap();
    let part = dir.path().join("txn-0");

    let logs = common::files_with(&part, "log");
    assert!(logs.len() > 2, "several segments");
    let out = common::kafka_dump_log(&logs, &["--deep-iteration", "--print-data-log"]);
    let batches: Vec<&str> = out.lines().filter(|l| l.starts_with("baseOffset:")).collect();
    assert!(batches
        .iter()
        .all(|l| l.contains("isvalid: true") && l.contains("isTransactional: true")));
    let control: Vec<&str> =
        batches.iter().copied().filter(|l| l.contains("isControl: true")).collect();
    assert_eq!(control.len(), markers.len(), "{out}");
    let decoded: Vec<(i64, bool)> = out
        .lines()
        .filter(|l| l.contains("endTxnMarker:"))
        .map(|l| {
            let offset = l.split_whitespace().nth(2).unwrap().parse().unwrap();
            assert!(l.ends_with("coordinatorEpoch: 7"), "{l}");
            (offset, l.contains("endTxnMarker: ABORT"))
        })
        .collect();
    assert_eq!(decoded, markers);

    let indexes = common::files_with(&part, "txnindex");
    assert!(!indexes.is_empty());
    let out = common::kafka_dump_log(&indexes, &[]);
    let listed: Vec<String> =
        out.lines().filter(|l| l.starts_with("version:")).map(String::from).collect();
    let expected: Vec<String> = aborted
        .iter()
        .map(|t| {
            format!(
                "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
                t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
            )
        })
        .collect();
    assert_eq!(listed, expected, "{out}");

    // Our own dump prints the same markers and entries, and finds no problem.
    let mut ours = String::new();
    let all = [logs, indexes].concat();
    let opts = sediment::tools::dump_log::DumpOptions {
        print_data_log: false,
        deep_iteration: true,
        max_batch_size: 1 << 20,
    };
    let problems = sediment::tools::dump_log::dump_files(&all, opts, &mut ours).unwrap();
    assert_eq!(problems, 0, "{ours}");
    let ours_listed: Vec<String> =
        ours.lines().filter(|l| l.starts_with("version:")).map(String::from).collect();
    assert_eq!(ours_listed, expected);
    let ours_markers = ours.lines().filter(|l| l.contains("endTxnMarker:")).count();
    assert_eq!(ours_markers, markers.len(), "{ours}");
}

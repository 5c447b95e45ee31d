//! A failing disk and descriptors running out, on a real broker over real
//! sockets. A log dir whose writes fail (the `log-dir-write-error` fail
//! point: EIO on every segment write under that dir, as a dying disk) goes
//! offline as Kafka's does: its partitions answer KAFKA_STORAGE_ERROR in
//! Produce, Fetch and Metadata, DescribeLogDirs reports it,
//! `kafka_log_logmanager_offlinelogdirectorycount` counts it, the other
//! dir keeps serving, and a restart brings back exactly what was
//! acknowledged. With the open files limit exhausted, a produce that must
//! roll fails with KAFKA_STORAGE_ERROR and leaves no gap: once descriptors
//! free up the next offset is the one after the last acknowledged record.

use std::path::{Path, PathBuf};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, DescribeLogDirsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
    ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;

use crate::broker::{create_topic, fetch_all, now_ms, TestBroker, Wire};

const STORAGE_ERROR: i16 = 56;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

/// One record `key` at `timestamp_ms`: the partition's error code and the
/// base offset it answered.
fn try_produce(
    w: &mut Wire,
    topic: &str,
    partition: i32,
    timestamp_ms: i64,
    key: &str,
) -> (i16, i64) {
    let mut b = BatchBuilder::new(Compression::None, timestamp_ms);
    b.append(timestamp_ms, Some(key.as_bytes()), Some(b"v"));
    let request =
        ProduceRequest::default().with_acks(-1).with_timeout_ms(10_000).with_topic_data(vec![
            TopicProduceData::default().with_name(name(topic)).with_partition_data(vec![
                PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(bytes::Bytes::from(b.build()))),
            ]),
        ]);
    let r = w.call(9, &request);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn fetch_error(w: &mut Wire, topic: &str, partition: i32) -> i16 {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default().with_topic(name(topic)).with_partitions(vec![
            FetchPartition::default().with_partition(partition).with_partition_max_bytes(1 << 20),
        ])]);
    w.call(12, &request).responses[0].partitions[0].error_code
}

fn list_offsets_error(w: &mut Wire, topic: &str, partition: i32) -> i16 {
    let request = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        ListOffsetsTopic::default().with_name(name(topic)).with_partitions(vec![
            ListOffsetsPartition::default().with_partition_index(partition).with_timestamp(-1),
        ]),
    ]);
    w.call(5, &request).topics[0].partitions[0].error_code
}

/// Metadata's error code of each partition of `topic`, by index.
fn metadata_errors(w: &mut Wire, topic: &str) -> Vec<(i32, i16)> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name(topic)))]));
    let r = w.call(9, &request);
    let mut out: Vec<(i32, i16)> =
        r.topics[0].partitions.iter().map(|p| (p.partition_index, p.error_code)).collect();
    out.sort();
    out
}

/// The log dir holding `topic-partition`.
fn dir_of(dirs: &[PathBuf], topic: &str, partition: i32) -> PathBuf {
    dirs.iter()
        .find(|d| d.join(format!("{topic}-{partition}")).is_dir())
        .cloned()
        .unwrap_or_else(|| panic!("{topic}-{partition} is in no log dir"))
}

fn keys(records: &[(i64, Option<String>, Option<String>)]) -> Vec<(i64, String)> {
    records.iter().map(|(o, k, _)| (*o, k.clone().unwrap_or_default())).collect()
}

#[test]
fn a_failed_log_dir_goes_offline_and_the_other_keeps_serving() {
    let root = tempfile::tempdir().expect("tempdir");
    let dirs = [root.path().join("d1"), root.path().join("d2")];
    let log_dirs = format!("log.dirs={},{}", dirs[0].display(), dirs[1].display());
    let mut b = TestBroker::start(&[&log_dirs]);
    // Two partitions: one in each dir (the emptiest dir takes each).
    create_topic(b.port, "disk", 2, &[]);
    let failing = dir_of(&dirs, "disk", 0);
    assert_ne!(failing, dir_of(&dirs, "disk", 1), "the partitions share a dir");
    let mut w = Wire::connect(b.port);
    let ts = now_ms();
    for i in 0..3 {
        for p in 0..2 {
            assert_eq!(try_produce(&mut w, "disk", p, ts, &format!("before-{i}")), (0, i));
        }
    }
    b.stop();

    // Every segment write under the first partition's dir now fails with EIO.
    let scope = failing.to_string_lossy().into_owned();
    let point =
        sediment::failpoint::setting(sediment::log::dir_failure::WRITE_FAILPOINT, Some(&scope));
    b.set_env(&[("FAILPOINTS", point.as_str())]);
    b.restart();
    let mut w = Wire::connect(b.port);
    assert_eq!(try_produce(&mut w, "disk", 0, ts, "lost").0, STORAGE_ERROR);
    b.wait_for(30, "the failed dir's partition offline in Metadata", || {
        (metadata_errors(&mut w, "disk") == [(0, STORAGE_ERROR), (1, 0)]).then_some(())
    });
    assert_eq!(b.metric("kafka_log_logmanager_offlinelogdirectorycount"), Some(1.0));
    assert_eq!(try_produce(&mut w, "disk", 0, ts, "refused").0, STORAGE_ERROR);
    assert_eq!(fetch_error(&mut w, "disk", 0), STORAGE_ERROR);
    assert_eq!(list_offsets_error(&mut w, "disk", 0), STORAGE_ERROR);
    // The other dir serves on, reads and writes.
    assert_eq!(try_produce(&mut w, "disk", 1, ts, "after"), (0, 3));
    assert_eq!(fetch_error(&mut w, "disk", 1), 0);
    assert_eq!(list_offsets_error(&mut w, "disk", 1), 0);
    let described = w.call(
        1,
        &DescribeLogDirsRequest::default().with_topics(Some(vec![
            DescribableLogDirTopic::default().with_topic(name("disk")).with_partitions(vec![0, 1]),
        ])),
    );
    let result_of = |dir: &Path| {
        let abs = std::fs::canonicalize(dir).expect("canonical");
        described
            .results
            .iter()
            .find(|r| Path::new(r.log_dir.as_str()) == abs)
            .unwrap_or_else(|| panic!("{} not described", abs.display()))
            .clone()
    };
    let offline = result_of(&failing);
    assert_eq!(offline.error_code, ResponseError::KafkaStorageError.code());
    assert!(offline.topics.is_empty());
    let online = result_of(dir_of(&dirs, "disk", 1).as_path());
    assert_eq!(online.error_code, 0);
    assert_eq!(online.topics[0].partitions[0].partition_index, 1);
    b.stop();

    // The disk is back: a restart recovers the dir with what was acknowledged.
    b.set_env(&[]);
    b.restart();
    let expected: Vec<(i64, String)> = (0..3).map(|i| (i, format!("before-{i}"))).collect();
    assert_eq!(keys(&fetch_all(b.port, "disk", 0)), expected);
    let mut expected_1 = expected.clone();
    expected_1.push((3, "after".into()));
    assert_eq!(keys(&fetch_all(b.port, "disk", 1)), expected_1);
    let mut w = Wire::connect(b.port);
    assert_eq!(try_produce(&mut w, "disk", 0, ts, "again"), (0, 3));
}

#[test]
fn out_of_descriptors_a_produce_fails_cleanly_and_leaves_no_gap() {
    // Low enough that a few dozen segments (three descriptors each) use it up.
    let mut b = TestBroker::start_with_open_files_limit(&[], 128);
    create_topic(b.port, "fds", 1, &[("segment.bytes", "100")]);
    // Held connections: each is a descriptor of the broker's, given back later.
    let mut held: Vec<Wire> = (0..16).map(|_| Wire::connect(b.port)).collect();
    for w in &mut held {
        assert_eq!(fetch_error(w, "fds", 0), 0, "a held connection is served");
    }
    let mut w = Wire::connect(b.port);
    let ts = now_ms();
    let mut acked: Vec<(i64, String)> = Vec::new();
    // Every produce rolls (100-byte segments) until no descriptor is left.
    let refused = loop {
        assert!(acked.len() < 1000, "descriptors never ran out");
        let key = format!("k{}", acked.len());
        match try_produce(&mut w, "fds", 0, ts, &key) {
            (0, offset) => {
                assert_eq!(offset, acked.len() as i64, "offsets are consecutive");
                acked.push((offset, key));
            }
            (code, _) => break code,
        }
    };
    assert_eq!(refused, STORAGE_ERROR, "out of descriptors, a produce gets KAFKA_STORAGE_ERROR");
    // The refused produce changed nothing: a retry is refused the same way,
    // and what was acknowledged reads back whole.
    assert_eq!(try_produce(&mut w, "fds", 0, ts, "again").0, STORAGE_ERROR);
    assert_eq!(fetch_error(&mut w, "fds", 0), 0, "reads go on");
    drop(held);
    // Once descriptors are free the next record gets the next offset: no
    // refused attempt took one.
    let next = acked.len() as i64;
    let key = format!("k{next}");
    let offset = b.wait_for(30, "a produce once descriptors are free", || {
        match try_produce(&mut w, "fds", 0, ts, &key) {
            (0, offset) => Some(offset),
            (code, _) => {
                assert_eq!(code, STORAGE_ERROR);
                None
            }
        }
    });
    assert_eq!(offset, next, "a refused produce left a gap");
    acked.push((next, key));
    assert!(b.log().contains("Too many open files"), "the broker logs the cause:\n{}", b.log());
    b.stop();
    b.set_open_files_limit(None);
    b.restart();
    assert_eq!(keys(&fetch_all(b.port, "fds", 0)), acked, "exactly what was acknowledged");
}

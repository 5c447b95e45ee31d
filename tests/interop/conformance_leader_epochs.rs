//! Leader epochs as Apache Kafka 4.1.2 and 4.4.0 answer them on one node: the same
//! topics and records go to a real Kafka (started from its jars by this
//! test) and to sediment, then OffsetsForLeaderEpoch, ListOffsets and Fetch
//! ask about epochs (known, unknown, older and newer than the partition's,
//! `current_leader_epoch` checks, Fetch's diverging epoch) and every answer
//! must be equal. Both brokers' `leader-epoch-checkpoint` files must hold
//! the same text.

use std::collections::BTreeMap;

use crate::broker::reference_kafka::{answers, assert_same_answers, ReferenceKafka, VERSIONS};
use crate::broker::txn::s;
use crate::broker::{create_topic, produce, TestBroker, Wire};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::*;

const FULL: &str = "epochs";
const EMPTY: &str = "epochs-empty";
/// Record timestamps, the same on both brokers.
const T0: i64 = 1_700_000_000_000;

fn name(topic: &str) -> TopicName {
    TopicName(s(topic))
}

/// Two topics, one with three batches (offsets 0..6), one empty.
fn prepare(port: u16) {
    create_topic(port, FULL, 1, &[]);
    create_topic(port, EMPTY, 1, &[]);
    let mut w = Wire::connect(port);
    for (i, n) in [2, 1, 3].into_iter().enumerate() {
        let records: Vec<_> =
            (0..n).map(|j| (format!("k{i}-{j}"), Some(format!("v{i}-{j}")))).collect();
        produce(&mut w, FULL, 0, T0 + i as i64, &records);
    }
}

/// (requested epoch, current leader epoch) pairs asked of each partition.
const EPOCH_CASES: [(i32, i32); 8] =
    [(-1, -1), (0, -1), (1, -1), (7, -1), (0, 0), (0, 1), (5, 0), (0, -2)];

fn offsets_for_leader_epoch(w: &mut Wire) -> Vec<String> {
    let mut out = Vec::new();
    for v in 2..=4 {
        for topic in [FULL, EMPTY, "absent"] {
            for (epoch, current) in EPOCH_CASES {
                for partition in [0, 3] {
                    let p = OffsetForLeaderPartition::default()
                        .with_partition(partition)
                        .with_leader_epoch(epoch)
                        .with_current_leader_epoch(current);
                    let r = OffsetForLeaderEpochRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![OffsetForLeaderTopic::default()
                            .with_topic(name(topic))
                            .with_partitions(vec![p])]);
                    let r = w.call(v, &r);
                    let e = &r.topics[0].partitions[0];
                    out.push(format!(
                        "OffsetsForLeaderEpoch v{v} {topic}/{partition} epoch {epoch} current {current}: \
                         error {} epoch {} end {}",
                        e.error_code, e.leader_epoch, e.end_offset
                    ));
                }
            }
        }
    }
    out
}

fn list_offsets(w: &mut Wire) -> Vec<String> {
    let mut out = Vec::new();
    for v in [4, 7, 8, 9] {
        for topic in [FULL, EMPTY] {
            for timestamp in [-2, -1, -3, -4, -5, T0 + 1] {
                for current in [-1, 0, 1] {
                    let p = ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(timestamp)
                        .with_current_leader_epoch(current);
                    let r = ListOffsetsRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![ListOffsetsTopic::default()
                            .with_name(name(topic))
                            .with_partitions(vec![p])]);
                    let r = w.call(v, &r);
                    let p = &r.topics[0].partitions[0];
                    out.push(format!(
                        "ListOffsets v{v} {topic} ts {timestamp} current {current}: error {} offset {} epoch {}",
                        p.error_code, p.offset, p.leader_epoch
                    ));
                }
            }
        }
    }
    out
}

/// Fetch v12 (topics by name) with epoch fields; the records' bytes are
/// left out (their CRC differs with the producer id), their count is not.
fn fetch(w: &mut Wire) -> Vec<String> {
    let cases: [(i64, i32, i32); 8] = [
        (0, -1, -1),
        (0, 0, -1),
        (0, 1, -1),
        (2, 0, 0),
        (6, 0, 0),
        (9, 0, 0),
        (2, 0, 3),
        (2, -1, 0),
    ];
    let mut out = Vec::new();
    for (fetch_offset, current, last_fetched) in cases {
        let p = FetchPartition::default()
            .with_partition(0)
            .with_fetch_offset(fetch_offset)
            .with_current_leader_epoch(current)
            .with_last_fetched_epoch(last_fetched)
            .with_partition_max_bytes(1 << 20);
        let r = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name(FULL))
                .with_partitions(vec![p])]);
        let r = w.call(12, &r);
        let p = &r.responses[0].partitions[0];
        let has_records = p.records.as_ref().is_some_and(|b| !b.is_empty());
        out.push(format!(
            "Fetch v12 offset {fetch_offset} current {current} last fetched {last_fetched}: error {} hw {} \
             lso {} start {} diverging ({}, {}) records {has_records}",
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
            p.diverging_epoch.epoch,
            p.diverging_epoch.end_offset,
        ));
    }
    out
}

/// Every probe's answer on the broker at `port`, keyed by the probe.
fn probe(port: u16) -> BTreeMap<String, String> {
    prepare(port);
    let mut w = Wire::connect(port);
    let mut lines = offsets_for_leader_epoch(&mut w);
    lines.extend(list_offsets(&mut w));
    lines.extend(fetch(&mut w));
    answers(lines)
}

fn checkpoint(data_dir: &std::path::Path, topic: &str) -> String {
    let path = data_dir.join(format!("{topic}-0")).join("leader-epoch-checkpoint");
    std::fs::read_to_string(&path).unwrap_or_else(|e| format!("{}: {e}", path.display()))
}

#[test]
fn leader_epochs_answer_as_kafka_does() {
    for version in VERSIONS {
        let kafka = ReferenceKafka::start_version(version, &[]);
        let sediment = TestBroker::start(&[]);
        let want = probe(kafka.port);
        let got = probe(sediment.port);
        assert_same_answers(version, &want, &got);
        let kafka_data = kafka.dir.path().join("data");
        assert_eq!(checkpoint(&sediment.data_dir(), FULL), checkpoint(&kafka_data, FULL));
        assert_eq!(checkpoint(&sediment.data_dir(), FULL), "0\n1\n0 0\n");
        assert!(!sediment.log().contains("panicked"), "{}", sediment.log());
    }
}

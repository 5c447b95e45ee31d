//! The readers of transactions on the wire: a partition written with
//! transactions through the log API (the broker stopped meanwhile), then
//! read by Fetch and ListOffsets at both isolation levels; a partition with
//! none answers byte for byte the same at both levels; and a transactional
//! batch without a transactional id is refused as Kafka refuses it.

use crate::broker;
use crate::common;

use crate::broker::{create_topic, TestBroker, Wire};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::record_batch::{BatchBuilder, BatchHeader};
use sediment::log::TopicPartition;

const NOW: i64 = 1_700_000_000_000;
/// Records stamped `NOW` (2023) are past the default retention.ms: their
/// topics keep them, so a retention pass cannot delete what is asserted.
const KEEP: &[(&str, &str)] = &[("retention.ms", "-1")];

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn fetch(topic: &str, offset: i64, isolation: i8) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation)
        .with_topics(vec![FetchTopic::default().with_topic(name(topic)).with_partitions(vec![
            FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20),
        ])])
}

fn list_latest(topic: &str, isolation: i8) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default().with_name(name(topic)).with_partitions(
            vec![ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1)],
        )])
}

/// A transactional batch timestamped now, like the markers (so no segment
/// rolls on time between them and a single fetch reads them all).
fn txn_batch(pid: i64, seq: i32, n: usize) -> Vec<u8> {
    let now = broker::now_ms();
    let mut b = BatchBuilder::new(Compression::None, now).producer(pid, 0, seq);
    b.transactional = true;
    for i in 0..n {
        b.append(now, Some(format!("k{i}").as_bytes()), Some(b"v"));
    }
    b.build()
}

/// The offset after the last whole batch of `records`.
fn end_of(records: &Bytes) -> i64 {
    let (mut pos, mut end) = (0, -1);
    while pos < records.len() {
        let h = BatchHeader::parse(&records[pos..]).unwrap();
        end = h.next_offset();
        pos += h.size_in_bytes();
    }
    end
}

#[test]
fn fetch_and_list_offsets_by_isolation_level() {
    let mut b = TestBroker::start(&[]);
    create_topic(b.port, "txn", 1, KEEP);
    create_topic(b.port, "plain", 1, KEEP);
    let mut w = Wire::connect(b.port);
    for i in 0..5 {
        broker::produce(&mut w, "plain", 0, NOW + i, &[(format!("k{i}"), Some(format!("v{i}")))]);
    }
    assert!(b.stop().success(), "{}", b.log());

    // Transactions, written through the log API while the broker is down.
    {
        let manager = common::system_manager(&b.data_dir());
        let log = manager.get_log(&TopicPartition::new("txn", 0)).unwrap();
        let mut log = log.write();
        log.append_as_leader(&mut txn_batch(1, 0, 2)).unwrap(); // 0-1
        log.append_as_leader(&mut txn_batch(2, 0, 1)).unwrap(); // 2
        log.append_end_txn_marker(1, 0, EndTransactionMarker::abort(0)).unwrap(); // 3
        log.append_end_txn_marker(2, 0, EndTransactionMarker::commit(0)).unwrap(); // 4
        log.append_as_leader(&mut txn_batch(3, 0, 2)).unwrap(); // 5-6, left open
        assert_eq!((log.last_stable_offset(), log.high_watermark()), (5, 7));
        drop(log);
        manager.shutdown().unwrap();
    }
    b.restart();
    let mut w = Wire::connect(b.port);

    let committed = w.call(12, &fetch("txn", 0, 1));
    let p = &committed.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark, p.last_stable_offset), (0, 7, 5));
    assert_eq!(end_of(p.records.as_ref().unwrap()), 5, "read_committed stops at the LSO");
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .as_ref()
        .unwrap()
        .iter()
        .map(|t| (t.producer_id.0, t.first_offset))
        .collect();
    assert_eq!(aborted, vec![(1, 0)]);
    let at_lso = w.call(12, &fetch("txn", 5, 1));
    let p = &at_lso.responses[0].partitions[0];
    assert_eq!((p.error_code, p.last_stable_offset), (0, 5));
    assert!(p.records.as_ref().is_none_or(Bytes::is_empty));

    let uncommitted = w.call(12, &fetch("txn", 0, 0));
    let p = &uncommitted.responses[0].partitions[0];
    assert_eq!((p.high_watermark, p.last_stable_offset), (7, 5), "the real LSO at every level");
    assert_eq!(end_of(p.records.as_ref().unwrap()), 7);
    assert_eq!(p.aborted_transactions, Some(vec![]));

    for (isolation, latest) in [(0i8, 7i64), (1, 5)] {
        let r = w.call(7, &list_latest("txn", isolation));
        let p = &r.topics[0].partitions[0];
        assert_eq!((p.error_code, p.offset), (0, latest), "isolation {isolation}");
    }
    // Before v2 there is no isolation level: the high watermark.
    let r = w.call(1, &list_latest("txn", 0));
    assert_eq!(r.topics[0].partitions[0].offset, 7);

    // No transaction: both levels answer the same bytes, LSO = high watermark.
    let mut frames = Vec::new();
    for isolation in [0i8, 1] {
        w.send(12, &fetch("plain", 0, isolation));
        frames.push(w.recv_frame().unwrap().1);
    }
    assert_eq!(frames[0], frames[1], "read_committed of a log without transactions");
    let r: FetchResponse = Wire::decode::<FetchRequest>(12, frames[0].clone());
    let p = &r.responses[0].partitions[0];
    assert_eq!((p.high_watermark, p.last_stable_offset), (5, 5));
    assert_eq!(p.aborted_transactions, Some(vec![]));
    for isolation in [0i8, 1] {
        let r = w.call(7, &list_latest("plain", isolation));
        assert_eq!(r.topics[0].partitions[0].offset, 5);
    }
}

#[test]
fn transactional_batches_without_a_transactional_id_are_refused() {
    let b = TestBroker::start(&[]);
    create_topic(b.port, "t", 2, KEEP);
    let mut plain = BatchBuilder::new(Compression::None, NOW);
    plain.append(NOW, Some(b"k"), Some(b"v"));
    let partition = |index: i32, records: Vec<u8>| {
        PartitionProduceData::default().with_index(index).with_records(Some(Bytes::from(records)))
    };
    let request = |acks: i16| {
        ProduceRequest::default().with_acks(acks).with_timeout_ms(10_000).with_topic_data(vec![
            TopicProduceData::default().with_name(name("t")).with_partition_data(vec![
                partition(0, plain.build()),
                partition(1, txn_batch(9, 0, 1)),
            ]),
        ])
    };
    let mut w = Wire::connect(b.port);
    let r = w.call(9, &request(1));
    let partitions = &r.responses[0].partition_responses;
    assert_eq!(partitions.len(), 2);
    for p in partitions {
        assert_eq!(p.error_code, ResponseError::TransactionalIdAuthorizationFailed.code());
        assert_eq!((p.base_offset, p.log_start_offset), (-1, -1));
    }
    // acks=0: no answer, and the connection stays usable.
    w.send(9, &request(0));
    for topic_partition in 0..2 {
        let r = w.call(
            7,
            &list_latest("t", 0).with_topics(vec![ListOffsetsTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(topic_partition)
                    .with_timestamp(-1)])]),
        );
        assert_eq!(r.topics[0].partitions[0].offset, 0, "nothing was appended");
    }
}

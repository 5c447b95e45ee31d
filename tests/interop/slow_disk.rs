//! A slow disk stalls only what waits for it. The broker runs on one async
//! worker (`TOKIO_WORKER_THREADS=1`, so any task that blocks a worker
//! blocks everyone) with every fsync of one partition held for
//! `SLOW_FSYNC_MS` (the `log-slow-fsync` fail point). Produces that fsync
//! that partition are parked, several at once so that one waits for the
//! partition's lock while another fsyncs; meanwhile a produce to another
//! partition is answered, and so is an offset commit of a group on another
//! `__consumer_offsets` partition while a commit to the slow one waits. Each
//! slow request is answered too, once its fsync is done.

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;
use sediment::log::segment::{SLOW_FSYNC_FAILPOINT, SLOW_FSYNC_MS};
use sediment::log::topic_partition::coordinator_partition;

use crate::broker::{connect_group_ready, create_topic, now_ms, TestBroker, Wire};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn produce_request(topic: &str, key: &str) -> ProduceRequest {
    let mut b = BatchBuilder::new(Compression::None, now_ms());
    b.append(now_ms(), Some(key.as_bytes()), Some(b"v"));
    ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![
        TopicProduceData::default().with_name(TopicName(s(topic))).with_partition_data(vec![
            PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(bytes::Bytes::from(b.build()))),
        ]),
    ])
}

fn commit_request(group: &str) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("fast")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)
                .with_committed_metadata(Some(s("")))])])
}

/// Whether a response is waiting on `w`, without waiting for one.
fn answered(w: &Wire) -> bool {
    w.stream.set_nonblocking(true).expect("nonblocking");
    let mut byte = [0u8; 1];
    let ready = w.stream.peek(&mut byte).is_ok_and(|n| n > 0);
    w.stream.set_nonblocking(false).expect("blocking");
    ready
}

/// Wait until the broker holds an fsync of `partition` (it logs each).
fn held_fsync(b: &TestBroker, partition: &str) {
    let line = format!("holding an fsync of {partition} for {SLOW_FSYNC_MS} ms");
    b.wait_for(30, "a held fsync", || b.log().contains(&line).then_some(()));
}

/// A group whose `__consumer_offsets` partition is not `other`'s.
fn group_on_another_partition(other: i32) -> String {
    (0..)
        .map(|i| format!("fast-group-{i}"))
        .find(|g| coordinator_partition(g, 50) != other)
        .unwrap()
}

#[test]
fn a_slow_partition_stalls_neither_other_partitions_nor_other_groups() {
    let slow_group = "slow-group";
    let slow_offsets = format!("__consumer_offsets-{}", coordinator_partition(slow_group, 50));
    // A fail point is set for one scope: the offsets partition's slowness
    // gets a broker of its own below.
    let points = [
        sediment::failpoint::setting(SLOW_FSYNC_FAILPOINT, Some("slow-0")),
        sediment::failpoint::setting(SLOW_FSYNC_FAILPOINT, Some(&slow_offsets)),
    ];
    let b = TestBroker::start_with_env(
        &["offsets.topic.num.partitions=50"],
        &[("TOKIO_WORKER_THREADS", "1"), ("FAILPOINTS", points[0].as_str())],
    );
    create_topic(b.port, "slow", 1, &[("flush.messages", "1")]);
    create_topic(b.port, "fast", 1, &[]);
    let mut parked: Vec<Wire> = (0..3).map(|_| Wire::connect(b.port)).collect();
    for (i, w) in parked.iter_mut().enumerate() {
        w.send(9, &produce_request("slow", &format!("slow-{i}")));
    }
    held_fsync(&b, "slow-0");
    let mut fast = Wire::connect(b.port);
    let r = fast.call(9, &produce_request("fast", "fast"));
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let waiting = parked.iter().filter(|w| !answered(w)).count();
    assert_eq!(waiting, 3, "a produce to another partition waited for the slow disk");
    for w in &mut parked {
        let (_, body) = w.recv_frame().expect("the slow produce is answered");
        let r = Wire::decode::<ProduceRequest>(9, body);
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    }
    drop(b);

    // Groups: every append is fsynced before it is acknowledged, and the
    // slow group's offsets partition fsyncs slowly.
    let b = TestBroker::start_with_env(
        &["offsets.topic.num.partitions=50", "log.flush.before.ack=true"],
        &[("TOKIO_WORKER_THREADS", "1"), ("FAILPOINTS", points[1].as_str())],
    );
    create_topic(b.port, "fast", 1, &[]);
    let fast_group = group_on_another_partition(coordinator_partition(slow_group, 50));
    let mut slow = connect_group_ready(b.port, slow_group);
    let mut other = connect_group_ready(b.port, &fast_group);
    slow.send(8, &commit_request(slow_group));
    held_fsync(&b, &slow_offsets);
    let r = other.call(8, &commit_request(&fast_group));
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    assert!(
        !answered(&slow),
        "a commit to another __consumer_offsets partition waited for the slow one's fsync"
    );
    let (_, body) = slow.recv_frame().expect("the slow commit is answered");
    let r = Wire::decode::<OffsetCommitRequest>(8, body);
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
}

//! Strings longer than a Kafka string may be (32,767 bytes) in flexible
//! requests, where a compact length can name up to 2^32 bytes: the same
//! requests go to Apache Kafka 4.1.2 and 4.4.0 (started from their jars) and to sediment,
//! and the outcomes (a closed connection, or the error codes) must be equal.
//!
//! The integrity hole of issue 28: the `__consumer_offsets` key wrote a group
//! id's length as an i16, so an OffsetCommit v8 for the group
//! `"x" * 65,536 + "victim"` wrote a record that, read back after a restart,
//! set the committed offset of the group `victim`. After the probes sediment
//! restarts and `victim`'s offset must be the one it committed itself.

use crate::broker::reference_kafka::{ReferenceKafka, VERSIONS};
use crate::broker::txn::{s, try_call};
use crate::broker::{connect_group_ready, create_topic, TestBroker, Wire};
use kafka_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;

const TOPIC: &str = "long-strings";
const VICTIM: &str = "victim";
const VICTIM_OFFSET: i64 = 5;

/// A group id of 65,536 + 6 bytes that begins with the rest of a key for
/// `victim`'s partition: written with an i16 length (which wraps to 6) the
/// key reads back as group `victim`, topic [`TOPIC`], partition 0, and the
/// filler after it was ignored.
fn forged_group() -> String {
    let mut id = String::from(VICTIM);
    id.push_str(std::str::from_utf8(&(TOPIC.len() as i16).to_be_bytes()).expect("UTF-8"));
    id.push_str(TOPIC);
    id.push_str("\0\0\0\0");
    let filler = 65_536 + VICTIM.len() - id.len();
    id + &"x".repeat(filler)
}

/// The longest group id Kafka accepts.
fn longest_group() -> String {
    "y".repeat(i16::MAX as usize)
}

fn commit(group: &str, offset: i64, metadata: Option<&str>) -> OffsetCommitRequest {
    let partition = OffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(offset)
        .with_committed_metadata(metadata.map(s));
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_retention_time_ms(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(vec![partition])])
}

/// "closed", or the request's error codes as `codes` reads them, on a fresh
/// connection (a refused request closes it).
fn outcome<R: kafka_protocol::protocol::Request>(
    port: u16,
    version: i16,
    request: &R,
    codes: impl Fn(&R::Response) -> Vec<i16>,
) -> String {
    let mut w = Wire::connect(port);
    match try_call(&mut w, version, request) {
        None => "closed".into(),
        Some(r) => format!("codes {:?}", codes(&r)),
    }
}

fn commit_codes(r: &OffsetCommitResponse) -> Vec<i16> {
    r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
}

/// A commit that succeeds once the coordinator of its group has loaded
/// (each group id maps to its own `__consumer_offsets` partition).
fn commit_until_loaded(port: u16, request: &OffsetCommitRequest) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let got = outcome(port, 8, request, commit_codes);
        // COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR.
        let loading = got == "codes [14]" || got == "codes [16]";
        if !loading || std::time::Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn join(group: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(bytes::Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0]))])
}

fn heartbeat(group: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(10_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s(TOPIC))]))
        .with_topic_partitions(Some(vec![]))
}

/// `name: outcome` for every probe, in order.
fn probes(port: u16) -> Vec<String> {
    let forged = forged_group();
    let long_member = "m".repeat(40_000);
    vec![
        format!(
            "OffsetCommit v8 forged group: {}",
            outcome(port, 8, &commit(&forged, 999, None), commit_codes)
        ),
        format!(
            "OffsetCommit v8 longest group: {}",
            commit_until_loaded(port, &commit(&longest_group(), 7, None))
        ),
        format!(
            "OffsetCommit v8 40,000-byte metadata: {}",
            outcome(port, 8, &commit(VICTIM, 6, Some(&long_member)), commit_codes)
        ),
        format!(
            "JoinGroup v6 forged group: {}",
            outcome(port, 6, &join(&forged), |r| vec![r.error_code])
        ),
        format!(
            "JoinGroup v9 40,000-byte member id: {}",
            outcome(port, 9, &join(VICTIM).with_member_id(s(&long_member)), |r| vec![r.error_code])
        ),
        format!(
            "ConsumerGroupHeartbeat v0 forged group: {}",
            outcome(port, 0, &heartbeat(&forged), |r| vec![r.error_code])
        ),
    ]
}

/// The committed offset of `group` for the topic's partition 0 (-1: none).
fn committed(port: u16, group: &str) -> i64 {
    let mut w = connect_group_ready(port, group);
    let r = w.call(
        7,
        &OffsetFetchRequest::default().with_group_id(GroupId(s(group))).with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partition_indexes(vec![0]),
        ])),
    );
    assert_eq!(r.error_code, 0, "OffsetFetch of {}…", &group[..group.len().min(16)]);
    r.topics[0].partitions[0].committed_offset
}

/// Create the topic and commit `victim`'s own offset; returns the probes.
fn run(port: u16) -> Vec<String> {
    create_topic(port, TOPIC, 1, &[]);
    connect_group_ready(port, VICTIM);
    assert_eq!(commit_until_loaded(port, &commit(VICTIM, VICTIM_OFFSET, None)), "codes [0]");
    probes(port)
}

#[test]
fn strings_longer_than_kafka_allows_are_refused_as_kafka_does() {
    // Each release against a sediment of its own (the requests write).
    let mut sediment = None;
    for version in VERSIONS {
        let kafka = ReferenceKafka::start_version(version, &[]);
        let broker = TestBroker::start(&["group.initial.rebalance.delay.ms=0"]);
        let want = run(kafka.port);
        let got = run(broker.port);
        assert_eq!(got, want, "sediment (left) answers differently from Kafka {version} (right)");
        assert_eq!(committed(kafka.port, VICTIM), VICTIM_OFFSET);
        sediment = Some(broker);
    }
    let mut sediment = sediment.expect("a sediment broker");

    // What was written must read back as it was meant: after a restart the
    // loader rebuilds every group from `__consumer_offsets`.
    sediment.stop();
    sediment.restart();
    assert_eq!(committed(sediment.port, VICTIM), VICTIM_OFFSET, "victim's offset was forged");
    assert_eq!(committed(sediment.port, &longest_group()), 7, "the longest id round-trips");
}

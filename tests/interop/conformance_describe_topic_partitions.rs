//! DescribeTopicPartitions (KIP-966) as Apache Kafka 4.1.2 and 4.4.0 answer
//! it on one node: the same requests go to a real Kafka (started from its
//! jars) and to sediment, and the answers must be equal: named topics in
//! name order, a missing and an invalid name, pages cut by
//! `response_partition_limit` with their cursors, every topic when none is
//! named (a cursor into it too), and the refusals of a cursor outside the
//! named topics or with a negative partition. Topic ids differ between the
//! brokers and are left out; everything else is compared.

use std::collections::BTreeMap;

use crate::broker::reference_kafka::{answers, assert_same_answers, ReferenceKafka, VERSIONS};
use crate::broker::txn::s;
use crate::broker::{create_topic, TestBroker, Wire};
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;

/// Topics made on both brokers: name and partition count.
const TOPICS: [(&str, i32); 3] = [("dtp-b", 3), ("dtp-a", 2), ("dtp-c", 1)];

fn ask(
    w: &mut Wire,
    label: &str,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> Vec<String> {
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics.iter().map(|t| TopicRequest::default().with_name(TopicName(s(t)))).collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            Cursor::default().with_topic_name(TopicName(s(t))).with_partition_index(p)
        }));
    let r = w.call(0, &request);
    let mut out = Vec::new();
    for (i, t) in r.topics.iter().enumerate() {
        let name = t.name.as_ref().map_or("null".into(), |n| n.0.to_string());
        // Only the topics this test made (an all-topics answer also has the
        // internal ones a broker happens to hold).
        if topics.is_empty() && !name.starts_with("dtp-") {
            continue;
        }
        let id = if t.topic_id.is_nil() { "nil" } else { "set" };
        out.push(format!(
            "{label} topic {i} {name}: error {} id {id} internal {}",
            t.error_code, t.is_internal
        ));
        for p in &t.partitions {
            let ids = |v: &[BrokerId]| v.iter().map(|b| b.0.to_string()).collect::<Vec<_>>();
            out.push(format!(
                "{label} {name}-{}: error {} leader {} epoch {} replicas {:?} isr {:?} elr {:?} last elr {:?} offline {:?}",
                p.partition_index,
                p.error_code,
                p.leader_id.0,
                p.leader_epoch,
                ids(&p.replica_nodes),
                ids(&p.isr_nodes),
                p.eligible_leader_replicas.as_deref().map(ids),
                p.last_known_elr.as_deref().map(ids),
                ids(&p.offline_replicas),
            ));
        }
    }
    let next = r.next_cursor.map(|c| format!("{} {}", c.topic_name.0, c.partition_index));
    out.push(format!("{label} next cursor: {next:?}"));
    out
}

fn probe(port: u16) -> BTreeMap<String, String> {
    for (name, partitions) in TOPICS {
        create_topic(port, name, partitions, &[]);
    }
    let mut w = Wire::connect(port);
    // Kafka's broker learns of a new topic from its controller a moment
    // after CreateTopics answers: wait until Metadata shows every one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let all = TOPICS
        .iter()
        .map(|(t, _)| MetadataRequestTopic::default().with_name(Some(TopicName(s(t)))));
    let request = MetadataRequest::default().with_topics(Some(all.collect()));
    while w.call(12, &request).topics.iter().any(|t| t.error_code != 0) {
        assert!(std::time::Instant::now() < deadline, "the topics never showed in Metadata");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let named = ["dtp-c", "dtp-missing", "dtp-b", "bad name!", "dtp-a"];
    let mut lines = ask(&mut w, "named", &named, 100, None);
    lines.extend(ask(&mut w, "page 1", &named, 2, None));
    lines.extend(ask(&mut w, "page 2", &named, 2, Some(("dtp-b", 0))));
    lines.extend(ask(&mut w, "page 3", &named, 2, Some(("dtp-b", 2))));
    lines.extend(ask(&mut w, "limit 0", &["dtp-b"], 0, None));
    lines.extend(ask(&mut w, "all", &[], 100, Some(("dtp-a", 1))));
    lines.extend(ask(&mut w, "cursor outside", &["dtp-a"], 100, Some(("dtp-b", 0))));
    lines.extend(ask(&mut w, "negative cursor", &["dtp-a"], 100, Some(("dtp-a", -1))));
    answers(lines)
}

#[test]
fn describe_topic_partitions_answers_as_kafka_does() {
    for version in VERSIONS {
        let kafka = ReferenceKafka::start_version(version, &[]);
        let sediment = TestBroker::start(&[]);
        let want = probe(kafka.port);
        let got = probe(sediment.port);
        assert_same_answers(version, &want, &got);
    }
}

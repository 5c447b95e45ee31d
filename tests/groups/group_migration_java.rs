//! Online migration between the classic and the consumer group protocols
//! (KIP-848, `group.consumer.migration.policy` at Kafka's default,
//! bidirectional) with the Java client (tests/java/RollingMember.java),
//! issue 30's acceptance 4: a classic group of three consumers committing by
//! hand is rolled one member at a time to `group.protocol=consumer` (the
//! first one upgrades the group to a consumer group) and back (the last
//! consumer-protocol member leaving downgrades it), with records produced
//! before every step. Every record is committed by exactly one member
//! exactly once: none lost, none consumed twice. With Kafka 4.4.0's
//! clients (`KAFKA_VERSION=4.4.0`) the consumers commit and fetch by topic
//! id (OffsetCommit and OffsetFetch v10).

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId, ListGroupsRequest,
    ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::broker::{create_topic, produce, TestBroker, Wire};
use crate::consumer_protocol_java::{wait_until, Member};

const PARTITIONS: i32 = 6;

fn start(b: &TestBroker, name: &str, protocol: &str) -> Member {
    let bs = b.bootstrap();
    Member::spawn("RollingMember.java", &[&bs, "rolling", "rolling", name, protocol], name)
}

/// The group's type and state as ListGroups shows them.
fn group_type(w: &mut Wire) -> (String, String) {
    let r: ListGroupsResponse = w.call(5, &ListGroupsRequest::default());
    let g = r.groups.iter().find(|g| g.group_id.0.as_str() == "rolling");
    g.map(|g| (g.group_type.to_string(), g.group_state.to_string())).unwrap_or_default()
}

/// How many members of the consumer group speak the classic protocol
/// (ConsumerGroupDescribe v1's member type 0) and how many the consumer one.
fn member_types(w: &mut Wire) -> (usize, usize) {
    let group = GroupId(StrBytes::from_static_str("rolling"));
    let r: ConsumerGroupDescribeResponse =
        w.call(1, &ConsumerGroupDescribeRequest::default().with_group_ids(vec![group]));
    let members = &r.groups[0].members;
    let classic = members.iter().filter(|m| m.member_type == 0).count();
    (classic, members.len() - classic)
}

/// Produce ten records to every partition, named by step.
fn produce_step(w: &mut Wire, step: usize, produced: &mut Vec<String>) {
    for p in 0..PARTITIONS {
        let records: Vec<(String, Option<String>)> = (0..10)
            .map(|i| {
                let v = format!("s{step}-p{p}-{i}");
                produced.push(v.clone());
                (v.clone(), Some(v))
            })
            .collect();
        produce(w, "rolling", p, 1_000 + step as i64, &records);
    }
}

/// Every value committed by any member (including ones stopped before).
fn committed(members: &[&Member]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for m in members {
        for l in m.lines() {
            if let Some(v) = l.strip_prefix("committed ") {
                *counts.entry(v.to_string()).or_insert(0) += 1;
            }
        }
    }
    counts
}

#[test]
fn a_classic_group_is_rolled_to_the_consumer_protocol_and_back() {
    let b = TestBroker::start(&["group.initial.rebalance.delay.ms=0"]);
    create_topic(b.port, "rolling", PARTITIONS, &[]);
    let mut w = Wire::connect(b.port);
    let mut produced = Vec::new();
    let mut live: Vec<Member> =
        (0..3).map(|i| start(&b, &format!("m{i}-classic"), "classic")).collect();
    let mut stopped: Vec<Member> = Vec::new();
    // (member, its new protocol, the group's type once it restarted).
    let steps = [
        (0, "consumer", "consumer"),
        (1, "consumer", "consumer"),
        (2, "consumer", "consumer"),
        (0, "classic", "consumer"),
        (1, "classic", "consumer"),
        (2, "classic", "classic"),
    ];
    for step in 0..=steps.len() {
        if step > 0 {
            let (i, protocol, expected_type) = steps[step - 1];
            live[i].stop();
            let name = format!("m{i}-{protocol}-{step}");
            let old = std::mem::replace(&mut live[i], start(&b, &name, protocol));
            let refs: Vec<&Member> = live.iter().collect();
            wait_until(60, "the stopped member to close", &refs, &b, || {
                old.lines().iter().any(|l| l == "closed")
            });
            stopped.push(old);
            produce_step(&mut w, step, &mut produced);
            wait_until(60, &format!("the group to be a {expected_type} group"), &refs, &b, || {
                group_type(&mut w).0 == expected_type
            });
        } else {
            produce_step(&mut w, step, &mut produced);
        }
        let all: Vec<&Member> = live.iter().chain(stopped.iter()).collect();
        let refs: Vec<&Member> = live.iter().collect();
        wait_until(120, &format!("step {step}: every record committed"), &refs, &b, || {
            committed(&all).len() == produced.len()
        });
        wait_until(60, &format!("step {step}: every member to own partitions"), &refs, &b, || {
            let owned: Vec<usize> = live
                .iter()
                .map(|m| {
                    let lines = m.lines();
                    let last = lines.iter().rev().find_map(|l| l.strip_prefix("owned "));
                    last.map_or(0, |ps| ps.split(',').filter(|p| !p.is_empty()).count())
                })
                .collect();
            owned.iter().all(|n| *n == 2)
        });
        // While the group is a consumer group, the members that speak the
        // classic protocol live in it: those not rolled yet, then those
        // rolled back.
        if (1..steps.len()).contains(&step) {
            let classic = step.abs_diff(3);
            let expected = (classic, 3 - classic);
            wait_until(30, &format!("step {step}: member types {expected:?}"), &[], &b, || {
                member_types(&mut w) == expected
            });
        }
    }
    assert_eq!(group_type(&mut w), ("classic".to_string(), "Stable".to_string()));
    let all: Vec<&Member> = live.iter().chain(stopped.iter()).collect();
    let counts = committed(&all);
    let twice: Vec<&String> = counts.iter().filter(|(_, n)| **n > 1).map(|(v, _)| v).collect();
    assert!(twice.is_empty(), "committed more than once: {twice:?}");
    let missing: Vec<&String> = produced.iter().filter(|v| !counts.contains_key(*v)).collect();
    assert!(missing.is_empty(), "never committed: {missing:?}");
    assert_eq!(counts.len(), produced.len());
    // Kafka 4.4's consumers commit and fetch by topic id (v10).
    if std::env::var("KAFKA_VERSION").is_ok_and(|v| v == "4.4.0") {
        for api in ["OffsetCommit", "OffsetFetch"] {
            let v10 = format!(
                "kafka_network_requestmetrics_requests_total{{request=\"{api}\",version=\"10\"}}"
            );
            assert!(b.metrics().contains(&v10), "{api} v10 served");
        }
    }
}

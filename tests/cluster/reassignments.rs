//! `kafka-reassign-partitions` (AlterPartitionReassignments and
//! ListPartitionReassignments) against real brokers: a compacted topic on
//! brokers 1-3 moves to broker 4, started after it. While broker 4 is
//! paused the reassignment it is in cannot complete, is listed with its
//! adding and removing replicas, and is cancelled; refused requests change
//! nothing. Then the tool's `--execute` and `--verify` move both partitions
//! (one away from its leader), broker 1 deletes the copies it no longer
//! holds, `kafka-leader-election --election-type PREFERRED` hands the other
//! to broker 4, and every replica's own segments, read by Kafka's
//! DumpLogSegments, hold the same latest value of every key.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::list_partition_reassignments_response::OngoingTopicReassignment;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ListPartitionReassignmentsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::broker::etcd::EtcdServer;
use crate::broker::{
    console_produce_keyed, fetch_all, kafka_tool, kafka_tool_output, TestBroker, Wire,
};
use crate::common::{files_with, kafka_dump_log};
use crate::support::{placement, signal, start_cluster_with, start_with, wait_placement, TOPICS};

const REASSIGN: &str = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
const ELECTION: &str = "org.apache.kafka.tools.LeaderElectionCommand";
const NO_REBALANCE: &[&str] = &["auto.leader.rebalance.enable=false"];

/// One AlterPartitionReassignments of partition `p` of "moved" (`None`:
/// cancel) at `version`: (top-level error, partition error).
fn alter(port: u16, version: i16, p: i32, target: Option<&[i32]>, allow: bool) -> (i16, i16) {
    let replicas = target.map(|t| t.iter().copied().map(BrokerId).collect());
    let request = AlterPartitionReassignmentsRequest::default()
        .with_allow_replication_factor_change(allow)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("moved")))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(p)
                .with_replicas(replicas)])]);
    let r = Wire::connect(port).call(version, &request);
    (r.error_code, r.responses[0].partitions[0].error_code)
}

/// A reassignment listed: (partition, replicas, adding, removing).
type Listed = (i32, Vec<i32>, Vec<i32>, Vec<i32>);

/// The reassignments going on.
fn listed(port: u16) -> Vec<Listed> {
    let r = Wire::connect(port).call(0, &ListPartitionReassignmentsRequest::default());
    assert_eq!(r.error_code, 0);
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    let topics: &[OngoingTopicReassignment] = &r.topics;
    topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            let (r, a, rm) = (ids(&p.replicas), ids(&p.adding_replicas), ids(&p.removing_replicas));
            (p.partition_index, r, a, rm)
        })
        .collect()
}

fn sorted(mut v: Vec<i32>) -> Vec<i32> {
    v.sort_unstable();
    v
}

fn reassign(b: &TestBroker, action: &str, file: &std::path::Path) -> (bool, String) {
    let bootstrap = b.bootstrap();
    let file = file.display().to_string();
    let args = ["--bootstrap-server", &bootstrap, action, "--reassignment-json-file", &file];
    let (ok, out, err) = kafka_tool_output(REASSIGN, &args, None);
    (ok, out + &err)
}

/// The latest value of every key of "moved", each partition read from
/// broker `port` (its leader).
fn latest(port: u16, partitions: &[i32]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for p in partitions {
        for (_, k, v) in fetch_all(port, "moved", *p) {
            if let (Some(k), Some(v)) = (k, v) {
                out.insert(k, v);
            }
        }
    }
    out
}

#[test]
fn a_compacted_partition_moves_to_a_broker_that_joined_later() {
    let etcd = EtcdServer::start();
    let brokers = start_cluster_with(&etcd, 3, NO_REBALANCE);
    let port = brokers[0].port;
    let bootstrap = brokers[0].bootstrap();
    let args = [
        "--bootstrap-server",
        &bootstrap,
        "--create",
        "--topic",
        "moved",
        "--replica-assignment",
        "1:2:3,2:3:1",
        "--config",
        "cleanup.policy=compact",
        "--config",
        "min.insync.replicas=2",
    ];
    kafka_tool(&brokers[0], TOPICS, &args, None);
    wait_placement(port, "moved", "both in sync", |p| p.values().all(|e| e.3.len() == 3));
    let first: String = (0..40).map(|i| format!("k{i}:a{i}\n")).collect();
    let second: String = (0..40).map(|i| format!("k{i}:b{i}\n")).collect();
    console_produce_keyed(&brokers[0], "moved", ":", &first);
    console_produce_keyed(&brokers[0], "moved", ":", &second);

    let fourth = start_with(&etcd, 4, NO_REBALANCE);
    brokers[0].wait_for(20, "broker 4 registered", || {
        let request =
            kafka_protocol::messages::MetadataRequest::default().with_topics(Some(vec![]));
        (Wire::connect(port).call(12, &request).brokers.len() == 4).then_some(())
    });

    // Refused: a broker that is not registered, a factor change v1 does not
    // allow, a partition that does not exist, a cancel of nothing.
    let before = placement(port, "moved");
    assert_eq!(alter(port, 0, 0, Some(&[9, 2, 3]), true), (0, 39), "INVALID_REPLICA_ASSIGNMENT");
    assert_eq!(alter(port, 0, 0, Some(&[4, 4, 3]), true), (0, 39), "a broker twice");
    assert_eq!(alter(port, 1, 0, Some(&[4, 2]), false), (0, 38), "INVALID_REPLICATION_FACTOR");
    assert_eq!(alter(port, 0, 7, Some(&[4, 2, 3]), true), (0, 3), "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(alter(port, 0, 0, None, true), (0, 85), "NO_REASSIGNMENT_IN_PROGRESS");
    assert_eq!(placement(port, "moved"), before, "nothing changed");
    assert!(listed(port).is_empty());

    // Broker 4 paused: a move onto it cannot complete; it is listed, then
    // cancelled (well inside broker 4's 6 s session).
    signal(&fourth, "STOP");
    assert_eq!(alter(port, 0, 0, Some(&[4, 2, 3]), true), (0, 0));
    assert_eq!(listed(port), vec![(0, vec![4, 2, 3, 1], vec![4], vec![1])]);
    assert_eq!(placement(port, "moved")[&0].2, vec![4, 2, 3, 1], "Metadata lists every replica");
    // Its leader (1) counts it as reassigning, not as under-replicated.
    let gauges = |b: &TestBroker| {
        let m = |name: &str| b.metric(&format!("kafka_server_replicamanager_{name}"));
        (m("reassigningpartitions"), m("underreplicatedpartitions"))
    };
    brokers[0].wait_for(10, "the reassigning gauge", || {
        (gauges(&brokers[0]) == (Some(1.0), Some(0.0))).then_some(())
    });
    assert_eq!(alter(port, 0, 0, None, true), (0, 0), "cancelled");
    brokers[0].wait_for(10, "the reassigning gauge back to 0", || {
        (gauges(&brokers[0]).0 == Some(0.0)).then_some(())
    });
    signal(&fourth, "CONT");
    assert!(listed(port).is_empty());
    let back = placement(port, "moved");
    assert_eq!((back[&0].0, sorted(back[&0].2.clone())), (1, vec![1, 2, 3]), "{back:?}");

    // Both partitions onto [4, 2, 3]: partition 0 loses its leader (1),
    // partition 1 a follower (1); its leader 2 stays.
    let file = fourth.data_dir().parent().unwrap().join("reassignment.json");
    let json = r#"{"version":1,"partitions":[
        {"topic":"moved","partition":0,"replicas":[4,2,3]},
        {"topic":"moved","partition":1,"replicas":[4,2,3]}]}"#;
    std::fs::write(&file, json).unwrap();
    let (ok, out) = reassign(&brokers[1], "--execute", &file);
    assert!(
        ok && out.contains("Successfully started partition reassignments for moved-0,moved-1"),
        "{out}"
    );
    brokers[1].wait_for(60, "the reassignment verified complete", || {
        let (ok, out) = reassign(&brokers[1], "--verify", &file);
        let done = ["moved-0", "moved-1"]
            .iter()
            .all(|p| out.contains(&format!("Reassignment of partition {p} is completed.")));
        (ok && done).then_some(())
    });
    let moved = placement(port, "moved");
    for p in [0, 1] {
        assert_eq!((&moved[&p].2, sorted(moved[&p].3.clone())), (&vec![4, 2, 3], vec![2, 3, 4]));
    }
    assert_eq!((moved[&0].0, moved[&1].0), (4, 2), "{moved:?}");
    brokers[0].wait_for(30, "broker 1's copies deleted", || {
        let dir = brokers[0].data_dir();
        (!dir.join("moved-0").exists() && !dir.join("moved-1").exists()).then_some(())
    });

    let elect = [
        "--bootstrap-server",
        &bootstrap,
        "--election-type",
        "PREFERRED",
        "--topic",
        "moved",
        "--partition",
        "1",
    ];
    let out = kafka_tool(&brokers[0], ELECTION, &elect, None);
    assert!(out.contains("Successfully completed leader election"), "{out}");
    wait_placement(port, "moved", "broker 4 leads both", |p| p.values().all(|e| e.0 == 4));

    let want: BTreeMap<String, String> =
        (0..40).map(|i| (format!("k{i}"), format!("b{i}"))).collect();
    assert_eq!(latest(fourth.port, &[0, 1]), want, "the latest value of every key on broker 4");
    // Every replica's own segments, as Kafka's DumpLogSegments reads them,
    // hold the same latest value of every key.
    let replicas = [&fourth, &brokers[1], &brokers[2]];
    for p in [0, 1] {
        let want = latest(fourth.port, &[p]);
        assert!(!want.is_empty());
        for b in replicas {
            b.wait_for(30, "the replica holding the latest value of every key", || {
                (dumped_latest(&b.data_dir().join(format!("moved-{p}"))) == want).then_some(())
            });
        }
    }
}

/// The latest value of each key in the segments of partition dir `dir`,
/// as Kafka's DumpLogSegments prints them.
fn dumped_latest(dir: &std::path::Path) -> BTreeMap<String, String> {
    let logs = files_with(dir, "log");
    let dump = kafka_dump_log(&logs, &["--deep-iteration", "--print-data-log"]);
    let mut out = BTreeMap::new();
    for line in dump.lines().filter(|l| l.starts_with("| offset: ")) {
        let Some((_, kv)) = line.split_once(" key: ") else { continue };
        if let Some((k, v)) = kv.split_once(" payload: ") {
            out.insert(k.to_string(), v.to_string());
        }
    }
    out
}

//! Replication throttles (KIP-73) as `kafka-reassign-partitions --throttle`
//! sets them: a partition of 600 KB on broker 1 gains a replica on broker
//! 2 at 20 KB/s. The tool's throttle shows as Kafka's broker and topic
//! configs; while both sides are throttled, and then with only the leader's
//! left, the new replica grows at the throttle's pace (a few tens of KB in
//! three seconds where unthrottled it copies everything at once) and the
//! byte-rate gauges measure it; once the leader's throttle is lifted the
//! move completes, every byte on broker 2, and `--verify` removes every
//! throttle.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::broker::etcd::EtcdServer;
use crate::broker::{kafka_tool, kafka_tool_output, produce, TestBroker, Wire};
use crate::support::{start_cluster_with, wait_placement, TOPICS};

const REASSIGN: &str = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
const CONFIGS: &str = "kafka.admin.ConfigCommand";
/// Bytes per second of the throttle.
const RATE: u64 = 20_000;
/// Small fetches and a one-second measuring window, so the throttle's
/// steps are small next to what is copied.
const SETTINGS: &[&str] = &[
    "auto.leader.rebalance.enable=false",
    "replica.fetch.max.bytes=16384",
    "replication.quota.window.num=2",
    "replication.quota.window.size.seconds=1",
];

/// Bytes of the segment files of `topic-0` on `b`.
fn replica_bytes(b: &TestBroker, topic: &str) -> u64 {
    let dir = b.data_dir().join(format!("{topic}-0"));
    std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// How much broker 2's replica grows over three seconds, asserting it
/// does not complete meanwhile.
fn growth_over_three_seconds(follower: &TestBroker, total: u64) -> u64 {
    let before = replica_bytes(follower, "slow");
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        assert!(replica_bytes(follower, "slow") < total, "the copy finished while throttled");
        std::thread::sleep(Duration::from_millis(200));
    }
    replica_bytes(follower, "slow") - before
}

fn configs(b: &TestBroker, args: &[&str]) -> String {
    let bootstrap = b.bootstrap();
    let mut all = vec!["--bootstrap-server", &bootstrap];
    all.extend_from_slice(args);
    kafka_tool(b, CONFIGS, &all, None)
}

fn reassign(b: &TestBroker, args: &[&str], file: &Path) -> (bool, String) {
    let bootstrap = b.bootstrap();
    let file = file.display().to_string();
    let mut all = vec!["--bootstrap-server", &bootstrap, "--reassignment-json-file", &file];
    all.extend_from_slice(args);
    let (ok, out, err) = kafka_tool_output(REASSIGN, &all, None);
    (ok, out + &err)
}

#[test]
fn a_throttled_reassignment_copies_at_the_throttles_pace() {
    let etcd = EtcdServer::start();
    let brokers = start_cluster_with(&etcd, 2, SETTINGS);
    let (leader, follower) = (&brokers[0], &brokers[1]);
    let bootstrap = leader.bootstrap();
    let create = ["--bootstrap-server", &bootstrap, "--create", "--topic", "slow"];
    kafka_tool(leader, TOPICS, &[&create[..], &["--replica-assignment", "1"]].concat(), None);
    wait_placement(leader.port, "slow", "led by broker 1", |p| p.get(&0).is_some_and(|e| e.0 == 1));
    let mut w = Wire::connect(leader.port);
    let value = "v".repeat(2000);
    for batch in 0..30 {
        let records: Vec<(String, Option<String>)> =
            (0..10).map(|i| (format!("k{batch}-{i}"), Some(value.clone()))).collect();
        produce(&mut w, "slow", 0, 1_700_000_000_000, &records);
    }
    let total = replica_bytes(leader, "slow");
    assert!(total > 600_000, "{total}");

    let file = follower.data_dir().parent().unwrap().join("throttled-move.json");
    let json = r#"{"version":1,"partitions":[{"topic":"slow","partition":0,"replicas":[1,2]}]}"#;
    std::fs::write(&file, json).unwrap();
    let (ok, out) = reassign(leader, &["--execute", "--throttle", &RATE.to_string()], &file);
    assert!(ok && out.contains("20000 B/s"), "{out}");

    // The tool's throttle, as Kafka's configs (every broker's dynamic ones).
    let described = configs(leader, &["--describe", "--entity-type", "brokers"]);
    for id in ["1", "2"] {
        let broker = described
            .split("Dynamic configs for broker ")
            .find(|part| part.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("broker {id}: {described}"));
        for side in ["leader", "follower"] {
            let line = format!("{side}.replication.throttled.rate=20000");
            assert!(broker.contains(&line), "broker {id}: {described}");
        }
    }
    let topic =
        configs(leader, &["--describe", "--entity-type", "topics", "--entity-name", "slow"]);
    assert!(topic.contains("leader.replication.throttled.replicas=0:1"), "{topic}");
    assert!(topic.contains("follower.replication.throttled.replicas=0:2"), "{topic}");

    // Both sides throttled: the copy starts, then moves at the rate's pace.
    follower
        .wait_for(30, "broker 2 copying", || (replica_bytes(follower, "slow") > 0).then_some(()));
    let grown = growth_over_three_seconds(follower, total);
    assert!(grown < 150_000, "{grown} bytes in 3 s at {RATE} B/s");
    let rate = |b: &TestBroker, side: &str| {
        b.metric(&format!("kafka_server_{side}replication_byte_rate")).unwrap_or(0.0)
    };
    assert!(rate(leader, "leader") > 0.0 && rate(follower, "follower") > 0.0);
    assert!(rate(follower, "follower") < 3.0 * RATE as f64, "{}", rate(follower, "follower"));

    // Only the leader's throttle left: it alone holds the copy back.
    let delete = |id: &str, key: &str| {
        let args =
            ["--alter", "--entity-type", "brokers", "--entity-name", id, "--delete-config", key];
        configs(leader, &args);
    };
    delete("2", "follower.replication.throttled.rate");
    let grown = growth_over_three_seconds(follower, total);
    assert!(grown < 150_000, "{grown} bytes in 3 s with the leader's throttle alone");
    assert!(rate(leader, "leader") < 3.0 * RATE as f64, "{}", rate(leader, "leader"));

    // Lifted: the move completes, and --verify removes the throttles.
    delete("1", "leader.replication.throttled.rate");
    leader.wait_for(60, "the throttled move verified complete", || {
        let (ok, out) = reassign(leader, &["--verify"], &file);
        (ok && out.contains("Reassignment of partition slow-0 is completed.")).then_some(out)
    });
    assert_eq!(replica_bytes(follower, "slow"), total, "every byte copied");
    let described = configs(leader, &["--describe", "--entity-type", "brokers"]);
    assert!(!described.contains("replication.throttled.rate"), "{described}");
    let topic =
        configs(leader, &["--describe", "--entity-type", "topics", "--entity-name", "slow"]);
    assert!(!topic.contains("throttled.replicas"), "{topic}");
}

//! The resurrection guard across brokers (docs/design/multi-broker.md,
//! 8.4): the guarded partition lives on broker 1, the group that reads it is
//! coordinated by broker 2. Broker 1's cleaner asks broker 2's coordinator
//! (ListGroups, OffsetFetch), so a tombstone the group has not read stays
//! past its horizon and shows at risk for the group on broker 1, and goes
//! once the group commits beyond it. With broker 2 killed, its groups
//! cannot be read: tombstones stay even though the group had read them,
//! until broker 2 is back and answers.

use std::process::Command;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, GroupId, OffsetCommitRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;

use crate::broker::etcd::EtcdServer;
use crate::broker::{http_get, metric_value, now_ms, produce, TestBroker, Wire};
use crate::support::{find_coordinator, start_cluster_with, wait_placement};

const RETENTION_MS: i64 = 1_000;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A group id coordinated by broker `node`.
fn group_on(port: u16, node: i32) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0.. {
        let group = format!("slow-{i}");
        // The first asks create __consumer_offsets; its leaders come soon after.
        loop {
            match find_coordinator(port, &group, 0) {
                Ok(n) if n == node => return group,
                Ok(_) => break,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(code) => panic!("FindCoordinator {group}: error {code}"),
            }
        }
    }
    unreachable!()
}

/// "guarded" on broker 1 alone, compacted, its tombstones guarded (a
/// sediment key, which kafka-topics would refuse before asking).
fn create_guarded(port: u16) {
    let configs = [
        ("cleanup.policy", "compact".to_string()),
        ("segment.bytes", "100".to_string()),
        ("min.cleanable.dirty.ratio", "0.01".to_string()),
        ("delete.retention.ms", RETENTION_MS.to_string()),
        ("sediment.tombstone.retention.wait.for.groups", "true".to_string()),
    ];
    let topic = CreatableTopic::default()
        .with_name(TopicName(s("guarded")))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_assignments(vec![CreatableReplicaAssignment::default()
            .with_partition_index(0)
            .with_broker_ids(vec![BrokerId(1)])])
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default().with_name(s(k)).with_value(Some(s(v)))
                })
                .collect(),
        );
    let request = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let r = Wire::connect(port).call(7, &request);
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
}

/// `group` commits `offset` on guarded-0 at its coordinator `port`.
fn commit(port: u16, group: &str, offset: i64) {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("guarded")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let code = Wire::connect(port).call(8, &request).topics[0].partitions[0].error_code;
        if code == 0 {
            return;
        }
        assert!(code == 14 && Instant::now() < deadline, "OffsetCommit: error {code}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn put(b: &TestBroker, key: &str, value: Option<&str>) {
    let records = [(key.to_string(), value.map(str::to_string))];
    produce(&mut Wire::connect(b.port), "guarded", 0, now_ms(), &records);
}

/// The copies of `key` on `b` as (offset, tombstone, delete horizon).
fn copies(b: &TestBroker, key: &str) -> Vec<(i64, bool, Option<i64>)> {
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let out = Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(["key-audit", "--metrics", &metrics, "--topic", "guarded", "--key", key, "--json"])
        .output()
        .expect("sediment key-audit");
    let a: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let list = a["copies"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|c| {
            (c["offset"].as_i64().unwrap(), c["tombstone"] == true, c["delete_horizon_ms"].as_i64())
        })
        .collect()
}

/// Whether a remembered clean of guarded-0 that started after `after_ms`
/// kept a tombstone past its horizon for the guard.
fn guarded_clean_since(b: &TestBroker, after_ms: i64) -> bool {
    let (_, body) = http_get(b.metrics_port, "/cleaner-status");
    let doc: Value = serde_json::from_str(&body).unwrap();
    doc["manager"]["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["topic"] == "guarded")
        .flat_map(|p| p["history"].as_array().cloned().unwrap_or_default())
        .any(|c| {
            c["start_time_ms"].as_i64().is_some_and(|t| t > after_ms)
                && c["tombstones_guarded"].as_u64().is_some_and(|n| n > 0)
        })
}

/// Wait for `probe`, writing a filler each round so cleans keep coming.
fn wait_for<T>(b: &TestBroker, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}; broker:\n{}", b.log());
        put(b, "filler", Some("x"));
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `key`'s tombstone once stamped: (offset, horizon).
fn stamped(b: &TestBroker, key: &str) -> (i64, i64) {
    wait_for(b, &format!("{key}'s tombstone was never stamped"), || {
        copies(b, key).into_iter().find_map(|c| Some((c.0, c.2?)).filter(|_| c.1))
    })
}

/// A clean after `horizon` kept a tombstone for the guard: `key`'s
/// tombstone at `offset` is still there.
fn kept_past_horizon(b: &TestBroker, key: &str, (offset, horizon): (i64, i64)) {
    wait_for(b, "no clean kept a tombstone past its horizon", || {
        guarded_clean_since(b, horizon).then_some(())
    });
    assert!(
        copies(b, key).iter().any(|c| c.0 == offset),
        "{key}'s tombstone removed under the guard"
    );
}

#[test]
fn the_guard_reads_groups_coordinated_by_other_brokers() {
    let etcd = EtcdServer::start();
    let settings = [
        "log.cleaner.backoff.ms=100",
        "offsets.topic.replication.factor=1",
        "offsets.topic.num.partitions=4",
        "auto.leader.rebalance.enable=false",
    ];
    let mut brokers = start_cluster_with(&etcd, 2, &settings);
    create_guarded(brokers[0].port);
    wait_placement(brokers[0].port, "guarded", "led by 1", |p| p.get(&0).is_some_and(|e| e.0 == 1));
    let group = group_on(brokers[0].port, 2);
    let coordinator = brokers[1].port;

    put(&brokers[0], "K", Some("v"));
    commit(coordinator, &group, 1); // the group read K:v and stops.
    put(&brokers[0], "K", None);
    let k = stamped(&brokers[0], "K");
    kept_past_horizon(&brokers[0], "K", k);
    // Broker 1's views name the group broker 2 coordinates.
    let series = format!("sediment_log_tombstones_at_risk{{group=\"{group}\",topic=\"guarded\"}}");
    wait_for(&brokers[0], "the tombstone never showed at risk on broker 1", || {
        let (_, text) = http_get(brokers[0].metrics_port, "/metrics");
        metric_value(&text, &series).filter(|n| *n >= 1.0)
    });

    // The group reads on: the tombstone goes.
    commit(coordinator, &group, 1_000);
    wait_for(&brokers[0], "K's tombstone stayed after the group read it", || {
        copies(&brokers[0], "K").is_empty().then_some(())
    });

    // Broker 2 gone: its groups cannot be read, so J's tombstone stays
    // although the group is past it; back, broker 2 answers and it goes.
    brokers[1].kill();
    put(&brokers[0], "J", Some("v"));
    put(&brokers[0], "J", None);
    let j = stamped(&brokers[0], "J");
    kept_past_horizon(&brokers[0], "J", j);
    brokers[1].restart();
    wait_for(&brokers[0], "J's tombstone stayed once broker 2 answered", || {
        copies(&brokers[0], "J").is_empty().then_some(())
    });
}

//! The resurrection guard end to end: records from kcat, offsets committed
//! by a consumer group over the wire. A tombstone the group has not read
//! shows at risk in /metrics while its horizon runs; with
//! `sediment.tombstone.retention.wait.for.groups=true` it outlives its
//! horizon until the group commits beyond it, and a tombstone the group
//! never reaches goes at `sediment.tombstone.retention.max.wait.ms`.

use crate::broker;

use std::process::Command;
use std::time::{Duration, Instant};

use crate::broker::txn::s;
use crate::broker::{create_topic, kcat, metric_value, TestBroker, Wire};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use serde_json::Value;

const RETENTION_MS: i64 = 2_000;
const MAX_WAIT_MS: i64 = 8_000;

fn produce(b: &TestBroker, lines: &[&str]) {
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let args =
        ["-P", "-b", &b.bootstrap(), "-t", "guarded", "-K:", "-Z", "-X", "batch.num.messages=1"];
    let (ok, _, err) = kcat(&args, &input);
    assert!(ok, "kcat: {err}");
}

/// The group `slow` commits `offset` on guarded-0 (a simple commit, as a
/// consumer with manual assignment does).
fn commit(b: &TestBroker, offset: i64) {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("slow")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("guarded")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = Wire::connect(b.port).call(8, &request);
        let code = r.topics[0].partitions[0].error_code;
        if code == 0 {
            return;
        }
        assert!(code == 14 && Instant::now() < deadline, "OffsetCommit: error {code}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn audit(b: &TestBroker, key: &str) -> Value {
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let out = Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(["key-audit", "--metrics", &metrics, "--topic", "guarded", "--key", key, "--json"])
        .output()
        .expect("sediment key-audit");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

/// The copies of `key` as (offset, tombstone, delete horizon).
fn copies(b: &TestBroker, key: &str) -> Vec<(i64, bool, Option<i64>)> {
    let a = audit(b, key);
    let list = a["copies"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|c| {
            let offset = c["offset"].as_i64().unwrap();
            (offset, c["tombstone"] == true, c["delete_horizon_ms"].as_i64())
        })
        .collect()
}

fn wait_for<T>(b: &TestBroker, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}; broker:\n{}", b.log());
        // More writes keep the partition dirty, so cleans keep coming.
        produce(b, &["filler:x"]);
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn now_ms() -> i64 {
    broker::now_ms()
}

#[test]
fn a_guarded_tombstone_waits_for_the_group_then_the_cap() {
    let b = TestBroker::start(&["log.cleaner.backoff.ms=100"]);
    let config = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "100"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("delete.retention.ms", &RETENTION_MS.to_string()),
        ("sediment.tombstone.retention.wait.for.groups", "true"),
        ("sediment.tombstone.retention.max.wait.ms", &MAX_WAIT_MS.to_string()),
    ];
    create_topic(b.port, "guarded", 1, &config);
    produce(&b, &["K:v"]);
    commit(&b, 1); // slow has read K:v and stops.
    produce(&b, &["K:", "filler:x"]);

    // The clean that stamps K's tombstone puts it at risk for slow.
    let series = "sediment_log_tombstones_at_risk{group=\"slow\",topic=\"guarded\"}";
    let horizon_series =
        "sediment_log_tombstones_at_risk_horizon_seconds{group=\"slow\",topic=\"guarded\"}";
    let (at_risk, horizon_secs) = wait_for(&b, "K's tombstone never showed at risk", || {
        let (_, text) = broker::http_get(b.metrics_port, "/metrics");
        Some((metric_value(&text, series)?, metric_value(&text, horizon_series)?))
    });
    assert!(at_risk >= 1.0, "{at_risk}");
    assert!(horizon_secs <= RETENTION_MS as f64 / 1000.0, "{horizon_secs}");
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let out = Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(["cleaner-status", "--metrics", &metrics, "--partition", "guarded-0"])
        .output()
        .expect("sediment cleaner-status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("at risk for group \"slow\" (committed offset 1)"), "{text}");
    let tombstone = wait_for(&b, "K's tombstone was never stamped", || {
        copies(&b, "K").into_iter().find(|c| c.1 && c.2.is_some())
    });
    let horizon = tombstone.2.unwrap();

    // Past its horizon, with cleans going on, it stays: slow is at offset 1.
    wait_for(&b, "no clean kept the tombstone for slow", || {
        let past = now_ms() > horizon + 1_000;
        (past && guarded_cleans(&b) > 0).then_some(())
    });
    assert!(copies(&b, "K").iter().any(|c| c.0 == tombstone.0), "removed under the guard");

    // slow commits beyond it: the next clean removes it.
    commit(&b, tombstone.0 + 1);
    wait_for(&b, "the tombstone stayed after slow read it", || {
        copies(&b, "K").is_empty().then_some(())
    });

    // A tombstone slow never reaches goes at the cap.
    produce(&b, &["J:v", "J:", "filler:x"]);
    let j = wait_for(&b, "J's tombstone was never stamped", || {
        copies(&b, "J").into_iter().find(|c| c.1 && c.2.is_some())
    });
    let j_horizon = j.2.unwrap();
    wait_for(&b, "J's tombstone outlived the cap", || copies(&b, "J").is_empty().then_some(()));
    assert!(now_ms() >= j_horizon + MAX_WAIT_MS, "removed before the cap");
}

/// Tombstones kept past their horizon by the partition's remembered cleans.
fn guarded_cleans(b: &TestBroker) -> u64 {
    let (_, body) = broker::http_get(b.metrics_port, "/cleaner-status");
    let doc: Value = serde_json::from_str(&body).unwrap();
    doc["manager"]["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["topic"] == "guarded")
        .flat_map(|p| p["history"].as_array().cloned().unwrap_or_default())
        .map(|c| c["tombstones_guarded"].as_u64().unwrap_or(0))
        .sum()
}

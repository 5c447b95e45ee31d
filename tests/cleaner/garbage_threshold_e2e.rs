//! `sediment.compaction.min.segment.garbage.ratio` on a running broker fed
//! by kcat (librdkafka): an update leaves its old copy listed in a kept
//! segment, the key audit names the copy and gives it its deadline
//! (`max.compaction.lag.ms` after the dirty range the clean mapped), and the
//! copy is gone when that deadline passes; a tombstone over a listed copy
//! removes both, and a reader from the beginning never sees the key again.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::broker::{create_topic, kcat, TestBroker};
use serde_json::Value;

const MAX_LAG_MS: i64 = 6_000;
const DELETE_RETENTION_MS: i64 = 1_500;
const BACKOFF_MS: i64 = 100;
/// How late past its audited deadline a copy may still be seen: the
/// manager's look (the backoff), the clean, and this test's polling.
const SLACK_MS: i64 = 5_000;

fn sediment(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sediment")).args(args).output().expect("sediment");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn audit(b: &TestBroker, key: &str) -> Value {
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let args = ["key-audit", "--metrics", &metrics, "--topic", "table", "--key", key, "--json"];
    let (code, out) = sediment(&args);
    assert!(code == 0 || code == 4, "key-audit exit {code}: {out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn copies(a: &Value) -> Vec<Value> {
    a["copies"].as_array().cloned().unwrap_or_default()
}

fn wait_audit(b: &TestBroker, key: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = audit(b, key);
        if done(&a) {
            return a;
        }
        assert!(Instant::now() < deadline, "{what}; last audit:\n{a:#}\nbroker:\n{}", b.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One record per batch, keyed with the Java client's partitioner.
fn produce(b: &TestBroker, lines: &[String]) {
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let bootstrap = b.bootstrap();
    let args = ["-P", "-b", &bootstrap, "-t", "table", "-K:", "-Z", "-X", "batch.num.messages=1"];
    let (ok, _, err) = kcat(&args, &input);
    assert!(ok, "kcat: {err}");
}

/// Distinct filler keys that fill and roll the active segment.
fn fillers(tag: &str) -> Vec<String> {
    (0..16).map(|i| format!("filler-{tag}-{i}:{}", "f".repeat(40))).collect()
}

fn last_clean(b: &TestBroker) -> Value {
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let args = ["cleaner-status", "--metrics", &metrics, "--partition", "table-0", "--json"];
    let (code, out) = sediment(&args);
    assert_eq!(code, 0, "{out}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    doc["manager"]["partitions"][0].clone()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

#[test]
fn a_listed_copy_leaves_by_its_deadline_and_a_deleted_key_never_returns() {
    let b = TestBroker::start(&[&format!("log.cleaner.backoff.ms={BACKOFF_MS}")]);
    let config = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "1200"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("max.compaction.lag.ms", &MAX_LAG_MS.to_string()),
        ("delete.retention.ms", &DELETE_RETENTION_MS.to_string()),
        ("sediment.compaction.min.segment.garbage.ratio", "0.5"),
    ];
    create_topic(b.port, "table", 1, &config);
    let rows: Vec<String> = (0..40).map(|i| format!("row-{i}:{}", "v".repeat(40))).collect();
    produce(&b, &[rows, fillers("a")].concat());
    wait_audit(&b, "row-0", "the first clean never covered row-0", |a| {
        copies(a).len() == 1 && copies(a)[0]["region"] == "clean"
    });

    // One row updated and one deleted: their old copies share segments
    // with live rows, so the clean keeps those segments and lists them.
    produce(&b, &[vec!["row-0:updated".to_string(), "row-35:".to_string()], fillers("b")].concat());
    let a = wait_audit(&b, "row-0", "the update was never mapped", |a| {
        copies(a).len() == 2 && copies(a).iter().all(|c| c["region"] == "clean")
    });
    let old = &copies(&a)[0];
    assert_eq!(old["superseded"], true, "{a:#}");
    assert_eq!(old["listed_stale"], true, "kept and listed: {a:#}");
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let text = ["key-audit", "--metrics", &metrics, "--topic", "table", "--key", "row-0"];
    let (_, text) = sediment(&text);
    assert!(
        text.contains("superseded, listed in a segment kept under the garbage ratio"),
        "{text}"
    );
    let newest_ts = copies(&a)[1]["timestamp_ms"].as_i64().unwrap();
    let gone_by = old["gone_by_ms"].as_i64().unwrap_or_else(|| panic!("no deadline: {a:#}"));
    assert!(gone_by <= newest_ts + MAX_LAG_MS + BACKOFF_MS, "{gone_by} {newest_ts}: {a:#}");
    let status = last_clean(&b);
    let kept: u64 = status["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["segments_kept_under_ratio"].as_u64().unwrap())
        .sum();
    assert!(kept >= 1, "no segment was kept under the ratio: {status:#}");
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let (_, text) = sediment(&["cleaner-status", "--metrics", &metrics, "--partition", "table-0"]);
    assert!(text.contains("segment garbage ratio 0.5: the last clean kept"), "{text}");

    // The deleted row: its tombstone waits for its listed copy, then both go.
    wait_audit(&b, "row-35", "the deleted row's copies never left", |a| copies(a).is_empty());
    // The updated row's old copy: gone by the deadline the audit gave.
    let a =
        wait_audit(&b, "row-0", "the listed copy outlived its deadline", |a| copies(a).len() == 1);
    let seen_at = now_ms();
    assert!(seen_at <= gone_by + SLACK_MS, "gone at {seen_at}, promised by {gone_by}");
    assert_eq!(copies(&a)[0]["value_bytes"], 7, "{a:#}");

    // A reader from the beginning: every row once, row-0 updated, row-35 gone.
    let bootstrap = b.bootstrap();
    let args = ["-C", "-b", &bootstrap, "-t", "table", "-o", "beginning", "-e", "-f", "%k=%s\n"];
    let (ok, out, err) = kcat(&args, "");
    assert!(ok, "kcat: {err}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("row-")).collect();
    assert!(rows.contains(&"row-0=updated"), "{out}");
    assert!(!rows.iter().any(|l| l.starts_with("row-35=")), "row-35 came back:\n{out}");
    assert_eq!(rows.len(), 39, "one copy per row:\n{out}");
}

//! `sediment key-audit` and `/key-audit` against a running broker fed by
//! kcat (librdkafka), then from the stopped broker's data dir: the copies of
//! a key, their regions, the guarantee derived from `max.compaction.lag.ms`,
//! the cleaner removing what the audit said it would, a tombstone's horizon
//! through to its expiry, and a distinct exit code for each kind of bad input.

use crate::broker;

use std::process::Command;
use std::time::{Duration, Instant};

use crate::broker::remote::alter_topic;
use crate::broker::{create_topic, kcat, TestBroker};
use serde_json::Value;

// Long enough that the first audit comes before the clean it predicts.
const MAX_LAG_MS: i64 = 8_000;
const DELETE_RETENTION_MS: i64 = 2_000;
const BACKOFF_MS: i64 = 100;

fn sediment(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sediment")).args(args).output().expect("sediment");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The broker's audit of `key` in `topic`, through the CLI's `--json`.
fn audit(b: &TestBroker, topic: &str, key: &str) -> Value {
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let args = ["key-audit", "--metrics", &metrics, "--topic", topic, "--key", key, "--json"];
    let (code, out, err) = sediment(&args);
    assert!(code == 0 || code == 4, "key-audit exit {code}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Produce `key:value` lines (`key:` is a tombstone) with the Java client's partitioner.
fn produce(b: &TestBroker, topic: &str, lines: &[&str]) {
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let args = [
        "-P",
        "-b",
        &b.bootstrap(),
        "-t",
        topic,
        "-K:",
        "-Z",
        "-X",
        "topic.partitioner=murmur2_random",
        // One record per batch, so small segments hold one copy each.
        "-X",
        "batch.num.messages=1",
    ];
    let (ok, _, err) = kcat(&args, &input);
    assert!(ok, "kcat: {err}");
}

fn copies(a: &Value) -> &Vec<Value> {
    a["copies"].as_array().expect("copies")
}

/// Poll the audit until `done`, for at most 60 s.
fn wait_audit(
    b: &TestBroker,
    topic: &str,
    key: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = audit(b, topic, key);
        if done(&a) {
            return a;
        }
        assert!(Instant::now() < deadline, "{what}; last audit:\n{a:#}\nbroker:\n{}", b.log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_key_is_audited_through_compaction_and_erasure() {
    let mut b = TestBroker::start(&[&format!("log.cleaner.backoff.ms={BACKOFF_MS}")]);
    let topic_config = [
        ("cleanup.policy", "compact"),
        // Every batch in its own segment; only the max lag starts a clean.
        ("segment.bytes", "100"),
        ("min.cleanable.dirty.ratio", "1"),
        ("max.compaction.lag.ms", &MAX_LAG_MS.to_string()),
        ("delete.retention.ms", &DELETE_RETENTION_MS.to_string()),
    ];
    create_topic(b.port, "state", 1, &topic_config);
    produce(&b, "state", &["K:v1", "K:v2", "K:v3", "K:v4", "K:v5", "filler:x"]);

    let a = audit(&b, "state", "K");
    let c = copies(&a);
    assert_eq!(c.len(), 5, "{a:#}");
    assert_eq!(c.iter().filter(|c| c["superseded"] == true).count(), 4);
    assert_eq!(a["verdict"], "pending");
    // The newest copy opens its own segment: the clean is due max.compaction.lag.ms after it.
    let newest_ts = c[4]["timestamp_ms"].as_i64().unwrap();
    assert_eq!(a["guaranteed_by_ms"].as_i64(), Some(newest_ts + MAX_LAG_MS + BACKOFF_MS), "{a:#}");

    let a = wait_audit(&b, "state", "K", "the cleaner never removed the superseded copies", |a| {
        copies(a).len() == 1
    });
    assert_eq!(a["verdict"], "live");
    assert_eq!(copies(&a)[0]["region"], "clean");

    // Held still while the tombstone is audited: `filler:x`, left dirty in
    // what was the active segment, is already past the max lag, so the
    // tombstone's append would make a clean due within the backoff and the
    // audit would race it. With no max lag (and a ratio of 1) nothing is due;
    // the cleaner reads the topic's config at each decision.
    let hold = [("max.compaction.lag.ms", "9223372036854775807")];
    assert_eq!(alter_topic(b.port, "state", &hold), 0);
    produce(&b, "state", &["K:", "filler:y"]);
    let a = audit(&b, "state", "K");
    assert_eq!(a["verdict"], "pending", "{a:#}");
    let lag = MAX_LAG_MS.to_string();
    assert_eq!(alter_topic(b.port, "state", &[("max.compaction.lag.ms", &lag)]), 0);
    let a = wait_audit(&b, "state", "K", "the tombstone's horizon was never stamped", |a| {
        copies(a).len() == 1 && copies(a)[0]["delete_horizon_ms"].is_i64()
    });
    assert_eq!(a["verdict"], "erased");
    let tombstone = &copies(&a)[0];
    assert_eq!(tombstone["tombstone"], true);
    let horizon = tombstone["delete_horizon_ms"].as_i64().unwrap();
    // The audit's rule: gone by the later of the horizon and now, plus a backoff
    // (a poll that came after the horizon sees now).
    let now = a["now_ms"].as_i64().expect("now_ms");
    assert_eq!(tombstone["gone_by_ms"].as_i64(), Some(horizon.max(now) + BACKOFF_MS));
    wait_audit(&b, "state", "K", "the tombstone outlived its horizon", |a| copies(a).is_empty());

    // The partition's clean history shows the clean that stamped the
    // tombstone's horizon and the later one that removed it.
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let status = ["cleaner-status", "--metrics", &metrics, "--partition", "state-0"];
    let (code, out, err) = sediment(&[&status[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    let parts = doc["manager"]["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 1, "only state-0");
    let history = parts[0]["history"].as_array().unwrap();
    let count = |field: &str| history.iter().map(|c| c[field].as_u64().unwrap()).sum::<u64>();
    assert!(count("horizons_stamped") >= 1 && count("tombstones_removed") >= 1, "{history:#?}");
    let starts: Vec<i64> = history.iter().map(|c| c["start_time_ms"].as_i64().unwrap()).collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "oldest first: {starts:?}");
    let (_, text, _) = sediment(&status);
    assert!(text.contains(&format!("last {} clean(s) of state-0", history.len())), "{text}");

    // A stopped broker's data dir gives the same copies and verdict. The
    // cleaner is held still so no clean lands between the two audits.
    assert_eq!(alter_topic(b.port, "state", &hold), 0);
    produce(&b, "state", &["K:w1", "K:w2", "filler:z"]);
    let live = audit(&b, "state", "K");
    b.stop();
    let data = b.data_dir();
    let args = [
        "key-audit",
        "--data-dir",
        data.to_str().unwrap(),
        "--topic",
        "state",
        "--key",
        "K",
        "--json",
    ];
    let (code, out, err) = sediment(&args);
    assert_eq!(code, 0, "{err}");
    let offline: Value = serde_json::from_str(&out).unwrap();
    let summary = |a: &Value| -> Vec<(Value, Value, Value)> {
        copies(a)
            .iter()
            .map(|c| (c["offset"].clone(), c["region"].clone(), c["superseded"].clone()))
            .collect()
    };
    assert_eq!(summary(&offline), summary(&live), "offline:\n{offline:#}\nlive:\n{live:#}");
    assert_eq!(offline["verdict"], live["verdict"]);
    assert_eq!(offline["regions"]["first_dirty_offset"], live["regions"]["first_dirty_offset"]);

    // The person's form names each copy and the verdict.
    let (_, text, _) = sediment(&args[..args.len() - 1]);
    assert!(text.contains("verdict: pending") && text.contains("superseded"), "{text}");

    // A corrupt segment: exit 5, naming the file.
    let dir = data.join("state-0");
    let last = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .unwrap();
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    std::fs::write(&last, bytes).unwrap();
    let (code, _, err) = sediment(&args);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains(&last.file_name().unwrap().to_string_lossy().to_string()), "{err}");
}

#[test]
fn the_default_partition_and_bad_input() {
    let b = TestBroker::start(&[]);
    create_topic(b.port, "six", 6, &[("cleanup.policy", "compact")]);
    create_topic(b.port, "plain", 1, &[]);
    produce(&b, "six", &["user-42:hello"]);
    // The Java client's murmur2 puts "user-42" in partition 4 of 6.
    let a = audit(&b, "six", "user-42");
    assert_eq!(a["partition"], 4);
    assert_eq!(copies(&a).len(), 1, "{a:#}");
    assert_eq!(a["verdict"], "live");

    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let run = |extra: &[&str]| {
        let mut args = vec!["key-audit", "--metrics", &metrics];
        args.extend_from_slice(extra);
        sediment(&args)
    };
    let (code, _, _) = run(&["--topic", "six", "--key", "never-written"]);
    assert_eq!(code, 4, "a key with no copy");
    let (code, _, err) = run(&["--topic", "nope", "--key", "k"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("unknown topic"), "{err}");
    let (code, _, err) = run(&["--topic", "six", "--key", "k", "--partition", "9"]);
    assert_eq!(code, 3, "{err}");
    let (code, _, err) = run(&["--topic", "plain", "--key", "k"]);
    assert_eq!(code, 7, "{err}");
    let (code, _, _) =
        sediment(&["key-audit", "--metrics", "127.0.0.1:1", "--topic", "six", "--key", "k"]);
    assert_eq!(code, 6, "no broker there");
    let (status, body) = broker::http_get(b.metrics_port, "/key-audit?topic=six");
    assert_eq!(status, 400, "{body}");
}

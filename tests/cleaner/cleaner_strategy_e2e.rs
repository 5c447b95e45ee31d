//! End to end: `sediment.compaction.strategy=header` with a real client.
//! Two confluent-kafka producers write versions of the same rows out of
//! order, with the version in a header (tests/python/
//! compaction_strategy_confluent.py); after the running broker cleans, a
//! consumer from offset 0 sees each row's highest version, and a replay of
//! stale versions after that clean loses to the winners already cleaned
//! (the copies below the first dirty offset). The key audit and
//! cleaner-status say how copies rank.

use crate::broker::{http_get, run_python_script, TestBroker};

const TOPIC: &str = "cdc-rows";

/// The partition's entry in the log dir's cleaner-offset-checkpoint.
fn checkpoint(b: &TestBroker) -> Option<i64> {
    let text = std::fs::read_to_string(b.data_dir().join("cleaner-offset-checkpoint")).ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.split(' ');
        (parts.next() == Some(TOPIC) && parts.next() == Some("0"))
            .then(|| parts.next().and_then(|o| o.parse().ok()))?
    })
}

fn script(b: &TestBroker, mode: &str, done: &str) -> String {
    run_python_script(b, "compaction_strategy_confluent.py", &[TOPIC, mode], done)
}

fn partition_status(b: &TestBroker) -> serde_json::Value {
    let status = b.cleaner_status();
    let partitions = status["manager"]["partitions"].as_array().cloned().unwrap_or_default();
    partitions.into_iter().find(|p| p["topic"] == TOPIC).expect("the topic's cleaner status")
}

#[test]
fn out_of_order_versions_from_two_producers_compact_to_the_highest() {
    let b = TestBroker::start(&["log.cleaner.backoff.ms=100"]);
    script(&b, "create", "DescribeConfigs shows the header name");
    assert!(
        b.log().contains("compaction strategy offset -> header(version)"),
        "the change is logged: {}",
        b.log()
    );

    // Each round ends with filler rows that fill the active segment: once
    // the running broker's cleans reach them, every row before is cleaned.
    let cleaned_through_filler = |out: String, what: &str| {
        let filler_start: i64 = out
            .lines()
            .find_map(|l| l.strip_prefix("filler_start="))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no filler_start in {out}"));
        b.wait_for(30, what, || checkpoint(&b).filter(|c| *c >= filler_start));
    };
    cleaned_through_filler(script(&b, "round1", "round 1:"), "round 1 cleaned");
    // Stale versions replayed after the clean: the cleaned winners, below
    // the first dirty offset now, outrank them.
    cleaned_through_filler(script(&b, "round2", "round 2:"), "the replayed versions cleaned");
    let p = partition_status(&b);
    assert_eq!(p["compaction_strategy"], "header(version)", "{p}");
    let won: u64 = p["history"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["clean_copies_won"].as_u64().unwrap_or(0))
        .sum();
    // Every replayed version lost to a winner cleaned in round 1 (cleans
    // during round 1 may add their own).
    assert!(won >= 60, "the cleaned winners beat the replayed versions: {won} in {p}");

    script(&b, "verify", "compaction strategy checks passed");

    // The key audit ranks by the header too: one copy left, the winner.
    let (code, body) = http_get(b.metrics_port, &format!("/key-audit?topic={TOPIC}&key=row-3"));
    assert_eq!(code, 200, "{body}");
    let audit: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(audit["config"]["compaction_strategy"], "header(version)", "{audit}");
    assert_eq!(audit["verdict"], "live", "{audit}");
    assert_eq!(audit["copies"].as_array().map(Vec::len), Some(1), "{audit}");
    assert_eq!(audit["copies"][0]["version"], 6, "{audit}");

    // The operator's views in text.
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sediment"))
            .args(args)
            .output()
            .expect("sediment");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let status = run(&["cleaner-status", "--metrics", &metrics]);
    assert!(
        status.contains(
            "compaction strategy header(version): each key keeps its highest-ranked copy"
        ),
        "{status}"
    );
    let audit = run(&["key-audit", "--metrics", &metrics, "--topic", TOPIC, "--key", "row-3"]);
    assert!(audit.contains("compaction strategy header(version)"), "{audit}");
    assert!(audit.contains("newest (version 6)"), "{audit}");
}

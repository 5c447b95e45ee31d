//! Kafka Streams 4.1.2 with `processing.guarantee=exactly_once_v2` against
//! sediment (tests/java/StreamsEosCount.java, run through
//! scripts/kafka-tool.sh): a count per key, kept in a changelog-backed store
//! (record cache off, commit every 100 ms), written to an output topic. The
//! read_committed output must hold, for each key, exactly the counts 1..n
//! with no gap or repeat, also when the application is SIGKILLed in the
//! middle of a transaction and restarted on the same state directory.

mod broker;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use broker::{kafka_tool, repo_root, TestBroker};

const KEYS: usize = 4;

fn program() -> String {
    repo_root().join("tests/java/StreamsEosCount.java").display().to_string()
}

/// The lines "k0=1,2,...,n" .. "k3=..." for `records` inputs spread
/// round-robin over the keys.
fn exact_counts(records: usize) -> Vec<String> {
    (0..KEYS)
        .map(|k| {
            let n = records / KEYS + usize::from(k < records % KEYS);
            let counts: Vec<String> = (1..=n).map(|c| c.to_string()).collect();
            format!("k{k}={}", counts.join(","))
        })
        .collect()
}

/// Runs the app in `count` mode and checks its findings; returns the number
/// of output records only read_uncommitted sees (from aborted transactions).
fn count_and_check(b: &TestBroker, state: &str, records: usize) -> u64 {
    let n = records.to_string();
    let out = kafka_tool(b, &program(), &[&b.bootstrap(), state, &n, "count"], None);
    let lines: Vec<&str> = out.lines().collect();
    let mut want = exact_counts(records);
    want.extend([
        "changelog cleanup.policy=compact".to_string(),
        format!("words committed={records}"),
        "counts has markers=true".to_string(),
    ]);
    assert_eq!(lines[..want.len()], want, "output:\n{out}\nbroker log:\n{}", b.log());
    let aborted = lines.get(want.len()).and_then(|l| l.strip_prefix("aborted records="));
    aborted.and_then(|a| a.parse().ok()).unwrap_or_else(|| panic!("aborted records in\n{out}"))
}

#[test]
fn streams_exactly_once_v2_counts_are_exact() {
    let b = TestBroker::start(&[]);
    let state = tempfile::tempdir().expect("tempdir");
    let state = state.path().display().to_string();
    kafka_tool(&b, &program(), &[&b.bootstrap(), &state, "400", "produce"], None);
    assert_eq!(count_and_check(&b, &state, 400), 0, "broker log:\n{}", b.log());
}

#[test]
fn streams_exactly_once_v2_survives_sigkill_mid_transaction() {
    let b = TestBroker::start(&[]);
    let state = tempfile::tempdir().expect("tempdir");
    let state = state.path().display().to_string();
    kafka_tool(&b, &program(), &[&b.bootstrap(), &state, "2000", "produce"], None);
    // The app blocks before input 1000 with (almost always) a transaction
    // open; it reports how many output records that transaction holds.
    let mut slow = Command::new("bash")
        .arg(repo_root().join("scripts/kafka-tool.sh"))
        .args([program().as_str(), &b.bootstrap(), &state, "2000", "slow"])
        .env("KAFKA_HEAP_OPTS", "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("scripts/kafka-tool.sh (needs Java 17 and Maven)");
    let stdout = slow.stdout.take().expect("stdout");
    let first = BufReader::new(stdout).lines().next();
    // kafka-tool.sh execs java, so this is SIGKILL to the app itself.
    slow.kill().expect("SIGKILL");
    slow.wait().expect("wait");
    let open: u64 = match &first {
        Some(Ok(l)) => l.strip_prefix("running open=").and_then(|n| n.parse().ok()),
        _ => None,
    }
    .unwrap_or_else(|| panic!("slow app: {first:?}\nbroker log:\n{}", b.log()));
    // The restarted app (same state directory, so the same transactional.id)
    // fences the killed one, whose open transaction is aborted: exactly its
    // records stay invisible to read_committed.
    println!("the killed app's open transaction held {open} output records");
    let aborted = count_and_check(&b, &state, 2000);
    assert_eq!(aborted, open, "broker log:\n{}", b.log());
}

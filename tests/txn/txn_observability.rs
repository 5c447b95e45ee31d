//! An open transaction as an operator sees it. A real transactional producer
//! (librdkafka through confluent-kafka: `tests/python/txn_confluent.py hold`)
//! keeps a transaction open on a compacted topic whose segment then rolls:
//! `/cleaner-status` (JSON) and `sediment cleaner-status` name its
//! transactional id as what holds cleaning back, and `/metrics` has
//! `sediment_log_oldest_open_transaction_age_seconds` for that partition only,
//! growing. Once the producer commits, the series is gone, the status names
//! no transaction and the cleaner cleans past the old bound.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::broker::{
    cleaner_checkpoint, create_topic, now_ms, produce, promtool_check_metrics, python, repo_root,
    Reaper, TestBroker, Wire,
};

const TOPIC: &str = "ledger";
const TXN_ID: &str = "ledger-writer";
const AGE: &str = "sediment_log_oldest_open_transaction_age_seconds";

/// The age series of every partition: (labels, value).
fn ages(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix(AGE)?.strip_prefix('{'))
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once("} ")?;
            Some((labels.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn ledger_age(b: &TestBroker) -> Option<f64> {
    let text = b.metrics();
    let all = ages(&text);
    let ledger = format!("partition=\"0\",topic=\"{TOPIC}\"");
    assert!(all.iter().all(|(l, _)| *l == ledger), "a series for another partition: {all:?}");
    all.first().map(|(_, v)| *v)
}

/// The holder: its stdin (a line commits) and its stdout lines.
struct Holder {
    _child: Reaper,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Holder {
    fn start(b: &TestBroker) -> Self {
        let mut child = Command::new(python())
            .arg(repo_root().join("tests/python/txn_confluent.py"))
            .args([&b.bootstrap(), "hold", TOPIC, TXN_ID])
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run python");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { _child: Reaper(child), stdin, lines }
    }

    /// Wait for the line `want`, failing with what came instead.
    fn expect(&self, b: &TestBroker, want: &str) {
        let mut seen = Vec::new();
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(l) if l == want => return,
                Ok(l) => seen.push(l),
                Err(_) => panic!("holder never printed {want:?}: {seen:?}\nbroker:\n{}", b.log()),
            }
        }
    }
}

fn ledger_status(b: &TestBroker) -> serde_json::Value {
    let status = b.cleaner_status();
    status["manager"]["partitions"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["topic"] == TOPIC).cloned())
        .unwrap_or_else(|| panic!("no {TOPIC} in {status:#}"))
}

#[test]
fn an_open_transaction_is_named_and_aged_until_it_commits() {
    let b = TestBroker::start(&["log.cleaner.backoff.ms=100"]);
    create_topic(
        b.port,
        TOPIC,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    assert_eq!(ledger_age(&b), None, "no series before any transaction");
    let mut holder = Holder::start(&b);
    holder.expect(&b, "open");
    // Offsets 0-2 are the open transaction's; a plain record two seconds of
    // record time later rolls the segment, so they are in a closed one.
    produce(
        &mut Wire::connect(b.port),
        TOPIC,
        0,
        now_ms() + 5_000,
        &[("k".into(), Some("plain".into()))],
    );

    let p = b.wait_for(20, "cleaner-status naming the open transaction", || {
        let p = ledger_status(&b);
        (p["ineligible"]["code"] == "open_transaction").then_some(p)
    });
    let why = &p["ineligible"];
    assert_eq!(why["transactional_id"], TXN_ID, "{p:#}");
    assert_eq!(why["first_offset"], 0, "{p:#}");
    assert!(why["producer_id"].as_i64().is_some_and(|id| id >= 0), "{p:#}");
    assert!(why["age_ms"].as_i64().is_some_and(|a| a >= 0), "{p:#}");
    let open = &p["open_transaction"];
    assert_eq!(open["transactional_id"], TXN_ID, "{p:#}");
    assert_eq!(open["producer_id"], why["producer_id"], "{p:#}");
    assert_eq!(p["first_uncleanable_offset"], 0, "{p:#}");
    let reason = p["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&format!("transactional id \"{TXN_ID}\"")), "{reason}");

    let out = Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(["cleaner-status", "--metrics", &format!("127.0.0.1:{}", b.metrics_port)])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let line = text.lines().find(|l| l.starts_with("ledger-0")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(&format!("transactional id \"{TXN_ID}\"")), "{text}");

    // The age: present for this partition only, and growing.
    let first = b.wait_for(10, "the age series", || ledger_age(&b));
    assert!(first >= 0.0, "{first}");
    // promtool's lint has nothing to say about it (a `_ms` name would fail it).
    let (_, lint) = promtool_check_metrics(&b.metrics());
    assert!(!lint.contains(AGE), "promtool check metrics:\n{lint}");
    let later = b.wait_for(10, "the age to grow", || ledger_age(&b).filter(|a| *a > first + 0.2));
    assert!(later < first + 30.0, "{first} -> {later}");

    writeln!(holder.stdin, "commit").expect("tell the holder to commit");
    holder.expect(&b, "committed");
    b.wait_for(10, "the age series to go", || ledger_age(&b).is_none().then_some(()));
    let p = ledger_status(&b);
    assert!(p["open_transaction"].is_null(), "{p:#}");
    // Nothing holds the cleaner back: it cleans the closed segment.
    b.wait_for(20, "the clean past the old bound", || {
        cleaner_checkpoint(&b.data_dir(), TOPIC, 0).filter(|o| *o >= 3)
    });
}

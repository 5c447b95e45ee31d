//! Kafka Streams 4.1.2 with `processing.guarantee=exactly_once_v2` against
//! sediment (tests/java/StreamsEosCount.java, run through
//! scripts/kafka-tool.sh): a count per key, kept in a changelog-backed store
//! (record cache off, commit every 100 ms), written to an output topic. The
//! read_committed output must hold, for each key, exactly the counts 1..n
//! with no gap or repeat, also when the application is SIGKILLed in the
//! middle of a transaction and restarted on the same state directory, and
//! when the broker is SIGKILLed while the app has a transaction open and
//! restarted on the same data dir and port.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::broker::streams_eos::{check_output, program};
use crate::broker::txn::end_offset;
use crate::broker::{kafka_tool, repo_root, TestBroker, Wire};

fn count_and_check(b: &TestBroker, state: &str, records: usize) -> u64 {
    crate::broker::streams_eos::count_and_check(b, &b.bootstrap(), state, records)
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

#[test]
fn streams_exactly_once_v2_survives_a_broker_sigkill() {
    broker_sigkill_mid_run(None);
}

/// The broker stays down past the app's transaction timeout (2 s), so once
/// restarted its coordinator may abort the open transaction and fence the
/// app's producer before the app commits it (whichever comes first).
#[test]
fn streams_exactly_once_v2_survives_a_broker_down_past_the_transaction_timeout() {
    broker_sigkill_mid_run(Some(2_000));
}

/// Runs the app in `steady` mode (transaction timeout `txn_timeout_ms`, or
/// Streams' default), SIGKILLs the broker once the app has committed output
/// and holds a transaction open with more, restarts it on the same data dir
/// and port (after the transaction timeout, when one is given), and checks
/// the app's output is exact; if the app went to ERROR instead, it is
/// restarted and its output checked.
fn broker_sigkill_mid_run(txn_timeout_ms: Option<u64>) {
    const RECORDS: usize = 3000;
    let overrides = ["transaction.abort.timed.out.transaction.cleanup.interval.ms=200"];
    let mut b = TestBroker::start(&overrides);
    let state = tempfile::tempdir().expect("tempdir");
    let state = state.path().display().to_string();
    let n = RECORDS.to_string();
    kafka_tool(&b, &program(), &[&b.bootstrap(), &state, &n, "produce"], None);
    // The app runs with 2 ms of work per record (about 6 s of input) and
    // commits every 100 ms, so it nearly always has a transaction open.
    let logs = tempfile::tempdir().expect("tempdir");
    let (out_path, err_path) = (logs.path().join("stdout"), logs.path().join("stderr"));
    let timeout = txn_timeout_ms.map(|t| t.to_string());
    let mut args = vec![b.bootstrap(), state.clone(), n.clone(), "steady".into()];
    args.extend(timeout);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut app = crate::broker::streams_eos::spawn(&args, &[], &out_path, &err_path);
    // Kill once "counts" holds committed output and a transaction holds
    // more: the app is mid-transaction, mid-run.
    let (stable, end) =
        b.wait_for(120, "committed output and an open transaction on counts", || {
            let mut w = Wire::connect(b.port);
            let stable = end_offset(&mut w, "counts", 0, true);
            let end = end_offset(&mut w, "counts", 0, false);
            (stable > 0 && end > stable && (end as usize) < RECORDS).then_some((stable, end))
        });
    b.kill();
    println!("broker killed with counts at LSO {stable}, log end {end}");
    if let Some(t) = txn_timeout_ms {
        // The outage itself is the scenario: down until the app's open
        // transaction has timed out.
        let until = std::time::Instant::now() + std::time::Duration::from_millis(t + 500);
        while std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    b.set_overrides(&overrides);
    b.restart();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(200);
    let status = loop {
        if let Some(status) = app.0.try_wait().expect("try_wait") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the app did not finish");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let states: Vec<&str> = err.lines().filter(|l| l.starts_with("app state ")).collect();
    println!("app states: {states:?}");
    if out.starts_with("app state=ERROR") {
        // Reported, then the app is restarted on its state directory.
        println!("the app went to ERROR after the broker restart; restarted:\n{err}");
        count_and_check(&b, &state, RECORDS);
    } else {
        assert!(status.success(), "app failed ({status}):\n{out}\n{err}\nbroker:\n{}", b.log());
        let aborted = check_output(&b, &out, RECORDS);
        println!("the app carried on; {aborted} output records were aborted");
    }
}

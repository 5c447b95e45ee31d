//! Exactly-once processing while brokers die (issue 29, acceptance 6):
//! Kafka 4.4.0's TransactionalMessageCopier (one per input partition, random
//! aborts, offsets committed in its transactions with the consumer's group
//! metadata) and a Kafka Streams `exactly_once_v2` app
//! (tests/java/StreamsEosCount.java) run at once on three brokers, every
//! topic at replication factor 3 with `min.insync.replicas=2`, while each
//! broker in turn is SIGKILLed, its leaderships taken over, and restarted
//! until it is back in every ISR. Every broker is killed once, so every
//! coordinator's broker (the group's `__consumer_offsets` leader and each
//! transactional id's `__transaction_state` leader) is killed while it
//! coordinates. Afterwards a read_committed consumer sees each copied
//! partition equal to its input partition, every record once and in order,
//! and the Streams output holds exactly the counts 1..n per key.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::broker::etcd::EtcdServer;
use crate::broker::txn::end_offset;
use crate::broker::{kafka_tool, repo_root, streams_eos, Reaper, TestBroker, Wire};
use crate::support::{create_topic, find_coordinator, placement, start_cluster_with, wait_leaders};

const CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";
const COPIER: &str = "org.apache.kafka.tools.TransactionalMessageCopier";
/// Input records of the copiers, over two partitions.
const COPIED: usize = 12_000;
/// Input records of the Streams app (2 ms of work each).
const COUNTED: usize = 8_000;

/// Every topic whose leaders the kills move: the data and the internal ones.
const TOPICS: [&str; 7] = [
    "copier-in",
    "copier-out",
    "words",
    "counts",
    "eos-count-counts-store-changelog",
    "__consumer_offsets",
    "__transaction_state",
];

/// The TransactionalMessageCopier of input partition `p`, in the background.
fn start_copier(bootstrap: &str, p: i32, out: &Path) -> Reaper {
    let partition = p.to_string();
    let id = format!("copier-{p}");
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/kafka-tool.sh"))
        .arg(COPIER)
        .args(["--broker-list", bootstrap, "--transactional-id", &id])
        .args(["--input-topic", "copier-in", "--input-partition", &partition])
        .args(["--output-topic", "copier-out", "--consumer-group", "copiers"])
        .args(["--transaction-size", "20", "--use-group-metadata", "--enable-random-aborts"])
        .env("KAFKA_HEAP_OPTS", "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        // The newest client: transactions v2 (an epoch bump per transaction,
        // partitions added by their leaders across the brokers).
        .env("KAFKA_VERSION", "4.4.0")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).expect("copier stdout"))
        .stderr(std::fs::File::create(out.with_extension("err")).expect("copier stderr"));
    Reaper(cmd.spawn().expect("TransactionalMessageCopier (scripts/kafka-tool.sh)"))
}

/// Each partition of `topic` as a read_committed console consumer reads it
/// from the beginning until it has `n` records (or 30 s pass idle).
fn read_committed(
    b: &TestBroker,
    bootstrap: &str,
    topic: &str,
    n: usize,
) -> BTreeMap<i32, Vec<String>> {
    let n = n.to_string();
    let args = [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--isolation-level",
        "read_committed",
        "--max-messages",
        &n,
        "--timeout-ms",
        "30000",
        crate::broker::formatter_property(),
        "print.partition=true",
    ];
    let (_, out, _) = crate::broker::kafka_tool_output(CONSUMER, &args, None);
    let mut partitions: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for line in out.lines() {
        let parsed = line.strip_prefix("Partition:").and_then(|l| l.split_once('\t'));
        let (p, value) = parsed
            .unwrap_or_else(|| panic!("console consumer line {line:?}\nbroker:\n{}", b.log()));
        partitions.entry(p.parse().expect("partition")).or_default().push(value.to_string());
    }
    partitions
}

/// What the clients printed (the copiers, the Streams app) and the end of
/// every broker's log, for a failure message.
fn clients_and_brokers(brokers: &[TestBroker], logs: &Path) -> String {
    let tail = |text: &str, n: usize| {
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    };
    let mut report = String::new();
    for name in ["copier-0", "copier-0.err", "copier-1", "copier-1.err", "app.out", "app.err"] {
        let text = std::fs::read_to_string(logs.join(name)).unwrap_or_default();
        report.push_str(&format!("--- {name} (last 40 lines)\n{}\n", tail(&text, 40)));
    }
    for (i, b) in brokers.iter().enumerate() {
        report.push_str(&format!("--- broker {} (last 60 lines)\n{}\n", i + 1, tail(&b.log(), 60)));
    }
    report
}

/// The roles broker `node` holds now, as broker `port` answers.
fn roles(port: u16, node: i32) -> Vec<String> {
    let mut held = Vec::new();
    for (key, key_type) in [("copier-0", 1), ("copier-1", 1), ("copiers", 0), ("eos-count", 0)] {
        if find_coordinator(port, key, key_type) == Ok(node) {
            let what = if key_type == 1 { "transaction coordinator" } else { "group coordinator" };
            held.push(format!("{what} of {key}"));
        }
    }
    held
}

/// Whether every partition of every topic in [`TOPICS`] that `port` knows
/// satisfies `ok(leader, isr)`.
fn all_partitions(port: u16, ok: impl Fn(i32, &[i32]) -> bool) -> bool {
    TOPICS.iter().all(|t| placement(port, t).values().all(|(l, _, _, isr)| ok(*l, isr)))
}

#[test]
fn copiers_and_streams_stay_exact_while_each_broker_is_killed() {
    let etcd = EtcdServer::start();
    let mut brokers = start_cluster_with(&etcd, 3, &[]);
    let bootstrap: String = brokers.iter().map(TestBroker::bootstrap).collect::<Vec<_>>().join(",");
    let rf3 = ["--replication-factor", "3", "--config", "min.insync.replicas=2"];
    create_topic(&brokers[0], "copier-in", 2, &rf3);
    create_topic(&brokers[0], "copier-out", 2, &rf3);
    wait_leaders(&brokers, "copier-in", 2);
    wait_leaders(&brokers, "copier-out", 2);
    // Keyed, so both input partitions get records whatever the producer's
    // sticky partitioner does (each copier waits for output of its own).
    let seed = ["--bootstrap-server", &bootstrap, "--topic", "copier-in", "--acks", "-1"];
    let seed = [&seed[..], &["--repeating-keys", "100"]].concat();
    let count = COPIED.to_string();
    let seed = [&seed[..], &["--max-messages", &count]].concat();
    kafka_tool(&brokers[0], "org.apache.kafka.tools.VerifiableProducer", &seed, None);
    let env = [("EOS_REPLICATION_FACTOR", "3"), ("EOS_DEADLINE_S", "300")];
    let state = tempfile::tempdir().expect("tempdir");
    let state = state.path().display().to_string();
    let counted = COUNTED.to_string();
    let logs = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| logs.path().join(name);
    let mut produce = streams_eos::spawn(
        &[&bootstrap, &state, &counted, "produce"],
        &env,
        &path("p.out"),
        &path("p.err"),
    );
    assert!(
        produce.0.wait().expect("wait").success(),
        "{}",
        std::fs::read_to_string(path("p.err")).unwrap()
    );

    let mut app = streams_eos::spawn(
        &[&bootstrap, &state, &counted, "steady"],
        &env,
        &path("app.out"),
        &path("app.err"),
    );
    let mut copiers: Vec<Reaper> =
        (0..2).map(|p| start_copier(&bootstrap, p, &path(&format!("copier-{p}")))).collect();
    // Under way: committed output of both.
    let port = brokers[0].port;
    let lso = |t: &str, p| {
        let leader = placement(port, t).get(&p).map_or(0, |pl| pl.0);
        leader > 0
            && end_offset(&mut Wire::connect(brokers[leader as usize - 1].port), t, p, true) > 0
    };
    let started = Instant::now();
    while !(lso("copier-out", 0) && lso("copier-out", 1) && lso("counts", 0)) {
        if started.elapsed() > Duration::from_secs(120) {
            let outputs = ["copier-out", "copier-out", "counts"].iter().zip([0, 1, 0]);
            let missing: Vec<String> =
                outputs.filter(|(t, p)| !lso(t, *p)).map(|(t, p)| format!("{t}-{p}")).collect();
            panic!(
                "no committed output in {missing:?} after 120 s\n{}",
                clients_and_brokers(&brokers, logs.path())
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    let mut report = Vec::new();
    for victim in 0..3 {
        let node = victim as i32 + 1;
        let live = brokers[(victim + 1) % 3].port;
        let held = roles(live, node);
        let running = copiers
            .iter_mut()
            .map(|c| c.0.try_wait().expect("try_wait"))
            .filter(Option::is_none)
            .count();
        let killed = Instant::now();
        brokers[victim].kill();
        brokers[(victim + 1) % 3].wait_for(
            60,
            "the killed broker's leaderships taken over",
            || all_partitions(live, |leader, _| leader != node).then_some(()),
        );
        let moved = killed.elapsed();
        brokers[victim].restart();
        brokers[(victim + 1) % 3].wait_for(90, "the restarted broker back in every ISR", || {
            all_partitions(live, |leader, isr| leader > 0 && isr.len() == 3).then_some(())
        });
        report.push(format!(
            "broker {node} ({held:?}, {running} copiers running): leaders moved in {moved:?}"
        ));
    }
    eprintln!("kills:\n{}", report.join("\n"));

    // The copiers end on their own once their partition is copied.
    let deadline = Instant::now() + Duration::from_secs(240);
    for (p, copier) in copiers.iter_mut().enumerate() {
        let status = loop {
            if let Some(s) = copier.0.try_wait().expect("try_wait") {
                break s;
            }
            assert!(Instant::now() < deadline, "copier {p} did not finish");
            std::thread::sleep(Duration::from_millis(200));
        };
        let out = std::fs::read_to_string(path(&format!("copier-{p}"))).unwrap_or_default();
        let tail: Vec<&str> = out.lines().rev().take(3).collect();
        assert!(status.success(), "copier {p} failed ({status}): {tail:?}");
    }
    let input = read_committed(&brokers[0], &bootstrap, "copier-in", COPIED);
    let output = read_committed(&brokers[0], &bootstrap, "copier-out", COPIED);
    assert_eq!(input.values().map(Vec::len).sum::<usize>(), COPIED, "the seeded input");
    for (p, values) in &input {
        let copied = output.get(p).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(copied.len(), values.len(), "partition {p}: records copied");
        assert!(copied == values.as_slice(), "partition {p}: the copy differs from its input");
    }

    // The Streams app: exact counts, or (if it went to ERROR on a kill)
    // exact counts once restarted on its state directory.
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = app.0.try_wait().expect("try_wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "the Streams app did not finish");
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = std::fs::read_to_string(path("app.out")).unwrap_or_default();
    let err = std::fs::read_to_string(path("app.err")).unwrap_or_default();
    let states: Vec<&str> = err.lines().filter(|l| l.starts_with("app state ")).collect();
    eprintln!("Streams app states: {states:?}");
    if out.starts_with("app state=ERROR") {
        eprintln!("the Streams app went to ERROR; restarted:\n{err}");
        streams_eos::count_and_check(&brokers[0], &bootstrap, &state, COUNTED);
    } else {
        assert!(status.success(), "Streams app failed ({status}):\n{out}\n{err}");
        let aborted = streams_eos::check_output(&brokers[0], &out, COUNTED);
        eprintln!("the Streams app carried on; {aborted} output records were aborted");
    }
    // Acceptance 7: every replica of the compacted topics the kills went
    // through holds the same committed latest value per key.
    let compacted =
        ["eos-count-counts-store-changelog", "__consumer_offsets", "__transaction_state"];
    crate::support::assert_replicas_agree(&brokers, &compacted);
}

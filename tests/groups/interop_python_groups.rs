//! Consumer groups through the Python clients against the real broker:
//! confluent-kafka (librdkafka 2.16) splitting partitions, taking over,
//! exactly-once consumption with manual commits, cooperative-sticky and the
//! group admin calls, and the consumer group protocol (KIP-848), also in an
//! exactly-once copy loop; kafka-python's committed offsets surviving a broker
//! restart, both a clean one (SIGTERM) and a crash (SIGKILL). The scripts in
//! tests/python/ assert as they go and exit non-zero at the first failed
//! check; they run with the pinned venv from scripts/python-env.sh.

use crate::broker::{run_python_script, TestBroker};

/// Faster groups: no initial rebalance delay, and a small offsets topic.
const GROUP_OVERRIDES: &[&str] =
    &["group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=5"];

#[test]
fn confluent_kafka_groups() {
    let b = TestBroker::start(GROUP_OVERRIDES);
    run_python_script(&b, "groups_confluent.py", &[], "all confluent-kafka group checks passed");
}

/// confluent-kafka with `group.protocol=consumer` (KIP-848): three members,
/// six partitions, one leaves and the others take over without revocations.
#[test]
fn confluent_kafka_consumer_protocol() {
    let b = TestBroker::start(&[
        "offsets.topic.num.partitions=5",
        "group.consumer.min.heartbeat.interval.ms=500",
        "group.consumer.heartbeat.interval.ms=1000",
    ]);
    run_python_script(
        &b,
        "consumer_protocol_confluent.py",
        &[],
        "all confluent-kafka consumer protocol checks passed",
    );
}

/// confluent-kafka's exactly-once loop with `group.protocol=consumer`
/// (issue 30, item 5): offsets committed in the producers' transactions
/// through a join and a leave, every input value copied exactly once.
#[test]
fn confluent_kafka_consumer_protocol_exactly_once() {
    let b = TestBroker::start(&[
        "offsets.topic.num.partitions=5",
        "transaction.state.log.num.partitions=5",
        "group.consumer.min.heartbeat.interval.ms=500",
        "group.consumer.heartbeat.interval.ms=1000",
    ]);
    run_python_script(
        &b,
        "eos_consumer_protocol_confluent.py",
        &[],
        "all confluent-kafka consumer protocol exactly-once checks passed",
    );
}

/// How the broker goes down between the two kafka-python runs.
enum Restart {
    Clean,
    Crash,
}

fn kafka_python_offsets_survive(how: Restart) {
    let mut b = TestBroker::start(GROUP_OVERRIDES);
    let out = run_python_script(
        &b,
        "groups_kafka_python.py",
        &["produce-and-commit"],
        "all kafka-python group produce-and-commit checks passed",
    );
    let committed = out
        .lines()
        .find_map(|l| l.strip_prefix("committed "))
        .unwrap_or_else(|| panic!("no committed offsets printed:\n{out}"))
        .trim()
        .to_string();
    match how {
        Restart::Clean => assert!(b.stop().success(), "clean shutdown; log:\n{}", b.log()),
        Restart::Crash => b.kill(),
    }
    b.restart();
    run_python_script(
        &b,
        "groups_kafka_python.py",
        &["check", &committed],
        "all kafka-python group checks passed after the restart",
    );
    // The offsets came back from the log, not from anything kept in memory.
    let log = b.log();
    let loaded: Vec<&str> =
        log.lines().filter(|l| l.contains("group coordinator loaded")).collect();
    assert_eq!(loaded.len(), 2, "one load per broker start:\n{log}");
    let records: u64 = loaded[1]
        .split("records=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no record count in {}", loaded[1]));
    assert!(records > 0, "the restarted coordinator read the offsets topic: {}", loaded[1]);
}

#[test]
fn kafka_python_offsets_survive_clean_restart() {
    kafka_python_offsets_survive(Restart::Clean);
}

#[test]
fn kafka_python_offsets_survive_crash() {
    kafka_python_offsets_survive(Restart::Crash);
}

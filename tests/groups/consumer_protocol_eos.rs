//! Exactly-once with KIP-848 groups (issue 30, item 5): a
//! consume-transform-produce loop whose consumers use
//! `group.protocol=consumer` and commit their offsets inside their
//! producers' transactions (TxnOffsetCommit carrying the member id and
//! member epoch; tests/java/ConsumerProtocolEosLoop.java, Apache Kafka's
//! Java client), with members joining, leaving, one SIGKILLed and
//! restarted and a static member returning under its instance id while
//! records flow; once per server-side assignor (`range`, `uniform`), on
//! one broker start.
//!
//! Before the fix every such commit was refused UNKNOWN_MEMBER_ID (the
//! coordinator looked for the member among the classic members), each
//! transaction aborted, and the loop never got past its first records.
//! Checked: every input value is in the output exactly once (read
//! committed) and the group's committed offsets reach the input's end.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::broker::reference_kafka::ReferenceKafka;
use crate::broker::txn::{connect_loaded, fetch_offset, read_partition};
use crate::broker::{console_produce_keyed, create_topic, AnyBroker, TestBroker};
use crate::consumer_protocol_java::{wait_until, Member};

const PARTITIONS: i32 = 6;
/// Records per phase: the first before any member starts, the second
/// while the membership changes.
const PHASE: usize = 1500;

/// The brokers' settings for the scenario, the same on sediment and Kafka.
const SETTINGS: [(&str, &str); 6] = [
    ("offsets.topic.num.partitions", "5"),
    ("transaction.state.log.num.partitions", "5"),
    ("group.consumer.min.heartbeat.interval.ms", "500"),
    ("group.consumer.heartbeat.interval.ms", "1000"),
    // A SIGKILLed member's partitions move after 6 s, not Kafka's 45.
    ("group.consumer.min.session.timeout.ms", "6000"),
    ("group.consumer.session.timeout.ms", "6000"),
];

fn start_sediment() -> TestBroker {
    let overrides: Vec<String> = SETTINGS.iter().map(|(k, v)| format!("{k}={v}")).collect();
    TestBroker::start(&overrides.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The scenario once per assignor on `b`: seconds each took.
fn run_scenario(b: &(impl AnyBroker + Sync)) -> Vec<(&'static str, f64)> {
    ["range", "uniform"]
        .into_iter()
        .map(|assignor| {
            let started = Instant::now();
            copy_through_membership_changes(b, assignor);
            let secs = started.elapsed().as_secs_f64();
            eprintln!("{assignor}: converged in {secs:.1} s");
            (assignor, secs)
        })
        .collect()
}

#[test]
fn transactional_copy_with_consumer_protocol_members_is_exact() {
    run_scenario(&start_sediment());
}

/// Issue 30's target for this loop: within 2x Apache Kafka's time. A
/// measurement, not a test (`bench/eos-kip848.sh` runs it): the same
/// scenario on Kafka 4.4.0, then on sediment, each checked exactly as
/// above; it prints the times and their ratios and asserts no timing.
#[test]
#[ignore = "a benchmark: bench/eos-kip848.sh"]
fn eos_loop_time_beside_kafka_4_4() {
    let kafka_times = {
        let kafka = ReferenceKafka::start_version("4.4.0", &SETTINGS);
        run_scenario(&kafka)
    };
    let ours = run_scenario(&start_sediment());
    for ((assignor, theirs), (_, mine)) in kafka_times.iter().zip(&ours) {
        println!(
            "eos-kip848 {assignor}: sediment {mine:.1} s, Kafka 4.4.0 {theirs:.1} s, ratio {:.2}",
            mine / theirs
        );
    }
}

/// Lines `k<i>:v<i>` for `i` in `range`.
fn input(range: std::ops::Range<usize>) -> String {
    range.map(|i| format!("k{i}:v{i}\n")).collect()
}

fn copy_through_membership_changes(b: &(impl AnyBroker + Sync), assignor: &str) {
    let (group, inp, out) =
        (format!("eos-{assignor}"), format!("in-{assignor}"), format!("out-{assignor}"));
    create_topic(b.port(), &inp, PARTITIONS, &[]);
    create_topic(b.port(), &out, PARTITIONS, &[]);
    console_produce_keyed(b, &inp, ":", &input(0..PHASE));
    let bs = b.bootstrap();
    let member = |name: &str, instance: Option<&str>| {
        let mut args =
            vec![bs.as_str(), group.as_str(), inp.as_str(), out.as_str(), name, assignor];
        args.extend(instance);
        Member::spawn("ConsumerProtocolEosLoop.java", &args, name)
    };
    let instance = format!("static-{assignor}");
    let mut m1 = member("m1", None);
    let mut m2 = member("m2", Some(&instance));
    wait_until(
        120,
        "both members owning partitions, the first half copied",
        &[&m1, &m2],
        b,
        || owns(&m1) && owns(&m2) && committed(&m1) + committed(&m2) >= PHASE as u64,
    );

    // While the second half is produced, in three parts: m3 joins; m1
    // leaves; m3 is SIGKILLed mid-run and comes back (a new member; its
    // producer, under the same transactional id, aborts what the old one
    // left open; the old member is fenced after its session); the static
    // m2 stops and returns under its instance id.
    let (m2, m3) = std::thread::scope(|scope| {
        scope.spawn(|| {
            for part in 0..3 {
                let from = PHASE + part * PHASE / 3;
                console_produce_keyed(b, &inp, ":", &input(from..from + PHASE / 3));
            }
        });
        let m3 = member("m3", None);
        wait_until(120, "m3 owning partitions", &[&m1, &m2, &m3], b, || owns(&m3));
        m1.stop();
        drop(m3);
        let m3 = member("m3", None);
        m2.stop();
        wait_until(60, "m2 closed", &[&m2], b, || m2.lines().iter().any(|l| l == "closed"));
        drop(m2);
        (member("m2", Some(&instance)), m3)
    });
    let total = (2 * PHASE) as i64;
    let mut w = connect_loaded(b.port());
    wait_until(180, "the group's offsets at the input's end", &[&m1, &m2, &m3], b, || {
        (0..PARTITIONS)
            .map(|p| fetch_offset(&mut w, &group, &inp, p))
            .map(|(error, offset)| if error == 0 { offset.max(0) } else { 0 })
            .sum::<i64>()
            == total
    });

    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for p in 0..PARTITIONS {
        for v in read_partition(&mut w, &out, p, true).values() {
            *seen.entry(v).or_default() += 1;
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(twice.is_empty(), "{assignor}: copied more than once: {twice:?}");
    let missing: Vec<usize> =
        (0..2 * PHASE).filter(|i| !seen.contains_key(&format!("v{i}"))).take(5).collect();
    assert!(missing.is_empty(), "{assignor}: never copied: {missing:?}");
    assert_eq!(seen.len(), 2 * PHASE, "{assignor}: only the input's values");
}

/// Whether a member's last rebalance left it partitions.
fn owns(m: &Member) -> bool {
    let lines = m.lines();
    lines.iter().rev().find_map(|l| l.strip_prefix("owned")).is_some_and(|ps| !ps.trim().is_empty())
}

/// The records a member copied in committed transactions so far.
fn committed(m: &Member) -> u64 {
    m.lines()
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("committed ").and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

//! Kafka's VerifiableProducer (`acks=all`, idempotent) writes while the
//! leader of each partition is SIGKILLed in turn and restarted
//! (docs/design/multi-broker.md, 14, scenario 2): every value it reports as
//! acknowledged is in the log exactly once, at the offset it was given, and
//! the partitions' committed records are in the order they were sent; then
//! the controller gives every partition back to its preferred replica. The
//! time from each kill to the next acknowledgement on that partition is
//! printed. Kafka's VerifiableConsumer reads the topic in a group at the
//! same time (its coordinator killed too, when it leads the group's
//! partition of `__consumer_offsets`): it consumes every acknowledged
//! offset exactly once, in order per partition.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::broker::etcd::EtcdServer;
use crate::broker::{fetch_all, repo_root, Reaper, TestBroker};
use crate::support::{create_topic, placement, start_cluster, start_cluster_with};

/// Per partition: (leader, ISR size), from one broker's Metadata.
fn leaders(port: u16, topic: &str) -> BTreeMap<i32, (i32, usize)> {
    placement(port, topic).into_iter().map(|(p, (l, _, _, isr))| (p, (l, isr.len()))).collect()
}

/// An acknowledged send: (partition, offset, value).
type Acked = (i32, i64, String);

/// What one VerifiableConsumer batch consumed of a partition:
/// (partition, min offset, max offset, count).
type Consumed = (i32, i64, i64, i64);

/// Parse VerifiableConsumer's `records_consumed` lines.
fn consumed(line: &str) -> Vec<Consumed> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { return Vec::new() };
    if v["name"] != "records_consumed" {
        return Vec::new();
    }
    let parts = v["partitions"].as_array().cloned().unwrap_or_default();
    let each = |p: &serde_json::Value| {
        let n = |k: &str| p[k].as_i64();
        Some((n("partition")? as i32, n("minOffset")?, n("maxOffset")?, n("count")?))
    };
    parts.iter().filter_map(each).collect()
}

/// Start Kafka's VerifiableConsumer on "verify" in a group, from the
/// earliest offset; its batches are gathered by a thread.
fn start_consumer(bootstrap: &str) -> (Reaper, Arc<Mutex<Vec<Consumed>>>) {
    let mut consumer = Command::new("bash");
    consumer
        .arg(repo_root().join("scripts/kafka-tool.sh"))
        .arg("org.apache.kafka.tools.VerifiableConsumer")
        .args(["--bootstrap-server", bootstrap, "--topic", "verify"])
        .args(["--group-id", "verify-readers", "--reset-policy", "earliest"])
        .env("KAFKA_HEAP_OPTS", "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = consumer.spawn().expect("VerifiableConsumer (scripts/kafka-tool.sh)");
    let stdout = child.stdout.take().unwrap();
    let batches: Arc<Mutex<Vec<Consumed>>> = Arc::default();
    let gathered = Arc::clone(&batches);
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            gathered.lock().unwrap().extend(consumed(&line));
        }
    });
    (Reaper(child), batches)
}

/// Every acknowledged offset consumed exactly once and in order: per
/// partition, the batches in arrival order follow each other without
/// overlap, each holds every offset of its range (the log has no gaps),
/// and together they cover every acknowledged offset.
fn check_consumed(batches: &[Consumed], acked: &[Acked]) {
    let mut last: HashMap<i32, i64> = HashMap::new();
    for (p, min, max, count) in batches {
        if let Some(prev) = last.get(p) {
            assert!(min > prev, "partition {p}: offsets from {min} consumed again (had {prev})");
        }
        assert_eq!(max - min + 1, *count, "partition {p}: a batch skipped records");
        last.insert(*p, *max);
    }
    for (p, offset, value) in acked {
        let covered =
            batches.iter().any(|(bp, min, max, _)| bp == p && min <= offset && offset <= max);
        assert!(covered, "acknowledged {value} at {p}:{offset} never consumed");
    }
}

/// Parse VerifiableProducer's `producer_send_success` lines.
fn acked(line: &str) -> Option<Acked> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    (v["name"] == "producer_send_success").then_some(())?;
    Some((v["partition"].as_i64()? as i32, v["offset"].as_i64()?, v["value"].as_str()?.to_string()))
}

/// What VerifiableProducer reported: (send errors, whether it shut down
/// after closing its producer).
type ProducerEnd = (Vec<String>, bool);

/// Acknowledgements, each with the time it was read.
type Seen = Arc<Mutex<Vec<(Instant, Acked)>>>;

/// A running VerifiableProducer: its process, what it acknowledged so far,
/// the thread reading it, and its config file.
type RunningProducer =
    (Reaper, Seen, std::thread::JoinHandle<ProducerEnd>, tempfile::NamedTempFile);

/// Kafka's VerifiableProducer (idempotent, acks=all, 100 records a second,
/// until stopped) on `topic`; its acknowledgements with the time each was
/// read, and the thread that ends with what it reported. The config file
/// lives as long as the last return value.
fn start_producer(bootstrap: &str, topic: &str) -> RunningProducer {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        "enable.idempotence=true\nacks=all\nretries=2147483647\ndelivery.timeout.ms=120000\nrequest.timeout.ms=10000\nmax.in.flight.requests.per.connection=5\nlinger.ms=5\n",
    )
    .unwrap();
    let mut producer = Command::new("bash");
    producer
        .arg(repo_root().join("scripts/kafka-tool.sh"))
        .arg("org.apache.kafka.tools.VerifiableProducer")
        .args(["--bootstrap-server", bootstrap, "--topic", topic])
        // Unbounded: it runs until every failover is done, then is stopped.
        .args(["--max-messages", "-1", "--throughput", "100"])
        .arg("--producer.config")
        .arg(config.path())
        .env("KAFKA_HEAP_OPTS", "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = producer.spawn().expect("VerifiableProducer (scripts/kafka-tool.sh)");
    let stdout = child.stdout.take().unwrap();
    let reaper = Reaper(child);
    // Each acknowledgement with the time it was read.
    let seen: Seen = Arc::default();
    let reader = {
        let seen = Arc::clone(&seen);
        std::thread::spawn(move || {
            // (send errors, whether it shut down after closing its producer)
            let (mut errors, mut closed) = (Vec::new(), false);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(a) = acked(&line) {
                    seen.lock().unwrap().push((Instant::now(), a));
                } else if line.contains("\"producer_send_error\"") {
                    errors.push(line);
                } else if line.contains("\"shutdown_complete\"") {
                    closed = true;
                }
            }
            (errors, closed)
        })
    };
    (reaper, seen, reader, config)
}

/// Every acknowledged value of `topic` is in its partition exactly once, at
/// its offset, each partition read from its leader as broker `live`'s
/// Metadata names it; and the partitions hold
/// the values in the order they were sent.
fn check_in_log(brokers: &[TestBroker], live: u16, topic: &str, acked: &[Acked]) {
    let placement = leaders(live, topic);
    let mut logs: HashMap<i32, Vec<(i64, String)>> = HashMap::new();
    for (p, (leader, _)) in &placement {
        // A leader just elected (the preferred one, restored last) serves
        // up to its high watermark, which reaches what its predecessor had
        // committed once the followers fetch from it again.
        let last = acked.iter().filter(|a| a.0 == *p).map(|a| a.1).max().unwrap_or(-1);
        let b = &brokers[*leader as usize - 1];
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        let records = loop {
            let records = fetch_all(b.port, topic, *p);
            // -1 for a partition that got no record (the producer's sticky
            // partitioner may pass one by).
            let end = records.last().map_or(-1, |r| r.0);
            if end >= last {
                break records;
            }
            assert!(
                Instant::now() < deadline,
                "{topic}-{p} on its leader {leader} ends at {end} (its high watermark) below the acknowledged offset {last} after 30 s; leader's log:\n{}",
                b.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        logs.insert(*p, records.into_iter().map(|(o, _, v)| (o, v.unwrap_or_default())).collect());
    }
    let mut count: HashMap<&str, usize> = HashMap::new();
    for records in logs.values() {
        for (_, v) in records {
            *count.entry(v.as_str()).or_default() += 1;
        }
    }
    for (p, offset, value) in acked {
        if count.get(value.as_str()) != Some(&1) {
            panic!("{}", lost_value_report(brokers, &placement, &logs, (*p, *offset, value)));
        }
        let at = logs[p].iter().find(|(o, _)| o == offset).map(|(_, v)| v.as_str());
        assert_eq!(
            at,
            Some(value.as_str()),
            "value {value} at its acknowledged offset {p}:{offset}"
        );
    }
    // Sent in increasing order per partition: committed in that order.
    for records in logs.values() {
        let values: Vec<i64> = records.iter().filter_map(|(_, v)| v.parse().ok()).collect();
        assert!(values.windows(2).all(|w| w[0] < w[1]), "records out of the order sent");
    }
}

/// What the cluster says about an acknowledged value not found once: the
/// records around its offset on the partition's leader, and every
/// broker's log lines about the partition (leadership, ISR, truncation).
fn lost_value_report(
    brokers: &[TestBroker],
    placement: &BTreeMap<i32, (i32, usize)>,
    logs: &HashMap<i32, Vec<(i64, String)>>,
    (p, offset, value): (i32, i64, &str),
) -> String {
    let near: Vec<&(i64, String)> =
        logs[&p].iter().filter(|(o, _)| (offset - 3..=offset + 3).contains(o)).collect();
    let mut report = format!(
        "acknowledged value {value} at verify-{p}:{offset} is not in the log once; leader {:?}; around it on the leader: {near:?}\n",
        placement.get(&p)
    );
    let name = format!("verify-{p}");
    for (i, b) in brokers.iter().enumerate() {
        report.push_str(&format!("--- broker {} ---\n", i + 1));
        for line in b.log().lines().filter(|l| l.contains(&name) || l.contains("verify")) {
            report.push_str(line);
            report.push('\n');
        }
    }
    report
}

#[test]
fn every_acknowledged_value_survives_leader_kills_exactly_once() {
    let etcd = EtcdServer::start();
    // Preferred leaders restored each second (Kafka's default: 300 s).
    let mut brokers = start_cluster_with(&etcd, 3, &["leader.imbalance.check.interval.seconds=1"]);
    let port = brokers[0].port;
    let bootstrap: String = brokers.iter().map(TestBroker::bootstrap).collect::<Vec<_>>().join(",");
    create_topic(
        &brokers[0],
        "verify",
        3,
        &["--replication-factor", "3", "--config", "min.insync.replicas=2"],
    );
    brokers[0].wait_for(30, "three partitions in sync", || {
        let l = leaders(port, "verify");
        (l.len() == 3 && l.values().all(|(leader, isr)| *leader > 0 && *isr == 3)).then_some(())
    });

    let (reaper, seen, reader, _config) = start_producer(&bootstrap, "verify");
    let acks_on = |p: i32| seen.lock().unwrap().iter().filter(|(_, a)| a.0 == p).count();
    brokers[0].wait_for(60, "the producer under way", || (acks_on(0) > 50).then_some(()));
    let (mut consumer, batches) = start_consumer(&bootstrap);

    // Each partition's leader in turn: SIGKILL, wait for the next
    // acknowledgement on that partition, restart, wait for its ISR.
    let mut failovers = Vec::new();
    for p in 0..3 {
        let live = brokers.iter().find(|b| leaders(b.port, "verify")[&p].0 > 0).unwrap().port;
        let leader = leaders(live, "verify")[&p].0;
        let victim = leader as usize - 1;
        let before = acks_on(p);
        let killed = Instant::now();
        brokers[victim].kill();
        let other = brokers[(victim + 1) % 3].port;
        brokers[(victim + 1) % 3].wait_for(60, "an acknowledgement on the new leader", || {
            let seen = seen.lock().unwrap();
            let first = seen.iter().filter(|(_, a)| a.0 == p).nth(before + 20)?;
            Some(first.0)
        });
        let took = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, a)| a.0 == p)
            .nth(before)
            .map(|(t, _)| t.duration_since(killed));
        failovers.push(took);
        brokers[victim].restart();
        brokers[(victim + 1) % 3].wait_for(60, "the restarted broker back in sync", || {
            leaders(other, "verify").values().all(|(l, isr)| *l > 0 && *isr == 3).then_some(())
        });
    }
    // SIGTERM: its shutdown hook closes the producer, which waits for
    // every send in flight and reports it.
    let mut reaper = reaper;
    // SAFETY: kill(2) on our own child's pid (the JVM: kafka-tool.sh execs it).
    unsafe { libc::kill(reaper.0.id() as i32, libc::SIGTERM) };
    reaper.0.wait().unwrap();
    // Every partition back on its preferred replica (the first), in sync.
    let port = brokers[0].port;
    brokers[0].wait_for(30, "the preferred leaders restored", || {
        let p = placement(port, "verify");
        p.values().all(|(l, _, replicas, isr)| *l == replicas[0] && isr.len() == 3).then_some(())
    });
    let (errors, closed) = reader.join().unwrap();
    assert!(closed, "VerifiableProducer did not report shutdown_complete");
    assert!(errors.is_empty(), "sends that failed: {errors:?}");
    eprintln!("kill to first acknowledgement on the new leader, per partition: {failovers:?}");

    // Every acknowledged value is in its partition exactly once, at its offset.
    let acked: Vec<Acked> = seen.lock().unwrap().iter().map(|(_, a)| a.clone()).collect();
    assert!(acked.len() > 1000, "acknowledged sends: {}", acked.len());
    brokers[0].wait_for(60, "the consumer at the end of every partition", || {
        let batches = batches.lock().unwrap();
        let end = |p: i32| batches.iter().filter(|b| b.0 == p).map(|b| b.2).max();
        acked.iter().all(|(p, o, _)| end(*p).is_some_and(|e| e >= *o)).then_some(())
    });
    // SAFETY: kill(2) on our own child's pid (the JVM: kafka-tool.sh execs it).
    unsafe { libc::kill(consumer.0.id() as i32, libc::SIGTERM) };
    consumer.0.wait().unwrap();
    check_consumed(&batches.lock().unwrap(), &acked);
    check_in_log(&brokers, brokers[0].port, "verify", &acked);
    // Acceptance 7: the consumer group's offsets, committed through every
    // kill, are the same on every replica of __consumer_offsets.
    crate::support::assert_replicas_agree(&brokers, &["__consumer_offsets"]);
}

/// SIGTERM of a leader (controlled shutdown, design 6.6) while Kafka's
/// VerifiableProducer writes: before it exits, its leaderships move to the
/// other in-sync replicas at the next epoch and it leaves their ISRs, so the
/// partitions never go without a leader; the log says so, the producer sees
/// no failed send (only retriable errors, retried), and every value it was
/// acknowledged is in the log once.
#[test]
fn a_clean_stop_moves_leaderships_away_before_the_broker_exits() {
    let etcd = EtcdServer::start();
    let mut brokers = start_cluster(&etcd, 3);
    let port = brokers[0].port;
    create_topic(
        &brokers[0],
        "calm",
        3,
        &["--replication-factor", "3", "--config", "min.insync.replicas=2"],
    );
    let before = brokers[0].wait_for(30, "three partitions in sync", || {
        let l = leaders(port, "calm");
        (l.len() == 3 && l.values().all(|(leader, isr)| *leader > 0 && *isr == 3)).then_some(l)
    });
    let (p, (leader, _)) = before.iter().next().map(|(p, l)| (*p, *l)).unwrap();
    let stopping = leader as usize - 1;
    let other = brokers[(stopping + 1) % 3].port;
    // A producer under load through every broker.
    let bootstrap: String = brokers.iter().map(TestBroker::bootstrap).collect::<Vec<_>>().join(",");
    let (mut producer, seen, reader, _config) = start_producer(&bootstrap, "calm");
    let acks = || seen.lock().unwrap().len();
    brokers[0].wait_for(60, "the producer under way", || (acks() > 100).then_some(()));
    let stopped_at = Instant::now();
    brokers[stopping].terminate();
    // While it shuts down, its partition gets another leader.
    let moved = brokers[(stopping + 1) % 3].wait_for(20, "the leadership moved", || {
        let l = leaders(other, "calm");
        (l[&p].0 > 0 && l[&p].0 != leader).then_some(stopped_at.elapsed())
    });
    let status = brokers[stopping].wait_exit(30);
    assert!(status.success(), "{status:?}");
    let log = brokers[stopping].log();
    assert!(
        log.contains("controlled shutdown: leaderships moved") && log.contains("still_leading=0"),
        "{log}"
    );
    eprintln!("SIGTERM to the partition's new leader: {moved:?}");
    let after = leaders(other, "calm");
    for (q, (l, isr)) in &after {
        assert!(*l > 0 && *l != leader, "partition {q} led by {l}");
        assert_eq!(*isr, 2, "the stopped broker left the ISR of {q}");
    }
    // The producer saw only retriable errors: every send succeeded, and
    // every acknowledged value is in the log once, at its offset.
    let went_on = acks() + 100;
    brokers[(stopping + 1) % 3]
        .wait_for(60, "acknowledgements after the stop", || (acks() > went_on).then_some(()));
    // SAFETY: kill(2) on our own child's pid (the JVM: kafka-tool.sh execs it).
    unsafe { libc::kill(producer.0.id() as i32, libc::SIGTERM) };
    producer.0.wait().unwrap();
    let (errors, closed) = reader.join().unwrap();
    assert!(closed && errors.is_empty(), "send errors through a clean stop: {errors:?}");
    let acked: Vec<Acked> = seen.lock().unwrap().iter().map(|(_, a)| a.clone()).collect();
    check_in_log(&brokers, other, "calm", &acked);
}

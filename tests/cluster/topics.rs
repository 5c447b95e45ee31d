//! Topics across real brokers (docs/design/multi-broker.md, 4.5, 5.4):
//! `kafka-topics --create` through one broker places the partitions over
//! all three (each leads two of six), every broker's Metadata shows the same
//! leaders, kcat and Kafka's console tools produce and consume through any
//! bootstrap broker, and each partition's data lives only on its leader.
//! A factor the cluster cannot meet is refused with Kafka's code. SIGKILL of
//! a broker leaves its partitions offline (LEADER_NOT_AVAILABLE, a new
//! leader epoch) while the others go on; its restart brings them back, data
//! included, at the next epoch. `kafka-configs` alters a topic's config on
//! its leaders, and `kafka-topics --delete` removes every copy. Until
//! coordinators move with their partitions, every broker names the
//! controller as the coordinator of groups.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::etcd::EtcdServer;
use crate::broker::{kafka_tool, kcat, TestBroker, Wire};
use crate::support::{start, TOPICS};

/// A partition as one broker's Metadata v12 describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Described {
    error: i16,
    leader: i32,
    epoch: i32,
    replicas: Vec<i32>,
}

fn metadata(port: u16, topic: &str) -> (i16, BTreeMap<i32, Described>, usize) {
    let t = MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.into()))));
    let request =
        MetadataRequest::default().with_topics(Some(vec![t])).with_allow_auto_topic_creation(false);
    let r = Wire::connect(port).call(12, &request);
    let topic = &r.topics[0];
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let replicas = p.replica_nodes.iter().map(|b| b.0).collect();
            let d = Described {
                error: p.error_code,
                leader: p.leader_id.0,
                epoch: p.leader_epoch,
                replicas,
            };
            (p.partition_index, d)
        })
        .collect();
    (topic.error_code, partitions, r.brokers.len())
}

/// Wait until every broker in `ports` describes `topic` as `check` wants.
fn wait_metadata(
    ports: &[u16],
    topic: &str,
    what: &str,
    check: impl Fn(&BTreeMap<i32, Described>) -> bool,
) -> BTreeMap<i32, Described> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: Vec<_> = ports.iter().map(|p| metadata(*p, topic).1).collect();
        if seen.iter().all(&check) && seen.windows(2).all(|w| w[0] == w[1]) {
            return seen.into_iter().next().unwrap();
        }
        assert!(Instant::now() < deadline, "{what}: {seen:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn create_with_factor(port: u16, name: &str, factor: i16) -> (i16, String) {
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.into())))
        .with_num_partitions(1)
        .with_replication_factor(factor);
    let request = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let r = Wire::connect(port).call(7, &request);
    let t = &r.topics[0];
    (t.error_code, t.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default())
}

/// FindCoordinator v3 of a group: (error, node).
fn find_coordinator(port: u16) -> (i16, i32) {
    use kafka_protocol::messages::FindCoordinatorRequest;
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("a-group"))
        .with_key_type(0);
    let r = Wire::connect(port).call(3, &request);
    (r.error_code, r.node_id.0)
}

/// Kafka's console consumer through `b`: the first `n` values of `topic`.
fn consume(b: &TestBroker, topic: &str, n: usize) -> String {
    let (bootstrap, n) = (b.bootstrap(), n.to_string());
    let args = [
        "--bootstrap-server",
        &bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        &n,
        "--timeout-ms",
        "30000",
    ];
    kafka_tool(b, "org.apache.kafka.tools.consumer.ConsoleConsumer", &args, None)
}

fn partition_dir(b: &TestBroker, topic: &str, p: i32) -> std::path::PathBuf {
    b.data_dir().join(format!("{topic}-{p}"))
}

#[test]
fn topics_spread_over_the_brokers_and_follow_their_leaders() {
    let etcd = EtcdServer::start();
    let mut brokers: Vec<TestBroker> = (1..=3).map(|id| start(&etcd, id)).collect();
    let ports: Vec<u16> = brokers.iter().map(|b| b.port).collect();
    brokers[0].wait_for(20, "three brokers in Metadata", || {
        ports.iter().all(|p| metadata(*p, "none").2 == 3).then_some(())
    });

    // Created through broker 2, placed over all three.
    let b2 = brokers[1].bootstrap();
    let args = ["--bootstrap-server", &b2, "--create", "--topic", "spread", "--partitions", "6"];
    kafka_tool(&brokers[1], TOPICS, &args, None);
    let placed = wait_metadata(&ports, "spread", "six partitions with leaders", |m| {
        m.len() == 6 && m.values().all(|d| d.error == 0 && d.leader > 0)
    });
    let mut led: BTreeMap<i32, usize> = BTreeMap::new();
    for d in placed.values() {
        *led.entry(d.leader).or_default() += 1;
        assert_eq!(d.replicas, vec![d.leader], "one replica, the leader: {placed:?}");
        assert_eq!(d.epoch, 0);
    }
    assert_eq!(led, BTreeMap::from([(1, 2), (2, 2), (3, 2)]), "each broker leads two");
    let b3 = brokers[2].bootstrap();
    let described = kafka_tool(
        &brokers[2],
        TOPICS,
        &["--bootstrap-server", &b3, "--describe", "--topic", "spread"],
        None,
    );
    for (p, d) in &placed {
        let line = format!(
            "Partition: {p}\tLeader: {}\tReplicas: {}\tIsr: {}",
            d.leader, d.leader, d.leader
        );
        assert!(described.contains(&line), "{line:?} in\n{described}");
    }

    // A group's coordinator is the leader of its __consumer_offsets
    // partition, which the first lookup creates (COORDINATOR_NOT_AVAILABLE
    // meanwhile): every broker names the same one (coordinators.rs has
    // the failover).
    let coordinator = brokers[0].wait_for(30, "a group coordinator", || {
        let (code, node) = find_coordinator(ports[0]);
        (code == 0).then_some(node)
    });
    assert!(coordinator > 0);
    for (p, b) in ports.iter().zip(&brokers) {
        b.wait_for(10, "the same coordinator through every broker", || {
            (find_coordinator(*p) == (0, coordinator)).then_some(())
        });
    }

    // kcat through broker 1, Kafka's console consumer through broker 3.
    let input: String = (0..600).map(|i| format!("k{i}:v{i}\n")).collect();
    let b1 = brokers[0].bootstrap();
    let (ok, _, err) = kcat(&["-P", "-b", &b1, "-t", "spread", "-K:"], &input);
    assert!(ok, "kcat produce: {err}");
    let consumed = consume(&brokers[2], "spread", 600);
    let mut values: Vec<&str> = consumed.lines().collect();
    values.sort_unstable();
    let mut want: Vec<String> = (0..600).map(|i| format!("v{i}")).collect();
    want.sort_unstable();
    assert_eq!(values, want.iter().map(String::as_str).collect::<Vec<_>>());
    // Each partition's log is on its leader alone.
    for (p, d) in &placed {
        for (i, b) in brokers.iter().enumerate() {
            let here = partition_dir(b, "spread", *p).exists();
            assert_eq!(here, i as i32 + 1 == d.leader, "partition {p} on broker {}", i + 1);
        }
    }

    // A factor beyond the brokers: Kafka's code and message.
    let (code, message) = create_with_factor(ports[0], "too-many", 4);
    assert_eq!(code, 38, "INVALID_REPLICATION_FACTOR: {message}");
    assert!(message.contains("only 3 broker(s) are registered"), "{message}");

    // kafka-configs on the topic: every leader's copy takes it.
    let args = [
        "--bootstrap-server",
        &b1,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "spread",
        "--add-config",
        "retention.ms=3600000",
    ];
    kafka_tool(&brokers[0], "kafka.admin.ConfigCommand", &args, None);
    for (p, d) in &placed {
        let b = &brokers[d.leader as usize - 1];
        let file = partition_dir(b, "spread", *p).join("topic.properties");
        b.wait_for(20, "the config applied", || {
            std::fs::read_to_string(&file).ok().filter(|t| t.contains("retention.ms=3600000"))
        });
    }

    // SIGKILL of broker 3: its partitions go offline at a new epoch once its
    // session expires; the others keep their leaders and take writes.
    brokers[2].kill();
    let live = &ports[..2];
    let offline = wait_metadata(live, "spread", "broker 3's partitions offline", |m| {
        m.values().filter(|d| d.leader == -1).count() == 2
    });
    for (p, d) in &offline {
        if placed[p].leader == 3 {
            assert_eq!((d.error, d.epoch), (5, 1), "LEADER_NOT_AVAILABLE at epoch 1: {d:?}");
        } else {
            assert_eq!(d, &placed[p], "partition {p} unchanged");
        }
    }
    let led_by_1 = *placed.iter().find(|(_, d)| d.leader == 1).unwrap().0;
    let part = led_by_1.to_string();
    let (ok, _, err) = kcat(&["-P", "-b", &b2, "-t", "spread", "-p", &part], "after-kill\n");
    assert!(ok, "produce to a live leader while broker 3 is down: {err}");

    // Restarted on its data: it leads its partitions again, at epoch 2, with
    // their records.
    brokers[2].restart();
    let ports: Vec<u16> = brokers.iter().map(|b| b.port).collect();
    let back = wait_metadata(&ports, "spread", "broker 3 leading again", |m| {
        m.values().all(|d| d.error == 0 && d.leader > 0)
    });
    for (p, d) in &back {
        let want_epoch = if placed[p].leader == 3 { 2 } else { 0 };
        assert_eq!((d.leader, d.epoch), (placed[p].leader, want_epoch), "partition {p}");
    }
    let b3 = brokers[2].bootstrap();
    let again = consume(&brokers[2], "spread", 601);
    assert_eq!(again.lines().count(), 601, "every record, the one written meanwhile too");

    // Deleted through broker 3: every copy goes.
    kafka_tool(
        &brokers[2],
        TOPICS,
        &["--bootstrap-server", &b3, "--delete", "--topic", "spread"],
        None,
    );
    for b in &brokers {
        b.wait_for(20, "the copies deleted", || {
            (0..6).all(|p| !partition_dir(b, "spread", p).exists()).then_some(())
        });
        assert_eq!(metadata(b.port, "spread").0, 3, "UNKNOWN_TOPIC_OR_PARTITION after the delete");
        assert!(!b.log().contains("panicked"), "{}", b.log());
    }
}

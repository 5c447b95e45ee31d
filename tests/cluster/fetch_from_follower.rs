//! Fetch from follower (KIP-392): three brokers in racks r1..r3 with
//! `replica.selector.class=RackAwareReplicaSelector`. A leader sends a
//! consumer whose `client.rack` is a follower's rack to that follower
//! (`preferred_read_replica`, no records) and serves one of its own rack;
//! the follower serves consumers up to its high watermark, checks their
//! leader epoch against its leader's, and wakes a consumer's long poll when
//! replication brings it records. Kafka's Java consumer with `client.rack`
//! then reads everything from the follower, since the leader gives that
//! rack no records.

use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::etcd::EtcdServer;
use crate::broker::{http_get, kafka_tool_output, kcat, TestBroker, Wire};
use crate::support::{create_topic, placement, wait_leaders};

const SELECTOR: &str =
    "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// A consumer's Fetch v11 of `t`-0 from `offset`, as a client of `rack`.
fn fetch(port: u16, rack: &str, epoch: i32, offset: i64, max_wait_ms: i32) -> PartitionData {
    let partition = FetchPartition::default()
        .with_partition(0)
        .with_current_leader_epoch(epoch)
        .with_fetch_offset(offset)
        .with_log_start_offset(-1)
        .with_partition_max_bytes(1 << 20);
    let topic = FetchTopic::default()
        .with_topic(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(vec![partition]);
    let request = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![topic])
        .with_rack_id(StrBytes::from_string(rack.into()));
    let mut response = Wire::connect(port).call(11, &request);
    assert_eq!(response.error_code, 0);
    response.responses.remove(0).partitions.remove(0)
}

fn records(p: &PartitionData) -> usize {
    p.records.as_ref().map_or(0, |r| crate::common::decode(r).len())
}

fn start(etcd: &EtcdServer, id: i32) -> TestBroker {
    let rack = format!("broker.rack=r{id}");
    crate::support::start_with(etcd, id, &[&rack, SELECTOR])
}

#[test]
fn consumers_read_from_a_follower_in_their_rack() {
    let etcd = EtcdServer::start();
    let brokers: Vec<TestBroker> = (1..=3).map(|id| start(&etcd, id)).collect();
    brokers[0].wait_for(20, "every broker registered", || {
        (placement_brokers(brokers[0].port) == 3).then_some(())
    });
    create_topic(&brokers[0], "t", 1, &["--replication-factor", "3"]);
    wait_leaders(&brokers, "t", 1);
    let lines: String = (0..200).map(|i| format!("v{i}\n")).collect();
    let bootstrap = brokers[0].bootstrap();
    let (ok, _, err) = kcat(&["-b", &bootstrap, "-P", "-t", "t", "-X", "acks=all"], &lines);
    assert!(ok, "{err}");

    let (leader, epoch, _, _) = placement(brokers[0].port, "t")[&0].clone();
    let follower = (1..=3).find(|n| *n != leader).unwrap();
    let (at_leader, at_follower) =
        (brokers[leader as usize - 1].port, brokers[follower as usize - 1].port);
    let rack = format!("r{follower}");
    // The follower's high watermark reaches the end with its next fetch.
    brokers[0].wait_for(20, "the follower's high watermark at 200", || {
        (fetch(at_follower, &rack, epoch, 0, 0).high_watermark == 200).then_some(())
    });

    // Kafka's FetcherLagMetrics: the follower's lag on t-0, caught up.
    let lag = r#"kafka_server_fetcherlagmetrics_consumerlag{partition="0",topic="t"}"#;
    let f = &brokers[follower as usize - 1];
    f.wait_for(20, "the follower's lag exported", || (f.metric(lag) == Some(0.0)).then_some(()));
    assert_eq!(brokers[leader as usize - 1].metric(lag), None, "the leader follows nothing");
    // Kafka's FetcherStats: the follower's one fetcher thread for the
    // leader (num.replica.fetchers=1) was answered and brought the 200
    // records; none of its fetcher threads died.
    let thread = format!(r#"{{client_id="ReplicaFetcherThread-0-{leader}"}}"#);
    let bytes = f.metric(&format!("kafka_server_fetcherstats_bytes_total{thread}"));
    assert!(bytes.is_some_and(|b| b >= 200.0 * 2.0), "bytes replicated: {bytes:?}");
    let requests = f.metric(&format!("kafka_server_fetcherstats_requests_total{thread}"));
    assert!(requests.is_some_and(|r| r >= 1.0), "fetches answered: {requests:?}");
    assert_eq!(f.metric("kafka_server_replicafetchermanager_deadthreadcount"), Some(0.0));

    let sent = fetch(at_leader, &rack, epoch, 0, 0);
    assert_eq!(sent.error_code, 0);
    assert_eq!(
        sent.preferred_read_replica.0, follower,
        "the leader sends rack {rack} to {follower}"
    );
    assert_eq!(records(&sent), 0, "and gives it no records");
    assert_eq!(sent.high_watermark, 200);
    let own = fetch(at_leader, &format!("r{leader}"), epoch, 0, 0);
    assert_eq!((own.preferred_read_replica.0, records(&own)), (-1, 200), "its own rack reads here");
    let none = fetch(at_leader, "", epoch, 0, 0);
    assert_eq!(none.preferred_read_replica.0, -1, "a client without a rack reads here");

    let read = fetch(at_follower, &rack, epoch, 0, 0);
    assert_eq!((read.error_code, records(&read), read.high_watermark), (0, 200, 200));
    let ahead = fetch(at_follower, &rack, epoch + 1, 0, 0);
    assert_eq!(ahead.error_code, 75, "UNKNOWN_LEADER_EPOCH from the follower");

    // A long poll on the follower is answered when replication brings a
    // record, not at its deadline.
    let waiting = std::thread::spawn({
        let rack = rack.clone();
        move || {
            let asked = Instant::now();
            (fetch(at_follower, &rack, epoch, 200, 20_000), asked.elapsed())
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let (ok, _, err) = kcat(&["-b", &bootstrap, "-P", "-t", "t", "-X", "acks=all"], "late\n");
    assert!(ok, "{err}");
    let (late, waited) = waiting.join().unwrap();
    assert_eq!(records(&late), 1, "the record that arrived while it waited");
    assert!(waited < Duration::from_secs(15), "woken by the record, not its deadline: {waited:?}");

    // Kafka's consumer in the follower's rack reads every record from it.
    let client_rack = format!("client.rack={rack}");
    let args = [
        "--bootstrap-server",
        &bootstrap,
        "--topic",
        "t",
        "--from-beginning",
        "--max-messages",
        "201",
        "--timeout-ms",
        "30000",
        crate::broker::consumer_property_flag(),
        &client_rack,
    ];
    let (_, out, err) =
        kafka_tool_output("org.apache.kafka.tools.consumer.ConsoleConsumer", &args, None);
    let values: Vec<&str> = out.lines().collect();
    assert_eq!(values.len(), 201, "{err}");
    assert_eq!(values[0], "v0");
    assert_eq!(values[200], "late");
    replicas_named_by_the_cleaners_view(&brokers);
}

/// Each broker's `/cleaner-status` says whose replica each compacted
/// partition is: its broker, the role, the leader epoch it knows and its
/// high watermark; `sediment cleaner-status` prints them.
fn replicas_named_by_the_cleaners_view(brokers: &[TestBroker]) {
    let compact = ["--replication-factor", "3", "--config", "cleanup.policy=compact"];
    create_topic(&brokers[0], "state", 1, &compact);
    wait_leaders(brokers, "state", 1);
    let bootstrap = brokers[0].bootstrap();
    let (ok, _, err) =
        kcat(&["-b", &bootstrap, "-P", "-t", "state", "-K:", "-X", "acks=all"], "k:v\nk:w\n");
    assert!(ok, "{err}");
    let (leader, epoch, _, _) = placement(brokers[0].port, "state")[&0].clone();
    for (i, b) in brokers.iter().enumerate() {
        let id = i as i32 + 1;
        let role = if id == leader { "leader" } else { "follower" };
        let p = b.wait_for(20, "the replica at the high watermark", || {
            let doc = b.cleaner_status();
            assert_eq!(doc["broker"], id, "{doc}");
            let parts = doc["manager"]["partitions"].as_array().cloned().unwrap_or_default();
            let p = parts.into_iter().find(|p| p["topic"] == "state")?;
            (p["high_watermark"] == 2).then_some(p)
        });
        assert_eq!(
            (p["role"].as_str(), p["leader_epoch"].as_i64()),
            (Some(role), Some(epoch.into()))
        );
        let metrics = format!("127.0.0.1:{}", b.metrics_port);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sediment"))
            .args(["cleaner-status", "--metrics", &metrics])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("broker {id}'s replicas")), "{text}");
        let line = format!("({role} at leader epoch {epoch}, high watermark 2)");
        assert!(text.contains(&line), "{line} in:\n{text}");
        // The key audit reads this replica's own copy, and says whose.
        let (status, body) = http_get(b.metrics_port, "/key-audit?topic=state&key=k");
        assert_eq!(status, 200, "{body}");
        let audit: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (audit["broker"].as_i64(), audit["role"].as_str()),
            (Some(id.into()), Some(role))
        );
        assert_eq!(audit["copies"].as_array().map(Vec::len), Some(2), "{audit}");
    }
}

/// How many brokers `port`'s Metadata lists.
fn placement_brokers(port: u16) -> usize {
    let request = kafka_protocol::messages::MetadataRequest::default().with_topics(Some(vec![]));
    Wire::connect(port).call(12, &request).brokers.len()
}

//! Groups move with their `__consumer_offsets` partitions
//! (docs/design/multi-broker.md, 7.1-7.2): the topic is created by the
//! first FindCoordinator at Kafka's replication factor (3), each group is
//! coordinated by the leader of its partition, and when that broker is
//! SIGKILLed the partition's new leader loads the group from its replica:
//! the committed offsets are there, and a consumer of the group resumes
//! after them, through a broker that never coordinated it.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{OffsetFetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::etcd::EtcdServer;
use crate::broker::{kafka_tool, kafka_tool_output, TestBroker, Wire};
use crate::support::{create_topic, placement, start_cluster_with};

const PRODUCER: &str = "org.apache.kafka.tools.ConsoleProducer";
const CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";

/// FindCoordinator v2 for `group` through `port`: the node, or the error code.
fn coordinator(port: u16, group: &str) -> Result<i32, i16> {
    crate::support::find_coordinator(port, group, 0)
}

/// OffsetFetch v7 of `group`'s offset of `topic`-0 from broker `port`: the
/// top-level error code, or the committed offset (-1 for none).
fn committed(port: u16, group: &str, topic: &str) -> Result<i64, i16> {
    let t = OffsetFetchRequestTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_partition_indexes(vec![0]);
    let request = OffsetFetchRequest::default()
        .with_group_id(StrBytes::from_string(group.into()).into())
        .with_topics(Some(vec![t]));
    let r = Wire::connect(port).call(7, &request);
    if r.error_code != 0 {
        return Err(r.error_code);
    }
    let p = &r.topics[0].partitions[0];
    if p.error_code != 0 {
        return Err(p.error_code);
    }
    Ok(p.committed_offset)
}

/// Kafka's console consumer in `group` reading up to `n` values of `topic`
/// through `bootstrap` (its offsets committed when it closes).
fn consume(b: &TestBroker, bootstrap: &str, group: &str, topic: &str, n: usize) -> Vec<String> {
    let n = n.to_string();
    let args = [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--from-beginning",
        "--max-messages",
        &n,
        "--timeout-ms",
        "30000",
    ];
    kafka_tool(b, CONSUMER, &args, None).lines().map(String::from).collect()
}

fn produce(b: &TestBroker, bootstrap: &str, topic: &str, values: &[String]) {
    let input = values.join("\n") + "\n";
    let args =
        ["--bootstrap-server", bootstrap, "--topic", topic, "--producer-property", "acks=all"];
    let (ok, out, err) = kafka_tool_output(PRODUCER, &args, Some(&input));
    assert!(ok, "console producer failed\n{out}\n{err}\nbroker:\n{}", b.log());
}

#[test]
fn a_group_keeps_its_offsets_when_its_coordinator_is_killed() {
    let etcd = EtcdServer::start();
    let mut brokers = start_cluster_with(&etcd, 3, &["offsets.topic.num.partitions=3"]);
    let port = brokers[0].port;
    create_topic(&brokers[0], "orders", 1, &["--replication-factor", "3"]);
    let bootstrap = brokers[0].bootstrap();
    let first: Vec<String> = (0..10).map(|i| format!("a{i}")).collect();
    produce(&brokers[0], &bootstrap, "orders", &first);

    // The first lookup creates the topic at RF 3; a leader follows.
    let coord = brokers[0]
        .wait_for(30, "a coordinator for the group", || coordinator(port, "billing").ok());
    let offsets = placement(port, "__consumer_offsets");
    assert_eq!(offsets.len(), 3, "{offsets:?}");
    assert!(offsets.values().all(|(_, _, replicas, _)| replicas.len() == 3), "{offsets:?}");
    // Every broker names the same coordinator, the leader of its partition.
    for b in &brokers {
        b.wait_for(10, "the same coordinator everywhere", || {
            (coordinator(b.port, "billing") == Ok(coord)).then_some(())
        });
    }
    assert!(offsets.values().any(|(leader, ..)| *leader == coord));

    // A consumer through a broker that may not coordinate: it joins, reads
    // the ten values and commits offset 10 as it closes.
    assert_eq!(consume(&brokers[0], &bootstrap, "billing", "orders", 10), first);
    let coord_port = brokers[coord as usize - 1].port;
    assert_eq!(committed(coord_port, "billing", "orders"), Ok(10));
    // Others answer NOT_COORDINATOR (16).
    let other = brokers.iter().find(|b| b.port != coord_port).unwrap().port;
    assert_eq!(committed(other, "billing", "orders"), Err(16));

    // The in-sync replicas of its partition hold the commit: kill the
    // coordinator, and the new leader coordinates the group from its copy.
    brokers[coord as usize - 1].kill();
    let survivor = brokers.iter().find(|b| b.port != coord_port).unwrap();
    let moved = survivor.wait_for(30, "a new coordinator", || {
        coordinator(survivor.port, "billing").ok().filter(|c| *c != coord)
    });
    let moved_port = brokers[moved as usize - 1].port;
    let offset = survivor.wait_for(30, "the group loaded on its new coordinator", || {
        committed(moved_port, "billing", "orders").ok()
    });
    assert_eq!(offset, 10, "the committed offset after the coordinator's death");

    // The group resumes after its commit through the other survivor.
    let second: Vec<String> = (0..5).map(|i| format!("b{i}")).collect();
    let bootstrap = survivor.bootstrap();
    produce(survivor, &bootstrap, "orders", &second);
    assert_eq!(consume(survivor, &bootstrap, "billing", "orders", 5), second);
    assert_eq!(committed(moved_port, "billing", "orders"), Ok(15));

    // The killed broker returns as a follower of the partition and does not
    // coordinate the group again until it leads it.
    brokers[coord as usize - 1].restart();
    let back = brokers[coord as usize - 1].port;
    brokers[coord as usize - 1].wait_for(30, "the returned broker answering", || {
        let c = coordinator(back, "billing").ok()?;
        Some(c)
    });
    let now = coordinator(back, "billing").unwrap();
    let now_port = brokers[now as usize - 1].port;
    assert_eq!(committed(now_port, "billing", "orders"), Ok(15));
}

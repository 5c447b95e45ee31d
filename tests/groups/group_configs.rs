//! Group configs (KIP-848's dynamic group configs) with Kafka's own
//! `kafka-configs --entity-type groups`, on one broker start and a restart:
//! set, described as Kafka 4.4 describes them (source and synonyms), listed
//! by ListConfigResources (which the tool asks to find a group that has
//! configs but no members), honoured by the coordinator (a group's own
//! heartbeat interval and session timeout), refused with Kafka's messages
//! when out of bounds or of a group kind sediment does not run, kept across
//! a restart, and deleted.

use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, ListConfigResourcesRequest,
    ListConfigResourcesResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::broker::{create_topic, kafka_tool, kafka_tool_output, TestBroker, Wire};

const CONFIGS: &str = "kafka.admin.ConfigCommand";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn join(w: &mut Wire, group: &str, member: &str) -> ConsumerGroupHeartbeatResponse {
    let r: ConsumerGroupHeartbeatResponse = w.call(
        1,
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_member_id(s(member))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
            .with_topic_partitions(Some(vec![])),
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    r
}

fn members(w: &mut Wire, group: &str) -> usize {
    let r: ConsumerGroupDescribeResponse =
        w.call(0, &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(group))]));
    r.groups[0].members.len()
}

fn groups_with_configs(w: &mut Wire) -> Vec<String> {
    let r: ListConfigResourcesResponse =
        w.call(1, &ListConfigResourcesRequest::default().with_resource_types(vec![32]));
    assert_eq!(r.error_code, 0);
    r.config_resources.iter().map(|c| c.resource_name.to_string()).collect()
}

#[test]
fn group_configs_are_set_described_honoured_and_kept() {
    // Bounds wide enough for a short session, so its expiry can be seen.
    let mut b = TestBroker::start(&["group.consumer.min.session.timeout.ms=6000"]);
    create_topic(b.port, "t", 1, &[]);
    let bs = b.bootstrap();
    let configs = |b: &TestBroker, args: &[&str]| {
        let mut all = vec!["--bootstrap-server", bs.as_str(), "--entity-type", "groups"];
        all.extend_from_slice(args);
        kafka_tool(b, CONFIGS, &all, None)
    };
    let set = ["--alter", "--entity-name", "g1", "--add-config"];
    let out = configs(
        &b,
        &[&set[..], &["consumer.heartbeat.interval.ms=6000,consumer.session.timeout.ms=8000"]]
            .concat(),
    );
    assert!(out.contains("Completed updating config for group g1."), "{out}");

    // Described although g1 has no members yet: ListConfigResources names it.
    let mut w = Wire::connect(b.port);
    assert_eq!(groups_with_configs(&mut w), ["g1"]);
    let described = configs(&b, &["--describe", "--entity-name", "g1"]);
    assert!(described.contains("Dynamic configs for group g1 are:"), "{described}");
    assert!(described.contains("consumer.heartbeat.interval.ms=6000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=6000, DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}"), "{described}");
    assert!(described.contains("consumer.session.timeout.ms=8000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=8000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}"), "{described}");
    let all = configs(&b, &["--describe", "--entity-name", "g2", "--all"]);
    assert!(all.contains("consumer.session.timeout.ms=45000 sensitive=false synonyms={DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}"), "{all}");

    // Honoured: g1's members are told its interval, g2's the broker's; a
    // silent member of g1 is fenced after g1's 8 s session, g2's is not.
    assert_eq!(join(&mut w, "g1", "a").heartbeat_interval_ms, 6000);
    assert_eq!(join(&mut w, "g2", "b").heartbeat_interval_ms, 5000);
    let start = Instant::now();
    while members(&mut w, "g1") == 1 {
        assert!(start.elapsed() < Duration::from_secs(30), "g1's member was never fenced");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(start.elapsed() >= Duration::from_secs(6), "fenced before its session ran out");
    assert_eq!(members(&mut w, "g2"), 1, "g2 keeps the broker's 45 s session");

    // Refused with Kafka's messages; nothing changes.
    for (bad, why) in [
        (
            "consumer.session.timeout.ms=1000",
            "consumer.session.timeout.ms must be in the range 6000 to 60000 inclusive.",
        ),
        (
            "consumer.heartbeat.interval.ms=9000",
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms",
        ),
        (
            "share.record.lock.duration.ms=20000",
            "share groups (KIP-932) are not supported by sediment",
        ),
        ("foo.bar=1", "Unknown group config name: foo.bar"),
    ] {
        let args = [
            "--bootstrap-server",
            bs.as_str(),
            "--entity-type",
            "groups",
            "--alter",
            "--entity-name",
            "g1",
            "--add-config",
            bad,
        ];
        let (ok, stdout, stderr) = kafka_tool_output(CONFIGS, &args, None);
        assert!(!ok && format!("{stdout}{stderr}").contains(why), "{bad}: {stdout}{stderr}");
    }

    // Kept across a SIGKILL and restart, then deleted.
    b.kill();
    b.restart();
    let mut w = Wire::connect(b.port);
    assert_eq!(join(&mut w, "g1", "c").heartbeat_interval_ms, 6000);
    let del = [
        "--alter",
        "--entity-name",
        "g1",
        "--delete-config",
        "consumer.heartbeat.interval.ms,consumer.session.timeout.ms",
    ];
    configs(&b, &del);
    assert!(groups_with_configs(&mut w).is_empty());
    assert_eq!(join(&mut w, "g1", "d").heartbeat_interval_ms, 5000);
    let described = configs(&b, &["--describe", "--entity-name", "g1"]);
    assert!(!described.contains("consumer.heartbeat.interval.ms"), "{described}");
}

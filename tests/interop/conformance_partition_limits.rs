//! Partition counts beyond what a broker should create are refused as Apache
//! Kafka 4.4.0 refuses them: the same CreateTopics and CreatePartitions go to
//! a real Kafka (started from its jars) and to sediment, and each topic's
//! error code must be equal. Counts are asked with `validate_only` where
//! Kafka would accept them, so neither broker creates thousands of
//! partitions; the huge ones are asked for real too, since a broker that
//! tried to create 2^31 - 1 partitions would not answer at all.

use std::time::Duration;

use crate::broker::reference_kafka::ReferenceKafka;
use crate::broker::txn::s;
use crate::broker::{create_topic, TestBroker, Wire};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;

const PRESENT: &str = "limits-present";

fn create_topics(w: &mut Wire, count: i32, configs: usize, validate_only: bool) -> String {
    use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
    let name = format!("limits-{count}-{configs}-{validate_only}");
    // Any topic config Kafka accepts; each is one more record of the request.
    let all = [("retention.ms", "100000"), ("segment.ms", "100000"), ("flush.ms", "100000")];
    let configs = all[..configs]
        .iter()
        .map(|(k, v)| CreatableTopicConfig::default().with_name(s(k)).with_value(Some(s(v))))
        .collect();
    let r = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s(&name)))
            .with_num_partitions(count)
            .with_replication_factor(-1)
            .with_configs(configs)])
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only);
    let resp = w.call(7, &r);
    format!("CreateTopics {name}: {}", resp.topics[0].error_code)
}

fn create_partitions(w: &mut Wire, count: i32, validate_only: bool) -> String {
    let r = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(TopicName(s(PRESENT)))
            .with_count(count)
            .with_assignments(None)])
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only);
    let resp = w.call(3, &r);
    format!(
        "CreatePartitions {count} validate_only={validate_only}: {}",
        resp.results[0].error_code
    )
}

fn probes(port: u16) -> Vec<String> {
    create_topic(port, PRESENT, 1, &[]);
    let mut w = Wire::connect(port);
    w.stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let mut out = Vec::new();
    // Around Kafka's two caps: partitions per request, records per request
    // (a topic's record, one per partition, one per config).
    for (count, configs) in [(9_999, 0), (10_000, 0), (9_998, 1), (9_998, 2), (i32::MAX, 0)] {
        out.push(create_topics(&mut w, count, configs, true));
    }
    for count in [10_000, 10_001, 10_002, i32::MAX] {
        out.push(create_partitions(&mut w, count, true));
    }
    // For real only where Kafka refuses (it would take minutes to create).
    out.push(create_topics(&mut w, i32::MAX, 0, false));
    out.push(create_partitions(&mut w, i32::MAX, false));
    out
}

#[test]
fn partition_counts_are_limited_as_kafka_limits_them() {
    // Kafka 4.4.0, not 4.1.2: 4.1.2 answers a CreatePartitions adding more
    // than 10,000 partitions with UNKNOWN_SERVER_ERROR (its controller's
    // unhandled refusal); 4.4.0 with POLICY_VIOLATION, as its CreateTopics.
    let kafka = ReferenceKafka::start_version("4.4.0", &[]);
    let sediment = TestBroker::start(&[]);
    let want = probes(kafka.port);
    let got = probes(sediment.port);
    assert_eq!(got, want, "sediment (left) answers differently from Kafka 4.4.0 (right)");
    // The broker is still serving, and created nothing for the refused asks.
    let mut w = Wire::connect(sediment.port);
    let m = w.call(12, &MetadataRequest::default().with_topics(None));
    let names: Vec<String> =
        m.topics.iter().filter_map(|t| t.name.as_ref()).map(|n| n.to_string()).collect();
    assert_eq!(names, [PRESENT], "{names:?}");
}

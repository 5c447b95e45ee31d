//! The protocol edge with crafted requests: ApiVersions negotiation, in-order
//! pipelining, Produce errors, idempotent producers across restarts, Fetch
//! long-poll, and graceful shutdown.

use crate::common;

use std::time::{Duration, Instant};

use crate::broker::{create_topic, TestBroker, Wire};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchRequest, InitProducerIdRequest,
    MetadataRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn produce_request(topic: &str, partition: i32, acks: i16, records: Vec<u8>) -> ProduceRequest {
    ProduceRequest::default().with_acks(acks).with_timeout_ms(10_000).with_topic_data(vec![
        TopicProduceData::default().with_name(name(topic)).with_partition_data(vec![
            PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(Bytes::from(records))),
        ]),
    ])
}

fn keyed_batch(records: &[(&str, Option<&str>)]) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, 1_700_000_000_000);
    for (k, v) in records {
        b.append(1_700_000_000_000, Some(k.as_bytes()), v.map(str::as_bytes));
    }
    b.build()
}

fn idempotent_batch(pid: i64, epoch: i16, seq: i32, values: &[&str]) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, 1_700_000_000_000).producer(pid, epoch, seq);
    for v in values {
        b.append(1_700_000_000_000, Some(b"k"), Some(v.as_bytes()));
    }
    b.build()
}

#[test]
fn api_versions_lists_exact_ranges_and_answers_unknown_versions_with_v0() {
    let b = TestBroker::start(&[]);
    let mut w = Wire::connect(b.port);
    let r = w.call(
        3,
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("t"))
            .with_client_software_version(StrBytes::from_static_str("1")),
    );
    assert_eq!(r.error_code, 0);
    let range = |key: ApiKey| {
        r.api_keys.iter().find(|a| a.api_key == key as i16).map(|a| (a.min_version, a.max_version))
    };
    assert_eq!(range(ApiKey::Produce), Some((0, 13)));
    assert_eq!(range(ApiKey::Fetch), Some((4, 18)));
    assert_eq!(range(ApiKey::Metadata), Some((0, 13)));
    assert_eq!(range(ApiKey::JoinGroup), Some((0, 9)));
    assert_eq!(range(ApiKey::ConsumerGroupHeartbeat), Some((0, 1)));
    assert_eq!(range(ApiKey::ElectLeaders), Some((0, 2)));
    assert_eq!(range(ApiKey::AlterPartitionReassignments), Some((0, 1)));
    assert_eq!(range(ApiKey::ListPartitionReassignments), Some((0, 0)));
    // The controller's side of a leader's ISR change (a single node answers
    // NOT_CONTROLLER); an API not implemented is not advertised.
    assert_eq!(range(ApiKey::AlterPartition), Some((2, 3)));
    assert_eq!(range(ApiKey::ShareFetch), None, "not implemented, so not advertised");

    // v5 (KIP-1242): a client that means another cluster, or another node
    // of this one, is told to rebootstrap; naming this one is answered.
    let meta: kafka_protocol::messages::MetadataResponse =
        w.call(12, &kafka_protocol::messages::MetadataRequest::default());
    let cluster = meta.cluster_id.expect("a cluster id");
    let ask = |w: &mut Wire, cluster: &StrBytes, node: i32| {
        let request =
            ApiVersionsRequest::default().with_cluster_id(Some(cluster.clone())).with_node_id(node);
        w.call::<ApiVersionsRequest>(5, &request).error_code
    };
    let node = meta.brokers[0].node_id.0;
    assert_eq!(ask(&mut w, &cluster, node), 0);
    assert_eq!(ask(&mut w, &cluster, node + 1), ResponseError::RebootstrapRequired.code());
    assert_eq!(
        ask(&mut w, &StrBytes::from_static_str("elsewhere"), node),
        ResponseError::RebootstrapRequired.code()
    );
    assert_eq!(
        w.call::<ApiVersionsRequest>(3, &ApiVersionsRequest::default()).error_code,
        0,
        "the connection goes on"
    );

    // A version from the future: error 35, v0 body, v0 header (no tagged fields).
    let mut raw = vec![0x00, 0x12, 0x00, 0x63, 0x00, 0x00, 0x00, 0x2a, 0xff, 0xff, 0x00];
    raw.splice(0..0, (raw.len() as i32).to_be_bytes());
    w.write_raw(&raw).unwrap();
    let (correlation, mut body) = w.recv_frame().unwrap();
    assert_eq!(correlation, 42);
    let v0 = ApiVersionsResponse::decode(&mut body, 0).unwrap();
    assert_eq!(v0.error_code, ResponseError::UnsupportedVersion.code());
    assert!(v0.api_keys.iter().any(|a| a.api_key == ApiKey::Fetch as i16));
    assert!(body.is_empty(), "nothing after the v0 body");
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let b = TestBroker::start(&[]);
    let mut w = Wire::connect(b.port);
    let ids: Vec<i32> = (0..20)
        .map(|i| {
            if i % 2 == 0 {
                w.send(12, &MetadataRequest::default())
            } else {
                w.send(3, &ApiVersionsRequest::default())
            }
        })
        .collect();
    for id in ids {
        assert_eq!(w.recv_frame().unwrap().0, id);
    }
}

#[test]
fn produce_errors_are_per_partition_and_per_record() {
    let b = TestBroker::start(&["auto.create.topics.enable=false"]);
    create_topic(b.port, "plain", 1, &[("max.message.bytes", "200")]);
    create_topic(b.port, "compacted", 1, &[("cleanup.policy", "compact")]);
    let mut w = Wire::connect(b.port);
    let code = |r: &kafka_protocol::messages::ProduceResponse| {
        r.responses[0].partition_responses[0].error_code
    };

    let ok = w.call(9, &produce_request("plain", 0, -1, keyed_batch(&[("a", Some("1"))])));
    assert_eq!(code(&ok), 0);
    assert_eq!(ok.responses[0].partition_responses[0].base_offset, 0);

    let unknown = w.call(9, &produce_request("nope", 0, 1, keyed_batch(&[("a", Some("1"))])));
    assert_eq!(code(&unknown), ResponseError::UnknownTopicOrPartition.code());

    let acks = w.call(9, &produce_request("plain", 0, 2, keyed_batch(&[("a", Some("1"))])));
    assert_eq!(code(&acks), ResponseError::InvalidRequiredAcks.code());

    let big = "x".repeat(500);
    let too_large = w.call(9, &produce_request("plain", 0, 1, keyed_batch(&[("a", Some(&big))])));
    assert_eq!(code(&too_large), ResponseError::MessageTooLarge.code());

    let mut bad_crc = keyed_batch(&[("a", Some("1"))]);
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;
    let corrupt = w.call(9, &produce_request("plain", 0, 1, bad_crc));
    assert_eq!(code(&corrupt), ResponseError::CorruptMessage.code());

    // A key-less record on a compacted topic: INVALID_RECORD naming record 1.
    let mut keyless = BatchBuilder::new(Compression::None, 1_700_000_000_000);
    keyless.append(1_700_000_000_000, Some(b"k"), Some(b"v"));
    keyless.append(1_700_000_000_000, None, Some(b"v"));
    let r = w.call(9, &produce_request("compacted", 0, 1, keyless.build()));
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ResponseError::InvalidRecord.code());
    assert_eq!(p.record_errors.len(), 1);
    assert_eq!(p.record_errors[0].batch_index, 1);

    // Produce v2 is advertised but refused with UNSUPPORTED_VERSION.
    let mut legacy = vec![
        0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x05, 0xff, 0xff, 0x00, 0x01, 0x00, 0x00, 0x03,
        0xe8, 0x00, 0x00, 0x00, 0x01,
    ];
    legacy.extend_from_slice(&[0x00, 0x05]);
    legacy.extend_from_slice(b"plain");
    legacy.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    legacy.splice(0..0, (legacy.len() as i32).to_be_bytes());
    w.write_raw(&legacy).unwrap();
    let (correlation, body) = w.recv_frame().unwrap();
    assert_eq!(correlation, 5);
    // [topic "plain" [partition 0, error, offset, append time]] throttle
    assert_eq!(&body[4..6], &[0, 5]);
    assert_eq!(i16::from_be_bytes([body[19], body[20]]), ResponseError::UnsupportedVersion.code());

    // acks=0: no response, and the next request is answered normally.
    w.send(9, &produce_request("plain", 0, 0, keyed_batch(&[("b", Some("2"))])));
    let after = w.call(9, &produce_request("plain", 0, 1, keyed_batch(&[("c", Some("3"))])));
    assert_eq!(
        after.responses[0].partition_responses[0].base_offset, 2,
        "the acks=0 record got offset 1"
    );
}

#[test]
fn idempotent_producer_dedupes_across_restarts() {
    let mut b = TestBroker::start(&[]);
    create_topic(b.port, "idem", 1, &[]);
    let mut w = Wire::connect(b.port);
    let init = w.call(
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000),
    );
    assert_eq!(init.error_code, 0);
    let pid = init.producer_id.0;
    assert!(pid >= 0);
    assert_eq!(init.producer_epoch, 0);
    let send = |w: &mut Wire, seq: i32, values: &[&str]| {
        let r = w.call(9, &produce_request("idem", 0, -1, idempotent_batch(pid, 0, seq, values)));
        let p = &r.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    };
    assert_eq!(send(&mut w, 0, &["a", "b"]), (0, 0));
    assert_eq!(send(&mut w, 2, &["c"]), (0, 2));
    assert_eq!(send(&mut w, 0, &["a", "b"]), (0, 0), "a retry gets its original offset");
    assert_eq!(send(&mut w, 7, &["x"]).0, ResponseError::OutOfOrderSequenceNumber.code());

    // Graceful restart: the state is rebuilt from the log.
    assert!(b.stop().success(), "{}", b.log());
    b.restart();
    let mut w = Wire::connect(b.port);
    assert_eq!(send(&mut w, 2, &["c"]), (0, 2));
    assert_eq!(send(&mut w, 3, &["d"]), (0, 3));

    // Crash restart: same.
    b.kill();
    b.restart();
    let mut w = Wire::connect(b.port);
    assert_eq!(send(&mut w, 3, &["d"]), (0, 3));
    assert_eq!(send(&mut w, 5, &["e"]).0, ResponseError::OutOfOrderSequenceNumber.code());
    // A new producer never reuses an issued id.
    let again = w.call(
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000),
    );
    assert!(again.producer_id.0 > pid);
}

#[test]
fn fetch_long_poll_is_woken_by_an_append() {
    let b = TestBroker::start(&[]);
    create_topic(b.port, "poll", 1, &[]);
    let port = b.port;
    let waiter = std::thread::spawn(move || {
        let mut w = Wire::connect(port);
        let request = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(30_000)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default().with_topic(name("poll")).with_partitions(
                vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)],
            )]);
        let start = Instant::now();
        let r = w.call(12, &request);
        (start.elapsed(), r)
    });
    // Give the fetch time to reach the broker, then check it is parked (not
    // answered): whatever returns it afterwards is the append's wake-up.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!waiter.is_finished(), "an empty partition's fetch must wait");
    let mut w = Wire::connect(b.port);
    let r = w.call(9, &produce_request("poll", 0, 1, keyed_batch(&[("k", Some("v"))])));
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let (elapsed, response) = waiter.join().unwrap();
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let records = common::decode(p.records.as_ref().unwrap());
    assert_eq!(records.len(), 1, "the fetch returned the appended record");
    assert!(
        elapsed < Duration::from_secs(30),
        "woken by the append, not by max_wait ({elapsed:?})"
    );
}

#[test]
fn fetch_out_of_range_and_unknown_topic() {
    let b = TestBroker::start(&[]);
    create_topic(b.port, "f", 1, &[]);
    let mut w = Wire::connect(b.port);
    w.call(9, &produce_request("f", 0, 1, keyed_batch(&[("k", Some("v"))])));
    let fetch = |topic: &str, offset: i64| {
        FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default().with_topic(name(topic)).with_partitions(vec![
                FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20),
            ])])
    };
    let r = w.call(12, &fetch("f", 5));
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, ResponseError::OffsetOutOfRange.code());
    assert_eq!((p.high_watermark, p.log_start_offset), (1, 0));
    let r = w.call(12, &fetch("missing", 0));
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let mut b = TestBroker::start(&[]);
    create_topic(b.port, "s", 2, &[]);
    let mut w = Wire::connect(b.port);
    w.call(9, &produce_request("s", 1, 1, keyed_batch(&[("k", Some("v"))])));
    let status = b.stop();
    assert!(status.success(), "exit status {status:?}\n{}", b.log());
    assert!(b.data_dir().join(".kafka_cleanshutdown").exists(), "clean shutdown marker");
    let recovery =
        std::fs::read_to_string(b.data_dir().join("recovery-point-offset-checkpoint")).unwrap();
    assert!(recovery.lines().any(|l| l == "s 1 1"), "recovery point of s-1 is 1:\n{recovery}");
    assert!(b.log().contains("sediment stopped"));
}

/// DescribeConfigs: null and an empty key list both describe every key, as
/// Kafka's ConfigHelper does; a named key only itself.
#[test]
fn describe_configs_of_no_keys_is_every_key() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::DescribeConfigsRequest;
    let b = TestBroker::start(&[]);
    create_topic(b.port, "described", 1, &[("cleanup.policy", "compact")]);
    let mut w = Wire::connect(b.port);
    let mut count = |keys: Option<Vec<&str>>| {
        let keys = keys.map(|k| k.into_iter().map(|k| StrBytes::from_string(k.into())).collect());
        let r = w.call(
            4,
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("described"))
                    .with_configuration_keys(keys),
            ]),
        );
        assert_eq!(r.results[0].error_code, 0);
        r.results[0].configs.len()
    };
    let all = count(None);
    assert!(all > 10, "{all}");
    assert_eq!(count(Some(vec![])), all);
    assert_eq!(count(Some(vec!["cleanup.policy"])), 1);
}

#[test]
fn list_offsets_v11_answers_the_earliest_pending_upload() {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName};
    let b = TestBroker::start(&[]);
    create_topic(b.port, "local-only", 1, &[]);
    let mut w = Wire::connect(b.port);
    let request = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("local-only")))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-6)]),
    ]);
    let answer = |w: &mut Wire, version: i16| {
        let r: ListOffsetsResponse = w.call(version, &request);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.offset)
    };
    // Without remote storage nothing is pending: offset -1, as Kafka 4.4.
    assert_eq!(answer(&mut w, 11), (0, -1));
    // Before v11 the timestamp is not known (KIP-1023).
    assert_eq!(answer(&mut w, 10).0, ResponseError::UnsupportedVersion.code());
}

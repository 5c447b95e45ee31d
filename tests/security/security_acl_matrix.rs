//! The authorization matrix of the topic and cluster APIs (docs/design/security.md
//! 5.2). One broker with a SASL_PLAINTEXT listener (PLAIN users admin, alice,
//! bob, carol and dave), `authorizer.class.name` set to Kafka's
//! StandardAuthorizer, `super.users=User:admin`, and its ACLs written as
//! `sediment-acls.json` before the start:
//!
//! * alice: ALLOW WRITE on PREFIXED `orders-`, DENY WRITE on `orders-blocked`;
//! * bob: ALLOW READ on `orders-eu`;
//! * carol: ALLOW WRITE and CREATE on PREFIXED `auto-`, DESCRIBE and
//!   DESCRIBE_CONFIGS on the cluster;
//! * dave: nothing.
//!
//! Exact codes over the Rust wire client: Produce (29 per denied topic before
//! the existence check, DENY beating ALLOW, acks=0 closing the connection,
//! 53 for a transactional batch without TRANSACTIONAL_ID WRITE), Fetch (29
//! without READ, replica fetches need CLUSTER_ACTION), ListOffsets,
//! all-topics Metadata leaving out what may not be described, named Metadata
//! answering an existing and a missing topic alike, by id (the id echoed, no
//! name), auto-creation needing CREATE, the authorized-operation bits,
//! DeleteRecords, DeleteTopics (by name and id, the name echoed only when
//! describable), CreateTopics (configs only with DESCRIBE_CONFIGS),
//! CreatePartitions, Describe/IncrementalAlterConfigs (29 / 31),
//! DescribeLogDirs (31), DescribeCluster, DescribeProducers; the super user
//! does each. Real clients: kcat (librdkafka) produces where alice may and
//! reports Kafka's authorization error where she may not, and lists only
//! `orders-*`; confluent-kafka-python the same through its producer and admin
//! client (tests/python/acl_confluent.py); Kafka's `kafka-topics` with
//! `--command-config` lists only `orders-*` and fails to delete a topic. The no-authorizer behaviour is the
//! rest of the suite's.

use crate::broker;

use std::collections::BTreeSet;

use crate::broker::{kafka_tool, kafka_tool_output, produce, run_python_script, TestBroker, Wire};
use bytes::Bytes;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    DescribeLogDirsRequest, DescribeProducersRequest, FetchRequest, IncrementalAlterConfigsRequest,
    ListOffsetsRequest, MetadataRequest, MetadataResponse, ProduceRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;

const USERS: &[&str] = &["admin", "alice", "bob", "carol", "dave"];
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const UNKNOWN_TOPIC_ID: i16 = 100;
/// Kafka's operation codes, as authorized-operation bits.
const READ: i32 = 1 << 3;
const WRITE: i32 = 1 << 4;
const DESCRIBE: i32 = 1 << 8;
const DESCRIBE_CONFIGS: i32 = 1 << 10;
/// Every TOPIC operation Kafka reports.
const ALL_TOPIC_OPERATIONS: i32 = 0b1101_1111_1000;

fn password(user: &str) -> String {
    format!("{user}-Secret-9")
}

fn acl(kind: &str, pattern: &str, name: &str, user: &str, op: &str, permission: &str) -> String {
    format!(
        r#"{{"resource_type":"{kind}","pattern_type":"{pattern}","name":"{name}","principal":"User:{user}","host":"*","operation":"{op}","permission":"{permission}"}}"#
    )
}

struct Setup {
    b: TestBroker,
    /// Holds the log dir (and the ACL file written before the start).
    _data: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Setup {
    fn start() -> Self {
        let data = tempfile::tempdir().unwrap();
        let acls = [
            acl("TOPIC", "PREFIXED", "orders-", "alice", "WRITE", "ALLOW"),
            acl("TOPIC", "LITERAL", "orders-blocked", "alice", "WRITE", "DENY"),
            acl("TOPIC", "LITERAL", "orders-eu", "bob", "READ", "ALLOW"),
            acl("TOPIC", "PREFIXED", "auto-", "carol", "WRITE", "ALLOW"),
            acl("TOPIC", "PREFIXED", "auto-", "carol", "CREATE", "ALLOW"),
            acl("CLUSTER", "LITERAL", "kafka-cluster", "carol", "DESCRIBE", "ALLOW"),
            acl("CLUSTER", "LITERAL", "kafka-cluster", "carol", "DESCRIBE_CONFIGS", "ALLOW"),
        ];
        std::fs::write(
            data.path().join("sediment-acls.json"),
            format!(r#"{{"version":1,"acls":[{}]}}"#, acls.join(",")),
        )
        .unwrap();
        let users: String =
            USERS.iter().map(|u| format!(" user_{u}=\"{}\"", password(u))).collect();
        let jaas =
            format!("org.apache.kafka.common.security.plain.PlainLoginModule required{users};");
        let b = TestBroker::start(&[
            "listeners=SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms=PLAIN",
            &format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}"),
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
            &format!("log.dirs={}", data.path().display()),
        ]);
        Self { b, _data: data, work: tempfile::tempdir().unwrap() }
    }

    /// A connection authenticated as `user`.
    fn connect(&self, user: &str) -> Wire {
        let mut w = Wire::connect(self.b.port);
        assert_eq!(w.call(3, &ApiVersionsRequest::default()).error_code, 0);
        let r = w.call(1, &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")));
        assert_eq!(r.error_code, 0);
        let token = Bytes::from(format!("\0{user}\0{}", password(user)));
        let r = w.call(2, &SaslAuthenticateRequest::default().with_auth_bytes(token));
        assert_eq!(r.error_code, 0, "{user}: {:?}", r.error_message);
        w
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn name(v: &str) -> TopicName {
    TopicName(s(v))
}

fn records(transactional: bool) -> Bytes {
    let now = broker::now_ms();
    let mut b = BatchBuilder::new(Compression::None, now);
    if transactional {
        b = b.producer(4242, 0, 0);
        b.transactional = true;
    }
    b.append(now, Some(b"k"), Some(b"v"));
    Bytes::from(b.build())
}

/// Produce v9 of one record to partition 0 of each topic: the codes, by topic.
fn produce_codes(w: &mut Wire, topics: &[&str], transactional_id: Option<&str>) -> Vec<i16> {
    let data = topics
        .iter()
        .map(|t| {
            TopicProduceData::default().with_name(name(t)).with_partition_data(vec![
                PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records(transactional_id.is_some()))),
            ])
        })
        .collect();
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_transactional_id(transactional_id.map(|id| TransactionalId(s(id))))
        .with_topic_data(data);
    let r = w.call(9, &request);
    topics
        .iter()
        .map(|t| {
            let topic = r.responses.iter().find(|r| r.name.0.as_str() == *t).expect("topic");
            topic.partition_responses[0].error_code
        })
        .collect()
}

fn fetch(w: &mut Wire, topic: &str, replica_id: i32) -> (i16, usize) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default().with_topic(name(topic)).with_partitions(vec![
            FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20),
        ])]);
    let r = w.call(12, &request);
    let p = &r.responses[0].partitions[0];
    (p.error_code, p.records.as_ref().map_or(0, Bytes::len))
}

/// Metadata v12 of the given topics (`None`: all), auto-creation as asked,
/// topic authorized operations requested.
fn metadata(
    w: &mut Wire,
    topics: Option<Vec<MetadataRequestTopic>>,
    auto: bool,
) -> MetadataResponse {
    let request = MetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(auto)
        .with_include_topic_authorized_operations(true);
    w.call(12, &request)
}

fn by_name(topic: &str) -> MetadataRequestTopic {
    MetadataRequestTopic::default().with_name(Some(name(topic)))
}

fn by_id(id: uuid::Uuid) -> MetadataRequestTopic {
    MetadataRequestTopic::default().with_name(None).with_topic_id(id)
}

fn topic_names(r: &MetadataResponse) -> BTreeSet<String> {
    r.topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())).collect()
}

fn topic_id(w: &mut Wire, topic: &str) -> uuid::Uuid {
    let r = metadata(w, Some(vec![by_name(topic)]), false);
    assert_eq!(r.topics[0].error_code, 0, "{topic}");
    r.topics[0].topic_id
}

fn create(
    w: &mut Wire,
    topic: &str,
    version: i16,
) -> kafka_protocol::messages::CreateTopicsResponse {
    let t = CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(1)
        .with_replication_factor(1);
    w.call(version, &CreateTopicsRequest::default().with_topics(vec![t]).with_timeout_ms(10_000))
}

fn delete_records(w: &mut Wire, topic: &str) -> i16 {
    let request = DeleteRecordsRequest::default().with_timeout_ms(10_000).with_topics(vec![
        DeleteRecordsTopic::default().with_name(name(topic)).with_partitions(vec![
            DeleteRecordsPartition::default().with_partition_index(0).with_offset(-1),
        ]),
    ]);
    w.call(2, &request).topics[0].partitions[0].error_code
}

/// DeleteTopics v6 of one topic by name or id: (code, echoed name, id).
fn delete_topic(w: &mut Wire, state: DeleteTopicState) -> (i16, Option<String>, uuid::Uuid) {
    let r =
        w.call(6, &DeleteTopicsRequest::default().with_topics(vec![state]).with_timeout_ms(10_000));
    let t = &r.responses[0];
    (t.error_code, t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)
}

fn list_offsets(w: &mut Wire, topic: &str) -> i16 {
    let request = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        ListOffsetsTopic::default().with_name(name(topic)).with_partitions(vec![
            ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1),
        ]),
    ]);
    w.call(7, &request).topics[0].partitions[0].error_code
}

/// DescribeConfigs v4 of one resource: (code, number of configs).
fn describe_configs(w: &mut Wire, resource_type: i8, resource: &str) -> (i16, usize) {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(resource))
            .with_configuration_keys(None)]);
    let r = w.call(4, &request);
    (r.results[0].error_code, r.results[0].configs.len())
}

fn alter_topic_config(w: &mut Wire, topic: &str) -> i16 {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(vec![AlterableConfig::default()
                .with_name(s("retention.ms"))
                .with_config_operation(0)
                .with_value(Some(s("3600000")))]),
    ]);
    w.call(1, &request).responses[0].error_code
}

fn cluster_operations(w: &mut Wire, include: bool) -> i32 {
    let request = DescribeClusterRequest::default()
        .with_include_cluster_authorized_operations(include)
        .with_endpoint_type(1);
    let r = w.call(1, &request);
    assert_eq!(r.error_code, 0);
    r.cluster_authorized_operations
}

#[test]
fn topic_and_cluster_apis_enforce_acls_as_kafka() {
    let st = Setup::start();
    let mut admin = st.connect("admin");
    for topic in ["orders-eu", "orders-us", "orders-blocked", "billing"] {
        assert_eq!(create(&mut admin, topic, 7).topics[0].error_code, 0, "{topic}");
    }
    produce(&mut admin, "orders-eu", 0, broker::now_ms(), &[("k".into(), Some("v".into()))]);

    produce_and_fetch(&st);
    metadata_hides_what_may_not_be_described(&st);
    auto_creation_needs_create(&st);
    deletion_needs_delete(&st);
    admin_apis_need_their_operations(&st);
    real_clients_see_the_same(&st);
    assert!(!st.b.log().contains("panicked"), "{}", st.b.log());
}

fn produce_and_fetch(st: &Setup) {
    let mut alice = st.connect("alice");
    // WRITE on PREFIXED orders- covers orders-eu; billing is denied, and so is
    // a missing topic she may not write (the check comes before existence),
    // while a missing one she may write is unknown; the DENY beats the ALLOW.
    let codes = produce_codes(
        &mut alice,
        &["orders-eu", "billing", "nowhere", "orders-missing", "orders-blocked"],
        None,
    );
    assert_eq!(
        codes,
        [
            0,
            TOPIC_AUTHORIZATION_FAILED,
            TOPIC_AUTHORIZATION_FAILED,
            UNKNOWN_TOPIC_OR_PARTITION,
            TOPIC_AUTHORIZATION_FAILED
        ]
    );
    // A transactional batch needs WRITE on the transactional id: the whole
    // request is refused, even the topic she may write.
    assert_eq!(
        produce_codes(&mut alice, &["orders-eu", "billing"], Some("tx-alice")),
        [TRANSACTIONAL_ID_AUTHORIZATION_FAILED; 2]
    );
    // The super user passes that check (the coordinator then refuses an id
    // it never saw, with another code).
    let mut admin = st.connect("admin");
    let code = produce_codes(&mut admin, &["billing"], Some("tx-admin"))[0];
    assert_ne!(code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    assert_eq!(produce_codes(&mut admin, &["billing"], None), [0]);
    // acks=0 and a denied partition: the connection is closed, as Kafka does.
    let request =
        ProduceRequest::default().with_acks(0).with_timeout_ms(10_000).with_topic_data(vec![
            TopicProduceData::default().with_name(name("billing")).with_partition_data(vec![
                PartitionProduceData::default().with_index(0).with_records(Some(records(false))),
            ]),
        ]);
    alice.send(9, &request);
    assert!(alice.is_closed(), "acks=0 produce without WRITE left the connection open");

    // Fetch: READ per topic; WRITE is no READ.
    let mut alice = st.connect("alice");
    assert_eq!(fetch(&mut alice, "orders-eu", -1).0, TOPIC_AUTHORIZATION_FAILED);
    let mut bob = st.connect("bob");
    let (code, bytes) = fetch(&mut bob, "orders-eu", -1);
    assert_eq!(code, 0);
    assert!(bytes > 0, "bob read nothing from orders-eu");
    assert_eq!(fetch(&mut bob, "billing", -1).0, TOPIC_AUTHORIZATION_FAILED);
    // A replica's fetch needs CLUSTER_ACTION, whatever the topic ACLs.
    assert_eq!(fetch(&mut bob, "orders-eu", 1).0, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(fetch(&mut admin, "orders-eu", 1).0, 0);
    // ListOffsets: DESCRIBE, which alice's WRITE implies and dave lacks.
    assert_eq!(list_offsets(&mut alice, "orders-eu"), 0);
    let mut dave = st.connect("dave");
    assert_eq!(list_offsets(&mut dave, "orders-eu"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(list_offsets(&mut dave, "nowhere"), TOPIC_AUTHORIZATION_FAILED);
}

fn metadata_hides_what_may_not_be_described(st: &Setup) {
    let mut admin = st.connect("admin");
    let mut alice = st.connect("alice");
    let mut bob = st.connect("bob");
    let mut dave = st.connect("dave");
    let all = topic_names(&metadata(&mut admin, None, false));
    assert!(all.contains("billing") && all.contains("orders-eu"), "{all:?}");
    // All topics: alice sees exactly the orders- ones, dave none, silently.
    let seen = metadata(&mut alice, None, false);
    let expected: BTreeSet<String> =
        all.iter().filter(|t| t.starts_with("orders-")).cloned().collect();
    assert_eq!(topic_names(&seen), expected);
    assert!(seen.topics.iter().all(|t| t.error_code == 0));
    assert!(metadata(&mut dave, None, false).topics.is_empty());

    // Named: an undescribable topic is 29 and tells nothing about existence.
    let named = metadata(&mut dave, Some(vec![by_name("billing"), by_name("ghost")]), false);
    let strip = |t: &MetadataResponseTopic| t.clone().with_name(None);
    assert_eq!(named.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(named.topics[0].name.as_ref().map(|n| n.0.as_str()), Some("billing"));
    assert_eq!(named.topics[0].topic_id, uuid::Uuid::nil());
    assert!(named.topics[0].partitions.is_empty());
    assert_eq!(strip(&named.topics[0]), strip(&named.topics[1]), "existing vs missing");
    // ... also when auto-creation is allowed: ghost is not created.
    let named = metadata(&mut dave, Some(vec![by_name("ghost")]), true);
    assert_eq!(named.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    let ghost = metadata(&mut admin, Some(vec![by_name("ghost")]), false);
    assert_eq!(ghost.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);

    // By id: an id is echoed without the name; an unknown id is 100.
    let billing = topic_id(&mut admin, "billing");
    let r = metadata(&mut dave, Some(vec![by_id(billing), by_id(uuid::Uuid::from_u128(7))]), false);
    assert_eq!(r.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!((r.topics[0].name.clone(), r.topics[0].topic_id), (None, billing));
    assert_eq!(r.topics[1].error_code, UNKNOWN_TOPIC_ID);
    let orders = topic_id(&mut admin, "orders-eu");
    let r = metadata(&mut alice, Some(vec![by_id(orders)]), false);
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.topics[0].name.as_ref().map(|n| n.0.as_str()), Some("orders-eu"));

    // Authorized operations: READ only → READ|DESCRIBE; WRITE → WRITE|DESCRIBE;
    // the super user every bit; not asked for → i32::MIN.
    let ops = |w: &mut Wire| {
        metadata(w, Some(vec![by_name("orders-eu")]), false).topics[0].topic_authorized_operations
    };
    assert_eq!(ops(&mut bob), READ | DESCRIBE);
    assert_eq!(ops(&mut alice), WRITE | DESCRIBE);
    assert_eq!(ops(&mut admin), ALL_TOPIC_OPERATIONS);
    let unasked =
        bob.call(12, &MetadataRequest::default().with_topics(Some(vec![by_name("orders-eu")])));
    assert_eq!(unasked.topics[0].topic_authorized_operations, i32::MIN);
    // Refused topics carry no bits.
    assert_eq!(named.topics[0].topic_authorized_operations, i32::MIN);
}

fn auto_creation_needs_create(st: &Setup) {
    let mut admin = st.connect("admin");
    let mut alice = st.connect("alice");
    let mut carol = st.connect("carol");
    // alice may describe orders-new (WRITE implies DESCRIBE) but not create it.
    let r = metadata(&mut alice, Some(vec![by_name("orders-new")]), true);
    assert_eq!(r.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(r.topics[0].partitions.is_empty());
    let r = metadata(&mut admin, Some(vec![by_name("orders-new")]), false);
    assert_eq!(r.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION, "orders-new was created");
    // Without auto-creation asked for, a describable missing topic is unknown.
    let r = metadata(&mut alice, Some(vec![by_name("orders-new")]), false);
    assert_eq!(r.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    // carol has CREATE on auto-: the topic is created and described.
    let r = metadata(&mut carol, Some(vec![by_name("auto-one")]), true);
    assert_eq!(r.topics[0].error_code, 0);
    assert!(!r.topics[0].partitions.is_empty());
    assert_eq!(r.topics[0].topic_authorized_operations, WRITE | DESCRIBE | (1 << 5));
    let r = metadata(&mut admin, Some(vec![by_name("auto-one")]), false);
    assert_eq!(r.topics[0].error_code, 0);

    // CreateTopics: CREATE per name, refused before the existence check.
    assert_eq!(create(&mut alice, "orders-x", 7).topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(create(&mut alice, "orders-eu", 7).topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    // carol may create but not DESCRIBE_CONFIGS auto-two: no configs, no counts.
    let r = create(&mut carol, "auto-two", 7);
    let t = &r.topics[0];
    assert_eq!((t.error_code, t.topic_config_error_code), (0, TOPIC_AUTHORIZATION_FAILED));
    assert_eq!((t.num_partitions, t.replication_factor), (-1, -1));
    assert!(t.configs.as_ref().is_none_or(Vec::is_empty));
    let r = create(&mut admin, "admin-made", 7);
    let t = &r.topics[0];
    assert_eq!((t.error_code, t.topic_config_error_code, t.num_partitions), (0, 0, 1));
    assert!(t.configs.as_ref().is_some_and(|c| !c.is_empty()));
}

fn deletion_needs_delete(st: &Setup) {
    let mut admin = st.connect("admin");
    let mut alice = st.connect("alice");
    let mut dave = st.connect("dave");
    // DeleteRecords: DELETE, which WRITE is not.
    assert_eq!(delete_records(&mut alice, "orders-eu"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(delete_records(&mut alice, "nowhere"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(delete_records(&mut admin, "orders-eu"), 0);

    // DeleteTopics by name: 29 whether the topic exists or not for dave; alice
    // may describe orders- topics, so a missing one is unknown to her.
    let named = |t: &str| DeleteTopicState::default().with_name(Some(name(t)));
    let r = delete_topic(&mut alice, named("orders-us"));
    assert_eq!(r, (TOPIC_AUTHORIZATION_FAILED, Some("orders-us".into()), uuid::Uuid::nil()));
    assert_eq!(delete_topic(&mut dave, named("billing")).0, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(delete_topic(&mut dave, named("ghost")).0, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(delete_topic(&mut alice, named("orders-ghost")).0, UNKNOWN_TOPIC_OR_PARTITION);
    // By id: the name is echoed only to a principal that may describe it.
    let id = topic_id(&mut admin, "orders-us");
    let by = |id| DeleteTopicState::default().with_topic_id(id);
    assert_eq!(
        delete_topic(&mut alice, by(id)),
        (TOPIC_AUTHORIZATION_FAILED, Some("orders-us".into()), id)
    );
    assert_eq!(delete_topic(&mut dave, by(id)), (TOPIC_AUTHORIZATION_FAILED, None, id));
    let unknown = uuid::Uuid::from_u128(99);
    assert_eq!(delete_topic(&mut dave, by(unknown)), (UNKNOWN_TOPIC_ID, None, unknown));
    // The super user deletes; the topic is gone.
    assert_eq!(delete_topic(&mut admin, by(id)).0, 0);
    let r = metadata(&mut admin, Some(vec![by_name("orders-us")]), false);
    assert_eq!(r.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
}

fn admin_apis_need_their_operations(st: &Setup) {
    let mut admin = st.connect("admin");
    let mut alice = st.connect("alice");
    let mut carol = st.connect("carol");
    let mut dave = st.connect("dave");
    let node = metadata(&mut admin, Some(vec![]), false).brokers[0].node_id.0.to_string();
    // DescribeConfigs: topic 29 without DESCRIBE_CONFIGS, broker 31 without
    // the cluster's, group 30; carol has the cluster's, admin everything.
    assert_eq!(describe_configs(&mut alice, 2, "orders-eu"), (TOPIC_AUTHORIZATION_FAILED, 0));
    assert_eq!(describe_configs(&mut alice, 2, "ghost"), (TOPIC_AUTHORIZATION_FAILED, 0));
    assert_eq!(describe_configs(&mut alice, 4, &node), (CLUSTER_AUTHORIZATION_FAILED, 0));
    assert_eq!(describe_configs(&mut alice, 8, &node), (CLUSTER_AUTHORIZATION_FAILED, 0));
    assert_eq!(describe_configs(&mut alice, 32, "g"), (GROUP_AUTHORIZATION_FAILED, 0));
    let (code, n) = describe_configs(&mut carol, 4, &node);
    assert!(code == 0 && n > 0, "carol's broker configs: {code} {n}");
    let (code, n) = describe_configs(&mut admin, 2, "orders-eu");
    assert!(code == 0 && n > 0, "admin's topic configs: {code} {n}");
    // IncrementalAlterConfigs: ALTER_CONFIGS.
    assert_eq!(alter_topic_config(&mut alice, "orders-eu"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(alter_topic_config(&mut admin, "orders-eu"), 0);
    // CreatePartitions: ALTER on the topic.
    let grow = |w: &mut Wire| {
        let t = CreatePartitionsTopic::default()
            .with_name(name("orders-eu"))
            .with_count(2)
            .with_assignments(None);
        let r = w.call(
            3,
            &CreatePartitionsRequest::default().with_topics(vec![t]).with_timeout_ms(10_000),
        );
        r.results[0].error_code
    };
    assert_eq!(grow(&mut alice), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(grow(&mut admin), 0);
    // DescribeLogDirs: DESCRIBE on the cluster, else 31 and no results.
    let dirs = |w: &mut Wire| w.call(4, &DescribeLogDirsRequest::default().with_topics(None));
    let r = dirs(&mut alice);
    assert_eq!((r.error_code, r.results.len()), (CLUSTER_AUTHORIZATION_FAILED, 0));
    let r = dirs(&mut carol);
    assert_eq!(r.error_code, 0);
    assert!(!r.results.is_empty());
    // DescribeCluster: no check; the bits need DESCRIBE on the cluster.
    assert_eq!(cluster_operations(&mut alice, true), 0);
    assert_eq!(cluster_operations(&mut carol, true), DESCRIBE | DESCRIBE_CONFIGS);
    // CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
    // IDEMPOTENT_WRITE.
    let every = [5, 7, 8, 9, 10, 11, 12].iter().fold(0, |bits, op| bits | (1 << op));
    assert_eq!(cluster_operations(&mut admin, true), every);
    assert_eq!(cluster_operations(&mut admin, false), i32::MIN);
    // DescribeProducers: READ on the topic.
    let producers = |w: &mut Wire, t: &str| {
        let request = DescribeProducersRequest::default()
            .with_topics(vec![TopicRequest::default()
                .with_name(name(t))
                .with_partition_indexes(vec![0])]);
        w.call(0, &request).topics[0].partitions[0].error_code
    };
    assert_eq!(producers(&mut dave, "orders-eu"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(producers(&mut dave, "ghost"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(producers(&mut admin, "orders-eu"), 0);
}

fn kcat(st: &Setup, user: &str, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut all = vec![
        "-b".to_string(),
        st.b.bootstrap(),
        "-X".into(),
        "security.protocol=sasl_plaintext".into(),
        "-X".into(),
        "sasl.mechanisms=PLAIN".into(),
        "-X".into(),
        format!("sasl.username={user}"),
        "-X".into(),
        format!("sasl.password={}", password(user)),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    broker::kcat(&all, stdin)
}

fn real_clients_see_the_same(st: &Setup) {
    let b = &st.b;
    // kcat as alice: produce where she may write, Kafka's error where not.
    let (ok, out, err) = kcat(st, "alice", &["-P", "-t", "orders-eu", "-K:"], "a:1\n");
    assert!(ok, "{out}\n{err}\n{}", b.log());
    for denied in ["billing", "orders-blocked"] {
        let (ok, out, err) = kcat(st, "alice", &["-P", "-t", denied, "-K:"], "a:1\n");
        assert!(!ok, "kcat produced to {denied}: {out}");
        assert!(err.to_lowercase().contains("topic authorization failed"), "{denied}: {err}");
    }
    let (ok, out, err) = kcat(st, "alice", &["-L"], "");
    assert!(ok, "{out}\n{err}");
    let listed: Vec<&str> =
        out.lines().filter_map(|l| l.trim().strip_prefix("topic \"")?.split('"').next()).collect();
    assert!(listed.contains(&"orders-eu"), "{out}");
    assert!(listed.iter().all(|t| t.starts_with("orders-")), "{out}");

    // confluent-kafka-python as alice: the same answers through its API.
    run_python_script(b, "acl_confluent.py", &["alice", &password("alice")], "done");

    // kafka-topics with --command-config as alice.
    let config = st.work.path().join("alice.properties");
    std::fs::write(
        &config,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
             sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"alice\" password=\"{}\";\n",
            password("alice")
        ),
    )
    .unwrap();
    let config = config.display().to_string();
    let bs = b.bootstrap();
    let common = ["--bootstrap-server", &bs, "--command-config", &config];
    let listed = kafka_tool(
        b,
        "org.apache.kafka.tools.TopicCommand",
        &[&common[..], &["--list"]].concat(),
        None,
    );
    let listed: Vec<&str> = listed.lines().collect();
    assert!(listed.contains(&"orders-eu"), "{listed:?}");
    assert!(listed.iter().all(|t| t.starts_with("orders-")), "{listed:?}");
    let (ok, out, err) = kafka_tool_output(
        "org.apache.kafka.tools.TopicCommand",
        &[&common[..], &["--delete", "--topic", "orders-eu"]].concat(),
        None,
    );
    assert!(!ok, "alice deleted orders-eu: {out}");
    let said = format!("{out}{err}").to_lowercase();
    assert!(said.contains("authorization failed"), "{out}\n{err}");
}

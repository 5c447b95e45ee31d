//! ACLs enforced by the group, coordinator, transaction and credential APIs
//! (docs/design/security.md, "Per-API checks"). One broker with a PLAINTEXT listener (its
//! ANONYMOUS principal is a super user, for set-up) and a SASL_PLAINTEXT one
//! with PLAIN users in JAAS; `StandardAuthorizer`, `super.users` with
//! `User:admin`; the ACLs written as `sediment-acls.json` before the start,
//! one principal per set of ACLs.
//!
//! With confluent-kafka-python: a principal with topic READ only gets
//! GROUP_AUTHORIZATION_FAILED for its consumer group, another with a Group
//! READ ACL consumes and commits; an idempotent producer with a PREFIXED
//! topic WRITE delivers; a transactional producer without TRANSACTIONAL_ID
//! WRITE gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, one with it commits.
//! On the wire: FindCoordinator 30 / 53 per key (v3 and v4); InitProducerId
//! 31 for a principal with neither IDEMPOTENT_WRITE nor a topic WRITE, 53
//! for a transactional id it may not write; ListGroups filtered by DESCRIBE
//! GROUP; OffsetCommit 30 for the group, 29 per denied topic;
//! OffsetFetch/DescribeGroups per group, all-offsets answers without the
//! topics the principal may not describe, authorized-operations bits;
//! Join/Sync/Heartbeat/LeaveGroup 30; OffsetDelete 30 for the group, 29 per
//! topic; DeleteGroups per group, the denied ones last;
//! AddPartitionsToTxn 29 for the denied topic and OPERATION_NOT_ATTEMPTED for
//! the rest; DescribeTransactions 53 or its partitions filtered by DESCRIBE
//! TOPIC; ListTransactions filtered; EndTxn, AddOffsetsToTxn and
//! WriteTxnMarkers refused; Alter/DescribeUserScramCredentials and
//! DescribeClientQuotas 31 for a non-super user; ConsumerGroupHeartbeat 30
//! for the group, 29 when a subscribed topic is not describable;
//! ConsumerGroupDescribe per group, the denied ones first.

use crate::broker;

use crate::broker::{create_topic, produce, python, repo_root, TestBroker, Wire};
use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AlterUserScramCredentialsRequest,
    ApiVersionsRequest, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest, DescribeClientQuotasRequest, DescribeGroupsRequest,
    DescribeTransactionsRequest, DescribeUserScramCredentialsRequest, EndTxnRequest,
    FindCoordinatorRequest, GroupId, HeartbeatRequest, InitProducerIdRequest, JoinGroupRequest,
    LeaveGroupRequest, ListGroupsRequest, ListTransactionsRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, ProducerId, SaslAuthenticateRequest,
    SaslHandshakeRequest, SyncGroupRequest, TopicName, TransactionalId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use std::process::Command;

const TOPIC_DENIED: i16 = 29;
const GROUP_DENIED: i16 = 30;
const CLUSTER_DENIED: i16 = 31;
const TXN_DENIED: i16 = 53;
const NOT_ATTEMPTED: i16 = 55;

/// Every user's password is its name with this suffix.
const PW: &str = "-Secret-9";
const USERS: [&str; 7] = ["admin", "reader", "consumer", "producer", "txn", "viewer", "nobody"];

/// (principal's user, resource type, pattern type, name, operation).
const ACLS: &[(&str, &str, &str, &str, &str)] = &[
    ("reader", "TOPIC", "LITERAL", "events", "READ"),
    ("consumer", "TOPIC", "LITERAL", "events", "READ"),
    ("consumer", "GROUP", "LITERAL", "g-consumer", "READ"),
    ("producer", "TOPIC", "PREFIXED", "orders-", "WRITE"),
    ("txn", "TOPIC", "PREFIXED", "orders-", "WRITE"),
    ("txn", "TRANSACTIONAL_ID", "PREFIXED", "tx-", "WRITE"),
    ("viewer", "TRANSACTIONAL_ID", "PREFIXED", "tx-", "DESCRIBE"),
    ("viewer", "GROUP", "LITERAL", "g-admin", "DELETE"),
];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn acls_json() -> String {
    let entries: Vec<serde_json::Value> = ACLS
        .iter()
        .map(|(user, rt, pt, name, op)| {
            serde_json::json!({
                "resource_type": rt, "pattern_type": pt, "name": name,
                "principal": format!("User:{user}"), "host": "*",
                "operation": op, "permission": "ALLOW",
            })
        })
        .collect();
    serde_json::json!({"version": 1, "acls": entries}).to_string()
}

struct Setup {
    b: TestBroker,
    /// The log dir holding `sediment-acls.json`.
    _logs: tempfile::TempDir,
    sasl: u16,
}

impl Setup {
    fn start() -> Self {
        let logs = tempfile::tempdir().expect("tempdir");
        std::fs::write(logs.path().join("sediment-acls.json"), acls_json()).expect("acls");
        let users: String = USERS.iter().map(|u| format!(" user_{u}=\"{u}{PW}\"")).collect();
        let jaas =
            format!("org.apache.kafka.common.security.plain.PlainLoginModule required{users};");
        let b = TestBroker::start(&[
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            &format!("log.dirs={}", logs.path().display()),
            "sasl.enabled.mechanisms=PLAIN",
            &format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}"),
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin;User:ANONYMOUS",
        ]);
        let sasl = b.listener_port("SASL_PLAINTEXT");
        Self { b, _logs: logs, sasl }
    }

    /// A connection authenticated as `user`.
    fn wire(&self, user: &str) -> Wire {
        let mut w = Wire::connect(self.sasl);
        assert_eq!(w.call(3, &ApiVersionsRequest::default()).error_code, 0);
        let r = w.call(1, &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")));
        assert_eq!(r.error_code, 0);
        let token = Bytes::from(format!("\0{user}\0{user}{PW}"));
        let r = w.call(2, &SaslAuthenticateRequest::default().with_auth_bytes(token));
        assert_eq!(r.error_code, 0, "{user}: {:?}", r.error_message);
        w
    }

    /// tests/python/acl_groups_confluent.py as `user`; panics unless it prints "done".
    fn python(&self, user: &str, args: &[&str]) {
        let out = Command::new("timeout")
            .args(["--kill-after=5", "90"])
            .arg(python())
            .arg(repo_root().join("tests/python/acl_groups_confluent.py"))
            .arg(format!("127.0.0.1:{}", self.sasl))
            .args([user, &format!("{user}{PW}")])
            .args(args)
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("python");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("done"),
            "acl_groups_confluent.py {user} {args:?}\n{stdout}\n{}\nbroker:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.b.log()
        );
    }
}

#[test]
fn group_transaction_and_credential_apis_enforce_acls() {
    let st = Setup::start();
    for topic in ["events", "orders-eu", "billing"] {
        create_topic(st.b.port, topic, 1, &[]);
    }
    let records: Vec<(String, Option<String>)> =
        (0..4).map(|i| (format!("k{i}"), Some(format!("v{i}")))).collect();
    produce(&mut Wire::connect(st.b.port), "events", 0, broker::now_ms(), &records);

    consumer_groups(&st);
    group_apis_on_the_wire(&st);
    producers(&st);
    transactions_on_the_wire(&st);
    credentials(&st);
    consumer_group_protocol(&st);
    assert!(!st.b.log().contains("panicked"), "{}", st.b.log());
}

fn consumer_heartbeat(group: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s("kip848-member"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| TopicName(s(t))).collect()))
        .with_topic_partitions(Some(vec![]))
}

/// ConsumerGroupHeartbeat: READ on the group, then DESCRIBE on every
/// subscribed topic (READ implies it); ConsumerGroupDescribe: DESCRIBE on
/// each group.
fn consumer_group_protocol(st: &Setup) {
    let mut reader = st.wire("reader");
    let mut consumer = st.wire("consumer");
    let r = reader.call(1, &consumer_heartbeat("g-reader", &["events"]));
    assert_eq!(r.error_code, GROUP_DENIED, "{r:?}");
    let r = consumer.call(1, &consumer_heartbeat("g-consumer", &["events", "billing"]));
    assert_eq!(r.error_code, TOPIC_DENIED, "billing is not describable: {r:?}");
    let by_regex = consumer_heartbeat("g-consumer", &[])
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s("ev.*")));
    let r = consumer.call(1, &by_regex);
    assert_eq!(r.error_code, 42, "INVALID_REQUEST: no regex with an authorizer: {r:?}");
    let r = consumer.call(1, &consumer_heartbeat("g-consumer", &["events"]));
    assert_eq!((r.error_code, r.member_epoch), (0, 1), "{r:?}");
    let assigned: Vec<i32> = r
        .assignment
        .iter()
        .flat_map(|a| a.topic_partitions.iter().flat_map(|t| t.partitions.clone()))
        .collect();
    assert_eq!(assigned, [0], "{r:?}");

    let describe = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(s("g-consumer")), GroupId(s("g-reader"))]);
    let r = consumer.call(1, &describe);
    let codes: Vec<(String, i16)> =
        r.groups.iter().map(|g| (g.group_id.0.to_string(), g.error_code)).collect();
    assert_eq!(codes, [("g-reader".to_string(), GROUP_DENIED), ("g-consumer".to_string(), 0)]);
    assert_eq!(r.groups[1].members.len(), 1, "{r:?}");
}

/// A real consumer group: refused without a Group READ ACL, working with one.
fn consumer_groups(st: &Setup) {
    st.python("reader", &["group", "events", "g-reader", "0", "denied"]);
    st.python("consumer", &["group", "events", "g-consumer", "4", "ok"]);
}

fn find_group(w: &mut Wire, version: i16, key: &str) -> i16 {
    let r = w.call(version, &FindCoordinatorRequest::default().with_key(s(key)));
    r.error_code
}

fn offset_commit(group: &str, topics: &[&str]) -> OffsetCommitRequest {
    let topics = topics
        .iter()
        .map(|t| {
            OffsetCommitRequestTopic::default().with_name(TopicName(s(t))).with_partitions(vec![
                OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(2),
            ])
        })
        .collect();
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(topics)
}

fn listed_groups(w: &mut Wire) -> Vec<String> {
    let r = w.call(4, &ListGroupsRequest::default());
    assert_eq!(r.error_code, 0);
    let mut groups: Vec<String> = r.groups.iter().map(|g| g.group_id.0.to_string()).collect();
    groups.sort();
    groups
}

fn group_apis_on_the_wire(st: &Setup) {
    let mut reader = st.wire("reader");
    let mut consumer = st.wire("consumer");
    let mut admin = st.wire("admin");

    // FindCoordinator: per key from v4, before any lookup.
    assert_eq!(find_group(&mut reader, 3, "g-reader"), GROUP_DENIED);
    assert_eq!(find_group(&mut consumer, 3, "g-consumer"), 0);
    let r = consumer.call(
        4,
        &FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![s("g-consumer"), s("g-reader")]),
    );
    let codes: Vec<i16> = r.coordinators.iter().map(|c| c.error_code).collect();
    assert_eq!(codes, [0, GROUP_DENIED]);
    assert_eq!(r.coordinators[1].node_id.0, -1);
    let r = reader.call(
        4,
        &FindCoordinatorRequest::default().with_key_type(1).with_coordinator_keys(vec![s("tx-a")]),
    );
    assert_eq!(r.coordinators[0].error_code, TXN_DENIED);

    // OffsetCommit: the group first, then each topic.
    let r = reader.call(8, &offset_commit("g-consumer", &["events"]));
    assert_eq!(r.topics[0].partitions[0].error_code, GROUP_DENIED);
    let r = admin.call(8, &offset_commit("g-admin", &["events", "orders-eu"]));
    assert!(r.topics.iter().all(|t| t.partitions[0].error_code == 0), "{r:?}");
    // The consumer's group is empty now: the admin adds an offset it may not see.
    let r = admin.call(8, &offset_commit("g-consumer", &["orders-eu"]));
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    let r = consumer.call(8, &offset_commit("g-consumer", &["orders-eu", "events"]));
    let codes: Vec<i16> = r.topics.iter().map(|t| t.partitions[0].error_code).collect();
    assert_eq!(codes, [TOPIC_DENIED, 0]);

    // ListGroups: everything for a super user, else the groups it may describe.
    assert_eq!(listed_groups(&mut admin), ["g-admin", "g-consumer"]);
    assert_eq!(listed_groups(&mut consumer), ["g-consumer"]);
    assert!(listed_groups(&mut reader).is_empty());

    // OffsetFetch v8: per group; all offsets leave out undescribable topics,
    // named ones answer 29.
    let all =
        |g: &str| OffsetFetchRequestGroup::default().with_group_id(GroupId(s(g))).with_topics(None);
    let named = all("g-consumer").with_topics(Some(vec![
        OffsetFetchRequestTopics::default()
            .with_name(TopicName(s("orders-eu")))
            .with_partition_indexes(vec![0]),
        OffsetFetchRequestTopics::default()
            .with_name(TopicName(s("events")))
            .with_partition_indexes(vec![0]),
    ]));
    let r = consumer.call(
        8,
        &OffsetFetchRequest::default().with_groups(vec![all("g-consumer"), all("g-admin")]),
    );
    assert_eq!(r.groups[0].error_code, 0);
    let topics: Vec<&str> = r.groups[0].topics.iter().map(|t| t.name.0.as_str()).collect();
    assert_eq!(topics, ["events"]);
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, 2);
    assert_eq!(r.groups[1].error_code, GROUP_DENIED);
    let r = admin.call(8, &OffsetFetchRequest::default().with_groups(vec![all("g-consumer")]));
    assert_eq!(r.groups[0].topics.len(), 2, "{r:?}");
    let r = consumer.call(8, &OffsetFetchRequest::default().with_groups(vec![named]));
    let got: Vec<(&str, i16, i64)> = r.groups[0]
        .topics
        .iter()
        .map(|t| (t.name.0.as_str(), t.partitions[0].error_code, t.partitions[0].committed_offset))
        .collect();
    assert_eq!(got, [("events", 0, 2), ("orders-eu", TOPIC_DENIED, -1)]);
    // v7: a denied group is the top-level error.
    let r = reader.call(7, &OffsetFetchRequest::default().with_group_id(GroupId(s("g-consumer"))));
    assert_eq!(r.error_code, GROUP_DENIED);

    // DescribeGroups: denied groups first; authorized operations when asked.
    let r = consumer.call(
        5,
        &DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(s("g-consumer")), GroupId(s("g-admin"))])
            .with_include_authorized_operations(true),
    );
    assert_eq!(r.groups[0].group_id.0.as_str(), "g-admin");
    assert_eq!(r.groups[0].error_code, GROUP_DENIED);
    assert_eq!(r.groups[1].error_code, 0);
    assert_eq!(r.groups[1].group_state.as_str(), "Empty");
    // READ, and the DESCRIBE it implies.
    assert_eq!(r.groups[1].authorized_operations, (1 << 3) | (1 << 8));
    let r =
        admin.call(5, &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g-admin"))]));
    assert_eq!(r.groups[0].authorized_operations, i32::MIN, "not asked for");
    let r = admin.call(
        5,
        &DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(s("g-admin"))])
            .with_include_authorized_operations(true),
    );
    // A super user: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
    let every = [3, 6, 8, 10, 11].iter().fold(0, |bits, op| bits | (1 << op));
    assert_eq!(r.groups[0].authorized_operations, every);

    // The membership APIs need READ on the group.
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("g-reader")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(s("range"))]);
    let r = reader.call(7, &join);
    assert_eq!((r.error_code, r.generation_id, r.protocol_name.clone()), (GROUP_DENIED, -1, None));
    let heartbeat = HeartbeatRequest::default().with_group_id(GroupId(s("g-consumer")));
    assert_eq!(reader.call(4, &heartbeat).error_code, GROUP_DENIED);
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("g-consumer")))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")));
    assert_eq!(reader.call(5, &sync).error_code, GROUP_DENIED);
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("g-consumer")))
        .with_members(vec![MemberIdentity::default().with_member_id(s("m-1"))]);
    let r = reader.call(5, &leave);
    assert_eq!((r.error_code, r.members.len()), (GROUP_DENIED, 0));

    // OffsetDelete: DELETE on the group, then READ on each topic.
    let delete_offsets = |group: &str| {
        let topics = ["events", "orders-eu"].iter().map(|t| {
            OffsetDeleteRequestTopic::default().with_name(TopicName(s(t))).with_partitions(vec![
                OffsetDeleteRequestPartition::default().with_partition_index(0),
            ])
        });
        OffsetDeleteRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(topics.collect())
    };
    assert_eq!(consumer.call(0, &delete_offsets("g-consumer")).error_code, GROUP_DENIED);
    let mut viewer = st.wire("viewer");
    let r = viewer.call(0, &delete_offsets("g-admin"));
    assert_eq!(r.error_code, 0);
    assert!(r.topics.iter().all(|t| t.partitions[0].error_code == TOPIC_DENIED), "{r:?}");
    // DeleteGroups: denied groups come last.
    let r = viewer.call(
        2,
        &DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(s("g-consumer")), GroupId(s("g-admin"))]),
    );
    let got: Vec<(&str, i16)> =
        r.results.iter().map(|g| (g.group_id.0.as_str(), g.error_code)).collect();
    assert_eq!(got, [("g-admin", 0), ("g-consumer", GROUP_DENIED)]);
    assert_eq!(listed_groups(&mut admin), ["g-consumer"]);
}

fn init_producer_id(w: &mut Wire, transactional_id: Option<&str>) -> (i16, i64, i16) {
    let r = w.call(
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(transactional_id.map(|t| TransactionalId(s(t))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// Idempotent and transactional producers.
fn producers(st: &Setup) {
    let (code, pid, _) = init_producer_id(&mut st.wire("nobody"), None);
    assert_eq!((code, pid), (CLUSTER_DENIED, -1));
    let (code, pid, _) = init_producer_id(&mut st.wire("producer"), None);
    assert_eq!(code, 0);
    assert!(pid >= 0);
    let (code, _, _) = init_producer_id(&mut st.wire("producer"), Some("tx-1"));
    assert_eq!(code, TXN_DENIED);

    st.python("producer", &["idempotent", "orders-eu"]);
    st.python("producer", &["transactional", "orders-eu", "tx-producer", "denied"]);
    st.python("txn", &["transactional", "orders-eu", "tx-client", "ok"]);
}

fn add_partitions(w: &mut Wire, id: &str, pid: i64, epoch: i16, topics: &[&str]) -> Vec<i16> {
    let topics = topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopic::default().with_name(TopicName(s(t))).with_partitions(vec![0])
        })
        .collect();
    let r = w.call(
        3,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s(id)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(topics),
    );
    r.results_by_topic_v3_and_below
        .iter()
        .map(|t| t.results_by_partition[0].partition_error_code)
        .collect()
}

fn describe_txn(w: &mut Wire, id: &str) -> (i16, String, Vec<String>) {
    let r = w.call(
        0,
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(s(id))]),
    );
    let t = &r.transaction_states[0];
    let topics = t.topics.iter().map(|t| t.topic.0.to_string()).collect();
    (t.error_code, t.transaction_state.to_string(), topics)
}

fn listed_txns(w: &mut Wire) -> Vec<String> {
    let r = w.call(1, &ListTransactionsRequest::default().with_duration_filter(-1));
    assert_eq!(r.error_code, 0);
    let mut ids: Vec<String> =
        r.transaction_states.iter().map(|t| t.transactional_id.0.to_string()).collect();
    ids.sort();
    ids
}

fn transactions_on_the_wire(st: &Setup) {
    let mut txn = st.wire("txn");
    let (code, pid, epoch) = init_producer_id(&mut txn, Some("tx-open"));
    assert_eq!(code, 0);
    // A topic it may not write fails the transaction: 29 for it, the rest not attempted.
    assert_eq!(
        add_partitions(&mut txn, "tx-open", pid, epoch, &["orders-eu", "billing"]),
        [NOT_ATTEMPTED, TOPIC_DENIED]
    );
    assert_eq!(add_partitions(&mut txn, "tx-open", pid, epoch, &["orders-eu"]), [0]);
    // Without WRITE on the id, every partition gets 53.
    let mut producer = st.wire("producer");
    assert_eq!(add_partitions(&mut producer, "tx-open", pid, epoch, &["orders-eu"]), [TXN_DENIED]);
    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s("tx-open")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(false);
    assert_eq!(producer.call(3, &end).error_code, TXN_DENIED);
    let add_offsets = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s("tx-open")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(s("g-consumer")));
    assert_eq!(txn.call(3, &add_offsets).error_code, GROUP_DENIED);
    // WriteTxnMarkers needs ALTER or CLUSTER_ACTION on the cluster.
    let markers =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_transaction_result(false)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(s("orders-eu")))
                .with_partition_indexes(vec![0])])]);
    let r = txn.call(1, &markers);
    assert_eq!(r.markers[0].topics[0].partitions[0].error_code, CLUSTER_DENIED);

    // DescribeTransactions: 53 without DESCRIBE on the id; the partitions of
    // topics the principal may not describe are left out.
    let mut admin = st.wire("admin");
    let mut viewer = st.wire("viewer");
    let mut nobody = st.wire("nobody");
    assert_eq!(
        describe_txn(&mut admin, "tx-open"),
        (0, "Ongoing".into(), vec!["orders-eu".into()])
    );
    assert_eq!(describe_txn(&mut txn, "tx-open"), (0, "Ongoing".into(), vec!["orders-eu".into()]));
    assert_eq!(describe_txn(&mut viewer, "tx-open"), (0, "Ongoing".into(), vec![]));
    assert_eq!(describe_txn(&mut nobody, "tx-open").0, TXN_DENIED);
    // ListTransactions: only the ids the principal may describe.
    assert_eq!(listed_txns(&mut admin), ["tx-client", "tx-open"]);
    assert_eq!(listed_txns(&mut viewer), ["tx-client", "tx-open"]);
    assert!(listed_txns(&mut nobody).is_empty());
    assert!(listed_txns(&mut st.wire("producer")).is_empty());
}

fn credentials(st: &Setup) {
    let describe = DescribeUserScramCredentialsRequest::default()
        .with_users(Some(vec![UserName::default().with_name(s("consumer"))]));
    let alter = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        ScramCredentialDeletion::default().with_name(s("reader")).with_mechanism(1),
    ]);
    let quotas = DescribeClientQuotasRequest::default().with_strict(false);
    let mut consumer = st.wire("consumer");
    let r = consumer.call(0, &describe);
    assert_eq!(r.error_code, CLUSTER_DENIED);
    assert!(r
        .results
        .iter()
        .all(|u| u.error_code == CLUSTER_DENIED && u.credential_infos.is_empty()));
    let r = consumer.call(0, &alter);
    let codes: Vec<(String, i16)> =
        r.results.iter().map(|u| (u.user.to_string(), u.error_code)).collect();
    assert_eq!(codes, [("reader".to_string(), CLUSTER_DENIED)]);
    let r = consumer.call(1, &quotas);
    assert_eq!(r.error_code, CLUSTER_DENIED);
    assert!(r.entries.is_none());

    // The super user passes the check: no SCRAM credential exists for these users.
    let mut admin = st.wire("admin");
    let r = admin.call(0, &describe);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.results[0].error_code, 91, "RESOURCE_NOT_FOUND");
    assert_eq!(admin.call(0, &alter).results[0].error_code, 91);
    assert_eq!(admin.call(1, &quotas).error_code, 0);
}

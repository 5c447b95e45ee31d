//! Every API sediment serves, sent by a principal without any ACL, answers
//! exactly the denial of docs/design/security.md, "Per-API checks".
//!
//! One broker with `StandardAuthorizer`, `allow.everyone.if.no.acl.found`
//! left false and no ACL at all: a PLAINTEXT listener, whose principal
//! `User:ANONYMOUS` is the one refused, and a SASL_PLAINTEXT listener whose
//! PLAIN user `admin` is the super user that first makes what a filter could
//! otherwise show: topic `t` with two records, group `g-admin` with a
//! committed offset (an Empty group), transactional id `tx-admin`.
//!
//! The walk goes through `SUPPORTED_APIS`; its `match` has no default case
//! but a panic, so an API added without its authorization case fails this
//! suite. Each case sends minimal valid requests at versions in the API's
//! range and records every answer that is not the denial of 5.2 (with the
//! response); all are reported at once at the end. Afterwards the super
//! user checks that the refused requests changed nothing.

use crate::broker;

use std::fmt::Debug;
use std::panic::AssertUnwindSafe;

use crate::broker::txn::TxnProducer;
use crate::broker::{TestBroker, Wire};
use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource as IncrementalResource, AlterableConfig as IncrementalConfig,
};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    alter_configs_request, alter_partition_reassignments_request, alter_partition_request,
    elect_leaders_request, AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AlterConfigsRequest,
    AlterPartitionReassignmentsRequest, AlterPartitionRequest, AlterUserScramCredentialsRequest,
    ApiKey, ApiVersionsRequest, BrokerId, ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest, CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteAclsRequest, DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    DescribeAclsRequest, DescribeClientQuotasRequest, DescribeClusterRequest,
    DescribeConfigsRequest, DescribeGroupsRequest, DescribeLogDirsRequest,
    DescribeProducersRequest, DescribeTransactionsRequest, DescribeUserScramCredentialsRequest,
    ElectLeadersRequest, EndTxnRequest, FetchRequest, FindCoordinatorRequest, GroupId,
    HeartbeatRequest, IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest,
    LeaveGroupRequest, ListConfigResourcesRequest, ListGroupsRequest, ListOffsetsRequest,
    ListPartitionReassignmentsRequest, ListTransactionsRequest, MetadataRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest,
    ProduceRequest, ProducerId, SaslAuthenticateRequest, SaslHandshakeRequest, SyncGroupRequest,
    TopicName, TransactionalId, TxnOffsetCommitRequest, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};
use sediment::api::{SupportedApi, SUPPORTED_APIS};
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;

#[path = "security_api_matrix_coordinators.rs"]
mod coordinators;
use coordinators::*;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const TOPIC_DENIED: i16 = 29;
const GROUP_DENIED: i16 = 30;
const CLUSTER_DENIED: i16 = 31;
const ILLEGAL_SASL_STATE: i16 = 34;
const TXN_DENIED: i16 = 53;

/// Kafka's `ConfigResource.Type` codes.
const CONFIG_TOPIC: i8 = 2;
const CONFIG_BROKER: i8 = 4;
const CONFIG_BROKER_LOGGER: i8 = 8;
const CONFIG_GROUP: i8 = 32;

const TOPIC: &str = "t";
const GROUP: &str = "g-admin";
const TXN_ID: &str = "tx-admin";
/// The offset the super user commits for `GROUP`.
const COMMITTED: i64 = 1;
const ADMIN_PASSWORD: &str = "admin-Secret-9";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn name(v: &str) -> TopicName {
    TopicName(s(v))
}

fn group() -> GroupId {
    GroupId(s(GROUP))
}

fn txn_id() -> TransactionalId {
    TransactionalId(s(TXN_ID))
}

struct Setup {
    b: TestBroker,
    sasl: u16,
    /// `tx-admin`'s producer id and epoch, from the super user's InitProducerId.
    pid: i64,
    epoch: i16,
    /// This broker's node id, the name of its broker config resource.
    node: String,
    /// `t`'s topic id.
    topic_id: uuid::Uuid,
}

impl Setup {
    fn start() -> Self {
        let jaas = format!(
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             user_admin=\"{ADMIN_PASSWORD}\";"
        );
        let b = TestBroker::start(&[
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms=PLAIN",
            &format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}"),
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
        ]);
        let sasl = b.listener_port("SASL_PLAINTEXT");
        let mut st =
            Self { b, sasl, pid: -1, epoch: -1, node: String::new(), topic_id: uuid::Uuid::nil() };
        st.prepare();
        st
    }

    /// A connection authenticated as the super user.
    fn admin(&self) -> Wire {
        let mut w = Wire::connect(self.sasl);
        assert_eq!(w.call(3, &ApiVersionsRequest::default()).error_code, 0);
        let r = w.call(1, &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")));
        assert_eq!(r.error_code, 0);
        let token = Bytes::from(format!("\0admin\0{ADMIN_PASSWORD}"));
        let r = w.call(2, &SaslAuthenticateRequest::default().with_auth_bytes(token));
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        w
    }

    /// The super user makes a topic, a group and a transactional id, and
    /// sees each where the refused principal must not.
    fn prepare(&mut self) {
        let mut admin = self.admin();
        let r = admin.call(
            7,
            &CreateTopicsRequest::default().with_timeout_ms(10_000).with_topics(vec![
                CreatableTopic::default()
                    .with_name(name(TOPIC))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]),
        );
        assert_eq!(r.topics[0].error_code, 0, "{r:?}");
        let records: Vec<(String, Option<String>)> =
            (0..2).map(|i| (format!("k{i}"), Some(format!("v{i}")))).collect();
        broker::produce(&mut admin, TOPIC, 0, broker::now_ms(), &records);
        let r = admin.call(8, &offset_commit(COMMITTED));
        assert_eq!(r.topics[0].partitions[0].error_code, 0, "{r:?}");
        let producer = TxnProducer::init(&mut admin, TXN_ID, 60_000).expect("InitProducerId");
        (self.pid, self.epoch) = (producer.pid, producer.epoch);

        let all = admin.call(12, &MetadataRequest::default().with_topics(None));
        assert!(all.topics.iter().any(|t| t.name == Some(name(TOPIC))), "{all:?}");
        self.node = all.brokers[0].node_id.0.to_string();
        let t = all.topics.iter().find(|t| t.name == Some(name(TOPIC))).expect("t");
        self.topic_id = t.topic_id;
        let groups = admin.call(4, &ListGroupsRequest::default());
        assert!(groups.groups.iter().any(|g| g.group_id == group()), "{groups:?}");
        let txns = admin.call(1, &ListTransactionsRequest::default().with_duration_filter(-1));
        assert!(txns.transaction_states.iter().any(|t| t.transactional_id == txn_id()), "{txns:?}");
    }
}

/// One API's case: the refused principal's connection, and what did not
/// answer as 5.2 says.
struct Case<'a> {
    st: &'a Setup,
    api: SupportedApi,
    w: Wire,
    gaps: Vec<String>,
}

impl Case<'_> {
    /// Send `request` at `version`, which must be one the API serves.
    fn call<R: Request + Debug>(&mut self, version: i16, request: &R) -> R::Response {
        assert_eq!(R::KEY, self.api.key as i16, "a case sends only its own API");
        assert!(
            (self.api.min..=self.api.max).contains(&version),
            "v{version} is outside {}..={}: pick a served version",
            self.api.min,
            self.api.max
        );
        self.w.call(version, request)
    }

    /// Record a gap unless `got` is `want`.
    fn expect<T: PartialEq + Debug>(&mut self, what: &str, got: T, want: T, response: &dyn Debug) {
        if got != want {
            self.gaps.push(format!(
                "{:?} {what}: expected {want:?}, got {got:?}\n    response: {response:?}",
                self.api.key
            ));
        }
    }
}

type CaseFn = fn(&mut Case<'_>);

/// The case of `key`. No default: a served API must have its case here.
fn case_of(key: ApiKey) -> CaseFn {
    use ApiKey as K;
    match key {
        K::Produce => produce,
        K::Fetch => fetch,
        K::ListOffsets => list_offsets,
        K::OffsetForLeaderEpoch => offset_for_leader_epoch,
        K::Metadata => metadata,
        K::DescribeTopicPartitions => describe_topic_partitions,
        K::ApiVersions => api_versions,
        K::CreateTopics => create_topics,
        K::DeleteTopics => delete_topics,
        K::DeleteRecords => delete_records,
        K::InitProducerId => init_producer_id,
        K::DescribeConfigs => describe_configs,
        K::AlterConfigs => alter_configs,
        K::DescribeLogDirs => describe_log_dirs,
        K::CreatePartitions => create_partitions,
        K::ElectLeaders => elect_leaders,
        K::AlterPartition => alter_partition,
        K::AlterPartitionReassignments => alter_partition_reassignments,
        K::ListPartitionReassignments => list_partition_reassignments,
        K::IncrementalAlterConfigs => incremental_alter_configs,
        K::DescribeCluster => describe_cluster,
        K::ListConfigResources => list_config_resources,
        K::FindCoordinator => find_coordinator,
        K::JoinGroup => join_group,
        K::SyncGroup => sync_group,
        K::Heartbeat => heartbeat,
        K::LeaveGroup => leave_group,
        K::OffsetCommit => offset_commit_case,
        K::OffsetFetch => offset_fetch,
        K::ListGroups => list_groups,
        K::DescribeGroups => describe_groups,
        K::DeleteGroups => delete_groups,
        K::OffsetDelete => offset_delete,
        K::ConsumerGroupHeartbeat => consumer_group_heartbeat,
        K::ConsumerGroupDescribe => consumer_group_describe,
        K::AddPartitionsToTxn => add_partitions_to_txn,
        K::AddOffsetsToTxn => add_offsets_to_txn,
        K::EndTxn => end_txn,
        K::TxnOffsetCommit => txn_offset_commit,
        K::WriteTxnMarkers => write_txn_markers,
        K::DescribeProducers => describe_producers,
        K::DescribeTransactions => describe_transactions,
        K::ListTransactions => list_transactions,
        K::SaslHandshake => sasl_handshake,
        K::SaslAuthenticate => sasl_authenticate,
        K::DescribeClientQuotas => describe_client_quotas,
        K::DescribeUserScramCredentials => describe_user_scram_credentials,
        K::AlterUserScramCredentials => alter_user_scram_credentials,
        K::DescribeAcls => describe_acls,
        K::CreateAcls => create_acls,
        K::DeleteAcls => delete_acls,
        other => panic!("no authorization case for {other:?}: add one (docs/design/security.md, 'Per-API checks')"),
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn every_api_refuses_a_principal_without_acls_as_kafka_does() {
    let st = Setup::start();
    let mut gaps = Vec::new();
    for api in SUPPORTED_APIS {
        let case = case_of(api.key);
        let mut c = Case { st: &st, api: *api, w: Wire::connect(st.b.port), gaps: Vec::new() };
        // A case that breaks (a closed connection, an undecodable answer) is
        // one more gap, not the end of the walk.
        if let Err(p) = std::panic::catch_unwind(AssertUnwindSafe(|| case(&mut c))) {
            c.gaps.push(format!("{:?} broke: {}", api.key, panic_text(p.as_ref())));
        }
        gaps.append(&mut c.gaps);
    }
    gaps.extend(nothing_changed(&st));
    assert!(!st.b.log().contains("panicked"), "{}", st.b.log());
    assert!(
        gaps.is_empty(),
        "{} answers differ from docs/design/security.md, 'Per-API checks':\n{}",
        gaps.len(),
        gaps.join("\n")
    );
}

/// What the refused requests would have changed, as the super user sees it.
fn nothing_changed(st: &Setup) -> Vec<String> {
    let mut admin = st.admin();
    let mut gaps = Vec::new();
    let mut expect = |api: &str, what: &str, ok: bool, seen: &dyn Debug| {
        if !ok {
            gaps.push(format!("{api} changed the broker: {what}\n    seen: {seen:?}"));
        }
    };
    let named = |topic: &str| {
        MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name(topic)))]))
            .with_allow_auto_topic_creation(false)
    };
    let r = admin.call(12, &named(TOPIC));
    let kept = r.topics[0].error_code == 0;
    expect("DeleteTopics", "t is gone", kept, &r);
    expect("CreatePartitions", "t grew", !kept || r.topics[0].partitions.len() == 1, &r);
    let r = admin.call(12, &named("fresh"));
    let absent = r.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION;
    expect("CreateTopics/Metadata", "fresh was created", absent, &r);
    let earliest = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        ListOffsetsTopic::default().with_name(name(TOPIC)).with_partitions(vec![
            ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-2),
        ]),
    ]);
    let r = admin.call(7, &earliest);
    expect("DeleteRecords", "t's start moved", r.topics[0].partitions[0].offset == 0, &r);
    let r = admin.call(7, &OffsetFetchRequest::default().with_group_id(group()).with_topics(None));
    let offsets: Vec<(String, i64)> = r
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), p.committed_offset)))
        .collect();
    let ok = offsets == [(TOPIC.to_string(), COMMITTED)];
    expect("OffsetCommit/OffsetDelete/DeleteGroups", "g-admin's offsets", ok, &r);
    let r = admin.call(3, &any_acls());
    expect("CreateAcls", "an ACL exists", r.error_code == 0 && r.resources.is_empty(), &r);
    gaps
}

fn records(transactional: Option<(i64, i16)>) -> Bytes {
    let now = broker::now_ms();
    let mut b = BatchBuilder::new(Compression::None, now);
    if let Some((pid, epoch)) = transactional {
        b = b.producer(pid, epoch, 0);
        b.transactional = true;
    }
    b.append(now, Some(b"k"), Some(b"v"));
    Bytes::from(b.build())
}

fn produce(c: &mut Case<'_>) {
    let request = |transactional_id: Option<TransactionalId>, records: Bytes| {
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_transactional_id(transactional_id)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name(TOPIC))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records))])])
    };
    let r = c.call(9, &request(None, records(None)));
    c.expect("WRITE on t", r.responses[0].partition_responses[0].error_code, TOPIC_DENIED, &r);
    let r = c.call(9, &request(Some(txn_id()), records(Some((c.st.pid, c.st.epoch)))));
    let code = r.responses[0].partition_responses[0].error_code;
    c.expect("WRITE on tx-admin", code, TXN_DENIED, &r);
}

fn fetch(c: &mut Case<'_>) {
    let request = |replica: i32| {
        FetchRequest::default()
            .with_replica_id(BrokerId(replica))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default().with_topic(name(TOPIC)).with_partitions(vec![
                FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20),
            ])])
    };
    let r = c.call(12, &request(-1));
    c.expect("READ on t", r.responses[0].partitions[0].error_code, TOPIC_DENIED, &r);
    let r = c.call(12, &request(1));
    let code = r.responses[0].partitions[0].error_code;
    c.expect("CLUSTER_ACTION of a replica", code, TOPIC_DENIED, &r);
}

fn list_offsets(c: &mut Case<'_>) {
    let request = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        ListOffsetsTopic::default().with_name(name(TOPIC)).with_partitions(vec![
            ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1),
        ]),
    ]);
    let r = c.call(7, &request);
    c.expect("DESCRIBE on t", r.topics[0].partitions[0].error_code, TOPIC_DENIED, &r);
}

fn offset_for_leader_epoch(c: &mut Case<'_>) {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    let request = |replica: i32| {
        OffsetForLeaderEpochRequest::default().with_replica_id(BrokerId(replica)).with_topics(vec![
            OffsetForLeaderTopic::default().with_topic(name(TOPIC)).with_partitions(vec![
                OffsetForLeaderPartition::default().with_partition(0).with_leader_epoch(0),
            ]),
        ])
    };
    for v in [2, 4] {
        let r = c.call(v, &request(-1));
        c.expect("DESCRIBE on t", r.topics[0].partitions[0].error_code, TOPIC_DENIED, &r);
    }
    let r = c.call(4, &request(1));
    let code = r.topics[0].partitions[0].error_code;
    c.expect("CLUSTER_ACTION or DESCRIBE of a replica", code, TOPIC_DENIED, &r);
}

fn describe_topic_partitions(c: &mut Case<'_>) {
    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest as Named;
    use kafka_protocol::messages::DescribeTopicPartitionsRequest as Request;
    // All topics: t and the internal topics are left out, without an error.
    let r = c.call(0, &Request::default().with_response_partition_limit(100));
    let listed: Vec<_> = r.topics.iter().map(|t| t.name.clone()).collect();
    c.expect("all topics", listed, vec![], &r);
    // Named, existing or not: 29 with the name, a nil id, no partitions.
    for topic in [TOPIC, "fresh"] {
        let named = Request::default()
            .with_topics(vec![Named::default().with_name(name(topic))])
            .with_response_partition_limit(100);
        let r = c.call(0, &named);
        let got = r.topics.first().map(|t| (t.error_code, t.topic_id, t.partitions.len()));
        c.expect(topic, got, Some((TOPIC_DENIED, uuid::Uuid::nil(), 0)), &r);
    }
}

fn metadata(c: &mut Case<'_>) {
    // All topics: t and the internal topics are left out, without an error.
    let r = c.call(12, &MetadataRequest::default().with_topics(None));
    let listed: Vec<_> = r.topics.iter().map(|t| t.name.clone()).collect();
    c.expect("all topics", listed, vec![], &r);
    // Named: 29 with the name, no id, no partitions.
    let named = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name(TOPIC)))]))
        .with_allow_auto_topic_creation(false);
    let r = c.call(12, &named);
    let t = &r.topics[0];
    let got = (t.error_code, t.name.clone(), t.topic_id, t.partitions.len());
    c.expect("named t", got, (TOPIC_DENIED, Some(name(TOPIC)), uuid::Uuid::nil(), 0), &r);
    // A missing one, auto-creation allowed: 29, not created.
    let fresh = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name("fresh")))]))
        .with_allow_auto_topic_creation(true);
    let r = c.call(12, &fresh);
    c.expect("auto-created fresh", r.topics[0].error_code, TOPIC_DENIED, &r);
    // By id: 29 with the id and no name.
    let by_id = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(None)
            .with_topic_id(c.st.topic_id)]))
        .with_allow_auto_topic_creation(false);
    let r = c.call(12, &by_id);
    let t = &r.topics[0];
    let got = (t.error_code, t.name.clone(), t.topic_id, t.partitions.len());
    c.expect("t by id", got, (TOPIC_DENIED, None, c.st.topic_id, 0), &r);
    // v10 asked for the cluster's operations: none.
    let r = c.call(10, &named.with_include_cluster_authorized_operations(true));
    c.expect("cluster_authorized_operations", r.cluster_authorized_operations, 0, &r);
}

fn api_versions(c: &mut Case<'_>) {
    let r = c.call(3, &ApiVersionsRequest::default());
    let got: Vec<(i16, i16, i16)> =
        r.api_keys.iter().map(|k| (k.api_key, k.min_version, k.max_version)).collect();
    let want: Vec<(i16, i16, i16)> =
        SUPPORTED_APIS.iter().map(|a| (a.key as i16, a.min, a.max)).collect();
    c.expect("no check: every API", (r.error_code, got), (0, want), &r);
}

fn create_topics(c: &mut Case<'_>) {
    let topic = |n: &str| {
        CreatableTopic::default()
            .with_name(name(n))
            .with_num_partitions(1)
            .with_replication_factor(1)
    };
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![topic("fresh"), topic(TOPIC)]);
    let r = c.call(7, &request);
    let got: Vec<(i16, Option<String>)> = r
        .topics
        .iter()
        .map(|t| (t.error_code, t.error_message.as_ref().map(|m| m.to_string())))
        .collect();
    let denied = (TOPIC_DENIED, Some("Authorization failed.".to_string()));
    c.expect("CREATE, before existence", got, vec![denied.clone(), denied], &r);
}

fn delete_topics(c: &mut Case<'_>) {
    let by_name = |n: &str| DeleteTopicState::default().with_name(Some(name(n)));
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![by_name(TOPIC), by_name("ghost")]);
    let r = c.call(6, &request);
    let got: Vec<i16> = r.responses.iter().map(|t| t.error_code).collect();
    c.expect("DESCRIBE, before existence", got, vec![TOPIC_DENIED; 2], &r);
}

fn delete_records(c: &mut Case<'_>) {
    let request = DeleteRecordsRequest::default().with_timeout_ms(10_000).with_topics(vec![
        DeleteRecordsTopic::default().with_name(name(TOPIC)).with_partitions(vec![
            DeleteRecordsPartition::default().with_partition_index(0).with_offset(-1),
        ]),
    ]);
    let r = c.call(2, &request);
    c.expect("DELETE on t", r.topics[0].partitions[0].error_code, TOPIC_DENIED, &r);
}

fn init_producer_id(c: &mut Case<'_>) {
    let request = |id: Option<TransactionalId>| {
        InitProducerIdRequest::default()
            .with_transactional_id(id)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let r = c.call(4, &request(None));
    let idempotent = (r.error_code, r.producer_id.0);
    c.expect("IDEMPOTENT_WRITE or a topic WRITE", idempotent, (CLUSTER_DENIED, -1), &r);
    let r = c.call(4, &request(Some(txn_id())));
    c.expect("WRITE on tx-admin", r.error_code, TXN_DENIED, &r);
}

fn describe_configs(c: &mut Case<'_>) {
    let resource = |kind: i8, n: &str| {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(n))
            .with_configuration_keys(None)
    };
    let node = c.st.node.clone();
    let request = DescribeConfigsRequest::default().with_resources(vec![
        resource(CONFIG_TOPIC, TOPIC),
        resource(CONFIG_BROKER, &node),
        resource(CONFIG_BROKER_LOGGER, &node),
        resource(CONFIG_GROUP, GROUP),
    ]);
    let r = c.call(4, &request);
    let got: Vec<(i16, usize)> =
        r.results.iter().map(|r| (r.error_code, r.configs.len())).collect();
    let want = vec![(TOPIC_DENIED, 0), (CLUSTER_DENIED, 0), (CLUSTER_DENIED, 0), (GROUP_DENIED, 0)];
    c.expect("DESCRIBE_CONFIGS per resource", got, want, &r);
}

fn alter_configs(c: &mut Case<'_>) {
    let resource = |kind: i8, n: &str| {
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(n))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(s("retention.ms"))
                .with_value(Some(s("100000")))])
    };
    let node = c.st.node.clone();
    let request = AlterConfigsRequest::default()
        .with_resources(vec![resource(CONFIG_TOPIC, TOPIC), resource(CONFIG_BROKER, &node)]);
    let r = c.call(2, &request);
    let got: Vec<i16> = r.responses.iter().map(|r| r.error_code).collect();
    c.expect("ALTER_CONFIGS per resource", got, vec![TOPIC_DENIED, CLUSTER_DENIED], &r);
}

fn incremental_alter_configs(c: &mut Case<'_>) {
    let resource = |kind: i8, n: &str| {
        IncrementalResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(n))
            .with_configs(vec![IncrementalConfig::default()
                .with_name(s("retention.ms"))
                .with_config_operation(0)
                .with_value(Some(s("100000")))])
    };
    let node = c.st.node.clone();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        resource(CONFIG_TOPIC, TOPIC),
        resource(CONFIG_BROKER, &node),
        resource(CONFIG_BROKER_LOGGER, &node),
        resource(CONFIG_GROUP, GROUP),
    ]);
    let r = c.call(1, &request);
    let got: Vec<i16> = r.responses.iter().map(|r| r.error_code).collect();
    let want = vec![TOPIC_DENIED, CLUSTER_DENIED, CLUSTER_DENIED, GROUP_DENIED];
    c.expect("ALTER_CONFIGS per resource", got, want, &r);
}

fn describe_log_dirs(c: &mut Case<'_>) {
    let r = c.call(4, &DescribeLogDirsRequest::default().with_topics(None));
    c.expect("DESCRIBE on the cluster", (r.error_code, r.results.len()), (CLUSTER_DENIED, 0), &r);
}

fn create_partitions(c: &mut Case<'_>) {
    let request = CreatePartitionsRequest::default().with_timeout_ms(10_000).with_topics(vec![
        CreatePartitionsTopic::default()
            .with_name(name(TOPIC))
            .with_count(2)
            .with_assignments(None),
    ]);
    let r = c.call(3, &request);
    c.expect("ALTER on t", r.results[0].error_code, TOPIC_DENIED, &r);
}

fn elect_leaders(c: &mut Case<'_>) {
    let request =
        ElectLeadersRequest::default().with_election_type(0).with_topic_partitions(Some(vec![
            elect_leaders_request::TopicPartitions::default()
                .with_topic(name(TOPIC))
                .with_partitions(vec![0]),
        ]));
    let r = c.call(2, &request);
    let got = (r.error_code, r.replica_election_results[0].partition_result[0].error_code);
    c.expect("ALTER on the cluster", got, (CLUSTER_DENIED, CLUSTER_DENIED), &r);
}

fn alter_partition(c: &mut Case<'_>) {
    use alter_partition_request::{BrokerState, PartitionData, TopicData};
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_new_isr_with_epochs(vec![BrokerState::default().with_broker_id(BrokerId(0))]);
    let request = AlterPartitionRequest::default()
        .with_broker_id(BrokerId(0))
        .with_topics(vec![TopicData::default().with_partitions(vec![partition])]);
    let r = c.call(3, &request);
    let got = (r.error_code, r.topics.len());
    c.expect("CLUSTER_ACTION on the cluster", got, (CLUSTER_DENIED, 0), &r);
}

fn alter_partition_reassignments(c: &mut Case<'_>) {
    use alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
    let request = AlterPartitionReassignmentsRequest::default().with_topics(vec![
        ReassignableTopic::default().with_name(name(TOPIC)).with_partitions(vec![
            ReassignablePartition::default().with_partition_index(0).with_replicas(None),
        ]),
    ]);
    let r = c.call(1, &request);
    let got = (r.error_code, r.responses[0].partitions[0].error_code);
    c.expect("ALTER on the cluster", got, (CLUSTER_DENIED, CLUSTER_DENIED), &r);
}

fn list_partition_reassignments(c: &mut Case<'_>) {
    let r = c.call(0, &ListPartitionReassignmentsRequest::default().with_topics(None));
    c.expect("DESCRIBE on the cluster", (r.error_code, r.topics.len()), (CLUSTER_DENIED, 0), &r);
}

fn list_config_resources(c: &mut Case<'_>) {
    let r = c.call(1, &ListConfigResourcesRequest::default().with_resource_types(vec![32]));
    let got = (r.error_code, r.config_resources.len());
    c.expect("DESCRIBE_CONFIGS on the cluster", got, (CLUSTER_DENIED, 0), &r);
}

fn describe_cluster(c: &mut Case<'_>) {
    let request =
        DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let r = c.call(1, &request);
    let got = (r.error_code, r.brokers.len(), r.cluster_authorized_operations);
    c.expect("no check; no operations", got, (0, 1, 0), &r);
}

/// Not an authorization check: outside authentication the SASL pair answers
/// ILLEGAL_SASL_STATE, and the connection keeps serving.
fn sasl_handshake(c: &mut Case<'_>) {
    let r = c.call(1, &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")));
    c.expect("on PLAINTEXT", r.error_code, ILLEGAL_SASL_STATE, &r);
    let r = c.w.call(3, &ApiVersionsRequest::default());
    c.expect("the connection afterwards", r.error_code, 0, &r);
}

fn sasl_authenticate(c: &mut Case<'_>) {
    let token = Bytes::from(format!("\0admin\0{ADMIN_PASSWORD}"));
    let r = c.call(2, &SaslAuthenticateRequest::default().with_auth_bytes(token));
    c.expect("on PLAINTEXT", r.error_code, ILLEGAL_SASL_STATE, &r);
    let r = c.w.call(3, &ApiVersionsRequest::default());
    c.expect("the connection afterwards", r.error_code, 0, &r);
}

fn describe_client_quotas(c: &mut Case<'_>) {
    let r = c.call(1, &DescribeClientQuotasRequest::default().with_strict(false));
    let got = (r.error_code, r.entries.is_none());
    c.expect("DESCRIBE_CONFIGS on the cluster", got, (CLUSTER_DENIED, true), &r);
}

fn describe_user_scram_credentials(c: &mut Case<'_>) {
    let request = DescribeUserScramCredentialsRequest::default()
        .with_users(Some(vec![UserName::default().with_name(s("admin"))]));
    let r = c.call(0, &request);
    // Kafka's error response: one result per named user, without its name.
    let each: Vec<(i16, String, usize)> = r
        .results
        .iter()
        .map(|u| (u.error_code, u.user.to_string(), u.credential_infos.len()))
        .collect();
    let message = r.error_message.as_ref().is_some_and(|m| !m.is_empty());
    let want = (CLUSTER_DENIED, true, vec![(CLUSTER_DENIED, String::new(), 0)]);
    c.expect("DESCRIBE on the cluster", (r.error_code, message, each), want, &r);
}

fn alter_user_scram_credentials(c: &mut Case<'_>) {
    let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        ScramCredentialDeletion::default().with_name(s("admin")).with_mechanism(1),
    ]);
    let r = c.call(0, &request);
    let got: Vec<(String, i16)> =
        r.results.iter().map(|u| (u.user.to_string(), u.error_code)).collect();
    c.expect("ALTER on the cluster", got, vec![("admin".to_string(), CLUSTER_DENIED)], &r);
}

/// A filter matching every ACL (code 0 anywhere would close the connection
/// before any check, as Kafka's parser does).
fn any_acls() -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_pattern_type_filter(1)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1)
}

fn describe_acls(c: &mut Case<'_>) {
    let r = c.call(3, &any_acls());
    let got = (r.error_code, r.resources.len());
    c.expect("DESCRIBE on the cluster", got, (CLUSTER_DENIED, 0), &r);
}

fn create_acls(c: &mut Case<'_>) {
    let creation = AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(s(TOPIC))
        .with_resource_pattern_type(3)
        .with_principal(s("User:ANONYMOUS"))
        .with_host(s("*"))
        .with_operation(3)
        .with_permission_type(3);
    let r = c.call(3, &CreateAclsRequest::default().with_creations(vec![creation]));
    let got: Vec<i16> = r.results.iter().map(|r| r.error_code).collect();
    c.expect("ALTER on the cluster", got, vec![CLUSTER_DENIED], &r);
}

fn delete_acls(c: &mut Case<'_>) {
    let filter = DeleteAclsFilter::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_pattern_type_filter(1)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let r = c.call(3, &DeleteAclsRequest::default().with_filters(vec![filter]));
    let got: Vec<(i16, usize)> =
        r.filter_results.iter().map(|f| (f.error_code, f.matching_acls.len())).collect();
    c.expect("ALTER on the cluster", got, vec![(CLUSTER_DENIED, 0)], &r);
}

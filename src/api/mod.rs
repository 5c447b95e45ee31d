//! Kafka API handlers: one file per API, each turning a decoded request into a
//! response against the broker's managers ([`KafkaApis`]).
//!
//! This is the only layer that knows Kafka error codes, and `error` is the one
//! place that maps typed errors (`LogError`, `GroupError`) to them. Handlers
//! never panic on client input; anything a request can get wrong is answered
//! with a code. Handlers keep no state of their own.
//!
//! `SUPPORTED_APIS` is the single list of what this broker implements, with the
//! exact version ranges: ApiVersions reports it and the server refuses (closes
//! the connection for) anything outside it, so an API we do not implement is
//! never answered with a fake success.

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod alter_partition;
pub mod api_versions;
pub mod auth;
pub mod auth_rules;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod elect_leaders;
pub mod end_txn;
pub mod error;
pub mod fetch;
mod fetch_remote;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod kafka_apis;
pub mod leave_group;
pub mod list_config_resources;
pub mod list_groups;
pub mod list_offsets;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
mod offset_partitions;
pub mod partition_reassignments;
pub mod produce;
pub mod sasl;
pub mod scram_credentials;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

pub use kafka_apis::KafkaApis;

use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::log::segment::FileRegion;
use crate::metrics::DenialRecorder;
use crate::security::acl_store::AclStore;
use crate::security::authorizer::Requester;
use crate::security::Session;

/// One request as a handler sees it: its header, the connection's session
/// (listener, peer, principal) and, when authorization is on, the
/// authorizer with the requester it checks (`auth`) and where its denials
/// are counted and logged.
#[derive(Debug)]
pub struct RequestContext<'a> {
    pub header: RequestHeader,
    pub session: &'a Session,
    pub authorizer: Option<&'a AclStore>,
    /// Built from the session when there is an authorizer.
    pub requester: Option<Requester>,
    /// Counts and logs denials (`None`: each denial is logged, uncounted).
    pub denials: Option<&'a DenialRecorder>,
}

impl<'a> RequestContext<'a> {
    pub fn new(
        header: RequestHeader,
        session: &'a Session,
        authorizer: Option<&'a AclStore>,
    ) -> Self {
        let requester = authorizer.map(|_| Requester::from_session(session));
        Self { header, session, authorizer, requester, denials: None }
    }

    /// Record this request's denials in `denials` (the broker's metrics).
    #[must_use]
    pub fn with_denials(mut self, denials: &'a DenialRecorder) -> Self {
        self.denials = Some(denials);
        self
    }
}

/// An API this broker serves, with the versions it handles.
#[derive(Debug, Clone, Copy)]
pub struct SupportedApi {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> SupportedApi {
    SupportedApi { key, min, max }
}

/// Every API sediment implements. Produce is advertised from v0 as Apache
/// Kafka 4.x does (older librdkafka disables compression otherwise), but
/// versions below 3 are answered with UNSUPPORTED_VERSION.
pub const SUPPORTED_APIS: &[SupportedApi] = &[
    api(ApiKey::Produce, 0, 13),
    api(ApiKey::Fetch, 4, 18),
    api(ApiKey::ListOffsets, 1, 11),
    api(ApiKey::Metadata, 0, 13),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    api(ApiKey::ApiVersions, 0, 5),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::DescribeLogDirs, 1, 5),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::ElectLeaders, 0, 2),
    api(ApiKey::AlterPartition, 2, 3),
    api(ApiKey::AlterPartitionReassignments, 0, 1),
    api(ApiKey::ListPartitionReassignments, 0, 0),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::DescribeCluster, 0, 2),
    api(ApiKey::ListConfigResources, 0, 1),
    api(ApiKey::DescribeTopicPartitions, 0, 0),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::OffsetCommit, 2, 10),
    api(ApiKey::OffsetFetch, 1, 10),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DescribeGroups, 0, 6),
    api(ApiKey::DeleteGroups, 0, 3),
    api(ApiKey::OffsetDelete, 0, 0),
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 1),
    api(ApiKey::AddPartitionsToTxn, 0, 5),
    api(ApiKey::AddOffsetsToTxn, 0, 4),
    api(ApiKey::EndTxn, 0, 5),
    api(ApiKey::TxnOffsetCommit, 0, 6),
    api(ApiKey::WriteTxnMarkers, 1, 1),
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 2),
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
];

/// The versions of `key` we handle, if we handle it at all.
pub fn supported(key: ApiKey) -> Option<SupportedApi> {
    SUPPORTED_APIS.iter().copied().find(|a| a.key == key)
}

pub fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

pub fn topic_name(s: impl Into<String>) -> TopicName {
    TopicName(str_bytes(s))
}

pub fn uuid_of(id: [u8; 16]) -> uuid::Uuid {
    uuid::Uuid::from_bytes(id)
}

/// A response, and the segment file regions that replace its record
/// placeholders when it is written (Fetch; empty for every other API).
#[derive(Debug)]
pub struct Reply {
    pub response: ResponseKind,
    pub regions: Vec<FileRegion>,
}

impl From<ResponseKind> for Reply {
    fn from(response: ResponseKind) -> Self {
        Self { response, regions: Vec::new() }
    }
}

/// Produce, then (acks=all in a cluster) wait for the in-sync replicas.
/// Runs on this worker: a held lock, a heavy append and the fsyncs move to
/// `block_in_place` (`ReplicaManager::append_records`).
async fn produce_and_wait(
    broker: &Arc<KafkaApis>,
    ctx: &RequestContext<'_>,
    r: kafka_protocol::messages::ProduceRequest,
    v: i16,
) -> Result<Option<Reply>, Close> {
    // Records to inflate: one of num.io.threads such requests at once.
    let inflates = produce::inflates_records(&r);
    let timeout_ms = r.timeout_ms;
    let produced = {
        let _place = if inflates { Some(broker.replica.io_place().await) } else { None };
        produce::handle(broker, ctx, r, v)?
    };
    // The place is given back before waiting for the in-sync replicas.
    let Some(mut produced) = produced else { return Ok(None) };
    produce::await_replication(broker, &mut produced, timeout_ms).await;
    Ok(Some(Reply::from(ResponseKind::Produce(produced.response))))
}

/// Run one decoded request. `None` means no response is sent (acks=0 produce).
///
/// # Errors
/// `Close` when the connection must be closed (acks=0 produce that failed, an
/// API that reached dispatch without a handler).
pub async fn dispatch(
    broker: &Arc<KafkaApis>,
    ctx: &RequestContext<'_>,
    request: RequestKind,
) -> Result<Option<Reply>, Close> {
    let v = ctx.header.request_api_version;
    let response = match request {
        RequestKind::ApiVersions(r) => {
            let level = broker.txn.state_manager().config().transaction_version;
            let identity = (broker.cluster_id.as_str(), broker.node_id);
            ResponseKind::ApiVersions(api_versions::handle(&r, v, level, identity))
        }
        RequestKind::Produce(r) => return produce_and_wait(broker, ctx, r, v).await,
        RequestKind::Fetch(r) => {
            let reply = fetch::handle(broker, ctx, r, v).await;
            return Ok(Some(Reply {
                response: ResponseKind::Fetch(reply.response),
                regions: reply.regions,
            }));
        }
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(list_offsets::handle(broker, ctx, r, v).await)
        }
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(blocking(|| metadata::handle(broker, ctx, r, v)))
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(blocking(|| create_topics::handle(broker, ctx, r, v)))
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(blocking(|| delete_topics::handle(broker, ctx, r, v)))
        }
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(blocking(|| describe_log_dirs::handle(broker, ctx, r)))
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(broker, ctx, &r))
        }
        RequestKind::DescribeTopicPartitions(r) => {
            ResponseKind::DescribeTopicPartitions(describe_topic_partitions::handle(broker, ctx, r))
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(blocking(|| find_coordinator::handle(broker, ctx, &r, v)))
        }
        RequestKind::JoinGroup(r) => {
            ResponseKind::JoinGroup(join_group::handle(broker, ctx, r, v).await)
        }
        RequestKind::SyncGroup(r) => {
            ResponseKind::SyncGroup(sync_group::handle(broker, ctx, r, v).await)
        }
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(heartbeat::handle(broker, ctx, &r)),
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(blocking(|| leave_group::handle(broker, ctx, &r, v)))
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(blocking(|| offset_commit::handle(broker, ctx, &r, v)))
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(offset_fetch::handle(broker, ctx, &r, v))
        }
        RequestKind::ListGroups(r) => {
            ResponseKind::ListGroups(list_groups::handle(broker, ctx, &r, v))
        }
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(describe_groups::handle(broker, ctx, &r, v))
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(blocking(|| delete_groups::handle(broker, ctx, &r)))
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(blocking(|| offset_delete::handle(broker, ctx, &r)))
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            ResponseKind::ConsumerGroupHeartbeat(blocking(|| {
                consumer_group_heartbeat::handle(broker, ctx, &r, v)
            }))
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            ResponseKind::ConsumerGroupDescribe(consumer_group_describe::handle(broker, ctx, &r))
        }
        // Reached only after authentication, or on a listener without SASL.
        RequestKind::SaslHandshake(_) => ResponseKind::SaslHandshake(sasl::handshake()),
        RequestKind::SaslAuthenticate(_) => ResponseKind::SaslAuthenticate(sasl::authenticate()),
        RequestKind::AlterPartition(r) => {
            ResponseKind::AlterPartition(alter_partition::handle(broker, ctx, &r, v).await)
        }
        r @ (RequestKind::DescribeConfigs(_)
        | RequestKind::AlterConfigs(_)
        | RequestKind::IncrementalAlterConfigs(_)
        | RequestKind::ListConfigResources(_)) => config_admin_api(broker, ctx, r).ok_or(Close)?,
        r @ (RequestKind::ElectLeaders(_)
        | RequestKind::AlterPartitionReassignments(_)
        | RequestKind::ListPartitionReassignments(_)
        | RequestKind::CreatePartitions(_)
        | RequestKind::DeleteRecords(_)) => partition_admin_api(broker, ctx, r).ok_or(Close)?,
        other => transaction_api(broker, ctx, other).ok_or(Close)?,
    };
    Ok(Some(Reply::from(response)))
}

/// The admin APIs of config resources; `None` for any other request.
fn config_admin_api(
    broker: &Arc<KafkaApis>,
    ctx: &RequestContext<'_>,
    request: RequestKind,
) -> Option<ResponseKind> {
    let v = ctx.header.request_api_version;
    Some(match request {
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(broker, ctx, r))
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(blocking(|| alter_configs::handle_alter(broker, ctx, r)))
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(blocking(|| {
                alter_configs::handle_incremental(broker, ctx, r)
            }))
        }
        RequestKind::ListConfigResources(r) => {
            ResponseKind::ListConfigResources(list_config_resources::handle(broker, ctx, &r, v))
        }
        _ => return None,
    })
}

/// The admin APIs that change partitions (leaders, replicas, records);
/// `None` for any other request.
fn partition_admin_api(
    broker: &Arc<KafkaApis>,
    ctx: &RequestContext<'_>,
    request: RequestKind,
) -> Option<ResponseKind> {
    let v = ctx.header.request_api_version;
    Some(match request {
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(blocking(|| elect_leaders::handle(broker, ctx, &r, v)))
        }
        RequestKind::AlterPartitionReassignments(r) => {
            ResponseKind::AlterPartitionReassignments(blocking(|| {
                partition_reassignments::alter(broker, ctx, &r, v)
            }))
        }
        RequestKind::ListPartitionReassignments(r) => {
            ResponseKind::ListPartitionReassignments(blocking(|| {
                partition_reassignments::list(broker, ctx, &r)
            }))
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(blocking(|| create_partitions::handle(broker, ctx, r)))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(blocking(|| delete_records::handle(broker, ctx, r)))
        }
        _ => return None,
    })
}

/// The producer id and transaction APIs (docs/design/transactions.md, "Versions"); `None`
/// (logged) for a request that is none of them and has no handler.
fn transaction_api(
    broker: &Arc<KafkaApis>,
    ctx: &RequestContext<'_>,
    request: RequestKind,
) -> Option<ResponseKind> {
    let v = ctx.header.request_api_version;
    Some(match request {
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(blocking(|| init_producer_id::handle(broker, ctx, &r, v)))
        }
        RequestKind::AddPartitionsToTxn(r) => ResponseKind::AddPartitionsToTxn(blocking(|| {
            add_partitions_to_txn::handle(broker, ctx, &r, v)
        })),
        RequestKind::AddOffsetsToTxn(r) => ResponseKind::AddOffsetsToTxn(blocking(|| {
            add_offsets_to_txn::handle(broker, ctx, &r, v)
        })),
        RequestKind::EndTxn(r) => {
            ResponseKind::EndTxn(blocking(|| end_txn::handle(broker, ctx, &r, v)))
        }
        RequestKind::TxnOffsetCommit(r) => ResponseKind::TxnOffsetCommit(blocking(|| {
            txn_offset_commit::handle(broker, ctx, &r, v)
        })),
        RequestKind::WriteTxnMarkers(r) => {
            ResponseKind::WriteTxnMarkers(blocking(|| write_txn_markers::handle(broker, ctx, &r)))
        }
        RequestKind::DescribeProducers(r) => ResponseKind::DescribeProducers(blocking(|| {
            describe_producers::handle(broker, ctx, &r)
        })),
        // A transaction's state is locked across its appends.
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(blocking(|| {
                describe_transactions::handle(broker, ctx, &r, v)
            }))
        }
        RequestKind::ListTransactions(r) => ResponseKind::ListTransactions(blocking(|| {
            list_transactions::handle(broker, ctx, &r, v)
        })),
        other => return replication_api(broker, ctx, other),
    })
}

/// The APIs of leader epochs and replication (docs/design/multi-broker.md);
/// every other request goes on to [`security_api`].
fn replication_api(
    broker: &Arc<KafkaApis>,
    ctx: &RequestContext<'_>,
    request: RequestKind,
) -> Option<ResponseKind> {
    Some(match request {
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(blocking(|| {
                offset_for_leader_epoch::handle(broker, ctx, &r)
            }))
        }
        other => return security_api(broker, ctx, other),
    })
}

/// The ACL and SCRAM credential APIs and DescribeClientQuotas
/// (docs/design/security.md, "Admin APIs"); `None` for a request that has no handler (logged)
/// or that the connection must be closed for.
fn security_api(
    broker: &Arc<KafkaApis>,
    ctx: &RequestContext<'_>,
    request: RequestKind,
) -> Option<ResponseKind> {
    Some(match request {
        RequestKind::CreateAcls(r) => {
            ResponseKind::CreateAcls(blocking(|| acls::create_acls(ctx, &r)).ok()?)
        }
        RequestKind::DescribeAcls(r) => {
            ResponseKind::DescribeAcls(acls::describe_acls(ctx, &r).ok()?)
        }
        RequestKind::DeleteAcls(r) => {
            ResponseKind::DeleteAcls(blocking(|| acls::delete_acls(ctx, &r)).ok()?)
        }
        RequestKind::AlterUserScramCredentials(r) => {
            ResponseKind::AlterUserScramCredentials(blocking(|| {
                scram_credentials::handle_alter(ctx, &broker.scram, &r)
            }))
        }
        RequestKind::DescribeUserScramCredentials(r) => ResponseKind::DescribeUserScramCredentials(
            scram_credentials::handle_describe(ctx, &broker.scram, &r),
        ),
        RequestKind::DescribeClientQuotas(r) => ResponseKind::DescribeClientQuotas(
            describe_client_quotas::handle_describe_client_quotas(ctx, &r),
        ),
        other => {
            tracing::warn!(api = ?ApiKey::try_from(ctx.header.request_api_key).ok(), "no handler for {:?}", std::mem::discriminant(&other));
            return None;
        }
    })
}

/// The connection must be closed without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close;

/// Run disk work, or work that may wait on a lock held across one, on this
/// worker thread while letting the runtime move its other tasks elsewhere
/// (appends may fsync; topic creation touches many files).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    crate::blocking::off_worker(f)
}

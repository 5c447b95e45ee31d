//! Kafka API handlers: one file per API, each turning a decoded request into a
//! response against the `LogManager`.
//!
//! This is the only layer that knows Kafka error codes: storage errors
//! (`LogError`) are mapped here (`error_code`). Handlers never panic on client
//! input; anything a request can get wrong is answered with a code.
//!
//! `SUPPORTED_APIS` is the single list of what this broker implements, with the
//! exact version ranges: ApiVersions reports it and the server refuses (closes
//! the connection for) anything outside it, so an API we do not implement is
//! never answered with a fake success.

pub mod alter_configs;
pub mod api_versions;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod produce;
pub mod sync_group;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;

use crate::config::{BrokerConfig, Listener};
use crate::group::{GroupCoordinator, GroupError};
use crate::log::checkpoint;
use crate::log::producer_state::ProducerError;
use crate::log::segment::FileRegion;
use crate::log::{BatchError, LogError, LogManager};

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
    api(ApiKey::ListOffsets, 1, 10),
    api(ApiKey::Metadata, 0, 13),
    api(ApiKey::ApiVersions, 0, 4),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::DescribeLogDirs, 1, 4),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::DescribeCluster, 0, 2),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::OffsetCommit, 2, 9),
    api(ApiKey::OffsetFetch, 1, 9),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DescribeGroups, 0, 6),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::OffsetDelete, 0, 0),
];

/// The versions of `key` we handle, if we handle it at all.
pub fn supported(key: ApiKey) -> Option<SupportedApi> {
    SUPPORTED_APIS.iter().copied().find(|a| a.key == key)
}

/// Issues producer ids in blocks persisted in the first log dir, so an id is
/// never handed out twice, even across restarts (Kafka's producer id blocks).
#[derive(Debug)]
struct ProducerIdBlock {
    path: PathBuf,
    next: i64,
    /// First id of the next block; ids below it are reserved on disk.
    block_end: i64,
}

const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
const PRODUCER_ID_FILE: &str = "sediment-producer-id-block";

impl ProducerIdBlock {
    fn load(dir: &Path, at_least: i64) -> std::io::Result<Self> {
        let path = dir.join(PRODUCER_ID_FILE);
        let stored = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<i64>().unwrap_or(0),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        let next = stored.max(at_least);
        Ok(Self { path, next, block_end: next })
    }

    fn next_id(&mut self) -> std::io::Result<i64> {
        if self.next >= self.block_end {
            let end = self.next + PRODUCER_ID_BLOCK_SIZE;
            checkpoint::write_atomically(&self.path, format!("{end}\n").as_bytes())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            self.block_end = end;
        }
        let id = self.next;
        self.next += 1;
        Ok(id)
    }
}

/// Everything a handler needs: the broker's identity, config and logs.
#[derive(Debug)]
pub struct Broker {
    pub config: BrokerConfig,
    pub logs: Arc<LogManager>,
    pub node_id: i32,
    pub cluster_id: String,
    pub advertised: Listener,
    pub groups: Arc<GroupCoordinator>,
    /// Bumped after every append so long-polling fetches wake up.
    appended: watch::Sender<u64>,
    producer_ids: Mutex<ProducerIdBlock>,
    /// Per-API counters and latency, updated by the server, exported by `metrics`.
    pub request_metrics: crate::metrics::RequestMetrics,
}

impl Broker {
    /// # Errors
    /// I/O errors reading or creating `meta.properties` and the producer id file.
    pub fn new(
        config: BrokerConfig,
        logs: Arc<LogManager>,
        advertised: Listener,
    ) -> std::io::Result<Self> {
        let dirs = config.log_dirs();
        let first = dirs.first().cloned().unwrap_or_else(|| PathBuf::from("data"));
        let node_id = config.node_id();
        let cluster_id = load_or_create_meta(&dirs, node_id)?;
        let max_pid = logs
            .all_logs()
            .iter()
            .filter_map(|(_, log)| {
                log.read().ok().and_then(|l| l.producer_state().max_producer_id())
            })
            .max()
            .map_or(0, |m| m + 1);
        let producer_ids = ProducerIdBlock::load(&first, max_pid)?;
        let groups = Arc::new(GroupCoordinator::new(
            config.group_config(),
            Arc::clone(&logs),
            logs.clock().clone(),
        ));
        // Rebuild the groups from __consumer_offsets in the background; group
        // requests answer COORDINATOR_LOAD_IN_PROGRESS until it is done.
        let loader = Arc::clone(&groups);
        std::thread::Builder::new().name("group-loader".into()).spawn(move || loader.load())?;
        Ok(Self {
            config,
            logs,
            node_id,
            cluster_id,
            advertised,
            groups,
            appended: watch::channel(0).0,
            producer_ids: Mutex::new(producer_ids),
            request_metrics: crate::metrics::RequestMetrics::new(),
        })
    }

    /// Wake fetches waiting for data.
    pub fn notify_appended(&self) {
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }

    /// # Errors
    /// The block file could not be written.
    pub fn next_producer_id(&self) -> std::io::Result<i64> {
        self.producer_ids.lock().unwrap_or_else(|p| p.into_inner()).next_id()
    }

    /// The name of the topic with this id.
    pub fn topic_name_by_id(&self, id: &uuid::Uuid) -> Option<String> {
        self.logs.topic_name_by_id(id.as_bytes())
    }
}

/// `meta.properties` in every log dir, as Kafka writes it: the cluster id is
/// generated once and kept.
fn load_or_create_meta(dirs: &[PathBuf], node_id: i32) -> std::io::Result<String> {
    let mut cluster_id = None;
    for dir in dirs {
        if let Ok(text) = std::fs::read_to_string(dir.join("meta.properties")) {
            if let Some(id) = text.lines().find_map(|l| l.strip_prefix("cluster.id=")) {
                cluster_id = Some(id.trim().to_string());
                break;
            }
        }
    }
    let cluster_id = cluster_id.unwrap_or_else(|| {
        crate::log::manager::topic_id_to_string(&crate::log::manager::random_topic_id())
    });
    for dir in dirs {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("meta.properties");
        if !path.exists() {
            let text =
                format!("#\n#sediment\nnode.id={node_id}\nversion=1\ncluster.id={cluster_id}\n");
            checkpoint::write_atomically(&path, text.as_bytes())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
    }
    Ok(cluster_id)
}

/// A Kafka error code for a storage-layer error.
pub fn error_code(e: &LogError) -> ResponseError {
    match e {
        LogError::Io { .. }
        | LogError::Corrupt { .. }
        | LogError::CorruptIndex { .. }
        | LogError::Offline { .. }
        | LogError::SwapConflict { .. } => ResponseError::KafkaStorageError,
        LogError::Batch(b) => batch_error_code(b),
        LogError::Producer(ProducerError::InvalidProducerEpoch { .. }) => {
            ResponseError::InvalidProducerEpoch
        }
        LogError::Producer(ProducerError::OutOfOrderSequence { .. }) => {
            ResponseError::OutOfOrderSequenceNumber
        }
        LogError::Producer(ProducerError::InvalidSequence { .. }) => ResponseError::InvalidRecord,
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        LogError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        LogError::TopicExists(_) => ResponseError::TopicAlreadyExists,
        LogError::UnknownTopicOrPartition(_) | LogError::Deleted(_) => {
            ResponseError::UnknownTopicOrPartition
        }
        LogError::InvalidTopic { .. } => ResponseError::InvalidTopicException,
    }
}

fn batch_error_code(e: &BatchError) -> ResponseError {
    match e {
        BatchError::TooLarge { .. } => ResponseError::MessageTooLarge,
        BatchError::UnsupportedMagic(_) => ResponseError::UnsupportedForMessageFormat,
        BatchError::InvalidRecord { .. } | BatchError::InvalidBatch(_) => {
            ResponseError::InvalidRecord
        }
        BatchError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
        BatchError::Truncated { .. }
        | BatchError::InvalidLength(_)
        | BatchError::CrcMismatch { .. }
        | BatchError::UnknownCompression(_)
        | BatchError::Decompression(_)
        | BatchError::CorruptRecord(_) => ResponseError::CorruptMessage,
    }
}

/// Kafka's code for a group coordinator error.
pub fn group_error_code(e: GroupError) -> ResponseError {
    match e {
        GroupError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        GroupError::Storage(_) => ResponseError::KafkaStorageError,
        GroupError::IllegalState(_) => ResponseError::UnknownServerError,
    }
}

/// 0 for success, else the group error's code.
pub fn group_code(e: Option<GroupError>) -> i16 {
    e.map_or(0, |e| group_error_code(e).code())
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

/// Run one decoded request. `None` means no response is sent (acks=0 produce).
///
/// # Errors
/// `Close` when the connection must be closed (acks=0 produce that failed, an
/// API that reached dispatch without a handler).
pub async fn dispatch(
    broker: &Arc<Broker>,
    header: &RequestHeader,
    request: RequestKind,
    client_host: &str,
) -> Result<Option<Reply>, Close> {
    let v = header.request_api_version;
    let client_id = header.client_id.as_ref().map_or("", |c| c.as_str());
    let response = match request {
        RequestKind::ApiVersions(r) => ResponseKind::ApiVersions(api_versions::handle(&r, v)),
        // Runs on this worker: the append itself moves to `block_in_place` only
        // when it may fsync (see `produce::handle`).
        RequestKind::Produce(r) => {
            return produce::handle(broker, r, v).map(|r| r.map(Reply::from))
        }
        RequestKind::Fetch(r) => {
            let reply = fetch::handle(broker, r, v).await;
            return Ok(Some(Reply {
                response: ResponseKind::Fetch(reply.response),
                regions: reply.regions,
            }));
        }
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(blocking(|| list_offsets::handle(broker, r, v)))
        }
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(blocking(|| metadata::handle(broker, r, v)))
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(blocking(|| create_topics::handle(broker, r, v)))
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(blocking(|| delete_topics::handle(broker, r, v)))
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(blocking(|| create_partitions::handle(broker, r)))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(blocking(|| delete_records::handle(broker, r)))
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id::handle(broker, &r))
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(broker, r))
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(blocking(|| alter_configs::handle_alter(broker, r)))
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(blocking(|| {
                alter_configs::handle_incremental(broker, r)
            }))
        }
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(blocking(|| describe_log_dirs::handle(broker, r)))
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(broker, &r))
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(blocking(|| find_coordinator::handle(broker, &r, v)))
        }
        RequestKind::JoinGroup(r) => {
            ResponseKind::JoinGroup(join_group::handle(broker, r, v, client_id, client_host).await)
        }
        RequestKind::SyncGroup(r) => {
            ResponseKind::SyncGroup(sync_group::handle(broker, r, v).await)
        }
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(heartbeat::handle(broker, &r)),
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(blocking(|| leave_group::handle(broker, &r, v)))
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(blocking(|| offset_commit::handle(broker, &r, v)))
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(offset_fetch::handle(broker, &r, v))
        }
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(list_groups::handle(broker, &r, v)),
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(describe_groups::handle(broker, &r, v))
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(blocking(|| delete_groups::handle(broker, &r)))
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(blocking(|| offset_delete::handle(broker, &r)))
        }
        other => {
            tracing::warn!(api = ?ApiKey::try_from(header.request_api_key).ok(), "no handler for {:?}", std::mem::discriminant(&other));
            return Err(Close);
        }
    };
    Ok(Some(Reply::from(response)))
}

/// The connection must be closed without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close;

/// Run disk work on this worker thread while letting the runtime move its
/// other tasks elsewhere (appends may fsync; topic creation touches many files).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

//! Fetch: whole batches from each requested partition, long-polling up to
//! `max_wait_ms` until `min_bytes` are available (woken by appends).
//!
//! Sizes follow KIP-74: `partition_max_bytes` bounds each partition and
//! `max_bytes`, capped by the broker's `fetch.max.bytes`, the response,
//! except that the first batch of the first partition with data is returned
//! whole even when larger, so a consumer always makes progress.
//!
//! Fetch sessions (KIP-227, v7+, `replica::fetch_session`): a full fetch may open a
//! session whose id the answer carries; an incremental fetch reads every
//! partition of its session (the request only names what changed) and the
//! answer keeps only the partitions the client must hear about. The session
//! is decided before the long poll and the answer filtered once, after it.
//!
//! A topic with `compression.type=zstd` is UNSUPPORTED_COMPRESSION_TYPE to
//! Fetch v4-v9 (Kafka's rule: those clients cannot read zstd).
//!
//! Isolation (v4+): read_committed reads stop at the last stable offset and
//! carry the aborted transactions of what they return; every response
//! carries the partition's LSO. With no transaction in a log both levels
//! answer the same bytes (read_uncommitted keeps an empty aborted list, as
//! this broker always sent).
//!
//! Tiered storage: a partition whose fetch offset is below its local log
//! start (its oldest segments are in the store only) is read from the store
//! (`fetch_remote`): one such partition per request, read before the local
//! ones with no lock held, and a fetch with its data or error answers at once.
//!
//! Zero copy: the records are not read here. Each partition's bytes are a
//! [`FileRegion`] of a segment file; the response carries a placeholder of
//! the same length in their place ([`placeholder`]), and the server, while
//! encoding, swaps each placeholder for its region (in response order) and
//! sends the region with `sendfile`, straight from the page cache to the
//! socket, as Kafka does. Records never pass through the broker's memory.
//!
//! Leader epochs (Kafka's `Partition.fetchRecords`): a `current_leader_epoch`
//! (v9+) other than the partition's is FENCED_LEADER_EPOCH or
//! UNKNOWN_LEADER_EPOCH before anything is read. With `last_fetched_epoch`
//! (v12+), a fetch whose epoch the log does not hold up to the fetch offset
//! gets `diverging_epoch` (the largest epoch at or below it and that epoch's
//! end) and no records: the fetcher truncates there (KIP-279).
//!
//! Fetch from follower (KIP-392): a consumer's fetch v11+ of a partition
//! followed here is read from the local replica up to its high watermark
//! (the leader's, as the last replica fetch gave it; until the leader has
//! answered one since the follower began, NOT_LEADER_OR_FOLLOWER sends the
//! consumer to the leader), its epoch checked against the leader's; with `replica.selector.class` rack-aware, a leader
//! answers a consumer with `client.rack` by `preferred_read_replica` and no
//! records when a follower of that rack holds the fetch offset
//! (`replica::replica_selector`).
//!
//! Replication throttle (KIP-73, `replica::replication_quota`): a replica
//! fetch of a partition whose `leader.replication.throttled.replicas` names
//! this broker's replica, from a follower outside the ISR, gets no records
//! (the positions only) while `leader.replication.throttled.rate` is
//! exceeded; the records answered for such partitions count toward it.
//!
//! Authorization (Kafka's `handleFetchRequest`), decided once per request
//! before the first read: a consumer needs READ on each topic, checked
//! before the partition's existence (an unknown topic id is UNKNOWN_TOPIC_ID
//! first); a fetch from a replica (`replica_id` ≥ 0, from v15 in
//! `replica_state`) needs CLUSTER_ACTION on the cluster instead, and without
//! it every partition is TOPIC_AUTHORIZATION_FAILED.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::error::{error_code, fetch_session_error_code, leader_epoch_error};
use super::fetch_remote::{self, RemotePart, StoreRead};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::log::segment::FileRegion;
use crate::log::{FetchIsolation, Log, TopicPartition};
use crate::replica::fetch_session::{FetchContext, SessionError};
use crate::replica::replica_selector::{ReplicaSelector, ReplicaView};
use crate::security::acl::{AclOperation, ResourceType};

/// Upper bound of a long poll, whatever the client asks.
const MAX_WAIT_CAP_MS: i32 = 5 * 60 * 1000;

/// Longest records region sent as a placeholder; a longer one (a partition
/// limit above 64 MiB and that much data) is read into the response instead.
const MAX_PLACEHOLDER: usize = 64 << 20;

/// Never read: only its address matters. A zeroed allocation this large is
/// fresh mmap'd pages that are never touched, so it costs address space, not
/// memory (a `static` array would put 64 MiB of zeros in the binary).
static PLACEHOLDER: OnceLock<&'static [u8]> = OnceLock::new();

fn placeholder_area() -> &'static [u8] {
    PLACEHOLDER.get_or_init(|| Box::leak(vec![0u8; MAX_PLACEHOLDER].into_boxed_slice()))
}

/// Bytes standing in for `len` bytes of records in a response, to be replaced
/// by the matching [`FileRegion`] when the response is written.
pub(crate) fn placeholder(len: usize) -> Option<Bytes> {
    (len <= MAX_PLACEHOLDER).then(|| Bytes::from_static(&placeholder_area()[..len]))
}

/// Whether `bytes` is a placeholder made by this module (the encoder hands it
/// to the output buffer as a slice).
pub fn is_placeholder(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && PLACEHOLDER.get().is_some_and(|area| std::ptr::eq(bytes.as_ptr(), area.as_ptr()))
}

/// A fetch response whose records are placeholders for `regions`, in the
/// order the encoder meets them (topics, then partitions, as in the response).
#[derive(Debug)]
pub struct FetchReply {
    pub response: FetchResponse,
    pub regions: Vec<FileRegion>,
}

/// What the request's principal may read, decided before any read.
pub(super) enum FetchAccess {
    /// A replica allowed CLUSTER_ACTION (or no authorizer): every partition.
    All,
    /// A replica without CLUSTER_ACTION: no partition.
    Nothing,
    /// A consumer: READ per topic name (a name not decided here is denied).
    Topics(HashMap<String, bool>),
}

impl FetchAccess {
    fn decide(
        broker: &KafkaApis,
        ctx: &RequestContext<'_>,
        request: &FetchRequest,
        version: i16,
    ) -> Self {
        if !ctx.authorization_enabled() {
            return Self::All;
        }
        let replica_id =
            if version >= 15 { request.replica_state.replica_id.0 } else { request.replica_id.0 };
        if replica_id >= 0 {
            return if ctx.authorize_cluster(AclOperation::ClusterAction) {
                Self::All
            } else {
                Self::Nothing
            };
        }
        let names: Vec<String> = request
            .topics
            .iter()
            .filter_map(|t| {
                if version >= 13 {
                    broker.topic_name_by_id(&t.topic_id)
                } else {
                    Some(t.topic.0.to_string())
                }
            })
            .collect();
        let readable = ctx.filter_authorized(
            AclOperation::Read,
            ResourceType::Topic,
            names.iter().map(String::as_str),
        );
        Self::Topics(readable.into_iter().map(|(n, ok)| (n.to_string(), ok)).collect())
    }

    /// May a topic known by `name` (`None`: an unknown id) be read? `None`
    /// when the answer is the existence check's.
    pub(super) fn refusal(&self, name: Option<&str>) -> Option<ResponseError> {
        match (self, name) {
            (Self::All, _) => None,
            (Self::Nothing, _) => Some(ResponseError::TopicAuthorizationFailed),
            (Self::Topics(_), None) => None,
            (Self::Topics(readable), Some(n)) => {
                (readable.get(n) != Some(&true)).then_some(ResponseError::TopicAuthorizationFailed)
            }
        }
    }
}

pub async fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    mut request: FetchRequest,
    version: i16,
) -> FetchReply {
    let now_ms = broker.logs.clock().now_ms();
    let replica_id =
        if version >= 15 { request.replica_state.replica_id.0 } else { request.replica_id.0 };
    let context = if version >= 7 {
        broker.replica.fetch_sessions().new_context(now_ms, version, &request, replica_id >= 0)
    } else {
        FetchContext::Sessionless
    };
    match &context {
        FetchContext::Error(e) => return session_error(*e),
        FetchContext::Incremental { topics, .. } => request.topics = topics.clone(),
        _ => {}
    }
    let mut reply = long_poll(broker, ctx, &request, version).await;
    if replica_id >= 0 {
        record_throttled(broker, &reply.response, version);
    }
    match context {
        FetchContext::Full { privileged, uses_topic_ids } => {
            reply.response.session_id = broker.replica.fetch_sessions().maybe_create_session(
                broker.logs.clock().now_ms(),
                privileged,
                uses_topic_ids,
                &request.topics,
                &reply.response,
            );
        }
        FetchContext::Incremental { session_id, epoch, .. } => {
            let cache = broker.replica.fetch_sessions();
            match cache.filter_incremental(session_id, epoch, &mut reply.response) {
                Ok(()) => {}
                // Evicted while this request waited: the whole answer, with
                // no session, tells the client to start over with a full fetch.
                Err(SessionError::IdNotFound) => reply.response.session_id = 0,
                Err(e) => return session_error(e),
            }
        }
        FetchContext::Sessionless | FetchContext::Error(_) => {}
    }
    reply
}

/// Count the records a replica fetch's answer carries for partitions the
/// leader's throttle covers (only while it has a bound: the count is what
/// the bound is checked against).
fn record_throttled(broker: &KafkaApis, response: &FetchResponse, version: i16) {
    let quota = &broker.replica.quotas().leader;
    if quota.bound().is_none() {
        return;
    }
    let mut bytes = 0u64;
    for topic in &response.responses {
        let name = if version >= 13 {
            broker.topic_name_by_id(&topic.topic_id)
        } else {
            Some(topic.topic.0.to_string())
        };
        let Some(name) = name else { continue };
        for p in
            topic.partitions.iter().filter(|p| p.records.as_ref().is_some_and(|r| !r.is_empty()))
        {
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            let Some(log) = broker.logs.get_log(&tp) else { continue };
            if log.read().config().leader_throttled_replicas.applies(tp.partition, broker.node_id) {
                bytes += p.records.as_ref().map_or(0, |r| r.len() as u64);
            }
        }
    }
    quota.record(bytes, broker.logs.clock().now_ms());
}

/// Whether the leader's throttle holds back `follower`'s fetch of `tp`
/// now: its replica is listed, it is outside the ISR, and the rate is
/// exceeded.
fn leader_throttles(broker: &KafkaApis, log: &Log, tp: &TopicPartition, follower: i32) -> bool {
    log.config().leader_throttled_replicas.applies(tp.partition, broker.node_id)
        && broker.replica.quotas().leader.is_exceeded(broker.logs.clock().now_ms())
        && !broker
            .replica
            .leadership()
            .and_then(|l| l.led(tp))
            .is_some_and(|led| led.isr.contains(&follower))
}

/// A refused session: the error, no partitions, no session.
fn session_error(e: SessionError) -> FetchReply {
    let code = fetch_session_error_code(e).code();
    let response = FetchResponse::default().with_error_code(code).with_session_id(0);
    FetchReply { response, regions: Vec::new() }
}

/// Read the request's partitions until `min_bytes` are there, an error is,
/// or `max_wait_ms` passed: a delayed fetch, parked on its own partitions
/// (`replica::delayed_fetch`) between reads.
async fn long_poll(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &FetchRequest,
    version: i16,
) -> FetchReply {
    let access = FetchAccess::decide(broker, ctx, request, version);
    let wait = Duration::from_millis(request.max_wait_ms.clamp(0, MAX_WAIT_CAP_MS) as u64);
    let deadline = tokio::time::Instant::now() + wait;
    // Registered before the first read, so no append after it is missed.
    let waiter = (!wait.is_zero())
        .then(|| broker.replica.watch_partitions(partitions(broker, request, version)));
    // The store's partition is read first, with no lock held (fetch_remote).
    let remote = fetch_remote::read_first(broker, request, version, &access).await;
    let remote = remote.as_ref();
    let follower = follower(broker, request, version);
    // Read once a request: only a consumer that names its rack (v11+) may
    // be sent to another replica.
    let selector = if version >= 11 && !request.rack_id.is_empty() {
        ReplicaSelector::from_values(&broker.config)
    } else {
        ReplicaSelector::Leader
    };
    let scope = ReadScope { access: &access, remote, follower, selector };
    loop {
        let (reply, bytes, errors) =
            tokio::task::block_in_place(|| read_once(broker, request, version, scope));
        let enough = bytes >= request.min_bytes.max(0) as usize
            || errors
            || remote.is_some_and(RemotePart::answers);
        let Some(waiter) = waiter.as_ref().filter(|_| !enough) else { return reply };
        if tokio::time::Instant::now() >= deadline {
            return reply;
        }
        if tokio::time::timeout_at(deadline, waiter.changed()).await.is_err() {
            // Timed out: answer with what there is now.
            return tokio::task::block_in_place(|| read_once(broker, request, version, scope)).0;
        }
    }
}

/// The partitions a fetch reads (those of unknown topic ids left out: they
/// answer at once).
fn partitions<'a>(
    broker: &'a KafkaApis,
    request: &'a FetchRequest,
    version: i16,
) -> impl Iterator<Item = TopicPartition> + 'a {
    request.topics.iter().flat_map(move |topic| {
        let name = if version >= 13 {
            broker.topic_name_by_id(&topic.topic_id)
        } else {
            Some(topic.topic.0.to_string())
        };
        topic
            .partitions
            .iter()
            .filter_map(move |p| name.as_ref().map(|n| TopicPartition::new(n.clone(), p.partition)))
    })
}

/// What every read of one request shares: its access, the store's part,
/// for a replica fetch the follower (see [`follower`]), and for a
/// consumer's the replica selector that applies to it.
#[derive(Clone, Copy)]
struct ReadScope<'a> {
    access: &'a FetchAccess,
    remote: Option<&'a RemotePart>,
    follower: Option<(i32, i64)>,
    selector: ReplicaSelector,
}

fn read_once(
    broker: &KafkaApis,
    request: &FetchRequest,
    version: i16,
    ReadScope { access, remote, follower, selector }: ReadScope<'_>,
) -> (FetchReply, usize, bool) {
    let mut regions = Vec::new();
    // Kafka's cap: what a request may ask for is bounded by the broker's
    // `fetch.max.bytes`, so a 2 GiB `max_bytes` cannot make it read that much.
    let mut remaining = (request.max_bytes.max(0) as usize).min(broker.config.fetch_max_bytes());
    let mut total = 0usize;
    let mut errors = false;
    // A follower of a cluster reads to the log end (Kafka's replica fetch).
    let isolation = match follower {
        Some(_) => FetchIsolation::LogEnd,
        None => FetchIsolation::from_isolation_level(request.isolation_level),
    };
    let mut topics = Vec::with_capacity(request.topics.len());
    for (ti, topic) in request.topics.iter().enumerate() {
        let name = if version >= 13 {
            broker.topic_name_by_id(&topic.topic_id)
        } else {
            Some(topic.topic.0.to_string())
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for (pi, p) in topic.partitions.iter().enumerate() {
            let from_store = remote.filter(|r| (r.topic, r.partition) == (ti, pi));
            let mut data = PartitionData::default()
                .with_partition_index(p.partition)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1)
                .with_records(Some(Bytes::new()));
            let code = match (access.refusal(name.as_deref()), &name) {
                (Some(refused), _) => Some(refused),
                (None, None) => Some(ResponseError::UnknownTopicId),
                (None, Some(name)) => {
                    let tp = TopicPartition::new(name.clone(), p.partition);
                    let budget = Budget { remaining: &mut remaining, total: &mut total, isolation };
                    let remote_on = broker.replica.remote_reader().is_some();
                    let t = Target {
                        tp: &tp,
                        p,
                        version,
                        from_store,
                        remote_on,
                        leader_epoch: None,
                        held_back: false,
                    };
                    let who = (request, follower, selector);
                    read_named(broker, who, t, (&mut data, &mut regions), budget)
                }
            };
            if let Some(code) = code {
                errors = true;
                data = data.with_error_code(code.code());
            }
            partitions.push(data);
        }
        topics.push(
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    (
        FetchReply {
            response: FetchResponse::default().with_session_id(0).with_responses(topics),
            regions,
        },
        total,
        errors,
    )
}

/// One existing partition of a request: refused, answered with the replica
/// to read from instead (KIP-392), or read from the log led here, or
/// followed here by a consumer that may read from followers (Fetch v11+).
fn read_named(
    broker: &KafkaApis,
    (request, follower, selector): (&FetchRequest, Option<(i32, i64)>, ReplicaSelector),
    t: Target<'_>,
    (data, regions): (&mut PartitionData, &mut Vec<FileRegion>),
    budget: Budget<'_>,
) -> Option<ResponseError> {
    let followed_epoch = match broker.not_led(t.tp) {
        None => None,
        Some(ResponseError::NotLeaderOrFollower) if follower.is_none() && t.version >= 11 => {
            // A follower serves consumers once its leader has answered it:
            // its high watermark is then the leader's, never ahead of it.
            let leadership = broker.replica.leadership();
            let heard = leadership.filter(|l| l.fetcher_lags().heard_from_leader(t.tp));
            match heard.and_then(|l| l.follows(t.tp)) {
                Some(epoch) => Some(epoch),
                None => return Some(ResponseError::NotLeaderOrFollower),
            }
        }
        refused => return refused,
    };
    let Some(shared) = broker.logs.get_log(t.tp) else {
        return Some(if broker.logs.offline_partitions().contains_key(t.tp) {
            ResponseError::KafkaStorageError
        } else if t.version >= 13 {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        });
    };
    let read = {
        let log = shared.read();
        let epoch = followed_epoch.unwrap_or_else(|| log.leader_epoch());
        let fenced = leader_epoch_error(t.p.current_leader_epoch, epoch).is_some();
        let elsewhere = (followed_epoch.is_none() && follower.is_none() && !fenced)
            .then(|| {
                preferred_read_replica(
                    broker,
                    (request, selector),
                    (t.tp, t.p),
                    log.log_end_offset(),
                )
            })
            .flatten();
        let held_back = follower.is_some_and(|(id, _)| leader_throttles(broker, &log, t.tp, id));
        match elsewhere {
            Some(id) => {
                data.preferred_read_replica = id.into();
                data.high_watermark = log.high_watermark();
                data.last_stable_offset = log.last_stable_offset();
                data.log_start_offset = log.log_start_offset();
                None
            }
            None => {
                let t = Target { leader_epoch: Some(epoch), held_back, ..t };
                read_log(&log, t, data, regions, budget)
            }
        }
    };
    // The leader's side of replication: the follower's log end is its
    // fetch offset.
    match follower {
        Some(id) if read.is_none() => {
            (!broker.replica.record_follower_fetch(&shared, id, t.p.fetch_offset))
                .then_some(ResponseError::NotLeaderOrFollower)
        }
        _ => read,
    }
}

/// The replica a consumer's fetch of a partition led here should go to
/// instead (KIP-392, `replica.selector.class`): a follower in the client's
/// rack holding the fetch offset, or `None` to read here.
fn preferred_read_replica(
    broker: &KafkaApis,
    (request, selector): (&FetchRequest, ReplicaSelector),
    (tp, p): (&TopicPartition, &FetchPartition),
    leader_end: i64,
) -> Option<i32> {
    if selector == ReplicaSelector::Leader {
        return None;
    }
    let leadership = broker.replica.leadership()?;
    let image = broker.cluster.as_ref()?.current();
    let rack = |id: i32| image.brokers.get(&id).and_then(|b| b.registration.rack.clone());
    let now = broker.logs.clock().now_ms();
    let followers: Vec<ReplicaView> = leadership
        .followers(tp)
        .into_iter()
        .filter(|(id, s)| s.log_end_offset >= p.fetch_offset && image.is_eligible(*id))
        .map(|(id, s)| ReplicaView {
            id,
            rack: rack(id),
            log_end_offset: s.log_end_offset,
            caught_up_ago_ms: now - s.last_caught_up_ms,
        })
        .collect();
    let me = leadership.node_id();
    let leader =
        ReplicaView { id: me, rack: rack(me), log_end_offset: leader_end, caught_up_ago_ms: 0 };
    let chosen = selector.select(request.rack_id.as_str(), &leader, &followers);
    (chosen != me).then_some(chosen)
}

/// A replica fetch's broker and the epoch of the incarnation that sent it:
/// the one the request carries (v15+), else the one the image gives the
/// broker when the request arrives, kept while it waits, so a fetch parked
/// since before its broker restarted is not counted as the new one's.
fn follower(broker: &KafkaApis, request: &FetchRequest, version: i16) -> Option<(i32, i64)> {
    let id = if version >= 15 { request.replica_state.replica_id.0 } else { request.replica_id.0 };
    let leadership = broker.replica.leadership().filter(|_| id >= 0)?;
    let sent = (version >= 15).then_some(request.replica_state.replica_epoch).filter(|e| *e >= 0);
    Some((id, sent.unwrap_or_else(|| leadership.broker_epoch(id))))
}

/// One partition of a request, and the store's read of it when it is the
/// request's partition read from the store.
struct Target<'a> {
    tp: &'a TopicPartition,
    p: &'a FetchPartition,
    version: i16,
    from_store: Option<&'a RemotePart>,
    /// Tiered storage is on (the store can be read).
    remote_on: bool,
    /// The current leader epoch the request must name (the log's own on
    /// its leader; on a follower, its leader's).
    leader_epoch: Option<i32>,
    /// A replica fetch the leader's throttle holds back: positions and
    /// diverging epochs only, no records.
    held_back: bool,
}

/// Answer one partition of an existing log: from the store's read when it is
/// the request's partition read from the store, nothing for another one below
/// its local start (its turn comes), else from the local log.
fn read_log(
    log: &Log,
    t: Target<'_>,
    data: &mut PartitionData,
    regions: &mut Vec<FileRegion>,
    budget: Budget<'_>,
) -> Option<ResponseError> {
    let epoch = t.leader_epoch.unwrap_or_else(|| log.leader_epoch());
    if let Some(code) = leader_epoch_error(t.p.current_leader_epoch, epoch) {
        data.high_watermark = -1;
        data.last_stable_offset = -1;
        data.log_start_offset = -1;
        return Some(code);
    }
    if t.version >= 12 && t.p.last_fetched_epoch >= 0 {
        match diverging_epoch(log, t.p.last_fetched_epoch, t.p.fetch_offset) {
            Err(code) => return Some(code),
            Ok(Some(diverging)) => {
                data.high_watermark = log.high_watermark();
                data.last_stable_offset = log.last_stable_offset();
                data.log_start_offset = log.log_start_offset();
                data.diverging_epoch = diverging;
                return None;
            }
            Ok(None) => {}
        }
    }
    if t.version < 10 && log.config().compression_type == "zstd" {
        // Kafka's answer to a client too old for zstd.
        return Some(ResponseError::UnsupportedCompressionType);
    }
    if t.held_back {
        data.high_watermark = log.high_watermark();
        data.last_stable_offset = log.last_stable_offset();
        data.log_start_offset = log.log_start_offset();
        return None;
    }
    if let Some(part) = t.from_store {
        match fetch_remote::fill(log, t.tp, t.p.fetch_offset, &part.read, data) {
            // The store has no batch at or after the offset (a compaction gap
            // at the end of its last segment): the local log's first batch
            // follows, read from the local start (below it the local read
            // would answer OFFSET_OUT_OF_RANGE; Kafka skips ahead the same way).
            Ok(_) if matches!(part.read, StoreRead::Nothing) => {
                let from = t.p.fetch_offset.max(log.local_log_start_offset());
                let moved = t.p.clone().with_fetch_offset(from);
                return read_partition(log, t.tp, &moved, data, regions, budget);
            }
            Ok(len) => {
                *budget.total += len;
                *budget.remaining = budget.remaining.saturating_sub(len);
                return None;
            }
            Err(code) => return Some(code),
        }
    } else if fetch_remote::below_local(log, t.p.fetch_offset) {
        return fetch_remote::not_this_time(log, t.tp, t.remote_on, data);
    }
    read_partition(log, t.tp, t.p, data, regions, budget)
}

/// Where a fetch with `last_fetched_epoch` leaves the leader's log: the
/// end of the largest epoch at or below it, when that is a smaller epoch
/// or ends before the fetch offset; `None` when the fetch follows on.
/// An epoch the log cannot place, or an offset below the log start, is
/// OFFSET_OUT_OF_RANGE (Kafka's answers).
fn diverging_epoch(
    log: &Log,
    last_fetched_epoch: i32,
    fetch_offset: i64,
) -> Result<Option<EpochEndOffset>, ResponseError> {
    let (epoch, end) =
        log.end_offset_for_epoch(last_fetched_epoch).ok_or(ResponseError::OffsetOutOfRange)?;
    if epoch < 0 || fetch_offset < log.log_start_offset() {
        return Err(ResponseError::OffsetOutOfRange);
    }
    Ok((epoch < last_fetched_epoch || end < fetch_offset)
        .then(|| EpochEndOffset::default().with_epoch(epoch).with_end_offset(end)))
}

/// The response's byte budget (what is left of `max_bytes`, and what was
/// read) and how far the request may read.
struct Budget<'a> {
    remaining: &'a mut usize,
    total: &'a mut usize,
    isolation: FetchIsolation,
}

/// Read one partition's records into `data` (a placeholder plus its region in
/// `regions`, or the bytes themselves past the placeholder limit).
fn read_partition(
    log: &Log,
    tp: &TopicPartition,
    p: &FetchPartition,
    data: &mut PartitionData,
    regions: &mut Vec<FileRegion>,
    budget: Budget<'_>,
) -> Option<ResponseError> {
    let max = (p.partition_max_bytes.max(0) as usize).min(*budget.remaining);
    let read =
        log.read_region_with_isolation(p.fetch_offset, max, *budget.total == 0, budget.isolation);
    let info = match read {
        Ok(info) => info,
        Err(e) => {
            data.high_watermark = log.high_watermark();
            data.last_stable_offset = log.last_stable_offset();
            data.log_start_offset = log.log_start_offset();
            return Some(error_code(&e));
        }
    };
    let len = info.records.as_ref().map_or(0, FileRegion::len);
    *budget.total += len;
    *budget.remaining = budget.remaining.saturating_sub(len);
    data.high_watermark = info.high_watermark;
    data.last_stable_offset = info.last_stable_offset;
    data.log_start_offset = info.log_start_offset;
    if let Some(aborted) = info.aborted_transactions {
        data.aborted_transactions = Some(
            aborted
                .iter()
                .map(|t| {
                    AbortedTransaction::default()
                        .with_producer_id(t.producer_id.into())
                        .with_first_offset(t.first_offset)
                })
                .collect(),
        );
    }
    let region = info.records?;
    match placeholder(region.len()) {
        Some(stand_in) => {
            data.records = Some(stand_in);
            regions.push(region);
            None
        }
        None => match region.read_to_bytes() {
            Ok(bytes) => {
                data.records = Some(bytes);
                None
            }
            Err(e) => {
                tracing::warn!(partition = %tp, "fetch read failed: {e}");
                data.records = Some(Bytes::new());
                Some(ResponseError::KafkaStorageError)
            }
        },
    }
}

//! Followers' fetching from their leaders (docs/design/multi-broker.md, 5.3):
//! `ReplicaFetcherManager` keeps `num.replica.fetchers` threads
//! `ReplicaFetcherThread-<fetcherId>-<leader>` per leader this broker
//! follows partitions of, a partition on thread Kafka's
//! `abs(31 * topic.hashCode + partition) % num.replica.fetchers` (Java's
//! string hash, so a partition lands on the thread Kafka would give it);
//! each thread sends Kafka's
//! replica Fetch (v15: topic ids, this broker's id and the epoch of its
//! registration as `replica_state`, so the leader counts the fetch for this
//! incarnation only (KIP-903); each partition's log end as its fetch
//! offset, its latest epoch as `last_fetched_epoch`)
//! over a [`BrokerChannel`] and, per partition of the answer:
//! * records: appended as follower (framing, CRC and offsets checked), the
//!   high watermark then the leader's, at most the local log end;
//! * a diverging epoch: the log cut back to the leader's end of that epoch
//!   (KIP-279), so it never keeps what the leader does not have;
//! * an epoch or leadership error: nothing, until the image moves the
//!   partition (the next `update`).
//!
//! A connection or decode error drops the connection and backs off
//! `replica.fetch.backoff.ms`.
//!
//! Fetch sessions (KIP-227, [`FetchSessionState`]): the first request of a
//! thread is full and asks the leader for a session; while it has one,
//! each request names only the partitions whose fetch position changed
//! (new ones included) and forgets those no longer followed, and the
//! leader answers only partitions with something new. A session the leader
//! no longer knows, or an epoch it refuses, starts over with a full fetch.
//!
//! Each answered partition's lag (the leader's high watermark less this
//! replica's log end, at least 0) is kept in [`FetcherLags`] for Kafka's
//! `ReplicaFetcherManager` MaxLag gauge; a partition no longer followed
//! leaves it.
//!
//! Throttle (KIP-73, [`ReplicationQuota`]): a partition this broker's
//! replica of is listed in `follower.replication.throttled.replicas`, while
//! behind its leader's high watermark (or not yet answered), is left out of
//! a request while `follower.replication.throttled.rate` is exceeded; the
//! records of every such partition count toward the rate. A round with
//! every partition held back sends nothing and waits a backoff.
//!
//! Threads, not tasks: appends and their fsyncs stay off the async workers.
//! Partitions join and leave a thread between its rounds.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchTopic, ForgottenTopic, ReplicaState,
};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use uuid::Uuid;

use super::delayed_fetch::DelayedFetchPurgatory;
use super::fetcher_stats::{joined, DeathWatch, FetcherLags, FetcherStats};
use super::leadership::Leadership;
use super::replication_quota::ReplicationQuota;
use crate::cluster::channel::BrokerChannel;
use crate::cluster::channel_security::ChannelSecurity;
use crate::log::manager::CleaningControl;
use crate::log::{LogManager, TopicPartition};

/// Kafka's OFFSET_OUT_OF_RANGE.
const OFFSET_OUT_OF_RANGE: i16 = 1;

/// Kafka's FETCH_SESSION_ID_NOT_FOUND and INVALID_FETCH_SESSION_EPOCH.
const SESSION_ERRORS: [i16; 2] = [70, 71];

/// A fetcher's session with its leader: its id, the epoch of the next
/// request, and each partition as the leader holds it from our requests.
#[derive(Debug, Default)]
struct FetchSessionState {
    id: i32,
    epoch: i32,
    sent: HashMap<TopicPartition, FetchPartition>,
}

impl FetchSessionState {
    /// After an answered request that sent `wanted`: a session the answer
    /// opened or kept, or none.
    fn answered(
        this: Option<Self>,
        session_id: i32,
        wanted: HashMap<TopicPartition, FetchPartition>,
    ) -> Option<Self> {
        if session_id == 0 {
            return None;
        }
        match this {
            Some(s) if s.id == session_id => {
                // Epochs wrap to 1: 0 opens a session, -1 ends one.
                let epoch = if s.epoch == i32::MAX { 1 } else { s.epoch + 1 };
                Some(Self { id: s.id, epoch, sent: wanted })
            }
            _ => {
                tracing::info!(session_id, "replica fetch session opened");
                Some(Self { id: session_id, epoch: 1, sent: wanted })
            }
        }
    }
}

/// ListOffsets v4: `current_leader_epoch`, one offset per partition.
const LIST_OFFSETS_VERSION: i16 = 4;

/// ListOffsets' timestamp of the log start.
const EARLIEST_TIMESTAMP: i64 = -2;

/// Fetch v15: topic ids, `replica_state` (id and broker epoch), diverging
/// epochs (Kafka's followers since 3.5).
const FETCH_VERSION: i16 = 15;

/// Kafka's replica fetch settings (its keys and defaults).
#[derive(Debug, Clone, Copy)]
pub struct FetcherConfig {
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub response_max_bytes: i32,
    pub partition_max_bytes: i32,
    pub backoff: Duration,
    pub socket_timeout: Duration,
    /// `num.replica.fetchers`: threads per leader.
    pub num_fetchers: usize,
}

impl Default for FetcherConfig {
    fn default() -> Self {
        Self {
            max_wait_ms: 500,
            min_bytes: 1,
            response_max_bytes: 10 << 20,
            partition_max_bytes: 1 << 20,
            backoff: Duration::from_millis(1000),
            socket_timeout: Duration::from_millis(30_000),
            num_fetchers: 1,
        }
    }
}

/// Where a leader is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderEndpoint {
    pub host: String,
    pub port: u16,
}

/// A partition followed: its leader epoch.
type Followed = BTreeMap<TopicPartition, i32>;

struct FetcherThread {
    partitions: Arc<Mutex<Followed>>,
    endpoint: Arc<Mutex<LeaderEndpoint>>,
    stop: Arc<AtomicBool>,
    /// Set when the thread ended without being stopped.
    dead: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// The fetcher threads of this broker, one per leader followed.
pub struct ReplicaFetcherManager {
    node_id: i32,
    logs: Arc<LogManager>,
    cleaning: Option<Arc<dyn CleaningControl>>,
    config: FetcherConfig,
    /// By (leader, fetcher id).
    threads: Mutex<HashMap<(i32, usize), FetcherThread>>,
    lags: Arc<FetcherLags>,
    stats: Arc<FetcherStats>,
    /// This broker's registration epoch, sent with each fetch.
    leadership: Arc<Leadership>,
    security: Arc<ChannelSecurity>,
    /// Consumers' fetches parked on followed partitions (KIP-392).
    parked: Arc<DelayedFetchPurgatory>,
    /// `follower.replication.throttled.rate`.
    quota: Arc<ReplicationQuota>,
}

/// Kafka's fetcher id of `tp` among `n` threads
/// (`AbstractFetcherManager.getFetcherId`).
pub fn fetcher_id(tp: &TopicPartition, n: usize) -> usize {
    // Java's String.hashCode over UTF-16 code units.
    let hash = tp.topic.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
    let key = hash.wrapping_mul(31).wrapping_add(tp.partition);
    (key & 0x7fff_ffff) as usize % n.max(1)
}

impl std::fmt::Debug for ReplicaFetcherManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaFetcherManager").field("node_id", &self.node_id).finish()
    }
}

impl ReplicaFetcherManager {
    pub fn new(
        node_id: i32,
        logs: Arc<LogManager>,
        cleaning: Option<Arc<dyn CleaningControl>>,
        (config, security): (FetcherConfig, Arc<ChannelSecurity>),
        (leadership, parked, quota): (
            Arc<Leadership>,
            Arc<DelayedFetchPurgatory>,
            Arc<ReplicationQuota>,
        ),
    ) -> Self {
        let threads = Mutex::default();
        let lags = Arc::clone(leadership.fetcher_lags());
        let stats = Arc::clone(leadership.fetcher_stats());
        Self {
            node_id,
            logs,
            cleaning,
            config,
            threads,
            lags,
            stats,
            leadership,
            security,
            parked,
            quota,
        }
    }

    /// Follow exactly `followed` (partition → leader and leader epoch), each
    /// leader at `endpoints`; threads of leaders no longer followed stop.
    pub fn update(
        &self,
        followed: &HashMap<TopicPartition, (i32, i32)>,
        endpoints: &HashMap<i32, LeaderEndpoint>,
    ) {
        self.lags.retain(followed);
        let mut by_leader: HashMap<(i32, usize), Followed> = HashMap::new();
        for (tp, (leader, epoch)) in followed {
            let id = fetcher_id(tp, self.config.num_fetchers);
            by_leader.entry((*leader, id)).or_default().insert(tp.clone(), *epoch);
        }
        let mut threads = self.threads.lock();
        let gone: Vec<(i32, usize)> =
            threads.keys().copied().filter(|l| !by_leader.contains_key(l)).collect();
        for leader in gone {
            if let Some(t) = threads.remove(&leader) {
                stop(t, &self.stats);
            }
        }
        for (key, partitions) in by_leader {
            let leader = key.0;
            let Some(endpoint) = endpoints.get(&leader) else {
                tracing::warn!(leader, "no endpoint for the leader: its partitions wait");
                continue;
            };
            match threads.get(&key) {
                Some(t) => {
                    *t.partitions.lock() = partitions;
                    *t.endpoint.lock() = endpoint.clone();
                }
                None => match self.spawn(key, partitions, endpoint.clone()) {
                    Ok(t) => {
                        threads.insert(key, t);
                    }
                    Err(e) => tracing::error!(leader, "starting a fetcher thread: {e}"),
                },
            }
        }
    }

    /// Stop every thread.
    pub fn shutdown(&self) {
        let threads: Vec<FetcherThread> = self.threads.lock().drain().map(|(_, t)| t).collect();
        for t in threads {
            stop(t, &self.stats);
        }
    }

    fn spawn(
        &self,
        (leader, fetcher_id): (i32, usize),
        partitions: Followed,
        endpoint: LeaderEndpoint,
    ) -> std::io::Result<FetcherThread> {
        let partitions = Arc::new(Mutex::new(partitions));
        let endpoint = Arc::new(Mutex::new(endpoint));
        let stop = Arc::new(AtomicBool::new(false));
        let dead = Arc::new(AtomicBool::new(false));
        let client_id = format!("ReplicaFetcherThread-{fetcher_id}-{leader}");
        let watch = DeathWatch {
            stop: Arc::clone(&stop),
            dead: Arc::clone(&dead),
            stats: Arc::clone(&self.stats),
            client_id: client_id.clone(),
        };
        let fetcher = Fetcher {
            node_id: self.node_id,
            leader,
            logs: Arc::clone(&self.logs),
            cleaning: self.cleaning.clone(),
            config: self.config,
            partitions: Arc::clone(&partitions),
            endpoint: Arc::clone(&endpoint),
            stop: Arc::clone(&stop),
            lags: Arc::clone(&self.lags),
            stats: Arc::clone(&self.stats),
            client_id: client_id.clone(),
            leadership: Arc::clone(&self.leadership),
            security: Arc::clone(&self.security),
            parked: Arc::clone(&self.parked),
            quota: Arc::clone(&self.quota),
        };
        let handle = std::thread::Builder::new().name(client_id).spawn(move || {
            let _watch = watch;
            fetcher.run();
        })?;
        Ok(FetcherThread { partitions, endpoint, stop, dead, handle: Some(handle) })
    }
}

fn stop(mut t: FetcherThread, stats: &Arc<FetcherStats>) {
    t.stop.store(true, Ordering::Release);
    if let Some(h) = t.handle.take() {
        let (stats, dead) = (Arc::clone(stats), Arc::clone(&t.dead));
        // A round ends within the socket timeout; the thread checks `stop` after it.
        std::thread::spawn(move || {
            if h.join().is_err() {
                tracing::error!("a replica fetcher thread panicked");
            }
            joined(&stats, &dead);
        });
    }
}

/// One fetcher thread's work.
struct Fetcher {
    node_id: i32,
    leader: i32,
    logs: Arc<LogManager>,
    cleaning: Option<Arc<dyn CleaningControl>>,
    config: FetcherConfig,
    partitions: Arc<Mutex<Followed>>,
    endpoint: Arc<Mutex<LeaderEndpoint>>,
    stop: Arc<AtomicBool>,
    lags: Arc<FetcherLags>,
    stats: Arc<FetcherStats>,
    /// `ReplicaFetcherThread-<fetcher id>-<leader>`, as Kafka names it.
    client_id: String,
    leadership: Arc<Leadership>,
    security: Arc<ChannelSecurity>,
    parked: Arc<DelayedFetchPurgatory>,
    quota: Arc<ReplicationQuota>,
}

impl Fetcher {
    fn run(self) {
        let mut channel: Option<BrokerChannel> = None;
        // Kept across reconnects: the leader's session outlives a connection.
        let mut session: Option<FetchSessionState> = None;
        while !self.stop.load(Ordering::Acquire) {
            let partitions = self.partitions.lock().clone();
            if partitions.is_empty() {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            if channel.is_none() {
                channel = self.connect();
                if channel.is_none() {
                    std::thread::sleep(self.config.backoff);
                    continue;
                }
            }
            let Some(c) = channel.as_mut() else { continue };
            let ids = self.topic_ids(&partitions);
            let wanted = self.wanted(&partitions, &ids);
            if wanted.is_empty() {
                // Every partition held back by the throttle.
                std::thread::sleep(self.config.backoff);
                continue;
            }
            let request = self.request(&wanted, session.as_ref(), &ids);
            match c.call(FETCH_VERSION, &request) {
                Ok(response) if SESSION_ERRORS.contains(&response.error_code) => {
                    tracing::debug!(
                        leader = self.leader,
                        error = response.error_code,
                        "replica fetch session ended by the leader"
                    );
                    session = None;
                }
                Ok(response) if response.error_code == 0 => {
                    session =
                        FetchSessionState::answered(session.take(), response.session_id, wanted);
                    let mut backoff = false;
                    let mut out_of_range = Vec::new();
                    let mut bytes = 0u64;
                    let names: HashMap<Uuid, &String> =
                        ids.iter().map(|(n, id)| (*id, n)).collect();
                    for topic in response.responses {
                        let Some(name) = names.get(&topic.topic_id) else { continue };
                        for p in topic.partitions {
                            let tp = TopicPartition::new((*name).clone(), p.partition_index);
                            if !partitions.contains_key(&tp) {
                                continue;
                            }
                            if p.error_code == OFFSET_OUT_OF_RANGE {
                                out_of_range.push(tp);
                            } else {
                                bytes += p.records.as_ref().map_or(0, |r| r.len() as u64);
                                backoff |= !self.handle_partition(&tp, p);
                            }
                        }
                    }
                    self.stats.record(&self.client_id, bytes);
                    for tp in out_of_range {
                        backoff |= !self.reset_to_leader_start(c, &tp, partitions[&tp]);
                    }
                    if backoff {
                        std::thread::sleep(self.config.backoff);
                    }
                }
                Ok(response) => {
                    tracing::warn!(
                        leader = self.leader,
                        error = response.error_code,
                        "replica fetch refused"
                    );
                    std::thread::sleep(self.config.backoff);
                }
                Err(e) => {
                    tracing::warn!(leader = self.leader, "replica fetch failed: {e}");
                    channel = None;
                    std::thread::sleep(self.config.backoff);
                }
            }
        }
    }

    fn connect(&self) -> Option<BrokerChannel> {
        let endpoint = self.endpoint.lock().clone();
        let client_id = format!("broker-{}-fetcher-0", self.node_id);
        let max = self.config.response_max_bytes as usize + (1 << 20);
        match BrokerChannel::connect(
            self.leader,
            (&endpoint.host, endpoint.port),
            &client_id,
            (self.config.socket_timeout, max),
            &self.security,
        ) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(leader = self.leader, "{e}");
                None
            }
        }
    }

    /// The id of each followed partition's topic (the cluster's, which
    /// its local log carries).
    fn topic_ids(&self, partitions: &Followed) -> HashMap<String, Uuid> {
        let mut ids = HashMap::new();
        for tp in partitions.keys() {
            if !ids.contains_key(&tp.topic) {
                if let Some(t) = self.logs.topic(&tp.topic) {
                    ids.insert(tp.topic.clone(), Uuid::from_bytes(t.id));
                }
            }
        }
        ids
    }

    /// Each followed partition's fetch position now, but those the
    /// throttle holds back (and any whose topic has no id here yet).
    fn wanted(
        &self,
        partitions: &Followed,
        ids: &HashMap<String, Uuid>,
    ) -> HashMap<TopicPartition, FetchPartition> {
        let mut wanted = HashMap::with_capacity(partitions.len());
        let exceeded = self.quota.is_exceeded(self.logs.clock().now_ms());
        for (tp, epoch) in partitions.iter().filter(|(tp, _)| ids.contains_key(&tp.topic)) {
            let Some(log) = self.logs.get_log(tp) else { continue };
            let log = log.read();
            if exceeded && self.throttled(&log, tp) && !self.lags.caught_up(tp) {
                continue;
            }
            let p = FetchPartition::default()
                .with_partition(tp.partition)
                .with_current_leader_epoch(*epoch)
                .with_fetch_offset(log.log_end_offset())
                .with_last_fetched_epoch(log.leader_epoch_cache().latest_epoch().unwrap_or(-1))
                .with_log_start_offset(log.log_start_offset())
                .with_partition_max_bytes(self.config.partition_max_bytes);
            wanted.insert(tp.clone(), p);
        }
        wanted
    }

    /// The replica fetch of `wanted`: full (opening a session) without a
    /// session, else what changed since `session`'s last request.
    fn request(
        &self,
        wanted: &HashMap<TopicPartition, FetchPartition>,
        session: Option<&FetchSessionState>,
        ids: &HashMap<String, Uuid>,
    ) -> FetchRequest {
        let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
        let mut forgotten: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (tp, p) in wanted {
            if session.is_some_and(|s| s.sent.get(tp) == Some(p)) {
                continue;
            }
            topics.entry(tp.topic.as_str()).or_default().push(p.clone());
        }
        if let Some(s) = session {
            for tp in s.sent.keys().filter(|tp| !wanted.contains_key(*tp)) {
                forgotten.entry(tp.topic.as_str()).or_default().push(tp.partition);
            }
        }
        // A topic forgotten after it left this broker may have no id here
        // any more: the nil id, which the leader matches to nothing.
        let id_of = |n: &str| ids.get(n).copied().unwrap_or_default();
        let topics = topics
            .into_iter()
            .map(|(n, ps)| FetchTopic::default().with_topic_id(id_of(n)).with_partitions(ps))
            .collect();
        let forgotten = forgotten
            .into_iter()
            .map(|(n, ps)| ForgottenTopic::default().with_topic_id(id_of(n)).with_partitions(ps))
            .collect();
        let (id, epoch) = session.map_or((0, 0), |s| (s.id, s.epoch));
        let me = ReplicaState::default()
            .with_replica_id(BrokerId(self.node_id))
            .with_replica_epoch(self.leadership.broker_epoch(self.node_id));
        FetchRequest::default()
            .with_replica_state(me)
            .with_max_wait_ms(self.config.max_wait_ms)
            .with_min_bytes(self.config.min_bytes)
            .with_max_bytes(self.config.response_max_bytes)
            .with_isolation_level(0)
            .with_session_id(id)
            .with_session_epoch(epoch)
            .with_topics(topics)
            .with_forgotten_topics_data(forgotten)
    }

    /// Whether this broker's replica of `tp` is throttled as follower.
    fn throttled(&self, log: &crate::log::Log, tp: &TopicPartition) -> bool {
        log.config().follower_throttled_replicas.applies(tp.partition, self.node_id)
    }

    /// Apply one partition's answer; `false` when it failed (back off).
    fn handle_partition(&self, tp: &TopicPartition, p: PartitionData) -> bool {
        if p.error_code != 0 {
            tracing::debug!(partition = %tp, leader = self.leader, error = p.error_code, "replica fetch: partition refused");
            return false;
        }
        let Some(log) = self.logs.get_log(tp) else { return true };
        if p.diverging_epoch.epoch >= 0 || p.diverging_epoch.end_offset >= 0 {
            let end = p.diverging_epoch.end_offset;
            let cut = self.logs.truncate_to(tp, end.max(0), self.cleaning.as_deref());
            return match cut {
                Ok(removed) => {
                    tracing::info!(partition = %tp, leader = self.leader, offset = end, removed, "truncated to the leader's end of a diverging epoch");
                    true
                }
                Err(e) => {
                    tracing::error!(partition = %tp, "truncating to the leader's log: {e}");
                    false
                }
            };
        }
        let (start_moved, hw_moved) = {
            let mut log = log.write();
            if let Some(records) = p.records.as_ref().filter(|r| !r.is_empty()) {
                if let Err(e) = log.append_as_follower(records) {
                    tracing::error!(partition = %tp, leader = self.leader, "appending the leader's records: {e}");
                    return false;
                }
                if self.throttled(&log, tp) {
                    self.quota.record(records.len() as u64, self.logs.clock().now_ms());
                }
            }
            let before = log.high_watermark();
            log.set_replicated_high_watermark(p.high_watermark);
            self.lags.set(tp, p.high_watermark - log.log_end_offset());
            (p.log_start_offset > log.log_start_offset(), log.high_watermark() != before)
        };
        if hw_moved {
            // Consumers reading this replica (KIP-392) see what it now holds.
            self.parked.complete(tp);
        }
        if start_moved {
            self.follow_log_start(tp, &log, p.log_start_offset);
        }
        true
    }

    /// The leader's log start moved (retention, DeleteRecords): so does
    /// this replica's, up to its high watermark, with its cleaning paused
    /// as DeleteRecords pauses it.
    fn follow_log_start(
        &self,
        tp: &TopicPartition,
        log: &crate::log::manager::SharedLog,
        start: i64,
    ) {
        self.logs.with_cleaning_paused(tp, self.cleaning.as_deref(), || {
            let mut log = log.write();
            let target = start.min(log.high_watermark());
            if target > log.log_start_offset() {
                if let Err(e) = log.maybe_increment_log_start_offset(target) {
                    tracing::warn!(partition = %tp, "following the leader's log start: {e}");
                }
            }
        });
    }

    /// OFFSET_OUT_OF_RANGE: a follower whose log ends below its leader's
    /// log start (retention or DeleteRecords went past it while it was
    /// away) starts again, empty, at the leader's start, which it asks the
    /// leader for (ListOffsets, earliest), as Kafka's followers do. A log
    /// end past the leader's (only an unclean election makes one) is left
    /// for an operator, logged.
    fn reset_to_leader_start(
        &self,
        c: &mut BrokerChannel,
        tp: &TopicPartition,
        epoch: i32,
    ) -> bool {
        let Some(log) = self.logs.get_log(tp) else { return true };
        let end = log.read().log_end_offset();
        let start = match self.leader_offset(c, tp, epoch, EARLIEST_TIMESTAMP) {
            Ok(start) => start,
            Err(e) => {
                tracing::warn!(partition = %tp, leader = self.leader, "asking the leader for its log start: {e}");
                return false;
            }
        };
        if start <= end {
            tracing::error!(partition = %tp, leader = self.leader, end, leader_start = start, "fetch offset out of the leader's range");
            return false;
        }
        match self.logs.truncate_fully_and_start_at(tp, start, self.cleaning.as_deref()) {
            Ok(()) => {
                tracing::warn!(partition = %tp, leader = self.leader, from = end, to = start, "behind the leader's log start: started again there");
                true
            }
            Err(e) => {
                tracing::error!(partition = %tp, "starting again at the leader's log start: {e}");
                false
            }
        }
    }

    /// The leader's offset of `timestamp` (-2: its log start) for `tp`.
    fn leader_offset(
        &self,
        c: &mut BrokerChannel,
        tp: &TopicPartition,
        epoch: i32,
        timestamp: i64,
    ) -> Result<i64, String> {
        use kafka_protocol::messages::list_offsets_request::{
            ListOffsetsPartition, ListOffsetsTopic,
        };
        use kafka_protocol::messages::ListOffsetsRequest;
        let partition = ListOffsetsPartition::default()
            .with_partition_index(tp.partition)
            .with_current_leader_epoch(epoch)
            .with_timestamp(timestamp);
        let topic = ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
            .with_partitions(vec![partition]);
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(self.node_id))
            .with_topics(vec![topic]);
        let r = c.call(LIST_OFFSETS_VERSION, &request).map_err(|e| e.to_string())?;
        let p = r.topics.first().and_then(|t| t.partitions.first()).ok_or("an empty answer")?;
        if p.error_code != 0 {
            return Err(format!("error {}", p.error_code));
        }
        Ok(p.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_go_to_the_fetcher_kafka_gives_them() {
        // Kafka's (31 * topic.hashCode + partition) & 0x7fffffff % 3, from Java.
        let expected =
            [("test", [1, 2, 0, 1]), ("__consumer_offsets", [0, 1, 2, 0]), ("ünï", [1, 2, 0, 1])];
        for (topic, ids) in expected {
            for (p, id) in ids.iter().enumerate() {
                assert_eq!(
                    fetcher_id(&TopicPartition::new(topic, p as i32), 3),
                    *id,
                    "{topic}-{p}"
                );
            }
        }
        assert_eq!(fetcher_id(&TopicPartition::new("test", 7), 1), 0);
    }
}

//! Incremental fetch sessions (KIP-227): Kafka's `FetchSessionCache`,
//! `FetchSession` and `FetchContext`.
//!
//! A consumer that fetches many partitions sends them all once (a full fetch,
//! session id 0 and epoch 0); the broker keeps them in a session and answers
//! with its id. Later requests (incremental, epoch n+1 of that id) carry only
//! what changed: partitions added or updated (a new fetch offset or size) and
//! partitions to forget. The broker reads every partition of the session and
//! answers only those with records, a changed high watermark or log start
//! offset, or an error; a partition that has just joined the session has no
//! cached high watermark, so it is always answered once.
//!
//! Invariants:
//! - A session's `epoch` is the epoch its next request must carry; it is
//!   advanced when a request is accepted, so a duplicate or a request that
//!   crossed another one gets INVALID_FETCH_SESSION_EPOCH (checked again when
//!   the answer is built, as Kafka does, in case two requests overlapped).
//! - Sessions are the broker's, not a connection's: a client that reconnects
//!   keeps its session, and a session no request touches is evicted, never
//!   closed by a disconnect.
//! - At most `max.incremental.fetch.session.cache.slots` sessions (0: none,
//!   every fetch is sessionless). A full fetch that finds no free slot may
//!   take the one of a session idle for more than the eviction time, else of
//!   the least valuable evictable session (Kafka's order: unprivileged before
//!   privileged, then fewer partitions, then lower id) if the new one is
//!   worth at least as much; a session is evictable by a consumer only once
//!   older than the eviction time, and a replica's only by another replica
//!   until then. An evicted session's next request gets
//!   FETCH_SESSION_ID_NOT_FOUND and the client starts over with a full fetch.
//! - A session holds at most `max_partitions` partitions (what one request
//!   frame can carry): an incremental request that would grow it past that
//!   closes it and is answered without a session.
//! - Sessions keyed by topic id (Fetch v13+) and by name (before) are not
//!   mixed: a request of the other kind is FETCH_SESSION_TOPIC_ID_ERROR.
//! - Partitions are kept in the order they last returned records (oldest
//!   first), so under `max_bytes` every partition gets its turn.
//! - A session holds its own copies of what it keeps (topic names, unknown
//!   tagged fields): what a request decodes is a slice of its whole frame,
//!   which a session kept for minutes must not pin.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use uuid::Uuid;

use crate::metrics::FetchSessionMetrics;

/// The session id of "no session".
pub const INVALID_SESSION_ID: i32 = 0;
/// The epoch of a full fetch that asks for a session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a full fetch that closes its session and asks for none.
pub const FINAL_EPOCH: i32 = -1;
/// How long a session may stay unused before any new session may take its
/// slot, and how old it must be before a consumer's session may evict it
/// (Kafka's `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`).
pub const EVICTION_MS: i64 = 120_000;
/// Fewest bytes one partition takes in a Fetch request (index, leader epoch,
/// fetch offset, last fetched epoch, log start offset, max bytes): what
/// bounds the partitions one request frame can carry.
pub const MIN_PARTITION_BYTES: usize = 32;

/// The epoch after `epoch` (Kafka's `FetchMetadata.nextEpoch`): a negative
/// one stays final, and the epoch wraps to 1, never to the initial 0.
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// Why an incremental fetch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionError {
    /// No session has that id (never created, closed or evicted).
    IdNotFound,
    /// The request's epoch is not the one the session expects.
    InvalidEpoch,
    /// A session of topic ids used with names, or the other way round.
    TopicIdMismatch,
}

/// How one Fetch request is served (Kafka's `FetchContext` kinds).
#[derive(Debug)]
pub enum FetchContext {
    /// The request's own partitions, answered without a session (id 0).
    Sessionless,
    /// The request's own partitions; the answer may open a session.
    Full { privileged: bool, uses_topic_ids: bool },
    /// The partitions of session `session_id`, to read instead of the
    /// request's; `epoch` is the session's epoch once this request is served.
    Incremental { session_id: i32, epoch: i32, topics: Vec<FetchTopic> },
    /// Refused: answered with the error and no partitions.
    Error(SessionError),
}

/// A partition of a session: by topic id (v13+, the name left empty) or by
/// name (before, the id nil), as the requests name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PartitionKey {
    topic_id: Uuid,
    topic: TopicName,
    partition: i32,
}

impl PartitionKey {
    /// The key with its own copy of the topic name (a decoded name is a
    /// slice of the request's frame).
    fn owned(self) -> Self {
        Self { topic: TopicName(StrBytes::from_string(self.topic.0.to_string())), ..self }
    }
}

/// A request partition with its own copy of its unknown tagged fields (the
/// rest are numbers and ids).
fn owned_partition(mut p: FetchPartition) -> FetchPartition {
    for data in p.unknown_tagged_fields.values_mut() {
        *data = bytes::Bytes::copy_from_slice(data);
    }
    p
}

/// What the session remembers of a partition: the request's parameters and
/// what was last answered.
#[derive(Debug, Clone)]
struct CachedPartition {
    request: FetchPartition,
    /// -1 until answered, and after an error, so it is answered again.
    high_watermark: i64,
    log_start_offset: i64,
    /// Position in `FetchSession::order`.
    seq: u64,
}

#[derive(Debug)]
struct FetchSession {
    id: i32,
    privileged: bool,
    uses_topic_ids: bool,
    creation_ms: i64,
    last_used_ms: i64,
    /// The epoch the next request must carry.
    epoch: i32,
    partitions: HashMap<PartitionKey, CachedPartition>,
    order: BTreeMap<u64, PartitionKey>,
    next_seq: u64,
    /// The size the eviction sets and the partition count last saw.
    cached_size: Option<usize>,
}

impl FetchSession {
    fn evictable_key(&self, size: usize) -> EvictableKey {
        (self.privileged, size, self.id)
    }

    fn upsert(&mut self, key: PartitionKey, request: FetchPartition) {
        let request = owned_partition(request);
        match self.partitions.get_mut(&key) {
            Some(cached) => cached.request = request,
            None => {
                let key = key.owned();
                let seq = self.next_seq;
                self.next_seq += 1;
                self.order.insert(seq, key.clone());
                let cached =
                    CachedPartition { request, high_watermark: -1, log_start_offset: -1, seq };
                self.partitions.insert(key, cached);
            }
        }
    }

    fn forget(&mut self, key: &PartitionKey) {
        if let Some(cached) = self.partitions.remove(key) {
            self.order.remove(&cached.seq);
        }
    }

    /// Move a partition that returned records behind the others.
    fn rotate(&mut self, key: &PartitionKey) {
        if let Some(cached) = self.partitions.get_mut(key) {
            self.order.remove(&cached.seq);
            cached.seq = self.next_seq;
            self.next_seq += 1;
            self.order.insert(cached.seq, key.clone());
        }
    }

    /// The session's partitions as request topics, in session order
    /// (consecutive partitions of one topic share an entry).
    fn topics(&self) -> Vec<FetchTopic> {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for key in self.order.values() {
            let request = self.partitions[key].request.clone();
            match topics.last_mut() {
                Some(t) if t.topic_id == key.topic_id && t.topic == key.topic => {
                    t.partitions.push(request)
                }
                _ => topics.push(
                    FetchTopic::default()
                        .with_topic(key.topic.clone())
                        .with_topic_id(key.topic_id)
                        .with_partitions(vec![request]),
                ),
            }
        }
        topics
    }
}

/// Kafka's `EvictableKey` order: (privileged, size, id).
type EvictableKey = (bool, usize, i32);

#[derive(Debug, Default)]
struct CacheState {
    sessions: HashMap<i32, FetchSession>,
    /// (last used, id), oldest first.
    last_used: BTreeSet<(i64, i32)>,
    /// Sessions any new session may evict (older than the eviction time).
    evictable_by_all: BTreeSet<EvictableKey>,
    /// Sessions a replica's new session may evict (also young consumer ones).
    evictable_by_privileged: BTreeSet<EvictableKey>,
    num_partitions: usize,
}

/// The broker's fetch sessions, shared by every connection.
#[derive(Debug)]
pub struct FetchSessionCache {
    state: Mutex<CacheState>,
    max_entries: usize,
    eviction_ms: i64,
    max_partitions: usize,
    metrics: FetchSessionMetrics,
}

impl FetchSessionCache {
    /// A cache of at most `max_entries` sessions of at most `max_partitions`
    /// partitions each.
    pub fn new(
        max_entries: usize,
        eviction_ms: i64,
        max_partitions: usize,
        metrics: FetchSessionMetrics,
    ) -> Self {
        Self {
            state: Mutex::new(CacheState::default()),
            max_entries,
            eviction_ms,
            max_partitions: max_partitions.max(1),
            metrics,
        }
    }

    /// Sessions in the cache.
    pub fn len(&self) -> usize {
        self.state.lock().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decide how `request` (Fetch `version`, v7+) is served, updating its
    /// session for an incremental fetch (Kafka's `FetchManager.newContext`).
    pub fn new_context(
        &self,
        now_ms: i64,
        version: i16,
        request: &FetchRequest,
        privileged: bool,
    ) -> FetchContext {
        let (id, epoch) = (request.session_id, request.session_epoch);
        let uses_topic_ids = version >= 13;
        let mut state = self.state.lock();
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            // Any session a full fetch names is closed.
            if id != INVALID_SESSION_ID {
                state.remove(id);
                self.publish(&state);
            }
            return if epoch == FINAL_EPOCH {
                FetchContext::Sessionless
            } else {
                FetchContext::Full { privileged, uses_topic_ids }
            };
        }
        let Some(session) = state.sessions.get_mut(&id) else {
            return FetchContext::Error(SessionError::IdNotFound);
        };
        if session.epoch != epoch {
            return FetchContext::Error(SessionError::InvalidEpoch);
        }
        if session.uses_topic_ids != uses_topic_ids {
            return FetchContext::Error(SessionError::TopicIdMismatch);
        }
        for topic in &request.topics {
            for p in &topic.partitions {
                let key = PartitionKey {
                    topic_id: topic.topic_id,
                    topic: topic.topic.clone(),
                    partition: p.partition,
                };
                session.upsert(key, p.clone());
            }
        }
        for topic in &request.forgotten_topics_data {
            for &partition in &topic.partitions {
                let key = PartitionKey {
                    topic_id: topic.topic_id,
                    topic: topic.topic.clone(),
                    partition,
                };
                session.forget(&key);
            }
        }
        if session.partitions.is_empty() || session.partitions.len() > self.max_partitions {
            if !session.partitions.is_empty() {
                tracing::debug!(session = id, "fetch session closed: over its partition limit");
            }
            state.remove(id);
            self.publish(&state);
            return FetchContext::Sessionless;
        }
        session.epoch = next_epoch(session.epoch);
        let (epoch, topics) = (session.epoch, session.topics());
        state.touch(id, now_ms, self.eviction_ms);
        self.publish(&state);
        self.metrics.incremental_fetch();
        FetchContext::Incremental { session_id: id, epoch, topics }
    }

    /// After a full fetch of `topics` answered by `response` (same order),
    /// open a session of them if a slot is free or can be freed (Kafka's
    /// `maybeCreateSession`); the session's id, or 0 when none was opened.
    pub fn maybe_create_session(
        &self,
        now_ms: i64,
        privileged: bool,
        uses_topic_ids: bool,
        topics: &[FetchTopic],
        response: &FetchResponse,
    ) -> i32 {
        let size: usize = topics.iter().map(|t| t.partitions.len()).sum();
        if size > self.max_partitions {
            return INVALID_SESSION_ID;
        }
        let mut state = self.state.lock();
        let room = state.sessions.len() < self.max_entries
            || (self.max_entries > 0 && self.try_evict(&mut state, privileged, size, now_ms));
        if !room {
            return INVALID_SESSION_ID;
        }
        let id = state.new_session_id();
        let mut session = FetchSession {
            id,
            privileged,
            uses_topic_ids,
            creation_ms: now_ms,
            last_used_ms: now_ms,
            epoch: next_epoch(INITIAL_EPOCH),
            partitions: HashMap::with_capacity(size),
            order: BTreeMap::new(),
            next_seq: 0,
            cached_size: None,
        };
        for (topic, answered) in topics.iter().zip(&response.responses) {
            for (p, data) in topic.partitions.iter().zip(&answered.partitions) {
                let key = PartitionKey {
                    topic_id: topic.topic_id,
                    topic: topic.topic.clone(),
                    partition: p.partition,
                };
                session.upsert(key.clone(), p.clone());
                if let Some(cached) = session.partitions.get_mut(&key) {
                    if data.error_code == 0 {
                        cached.high_watermark = data.high_watermark;
                    }
                    cached.log_start_offset = data.log_start_offset;
                }
            }
        }
        state.sessions.insert(id, session);
        state.touch(id, now_ms, self.eviction_ms);
        self.publish(&state);
        id
    }

    /// Keep in `response` (read from the topics of an incremental context)
    /// only what the client must hear, remembering what it was told, and
    /// rotate the partitions that returned records (Kafka's
    /// `IncrementalFetchContext.updateAndGenerateResponseData`).
    ///
    /// # Errors
    /// INVALID_FETCH_SESSION_EPOCH when another request of the session was
    /// accepted since; FETCH_SESSION_ID_NOT_FOUND when the session is gone
    /// (evicted while this request waited).
    pub fn filter_incremental(
        &self,
        session_id: i32,
        epoch: i32,
        response: &mut FetchResponse,
    ) -> Result<(), SessionError> {
        let mut state = self.state.lock();
        let session = state.sessions.get_mut(&session_id).ok_or(SessionError::IdNotFound)?;
        if session.epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        for topic in &mut response.responses {
            let (topic_id, name) = (topic.topic_id, topic.topic.clone());
            topic.partitions.retain(|data| {
                let key =
                    PartitionKey { topic_id, topic: name.clone(), partition: data.partition_index };
                let Some(cached) = session.partitions.get_mut(&key) else { return true };
                let has_records = data.records.as_ref().is_some_and(|r| !r.is_empty());
                let mut respond = has_records;
                if cached.high_watermark != data.high_watermark {
                    respond = true;
                    cached.high_watermark = data.high_watermark;
                }
                if cached.log_start_offset != data.log_start_offset {
                    respond = true;
                    cached.log_start_offset = data.log_start_offset;
                }
                if data.error_code != 0 {
                    cached.high_watermark = -1;
                    respond = true;
                }
                // A consumer sent to another replica (KIP-392) must hear it.
                if data.preferred_read_replica.0 >= 0 {
                    respond = true;
                }
                if has_records {
                    session.rotate(&key);
                }
                respond
            });
        }
        response.responses.retain(|t| !t.partitions.is_empty());
        response.session_id = session_id;
        Ok(())
    }

    /// Make room for a session of `size` partitions (Kafka's `tryEvict`):
    /// whether a session was evicted.
    fn try_evict(
        &self,
        state: &mut CacheState,
        privileged: bool,
        size: usize,
        now_ms: i64,
    ) -> bool {
        let Some(&(last_used, oldest)) = state.last_used.first() else {
            return false;
        };
        let victim = if now_ms - last_used > self.eviction_ms {
            oldest
        } else {
            let evictable =
                if privileged { &state.evictable_by_privileged } else { &state.evictable_by_all };
            match evictable.first() {
                Some(&key) if (privileged, size, 0) >= key => key.2,
                _ => return false,
            }
        };
        tracing::debug!(session = victim, "fetch session evicted");
        state.remove(victim);
        self.metrics.evicted();
        true
    }

    fn publish(&self, state: &CacheState) {
        self.metrics.set_size(state.sessions.len(), state.num_partitions);
    }
}

impl CacheState {
    fn new_session_id(&self) -> i32 {
        loop {
            let bytes = *Uuid::new_v4().as_bytes();
            let id = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) & i32::MAX;
            if id != INVALID_SESSION_ID && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    fn remove(&mut self, id: i32) -> Option<FetchSession> {
        let session = self.sessions.remove(&id)?;
        self.last_used.remove(&(session.last_used_ms, id));
        if let Some(size) = session.cached_size {
            let key = session.evictable_key(size);
            self.evictable_by_all.remove(&key);
            self.evictable_by_privileged.remove(&key);
            self.num_partitions -= size;
        }
        Some(session)
    }

    /// Record a use of session `id` at `now_ms` and its current size (Kafka's `touch`).
    fn touch(&mut self, id: i32, now_ms: i64, eviction_ms: i64) {
        let Some(session) = self.sessions.get_mut(&id) else { return };
        self.last_used.remove(&(session.last_used_ms, id));
        session.last_used_ms = now_ms;
        self.last_used.insert((now_ms, id));
        if let Some(old) = session.cached_size {
            let key = session.evictable_key(old);
            self.evictable_by_all.remove(&key);
            self.evictable_by_privileged.remove(&key);
            self.num_partitions -= old;
        }
        let size = session.partitions.len();
        session.cached_size = Some(size);
        let key = session.evictable_key(size);
        let old_enough = now_ms - session.creation_ms > eviction_ms;
        if !session.privileged || old_enough {
            self.evictable_by_privileged.insert(key);
        }
        if old_enough {
            self.evictable_by_all.insert(key);
        }
        self.num_partitions += size;
    }
}

#[cfg(test)]
#[path = "fetch_session_tests.rs"]
mod tests;

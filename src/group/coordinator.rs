//! `GroupCoordinator`: group state, the join/sync protocol and offsets. The
//! module doc of `group` states the state machine and its invariants.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::schema::{GroupValue, MemberValue, OffsetValue, RecordKey};
use crate::clock::SharedClock;
use crate::log::compression::Compression;
use crate::log::record_batch::{BatchBuilder, BatchHeader, RecordIter};
use crate::log::{LogError, LogManager, TopicPartition};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Errors a group request can get; `api/` maps them to Kafka's codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("the coordinator is loading")]
    CoordinatorLoadInProgress,
    #[error("the coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("invalid group id")]
    InvalidGroupId,
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("a member id is required")]
    MemberIdRequired,
    #[error("illegal generation")]
    IllegalGeneration,
    #[error("a rebalance is in progress")]
    RebalanceInProgress,
    #[error("inconsistent group protocol")]
    InconsistentGroupProtocol,
    #[error("session timeout outside the broker's range")]
    InvalidSessionTimeout,
    #[error("the group is full")]
    GroupMaxSizeReached,
    #[error("the static member was replaced by a newer instance")]
    FencedInstanceId,
    #[error("the group is not empty")]
    NonEmptyGroup,
    #[error("the group does not exist")]
    GroupIdNotFound,
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    #[error("offset metadata too large")]
    OffsetMetadataTooLarge,
    #[error("storage error writing the offsets topic")]
    Storage,
}

/// Broker keys of the coordinator, with Kafka's defaults.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub offsets_topic_partitions: i32,
    pub offsets_topic_segment_bytes: i64,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: i64,
    pub initial_rebalance_delay_ms: i64,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_size: usize,
    pub offset_metadata_max_bytes: usize,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            offsets_topic_partitions: 50,
            offsets_topic_segment_bytes: 104_857_600,
            offsets_retention_ms: 7 * 24 * 3_600_000,
            offsets_retention_check_interval_ms: 600_000,
            initial_rebalance_delay_ms: 3000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            max_size: i32::MAX as usize,
            offset_metadata_max_bytes: 4096,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name DescribeGroups and ListGroups report.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// What a JoinGroup gets back.
#[derive(Debug, Clone)]
pub struct JoinResult {
    pub error: Option<GroupError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// (member id, group instance id, metadata): for the leader only.
    pub members: Vec<(String, Option<String>, Bytes)>,
    pub skip_assignment: bool,
}

impl JoinResult {
    fn error(e: GroupError, member_id: String) -> Self {
        Self {
            error: Some(e),
            generation: -1,
            protocol_type: None,
            protocol: None,
            leader: String::new(),
            member_id,
            members: vec![],
            skip_assignment: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct SyncResult {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    fn error(e: GroupError) -> Self {
        Self { error: Some(e), protocol_type: None, protocol: None, assignment: Bytes::new() }
    }
}

/// A JoinGroup or SyncGroup answered now or after the round completes.
pub enum Reply<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

/// Arguments of a JoinGroup.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a new dynamic member first gets MEMBER_ID_REQUIRED with its id.
    pub require_known_member_id: bool,
    /// v9+: a static leader rejoining a stable group may skip the assignment.
    pub supports_skip_assignment: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

#[derive(Debug)]
struct Member {
    id: String,
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocol_type: String,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    last_heartbeat_ms: i64,
    join_waiter: Option<oneshot::Sender<JoinResult>>,
    sync_waiter: Option<oneshot::Sender<SyncResult>>,
    /// Rejoined in the current PreparingRebalance round.
    joined: bool,
}

impl Member {
    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn alive_at(&self, now: i64) -> bool {
        self.join_waiter.is_some()
            || self.sync_waiter.is_some()
            || now < self.last_heartbeat_ms + self.session_timeout_ms as i64
    }
}

#[derive(Debug)]
struct Group {
    id: String,
    state: GroupState,
    state_timestamp: i64,
    protocol_type: Option<String>,
    protocol: Option<String>,
    generation: i32,
    leader: Option<String>,
    /// Kept in join order: the first member leads when the leader left.
    members: Vec<Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED and not yet used.
    pending: Vec<String>,
    offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// PreparingRebalance ends by then at the latest.
    rebalance_deadline: i64,
    /// A round started from Empty waits until then (extended by each join).
    initial_delay_until: i64,
}

impl Group {
    fn new(id: &str, now: i64) -> Self {
        Self {
            id: id.to_string(),
            state: GroupState::Empty,
            state_timestamp: now,
            protocol_type: None,
            protocol: None,
            generation: 0,
            leader: None,
            members: Vec::new(),
            pending: Vec::new(),
            offsets: BTreeMap::new(),
            rebalance_deadline: 0,
            initial_delay_until: 0,
        }
    }

    fn member(&self, id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    fn member_mut(&mut self, id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.id == id)
    }

    fn transition(&mut self, to: GroupState, now: i64) {
        use GroupState::*;
        let allowed = match to {
            Empty => matches!(self.state, PreparingRebalance | Empty),
            PreparingRebalance => {
                matches!(self.state, Empty | Stable | CompletingRebalance | PreparingRebalance)
            }
            CompletingRebalance => self.state == PreparingRebalance,
            Stable => matches!(self.state, CompletingRebalance | Stable),
            Dead => true,
        };
        // NOTE: a bug here would corrupt membership silently; make it loud.
        debug_assert!(allowed, "illegal group transition {:?} -> {to:?}", self.state);
        if !allowed {
            tracing::error!(group = %self.id, from = ?self.state, ?to, "illegal group state transition");
        }
        self.state = to;
        self.state_timestamp = now;
    }

    /// The protocols every member supports, in the order of the first member.
    fn candidate_protocols(&self) -> Vec<String> {
        let Some(first) = self.members.first() else { return vec![] };
        first
            .protocols
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| self.members.iter().all(|m| m.protocols.iter().any(|(p, _)| p == n)))
            .collect()
    }

    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: Vec<(usize, &String)> = candidates.iter().map(|c| (0, c)).collect();
        for m in &self.members {
            // Each member votes for its most preferred candidate.
            if let Some((p, _)) = m.protocols.iter().find(|(p, _)| candidates.contains(p)) {
                if let Some(v) = votes.iter_mut().find(|(_, c)| *c == p) {
                    v.0 += 1;
                }
            }
        }
        let best = votes.iter().map(|(n, _)| *n).max()?;
        votes.into_iter().find(|(n, _)| *n == best).map(|(_, c)| c.clone())
    }

    fn to_value(&self) -> GroupValue {
        let protocol = self.protocol.clone();
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_timestamp,
            members: self
                .members
                .iter()
                .map(|m| MemberValue {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: protocol
                        .as_deref()
                        .map(|p| m.metadata_for(p))
                        .unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Topics the members' consumer subscriptions name (the classic consumer
    /// protocol: version i16, [topic string], ...).
    fn subscribed_topics(&self) -> Vec<String> {
        let Some(protocol) = &self.protocol else { return vec![] };
        if self.protocol_type.as_deref() != Some("consumer") {
            return vec![];
        }
        let mut topics = Vec::new();
        for m in &self.members {
            let meta = m.metadata_for(protocol);
            let mut b: &[u8] = &meta;
            if b.len() < 6 {
                continue;
            }
            b = &b[2..];
            let n = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            b = &b[4..];
            for _ in 0..n.max(0) {
                if b.len() < 2 {
                    break;
                }
                let len = i16::from_be_bytes([b[0], b[1]]).max(0) as usize;
                if b.len() < 2 + len {
                    break;
                }
                topics.push(String::from_utf8_lossy(&b[2..2 + len]).into_owned());
                b = &b[2 + len..];
            }
        }
        topics
    }
}

/// One group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    /// (member id, instance id, client id, client host, metadata, assignment)
    pub members: Vec<(String, Option<String>, String, String, Bytes, Bytes)>,
}

#[derive(Debug)]
pub struct GroupCoordinator {
    config: GroupConfig,
    logs: Arc<LogManager>,
    clock: SharedClock,
    groups: Mutex<HashMap<String, Group>>,
    loaded: AtomicBool,
    next_member: AtomicU64,
    last_expiry_check: Mutex<i64>,
}

/// Java's `String.hashCode`, which decides a group's offsets partition.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig, logs: Arc<LogManager>, clock: SharedClock) -> Self {
        Self {
            config,
            logs,
            clock,
            groups: Mutex::new(HashMap::new()),
            loaded: AtomicBool::new(false),
            next_member: AtomicU64::new(1),
            last_expiry_check: Mutex::new(0),
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Group>> {
        // A panic while holding the lock leaves plain data; keep serving.
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The `__consumer_offsets` partition of a group (Kafka's rule).
    pub fn partition_for(&self, group: &str) -> i32 {
        let h = java_string_hash(group);
        let abs = if h == i32::MIN { 0 } else { h.abs() };
        abs % self.config.offsets_topic_partitions
    }

    fn check_ready(&self) -> Result<(), GroupError> {
        if self.loaded.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(GroupError::CoordinatorLoadInProgress)
        }
    }

    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Create the offsets topic if it does not exist yet (as Kafka does on the
    /// first FindCoordinator).
    ///
    /// # Errors
    /// The topic could not be created.
    pub fn ensure_offsets_topic(&self) -> Result<(), LogError> {
        if self.logs.topic(OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        let overrides = [
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("segment.bytes".to_string(), self.config.offsets_topic_segment_bytes.to_string()),
            ("compression.type".to_string(), "producer".to_string()),
        ]
        .into();
        match self.logs.create_topic(OFFSETS_TOPIC, self.config.offsets_topic_partitions, overrides)
        {
            Ok(_) => {
                tracing::info!(
                    partitions = self.config.offsets_topic_partitions,
                    "created {OFFSETS_TOPIC}"
                );
                Ok(())
            }
            Err(LogError::TopicExists(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Rebuild every group from the offsets topic. Group requests are refused
    /// with COORDINATOR_LOAD_IN_PROGRESS until this returns.
    pub fn load(&self) {
        let started = std::time::Instant::now();
        let mut groups: HashMap<String, Group> = HashMap::new();
        let mut records = 0u64;
        let now = self.now();
        if let Some(info) = self.logs.topic(OFFSETS_TOPIC) {
            for p in 0..info.partitions {
                let Some(log) = self.logs.get_log(&TopicPartition::new(OFFSETS_TOPIC, p)) else {
                    continue;
                };
                let log = log.read().unwrap_or_else(|e| e.into_inner());
                let mut offset = log.log_start_offset();
                let mut scratch = Vec::new();
                while offset < log.log_end_offset() {
                    let data = match log.read(offset, 1 << 20, true) {
                        Ok(d) => d,
                        Err(e) => {
                            tracing::error!(
                                partition = p,
                                offset,
                                "cannot read {OFFSETS_TOPIC}: {e}"
                            );
                            break;
                        }
                    };
                    if data.records.is_empty() {
                        break;
                    }
                    let mut pos = 0;
                    while pos < data.records.len() {
                        let Ok(h) = BatchHeader::parse(&data.records[pos..]) else { break };
                        let end = pos + h.size_in_bytes();
                        if end > data.records.len() {
                            break;
                        }
                        let batch = &data.records[pos..end];
                        offset = offset.max(h.base_offset + h.last_offset_delta as i64 + 1);
                        pos = end;
                        if h.is_control() {
                            continue;
                        }
                        let Ok(payload) = crate::log::record_batch::records_bytes(
                            &h,
                            batch,
                            &mut scratch,
                            64 << 20,
                        ) else {
                            continue;
                        };
                        for r in RecordIter::new(payload, h.records_count).map_while(Result::ok) {
                            records += 1;
                            let Some(key) = r.key else { continue };
                            apply_record(&mut groups, key, r.value, now);
                        }
                    }
                }
            }
        }
        *self.lock() = groups;
        self.loaded.store(true, Ordering::Release);
        tracing::info!(
            records,
            groups = self.lock().len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "group coordinator loaded"
        );
    }

    /// Append records for `group` to its offsets partition.
    fn append(
        &self,
        group: &str,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> Result<(), GroupError> {
        if records.is_empty() {
            return Ok(());
        }
        self.ensure_offsets_topic().map_err(|e| {
            tracing::error!("creating {OFFSETS_TOPIC}: {e}");
            GroupError::Storage
        })?;
        let tp = TopicPartition::new(OFFSETS_TOPIC, self.partition_for(group));
        let log = self.logs.get_log(&tp).ok_or(GroupError::CoordinatorNotAvailable)?;
        let now = self.now();
        let mut builder = BatchBuilder::new(Compression::None, now);
        for (k, v) in records {
            builder.append(now, Some(k), v.as_deref());
        }
        let mut batch = builder.build();
        let mut log = log.write().map_err(|_| GroupError::Storage)?;
        log.append_as_leader(&mut batch).map_err(|e| {
            tracing::error!(partition = %tp, "writing group records: {e}");
            GroupError::Storage
        })?;
        Ok(())
    }

    fn persist_group(&self, g: &Group) -> Result<(), GroupError> {
        let key = RecordKey::Group { group: g.id.clone() }.encode();
        self.append(&g.id, &[(key, Some(g.to_value().encode()))])
    }

    fn new_member_id(&self, client_id: &str) -> String {
        let n = self.next_member.fetch_add(1, Ordering::Relaxed);
        let id = crate::log::manager::topic_id_to_string(&crate::log::manager::random_topic_id());
        format!("{client_id}-{n}-{id}")
    }

    // ---------------------------------------------------------------- join

    /// JoinGroup.
    pub fn join(&self, req: JoinRequest) -> Reply<JoinResult> {
        let fail = |e: GroupError| Reply::Now(JoinResult::error(e, req.member_id.clone()));
        if let Err(e) = self.check_ready() {
            return fail(e);
        }
        if req.group_id.is_empty() {
            return fail(GroupError::InvalidGroupId);
        }
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return fail(GroupError::InvalidSessionTimeout);
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return fail(GroupError::InconsistentGroupProtocol);
        }
        let now = self.now();
        let mut groups = self.lock();
        if !req.member_id.is_empty() && !groups.contains_key(&req.group_id) {
            return fail(GroupError::UnknownMemberId);
        }
        let group =
            groups.entry(req.group_id.clone()).or_insert_with(|| Group::new(&req.group_id, now));
        if group.state == GroupState::Dead {
            return fail(GroupError::CoordinatorNotAvailable);
        }
        // The member's protocols must fit the group's.
        if !group.members.is_empty() {
            if group.protocol_type.as_deref().is_some_and(|t| t != req.protocol_type) {
                return fail(GroupError::InconsistentGroupProtocol);
            }
            let candidates = group.candidate_protocols();
            if !req.protocols.iter().any(|(p, _)| candidates.contains(p)) {
                return fail(GroupError::InconsistentGroupProtocol);
            }
        }

        // `group.max.size`: a join that would add a member to a full group is refused.
        let adds_member = if req.member_id.is_empty() {
            req.group_instance_id.as_ref().is_none_or(|i| {
                !group.members.iter().any(|m| m.instance_id.as_deref() == Some(i.as_str()))
            })
        } else {
            group.pending.contains(&req.member_id)
        };
        if adds_member && group.members.len() >= self.config.max_size {
            return fail(GroupError::GroupMaxSizeReached);
        }

        let mut member_id = req.member_id.clone();
        // A member this request adds (or a static member replaced outside a
        // stable group with unchanged protocols) was in no join round: it
        // always needs a new one, never the current generation's answer.
        let mut needs_round = false;
        if member_id.is_empty() {
            if let Some(instance) = &req.group_instance_id {
                // A static member restarting: it takes over its old identity.
                let new_id = self.new_member_id(instance);
                if let Some(old) =
                    group.members.iter_mut().find(|m| m.instance_id.as_deref() == Some(instance))
                {
                    let old_id = std::mem::replace(&mut old.id, new_id.clone());
                    if let Some(w) = old.join_waiter.take() {
                        let _ =
                            w.send(JoinResult::error(GroupError::FencedInstanceId, old_id.clone()));
                    }
                    if let Some(w) = old.sync_waiter.take() {
                        let _ = w.send(SyncResult::error(GroupError::FencedInstanceId));
                    }
                    let same = old.protocols == req.protocols;
                    old.protocols = req.protocols.clone();
                    old.session_timeout_ms = req.session_timeout_ms;
                    old.rebalance_timeout_ms = req.rebalance_timeout_ms;
                    old.last_heartbeat_ms = now;
                    if group.leader.as_deref() == Some(old_id.as_str()) {
                        group.leader = Some(new_id.clone());
                    }
                    tracing::info!(group = %group.id, instance = %instance, old = %old_id, new = %new_id, "static member rejoined");
                    if group.state == GroupState::Stable && same {
                        let is_leader = group.leader.as_deref() == Some(new_id.as_str());
                        let result = JoinResult {
                            error: None,
                            generation: group.generation,
                            protocol_type: group.protocol_type.clone(),
                            protocol: group.protocol.clone(),
                            leader: group.leader.clone().unwrap_or_default(),
                            member_id: new_id,
                            members: if is_leader && req.supports_skip_assignment {
                                leader_members(group)
                            } else {
                                vec![]
                            },
                            skip_assignment: is_leader && req.supports_skip_assignment,
                        };
                        let _ = self.persist_group(group);
                        return Reply::Now(result);
                    }
                    member_id = new_id;
                    needs_round = true;
                    // Fall through: join the (new) round as this member.
                } else {
                    member_id = new_id;
                    self.add_member(group, &member_id, &req, now);
                    needs_round = true;
                }
            } else if req.require_known_member_id {
                let id = self.new_member_id(&req.client_id);
                group.pending.push(id.clone());
                return Reply::Now(JoinResult::error(GroupError::MemberIdRequired, id));
            } else {
                member_id = self.new_member_id(&req.client_id);
                self.add_member(group, &member_id, &req, now);
                needs_round = true;
            }
        } else if let Some(i) = group.pending.iter().position(|p| *p == member_id) {
            group.pending.swap_remove(i);
            self.add_member(group, &member_id, &req, now);
            needs_round = true;
        } else if group.member(&member_id).is_none() {
            if let Some(instance) = &req.group_instance_id {
                if group.members.iter().any(|m| m.instance_id.as_deref() == Some(instance)) {
                    return fail(GroupError::FencedInstanceId);
                }
            }
            return fail(GroupError::UnknownMemberId);
        }

        // An existing (or just added) member joins the round.
        let (changed, is_leader) = {
            let leader = group.leader.clone();
            let m = group.member_mut(&member_id).expect("member present");
            let changed = m.protocols != req.protocols;
            m.protocols = req.protocols.clone();
            m.protocol_type = req.protocol_type.clone();
            m.session_timeout_ms = req.session_timeout_ms;
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
            m.last_heartbeat_ms = now;
            (changed, leader.as_deref() == Some(member_id.as_str()))
        };
        match group.state {
            GroupState::Stable
                if !needs_round
                    && !changed
                    && !is_leader
                    && !group
                        .members
                        .iter()
                        .any(|m| m.id == member_id && m.assignment.is_empty()) =>
            {
                // Nothing changed: answer with the current generation.
                return Reply::Now(current_join(group, &member_id, false));
            }
            GroupState::CompletingRebalance if !needs_round && !changed => {
                // A retried join for the round that just completed (a member
                // added now was not in it and starts a new round below).
                return Reply::Now(current_join(group, &member_id, is_leader));
            }
            GroupState::Empty | GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(group, now)
            }
            GroupState::PreparingRebalance => {
                if group.initial_delay_until > 0 {
                    // Each join during the initial delay extends it (up to the deadline).
                    group.initial_delay_until = (now + self.config.initial_rebalance_delay_ms)
                        .min(group.rebalance_deadline);
                }
            }
            GroupState::Dead => return fail(GroupError::CoordinatorNotAvailable),
        }
        let (tx, rx) = oneshot::channel();
        if let Some(m) = group.member_mut(&member_id) {
            if let Some(old) = m.join_waiter.replace(tx) {
                // A duplicate join from the same member: the older request loses.
                let _ =
                    old.send(JoinResult::error(GroupError::RebalanceInProgress, member_id.clone()));
            }
            m.joined = true;
        }
        self.maybe_complete_join(group, now);
        Reply::Wait(rx)
    }

    fn add_member(&self, group: &mut Group, id: &str, req: &JoinRequest, now: i64) {
        if group.members.is_empty() {
            group.protocol_type = Some(req.protocol_type.clone());
        }
        group.members.push(Member {
            id: id.to_string(),
            instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocol_type: req.protocol_type.clone(),
            protocols: req.protocols.clone(),
            assignment: Bytes::new(),
            last_heartbeat_ms: now,
            join_waiter: None,
            sync_waiter: None,
            joined: false,
        });
        tracing::debug!(group = %group.id, member = %id, "member added");
    }

    fn prepare_rebalance(&self, group: &mut Group, now: i64) {
        let from_empty = group.state == GroupState::Empty;
        // Members waiting for a sync of the old round must rejoin.
        for m in &mut group.members {
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncResult::error(GroupError::RebalanceInProgress));
            }
            m.joined = false;
        }
        let timeout =
            group.members.iter().map(|m| m.rebalance_timeout_ms as i64).max().unwrap_or(0);
        group.rebalance_deadline = now + timeout;
        group.initial_delay_until = if from_empty && self.config.initial_rebalance_delay_ms > 0 {
            (now + self.config.initial_rebalance_delay_ms).min(group.rebalance_deadline)
        } else {
            0
        };
        group.transition(GroupState::PreparingRebalance, now);
        tracing::info!(group = %group.id, generation = group.generation, members = group.members.len(), "preparing to rebalance");
    }

    /// Complete the join round if every member rejoined (and any initial delay
    /// passed) or the rebalance deadline passed.
    fn maybe_complete_join(&self, group: &mut Group, now: i64) {
        if group.state != GroupState::PreparingRebalance {
            return;
        }
        let all_joined = group.members.iter().all(|m| m.joined);
        let delay_over = now >= group.initial_delay_until;
        if !(all_joined && delay_over) && now < group.rebalance_deadline {
            return;
        }
        // Members that did not rejoin in time leave the group.
        let before = group.members.len();
        group.members.retain(|m| m.joined);
        if group.members.len() < before {
            tracing::info!(group = %group.id, removed = before - group.members.len(), "members did not rejoin in time");
        }
        group.generation += 1;
        group.initial_delay_until = 0;
        if group.members.is_empty() {
            group.protocol = None;
            group.leader = None;
            group.protocol_type = None;
            group.transition(GroupState::Empty, now);
            let _ = self.persist_group(group);
            tracing::info!(group = %group.id, generation = group.generation, "group is empty");
            return;
        }
        group.protocol = group.select_protocol();
        if group.leader.as_ref().is_none_or(|l| group.member(l).is_none()) {
            group.leader = group.members.first().map(|m| m.id.clone());
        }
        group.transition(GroupState::CompletingRebalance, now);
        tracing::info!(group = %group.id, generation = group.generation, members = group.members.len(), protocol = ?group.protocol, "rebalance: join round complete");
        let leader = group.leader.clone().unwrap_or_default();
        let all = leader_members(group);
        for m in &mut group.members {
            m.joined = false;
            m.last_heartbeat_ms = now;
            m.assignment = Bytes::new();
            if let Some(w) = m.join_waiter.take() {
                let is_leader = m.id == leader;
                let _ = w.send(JoinResult {
                    error: None,
                    generation: group.generation,
                    protocol_type: group.protocol_type.clone(),
                    protocol: group.protocol.clone(),
                    leader: leader.clone(),
                    member_id: m.id.clone(),
                    members: if is_leader { all.clone() } else { vec![] },
                    skip_assignment: false,
                });
            }
        }
    }

    // ---------------------------------------------------------------- sync

    /// SyncGroup. `assignments` are the leader's (empty from followers).
    pub fn sync(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        protocol_type: Option<&str>,
        protocol: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> Reply<SyncResult> {
        if let Err(e) = self.check_ready() {
            return Reply::Now(SyncResult::error(e));
        }
        let now = self.now();
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(group_id) else {
            return Reply::Now(SyncResult::error(GroupError::UnknownMemberId));
        };
        if group.member(member_id).is_none() {
            return Reply::Now(SyncResult::error(GroupError::UnknownMemberId));
        }
        if generation != group.generation {
            return Reply::Now(SyncResult::error(GroupError::IllegalGeneration));
        }
        if protocol_type.is_some_and(|t| Some(t) != group.protocol_type.as_deref())
            || protocol.is_some_and(|p| Some(p) != group.protocol.as_deref())
        {
            return Reply::Now(SyncResult::error(GroupError::InconsistentGroupProtocol));
        }
        let ok = |g: &Group, assignment: Bytes| SyncResult {
            error: None,
            protocol_type: g.protocol_type.clone(),
            protocol: g.protocol.clone(),
            assignment,
        };
        match group.state {
            GroupState::Empty | GroupState::Dead => {
                Reply::Now(SyncResult::error(GroupError::UnknownMemberId))
            }
            GroupState::PreparingRebalance => {
                Reply::Now(SyncResult::error(GroupError::RebalanceInProgress))
            }
            GroupState::Stable => {
                let a = group.member(member_id).map(|m| m.assignment.clone()).unwrap_or_default();
                if let Some(m) = group.member_mut(member_id) {
                    m.last_heartbeat_ms = now;
                }
                Reply::Now(ok(group, a))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                if let Some(m) = group.member_mut(member_id) {
                    m.last_heartbeat_ms = now;
                    if let Some(old) = m.sync_waiter.replace(tx) {
                        let _ = old.send(SyncResult::error(GroupError::RebalanceInProgress));
                    }
                }
                if group.leader.as_deref() == Some(member_id) {
                    let mut by_member: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for m in &mut group.members {
                        m.assignment = by_member.remove(&m.id).unwrap_or_default();
                    }
                    // The assignment is durable before anyone is told about it.
                    if let Err(e) = self.persist_group(group) {
                        for m in &mut group.members {
                            m.assignment = Bytes::new();
                            if let Some(w) = m.sync_waiter.take() {
                                let _ = w.send(SyncResult::error(e));
                            }
                        }
                        self.prepare_rebalance(group, now);
                        return Reply::Wait(rx);
                    }
                    group.transition(GroupState::Stable, now);
                    tracing::info!(group = %group.id, generation = group.generation, "group is stable");
                    let (pt, p) = (group.protocol_type.clone(), group.protocol.clone());
                    for m in &mut group.members {
                        if let Some(w) = m.sync_waiter.take() {
                            let _ = w.send(SyncResult {
                                error: None,
                                protocol_type: pt.clone(),
                                protocol: p.clone(),
                                assignment: m.assignment.clone(),
                            });
                        }
                    }
                }
                Reply::Wait(rx)
            }
        }
    }

    // ----------------------------------------------------------- heartbeat

    /// Heartbeat.
    ///
    /// # Errors
    /// Kafka's heartbeat errors.
    pub fn heartbeat(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        self.check_ready()?;
        let now = self.now();
        let mut groups = self.lock();
        let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMemberId)?;
        if let Some(instance) = instance_id {
            if group
                .members
                .iter()
                .any(|m| m.instance_id.as_deref() == Some(instance) && m.id != member_id)
            {
                return Err(GroupError::FencedInstanceId);
            }
        }
        let state = group.state;
        let current = group.generation;
        let m = group.member_mut(member_id).ok_or(GroupError::UnknownMemberId)?;
        if generation != current {
            return Err(GroupError::IllegalGeneration);
        }
        m.last_heartbeat_ms = now;
        match state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            GroupState::CompletingRebalance | GroupState::Stable => Ok(()),
        }
    }

    // --------------------------------------------------------------- leave

    /// LeaveGroup for (member id, instance id) pairs; one result per member.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Option<GroupError>>, GroupError> {
        self.check_ready()?;
        let now = self.now();
        let mut groups = self.lock();
        let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMemberId)?;
        let mut results = Vec::with_capacity(members.len());
        let mut removed = false;
        for (member_id, instance) in members {
            let position = match instance {
                Some(inst) => match group
                    .members
                    .iter()
                    .position(|m| m.instance_id.as_deref() == Some(inst.as_str()))
                {
                    Some(i) if member_id.is_empty() || group.members[i].id == *member_id => Some(i),
                    Some(_) => {
                        results.push(Some(GroupError::FencedInstanceId));
                        continue;
                    }
                    None => None,
                },
                None => group.members.iter().position(|m| m.id == *member_id),
            };
            match position {
                Some(i) => {
                    let m = group.members.remove(i);
                    if let Some(w) = m.join_waiter {
                        let _ =
                            w.send(JoinResult::error(GroupError::UnknownMemberId, m.id.clone()));
                    }
                    if let Some(w) = m.sync_waiter {
                        let _ = w.send(SyncResult::error(GroupError::UnknownMemberId));
                    }
                    tracing::info!(group = %group.id, member = %m.id, "member left");
                    removed = true;
                    results.push(None);
                }
                None => results.push(Some(GroupError::UnknownMemberId)),
            }
        }
        if removed {
            self.after_member_removed(group, now);
        }
        Ok(results)
    }

    fn after_member_removed(&self, group: &mut Group, now: i64) {
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(group, now);
                self.maybe_complete_join(group, now);
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(group, now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    // ---------------------------------------------------------------- tick

    /// Periodic work: complete join rounds whose time came, expire members
    /// whose session ran out, and expire old offsets of empty groups.
    pub fn tick(&self) {
        if !self.is_loaded() {
            return;
        }
        let now = self.now();
        let mut groups = self.lock();
        for group in groups.values_mut() {
            let before = group.members.len();
            let expired: Vec<String> =
                group.members.iter().filter(|m| !m.alive_at(now)).map(|m| m.id.clone()).collect();
            if !expired.is_empty() {
                group.members.retain(|m| m.alive_at(now));
                tracing::info!(group = %group.id, members = ?expired, "member session expired");
            }
            if group.members.len() < before {
                self.after_member_removed(group, now);
            }
            self.maybe_complete_join(group, now);
        }
        drop(groups);
        let due = {
            let mut last = self.last_expiry_check.lock().unwrap_or_else(|p| p.into_inner());
            if now - *last >= self.config.offsets_retention_check_interval_ms {
                *last = now;
                true
            } else {
                false
            }
        };
        if due {
            self.expire_offsets(now);
        }
    }

    /// Remove offsets of empty groups older than `offsets.retention.minutes`
    /// (counted from when the group became empty, as Kafka 2.1+ does), with
    /// tombstones; a group left with nothing is deleted.
    pub fn expire_offsets(&self, now: i64) {
        let mut groups = self.lock();
        let mut dead = Vec::new();
        for group in groups.values_mut() {
            if group.state != GroupState::Empty {
                continue;
            }
            let base = group.state_timestamp;
            let expired: Vec<(String, i32)> = group
                .offsets
                .iter()
                .filter(|(_, o)| {
                    base.max(o.commit_timestamp) + self.config.offsets_retention_ms <= now
                })
                .map(|(k, _)| k.clone())
                .collect();
            if expired.is_empty() {
                continue;
            }
            let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> = expired
                .iter()
                .map(|(t, p)| {
                    (
                        RecordKey::Offset {
                            group: group.id.clone(),
                            topic: t.clone(),
                            partition: *p,
                        }
                        .encode(),
                        None,
                    )
                })
                .collect();
            let now_empty = expired.len() == group.offsets.len();
            if now_empty {
                records.push((RecordKey::Group { group: group.id.clone() }.encode(), None));
            }
            if self.append(&group.id, &records).is_ok() {
                for k in &expired {
                    group.offsets.remove(k);
                }
                tracing::info!(group = %group.id, offsets = expired.len(), "expired committed offsets");
                if now_empty {
                    group.transition(GroupState::Dead, now);
                    dead.push(group.id.clone());
                }
            }
        }
        for id in dead {
            groups.remove(&id);
        }
    }

    // ------------------------------------------------------------- offsets

    /// OffsetCommit: per-partition results in request order.
    pub fn commit(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        offsets: &[(String, i32, CommittedOffset)],
    ) -> Vec<Option<GroupError>> {
        let all = |e: GroupError| vec![Some(e); offsets.len()];
        if let Err(e) = self.check_ready() {
            return all(e);
        }
        if group_id.is_empty() {
            return all(GroupError::InvalidGroupId);
        }
        let now = self.now();
        let mut groups = self.lock();
        if !groups.contains_key(group_id) {
            if generation >= 0 || !member_id.is_empty() {
                return all(GroupError::IllegalGeneration);
            }
            groups.insert(group_id.to_string(), Group::new(group_id, now));
        }
        let group = groups.get_mut(group_id).expect("present");
        let simple = generation < 0 && member_id.is_empty();
        if simple {
            if group.state != GroupState::Empty {
                return all(GroupError::UnknownMemberId);
            }
        } else {
            if let Some(instance) = instance_id {
                if group
                    .members
                    .iter()
                    .any(|m| m.instance_id.as_deref() == Some(instance) && m.id != member_id)
                {
                    return all(GroupError::FencedInstanceId);
                }
            }
            if group.state == GroupState::CompletingRebalance {
                return all(GroupError::RebalanceInProgress);
            }
            if group.member(member_id).is_none() {
                return all(GroupError::UnknownMemberId);
            }
            if generation != group.generation {
                return all(GroupError::IllegalGeneration);
            }
            if let Some(m) = group.member_mut(member_id) {
                m.last_heartbeat_ms = now;
            }
        }
        let mut results = vec![None; offsets.len()];
        let mut records = Vec::new();
        for (i, (topic, partition, o)) in offsets.iter().enumerate() {
            if o.metadata.len() > self.config.offset_metadata_max_bytes {
                results[i] = Some(GroupError::OffsetMetadataTooLarge);
                continue;
            }
            let key = RecordKey::Offset {
                group: group_id.to_string(),
                topic: topic.clone(),
                partition: *partition,
            };
            let value = OffsetValue {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata: o.metadata.clone(),
                commit_timestamp: now,
            };
            records.push((key.encode(), Some(value.encode())));
        }
        if let Err(e) = self.append(group_id, &records) {
            return all(e);
        }
        for (i, (topic, partition, o)) in offsets.iter().enumerate() {
            if results[i].is_none() {
                group.offsets.insert(
                    (topic.clone(), *partition),
                    CommittedOffset { commit_timestamp: now, ..o.clone() },
                );
            }
        }
        results
    }

    /// OffsetFetch for one group: the committed offsets of the requested
    /// partitions (all of the group's when `None`).
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while loading.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<(String, i32, Option<CommittedOffset>)>, GroupError> {
        self.check_ready()?;
        let groups = self.lock();
        let group = groups.get(group_id);
        Ok(match partitions {
            Some(list) => list
                .iter()
                .map(|(t, p)| {
                    (t.clone(), *p, group.and_then(|g| g.offsets.get(&(t.clone(), *p)).cloned()))
                })
                .collect(),
            None => group
                .map(|g| {
                    g.offsets.iter().map(|((t, p), o)| (t.clone(), *p, Some(o.clone()))).collect()
                })
                .unwrap_or_default(),
        })
    }

    /// ListGroups: (group id, protocol type, state).
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while loading.
    pub fn list(&self) -> Result<Vec<(String, String, GroupState)>, GroupError> {
        self.check_ready()?;
        let groups = self.lock();
        let mut out: Vec<_> = groups
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .map(|g| (g.id.clone(), g.protocol_type.clone().unwrap_or_default(), g.state))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// DescribeGroups for one group (a missing group is Dead, as in Kafka).
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while loading.
    pub fn describe(&self, group_id: &str) -> Result<GroupDescription, GroupError> {
        self.check_ready()?;
        let groups = self.lock();
        let Some(g) = groups.get(group_id) else {
            return Ok(GroupDescription {
                group_id: group_id.to_string(),
                state: GroupState::Dead,
                protocol_type: String::new(),
                protocol: String::new(),
                members: vec![],
            });
        };
        // Like Kafka, member metadata and assignments are shown once stable.
        let show = g.state == GroupState::Stable;
        let protocol = g.protocol.clone().unwrap_or_default();
        Ok(GroupDescription {
            group_id: g.id.clone(),
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if show { protocol.clone() } else { String::new() },
            members: g
                .members
                .iter()
                .map(|m| {
                    let (meta, asg) = if show {
                        (m.metadata_for(&protocol), m.assignment.clone())
                    } else {
                        (Bytes::new(), Bytes::new())
                    };
                    (
                        m.id.clone(),
                        m.instance_id.clone(),
                        m.client_id.clone(),
                        m.client_host.clone(),
                        meta,
                        asg,
                    )
                })
                .collect(),
        })
    }

    /// DeleteGroups: only empty groups; tombstones for its offsets and metadata.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, storage errors.
    pub fn delete_group(&self, group_id: &str) -> Result<(), GroupError> {
        self.check_ready()?;
        let now = self.now();
        let mut groups = self.lock();
        let group = groups.get_mut(group_id).ok_or(GroupError::GroupIdNotFound)?;
        match group.state {
            GroupState::Dead => return Err(GroupError::GroupIdNotFound),
            GroupState::Empty => {}
            _ => return Err(GroupError::NonEmptyGroup),
        }
        let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> = group
            .offsets
            .keys()
            .map(|(t, p)| {
                (
                    RecordKey::Offset {
                        group: group_id.to_string(),
                        topic: t.clone(),
                        partition: *p,
                    }
                    .encode(),
                    None,
                )
            })
            .collect();
        records.push((RecordKey::Group { group: group_id.to_string() }.encode(), None));
        self.append(group_id, &records)?;
        group.transition(GroupState::Dead, now);
        groups.remove(group_id);
        tracing::info!(group = %group_id, "group deleted");
        Ok(())
    }

    /// OffsetDelete: tombstones for the given partitions, refused for topics a
    /// live consumer group subscribes to.
    ///
    /// # Errors
    /// Group-level errors; per-partition ones are in the result.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<GroupError>>, GroupError> {
        self.check_ready()?;
        let mut groups = self.lock();
        let group = groups.get_mut(group_id).ok_or(GroupError::GroupIdNotFound)?;
        if group.state == GroupState::Dead {
            return Err(GroupError::GroupIdNotFound);
        }
        let subscribed =
            if group.state == GroupState::Empty { vec![] } else { group.subscribed_topics() };
        if group.state != GroupState::Empty && group.protocol_type.as_deref() != Some("consumer") {
            return Err(GroupError::NonEmptyGroup);
        }
        let mut results = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        let mut removing = Vec::new();
        for (t, p) in partitions {
            if subscribed.contains(t) {
                results.push(Some(GroupError::GroupSubscribedToTopic));
                continue;
            }
            results.push(None);
            if group.offsets.contains_key(&(t.clone(), *p)) {
                records.push((
                    RecordKey::Offset {
                        group: group_id.to_string(),
                        topic: t.clone(),
                        partition: *p,
                    }
                    .encode(),
                    None,
                ));
                removing.push((t.clone(), *p));
            }
        }
        self.append(group_id, &records)?;
        for k in removing {
            group.offsets.remove(&k);
        }
        Ok(results)
    }
}

/// Run `tick` every 100 ms on the runtime until the handle is aborted: join
/// rounds complete and sessions expire within that resolution.
pub fn spawn_ticker(coordinator: Arc<GroupCoordinator>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(std::time::Duration::from_millis(100));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            tokio::task::block_in_place(|| coordinator.tick());
        }
    })
}

fn leader_members(group: &Group) -> Vec<(String, Option<String>, Bytes)> {
    let protocol = group.protocol.clone().unwrap_or_default();
    group
        .members
        .iter()
        .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata_for(&protocol)))
        .collect()
}

fn current_join(group: &Group, member_id: &str, with_members: bool) -> JoinResult {
    JoinResult {
        error: None,
        generation: group.generation,
        protocol_type: group.protocol_type.clone(),
        protocol: group.protocol.clone(),
        leader: group.leader.clone().unwrap_or_default(),
        member_id: member_id.to_string(),
        members: if with_members { leader_members(group) } else { vec![] },
        skip_assignment: false,
    }
}

/// Apply one `__consumer_offsets` record while loading.
fn apply_record(groups: &mut HashMap<String, Group>, key: &[u8], value: Option<&[u8]>, now: i64) {
    let Ok(key) = RecordKey::decode(key) else {
        tracing::warn!("skipping an undecodable {OFFSETS_TOPIC} key");
        return;
    };
    match key {
        RecordKey::Offset { group, topic, partition } => match value.map(OffsetValue::decode) {
            None => {
                if let Some(g) = groups.get_mut(&group) {
                    g.offsets.remove(&(topic, partition));
                }
            }
            Some(Ok(v)) => {
                let g = groups.entry(group.clone()).or_insert_with(|| Group::new(&group, now));
                g.offsets.insert(
                    (topic, partition),
                    CommittedOffset {
                        offset: v.offset,
                        leader_epoch: v.leader_epoch,
                        metadata: v.metadata,
                        commit_timestamp: v.commit_timestamp,
                    },
                );
            }
            Some(Err(e)) => tracing::warn!(%group, "skipping an offset record: {e}"),
        },
        RecordKey::Group { group } => match value.map(GroupValue::decode) {
            None => {
                groups.remove(&group);
            }
            Some(Ok(v)) => {
                let g = groups.entry(group.clone()).or_insert_with(|| Group::new(&group, now));
                g.generation = v.generation;
                g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
                g.protocol = v.protocol.clone();
                g.leader = v.leader;
                g.state_timestamp = v.current_state_timestamp;
                g.members = v
                    .members
                    .into_iter()
                    .map(|m| Member {
                        id: m.member_id,
                        instance_id: m.group_instance_id,
                        client_id: m.client_id,
                        client_host: m.client_host,
                        session_timeout_ms: m.session_timeout,
                        rebalance_timeout_ms: m.rebalance_timeout,
                        protocol_type: g.protocol_type.clone().unwrap_or_default(),
                        protocols: v
                            .protocol
                            .clone()
                            .map(|p| vec![(p, m.subscription)])
                            .unwrap_or_default(),
                        assignment: m.assignment,
                        // Members get a full session after a restart to come back.
                        last_heartbeat_ms: now,
                        join_waiter: None,
                        sync_waiter: None,
                        joined: false,
                    })
                    .collect();
                g.state = if g.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
            }
            Some(Err(e)) => tracing::warn!(%group, "skipping a group record: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_matches_kafka() {
        // Values of Java's "…".hashCode().
        assert_eq!(java_string_hash("my-group"), -1_906_497_762);
        assert_eq!(java_string_hash("console-consumer-12345"), 158_455_506);
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
    }

    fn coordinator(dir: &std::path::Path) -> GroupCoordinator {
        let clock: SharedClock = crate::clock::MockClock::new(1_000_000);
        let logs = Arc::new(
            LogManager::open(crate::log::LogManagerConfig::new(dir), clock.clone())
                .expect("log manager"),
        );
        let config = GroupConfig {
            offsets_topic_partitions: 1,
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        };
        let c = GroupCoordinator::new(config, logs, clock);
        c.load();
        c
    }

    fn join_request(member_id: &str, client_id: &str) -> JoinRequest {
        JoinRequest {
            group_id: "g".into(),
            member_id: member_id.into(),
            group_instance_id: None,
            client_id: client_id.into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
            require_known_member_id: false,
            supports_skip_assignment: false,
        }
    }

    fn joined(reply: Reply<JoinResult>) -> JoinResult {
        match reply {
            Reply::Now(r) => r,
            Reply::Wait(mut rx) => rx.try_recv().expect("the join round completed"),
        }
    }

    #[test]
    fn member_joining_while_completing_rebalance_starts_a_new_round() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = coordinator(dir.path());
        let a = joined(c.join(join_request("", "a")));
        assert_eq!((a.error, a.generation), (None, 1));
        // The group waits for a's SyncGroup (CompletingRebalance) when b joins
        // with the same protocols: b was in no round, so it must not get
        // generation 1's answer (it would sync into an assignment that has no
        // entry for it, and the group would stay stable without it).
        let b = c.join(join_request("", "b"));
        assert!(matches!(b, Reply::Wait(_)), "b waits for a new round");
        assert_eq!(c.describe("g").expect("describe").state, GroupState::PreparingRebalance);
        // a's sync of the old generation is told to rejoin; its rejoin completes round 2.
        match c.sync("g", 1, &a.member_id, None, None, vec![]) {
            Reply::Now(r) => assert_eq!(r.error, Some(GroupError::RebalanceInProgress)),
            Reply::Wait(_) => panic!("a sync of the old generation must not wait"),
        }
        let a2 = joined(c.join(join_request(&a.member_id, "a")));
        let b = joined(b);
        assert_eq!((a2.error, a2.generation, b.error, b.generation), (None, 2, None, 2));
        assert_eq!(a2.members.len(), 2, "the leader sees both members");
    }
}

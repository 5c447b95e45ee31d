//! One group's state (Kafka's `GroupMetadata` and `MemberMetadata`): its
//! members, generation, chosen protocol, leader, its committed and pending
//! transactional offsets, and the transitions of its [`GroupState`] (the
//! machine itself, with its table, is in `group_state`).
//!
//! [`Group::transition`] is the only way the state changes, besides
//! [`Group::restore`] when the loader rebuilds a group from
//! `__consumer_offsets`.

use std::collections::BTreeMap;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::classic_protocol::{JoinResult, SyncResult};
use super::consumer_group::ConsumerGroup;
use super::error::GroupError;
use super::group_state::{GroupState, GroupStateError};
use super::offset_and_metadata::{CommittedOffset, PendingOffset};
use super::schema::{GroupValue, MemberValue};

#[derive(Debug)]
pub(super) struct Member {
    pub(super) id: String,
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) session_timeout_ms: i32,
    pub(super) rebalance_timeout_ms: i32,
    pub(super) protocol_type: String,
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    pub(super) last_heartbeat_ms: i64,
    pub(super) join_waiter: Option<oneshot::Sender<JoinResult>>,
    pub(super) sync_waiter: Option<oneshot::Sender<SyncResult>>,
    /// Rejoined in the current PreparingRebalance round.
    pub(super) joined: bool,
}

impl Member {
    pub(super) fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Members awaiting a join or sync response are alive; others until their
    /// session runs out after the last heartbeat.
    pub(super) fn alive_at(&self, now: i64) -> bool {
        self.join_waiter.is_some()
            || self.sync_waiter.is_some()
            || now < self.last_heartbeat_ms + self.session_timeout_ms as i64
    }

    /// A member as the group record stored it; it gets a full session from
    /// `now` to come back after a restart.
    fn restored(m: MemberValue, protocol_type: &str, protocol: Option<&str>, now: i64) -> Self {
        Member {
            id: m.member_id,
            instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
            session_timeout_ms: m.session_timeout,
            rebalance_timeout_ms: m.rebalance_timeout,
            protocol_type: protocol_type.to_string(),
            protocols: protocol.map(|p| vec![(p.to_string(), m.subscription)]).unwrap_or_default(),
            assignment: m.assignment,
            last_heartbeat_ms: now,
            join_waiter: None,
            sync_waiter: None,
            joined: false,
        }
    }
}

#[derive(Debug)]
pub(super) struct Group {
    pub(super) id: String,
    /// Changed only by `transition` (and `restore`), which keep the timestamp.
    state: GroupState,
    state_timestamp: i64,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol: Option<String>,
    pub(super) generation: i32,
    pub(super) leader: Option<String>,
    /// Kept in join order: the first member leads when the leader left.
    pub(super) members: Vec<Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED and not yet used.
    pub(super) pending: Vec<String>,
    pub(super) offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// The base offset in `__consumer_offsets` of the batch that wrote each
    /// committed offset (absent when unknown), so a transactional commit that
    /// completes later does not replace a plain commit written after it.
    pub(super) offset_log_offsets: BTreeMap<(String, i32), i64>,
    /// Transactional offsets per producer id, invisible until the producer's
    /// COMMIT marker lands on the group's offsets partition.
    pub(super) pending_txn_offsets: BTreeMap<i64, BTreeMap<(String, i32), PendingOffset>>,
    /// PreparingRebalance ends by then at the latest.
    pub(super) rebalance_deadline: i64,
    /// A round started from Empty waits until then (extended by each join).
    pub(super) initial_delay_until: i64,
    /// Set when the group is a consumer group (the KIP-848 protocol): its
    /// members live there and the classic side stays Empty. Offsets are
    /// shared by both kinds.
    pub(super) consumer: Option<ConsumerGroup>,
}

impl Group {
    pub(super) fn new(id: &str, now: i64) -> Self {
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
            offset_log_offsets: BTreeMap::new(),
            pending_txn_offsets: BTreeMap::new(),
            rebalance_deadline: 0,
            initial_delay_until: 0,
            consumer: None,
        }
    }

    /// No member of either protocol.
    pub(super) fn is_empty(&self) -> bool {
        self.state == GroupState::Empty
            && self.consumer.as_ref().is_none_or(|c| c.members.is_empty())
    }

    /// Forget the classic protocol's metadata when the group becomes a
    /// consumer group (or the reverse); offsets stay.
    pub(super) fn clear_classic_metadata(&mut self) {
        self.protocol_type = None;
        self.protocol = None;
        self.leader = None;
        self.generation = 0;
        self.pending.clear();
    }

    pub(super) fn state(&self) -> GroupState {
        self.state
    }

    /// The group became a consumer group (KIP-848 upgrade): its classic
    /// members now live there, so the classic side is emptied. Members
    /// waiting on a join or sync are told to rejoin, which reaches the
    /// consumer group. Not a transition: the group changes kind.
    pub(super) fn end_classic_membership(&mut self, now: i64) {
        for m in self.members.drain(..) {
            if let Some(w) = m.join_waiter {
                let _ = w.send(JoinResult::error(GroupError::RebalanceInProgress, m.id.clone()));
            }
            if let Some(w) = m.sync_waiter {
                let _ = w.send(SyncResult::error(GroupError::RebalanceInProgress));
            }
        }
        self.clear_classic_metadata();
        self.state = GroupState::Empty;
        self.state_timestamp = now;
    }

    /// The group became a classic group (KIP-848 downgrade) with `members`,
    /// Stable at `generation` with the first member leading. Not a
    /// transition: the group changes kind; the caller starts a rebalance.
    pub(super) fn become_classic(&mut self, members: Vec<Member>, generation: i32, now: i64) {
        self.members = members;
        self.generation = generation;
        self.protocol_type = Some("consumer".to_string());
        self.protocol = self.select_protocol();
        self.leader = self.members.first().map(|m| m.id.clone());
        self.pending.clear();
        self.consumer = None;
        self.state = GroupState::Stable;
        self.state_timestamp = now;
    }

    /// When the group entered its current state.
    pub(super) fn state_timestamp(&self) -> i64 {
        self.state_timestamp
    }

    pub(super) fn member(&self, id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    pub(super) fn member_mut(&mut self, id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.id == id)
    }

    pub(super) fn is_leader(&self, member_id: &str) -> bool {
        self.leader.as_deref() == Some(member_id)
    }

    /// Move to `to` at `now`.
    ///
    /// # Errors
    /// A transition the module doc's table does not allow: the group is left
    /// unchanged and the refusal is logged here, so a caller that cannot
    /// answer anyone with the error may drop it.
    pub(super) fn transition(&mut self, to: GroupState, now: i64) -> Result<(), GroupStateError> {
        if !self.state.can_transition_to(to) {
            let e = GroupStateError { group: self.id.clone(), from: self.state, to };
            tracing::error!(group = %self.id, from = %self.state, %to, "refused: {e}");
            return Err(e);
        }
        self.state = to;
        self.state_timestamp = now;
        Ok(())
    }

    /// Replace the group's metadata by a group record read while loading.
    /// Not a transition: the log, not the state machine, says where the group
    /// is (Empty without members, else Stable).
    pub(super) fn restore(&mut self, v: GroupValue, now: i64) {
        self.generation = v.generation;
        self.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
        self.leader = v.leader;
        self.state_timestamp = v.current_state_timestamp;
        let protocol_type = self.protocol_type.clone().unwrap_or_default();
        self.members = v
            .members
            .into_iter()
            .map(|m| Member::restored(m, &protocol_type, v.protocol.as_deref(), now))
            .collect();
        self.protocol = v.protocol;
        self.state = if self.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
    }

    /// Whether `instance_id` is held by a member other than `member_id`: a
    /// static member that restarted under a new member id fences the old one.
    pub(super) fn fences(&self, instance_id: Option<&str>, member_id: &str) -> bool {
        instance_id.is_some_and(|instance| {
            self.members
                .iter()
                .any(|m| m.instance_id.as_deref() == Some(instance) && m.id != member_id)
        })
    }

    /// The protocols every member supports, in the order of the first member.
    pub(super) fn candidate_protocols(&self) -> Vec<String> {
        let Some(first) = self.members.first() else { return vec![] };
        first
            .protocols
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| self.members.iter().all(|m| m.protocols.iter().any(|(p, _)| p == n)))
            .collect()
    }

    pub(super) fn select_protocol(&self) -> Option<String> {
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

    /// (member id, group instance id, metadata) of every member, as the
    /// leader's JoinGroup response lists them.
    pub(super) fn leader_members(&self) -> Vec<(String, Option<String>, Bytes)> {
        let protocol = self.protocol.clone().unwrap_or_default();
        self.members
            .iter()
            .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata_for(&protocol)))
            .collect()
    }

    pub(super) fn to_value(&self) -> GroupValue {
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
    pub(super) fn subscribed_topics(&self) -> Vec<String> {
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

impl Group {
    /// The group's current generation as `member_id` sees it; the member
    /// list only `with_members`.
    pub(super) fn join_result(&self, member_id: &str, with_members: bool) -> JoinResult {
        JoinResult {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if with_members { self.leader_members() } else { vec![] },
            skip_assignment: false,
        }
    }

    /// The SyncGroup answer handing `assignment` to a member.
    pub(super) fn sync_result(&self, assignment: Bytes) -> SyncResult {
        SyncResult {
            error: None,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            assignment,
        }
    }
}

/// The group's committed offsets and its pending transactional ones.
impl Group {
    /// Install a committed offset written by the batch at `log_offset`.
    pub(super) fn install_offset(
        &mut self,
        key: (String, i32),
        offset: CommittedOffset,
        log_offset: Option<i64>,
    ) {
        match log_offset {
            Some(at) => self.offset_log_offsets.insert(key.clone(), at),
            None => self.offset_log_offsets.remove(&key),
        };
        self.offsets.insert(key, offset);
    }

    /// Forget a committed offset (its tombstone was written or read).
    pub(super) fn remove_offset(&mut self, key: &(String, i32)) {
        self.offsets.remove(key);
        self.offset_log_offsets.remove(key);
    }

    /// Add a pending transactional offset of `producer_id`.
    pub(super) fn add_pending_offset(
        &mut self,
        producer_id: i64,
        key: (String, i32),
        pending: PendingOffset,
    ) {
        self.pending_txn_offsets.entry(producer_id).or_default().insert(key, pending);
    }

    /// The transaction of `producer_id` ended: install its pending offsets
    /// (COMMIT) unless a plain commit was written after them, or drop them.
    pub(super) fn complete_pending_offsets(&mut self, producer_id: i64, commit: bool) {
        let Some(pending) = self.pending_txn_offsets.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (key, p) in pending {
            let newer_plain =
                self.offset_log_offsets.get(&key).is_some_and(|&at| at > p.log_offset);
            if !newer_plain {
                self.install_offset(key, p.offset, Some(p.log_offset));
            }
        }
    }

    /// Whether some transaction holds a pending offset for the partition.
    pub(super) fn has_pending_offset(&self, key: &(String, i32)) -> bool {
        self.pending_txn_offsets.values().any(|m| m.contains_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::GroupState::*;
    use super::*;

    const ALL: [GroupState; 5] = [Empty, PreparingRebalance, CompletingRebalance, Stable, Dead];

    fn group_in(state: GroupState) -> Group {
        let mut g = Group::new("g", 0);
        g.state = state;
        g
    }

    #[test]
    fn legal_transitions_apply_and_stamp_the_time() {
        let legal = [
            (PreparingRebalance, Empty),
            (Empty, PreparingRebalance),
            (Stable, PreparingRebalance),
            (CompletingRebalance, PreparingRebalance),
            (PreparingRebalance, CompletingRebalance),
            (CompletingRebalance, Stable),
        ];
        for (from, to) in legal.into_iter().chain(ALL.map(|s| (s, Dead))) {
            let mut g = group_in(from);
            assert_eq!(g.transition(to, 42), Ok(()), "{from} -> {to}");
            assert_eq!((g.state(), g.state_timestamp()), (to, 42));
        }
    }

    #[test]
    fn illegal_transitions_are_refused_and_change_nothing() {
        let mut refused = 0;
        for from in ALL {
            for to in ALL.into_iter().filter(|to| !from.can_transition_to(*to)) {
                let mut g = group_in(from);
                let e = g.transition(to, 42).expect_err("refused");
                assert_eq!(e, GroupStateError { group: "g".into(), from, to });
                assert_eq!((g.state(), g.state_timestamp()), (from, 0), "{from} -> {to}");
                refused += 1;
            }
        }
        // 25 pairs minus the 6 legal ones and the 5 into Dead.
        assert_eq!(refused, 14);
        assert!(!Dead.can_transition_to(Empty));
        assert!(!Stable.can_transition_to(Stable));
        assert!(!Empty.can_transition_to(CompletingRebalance));
    }

    #[test]
    fn a_full_rebalance_cycle_is_legal() {
        let mut g = Group::new("g", 0);
        for (i, to) in [PreparingRebalance, CompletingRebalance, Stable, PreparingRebalance, Empty]
            .into_iter()
            .enumerate()
        {
            assert_eq!(g.transition(to, i as i64), Ok(()));
        }
        assert_eq!(g.transition(Dead, 9), Ok(()));
    }
}

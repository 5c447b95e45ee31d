//! Membership of the classic group protocol: JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, session expiry, and the join round that ends a rebalance.
//!
//! * A join round (PreparingRebalance) completes when every member has
//!   rejoined, or at the largest rebalance timeout, when members that did not
//!   rejoin are removed. A round starting from Empty waits
//!   `group.initial.rebalance.delay.ms` after the last join first, so a
//!   starting fleet lands in one generation.
//! * Completing a round bumps the generation, picks the protocol every member
//!   supports by vote, keeps the leader if it rejoined (else the first
//!   member), answers every waiting JoinGroup (the leader gets the member
//!   list) and moves to CompletingRebalance; without members it moves to Empty.
//! * The leader's SyncGroup assignment is written to `__consumer_offsets`
//!   before any member is told about it; then the group is Stable. If the
//!   write fails, every waiting member gets the error and a new round starts.
//! * A member added by a join was in no round: it always starts a new one and
//!   never gets the current generation's answer.
//! * Static members (`group.instance.id`) keep their identity across restarts:
//!   a rejoin with an unknown member id replaces the old member id (the old
//!   instance is fenced); in a stable group with unchanged protocols this
//!   needs no rebalance.
//! * Members awaiting a join or sync response are alive; others expire
//!   `session.timeout.ms` after their last heartbeat.
//! * Waiting members hold oneshot receivers: nothing here waits under the lock.

use std::collections::HashMap;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::classic_protocol::{JoinRequest, JoinResult, Reply, SyncResult};
use super::config::MigrationPolicy;
use super::coordinator::GroupCoordinator;
use super::error::GroupError;
use super::group_metadata::{Group, Member};
use super::group_state::{GroupState, GroupStateError};

/// Who a JoinGroup is for, once its member id is settled.
enum Joiner {
    /// The request is answered without joining a round.
    Answered(JoinResult),
    /// A member of the group joins a round; `added` when it was in no round
    /// yet (just added, or a static member that replaced an old instance).
    Member { id: String, added: bool },
}

impl GroupCoordinator {
    /// JoinGroup.
    pub fn join(&self, req: JoinRequest) -> Reply<JoinResult> {
        let fail = |e: GroupError| Reply::Now(JoinResult::error(e, req.member_id.clone()));
        if let Err(e) = self.validate_join(&req) {
            return fail(e);
        }
        let now = self.now();
        let mut groups = match self.runtime.lock_ready(&req.group_id) {
            Ok(groups) => groups,
            Err(e) => return fail(e),
        };
        let group = match join_target(&mut groups, &req, now) {
            Ok(g) => g,
            Err(e) => return fail(e),
        };
        if self.joins_consumer_group(group) {
            return match self.classic_join_to_consumer_group(group, &req, now) {
                Ok(result) => Reply::Now(result),
                Err(e) => fail(e),
            };
        }
        if let Err(e) = self.check_join_fits(group, &req) {
            return fail(e);
        }
        if let Err(e) = self.leave_consumer_protocol(group) {
            return fail(e);
        }
        match self.resolve_joiner(group, &req, now) {
            Ok(Joiner::Answered(result)) => Reply::Now(result),
            Ok(Joiner::Member { id, added }) => self.join_round(group, &id, added, &req, now),
            Err(e) => fail(e),
        }
    }

    /// A classic join to a consumer group with members joins it as a classic
    /// member, unless migration is disabled (then `leave_consumer_protocol`
    /// refuses it).
    fn joins_consumer_group(&self, group: &Group) -> bool {
        self.config.consumer_migration_policy != MigrationPolicy::Disabled
            && group.consumer.as_ref().is_some_and(|cg| !cg.members.is_empty())
    }

    /// A classic join to an empty consumer group turns it classic (its
    /// consumer records tombstoned first); one with members refuses it.
    fn leave_consumer_protocol(&self, group: &mut Group) -> Result<(), GroupError> {
        let records = super::consumer_group_admin::classic_join_allowed(group)?;
        if group.consumer.is_some() {
            self.runtime.append(&group.id, &records)?;
            group.consumer = None;
        }
        Ok(())
    }

    /// The checks that need no group.
    fn validate_join(&self, req: &JoinRequest) -> Result<(), GroupError> {
        if req.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return Err(GroupError::InvalidSessionTimeout);
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        Ok(())
    }

    /// The member's protocols must fit the group's, and `group.max.size`
    /// refuses a join that would add a member to a full group.
    fn check_join_fits(&self, group: &Group, req: &JoinRequest) -> Result<(), GroupError> {
        if !group.members.is_empty() {
            if group.protocol_type.as_deref().is_some_and(|t| t != req.protocol_type) {
                return Err(GroupError::InconsistentGroupProtocol);
            }
            let candidates = group.candidate_protocols();
            if !req.protocols.iter().any(|(p, _)| candidates.contains(p)) {
                return Err(GroupError::InconsistentGroupProtocol);
            }
        }
        let adds_member = if req.member_id.is_empty() {
            req.group_instance_id.as_ref().is_none_or(|i| {
                !group.members.iter().any(|m| m.instance_id.as_deref() == Some(i.as_str()))
            })
        } else {
            group.pending.contains(&req.member_id)
        };
        if adds_member && group.members.len() >= self.config.max_size {
            return Err(GroupError::GroupMaxSizeReached);
        }
        Ok(())
    }

    /// Settle which member joins: a known or pending member id, a static
    /// member (re)joining, or a new dynamic member (which first gets
    /// MEMBER_ID_REQUIRED when the client supports it).
    fn resolve_joiner(
        &self,
        group: &mut Group,
        req: &JoinRequest,
        now: i64,
    ) -> Result<Joiner, GroupError> {
        if !req.member_id.is_empty() {
            return self.known_joiner(group, req, now);
        }
        if let Some(instance) = &req.group_instance_id {
            return Ok(self.static_joiner(group, instance, req, now));
        }
        let id = self.new_member_id(&req.client_id);
        if req.require_known_member_id {
            group.pending.push(id.clone());
            return Ok(Joiner::Answered(JoinResult::error(GroupError::MemberIdRequired, id)));
        }
        self.add_member(group, &id, req, now);
        Ok(Joiner::Member { id, added: true })
    }

    /// A join naming its member id: a pending id becomes a member; an id
    /// the group does not know is refused (fenced when its instance id
    /// belongs to another member).
    fn known_joiner(
        &self,
        group: &mut Group,
        req: &JoinRequest,
        now: i64,
    ) -> Result<Joiner, GroupError> {
        let id = req.member_id.clone();
        if let Some(i) = group.pending.iter().position(|p| *p == id) {
            group.pending.swap_remove(i);
            self.add_member(group, &id, req, now);
            return Ok(Joiner::Member { id, added: true });
        }
        if group.member(&id).is_some() {
            return Ok(Joiner::Member { id, added: false });
        }
        if let Some(instance) = &req.group_instance_id {
            if group.members.iter().any(|m| m.instance_id.as_deref() == Some(instance)) {
                return Err(GroupError::FencedInstanceId);
            }
        }
        Err(GroupError::UnknownMemberId)
    }

    /// A static member joining without a member id: a new instance is added;
    /// a restarted one takes over its old identity under a new member id.
    fn static_joiner(
        &self,
        group: &mut Group,
        instance: &str,
        req: &JoinRequest,
        now: i64,
    ) -> Joiner {
        let id = self.new_member_id(instance);
        let Some(i) = group.members.iter().position(|m| m.instance_id.as_deref() == Some(instance))
        else {
            self.add_member(group, &id, req, now);
            return Joiner::Member { id, added: true };
        };
        let unchanged = replace_static_member(group, i, &id, req, now);
        if group.state() == GroupState::Stable && unchanged {
            return Joiner::Answered(self.static_rejoin_result(group, &id, req));
        }
        Joiner::Member { id, added: true }
    }

    /// A static member rejoining a stable group with unchanged protocols keeps
    /// the generation; a leader that can skip the assignment gets the members.
    fn static_rejoin_result(&self, group: &Group, id: &str, req: &JoinRequest) -> JoinResult {
        let skip = group.is_leader(id) && req.supports_skip_assignment;
        let result = JoinResult {
            members: if skip { group.leader_members() } else { vec![] },
            skip_assignment: skip,
            ..group.join_result(id, false)
        };
        // The new member id is kept in memory either way; a failed write is
        // only stale until the next rebalance persists the group.
        let _ = self.runtime.persist_group(group);
        result
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

    /// A member of the group joins: answered now when nothing changed for it,
    /// else it waits for the (possibly new) round to complete.
    fn join_round(
        &self,
        group: &mut Group,
        member_id: &str,
        added: bool,
        req: &JoinRequest,
        now: i64,
    ) -> Reply<JoinResult> {
        let (changed, is_leader) = refresh_member(group, member_id, req, now);
        let unassigned = group.member(member_id).is_some_and(|m| m.assignment.is_empty());
        let fresh = !added && !changed;
        match group.state() {
            GroupState::Stable if fresh && !is_leader && !unassigned => {
                return Reply::Now(group.join_result(member_id, false));
            }
            // A retried join for the round that just completed.
            GroupState::CompletingRebalance if fresh => {
                return Reply::Now(group.join_result(member_id, is_leader));
            }
            GroupState::Empty | GroupState::Stable | GroupState::CompletingRebalance => {
                if let Err(e) = self.prepare_rebalance(group, now) {
                    return Reply::Now(JoinResult::error(e.into(), req.member_id.clone()));
                }
            }
            GroupState::PreparingRebalance => {
                if group.initial_delay_until > 0 {
                    // Each join during the initial delay extends it (up to the deadline).
                    group.initial_delay_until = (now + self.config.initial_rebalance_delay_ms)
                        .min(group.rebalance_deadline);
                }
            }
            GroupState::Dead => {
                let e = GroupError::CoordinatorNotAvailable;
                return Reply::Now(JoinResult::error(e, req.member_id.clone()));
            }
        }
        self.await_join_round(group, member_id, now)
    }

    /// Register the member's wait for the round and complete it if it was the
    /// last one missing.
    fn await_join_round(&self, group: &mut Group, member_id: &str, now: i64) -> Reply<JoinResult> {
        let (tx, rx) = oneshot::channel();
        if let Some(m) = group.member_mut(member_id) {
            if let Some(old) = m.join_waiter.replace(tx) {
                // A duplicate join from the same member: the older request loses.
                let e = GroupError::RebalanceInProgress;
                let _ = old.send(JoinResult::error(e, member_id.to_string()));
            }
            m.joined = true;
        }
        if let Err(e) = self.maybe_complete_join(group, now) {
            return Reply::Now(JoinResult::error(e.into(), member_id.to_string()));
        }
        Reply::Wait(rx)
    }

    /// Start a join round: waiting syncs of the old round are told to rejoin.
    ///
    /// # Errors
    /// The group cannot move to PreparingRebalance (then nothing changed).
    pub(super) fn prepare_rebalance(
        &self,
        group: &mut Group,
        now: i64,
    ) -> Result<(), GroupStateError> {
        let from_empty = group.state() == GroupState::Empty;
        group.transition(GroupState::PreparingRebalance, now)?;
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
        tracing::info!(group = %group.id, generation = group.generation, members = group.members.len(), "preparing to rebalance");
        Ok(())
    }

    /// Complete the join round if every member rejoined (and any initial delay
    /// passed) or the rebalance deadline passed.
    ///
    /// # Errors
    /// The round's end state was refused (then nothing changed).
    pub(super) fn maybe_complete_join(
        &self,
        group: &mut Group,
        now: i64,
    ) -> Result<(), GroupStateError> {
        if group.state() != GroupState::PreparingRebalance {
            return Ok(());
        }
        let all_joined = group.members.iter().all(|m| m.joined);
        let delay_over = now >= group.initial_delay_until;
        if !(all_joined && delay_over) && now < group.rebalance_deadline {
            return Ok(());
        }
        if group.members.iter().any(|m| m.joined) {
            group.transition(GroupState::CompletingRebalance, now)?;
            self.complete_join_round(group, now);
        } else {
            group.transition(GroupState::Empty, now)?;
            self.complete_empty_round(group);
        }
        Ok(())
    }

    /// Members that did not rejoin in time leave; the generation moves on.
    fn end_round(group: &mut Group) {
        let before = group.members.len();
        group.members.retain(|m| m.joined);
        if group.members.len() < before {
            tracing::info!(group = %group.id, removed = before - group.members.len(), "members did not rejoin in time");
        }
        group.generation += 1;
        group.initial_delay_until = 0;
    }

    /// The round ended without members: the group is Empty.
    fn complete_empty_round(&self, group: &mut Group) {
        Self::end_round(group);
        group.protocol = None;
        group.leader = None;
        group.protocol_type = None;
        // Empty groups are persisted only for their generation; a failed write
        // is superseded by the next one.
        let _ = self.runtime.persist_group(group);
        tracing::info!(group = %group.id, generation = group.generation, "group is empty");
    }

    /// The round ended with members: choose protocol and leader and answer
    /// every waiting JoinGroup (CompletingRebalance).
    fn complete_join_round(&self, group: &mut Group, now: i64) {
        Self::end_round(group);
        group.protocol = group.select_protocol();
        if group.leader.as_ref().is_none_or(|l| group.member(l).is_none()) {
            group.leader = group.members.first().map(|m| m.id.clone());
        }
        tracing::info!(group = %group.id, generation = group.generation, members = group.members.len(), protocol = ?group.protocol, "rebalance: join round complete");
        let leader = group.leader.clone().unwrap_or_default();
        let all = group.leader_members();
        let (generation, protocol_type, protocol) =
            (group.generation, group.protocol_type.clone(), group.protocol.clone());
        for m in &mut group.members {
            m.joined = false;
            m.last_heartbeat_ms = now;
            m.assignment = Bytes::new();
            if let Some(w) = m.join_waiter.take() {
                let is_leader = m.id == leader;
                let _ = w.send(JoinResult {
                    error: None,
                    generation,
                    protocol_type: protocol_type.clone(),
                    protocol: protocol.clone(),
                    leader: leader.clone(),
                    member_id: m.id.clone(),
                    members: if is_leader { all.clone() } else { vec![] },
                    skip_assignment: false,
                });
            }
        }
    }

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
        let now = self.now();
        let mut groups = match self.runtime.lock_ready(group_id) {
            Ok(groups) => groups,
            Err(e) => return Reply::Now(SyncResult::error(e)),
        };
        let Some(group) = groups.get_mut(group_id) else {
            return Reply::Now(SyncResult::error(GroupError::UnknownMemberId));
        };
        if group.consumer.is_some() {
            let member = (generation, member_id);
            return Reply::Now(self.classic_sync_to_consumer_group(
                group,
                member,
                protocol_type,
                protocol,
                now,
            ));
        }
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
        match group.state() {
            GroupState::Empty | GroupState::Dead => {
                Reply::Now(SyncResult::error(GroupError::UnknownMemberId))
            }
            GroupState::PreparingRebalance => {
                Reply::Now(SyncResult::error(GroupError::RebalanceInProgress))
            }
            GroupState::Stable => {
                let assignment = group
                    .member_mut(member_id)
                    .map(|m| {
                        m.last_heartbeat_ms = now;
                        m.assignment.clone()
                    })
                    .unwrap_or_default();
                Reply::Now(group.sync_result(assignment))
            }
            GroupState::CompletingRebalance => {
                self.await_assignment(group, member_id, assignments, now)
            }
        }
    }

    /// In CompletingRebalance every member waits for its assignment; the
    /// leader's SyncGroup brings them all.
    fn await_assignment(
        &self,
        group: &mut Group,
        member_id: &str,
        assignments: Vec<(String, Bytes)>,
        now: i64,
    ) -> Reply<SyncResult> {
        let (tx, rx) = oneshot::channel();
        if let Some(m) = group.member_mut(member_id) {
            m.last_heartbeat_ms = now;
            if let Some(old) = m.sync_waiter.replace(tx) {
                let _ = old.send(SyncResult::error(GroupError::RebalanceInProgress));
            }
        }
        if group.is_leader(member_id) {
            self.apply_assignment(group, assignments, now);
        }
        Reply::Wait(rx)
    }

    /// The leader's assignment is durable before anyone is told about it; if
    /// it cannot be written, every waiting member gets the error and the group
    /// rebalances again.
    fn apply_assignment(&self, group: &mut Group, assignments: Vec<(String, Bytes)>, now: i64) {
        let mut by_member: HashMap<String, Bytes> = assignments.into_iter().collect();
        for m in &mut group.members {
            m.assignment = by_member.remove(&m.id).unwrap_or_default();
        }
        if let Err(e) = self.runtime.persist_group(group) {
            for m in &mut group.members {
                m.assignment = Bytes::new();
            }
            fail_syncs(group, &e);
            // A refused transition is logged by `transition`.
            let _ = self.prepare_rebalance(group, now);
            return;
        }
        if let Err(e) = group.transition(GroupState::Stable, now) {
            fail_syncs(group, &e.into());
            return;
        }
        tracing::info!(group = %group.id, generation = group.generation, "group is stable");
        for m in &mut group.members {
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncResult {
                    error: None,
                    protocol_type: group.protocol_type.clone(),
                    protocol: group.protocol.clone(),
                    assignment: m.assignment.clone(),
                });
            }
        }
    }

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
        let now = self.now();
        let mut groups = self.runtime.lock_ready(group_id)?;
        let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMemberId)?;
        if group.consumer.is_some() {
            let member = (generation, member_id);
            return self.classic_heartbeat_to_consumer_group(group, member, instance_id, now);
        }
        if group.fences(instance_id, member_id) {
            return Err(GroupError::FencedInstanceId);
        }
        let state = group.state();
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

    /// LeaveGroup for (member id, instance id) pairs; one result per member.
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_MEMBER_ID for an unknown group,
    /// and a refused state transition (a bug) after members left.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Option<GroupError>>, GroupError> {
        let now = self.now();
        let mut groups = self.runtime.lock_ready(group_id)?;
        let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMemberId)?;
        if group.consumer.is_some() {
            return self.leave_consumer_group(group, members, now);
        }
        let mut results = Vec::with_capacity(members.len());
        for (member_id, instance) in members {
            results.push(remove_leaving_member(group, member_id, instance.as_deref()).err());
        }
        if results.iter().any(Option::is_none) {
            self.after_member_removed(group, now)?;
        }
        Ok(results)
    }

    /// Expire the members whose session ran out, and complete the join round
    /// if its time came.
    pub(super) fn expire_members(&self, group: &mut Group, now: i64) {
        let before = group.members.len();
        let expired: Vec<String> =
            group.members.iter().filter(|m| !m.alive_at(now)).map(|m| m.id.clone()).collect();
        if !expired.is_empty() {
            group.members.retain(|m| m.alive_at(now));
            tracing::info!(group = %group.id, members = ?expired, "member session expired");
        }
        // A refused transition is logged by `transition`; the group stays as it was.
        if group.members.len() < before {
            let _ = self.after_member_removed(group, now);
        }
        let _ = self.maybe_complete_join(group, now);
    }

    fn after_member_removed(&self, group: &mut Group, now: i64) -> Result<(), GroupStateError> {
        match group.state() {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(group, now)?;
                self.maybe_complete_join(group, now)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(group, now),
            GroupState::Empty | GroupState::Dead => Ok(()),
        }
    }
}

/// Find the group's join target: a join naming a member id needs an existing
/// group; a new group id creates an Empty group; a Dead one is unavailable.
fn join_target<'a>(
    groups: &'a mut HashMap<String, Group>,
    req: &JoinRequest,
    now: i64,
) -> Result<&'a mut Group, GroupError> {
    if !req.member_id.is_empty() && !groups.contains_key(&req.group_id) {
        return Err(GroupError::UnknownMemberId);
    }
    let group =
        groups.entry(req.group_id.clone()).or_insert_with(|| Group::new(&req.group_id, now));
    if group.state() == GroupState::Dead {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    Ok(group)
}

/// Hand the static member at `index` the new member id `new_id`, fencing the
/// old instance's waiting requests and taking the request's settings. Returns
/// whether its protocols are unchanged.
fn replace_static_member(
    group: &mut Group,
    index: usize,
    new_id: &str,
    req: &JoinRequest,
    now: i64,
) -> bool {
    let old = &mut group.members[index];
    let old_id = std::mem::replace(&mut old.id, new_id.to_string());
    if let Some(w) = old.join_waiter.take() {
        let _ = w.send(JoinResult::error(GroupError::FencedInstanceId, old_id.clone()));
    }
    if let Some(w) = old.sync_waiter.take() {
        let _ = w.send(SyncResult::error(GroupError::FencedInstanceId));
    }
    let unchanged = old.protocols == req.protocols;
    old.protocols = req.protocols.clone();
    old.session_timeout_ms = req.session_timeout_ms;
    old.rebalance_timeout_ms = req.rebalance_timeout_ms;
    old.last_heartbeat_ms = now;
    if group.is_leader(&old_id) {
        group.leader = Some(new_id.to_string());
    }
    let instance = req.group_instance_id.as_deref().unwrap_or_default();
    tracing::info!(group = %group.id, %instance, old = %old_id, new = %new_id, "static member rejoined");
    unchanged
}

/// Take the join's settings for the member. Returns (protocols changed, is
/// the leader).
fn refresh_member(group: &mut Group, member_id: &str, req: &JoinRequest, now: i64) -> (bool, bool) {
    let is_leader = group.is_leader(member_id);
    let m = group.member_mut(member_id).expect("member present");
    let changed = m.protocols != req.protocols;
    m.protocols = req.protocols.clone();
    m.protocol_type = req.protocol_type.clone();
    m.session_timeout_ms = req.session_timeout_ms;
    m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    m.last_heartbeat_ms = now;
    (changed, is_leader)
}

/// Answer every waiting SyncGroup with `e`.
fn fail_syncs(group: &mut Group, e: &GroupError) {
    for m in &mut group.members {
        if let Some(w) = m.sync_waiter.take() {
            let _ = w.send(SyncResult::error(e.clone()));
        }
    }
}

/// Remove one leaving member (by instance id when given, else by member id)
/// and answer its waiting requests.
///
/// # Errors
/// FENCED_INSTANCE_ID when the instance belongs to another member id;
/// UNKNOWN_MEMBER_ID when no member matches.
fn remove_leaving_member(
    group: &mut Group,
    member_id: &str,
    instance: Option<&str>,
) -> Result<(), GroupError> {
    let position = match instance {
        Some(inst) => {
            match group.members.iter().position(|m| m.instance_id.as_deref() == Some(inst)) {
                Some(i) if member_id.is_empty() || group.members[i].id == member_id => Some(i),
                Some(_) => return Err(GroupError::FencedInstanceId),
                None => None,
            }
        }
        None => group.members.iter().position(|m| m.id == member_id),
    };
    let i = position.ok_or(GroupError::UnknownMemberId)?;
    let m = group.members.remove(i);
    if let Some(w) = m.join_waiter {
        let _ = w.send(JoinResult::error(GroupError::UnknownMemberId, m.id.clone()));
    }
    if let Some(w) = m.sync_waiter {
        let _ = w.send(SyncResult::error(GroupError::UnknownMemberId));
    }
    tracing::info!(group = %group.id, member = %m.id, "member left");
    Ok(())
}

#[cfg(test)]
#[path = "membership_tests.rs"]
pub(super) mod tests;

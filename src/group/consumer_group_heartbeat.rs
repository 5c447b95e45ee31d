//! ConsumerGroupHeartbeat (KIP-848): joining, staying in, and leaving a
//! consumer group, and the session expiry that fences silent members
//! (Kafka's `GroupMetadataManager.consumerGroupHeartbeat`).
//!
//! One heartbeat, under the groups' lock:
//! 1. The member is found or created: epoch 0 joins (a static member whose
//!    instance left with epoch -2 is replaced by the new member id and keeps
//!    its assignment); a positive epoch must be the member's current one (or
//!    the previous one, with owned partitions within the assignment: the
//!    answer carrying the bump may have been lost), else FENCED_MEMBER_EPOCH.
//! 2. Its metadata is updated; a changed subscription, a new member, or a
//!    change in the subscribed topics' partitions bumps the group epoch.
//! 3. When the group epoch is ahead of the assignment epoch, the assignor
//!    computes a new target assignment for every member.
//! 4. The member is reconciled (`CurrentAssignmentBuilder`).
//! 5. Every record of the change is appended to `__consumer_offsets` in one
//!    batch; only then is the change installed and the member answered. A
//!    failed append changes nothing.
//!
//! The change is built on a copy of the group, so an error at any step
//! leaves the group as it was.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::assignor::{self, MemberSubscription, PartitionAssignor};
use super::consumer_group::{ConsumerGroup, ConsumerGroupMember, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use super::consumer_group_records::{Assignment, MemberMetadataValue, TopicMetadata};
use super::coordinator::GroupCoordinator;
use super::current_assignment_builder::{CurrentAssignmentBuilder, MemberState};
use super::error::GroupError;
use super::group_metadata::Group;
use super::schema::{OffsetsRecord, RecordKey};

/// A ConsumerGroupHeartbeat, as the handler decoded it.
#[derive(Debug, Clone, Default)]
pub struct ConsumerHeartbeat {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member owns (`None`: not sent).
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
    /// The request version (v1+: the client always names its member id).
    pub version: i16,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent when the member joined, sent a full request, or its assignment changed.
    pub assignment: Option<Assignment>,
}

impl GroupCoordinator {
    /// ConsumerGroupHeartbeat (the module doc's steps).
    ///
    /// # Errors
    /// INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, GROUP_ID_NOT_FOUND (a non-empty
    /// classic group), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
    /// FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
    /// storage errors.
    pub fn consumer_heartbeat(
        &self,
        req: &ConsumerHeartbeat,
    ) -> Result<ConsumerHeartbeatResult, GroupError> {
        self.validate_consumer_heartbeat(req)?;
        let now = self.now();
        let mut groups = self.runtime.lock_ready(&req.group_id)?;
        if req.member_epoch < 0 {
            return self.consumer_leave(&mut groups, req);
        }
        let mut records = Vec::new();
        let mut cg = self.consumer_group_for(&groups, req, &mut records)?;
        let member_id = if req.member_id.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            req.member_id.clone()
        };
        let before = self.resolve_member(&mut cg, req, &member_id, now, &mut records)?;
        let mut member = before.clone();
        member.metadata = updated_metadata(&before.metadata, req);
        let member = self
            .update_member(
                &req.group_id,
                &mut cg,
                &before,
                member,
                req.owned.as_ref(),
                now,
                &mut records,
            )
            .map_err(|()| GroupError::FencedMemberEpoch)?;
        let full = req.member_epoch == 0
            || (req.rebalance_timeout_ms != -1
                && req.subscribed_topic_names.is_some()
                && req.owned.is_some());
        let assignment = (full || member.assignment.assigned != before.assignment.assigned)
            .then(|| member.assignment.assigned.clone());
        let result = ConsumerHeartbeatResult {
            member_id: member_id.clone(),
            member_epoch: member.epoch(),
            heartbeat_interval_ms: self.consumer_heartbeat_interval_ms(&req.group_id),
            assignment,
        };
        cg.members.insert(member_id, member);
        self.runtime.append(&req.group_id, &records)?;
        install(&mut groups, &req.group_id, cg, now);
        Ok(result)
    }

    /// Steps 2 to 4 for a member of either protocol: take its updated
    /// metadata, bump the group epoch when a subscription or the subscribed
    /// topics changed, compute a new target if due, and reconcile the member
    /// with the partitions it says it owns. Records are added to `records`;
    /// the member is returned, not installed.
    ///
    /// # Errors
    /// The member must give up its partitions and rejoin (Kafka's fencing).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn update_member(
        &self,
        group_id: &str,
        cg: &mut ConsumerGroup,
        before: &ConsumerGroupMember,
        mut member: ConsumerGroupMember,
        owned: Option<&Assignment>,
        now: i64,
        records: &mut Vec<OffsetsRecord>,
    ) -> Result<ConsumerGroupMember, ()> {
        let member_id = member.member_id.clone();
        let subscription_changed = member.metadata.subscribed_topic_names
            != before.metadata.subscribed_topic_names
            || member.metadata.subscribed_topic_regex != before.metadata.subscribed_topic_regex;
        if member.metadata != before.metadata || !cg.members.contains_key(&member_id) {
            records.extend(ConsumerGroup::member_records(group_id, &member));
        }
        member.last_heartbeat_ms = now;
        cg.members.insert(member_id.clone(), member);
        let metadata = self.subscription_metadata(cg);
        let mut bump = subscription_changed;
        if metadata != cg.subscription_metadata {
            records.push(ConsumerGroup::partition_metadata_record(group_id, &metadata));
            cg.subscription_metadata = metadata;
            bump = true;
        }
        if bump {
            cg.group_epoch += 1;
            records.push(ConsumerGroup::epoch_record(group_id, cg.group_epoch));
        }
        if cg.group_epoch > cg.assignment_epoch {
            self.update_target_assignment(group_id, cg, records);
        }
        reconcile(group_id, cg, &member_id, owned, now, records)
    }

    /// Kafka's request checks, before any group is touched.
    fn validate_consumer_heartbeat(&self, req: &ConsumerHeartbeat) -> Result<(), GroupError> {
        let invalid = |m: &str| Err(GroupError::InvalidRequest(m.to_string()));
        if req.group_id.is_empty() {
            return invalid("GroupId can't be empty.");
        }
        if req.instance_id.as_deref() == Some("") {
            return invalid("InstanceId can't be empty.");
        }
        if req.rack_id.as_deref() == Some("") {
            return invalid("RackId can't be empty.");
        }
        if (req.version >= 1 || req.member_epoch != 0) && req.member_id.is_empty() {
            return invalid("MemberId can't be empty.");
        }
        match req.member_epoch {
            0 => {
                if req.rebalance_timeout_ms <= 0 {
                    return invalid("RebalanceTimeoutMs must be provided in first request.");
                }
                if req.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                    return invalid("TopicPartitions must be empty when (re-)joining.");
                }
                if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                    return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.");
                }
            }
            LEAVE_GROUP_STATIC_MEMBER_EPOCH if req.instance_id.is_none() => {
                return invalid("InstanceId can't be null.");
            }
            e if e < LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
                return invalid("MemberEpoch is invalid.");
            }
            _ => {}
        }
        if let Some(r) = req.subscribed_topic_regex.as_deref().filter(|r| !r.is_empty()) {
            topic_regex(r).map_err(GroupError::InvalidRegularExpression)?;
        }
        if let Some(name) = &req.server_assignor {
            if !self.config.consumer_assignors.iter().any(|a| a == name) {
                return Err(GroupError::UnsupportedAssignor(name.clone()));
            }
        }
        Ok(())
    }

    /// Step 1: the member the heartbeat is for, as it was before this
    /// heartbeat (a new member is blank at epoch 0).
    fn resolve_member(
        &self,
        cg: &mut ConsumerGroup,
        req: &ConsumerHeartbeat,
        member_id: &str,
        now: i64,
        records: &mut Vec<OffsetsRecord>,
    ) -> Result<ConsumerGroupMember, GroupError> {
        if req.member_epoch > 0 {
            let member = cg.members.get(member_id).ok_or(GroupError::UnknownMemberId)?;
            if let Some(instance) = &req.instance_id {
                match cg.static_member(instance) {
                    None => return Err(GroupError::UnknownMemberId),
                    Some(m) if m.member_id != member_id => {
                        return Err(GroupError::FencedInstanceId)
                    }
                    Some(_) => {}
                }
            }
            check_member_epoch(member, req.member_epoch, req.owned.as_ref())?;
            return Ok(member.clone());
        }
        let existing = req.instance_id.as_deref().and_then(|i| cg.static_member(i)).cloned();
        if let Some(old) = existing.filter(|old| old.member_id != member_id) {
            // A classic static member never leaves explicitly: a consumer
            // of the other protocol takes its place at once (Kafka's rule),
            // which is how a static member is rolled to this protocol.
            if old.epoch() != LEAVE_GROUP_STATIC_MEMBER_EPOCH && !old.is_classic() {
                return Err(GroupError::UnreleasedInstanceId);
            }
            return Ok(replace_static_member(&req.group_id, cg, old, member_id, records));
        }
        if let Some(m) = cg.members.get(member_id) {
            return Ok(m.clone());
        }
        if cg.members.len() >= self.config.consumer_max_size {
            return Err(GroupError::GroupMaxSizeReached);
        }
        Ok(ConsumerGroupMember::new(member_id, now))
    }

    /// The subscribed topics that exist (named, or matching a member's
    /// regular expression), with their ids and partition counts.
    fn subscription_metadata(&self, cg: &ConsumerGroup) -> BTreeMap<String, TopicMetadata> {
        let all = self.topic_names_for_regex(cg);
        let mut names: BTreeSet<String> = cg.subscribed_topic_names().into_iter().collect();
        for m in cg.members.values() {
            names.extend(regex_matches(&m.metadata, &all));
        }
        names
            .into_iter()
            .filter_map(|name| {
                let (id, partitions) = self.catalog().topic(&name)?;
                Some((name.clone(), TopicMetadata { id, name, partitions }))
            })
            .collect()
    }

    /// Every topic a regular expression may match (none of the internal
    /// ones); empty when no member subscribes by one.
    fn topic_names_for_regex(&self, cg: &ConsumerGroup) -> Vec<String> {
        if cg.members.values().all(|m| m.metadata.subscribed_topic_regex.is_none()) {
            return vec![];
        }
        let mut names: Vec<String> = self
            .catalog()
            .topic_names()
            .into_iter()
            .filter(|n| !INTERNAL_TOPICS.contains(&n.as_str()))
            .collect();
        names.sort_unstable();
        names
    }

    /// Step 3: a new target assignment at the group epoch; records for the
    /// members whose target changed, then the assignment epoch.
    fn update_target_assignment(
        &self,
        group_id: &str,
        cg: &mut ConsumerGroup,
        records: &mut Vec<OffsetsRecord>,
    ) {
        let assignor = self.preferred_assignor(cg);
        let by_name: HashMap<&str, &TopicMetadata> =
            cg.subscription_metadata.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let all = self.topic_names_for_regex(cg);
        let members: Vec<MemberSubscription> = cg
            .members
            .values()
            .map(|m| MemberSubscription {
                member_id: m.member_id.clone(),
                topics: m
                    .metadata
                    .subscribed_topic_names
                    .iter()
                    .cloned()
                    .chain(regex_matches(&m.metadata, &all))
                    .filter_map(|n| by_name.get(n.as_str()).map(|t| t.id))
                    .collect(),
                current: cg.target.get(&m.member_id).cloned().unwrap_or_default(),
            })
            .collect();
        let partitions = cg.subscription_metadata.values().map(|t| (t.id, t.partitions)).collect();
        let target = assignor.assign(&members, &partitions);
        for (id, a) in &target {
            if cg.target.get(id) != Some(a) {
                records.push(ConsumerGroup::target_member_record(group_id, id, a));
            }
        }
        cg.target = target;
        cg.assignment_epoch = cg.group_epoch;
        records.push(ConsumerGroup::target_epoch_record(group_id, cg.assignment_epoch));
        tracing::info!(group = %group_id, epoch = cg.assignment_epoch, assignor = assignor.name(),
            members = cg.members.len(), "computed a new target assignment");
    }

    pub(super) fn preferred_assignor_name(&self, cg: &ConsumerGroup) -> String {
        self.preferred_assignor(cg).name().to_string()
    }

    /// The assignor most members ask for, else the first of
    /// `group.consumer.assignors`.
    fn preferred_assignor(&self, cg: &ConsumerGroup) -> &'static dyn PartitionAssignor {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in cg.members.values() {
            if let Some(a) = &m.metadata.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        let voted = votes.iter().max_by_key(|(_, n)| **n).map(|(a, _)| *a);
        voted
            .into_iter()
            .chain(self.config.consumer_assignors.iter().map(String::as_str))
            .find_map(assignor::by_name)
            .unwrap_or(&assignor::UniformAssignor)
    }

    /// A member leaving (epoch -1), or a static member leaving for now (-2).
    fn consumer_leave(
        &self,
        groups: &mut HashMap<String, Group>,
        req: &ConsumerHeartbeat,
    ) -> Result<ConsumerHeartbeatResult, GroupError> {
        let group = groups.get_mut(&req.group_id).ok_or(GroupError::GroupIdNotFound)?;
        let mut cg = group.consumer.clone().ok_or(GroupError::GroupIdNotFound)?;
        let member = match &req.instance_id {
            None => cg.members.get(&req.member_id).ok_or(GroupError::UnknownMemberId)?,
            Some(instance) => {
                let m = cg.static_member(instance).ok_or(GroupError::UnknownMemberId)?;
                if m.member_id != req.member_id {
                    return Err(GroupError::FencedInstanceId);
                }
                m
            }
        };
        let mut member = member.clone();
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            member.assignment.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
            member.assignment.pending_revocation.clear();
            let record = ConsumerGroup::current_assignment_record(&req.group_id, &member);
            cg.members.insert(member.member_id.clone(), member);
            self.runtime.append(&req.group_id, &[record])?;
            group.consumer = Some(cg);
        } else {
            let records = remove_member(&req.group_id, &mut cg, &req.member_id);
            self.remove_or_downgrade(group, cg, records, self.now())?;
        }
        tracing::info!(group = %req.group_id, member = %req.member_id, epoch = req.member_epoch,
            "member left the consumer group");
        Ok(ConsumerHeartbeatResult {
            member_id: req.member_id.clone(),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// Fence the members of consumer groups whose session ran out (or that
    /// did not revoke within their rebalance timeout).
    pub(super) fn expire_consumer_members(&self, group: &mut Group, now: i64) {
        let Some(cg) = &group.consumer else { return };
        let session = self.consumer_session_timeout_ms(&group.id);
        let expired: Vec<String> = cg
            .members
            .values()
            .filter(|m| m.expired_at(now, session))
            .map(|m| m.member_id.clone())
            .collect();
        if expired.is_empty() {
            return;
        }
        let mut cg = cg.clone();
        let mut records = Vec::new();
        for id in &expired {
            records.extend(remove_member(&group.id, &mut cg, id));
        }
        match self.remove_or_downgrade(group, cg, records, now) {
            Ok(()) => {
                tracing::info!(group = %group.id, members = ?expired, "fenced consumer group members: session, rebalance, join or sync timeout");
            }
            Err(e) => tracing::warn!(group = %group.id, "fencing expired members: {e}"),
        }
    }
}

/// Topics a regular expression subscription never matches.
const INTERNAL_TOPICS: [&str; 2] = [super::OFFSETS_TOPIC, "__transaction_state"];

/// The largest compiled regular expression a member may subscribe with.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A subscription's regular expression, matching whole topic names (as
/// Kafka's RE2/J `matches`); its compiled size is bounded.
fn topic_regex(r: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(&format!("^(?:{r})$"))
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| format!("Invalid regular expression {r}: {e}"))
}

/// The topics of `all` the member's regular expression matches.
fn regex_matches(m: &MemberMetadataValue, all: &[String]) -> Vec<String> {
    let Some(re) = m.subscribed_topic_regex.as_deref().and_then(|r| topic_regex(r).ok()) else {
        return vec![];
    };
    all.iter().filter(|t| re.is_match(t)).cloned().collect()
}

impl GroupCoordinator {
    /// The consumer group of a heartbeat, as a copy to change. A new group,
    /// or an empty classic group (offsets only), becomes a consumer group on
    /// a join; a classic group with members is upgraded (`group_migration`).
    fn consumer_group_for(
        &self,
        groups: &HashMap<String, Group>,
        req: &ConsumerHeartbeat,
        records: &mut Vec<OffsetsRecord>,
    ) -> Result<ConsumerGroup, GroupError> {
        let joining = req.member_epoch == 0;
        let Some(group) = groups.get(&req.group_id) else {
            return if joining {
                Ok(ConsumerGroup::default())
            } else {
                Err(GroupError::UnknownMemberId)
            };
        };
        if let Some(cg) = &group.consumer {
            return Ok(cg.clone());
        }
        if !joining {
            return Err(GroupError::NotFound(format!(
                "Group {} is not a consumer group.",
                req.group_id
            )));
        }
        if !group.is_empty() {
            return self.upgrade_classic_group(group, records);
        }
        if group.generation > 0 || group.protocol_type.is_some() {
            // The empty classic group's metadata goes; its offsets stay.
            records
                .push(OffsetsRecord::tombstone(RecordKey::Group { group: req.group_id.clone() }));
        }
        Ok(ConsumerGroup::default())
    }
}

/// Install the changed consumer group (creating the group entry if new).
fn install(groups: &mut HashMap<String, Group>, id: &str, cg: ConsumerGroup, now: i64) {
    let group = groups.entry(id.to_string()).or_insert_with(|| Group::new(id, now));
    if group.consumer.is_none() {
        group.end_classic_membership(now);
    }
    group.consumer = Some(cg);
}

fn updated_metadata(old: &MemberMetadataValue, req: &ConsumerHeartbeat) -> MemberMetadataValue {
    let mut m = old.clone();
    if req.instance_id.is_some() {
        m.instance_id = req.instance_id.clone();
    }
    if req.rack_id.is_some() {
        m.rack_id = req.rack_id.clone();
    }
    if req.rebalance_timeout_ms > 0 {
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if req.server_assignor.is_some() {
        m.server_assignor = req.server_assignor.clone();
    }
    if let Some(names) = &req.subscribed_topic_names {
        let mut names = names.clone();
        names.sort_unstable();
        names.dedup();
        m.subscribed_topic_names = names;
    }
    if let Some(regex) = &req.subscribed_topic_regex {
        m.subscribed_topic_regex = (!regex.is_empty()).then(|| regex.clone());
    }
    m.client_id = req.client_id.clone();
    m.client_host = req.client_host.clone();
    // It speaks the consumer protocol now, whatever it did before.
    m.classic = None;
    m
}

/// Kafka's epoch check for a member heartbeating with a positive epoch.
fn check_member_epoch(
    member: &ConsumerGroupMember,
    received: i32,
    owned: Option<&Assignment>,
) -> Result<(), GroupError> {
    let a = &member.assignment;
    if received > a.member_epoch {
        return Err(GroupError::FencedMemberEpoch);
    }
    if received < a.member_epoch {
        let subset = owned.is_some_and(|o| {
            o.iter().all(|(t, ps)| {
                a.assigned.get(t).is_some_and(|mine| ps.is_subset(mine)) || ps.is_empty()
            })
        });
        if received != a.previous_member_epoch || !subset {
            return Err(GroupError::FencedMemberEpoch);
        }
    }
    Ok(())
}

/// A static member rejoining under a new member id takes over the old
/// member's metadata, target and assignment (at epoch 0); the old one goes.
pub(super) fn replace_static_member(
    group_id: &str,
    cg: &mut ConsumerGroup,
    old: ConsumerGroupMember,
    member_id: &str,
    records: &mut Vec<OffsetsRecord>,
) -> ConsumerGroupMember {
    records.extend(ConsumerGroup::member_tombstones(group_id, &old.member_id));
    cg.members.remove(&old.member_id);
    let target = cg.target.remove(&old.member_id).unwrap_or_default();
    records.push(ConsumerGroup::target_member_record(group_id, member_id, &target));
    cg.target.insert(member_id.to_string(), target);
    let mut member = ConsumerGroupMember { member_id: member_id.to_string(), ..old };
    member.assignment.member_epoch = 0;
    member.assignment.previous_member_epoch = 0;
    member.assignment.state = MemberState::Stable;
    // Its partitions count from the new member's epoch.
    member.assignment_epochs.values_mut().for_each(|e| *e = 0);
    records.extend(ConsumerGroup::member_records(group_id, &member));
    records.push(ConsumerGroup::current_assignment_record(group_id, &member));
    member
}

/// Step 4: the member's next assignment (a record when it changed).
fn reconcile(
    group_id: &str,
    cg: &ConsumerGroup,
    member_id: &str,
    owned: Option<&Assignment>,
    now: i64,
    records: &mut Vec<OffsetsRecord>,
) -> Result<ConsumerGroupMember, ()> {
    let Some(member) = cg.members.get(member_id) else { return Err(()) };
    let empty = Assignment::new();
    let held = |t: &[u8; 16], p: i32| cg.held_by_other(member_id, t, p);
    let next = CurrentAssignmentBuilder {
        member: &member.assignment,
        target_epoch: cg.assignment_epoch,
        target: cg.target.get(member_id).unwrap_or(&empty),
        owned,
        held_by_other: &held,
    }
    .build()
    .map_err(|_| ())?;
    let mut updated = member.clone();
    if next != member.assignment {
        let was_revoking = member.assignment.state == MemberState::UnrevokedPartitions;
        updated.set_assignment(next);
        updated.revocation_deadline_ms =
            match (updated.assignment.state == MemberState::UnrevokedPartitions, was_revoking) {
                (true, true) => member.revocation_deadline_ms,
                // A classic member has its join and sync deadlines instead.
                (true, false) if !updated.is_classic() => {
                    Some(now + i64::from(updated.metadata.rebalance_timeout_ms.max(0)))
                }
                (true, false) => None,
                (false, _) => None,
            };
        records.push(ConsumerGroup::current_assignment_record(group_id, &updated));
    }
    Ok(updated)
}

/// Remove a member for good: tombstones, and a group epoch bump so the
/// others' targets are recomputed.
pub(super) fn remove_member(
    group_id: &str,
    cg: &mut ConsumerGroup,
    member_id: &str,
) -> Vec<OffsetsRecord> {
    cg.members.remove(member_id);
    cg.target.remove(member_id);
    cg.group_epoch += 1;
    let mut records = ConsumerGroup::member_tombstones(group_id, member_id);
    records.push(ConsumerGroup::epoch_record(group_id, cg.group_epoch));
    records
}

#[cfg(test)]
#[path = "consumer_group_heartbeat_tests.rs"]
mod tests;

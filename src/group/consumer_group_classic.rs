//! Members of a consumer group that speak the classic protocol (KIP-848
//! online migration; Kafka's `classicGroup*ToConsumerGroup`): their
//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup, served by the consumer
//! group's own reconciliation.
//!
//! * A JoinGroup is one reconciliation step: the member's subscription (its
//!   first protocol's metadata) updates the group like a heartbeat would,
//!   and the partitions its subscription says it still owns acknowledge
//!   revocations (eager clients own nothing when they rejoin). It is
//!   answered at once, never parked: generation = the member epoch, the
//!   member's first protocol, no leader and no member list, so every
//!   classic client is a follower. The assignor runs on the broker.
//! * A SyncGroup returns the member's assigned partitions (never one pending
//!   revocation or still held by another member) as a ConsumerProtocolAssignment.
//! * A Heartbeat answers REBALANCE_IN_PROGRESS while the member has a step to
//!   take: a newer group epoch (its join computes the target if nobody did),
//!   partitions to revoke, or partitions it waited for that are free now.
//!   The member then rejoins.
//! * Session: the member's own classic session timeout. After being told to
//!   rejoin, and after a join until its sync, it has its rebalance timeout
//!   (Kafka's join and sync timers), else it is fenced.
//! * A classic member never holds a partition another member holds: the
//!   consumer group's invariant is kept by the same builder.

use super::classic_protocol::{JoinRequest, JoinResult, SyncResult};
use super::consumer_group::{ConsumerGroup, ConsumerGroupMember};
use super::consumer_group_heartbeat::{remove_member, replace_static_member};
use super::consumer_group_records::{Assignment, ClassicMemberMetadata, MemberMetadataValue};
use super::consumer_protocol;
use super::coordinator::GroupCoordinator;
use super::current_assignment_builder::MemberState;
use super::error::GroupError;
use super::group_metadata::Group;
use super::schema::OffsetsRecord;

impl GroupCoordinator {
    /// JoinGroup from a classic member to a consumer group with members.
    ///
    /// # Errors
    /// INCONSISTENT_GROUP_PROTOCOL (not the consumer protocol type, no
    /// protocol the group's classic members all support, or a malformed
    /// subscription), UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
    /// GROUP_MAX_SIZE_REACHED, storage errors. MEMBER_ID_REQUIRED comes back
    /// as an answer carrying the new id.
    pub(super) fn classic_join_to_consumer_group(
        &self,
        group: &mut Group,
        req: &JoinRequest,
        now: i64,
    ) -> Result<JoinResult, GroupError> {
        let mut cg = group.consumer.clone().ok_or(GroupError::UnknownMemberId)?;
        if req.protocol_type != "consumer" || !supports_protocols(&cg, req) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let member_id = if req.member_id.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            req.member_id.clone()
        };
        if req.member_id.is_empty()
            && req.group_instance_id.is_none()
            && req.require_known_member_id
        {
            return Ok(JoinResult::error(GroupError::MemberIdRequired, member_id));
        }
        let (protocol, metadata) = req.protocols.first().cloned().unwrap_or_default();
        let subscription = consumer_protocol::decode_subscription(&metadata)
            .map_err(|_| GroupError::InconsistentGroupProtocol)?;
        let mut records = Vec::new();
        let before = self.classic_joiner(&group.id, &mut cg, req, &member_id, &mut records)?;
        let mut member = before.clone();
        member.metadata =
            classic_metadata(&before.metadata, req, subscription.topics, subscription.rack_id);
        let owned = self.by_topic_id(&subscription.owned);
        let mut member = self
            .update_member(&group.id, &mut cg, &before, member, Some(&owned), now, &mut records)
            .map_err(|()| GroupError::UnknownMemberId)?;
        // It has its rebalance timeout to sync.
        member.classic_deadline_ms = Some(now + i64::from(member.metadata.rebalance_timeout_ms));
        let result = JoinResult {
            error: None,
            generation: member.epoch(),
            protocol_type: Some("consumer".to_string()),
            protocol: Some(protocol),
            leader: String::new(),
            member_id: member_id.clone(),
            members: vec![],
            skip_assignment: false,
        };
        cg.members.insert(member_id, member);
        self.runtime.append(&group.id, &records)?;
        group.consumer = Some(cg);
        Ok(result)
    }

    /// The member a classic join is for, as it was before the join: a
    /// known member, a static member's new instance (taking over the old
    /// one's assignment), or a new member.
    fn classic_joiner(
        &self,
        group_id: &str,
        cg: &mut ConsumerGroup,
        req: &JoinRequest,
        member_id: &str,
        records: &mut Vec<OffsetsRecord>,
    ) -> Result<ConsumerGroupMember, GroupError> {
        let existing = match &req.group_instance_id {
            Some(instance) => match cg.static_member(instance).cloned() {
                Some(old) if req.member_id.is_empty() && old.member_id != member_id => {
                    return Ok(replace_static_member(group_id, cg, old, member_id, records));
                }
                Some(old) if old.member_id == member_id => Some(old),
                Some(_) => return Err(GroupError::FencedInstanceId),
                None if !req.member_id.is_empty() => return Err(GroupError::UnknownMemberId),
                None => None,
            },
            None => cg.members.get(member_id).cloned(),
        };
        if let Some(member) = existing {
            return Ok(member);
        }
        if cg.members.len() >= self.config.consumer_max_size {
            return Err(GroupError::GroupMaxSizeReached);
        }
        Ok(ConsumerGroupMember::new(member_id, self.now()))
    }

    /// SyncGroup from a classic member of a consumer group: its assignment,
    /// or REBALANCE_IN_PROGRESS when it has a step to take first.
    pub(super) fn classic_sync_to_consumer_group(
        &self,
        group: &mut Group,
        (generation, member_id): (i32, &str),
        protocol_type: Option<&str>,
        protocol: Option<&str>,
        now: i64,
    ) -> SyncResult {
        let Some(cg) = group.consumer.as_mut() else {
            return SyncResult::error(GroupError::UnknownMemberId);
        };
        let group_epoch = cg.group_epoch;
        let Some(m) = cg.members.get_mut(member_id).filter(|m| m.is_classic()) else {
            return SyncResult::error(GroupError::UnknownMemberId);
        };
        if generation != m.epoch() {
            return SyncResult::error(GroupError::IllegalGeneration);
        }
        let first = first_protocol(m);
        if protocol_type.is_some_and(|t| t != "consumer")
            || protocol.is_some_and(|p| Some(p) != first.as_deref())
        {
            return SyncResult::error(GroupError::InconsistentGroupProtocol);
        }
        if group_epoch > m.epoch() && m.assignment.state != MemberState::UnrevokedPartitions {
            told_to_rejoin(m, now);
            return SyncResult::error(GroupError::RebalanceInProgress);
        }
        m.classic_deadline_ms = None;
        m.last_heartbeat_ms = now;
        let version = subscription_version(m);
        let assigned = m.assignment.assigned.clone();
        let assignment =
            consumer_protocol::encode_assignment(version, &self.by_topic_name(&assigned));
        SyncResult {
            error: None,
            protocol_type: Some("consumer".to_string()),
            protocol: first,
            assignment,
        }
    }

    /// Heartbeat from a classic member of a consumer group.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, and
    /// REBALANCE_IN_PROGRESS when it must rejoin.
    pub(super) fn classic_heartbeat_to_consumer_group(
        &self,
        group: &mut Group,
        (generation, member_id): (i32, &str),
        instance_id: Option<&str>,
        now: i64,
    ) -> Result<(), GroupError> {
        let cg = group.consumer.as_mut().ok_or(GroupError::UnknownMemberId)?;
        if let Some(instance) = instance_id {
            let owner = cg.static_member(instance).ok_or(GroupError::UnknownMemberId)?;
            if owner.member_id != member_id {
                return Err(GroupError::FencedInstanceId);
            }
        }
        let m = cg.members.get(member_id).filter(|m| m.is_classic());
        let m = m.ok_or(GroupError::UnknownMemberId)?;
        if generation != m.epoch() {
            return Err(GroupError::IllegalGeneration);
        }
        // Against the group epoch, not the assignment's: after a member
        // left, nobody may heartbeat the target forward but a classic
        // member's join.
        let rejoin = m.epoch() < cg.group_epoch
            || m.assignment.state == MemberState::UnrevokedPartitions
            || (m.assignment.state == MemberState::UnreleasedPartitions
                && !waiting_on_unreleased(cg, m));
        let m = cg.members.get_mut(member_id).expect("found above");
        m.last_heartbeat_ms = now;
        if rejoin {
            told_to_rejoin(m, now);
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// LeaveGroup naming members of a consumer group (of either protocol,
    /// as Kafka 4.4 takes them): one result per member; the group may
    /// downgrade once they are gone.
    ///
    /// # Errors
    /// Storage errors (then nobody left).
    pub(super) fn leave_consumer_group(
        &self,
        group: &mut Group,
        members: &[(String, Option<String>)],
        now: i64,
    ) -> Result<Vec<Option<GroupError>>, GroupError> {
        let mut cg = group.consumer.clone().ok_or(GroupError::UnknownMemberId)?;
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(members.len());
        for (member_id, instance) in members {
            match leaving_member(&cg, member_id, instance.as_deref()) {
                Ok(id) => {
                    records.extend(remove_member(&group.id, &mut cg, &id));
                    results.push(None);
                }
                Err(e) => results.push(Some(e)),
            }
        }
        if !records.is_empty() {
            self.remove_or_downgrade(group, cg, records, now)?;
        }
        Ok(results)
    }
}

/// Some protocol the join names is supported by every classic member.
fn supports_protocols(cg: &ConsumerGroup, req: &JoinRequest) -> bool {
    let classic: Vec<&ConsumerGroupMember> =
        cg.members.values().filter(|m| m.is_classic() && m.member_id != req.member_id).collect();
    req.protocols.iter().any(|(name, _)| {
        classic.iter().all(|m| {
            let supported = m.metadata.classic.as_ref().map(|c| &c.supported_protocols);
            supported.is_some_and(|ps| ps.iter().any(|(n, _)| n == name))
        })
    })
}

/// The member's metadata after a classic join.
fn classic_metadata(
    old: &MemberMetadataValue,
    req: &JoinRequest,
    topics: Vec<String>,
    rack_id: Option<String>,
) -> MemberMetadataValue {
    let mut names = topics;
    names.sort_unstable();
    names.dedup();
    MemberMetadataValue {
        instance_id: req.group_instance_id.clone(),
        rack_id,
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        subscribed_topic_names: names,
        subscribed_topic_regex: None,
        rebalance_timeout_ms: if req.rebalance_timeout_ms > 0 {
            req.rebalance_timeout_ms
        } else {
            old.rebalance_timeout_ms
        },
        server_assignor: old.server_assignor.clone(),
        classic: Some(ClassicMemberMetadata {
            session_timeout_ms: req.session_timeout_ms,
            supported_protocols: req
                .protocols
                .iter()
                .map(|(n, b)| (n.clone(), b.to_vec()))
                .collect(),
        }),
    }
}

fn first_protocol(m: &ConsumerGroupMember) -> Option<String> {
    m.metadata.classic.as_ref()?.supported_protocols.first().map(|(n, _)| n.clone())
}

/// The subscription version of the member's first protocol.
fn subscription_version(m: &ConsumerGroupMember) -> i16 {
    let classic = m.metadata.classic.as_ref();
    let first = classic.and_then(|c| c.supported_protocols.first());
    first.map_or(0, |(_, metadata)| consumer_protocol::metadata_version(metadata))
}

/// The member was told to rejoin: it has its rebalance timeout to do so
/// (a deadline already running is kept).
fn told_to_rejoin(m: &mut ConsumerGroupMember, now: i64) {
    let timeout = i64::from(m.metadata.rebalance_timeout_ms.max(0));
    m.classic_deadline_ms.get_or_insert(now + timeout);
}

/// Whether a partition of the member's target it does not have yet is
/// still held by another member.
fn waiting_on_unreleased(cg: &ConsumerGroup, m: &ConsumerGroupMember) -> bool {
    let empty = Assignment::new();
    let target = cg.target.get(&m.member_id).unwrap_or(&empty);
    target.iter().any(|(topic, partitions)| {
        partitions.iter().any(|p| {
            !m.assignment.assigned.get(topic).is_some_and(|ps| ps.contains(p))
                && cg.held_by_other(&m.member_id, topic, *p)
        })
    })
}

/// The id of the member a LeaveGroup entry names: by instance id when
/// given (FENCED_INSTANCE_ID when it belongs to another member id), else by
/// member id.
fn leaving_member(
    cg: &ConsumerGroup,
    member_id: &str,
    instance: Option<&str>,
) -> Result<String, GroupError> {
    match instance {
        Some(i) => match cg.static_member(i) {
            None => Err(GroupError::UnknownMemberId),
            Some(m) if !member_id.is_empty() && m.member_id != member_id => {
                Err(GroupError::FencedInstanceId)
            }
            Some(m) => Ok(m.member_id.clone()),
        },
        None if cg.members.contains_key(member_id) => Ok(member_id.to_string()),
        None => Err(GroupError::UnknownMemberId),
    }
}

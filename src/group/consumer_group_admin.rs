//! Consumer groups as the group-level APIs see them: ConsumerGroupDescribe,
//! and the checks the classic APIs make when the group they name is a
//! consumer group (OffsetCommit and OffsetFetch member epochs, JoinGroup,
//! DeleteGroups), Kafka's `ConsumerGroup.validateOffsetCommit` and
//! `validateOffsetFetch` among them.
//!
//! A JoinGroup to an empty consumer group (offsets only) turns it into a
//! classic one, its consumer records tombstoned. One to a consumer group
//! with members joins it as a classic member (`consumer_group_classic`),
//! or, with `group.consumer.migration.policy=disabled`, is refused with
//! INCONSISTENT_GROUP_PROTOCOL.

use super::consumer_group::{ConsumerGroup, ConsumerGroupMember, ConsumerGroupState};
use super::consumer_group_records::{Assignment, TopicId};
use super::coordinator::GroupCoordinator;
use super::error::GroupError;
use super::group_metadata::Group;
use super::offset_and_metadata::CommittedOffset;
use super::schema::OffsetsRecord;

/// One member as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    /// The member speaks the classic protocol (ConsumerGroupDescribe v1's
    /// `MemberType` 0; a consumer-protocol member is 1).
    pub classic: bool,
    /// (topic id, topic name, partitions); topics deleted since are left out.
    pub assignment: Vec<(TopicId, String, Vec<i32>)>,
    pub target_assignment: Vec<(TopicId, String, Vec<i32>)>,
}

/// A consumer group as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    pub group_id: String,
    pub state: ConsumerGroupState,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<ConsumerMemberDescription>,
}

impl GroupCoordinator {
    /// Whether `member_id` is a member of the consumer group `group_id`.
    pub fn is_consumer_group_member(&self, group_id: &str, member_id: &str) -> bool {
        let groups = self.runtime.lock_group(group_id);
        let group = groups.get(group_id).and_then(|g| g.consumer.as_ref());
        group.is_some_and(|cg| cg.members.contains_key(member_id))
    }

    /// ConsumerGroupDescribe for one group.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND (with Kafka's message) for an unknown group or a
    /// classic one; COORDINATOR_LOAD_IN_PROGRESS while loading.
    pub fn consumer_describe(
        &self,
        group_id: &str,
    ) -> Result<ConsumerGroupDescription, GroupError> {
        let groups = self.runtime.lock_ready(group_id)?;
        let group = groups
            .get(group_id)
            .ok_or_else(|| GroupError::NotFound(format!("Group {group_id} not found.")))?;
        let cg = group.consumer.as_ref().ok_or_else(|| {
            GroupError::NotFound(format!("Group {group_id} is not a consumer group."))
        })?;
        let named = |a: &Assignment| -> Vec<(TopicId, String, Vec<i32>)> {
            a.iter()
                .filter_map(|(id, ps)| {
                    let name = self.catalog().topic_name_by_id(id)?;
                    Some((*id, name, ps.iter().copied().collect()))
                })
                .collect()
        };
        let empty = Assignment::new();
        Ok(ConsumerGroupDescription {
            group_id: group_id.to_string(),
            state: cg.state(),
            group_epoch: cg.group_epoch,
            assignment_epoch: cg.assignment_epoch,
            assignor_name: self.preferred_assignor_name(cg),
            members: cg
                .members
                .values()
                .map(|m| ConsumerMemberDescription {
                    member_id: m.member_id.clone(),
                    instance_id: m.metadata.instance_id.clone(),
                    rack_id: m.metadata.rack_id.clone(),
                    member_epoch: m.epoch(),
                    client_id: m.metadata.client_id.clone(),
                    client_host: m.metadata.client_host.clone(),
                    subscribed_topic_names: m.metadata.subscribed_topic_names.clone(),
                    subscribed_topic_regex: m.metadata.subscribed_topic_regex.clone(),
                    classic: m.is_classic(),
                    assignment: named(&m.assignment.assigned),
                    target_assignment: named(cg.target.get(&m.member_id).unwrap_or(&empty)),
                })
                .collect(),
        })
    }
}

/// OffsetCommit to a consumer group: a commit from outside the group
/// (negative epoch, no member id) only while it has no members; else a
/// member's, at an epoch that covers every partition committed
/// ([`epoch_covers`]; UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).
pub(super) fn check_consumer_commit(
    cg: &ConsumerGroup,
    (member_epoch, member_id): (i32, &str),
    offsets: &[(String, i32, CommittedOffset)],
) -> Result<(), GroupError> {
    if member_epoch < 0 && member_id.is_empty() && cg.members.is_empty() {
        return Ok(());
    }
    let member = cg.members.get(member_id).ok_or(GroupError::UnknownMemberId)?;
    if !epoch_covers(cg, member, member_epoch, offsets) {
        // A classic member sent its generation, and gets the classic error.
        if member.is_classic() {
            return Err(GroupError::IllegalGeneration);
        }
        return Err(GroupError::StaleMemberEpoch);
    }
    Ok(())
}

/// Whether `member`'s commit at `epoch` may cover `offsets` (Kafka 4.3+,
/// KIP-1251): at its current epoch, always; at an older one, only for
/// partitions it still holds and was given at or before that epoch, so a
/// commit sent just before a heartbeat moved its epoch still lands; never
/// at a newer one. All or nothing: Kafka answers per partition.
pub(super) fn epoch_covers(
    cg: &ConsumerGroup,
    member: &ConsumerGroupMember,
    epoch: i32,
    offsets: &[(String, i32, CommittedOffset)],
) -> bool {
    let current = member.epoch();
    if epoch == current {
        return true;
    }
    // A classic member's generation must be its current epoch.
    if epoch > current || epoch < 0 || member.is_classic() {
        return false;
    }
    offsets.iter().all(|(topic, partition, _)| {
        let id = cg.subscription_metadata.get(topic).map(|t| t.id);
        id.is_some_and(|id| member.held_since(&id, *partition, epoch))
    })
}

/// OffsetFetch (v9+) naming a member of a consumer group: it must be a
/// member at its current epoch. A fetch naming no member is always allowed.
///
/// # Errors
/// UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH.
pub(super) fn check_consumer_fetch(
    group: Option<&Group>,
    member: Option<(&str, i32)>,
) -> Result<(), GroupError> {
    let Some((member_id, epoch)) = member else { return Ok(()) };
    if member_id.is_empty() && epoch < 0 {
        return Ok(());
    }
    let Some(cg) = group.and_then(|g| g.consumer.as_ref()) else {
        // Classic groups and unknown groups: Kafka checks nothing here.
        return Ok(());
    };
    let m = cg.members.get(member_id).ok_or(GroupError::UnknownMemberId)?;
    if m.epoch() != epoch {
        return Err(GroupError::StaleMemberEpoch);
    }
    Ok(())
}

/// A JoinGroup (classic protocol) to `group`: refused while it is a consumer
/// group with members; an empty consumer group becomes classic, with the
/// tombstones of its consumer records returned for the caller to write.
pub(super) fn classic_join_allowed(group: &Group) -> Result<Vec<OffsetsRecord>, GroupError> {
    let Some(cg) = &group.consumer else { return Ok(vec![]) };
    if !cg.members.is_empty() {
        return Err(GroupError::InconsistentGroupProtocol);
    }
    Ok(cg.tombstones(&group.id))
}

//! One consumer group of the KIP-848 protocol (Kafka's `ConsumerGroup` and
//! `ConsumerGroupMember`): its epochs, members, target assignment and the
//! topic metadata its subscriptions resolved to.
//!
//! * The group epoch grows whenever the membership, a subscription or the
//!   subscribed topics' metadata (a new partition) changes. The target
//!   assignment is computed for a group epoch; its epoch (the assignment
//!   epoch) never exceeds the group epoch.
//! * Members move toward their target with `CurrentAssignmentBuilder`; a
//!   partition belongs to at most one member at a time (assigned or pending
//!   revocation), which `held_by_other` checks.
//! * Member epoch -2 marks a static member that left temporarily: it keeps
//!   its assignment until its instance rejoins or its session expires.
//! * The state shown to tools is derived, never stored: Empty (no members),
//!   Assigning (target behind the group epoch), Reconciling (a member not yet
//!   at the assignment epoch), Stable.

use std::collections::BTreeMap;

use super::consumer_group_records::{
    Assignment, ConsumerGroupKey as Key, ConsumerGroupValue as Value, CurrentAssignmentValue,
    MemberMetadataValue, TopicId, TopicMetadata,
};
use super::current_assignment_builder::{MemberAssignment, MemberState};
use super::schema::{OffsetsRecord, RecordKey, RecordValue};

/// The member epoch of a static member that left temporarily.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// The state Kafka reports for a consumer group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ConsumerGroupMember {
    pub(super) member_id: String,
    pub(super) metadata: MemberMetadataValue,
    pub(super) assignment: MemberAssignment,
    /// The last heartbeat (a restart counts as one): the session runs from here.
    pub(super) last_heartbeat_ms: i64,
    /// When the member must have revoked its pending partitions by.
    pub(super) revocation_deadline_ms: Option<i64>,
    /// The member epoch at which it was given each partition it holds
    /// (assigned or pending revocation): a commit at an older epoch is
    /// taken for a partition it held then (KIP-1251). Not written: after a
    /// load every held partition counts from the member's current epoch.
    pub(super) assignment_epochs: BTreeMap<(TopicId, i32), i32>,
    /// A classic member must send its next JoinGroup (after being told to
    /// rejoin) or SyncGroup (after a join) by then, else it is fenced
    /// (Kafka's join and sync timers). Not written.
    pub(super) classic_deadline_ms: Option<i64>,
}

impl ConsumerGroupMember {
    pub(super) fn new(member_id: &str, now: i64) -> Self {
        Self {
            member_id: member_id.to_string(),
            metadata: MemberMetadataValue { rebalance_timeout_ms: -1, ..Default::default() },
            assignment: MemberAssignment {
                state: MemberState::Stable,
                member_epoch: 0,
                previous_member_epoch: 0,
                assigned: Assignment::new(),
                pending_revocation: Assignment::new(),
            },
            last_heartbeat_ms: now,
            revocation_deadline_ms: None,
            assignment_epochs: BTreeMap::new(),
            classic_deadline_ms: None,
        }
    }

    /// The member speaks the classic protocol (JoinGroup, SyncGroup,
    /// Heartbeat) inside the consumer group.
    pub(super) fn is_classic(&self) -> bool {
        self.metadata.classic.is_some()
    }

    /// Its session: a classic member's own, else the group's `consumer` one.
    pub(super) fn session_timeout_ms(&self, consumer_session_timeout_ms: i32) -> i64 {
        let ms = self.metadata.classic.as_ref().map(|c| c.session_timeout_ms);
        i64::from(ms.unwrap_or(consumer_session_timeout_ms))
    }

    /// Whether it is out of time at `now`: its session, its revocation, or a
    /// classic member's join or sync.
    pub(super) fn expired_at(&self, now: i64, consumer_session_timeout_ms: i32) -> bool {
        now >= self.last_heartbeat_ms + self.session_timeout_ms(consumer_session_timeout_ms)
            || self.revocation_deadline_ms.is_some_and(|d| now >= d)
            || self.classic_deadline_ms.is_some_and(|d| now >= d)
    }

    /// The partitions it holds, assigned or pending revocation.
    fn held(&self) -> impl Iterator<Item = (TopicId, i32)> + '_ {
        let a = &self.assignment;
        [&a.assigned, &a.pending_revocation]
            .into_iter()
            .flat_map(|m| m.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p))))
    }

    /// Take `next` as its assignment: a partition it held already keeps the
    /// epoch it was given at, a new one takes the new member epoch.
    pub(super) fn set_assignment(&mut self, next: MemberAssignment) {
        let before = std::mem::take(&mut self.assignment_epochs);
        self.assignment = next;
        let epoch = self.assignment.member_epoch;
        let epochs =
            self.held().map(|tp| (tp, before.get(&tp).copied().unwrap_or(epoch))).collect();
        self.assignment_epochs = epochs;
    }

    /// Whether a commit at member epoch `epoch`, older than the current
    /// one, may cover `partition` of `topic`: the member holds it and was
    /// given it at or before that epoch (Kafka 4.3+'s assignment epochs).
    pub(super) fn held_since(&self, topic: &TopicId, partition: i32, epoch: i32) -> bool {
        self.assignment_epochs.get(&(*topic, partition)).is_some_and(|since| *since <= epoch)
    }

    pub(super) fn epoch(&self) -> i32 {
        self.assignment.member_epoch
    }

    pub(super) fn instance_id(&self) -> Option<&str> {
        self.metadata.instance_id.as_deref()
    }

    pub(super) fn holds(&self, topic: &TopicId, partition: i32) -> bool {
        let a = &self.assignment;
        [&a.assigned, &a.pending_revocation]
            .iter()
            .any(|m| m.get(topic).is_some_and(|ps| ps.contains(&partition)))
    }

    pub(super) fn current_assignment_value(&self) -> CurrentAssignmentValue {
        let a = &self.assignment;
        CurrentAssignmentValue {
            member_epoch: a.member_epoch,
            previous_member_epoch: a.previous_member_epoch,
            state: a.state.value(),
            assigned: a.assigned.clone(),
            pending_revocation: a.pending_revocation.clone(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct ConsumerGroup {
    pub(super) group_epoch: i32,
    pub(super) assignment_epoch: i32,
    pub(super) members: BTreeMap<String, ConsumerGroupMember>,
    /// The target assignment per member id.
    pub(super) target: BTreeMap<String, Assignment>,
    /// The subscribed topics as last resolved, by name.
    pub(super) subscription_metadata: BTreeMap<String, TopicMetadata>,
}

impl ConsumerGroup {
    pub(super) fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self.members.values().any(|m| {
            m.epoch() != self.assignment_epoch || m.assignment.state != MemberState::Stable
        }) {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    pub(super) fn static_member(&self, instance_id: &str) -> Option<&ConsumerGroupMember> {
        self.members.values().find(|m| m.instance_id() == Some(instance_id))
    }

    /// Whether a member other than `member_id` holds the partition.
    pub(super) fn held_by_other(&self, member_id: &str, topic: &TopicId, partition: i32) -> bool {
        self.members.values().any(|m| m.member_id != member_id && m.holds(topic, partition))
    }

    /// Every topic name some member subscribes to.
    pub(super) fn subscribed_topic_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .members
            .values()
            .flat_map(|m| m.metadata.subscribed_topic_names.iter().cloned())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The records that replace the member `id` (or add it).
    pub(super) fn member_records(group: &str, m: &ConsumerGroupMember) -> Vec<OffsetsRecord> {
        vec![record(
            Key::MemberMetadata { group: group.to_string(), member: m.member_id.clone() },
            Some(Value::MemberMetadata(m.metadata.clone())),
        )]
    }

    pub(super) fn current_assignment_record(group: &str, m: &ConsumerGroupMember) -> OffsetsRecord {
        record(
            Key::CurrentMemberAssignment { group: group.to_string(), member: m.member_id.clone() },
            Some(Value::CurrentMemberAssignment(m.current_assignment_value())),
        )
    }

    /// The tombstones removing member `id` (current assignment, target,
    /// metadata: the order Kafka writes them).
    pub(super) fn member_tombstones(group: &str, id: &str) -> Vec<OffsetsRecord> {
        let (group, member) = (group.to_string(), id.to_string());
        vec![
            record(
                Key::CurrentMemberAssignment { group: group.clone(), member: member.clone() },
                None,
            ),
            record(
                Key::TargetAssignmentMember { group: group.clone(), member: member.clone() },
                None,
            ),
            record(Key::MemberMetadata { group, member }, None),
        ]
    }

    /// The tombstones of the group-level records (after the members').
    pub(super) fn group_tombstones(group: &str) -> Vec<OffsetsRecord> {
        let group = group.to_string();
        vec![
            record(Key::TargetAssignmentMetadata { group: group.clone() }, None),
            record(Key::PartitionMetadata { group: group.clone() }, None),
            record(Key::Metadata { group }, None),
        ]
    }

    /// Every tombstone that removes this group's records (members first).
    pub(super) fn tombstones(&self, group_id: &str) -> Vec<OffsetsRecord> {
        let mut records: Vec<OffsetsRecord> = self
            .members
            .keys()
            .chain(self.target.keys())
            .flat_map(|m| ConsumerGroup::member_tombstones(group_id, m))
            .collect();
        records.extend(ConsumerGroup::group_tombstones(group_id));
        records
    }

    pub(super) fn epoch_record(group: &str, epoch: i32) -> OffsetsRecord {
        record(Key::Metadata { group: group.to_string() }, Some(Value::Epoch(epoch)))
    }

    pub(super) fn partition_metadata_record(
        group: &str,
        topics: &BTreeMap<String, TopicMetadata>,
    ) -> OffsetsRecord {
        record(
            Key::PartitionMetadata { group: group.to_string() },
            Some(Value::PartitionMetadata(topics.values().cloned().collect())),
        )
    }

    pub(super) fn target_member_record(group: &str, id: &str, a: &Assignment) -> OffsetsRecord {
        record(
            Key::TargetAssignmentMember { group: group.to_string(), member: id.to_string() },
            Some(Value::TargetAssignmentMember(a.clone())),
        )
    }

    pub(super) fn target_epoch_record(group: &str, epoch: i32) -> OffsetsRecord {
        record(
            Key::TargetAssignmentMetadata { group: group.to_string() },
            Some(Value::TargetAssignmentEpoch(epoch)),
        )
    }

    /// Apply one record while loading (`None`: a tombstone).
    pub(super) fn replay(&mut self, key: &Key, value: Option<Value>, now: i64) {
        match (key, value) {
            (Key::Metadata { .. }, Some(Value::Epoch(e))) => self.group_epoch = e,
            (Key::PartitionMetadata { .. }, Some(Value::PartitionMetadata(topics))) => {
                self.subscription_metadata =
                    topics.into_iter().map(|t| (t.name.clone(), t)).collect();
            }
            (Key::PartitionMetadata { .. }, None) => self.subscription_metadata.clear(),
            (Key::MemberMetadata { member, .. }, Some(Value::MemberMetadata(v))) => {
                self.members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerGroupMember::new(member, now))
                    .metadata = v;
            }
            (Key::MemberMetadata { member, .. }, None) => {
                self.members.remove(member);
            }
            (Key::TargetAssignmentMetadata { .. }, Some(Value::TargetAssignmentEpoch(e))) => {
                self.assignment_epoch = e
            }
            (
                Key::TargetAssignmentMember { member, .. },
                Some(Value::TargetAssignmentMember(a)),
            ) => {
                self.target.insert(member.clone(), a);
            }
            (Key::TargetAssignmentMember { member, .. }, None) => {
                self.target.remove(member);
            }
            (
                Key::CurrentMemberAssignment { member, .. },
                Some(Value::CurrentMemberAssignment(v)),
            ) => {
                let m = self
                    .members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerGroupMember::new(member, now));
                // Loaded: every held partition counts from the current epoch.
                m.assignment_epochs.clear();
                m.set_assignment(MemberAssignment {
                    state: MemberState::from_value(v.state),
                    member_epoch: v.member_epoch,
                    previous_member_epoch: v.previous_member_epoch,
                    assigned: v.assigned,
                    pending_revocation: v.pending_revocation,
                });
            }
            (Key::CurrentMemberAssignment { member, .. }, None) => {
                if let Some(m) = self.members.get_mut(member) {
                    m.assignment_epochs.clear();
                    m.set_assignment(ConsumerGroupMember::new(member, now).assignment);
                }
            }
            // The group record's tombstone is handled by the loader (the
            // group itself goes); a value of the wrong kind cannot decode.
            _ => {}
        }
    }
}

/// `key`'s record with `value` (`None`: a tombstone).
fn record(key: Key, value: Option<Value>) -> OffsetsRecord {
    OffsetsRecord { key: RecordKey::Consumer(key), value: value.map(RecordValue::Consumer) }
}

//! Online conversion between a classic group and a consumer group (KIP-848,
//! `group.consumer.migration.policy`; Kafka's `ConsumerGroup.fromClassicGroup`
//! and `ClassicGroup.fromConsumerGroup`).
//!
//! * **Upgrade**: a ConsumerGroupHeartbeat joining (epoch 0) a non-empty
//!   classic group of the `consumer` protocol type turns it into a consumer
//!   group. Each classic member keeps its id and its assigned partitions at
//!   member epoch = the classic generation, which is also the group and
//!   assignment epoch; the joiner's arrival then bumps the group epoch, so
//!   every classic member is told to rejoin (REBALANCE_IN_PROGRESS) and gives
//!   up what it must before anyone else gets it.
//! * **Downgrade**: when members leave a consumer group (a leave heartbeat,
//!   LeaveGroup, a session or rebalance timeout) and every member left
//!   speaks the classic protocol, it becomes a classic group at generation =
//!   the group epoch before they left, each member holding its target
//!   assignment, and a
//!   classic rebalance starts at once (PreparingRebalance): members learn of
//!   it from their next Heartbeat and rejoin as in any classic rebalance.
//! * Either way the records of the old kind are tombstoned and the new kind
//!   written in one append, before the change is installed; a failed append
//!   changes nothing. Committed offsets belong to the group id and stay.
//! * Refused upgrades answer GROUP_ID_NOT_FOUND with Kafka 4.4's reasons; a
//!   refused downgrade leaves an ordinary consumer group.

use bytes::Bytes;

use super::consumer_group::{ConsumerGroup, ConsumerGroupMember};
use super::consumer_group_records::{Assignment, ClassicMemberMetadata, MemberMetadataValue};
use super::consumer_protocol::{self, NamedPartitions};
use super::coordinator::GroupCoordinator;
use super::current_assignment_builder::{MemberAssignment, MemberState};
use super::error::GroupError;
use super::group_metadata::{Group, Member};
use super::schema::{OffsetsRecord, RecordKey, RecordValue};

impl GroupCoordinator {
    /// The consumer group a non-empty classic group becomes (the module
    /// doc's upgrade), with its records added to `records`. The classic group
    /// itself is left as it is until the caller installs the result.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND with the reason: the policy forbids it, the group
    /// is not of the consumer protocol type, too large, or its embedded
    /// consumer protocol is malformed or carries a custom assignor's data.
    pub(super) fn upgrade_classic_group(
        &self,
        group: &Group,
        records: &mut Vec<OffsetsRecord>,
    ) -> Result<ConsumerGroup, GroupError> {
        let refusal = |why: &str| {
            GroupError::NotFound(format!(
                "Cannot upgrade classic group {} to consumer group because {why}.",
                group.id
            ))
        };
        let refuse = |why: &str| Err(refusal(why));
        if !self.config.consumer_migration_policy.upgrades() {
            return refuse("online upgrade is disabled");
        }
        if group.protocol_type.as_deref() != Some("consumer") {
            return refuse("it does not use the consumer embedded protocol");
        }
        if group.members.len() > self.config.consumer_max_size {
            return refuse("the group size exceeds the consumer group maximum size");
        }
        let generation = group.generation;
        let mut cg = ConsumerGroup {
            group_epoch: generation,
            assignment_epoch: generation,
            ..ConsumerGroup::default()
        };
        for m in &group.members {
            let member = self.member_from_classic(group, m).map_err(|e| {
                refusal(&format!("the embedded consumer protocol is malformed ({e})"))
            })?;
            cg.target.insert(m.id.clone(), member.assignment.assigned.clone());
            cg.members.insert(m.id.clone(), member);
        }
        records.push(OffsetsRecord::tombstone(RecordKey::Group { group: group.id.clone() }));
        for m in cg.members.values() {
            records.extend(ConsumerGroup::member_records(&group.id, m));
        }
        records.push(ConsumerGroup::epoch_record(&group.id, cg.group_epoch));
        for (id, a) in &cg.target {
            records.push(ConsumerGroup::target_member_record(&group.id, id, a));
        }
        records.push(ConsumerGroup::target_epoch_record(&group.id, cg.assignment_epoch));
        for m in cg.members.values() {
            records.push(ConsumerGroup::current_assignment_record(&group.id, m));
        }
        tracing::info!(group = %group.id, generation, members = cg.members.len(),
            "upgrading the classic group to a consumer group");
        Ok(cg)
    }

    /// One classic member as a member of the consumer group: its
    /// subscription decoded, holding its assignment and the partitions it
    /// says it owns, Stable at the generation.
    fn member_from_classic(
        &self,
        group: &Group,
        m: &Member,
    ) -> Result<ConsumerGroupMember, super::error::SchemaError> {
        let protocol = group.protocol.clone().or_else(|| m.protocols.first().map(|p| p.0.clone()));
        let subscription =
            consumer_protocol::decode_subscription(&m.metadata_for(&protocol.unwrap_or_default()))?;
        // What it was given, and what its last join says it still owns: in
        // CompletingRebalance the assignment is not known yet, while a
        // cooperative member keeps consuming what it owned.
        let mut assigned = self.by_topic_id(&consumer_protocol::decode_assignment(&m.assignment)?);
        for (topic, partitions) in self.by_topic_id(&subscription.owned) {
            assigned.entry(topic).or_default().extend(partitions);
        }
        let mut member = ConsumerGroupMember::new(&m.id, self.now());
        member.metadata = MemberMetadataValue {
            instance_id: m.instance_id.clone(),
            rack_id: subscription.rack_id,
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            subscribed_topic_names: sorted(subscription.topics),
            subscribed_topic_regex: None,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            server_assignor: None,
            classic: Some(ClassicMemberMetadata {
                session_timeout_ms: m.session_timeout_ms,
                supported_protocols: m
                    .protocols
                    .iter()
                    .map(|(n, b)| (n.clone(), b.to_vec()))
                    .collect(),
            }),
        };
        member.set_assignment(MemberAssignment {
            state: MemberState::Stable,
            member_epoch: group.generation,
            previous_member_epoch: group.generation,
            assigned,
            pending_revocation: Assignment::new(),
        });
        Ok(member)
    }

    /// Partitions by topic name as partitions by topic id; topics that do
    /// not exist (any more) are left out.
    pub(super) fn by_topic_id(&self, named: &NamedPartitions) -> Assignment {
        let mut out = Assignment::new();
        for (topic, partitions) in named {
            if let Some((id, _)) = self.catalog().topic(topic) {
                out.entry(id).or_default().extend(partitions.iter().copied());
            }
        }
        out
    }

    /// Partitions by topic id as the consumer protocol names them; deleted
    /// topics are left out.
    pub(super) fn by_topic_name(&self, a: &Assignment) -> NamedPartitions {
        a.iter()
            .filter_map(|(id, ps)| {
                Some((self.catalog().topic_name_by_id(id)?, ps.iter().copied().collect()))
            })
            .collect()
    }

    /// Members left the consumer group: `after` is the group without them
    /// and `removal` the records that say so. When every member left speaks
    /// the classic protocol (and the policy allows), the group becomes a
    /// classic group instead (the module doc's downgrade); else the removal
    /// is written and `after` installed.
    ///
    /// # Errors
    /// The append failed: nothing changed.
    pub(super) fn remove_or_downgrade(
        &self,
        group: &mut Group,
        after: ConsumerGroup,
        removal: Vec<OffsetsRecord>,
        now: i64,
    ) -> Result<(), GroupError> {
        if !self.downgrade_allowed(&after) {
            self.runtime.append(&group.id, &removal)?;
            group.consumer = Some(after);
            return Ok(());
        }
        let before = group.consumer.as_ref().expect("a consumer group");
        // The generation is the epoch before the leave, as in Kafka: members
        // that were reconciled then heartbeat at it and are told to rejoin
        // (REBALANCE_IN_PROGRESS, so they revoke and commit first).
        let generation = before.group_epoch;
        let mut classic = Group::new(&group.id, now);
        classic.become_classic(self.classic_members(&after, now), generation, now);
        self.assign_targets(&mut classic, &after);
        let mut records = before.tombstones(&group.id);
        records.push(OffsetsRecord {
            key: RecordKey::Group { group: group.id.clone() },
            value: Some(RecordValue::Group(classic.to_value())),
        });
        self.runtime.append(&group.id, &records)?;
        let members = std::mem::take(&mut classic.members);
        group.become_classic(members, generation, now);
        tracing::info!(group = %group.id, generation = group.generation, members = group.members.len(),
            "downgraded the consumer group to a classic group");
        // Stable to PreparingRebalance is always legal.
        let _ = self.prepare_rebalance(group, now);
        Ok(())
    }

    /// Whether a consumer group left with `cg`'s members becomes classic.
    fn downgrade_allowed(&self, cg: &ConsumerGroup) -> bool {
        self.config.consumer_migration_policy.downgrades()
            && !cg.members.is_empty()
            && cg.members.len() <= self.config.max_size
            && cg.members.values().all(ConsumerGroupMember::is_classic)
    }

    /// The consumer group's (classic) members as members of a classic group.
    fn classic_members(&self, cg: &ConsumerGroup, now: i64) -> Vec<Member> {
        cg.members
            .values()
            .map(|m| {
                let classic = m.metadata.classic.clone().unwrap_or_default();
                Member {
                    id: m.member_id.clone(),
                    instance_id: m.metadata.instance_id.clone(),
                    client_id: m.metadata.client_id.clone(),
                    client_host: m.metadata.client_host.clone(),
                    session_timeout_ms: classic.session_timeout_ms,
                    rebalance_timeout_ms: m.metadata.rebalance_timeout_ms,
                    protocol_type: "consumer".to_string(),
                    protocols: classic
                        .supported_protocols
                        .into_iter()
                        .map(|(n, b)| (n, Bytes::from(b)))
                        .collect(),
                    assignment: Bytes::new(),
                    last_heartbeat_ms: now,
                    join_waiter: None,
                    sync_waiter: None,
                    joined: false,
                }
            })
            .collect()
    }

    /// Each classic member's assignment: its target in the consumer group,
    /// at the version of its metadata for the chosen protocol.
    fn assign_targets(&self, classic: &mut Group, cg: &ConsumerGroup) {
        let protocol = classic.protocol.clone().unwrap_or_default();
        let empty = Assignment::new();
        for m in &mut classic.members {
            let version = consumer_protocol::metadata_version(&m.metadata_for(&protocol));
            let target = self.by_topic_name(cg.target.get(&m.id).unwrap_or(&empty));
            m.assignment = consumer_protocol::encode_assignment(version, &target);
        }
    }
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort_unstable();
    names.dedup();
    names
}

#[cfg(test)]
#[path = "group_migration_tests.rs"]
mod tests;

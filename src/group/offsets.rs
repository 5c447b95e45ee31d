//! Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and the
//! retention that expires offsets of empty groups.
//!
//! * A commit is written to `__consumer_offsets` before it is acknowledged and
//!   applied to the cache only after the append succeeded; a failed append
//!   fails every partition of the request and changes nothing.
//! * Deleting offsets writes tombstones, so the cleaner eventually removes the
//!   records; the cache forgets them only once the tombstones are written.
//! * Offsets of an empty group expire `offsets.retention.minutes` after the
//!   later of the commit and the moment the group became empty (Kafka 2.1+);
//!   a group left with no offsets is deleted (Dead), and so is an empty
//!   consumer group that has none at the retention check.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::coordinator::GroupCoordinator;
use super::error::GroupError;
use super::group_metadata::Group;
use super::group_state::GroupState;
use super::offset_and_metadata::CommittedOffset;
use super::runtime::Shard;
use super::schema::{OffsetValue, OffsetsRecord, RecordKey, RecordValue};

/// The tombstone deleting the committed offset of `group` for a partition.
pub(super) fn offset_tombstone(group: &str, topic: &str, partition: i32) -> OffsetsRecord {
    let key = RecordKey::Offset { group: group.to_string(), topic: topic.to_string(), partition };
    OffsetsRecord::tombstone(key)
}

impl GroupCoordinator {
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
        let now = self.now();
        let mut groups = match self.runtime.lock_ready(group_id) {
            Ok(groups) => groups,
            Err(e) => return all(e),
        };
        let created = !groups.contains_key(group_id);
        let group = match group_for_commit(&mut groups, group_id, generation, member_id, now) {
            Ok(group) => group,
            Err(e) => return all(e),
        };
        let committer = (generation, member_id, instance_id);
        if let Err(e) = check_committer(group, committer, offsets, now) {
            return all(e);
        }
        let (results, records) =
            offset_records(group_id, offsets, now, self.config.offset_metadata_max_bytes);
        let log_offset = match self.runtime.append_batch(group_id, &records, None) {
            Ok(at) => at,
            Err(e) => {
                // A failed commit changes nothing: not even the group it created.
                if created {
                    groups.remove(group_id);
                }
                return all(e);
            }
        };
        for (i, (topic, partition, o)) in offsets.iter().enumerate() {
            if results[i].is_none() {
                group.install_offset(
                    (topic.clone(), *partition),
                    CommittedOffset { commit_timestamp: now, ..o.clone() },
                    log_offset,
                );
            }
        }
        results
    }

    /// OffsetFetch v9+ naming a member: of a consumer group, it must be a
    /// member at its current epoch.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, COORDINATOR_LOAD_IN_PROGRESS.
    pub fn check_fetch_member(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        let groups = self.runtime.lock_ready(group_id)?;
        super::consumer_group_admin::check_consumer_fetch(
            groups.get(group_id),
            Some((member_id, member_epoch)),
        )
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
        let groups = self.runtime.lock_ready(group_id)?;
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

    /// Remove offsets of empty groups older than `offsets.retention.minutes`
    /// (counted from when the group became empty, as Kafka 2.1+ does), with
    /// tombstones; a group left with nothing is deleted.
    pub fn expire_offsets(&self, now: i64) {
        self.runtime.for_each_shard(|groups| self.expire_offsets_in(groups, now));
    }

    fn expire_offsets_in(&self, groups: &mut Shard, now: i64) {
        let mut dead = Vec::new();
        for group in groups.values_mut() {
            if !group.is_empty() {
                continue;
            }
            let base = group.state_timestamp();
            let expired: Vec<(String, i32)> = group
                .offsets
                .iter()
                .filter(|(_, o)| {
                    base.max(o.commit_timestamp) + self.config.offsets_retention_ms <= now
                })
                .map(|(k, _)| k.clone())
                .collect();
            // An empty consumer group without offsets goes too (Kafka's
            // cleanupGroupMetadata); a classic one keeps its metadata.
            let bare_consumer_group = group.consumer.is_some()
                && group.offsets.is_empty()
                && group.pending_txn_offsets.is_empty();
            if expired.is_empty() && !bare_consumer_group {
                continue;
            }
            let mut records: Vec<OffsetsRecord> =
                expired.iter().map(|(t, p)| offset_tombstone(&group.id, t, *p)).collect();
            let now_empty = expired.len() == group.offsets.len();
            if now_empty {
                if let Some(cg) = &group.consumer {
                    records.extend(cg.tombstones(&group.id));
                }
                records
                    .push(OffsetsRecord::tombstone(RecordKey::Group { group: group.id.clone() }));
            }
            if self.runtime.append(&group.id, &records).is_ok() {
                for k in &expired {
                    group.remove_offset(k);
                }
                tracing::info!(group = %group.id, offsets = expired.len(), "expired committed offsets");
                // A refused transition is logged by `transition`; the group stays.
                if now_empty && group.transition(GroupState::Dead, now).is_ok() {
                    dead.push(group.id.clone());
                }
            }
        }
        for id in dead {
            groups.remove(&id);
        }
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
        let mut groups = self.runtime.lock_ready(group_id)?;
        let group = groups.get_mut(group_id).ok_or(GroupError::GroupIdNotFound)?;
        if group.state() == GroupState::Dead {
            return Err(GroupError::GroupIdNotFound);
        }
        let empty = group.is_empty();
        let mut subscribed = if empty { vec![] } else { group.subscribed_topics() };
        if let Some(cg) = group.consumer.as_ref().filter(|_| !empty) {
            subscribed.extend(cg.subscribed_topic_names());
        } else if !empty && group.protocol_type.as_deref() != Some("consumer") {
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
                records.push(offset_tombstone(group_id, t, *p));
                removing.push((t.clone(), *p));
            }
        }
        self.runtime.append(group_id, &records)?;
        for k in removing {
            group.remove_offset(&k);
        }
        Ok(results)
    }
}

/// Whether a commit for `group` may proceed: a simple (groupless) commit only
/// while the group is empty, else a current member of the current generation,
/// outside CompletingRebalance. A member's commit counts as a heartbeat.
/// The group an offset commit goes to. A commit from outside any generation
/// (a standalone consumer: generation -1, no member id) creates it Empty, as
/// Kafka does; any other commit to an unknown group is of a stale generation.
/// The records of a commit (plain or transactional) of `offsets` to
/// `group_id` at `now`, and per offset the error that keeps it out
/// (metadata over `max_metadata` bytes), in request order.
pub(super) fn offset_records(
    group_id: &str,
    offsets: &[(String, i32, CommittedOffset)],
    now: i64,
    max_metadata: usize,
) -> (Vec<Option<GroupError>>, Vec<OffsetsRecord>) {
    let mut results = vec![None; offsets.len()];
    let mut records = Vec::new();
    for (i, (topic, partition, o)) in offsets.iter().enumerate() {
        if o.metadata.len() > max_metadata {
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
        records.push(OffsetsRecord { key, value: Some(RecordValue::Offset(value)) });
    }
    (results, records)
}

pub(super) fn group_for_commit<'a>(
    groups: &'a mut HashMap<String, Group>,
    group_id: &str,
    generation: i32,
    member_id: &str,
    now: i64,
) -> Result<&'a mut Group, GroupError> {
    if group_id.is_empty() {
        return Err(GroupError::InvalidGroupId);
    }
    match groups.entry(group_id.to_string()) {
        Entry::Occupied(e) => Ok(e.into_mut()),
        Entry::Vacant(_) if generation >= 0 || !member_id.is_empty() => {
            Err(GroupError::IllegalGeneration)
        }
        Entry::Vacant(e) => Ok(e.insert(Group::new(group_id, now))),
    }
}

fn check_committer(
    group: &mut Group,
    (generation, member_id, instance_id): (i32, &str, Option<&str>),
    offsets: &[(String, i32, CommittedOffset)],
    now: i64,
) -> Result<(), GroupError> {
    if let Some(cg) = &group.consumer {
        let member = (generation, member_id);
        return super::consumer_group_admin::check_consumer_commit(cg, member, offsets);
    }
    if generation < 0 && member_id.is_empty() {
        if group.state() != GroupState::Empty {
            return Err(GroupError::UnknownMemberId);
        }
        return Ok(());
    }
    if group.fences(instance_id, member_id) {
        return Err(GroupError::FencedInstanceId);
    }
    if group.state() == GroupState::CompletingRebalance {
        return Err(GroupError::RebalanceInProgress);
    }
    if group.member(member_id).is_none() {
        return Err(GroupError::UnknownMemberId);
    }
    if generation != group.generation {
        return Err(GroupError::IllegalGeneration);
    }
    if let Some(m) = group.member_mut(member_id) {
        m.last_heartbeat_ms = now;
    }
    Ok(())
}

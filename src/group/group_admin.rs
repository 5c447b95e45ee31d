//! The group-level requests of either kind of group: ListGroups,
//! DescribeGroups (classic groups; ConsumerGroupDescribe is in
//! `consumer_group_admin`) and DeleteGroups.

use bytes::Bytes;

use super::coordinator::GroupCoordinator;
use super::error::GroupError;
use super::group_metadata::Group;
use super::group_state::GroupState;
use super::offsets::offset_tombstone;
use super::schema::{OffsetsRecord, RecordKey};

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

/// One group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    /// Kafka's name of its state (classic or consumer group states).
    pub state: &'static str,
    /// `classic` or `consumer`.
    pub group_type: &'static str,
}

impl GroupCoordinator {
    /// ListGroups: every group of either kind, by id.
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while loading.
    pub fn list(&self) -> Result<Vec<ListedGroup>, GroupError> {
        // A broker of a cluster that coordinates no group lists none (the
        // Admin client asks every broker).
        if !self.runtime.is_loaded() {
            return Err(GroupError::CoordinatorLoadInProgress);
        }
        let mut out = Vec::new();
        self.runtime.for_each_shard(|groups| out.extend(groups.values().filter_map(listed)));
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    /// DescribeGroups for one group (a missing group is Dead, as in Kafka).
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while loading.
    pub fn describe(&self, group_id: &str) -> Result<GroupDescription, GroupError> {
        let groups = self.runtime.lock_ready(group_id)?;
        if groups.get(group_id).is_some_and(|g| g.consumer.is_some()) {
            return Err(GroupError::NotFound(format!("Group {group_id} is not a classic group.")));
        }
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
        let show = g.state() == GroupState::Stable;
        let protocol = g.protocol.clone().unwrap_or_default();
        Ok(GroupDescription {
            group_id: g.id.clone(),
            state: g.state(),
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
        let now = self.now();
        let mut groups = self.runtime.lock_ready(group_id)?;
        let group = groups.get_mut(group_id).ok_or(GroupError::GroupIdNotFound)?;
        match group.state() {
            GroupState::Dead => return Err(GroupError::GroupIdNotFound),
            _ if !group.is_empty() => return Err(GroupError::NonEmptyGroup),
            _ => {}
        }
        let mut records: Vec<OffsetsRecord> =
            group.offsets.keys().map(|(t, p)| offset_tombstone(group_id, t, *p)).collect();
        if let Some(cg) = &group.consumer {
            records.extend(cg.tombstones(group_id));
        }
        records.push(OffsetsRecord::tombstone(RecordKey::Group { group: group_id.to_string() }));
        self.runtime.append(group_id, &records)?;
        group.transition(GroupState::Dead, now)?;
        groups.remove(group_id);
        tracing::info!(group = %group_id, "group deleted");
        Ok(())
    }
}

/// ListGroups' entry of a group (`None` for a dead one).
fn listed(g: &Group) -> Option<ListedGroup> {
    if g.state() == GroupState::Dead {
        return None;
    }
    Some(match &g.consumer {
        Some(cg) => ListedGroup {
            group_id: g.id.clone(),
            protocol_type: "consumer".to_string(),
            state: cg.state().name(),
            group_type: "consumer",
        },
        None => ListedGroup {
            group_id: g.id.clone(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            state: g.state().name(),
            group_type: "classic",
        },
    })
}

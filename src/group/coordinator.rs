//! `GroupCoordinator` (Kafka's `GroupCoordinator`): the groups of this
//! broker behind one lock, its configuration, the periodic tick, the
//! requests and results of the protocol (Kafka's `JoinGroupResult`,
//! `SyncGroupResult`), and the group-level requests (ListGroups,
//! DescribeGroups, DeleteGroups). The
//! protocol itself lives in `membership`, offsets in `offsets`, and the
//! `__consumer_offsets` log in `metadata_manager`.
//!
//! Every request takes the groups' lock once and finishes under it; nothing
//! holds it across an await (waiting members hold oneshot receivers).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::oneshot;

use super::config::GroupConfig;
use super::error::GroupError;
use super::group_metadata::{Group, GroupState};
use super::metadata_manager::LoadStats;
use super::offsets::{offset_tombstone, OffsetsRecord};
use super::schema::RecordKey;
use crate::clock::SharedClock;
use crate::log::topic_partition::coordinator_partition;
use crate::log::LogManager;

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
    pub(super) fn error(e: GroupError, member_id: String) -> Self {
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

    /// The group's current generation as `member_id` sees it; the member
    /// list only `with_members`.
    pub(super) fn current(group: &Group, member_id: &str, with_members: bool) -> Self {
        Self {
            error: None,
            generation: group.generation,
            protocol_type: group.protocol_type.clone(),
            protocol: group.protocol.clone(),
            leader: group.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if with_members { group.leader_members() } else { vec![] },
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
    pub(super) fn error(e: GroupError) -> Self {
        Self { error: Some(e), protocol_type: None, protocol: None, assignment: Bytes::new() }
    }

    pub(super) fn assigned(group: &Group, assignment: Bytes) -> Self {
        Self {
            error: None,
            protocol_type: group.protocol_type.clone(),
            protocol: group.protocol.clone(),
            assignment,
        }
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

#[derive(Debug)]
pub struct GroupCoordinator {
    pub(super) config: GroupConfig,
    pub(super) logs: Arc<LogManager>,
    clock: SharedClock,
    groups: Mutex<HashMap<String, Group>>,
    pub(super) loaded: AtomicBool,
    pub(super) load_stats: Mutex<LoadStats>,
    /// Transaction completions (offsets partition, producer id, commit) that
    /// arrived while loading; applied when the load installs its groups.
    pub(super) deferred_completions: Mutex<Vec<(i32, i64, bool)>>,
    next_member: AtomicU64,
    last_expiry_check: Mutex<i64>,
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig, logs: Arc<LogManager>, clock: SharedClock) -> Self {
        Self {
            config,
            logs,
            clock,
            groups: Mutex::new(HashMap::new()),
            loaded: AtomicBool::new(false),
            load_stats: Mutex::new(LoadStats::default()),
            deferred_completions: Mutex::new(Vec::new()),
            next_member: AtomicU64::new(1),
            last_expiry_check: Mutex::new(0),
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, Group>> {
        // A panic while holding the lock leaves plain data; keep serving.
        self.groups.lock()
    }

    pub(super) fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The `__consumer_offsets` partition of a group (Kafka's rule).
    pub fn partition_for(&self, group: &str) -> i32 {
        coordinator_partition(group, self.config.offsets_topic_partitions)
    }

    pub(super) fn check_ready(&self) -> Result<(), GroupError> {
        if self.loaded.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(GroupError::CoordinatorLoadInProgress)
        }
    }

    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    pub(super) fn new_member_id(&self, client_id: &str) -> String {
        let n = self.next_member.fetch_add(1, Ordering::Relaxed);
        let id = crate::log::manager::topic_id_to_string(&crate::log::manager::random_topic_id());
        format!("{client_id}-{n}-{id}")
    }

    /// Periodic work: complete join rounds whose time came, expire members
    /// whose session ran out, and expire old offsets of empty groups.
    pub fn tick(&self) {
        if !self.is_loaded() {
            return;
        }
        let now = self.now();
        let mut groups = self.lock();
        for group in groups.values_mut() {
            self.expire_members(group, now);
            self.expire_consumer_members(group, now);
        }
        drop(groups);
        let due = {
            let mut last = self.last_expiry_check.lock();
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

    /// ListGroups: every group of either kind, by id.
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while loading.
    pub fn list(&self) -> Result<Vec<ListedGroup>, GroupError> {
        self.check_ready()?;
        let groups = self.lock();
        let mut out: Vec<_> = groups
            .values()
            .filter(|g| g.state() != GroupState::Dead)
            .map(|g| match &g.consumer {
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
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    /// DescribeGroups for one group (a missing group is Dead, as in Kafka).
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while loading.
    pub fn describe(&self, group_id: &str) -> Result<GroupDescription, GroupError> {
        self.check_ready()?;
        let groups = self.lock();
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
        self.check_ready()?;
        let now = self.now();
        let mut groups = self.lock();
        let group = groups.get_mut(group_id).ok_or(GroupError::GroupIdNotFound)?;
        match group.state() {
            GroupState::Dead => return Err(GroupError::GroupIdNotFound),
            _ if !group.is_empty() => return Err(GroupError::NonEmptyGroup),
            _ => {}
        }
        let mut records: Vec<OffsetsRecord> =
            group.offsets.keys().map(|(t, p)| offset_tombstone(group_id, t, *p)).collect();
        if let Some(cg) = &group.consumer {
            records.extend(super::consumer_group_admin::consumer_group_tombstones(group_id, cg));
        }
        records.push(OffsetsRecord::tombstone(RecordKey::Group { group: group_id.to_string() }));
        self.append(group_id, &records)?;
        group.transition(GroupState::Dead, now)?;
        groups.remove(group_id);
        tracing::info!(group = %group_id, "group deleted");
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock;

    #[test]
    fn partition_matches_kafka() {
        // "my-group".hashCode() is -1906497762; Kafka puts the group in 1906497762 % 50.
        let dir = tempfile::tempdir().expect("tempdir");
        let logs = LogManager::open(crate::log::LogManagerConfig::new(dir.path()), clock::system())
            .expect("log manager");
        let c = GroupCoordinator::new(GroupConfig::default(), Arc::new(logs), clock::system());
        assert_eq!(c.partition_for("my-group"), 12);
    }
}

//! `GroupCoordinator` (Kafka's `GroupCoordinator` service over its
//! `GroupCoordinatorShard`s, one per `__consumer_offsets` partition): the
//! groups of this broker and the operations on them. The shards live in the
//! [`CoordinatorRuntime`], which serialises access to each (a lock per
//! shard) and appends the records; the loader rebuilds them at start. This file holds the type (its configuration is `config`), the load and
//! the periodic tick; each family of operations is its own file, one `impl`
//! block each (see the module doc of `group`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::config::GroupConfig;
use super::loader::{load_groups, LoadStats};
use super::runtime::{CoordinatorRuntime, OFFSETS_TOPIC};
use crate::clock::SharedClock;
use crate::log::{LogError, LogManager};

#[derive(Debug)]
pub struct GroupCoordinator {
    pub(super) config: GroupConfig,
    /// For the topics' metadata (subscriptions, ConsumerGroupDescribe); the
    /// records go through the runtime.
    pub(super) logs: Arc<LogManager>,
    clock: SharedClock,
    pub(super) runtime: CoordinatorRuntime,
    next_member: AtomicU64,
    last_expiry_check: Mutex<i64>,
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig, logs: Arc<LogManager>, clock: SharedClock) -> Self {
        let runtime = CoordinatorRuntime::new(
            logs.clone(),
            clock.clone(),
            config.offsets_topic_partitions,
            config.offsets_topic_segment_bytes,
        );
        Self {
            config,
            logs,
            clock,
            runtime,
            next_member: AtomicU64::new(1),
            last_expiry_check: Mutex::new(0),
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub(super) fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The `__consumer_offsets` partition of a group (Kafka's rule).
    pub fn partition_for(&self, group: &str) -> i32 {
        self.runtime.partition_for(group)
    }

    /// In a cluster: coordinate only while `gate` says so, until groups
    /// move with their `__consumer_offsets` partitions (issue 29,
    /// milestone 5); other requests get NOT_COORDINATOR.
    pub fn coordinate_while(&self, gate: crate::replica::leadership::CoordinatorGate) {
        self.runtime.coordinate_while(gate);
    }

    pub fn is_loaded(&self) -> bool {
        self.runtime.is_loaded()
    }

    pub(super) fn new_member_id(&self, client_id: &str) -> String {
        let n = self.next_member.fetch_add(1, Ordering::Relaxed);
        let id = crate::log::manager::topic_id_to_string(&crate::log::manager::random_topic_id());
        format!("{client_id}-{n}-{id}")
    }

    /// Create the offsets topic if it does not exist yet (as Kafka does on the
    /// first FindCoordinator).
    ///
    /// # Errors
    /// The topic could not be created.
    pub fn ensure_offsets_topic(&self) -> Result<(), LogError> {
        self.runtime.ensure_offsets_topic()
    }

    /// Rebuild every group from the offsets topic. Group requests are refused
    /// with COORDINATOR_LOAD_IN_PROGRESS until this returns.
    pub fn load(&self) {
        let started = std::time::Instant::now();
        let (groups, stats) =
            load_groups(&self.logs, self.config.offsets_topic_partitions, self.now());
        self.runtime.install(groups, stats);
        if stats.unreadable_batches + stats.unreadable_records > 0 {
            tracing::error!(
                unreadable_batches = stats.unreadable_batches,
                unreadable_records = stats.unreadable_records,
                "{OFFSETS_TOPIC} loaded with unreadable data; the groups it held may be stale"
            );
        }
        tracing::info!(
            records = stats.records,
            batches = stats.batches,
            groups = self.runtime.group_count(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "group coordinator loaded"
        );
    }

    /// What the last [`GroupCoordinator::load`] read (zeros before it ran).
    pub fn load_stats(&self) -> LoadStats {
        self.runtime.load_stats()
    }

    /// Periodic work: complete join rounds whose time came, expire members
    /// whose session ran out, and expire old offsets of empty groups.
    pub fn tick(&self) {
        if !self.is_loaded() {
            return;
        }
        let now = self.now();
        self.runtime.for_each_shard(|groups| {
            for group in groups.values_mut() {
                self.expire_members(group, now);
                self.expire_consumer_members(group, now);
            }
        });
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

    #[test]
    fn a_write_while_another_request_creates_the_offsets_topic_is_retriable() {
        use crate::group::error::GroupError;
        use crate::group::schema::{OffsetsRecord, RecordKey};
        use crate::log::manager::CREATE_PARTITION_FAILPOINT;
        let dir = tempfile::tempdir().expect("tempdir");
        let logs = LogManager::open(crate::log::LogManagerConfig::new(dir.path()), clock::system())
            .expect("log manager");
        let c = Arc::new(GroupCoordinator::new(
            GroupConfig::default(),
            Arc::new(logs),
            clock::system(),
        ));
        c.load();
        let record = || [OffsetsRecord::tombstone(RecordKey::Group { group: "g".into() })];
        let armed = crate::failpoint::arm(CREATE_PARTITION_FAILPOINT, OFFSETS_TOPIC);
        let creator = {
            let c = Arc::clone(&c);
            std::thread::spawn(move || c.ensure_offsets_topic())
        };
        assert!(armed.wait_held(CREATE_PARTITION_FAILPOINT, std::time::Duration::from_secs(30)));
        // The topic is being created: not "unavailable" (which clients do
        // not retry a commit on), but loading.
        let during = c.runtime.append("g", &record());
        assert!(matches!(during, Err(GroupError::CoordinatorLoadInProgress)), "{during:?}");
        drop(armed);
        creator.join().expect("creator").expect("created");
        c.runtime.append("g", &record()).expect("written once the topic exists");
    }
}

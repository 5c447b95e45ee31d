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
use super::group_config_manager::GroupConfigManager;
use super::loader::{load_groups, load_partition_groups, LoadStats};
use super::runtime::{CoordinatorRuntime, OFFSETS_TOPIC};
use super::topic_catalog::TopicCatalog;
use crate::clock::SharedClock;
use crate::log::{LogError, LogManager};
use crate::replica::coordinator_writes::{CoordinatorReplication, CoordinatorWriteError};
use std::collections::HashMap;

#[derive(Debug)]
pub struct GroupCoordinator {
    pub(super) config: GroupConfig,
    /// For the topics' metadata (subscriptions, ConsumerGroupDescribe); the
    /// records go through the runtime.
    pub(super) logs: Arc<LogManager>,
    clock: SharedClock,
    pub(super) runtime: CoordinatorRuntime,
    /// In a cluster, the cluster's topics (set once when it joins).
    topics: std::sync::OnceLock<Arc<dyn TopicCatalog>>,
    next_member: AtomicU64,
    last_expiry_check: Mutex<i64>,
    /// The groups' own configs (`kafka-configs --entity-type groups`), once
    /// the broker opened them; without, every group takes the broker's.
    group_configs: std::sync::OnceLock<Arc<GroupConfigManager>>,
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
            topics: std::sync::OnceLock::new(),
            next_member: AtomicU64::new(1),
            last_expiry_check: Mutex::new(0),
            group_configs: std::sync::OnceLock::new(),
        }
    }

    /// Take each group's own configs from `configs` from now on.
    pub fn use_group_configs(&self, configs: Arc<GroupConfigManager>) {
        let _ = self.group_configs.set(configs);
    }

    /// The groups' own configs, if the broker opened them.
    pub fn group_configs(&self) -> Option<&Arc<GroupConfigManager>> {
        self.group_configs.get()
    }

    /// `group`'s consumer session timeout: its own, else the broker's.
    pub(super) fn consumer_session_timeout_ms(&self, group: &str) -> i32 {
        self.group_configs().map_or(self.config.consumer_session_timeout_ms, |c| {
            c.consumer_session_timeout_ms(group)
        })
    }

    /// `group`'s consumer heartbeat interval: its own, else the broker's.
    pub(super) fn consumer_heartbeat_interval_ms(&self, group: &str) -> i32 {
        self.group_configs().map_or(self.config.consumer_heartbeat_interval_ms, |c| {
            c.consumer_heartbeat_interval_ms(group)
        })
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

    /// In a cluster: groups follow the leadership of their
    /// `__consumer_offsets` partitions ([`Self::on_leadership`]), appends
    /// count once the partition's ISR holds them, and topics are the
    /// cluster's (`catalog`). No shard is coordinated until then.
    pub fn place_by_cluster(
        &self,
        replication: Arc<dyn CoordinatorReplication>,
        catalog: Arc<dyn TopicCatalog>,
    ) {
        if self.topics.set(catalog).is_err() {
            tracing::warn!("the group coordinator's topic catalog was already set");
        }
        self.runtime.place_by_cluster(replication);
    }

    /// The topics groups subscribe to: the cluster's, else the local logs'.
    pub(super) fn catalog(&self) -> &dyn TopicCatalog {
        match self.topics.get() {
            Some(c) => c.as_ref(),
            None => self.logs.as_ref(),
        }
    }

    /// In a cluster, after each image this broker applied: `led` holds the
    /// `__consumer_offsets` partitions it leads, with their leader epochs
    /// (Kafka's `onElection` and `onResignation`). Shards no longer led are
    /// emptied; shards led at a new epoch start loading. Returns the loads
    /// to run, each with [`Self::load_partition`], off the caller's thread.
    pub fn on_leadership(&self, led: &HashMap<i32, i32>) -> Vec<(i32, i32)> {
        let partitions = self.config.offsets_topic_partitions;
        let mut loads = Vec::new();
        for p in 0..partitions {
            match led.get(&p) {
                Some(&epoch) if self.runtime.elect(p, epoch) => {
                    tracing::info!(partition = p, epoch, "loading the groups of {OFFSETS_TOPIC}");
                    loads.push((p, epoch));
                }
                Some(_) => {}
                None if self.runtime.resign(p) => {
                    tracing::info!(
                        partition = p,
                        "no longer coordinating the groups of {OFFSETS_TOPIC}"
                    );
                }
                None => {}
            }
        }
        if let Some(p) = led.keys().find(|p| **p >= partitions) {
            tracing::warn!(partition = p, partitions, "{OFFSETS_TOPIC} has more partitions than offsets.topic.num.partitions: those groups are not coordinated");
        }
        loads
    }

    /// Rebuild the groups of partition `partition`, led here at `epoch`,
    /// and coordinate them once the partition's high watermark reached the
    /// end loaded (nothing is answered from records a further failover
    /// could remove). Given up when the shard moved on meanwhile. Blocks.
    pub fn load_partition(&self, partition: i32, epoch: i32) {
        let started = std::time::Instant::now();
        let tp = crate::log::TopicPartition::new(OFFSETS_TOPIC, partition);
        let partitions = self.config.offsets_topic_partitions;
        let Some((groups, stats, end)) =
            load_partition_groups(&self.logs, partition, partitions, self.now())
        else {
            return tracing::warn!(partition = %tp, "no local log to load groups from");
        };
        if let Some(replication) = self.runtime.replication() {
            loop {
                if !self.runtime.is_loading(partition, epoch) {
                    return;
                }
                match replication.await_committed(&tp, end) {
                    Ok(()) => break,
                    Err(CoordinatorWriteError::NotLeader) => return,
                    Err(e) => tracing::info!(partition = %tp, end, "loading groups: {e}; waiting"),
                }
            }
        }
        let count = groups.len();
        if self.runtime.install_partition(partition, epoch, groups, stats) {
            tracing::info!(
                partition = %tp,
                epoch,
                groups = count,
                records = stats.records,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "coordinating the groups of a partition"
            );
        }
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
    fn a_write_while_another_request_creates_the_offsets_topic_waits_for_it() {
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
        // The topic is being created (some partitions exist, not all): the
        // write neither fails (the Java client's SyncGroup takes no
        // COORDINATOR_LOAD_IN_PROGRESS) nor finds a partition missing.
        let writer = {
            let c = Arc::clone(&c);
            std::thread::spawn(move || c.runtime.append("g", &record()))
        };
        // Without the wait it would have failed at once; a slow machine can
        // only make this pass for the wrong reason, never fail it.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!writer.is_finished(), "the write waits for the creation");
        drop(armed);
        creator.join().expect("creator").expect("created");
        writer.join().expect("writer").expect("written once the topic exists");
    }
}

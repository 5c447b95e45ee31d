//! `CoordinatorRuntime` (Kafka's `CoordinatorRuntime`): the groups in one
//! shard per `__consumer_offsets` partition, each behind its own lock, and
//! the appends of their records.
//!
//! * A group lives in the shard of its partition, `abs(javaHash(group)) %
//!   partitions` (Kafka's rule), so later records of a group follow earlier
//!   ones in one log, and groups of different partitions never wait for
//!   each other: a slow append (an fsync on a slow disk) holds only its own
//!   shard.
//! * Every request about one group takes its shard's lock once
//!   ([`CoordinatorRuntime::lock_ready`]), which also checks the shard's
//!   state, and finishes under it; operations over every group (ListGroups,
//!   the periodic expiry) take the active shards one at a time, never two at
//!   once. Nothing holds a shard across an await (waiting members hold
//!   oneshot receivers), and a held shard is waited for off the async
//!   worker (`blocking`).
//! * Records are written before the request is acknowledged; the caller
//!   applies them to the groups only after the append succeeded. In a
//!   cluster an append counts only once the partition's ISR holds it
//!   (Kafka's coordinator writes with `acks=all`), and only while this
//!   broker leads the partition at the shard's epoch.
//! * A shard is `Loading`, `Active` or `NotCoordinator` ([`ShardState`]).
//!   Alone, every shard loads at start and stays active. In a cluster a
//!   shard loads when this broker becomes leader of its partition (at that
//!   leader epoch), turns active only once the partition's high watermark
//!   reached the end it loaded to, and is emptied when the broker stops
//!   leading it ([`CoordinatorRuntime::resign`]). While loading, requests
//!   get COORDINATOR_LOAD_IN_PROGRESS and transaction markers are deferred,
//!   then applied before anyone sees the groups; not coordinating, they get
//!   NOT_COORDINATOR.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::blocking;

use super::error::GroupError;
use super::group_metadata::Group;
use super::schema::{OffsetsRecord, RecordKey, RecordValue};
use crate::clock::SharedClock;
use crate::log::compression::Compression;
use crate::log::coordinator_loader::LoadStats;
use crate::log::producer_append_info::AppendOrigin;
use crate::log::record_batch::BatchBuilder;
use crate::log::topic_partition::coordinator_partition;
use crate::log::{LogError, LogManager, TopicPartition};
use crate::replica::coordinator_writes::CoordinatorReplication;

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Whether this broker coordinates a shard's groups now (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ShardState {
    /// Being rebuilt from its partition, led here at `epoch` (0 alone).
    Loading { epoch: i32 },
    /// Coordinated here, its partition led at `epoch`.
    Active { epoch: i32 },
    /// Another broker leads its partition, or none does.
    NotCoordinator,
}

/// The groups of one `__consumer_offsets` partition, by id, and whether
/// they are coordinated here (it derefs to the groups).
#[derive(Debug)]
pub(super) struct Shard {
    groups: HashMap<String, Group>,
    pub(super) state: ShardState,
    /// Transaction completions (producer id, commit) that arrived while
    /// loading; applied when the load installs its groups.
    deferred_completions: Vec<(i64, bool)>,
}

impl Shard {
    fn new(state: ShardState) -> Self {
        Self { groups: HashMap::new(), state, deferred_completions: Vec::new() }
    }

    fn ready(&self) -> Result<(), GroupError> {
        match self.state {
            ShardState::Active { .. } => Ok(()),
            ShardState::Loading { .. } => Err(GroupError::CoordinatorLoadInProgress),
            ShardState::NotCoordinator => Err(GroupError::NotCoordinator),
        }
    }

    /// Replace the groups by a load's, apply the completions deferred
    /// meanwhile, and turn active at `epoch`.
    fn install(&mut self, groups: HashMap<String, Group>, epoch: i32) {
        self.groups = groups;
        for (producer_id, commit) in std::mem::take(&mut self.deferred_completions) {
            complete_in(&mut self.groups, producer_id, commit);
        }
        self.state = ShardState::Active { epoch };
    }
}

impl std::ops::Deref for Shard {
    type Target = HashMap<String, Group>;
    fn deref(&self) -> &Self::Target {
        &self.groups
    }
}

impl std::ops::DerefMut for Shard {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.groups
    }
}

/// The groups behind their lock, and the writer of their records.
#[derive(Debug)]
pub(super) struct CoordinatorRuntime {
    logs: Arc<LogManager>,
    clock: SharedClock,
    partitions: i32,
    segment_bytes: i64,
    /// One shard per `__consumer_offsets` partition, by partition.
    shards: Vec<Mutex<Shard>>,
    /// Alone: the start-up load installed every shard. In a cluster: set
    /// when the cluster took over (shards load one by one).
    loaded: AtomicBool,
    load_stats: Mutex<LoadStats>,
    /// Each shard's leader epoch while active, written under its lock (so
    /// an append, made under that lock, reads the shard's own).
    shard_epochs: Vec<AtomicI32>,
    /// In a cluster, how appends become durable (set once, when the broker
    /// joins); unset, the local append is the acknowledgement.
    replication: std::sync::OnceLock<Arc<dyn CoordinatorReplication>>,
    /// Held while this runtime creates `__consumer_offsets`, so a write
    /// racing the creation waits for every partition instead of failing.
    creating: Mutex<()>,
}

impl CoordinatorRuntime {
    /// A runtime writing to `partitions` partitions of `__consumer_offsets`
    /// (created with `segment_bytes` segments when first needed).
    pub(super) fn new(
        logs: Arc<LogManager>,
        clock: SharedClock,
        partitions: i32,
        segment_bytes: i64,
    ) -> Self {
        Self {
            logs,
            clock,
            partitions,
            segment_bytes,
            shards: (0..partitions.max(1))
                .map(|_| Mutex::new(Shard::new(ShardState::Loading { epoch: 0 })))
                .collect(),
            loaded: AtomicBool::new(false),
            load_stats: Mutex::new(LoadStats::default()),
            shard_epochs: (0..partitions.max(1)).map(|_| AtomicI32::new(0)).collect(),
            replication: std::sync::OnceLock::new(),
            creating: Mutex::new(()),
        }
    }

    /// In a cluster: no shard is coordinated until this broker leads its
    /// partition ([`Self::elect`]), and appends wait for `replication`.
    pub(super) fn place_by_cluster(&self, replication: Arc<dyn CoordinatorReplication>) {
        if self.replication.set(replication).is_err() {
            return tracing::warn!("the group coordinator already follows the cluster");
        }
        for shard in &self.shards {
            shard.lock().state = ShardState::NotCoordinator;
        }
        self.loaded.store(true, Ordering::Release);
    }

    /// The shard of `group`, locked (whatever its state: for reads that
    /// answer an empty shard, and tests).
    pub(super) fn lock_group(&self, group: &str) -> MutexGuard<'_, Shard> {
        self.lock_partition(self.partition_for(group))
    }

    /// The shard of `group`, locked, if coordinated here now.
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while it loads, NOT_COORDINATOR when
    /// another broker leads its partition.
    pub(super) fn lock_ready(&self, group: &str) -> Result<MutexGuard<'_, Shard>, GroupError> {
        let shard = self.lock_group(group);
        shard.ready()?;
        Ok(shard)
    }

    /// The shard of `__consumer_offsets` partition `partition`, locked.
    pub(super) fn lock_partition(&self, partition: i32) -> MutexGuard<'_, Shard> {
        let shard = &self.shards[partition.rem_euclid(self.shards.len() as i32) as usize];
        blocking::lock(shard)
    }

    /// Run `f` on every active shard in turn, each locked while `f` runs.
    pub(super) fn for_each_shard(&self, mut f: impl FnMut(&mut Shard)) {
        for shard in &self.shards {
            let mut shard = blocking::lock(shard);
            if shard.ready().is_ok() {
                f(&mut shard);
            }
        }
    }

    /// How many groups there are.
    pub(super) fn group_count(&self) -> usize {
        let mut n = 0;
        self.for_each_shard(|shard| n += shard.len());
        n
    }

    /// The `__consumer_offsets` partition of a group (Kafka's rule).
    pub(super) fn partition_for(&self, group: &str) -> i32 {
        coordinator_partition(group, self.partitions)
    }

    pub(super) fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// What the last load read (zeros before it ran).
    pub(super) fn load_stats(&self) -> LoadStats {
        *self.load_stats.lock()
    }

    /// Install the groups the start-up load rebuilt (alone), every shard
    /// held at once so no request sees some installed and others not.
    pub(super) fn install(&self, loaded: HashMap<String, Group>, stats: LoadStats) {
        *self.load_stats.lock() = stats;
        let mut shards: Vec<MutexGuard<'_, Shard>> = self.shards.iter().map(|s| s.lock()).collect();
        let count = shards.len() as i32;
        let mut by_shard: Vec<HashMap<String, Group>> =
            (0..shards.len()).map(|_| HashMap::new()).collect();
        for (id, group) in loaded {
            by_shard[self.partition_for(&id).rem_euclid(count) as usize].insert(id, group);
        }
        for (shard, groups) in shards.iter_mut().zip(by_shard) {
            shard.install(groups, 0);
        }
        self.loaded.store(true, Ordering::Release);
    }

    /// In a cluster: this broker now leads `partition` at `epoch`. `true`
    /// when its shard starts loading (it was not already loading or active
    /// at that epoch): the caller then runs the load.
    pub(super) fn elect(&self, partition: i32, epoch: i32) -> bool {
        let mut shard = self.lock_partition(partition);
        if matches!(shard.state, ShardState::Loading { epoch: e } | ShardState::Active { epoch: e } if e == epoch)
        {
            return false;
        }
        // A new epoch: whatever was here may have been overwritten meanwhile.
        shard.groups.clear();
        shard.deferred_completions.clear();
        shard.state = ShardState::Loading { epoch };
        true
    }

    /// In a cluster: this broker no longer leads `partition`. Its groups
    /// go (waiting members are answered as their waits end); `true` when
    /// it was coordinated or loading here.
    pub(super) fn resign(&self, partition: i32) -> bool {
        let mut shard = self.lock_partition(partition);
        if shard.state == ShardState::NotCoordinator {
            return false;
        }
        shard.groups.clear();
        shard.deferred_completions.clear();
        shard.state = ShardState::NotCoordinator;
        true
    }

    /// Whether the shard of `partition` is still loading at `epoch`.
    pub(super) fn is_loading(&self, partition: i32, epoch: i32) -> bool {
        self.lock_partition(partition).state == ShardState::Loading { epoch }
    }

    /// Install what a load of `partition` at `epoch` rebuilt, unless the
    /// shard moved on meanwhile (resigned, or elected at another epoch):
    /// `true` when installed.
    pub(super) fn install_partition(
        &self,
        partition: i32,
        epoch: i32,
        groups: HashMap<String, Group>,
        stats: LoadStats,
    ) -> bool {
        let mut shard = self.lock_partition(partition);
        if shard.state != (ShardState::Loading { epoch }) {
            return false;
        }
        let count = self.shard_epochs.len() as i32;
        self.shard_epochs[partition.rem_euclid(count) as usize].store(epoch, Ordering::Release);
        shard.install(groups, epoch);
        *self.load_stats.lock() += stats;
        true
    }

    /// How appends become durable in a cluster (`None` alone).
    pub(super) fn replication(&self) -> Option<&Arc<dyn CoordinatorReplication>> {
        self.replication.get()
    }

    /// The marker of `producer_id`'s transaction was appended to
    /// `__consumer_offsets` partition `partition`: complete the pending
    /// offsets of every group of that partition.
    ///
    /// While the shard loads, the completion is deferred until the load
    /// installs its groups (the walk may have read that partition before the
    /// marker landed); applying one the walk already saw changes nothing,
    /// since no new transactional offset is accepted before the load ends.
    pub(super) fn complete_transaction(&self, partition: i32, producer_id: i64, commit: bool) {
        let mut shard = self.lock_partition(partition);
        match shard.state {
            // Checked under the shard's lock, which an install holds while
            // it drains these: a completion is never both missed and deferred.
            ShardState::Loading { .. } => shard.deferred_completions.push((producer_id, commit)),
            ShardState::Active { .. } => complete_in(&mut shard, producer_id, commit),
            // Not led here: the next load reads the marker from the log.
            ShardState::NotCoordinator => {}
        }
    }

    /// Create the offsets topic if it does not exist yet (as Kafka does on the
    /// first FindCoordinator).
    ///
    /// # Errors
    /// The topic could not be created.
    pub(super) fn ensure_offsets_topic(&self) -> Result<(), LogError> {
        // In a cluster the first FindCoordinator writes it to etcd; a local
        // copy would be a stray.
        if self.replication.get().is_some() {
            return Ok(());
        }
        // The creator holds it until every partition exists: a caller that
        // finds the topic under it finds all of it.
        let _creating = blocking::lock(&self.creating);
        if self.logs.topic(OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        let overrides = [
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("segment.bytes".to_string(), self.segment_bytes.to_string()),
            ("compression.type".to_string(), "producer".to_string()),
        ]
        .into();
        match self.logs.create_topic(OFFSETS_TOPIC, self.partitions, overrides) {
            Ok(_) => {
                tracing::info!(partitions = self.partitions, "created {OFFSETS_TOPIC}");
                Ok(())
            }
            Err(LogError::TopicExists(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Append records for `group` to its offsets partition.
    pub(super) fn append(&self, group: &str, records: &[OffsetsRecord]) -> Result<(), GroupError> {
        self.append_batch(group, records, None).map(|_| ())
    }

    /// Append records for `group` to its offsets partition as one batch, a
    /// transactional one of `producer` (id, epoch) if given (origin
    /// Coordinator, base sequence 0, as Kafka writes TxnOffsetCommit). Returns
    /// the batch's base offset (`None`: nothing to write).
    pub(super) fn append_batch(
        &self,
        group: &str,
        records: &[OffsetsRecord],
        producer: Option<(i64, i16)>,
    ) -> Result<Option<i64>, GroupError> {
        let encoded = records.iter().map(OffsetsRecord::encode).collect::<Result<Vec<_>, _>>();
        let encoded = encoded.map_err(|e| {
            // The id itself may be tens of kilobytes: its length is logged.
            tracing::warn!(group_id_bytes = group.len(), "refusing a group record: {e}");
            GroupError::Schema(e)
        })?;
        self.append_encoded(group, &encoded, producer)
    }

    /// [`Self::append_batch`] of records already encoded.
    pub(super) fn append_encoded(
        &self,
        group: &str,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
        producer: Option<(i64, i16)>,
    ) -> Result<Option<i64>, GroupError> {
        if records.is_empty() {
            return Ok(None);
        }
        let tp = TopicPartition::new(OFFSETS_TOPIC, self.partition_for(group));
        let replication = self.replication.get();
        match replication {
            // The cluster creates the topic (FindCoordinator); the caller
            // holds the shard, active at `epoch`.
            Some(r) => r.check_leader(&tp, self.shard_epoch(tp.partition))?,
            // Once the partition exists, no lock is taken on this path.
            None if self.logs.get_log(&tp).is_some() => {}
            None => self.ensure_offsets_topic().map_err(|e| {
                tracing::error!("creating {OFFSETS_TOPIC}: {e}");
                GroupError::from(e)
            })?,
        }
        // Only a topic created by something else (CreateTopics) with fewer
        // partitions could still miss it.
        let log = self.logs.get_log(&tp).ok_or(GroupError::CoordinatorNotAvailable)?;
        let now = self.clock.now_ms();
        let mut builder = BatchBuilder::new(Compression::None, now);
        for (k, v) in records {
            builder.append(now, Some(k), v.as_deref());
        }
        let (mut batch, origin) = match producer {
            Some((id, epoch)) => {
                builder.transactional = true;
                builder = builder.producer(id, epoch, 0);
                (builder.build(), AppendOrigin::Coordinator)
            }
            None => (builder.build(), AppendOrigin::Client),
        };
        let info = blocking::write(&log).append_with_origin(&mut batch, origin).map_err(|e| {
            tracing::error!(partition = %tp, "writing group records: {e}");
            GroupError::from(e)
        })?;
        if let Some(r) = replication {
            r.await_committed(&tp, info.last_offset + 1)?;
        }
        Ok(Some(info.first_offset))
    }

    /// The leader epoch of the shard of `partition` (its caller holds it).
    fn shard_epoch(&self, partition: i32) -> i32 {
        self.shard_epochs[partition.rem_euclid(self.shard_epochs.len() as i32) as usize]
            .load(Ordering::Acquire)
    }

    /// Write the group's metadata (members, assignments, generation).
    pub(super) fn persist_group(&self, g: &Group) -> Result<(), GroupError> {
        let key = RecordKey::Group { group: g.id.clone() };
        self.append(&g.id, &[OffsetsRecord { key, value: Some(RecordValue::Group(g.to_value())) }])
    }
}

/// Complete the pending offsets of `producer_id`'s transaction in every
/// group of a shard.
fn complete_in(groups: &mut HashMap<String, Group>, producer_id: i64, commit: bool) {
    for group in groups.values_mut() {
        group.complete_pending_offsets(producer_id, commit);
    }
}

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
//!   ([`CoordinatorRuntime::lock_group`]) and finishes under it; operations
//!   over every group (ListGroups, the periodic expiry, a load) take the
//!   shards one at a time, never two at once. Nothing holds a shard across
//!   an await (waiting members hold oneshot receivers), and a held shard is
//!   waited for off the async worker (`blocking`).
//! * Records are written before the request is acknowledged; the caller
//!   applies them to the groups only after the append succeeded.
//! * Until the loader installed the groups ([`CoordinatorRuntime::install`]),
//!   group requests get COORDINATOR_LOAD_IN_PROGRESS and transaction markers
//!   are deferred, then applied before anyone sees the groups.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
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

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The groups of one `__consumer_offsets` partition, by id.
pub(super) type Shard = HashMap<String, Group>;

/// The groups behind their lock, and the writer of their records.
#[derive(Debug)]
pub(super) struct CoordinatorRuntime {
    logs: Arc<LogManager>,
    clock: SharedClock,
    partitions: i32,
    segment_bytes: i64,
    /// One shard per `__consumer_offsets` partition, by partition.
    shards: Vec<Mutex<Shard>>,
    loaded: AtomicBool,
    load_stats: Mutex<LoadStats>,
    /// Transaction completions (offsets partition, producer id, commit) that
    /// arrived while loading; applied when the load installs its groups.
    deferred_completions: Mutex<Vec<(i32, i64, bool)>>,
    /// In a cluster, whether this broker coordinates groups now (set once at
    /// start); unset, it always does.
    coordinating: std::sync::OnceLock<crate::replica::leadership::CoordinatorGate>,
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
            shards: (0..partitions.max(1)).map(|_| Mutex::new(Shard::new())).collect(),
            loaded: AtomicBool::new(false),
            load_stats: Mutex::new(LoadStats::default()),
            deferred_completions: Mutex::new(Vec::new()),
            coordinating: std::sync::OnceLock::new(),
        }
    }

    /// Coordinate only while `gate` says so (a cluster's interim rule).
    pub(super) fn coordinate_while(&self, gate: crate::replica::leadership::CoordinatorGate) {
        if self.coordinating.set(gate).is_err() {
            tracing::warn!("the group coordinator's gate was already set");
        }
    }

    /// Whether this broker coordinates groups now.
    pub(super) fn is_coordinating(&self) -> bool {
        self.coordinating.get().is_none_or(|gate| gate.is_open())
    }

    /// The shard of `group`, locked.
    pub(super) fn lock_group(&self, group: &str) -> MutexGuard<'_, Shard> {
        self.lock_partition(self.partition_for(group))
    }

    /// The shard of `__consumer_offsets` partition `partition`, locked.
    pub(super) fn lock_partition(&self, partition: i32) -> MutexGuard<'_, Shard> {
        let shard = &self.shards[partition.rem_euclid(self.shards.len() as i32) as usize];
        blocking::lock(shard)
    }

    /// Run `f` on every shard in turn, each locked while `f` runs.
    pub(super) fn for_each_shard(&self, mut f: impl FnMut(&mut Shard)) {
        for shard in &self.shards {
            f(&mut blocking::lock(shard));
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

    pub(super) fn check_ready(&self) -> Result<(), GroupError> {
        if !self.is_coordinating() {
            Err(GroupError::NotCoordinator)
        } else if self.is_loaded() {
            Ok(())
        } else {
            Err(GroupError::CoordinatorLoadInProgress)
        }
    }

    pub(super) fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// What the last load read (zeros before it ran).
    pub(super) fn load_stats(&self) -> LoadStats {
        *self.load_stats.lock()
    }

    /// Install the groups a load rebuilt: a marker the walk may have missed
    /// was deferred, and is applied with the groups installed, before anyone
    /// sees them.
    pub(super) fn install(&self, loaded: HashMap<String, Group>, stats: LoadStats) {
        *self.load_stats.lock() = stats;
        // Every shard held: no request sees some shards installed and others not.
        let mut shards: Vec<MutexGuard<'_, Shard>> = self.shards.iter().map(|s| s.lock()).collect();
        for shard in shards.iter_mut() {
            shard.clear();
        }
        let count = shards.len() as i32;
        for (id, group) in loaded {
            let p = self.partition_for(&id).rem_euclid(count) as usize;
            shards[p].insert(id, group);
        }
        // Held last, as complete_transaction takes it last.
        let mut deferred = self.deferred_completions.lock();
        for (partition, producer_id, commit) in deferred.drain(..) {
            let shard = &mut shards[partition.rem_euclid(count) as usize];
            complete_in(shard, producer_id, commit);
        }
        self.loaded.store(true, Ordering::Release);
    }

    /// The marker of `producer_id`'s transaction was appended to
    /// `__consumer_offsets` partition `partition`: complete the pending
    /// offsets of every group of that partition.
    ///
    /// While loading, the completion is deferred until the load installs
    /// its groups (the walk may have read that partition before the marker
    /// landed); applying one the walk already saw changes nothing, since no
    /// new transactional offset is accepted before the load ends.
    pub(super) fn complete_transaction(&self, partition: i32, producer_id: i64, commit: bool) {
        let mut shard = self.lock_partition(partition);
        if !self.is_loaded() {
            // Checked under the shard's lock, which install holds while it
            // drains these: a completion is never both missed and deferred.
            self.deferred_completions.lock().push((partition, producer_id, commit));
            return;
        }
        complete_in(&mut shard, producer_id, commit);
    }

    /// Create the offsets topic if it does not exist yet (as Kafka does on the
    /// first FindCoordinator).
    ///
    /// # Errors
    /// The topic could not be created.
    pub(super) fn ensure_offsets_topic(&self) -> Result<(), LogError> {
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
        self.ensure_offsets_topic().map_err(|e| {
            tracing::error!("creating {OFFSETS_TOPIC}: {e}");
            GroupError::from(e)
        })?;
        let tp = TopicPartition::new(OFFSETS_TOPIC, self.partition_for(group));
        let log = self.logs.get_log(&tp).ok_or_else(|| {
            if self.logs.topic(OFFSETS_TOPIC).is_none() {
                // Another request is creating the topic (its partitions are
                // not all there yet): retriable, as a coordinator loading.
                GroupError::CoordinatorLoadInProgress
            } else {
                GroupError::CoordinatorNotAvailable
            }
        })?;
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
        let mut log = blocking::write(&log);
        let info = log.append_with_origin(&mut batch, origin).map_err(|e| {
            tracing::error!(partition = %tp, "writing group records: {e}");
            GroupError::from(e)
        })?;
        Ok(Some(info.first_offset))
    }

    /// Write the group's metadata (members, assignments, generation).
    pub(super) fn persist_group(&self, g: &Group) -> Result<(), GroupError> {
        let key = RecordKey::Group { group: g.id.clone() };
        self.append(&g.id, &[OffsetsRecord { key, value: Some(RecordValue::Group(g.to_value())) }])
    }
}

/// Complete the pending offsets of `producer_id`'s transaction in every
/// group of a shard.
fn complete_in(shard: &mut Shard, producer_id: i64, commit: bool) {
    for group in shard.values_mut() {
        group.complete_pending_offsets(producer_id, commit);
    }
}

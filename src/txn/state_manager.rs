//! The coordinator's side of `__transaction_state` (Kafka's
//! `TransactionStateManager`): the config, creating the topic, the partition
//! of a transactional id, appending a transaction's record, and rebuilding
//! every transactional id's metadata from the log at start.
//!
//! * A transactional id's records go to partition
//!   `abs(javaHash(id)) % partitions` of the **existing** topic (the
//!   configured count only until the topic exists), so later records of an id
//!   follow earlier ones in one log, and an id lands where Kafka puts it.
//! * The topic is compacted and uncompressed, with Kafka's topic configs; each
//!   record is keyed (`schema::TransactionLogKey`), its value the state
//!   (`schema::TransactionLogValue` v1) or null, a tombstone for an expired id.
//!   Batches are magic 2, uncompressed, CreateTime, without a producer id.
//! * Loading reads each partition from its log start to the end seen then:
//!   later records win, a tombstone deletes. Until the load finished, the
//!   cache answers [`TxnError::CoordinatorLoadInProgress`]. A record without
//!   a key, one that does not decode, or one whose state id is unknown or never
//!   written (Dead, PrepareEpochFence) is unreadable: logged with partition,
//!   segment file, byte position and offset, skipped, and counted in
//!   [`LoadStats`] (the walk is the log layer's `coordinator_loader`, shared
//!   with `__consumer_offsets`).
//! * A transaction loaded in PrepareCommit or PrepareAbort had its outcome
//!   decided but maybe not all its markers written: the load returns it, and
//!   the coordinator completes it (markers, then the Complete record). The
//!   load itself writes nothing.
//! * The cache changes only through `load`, `put_transaction_state_if_not_exists`
//!   and `remove_transaction_state` (after an expired id's tombstone);
//!   an append writes the log and leaves the cache to the caller, which applies
//!   the new state only after the append succeeded.
//! * Lock order: the cache's lock before a metadata's mutex (`snapshot` holds
//!   both), and no cache lock or metadata mutex is taken under a log lock.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::config::TransactionConfig;

use parking_lot::{Mutex, RwLock};

use super::error::TxnError;
use super::placement::TxnPlacement;
use super::schema::{SchemaError, TransactionLogKey, TransactionLogValue};
use super::transaction_metadata::{LogValueError, TransactionMetadata};
use crate::cleaner::ProducerIdResolver;
use crate::clock::SharedClock;
use crate::log::compression::Compression;
use crate::log::coordinator_loader::{load_partition, CoordinatorRecordVisitor, LoadStats};
use crate::log::record_batch::{BatchBuilder, BatchHeader};
use crate::log::topic_partition::coordinator_partition;
use crate::log::{LogError, LogManager, TopicPartition};

pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The largest decompressed batch the loader accepts.
pub(super) const MAX_BATCH_RECORDS_BYTES: usize = 64 << 20;

/// A transactional id's metadata, locked on its own.
pub type SharedTransactionMetadata = Arc<Mutex<TransactionMetadata>>;

/// What [`TransactionStateManager::load`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxnLoadOutcome {
    pub stats: LoadStats,
    /// Transactions in PrepareCommit or PrepareAbort, by transactional id:
    /// the coordinator writes their markers, then their Complete record.
    pub pending_completion: Vec<TransactionMetadata>,
    /// The largest producer id of any value read, if any: new producer ids
    /// must be above it.
    pub max_producer_id: Option<i64>,
}

/// `__transaction_state` and the metadata of every transactional id.
#[derive(Debug)]
pub struct TransactionStateManager {
    config: TransactionConfig,
    pub(super) logs: Arc<LogManager>,
    clock: SharedClock,
    pub(super) transactions: RwLock<HashMap<String, SharedTransactionMetadata>>,
    pub(super) loaded: AtomicBool,
    pub(super) load_stats: Mutex<LoadStats>,
    /// In a cluster, the `__transaction_state` partitions this broker
    /// coordinates (set once when it joins; `placement`); unset, it
    /// coordinates every id.
    pub(super) placement: std::sync::OnceLock<TxnPlacement>,
}

impl TransactionStateManager {
    pub fn new(config: TransactionConfig, logs: Arc<LogManager>, clock: SharedClock) -> Self {
        Self {
            config,
            logs,
            clock,
            transactions: RwLock::new(HashMap::new()),
            placement: std::sync::OnceLock::new(),
            loaded: AtomicBool::new(false),
            load_stats: Mutex::new(LoadStats::default()),
        }
    }

    pub fn config(&self) -> &TransactionConfig {
        &self.config
    }

    /// Partitions of `__transaction_state`: the existing topic's, else the
    /// configured count it will be created with. A changed config never
    /// moves an id of an existing topic.
    pub fn partition_count(&self) -> i32 {
        if self.placement.get().is_some() {
            // A broker holds replicas of some partitions only: the local
            // count says nothing (Kafka's brokers share the configured one).
            return self.config.transaction_log_num_partitions;
        }
        match self.logs.topic(TRANSACTION_STATE_TOPIC) {
            Some(info) => info.partitions,
            None => self.config.transaction_log_num_partitions,
        }
    }

    /// The `__transaction_state` partition of a transactional id (Kafka's rule).
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        coordinator_partition(transactional_id, self.partition_count())
    }

    /// Create `__transaction_state` if it does not exist yet, with Kafka's
    /// topic configs (compacted, uncompressed, its own segment size).
    ///
    /// # Errors
    /// The topic could not be created.
    pub fn ensure_transaction_state_topic(&self) -> Result<(), LogError> {
        // In a cluster the first FindCoordinator writes it to etcd.
        if self.placement.get().is_some() || self.logs.topic(TRANSACTION_STATE_TOPIC).is_some() {
            return Ok(());
        }
        let partitions = self.config.transaction_log_num_partitions;
        let overrides = [
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("compression.type".to_string(), "uncompressed".to_string()),
            ("segment.bytes".to_string(), self.config.transaction_log_segment_bytes.to_string()),
        ]
        .into();
        match self.logs.create_topic(TRANSACTION_STATE_TOPIC, partitions, overrides) {
            Ok(_) => {
                tracing::info!(partitions, "created {TRANSACTION_STATE_TOPIC}");
                Ok(())
            }
            Err(LogError::TopicExists(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Append the record of `txn`'s current state to its partition (Kafka's
    /// `appendTransactionToLog`, without the cache update, which is the
    /// caller's once this returned). Returns the record's offset.
    ///
    /// # Errors
    /// A state that is not written (a bug), a name too long for Kafka's
    /// schema, or the append failed.
    pub fn append_transaction_to_log(&self, txn: &TransactionMetadata) -> Result<i64, TxnError> {
        let value = txn.encode_log_value()?;
        self.append(&txn.transactional_id, Some(&value))
    }

    /// Append a tombstone for `transactional_id`: the id expired (Dead).
    ///
    /// # Errors
    /// An id too long for Kafka's schema, or the append failed.
    pub fn append_tombstone(&self, transactional_id: &str) -> Result<i64, TxnError> {
        self.append(transactional_id, None)
    }

    /// Append tombstones for `transactional_ids`, all of `partition`, in one
    /// batch (Kafka batches an expiry pass per partition).
    ///
    /// # Errors
    /// An id of another partition (a bug), an id too long for Kafka's
    /// schema, or the append failed (the batch larger than
    /// `max.message.bytes` too: see [`TransactionStateManager::tombstone_batch_fits`]).
    pub fn append_tombstones(
        &self,
        partition: i32,
        transactional_ids: &[String],
    ) -> Result<i64, TxnError> {
        if let Some(id) = transactional_ids.iter().find(|id| self.partition_for(id) != partition) {
            return Err(TxnError::IllegalTransit {
                transactional_id: id.clone(),
                detail: format!("tombstone batched for partition {partition}"),
            });
        }
        let records: Vec<(&str, Option<&[u8]>)> =
            transactional_ids.iter().map(|id| (id.as_str(), None)).collect();
        self.append_records(partition, &records)
    }

    /// Whether a batch of tombstones for ids of these byte lengths stays
    /// within the topic's `max.message.bytes` (an upper bound of the batch
    /// size: 61 header bytes, at most 26 per record besides its key).
    pub fn tombstone_batch_fits(&self, id_lengths: impl IntoIterator<Item = usize>) -> bool {
        let limit = self
            .logs
            .topic(TRANSACTION_STATE_TOPIC)
            .map_or(usize::MAX, |info| info.config.max_message_bytes);
        let size: usize = 61 + id_lengths.into_iter().map(|n| n + 4 + 26).sum::<usize>();
        size <= limit
    }

    fn append(&self, transactional_id: &str, value: Option<&[u8]>) -> Result<i64, TxnError> {
        self.append_records(self.partition_for(transactional_id), &[(transactional_id, value)])
    }

    /// One batch of `records` (id, value) in `partition`.
    fn append_records(
        &self,
        partition: i32,
        records: &[(&str, Option<&[u8]>)],
    ) -> Result<i64, TxnError> {
        let keys = records
            .iter()
            .map(|(id, _)| TransactionLogKey { transactional_id: id.to_string() }.encode())
            .collect::<Result<Vec<_>, _>>()?;
        let placement = self.placement.get();
        match placement {
            Some(placed) => placed.check_leader(partition)?,
            None => self.ensure_transaction_state_topic().map_err(|e| {
                tracing::error!("creating {TRANSACTION_STATE_TOPIC}: {e}");
                TxnError::from(e)
            })?,
        }
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, partition);
        let log = self.logs.get_log(&tp).ok_or(TxnError::CoordinatorNotAvailable)?;
        let now = self.clock.now_ms();
        let mut builder = BatchBuilder::new(Compression::None, now);
        for (key, (_, value)) in keys.iter().zip(records) {
            builder.append(now, Some(key), *value);
        }
        let mut batch = builder.build();
        let info = log.write().append_as_leader(&mut batch).map_err(|e| {
            let first = records.first().map_or("", |(id, _)| *id);
            tracing::error!(partition = %tp, transactional_id = first, "writing transaction records: {e}");
            TxnError::from(e)
        })?;
        if let Some(placed) = placement {
            placed.replication.await_committed(&tp, info.last_offset + 1)?;
        }
        Ok(info.first_offset)
    }

    /// Rebuild every transactional id's metadata from `__transaction_state`
    /// (see the module doc). The cache answers once this returned; the
    /// transactions to complete are returned, not acted on.
    pub fn load(&self) -> TxnLoadOutcome {
        if self.placement.get().is_some() {
            // In a cluster each partition loads when it is led here.
            return TxnLoadOutcome::default();
        }
        let started = std::time::Instant::now();
        let mut loader = TxnLoader::default();
        let mut stats = LoadStats::default();
        if let Some(info) = self.logs.topic(TRANSACTION_STATE_TOPIC) {
            for p in 0..info.partitions {
                let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, p);
                let Some(log) = self.logs.get_log(&tp) else {
                    continue;
                };
                let log = log.read();
                load_partition(&log, MAX_BATCH_RECORDS_BYTES, &mut loader, &mut stats);
            }
        }
        let pending_completion = super::placement::pending_completion(&loader.transactions);
        let count = loader.transactions.len();
        *self.transactions.write() =
            loader.transactions.into_iter().map(|(id, m)| (id, Arc::new(Mutex::new(m)))).collect();
        *self.load_stats.lock() = stats;
        self.loaded.store(true, Ordering::Release);
        if stats.unreadable_batches + stats.unreadable_records > 0 {
            tracing::error!(
                unreadable_batches = stats.unreadable_batches,
                unreadable_records = stats.unreadable_records,
                "{TRANSACTION_STATE_TOPIC} loaded with unreadable data; the transactions it held may be stale"
            );
        }
        tracing::info!(
            records = stats.records,
            batches = stats.batches,
            transactional_ids = count,
            to_complete = pending_completion.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "transaction state loaded"
        );
        TxnLoadOutcome { stats, pending_completion, max_producer_id: loader.max_producer_id }
    }

    /// Whether [`TransactionStateManager::load`] has finished.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// # Errors
    /// [`TxnError::CoordinatorLoadInProgress`] until the load finished (in a
    /// cluster, from the moment the cluster took over: each id is then
    /// checked on its own, [`Self::coordinator_epoch`]).
    pub fn check_loaded(&self) -> Result<(), TxnError> {
        if self.is_loaded() {
            Ok(())
        } else {
            Err(TxnError::CoordinatorLoadInProgress)
        }
    }

    /// The coordinator epoch this broker coordinates `transactional_id`
    /// at: alone 0 once loaded; in a cluster the leader epoch of its
    /// `__transaction_state` partition, led here and loaded.
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR when
    /// another broker leads its partition.
    pub fn coordinator_epoch(&self, transactional_id: &str) -> Result<i32, TxnError> {
        match self.placement.get() {
            None => self.check_loaded().map(|()| super::marker_writer::COORDINATOR_EPOCH),
            Some(placed) => placed.epoch_of(self.partition_for(transactional_id)),
        }
    }

    /// Which ids are coordinated here now, as of this call (taken before
    /// the cache's lock: the placement's lock comes first, as in a load).
    fn coordinated(&self) -> impl Fn(&str) -> bool + '_ {
        let active = self.placement.get().map(TxnPlacement::active);
        move |id| active.as_ref().is_none_or(|a| a.contains(&self.partition_for(id)))
    }

    /// What the last load read (zeros before it ran).
    pub fn load_stats(&self) -> LoadStats {
        *self.load_stats.lock()
    }

    /// The metadata of `transactional_id`, if it has any.
    ///
    /// # Errors
    /// [`TxnError::CoordinatorLoadInProgress`] until the load finished.
    pub fn get_transaction_state(
        &self,
        transactional_id: &str,
    ) -> Result<Option<SharedTransactionMetadata>, TxnError> {
        self.coordinator_epoch(transactional_id)?;
        Ok(self.transactions.read().get(transactional_id).cloned())
    }

    /// The metadata of `metadata.transactional_id`: the cached one if there is
    /// one (and `metadata` is dropped), else `metadata`, now cached.
    ///
    /// # Errors
    /// [`TxnError::CoordinatorLoadInProgress`] until the load finished.
    pub fn put_transaction_state_if_not_exists(
        &self,
        metadata: TransactionMetadata,
    ) -> Result<SharedTransactionMetadata, TxnError> {
        self.coordinator_epoch(&metadata.transactional_id)?;
        let mut transactions = self.transactions.write();
        let entry = transactions
            .entry(metadata.transactional_id.clone())
            .or_insert_with(|| Arc::new(Mutex::new(metadata)));
        Ok(Arc::clone(entry))
    }

    /// Every transactional id with its shared metadata, for the timers' scans;
    /// the cache's lock is released before the caller locks any metadata.
    ///
    /// # Errors
    /// [`TxnError::CoordinatorLoadInProgress`] until the load finished.
    pub fn all_transaction_states(
        &self,
    ) -> Result<Vec<(String, SharedTransactionMetadata)>, TxnError> {
        self.check_loaded()?;
        let coordinated = self.coordinated();
        let transactions = self.transactions.read();
        let here = transactions.iter().filter(|(id, _)| coordinated(id));
        Ok(here.map(|(id, m)| (id.clone(), Arc::clone(m))).collect())
    }

    /// Remove `transactional_id` from the cache if its entry is still
    /// `expected` (its tombstone was appended); returns whether it was.
    pub fn remove_transaction_state(
        &self,
        transactional_id: &str,
        expected: &SharedTransactionMetadata,
    ) -> bool {
        let mut transactions = self.transactions.write();
        match transactions.get(transactional_id) {
            Some(current) if Arc::ptr_eq(current, expected) => {
                transactions.remove(transactional_id);
                true
            }
            _ => false,
        }
    }

    /// A copy of every transactional id's metadata, by id.
    ///
    /// # Errors
    /// [`TxnError::CoordinatorLoadInProgress`] until the load finished.
    pub fn snapshot(&self) -> Result<BTreeMap<String, TransactionMetadata>, TxnError> {
        self.check_loaded()?;
        let coordinated = self.coordinated();
        let transactions = self.transactions.read();
        let here = transactions.iter().filter(|(id, _)| coordinated(id));
        Ok(here.map(|(id, m)| (id.clone(), m.lock().clone())).collect())
    }
}

/// The cleaner's status names the transactional id of an open transaction
/// holding cleaning back by its producer id. An id's current producer id wins
/// over another id's previous one (a producer id is current for one id at a
/// time). Before the load finished nothing is known. Takes the cache's lock,
/// then each metadata's mutex, as everywhere (module doc).
impl ProducerIdResolver for TransactionStateManager {
    fn transactional_id(&self, producer_id: i64) -> Option<String> {
        if !self.is_loaded() || producer_id < 0 {
            return None;
        }
        let transactions = self.transactions.read();
        let mut previous = None;
        for (id, metadata) in transactions.iter() {
            let m = metadata.lock();
            if m.producer_id == producer_id {
                return Some(id.clone());
            }
            if m.prev_producer_id == producer_id {
                previous = Some(id.clone());
            }
        }
        previous
    }
}

/// One load in progress: the metadata rebuilt so far.
#[derive(Default)]
pub(super) struct TxnLoader {
    pub(super) transactions: HashMap<String, TransactionMetadata>,
    pub(super) max_producer_id: Option<i64>,
}

impl CoordinatorRecordVisitor for TxnLoader {
    type Error = RecordError;

    fn record(
        &mut self,
        _: &BatchHeader,
        _: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(), RecordError> {
        let key = TransactionLogKey::decode(key.ok_or(RecordError::Keyless)?)?;
        let Some(value) = value else {
            self.transactions.remove(&key.transactional_id);
            return Ok(());
        };
        let value = TransactionLogValue::decode(value)?;
        let metadata = TransactionMetadata::from_log_value(key.transactional_id.clone(), &value)
            .map_err(|e| RecordError::Value(key.transactional_id.clone(), e))?;
        // A producer id a transaction hands over at Complete is issued too.
        let highest = metadata.producer_id.max(metadata.next_producer_id);
        self.max_producer_id = self.max_producer_id.max(Some(highest));
        self.transactions.insert(key.transactional_id, metadata);
        Ok(())
    }
}

/// Why one record could not be applied.
#[derive(Debug, thiserror::Error)]
pub(super) enum RecordError {
    #[error("{0}")]
    Schema(#[from] SchemaError),
    #[error("transactional id {0}: {1}")]
    Value(String, LogValueError),
    #[error("a record without a key")]
    Keyless,
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::transaction_metadata::TransactionState;
    use super::*;
    use crate::clock::MockClock;
    use crate::log::LogManagerConfig;

    const NOW: i64 = 1_700_000_000_000;

    fn open(dir: &Path, clock: &Arc<MockClock>) -> TransactionStateManager {
        let logs = LogManager::open(LogManagerConfig::new(dir), clock.clone()).expect("open logs");
        let config = TransactionConfig { transaction_log_num_partitions: 5, ..Default::default() };
        TransactionStateManager::new(config, Arc::new(logs), clock.clone())
    }

    /// Write `m` through the manager and remember what a load must give back.
    fn write(
        manager: &TransactionStateManager,
        expected: &mut BTreeMap<String, TransactionMetadata>,
        m: &TransactionMetadata,
    ) {
        manager.append_transaction_to_log(m).expect("append");
        let mut loaded = m.clone();
        loaded.last_producer_epoch = -1;
        expected.insert(m.transactional_id.clone(), loaded);
    }

    fn ongoing(id: &str, pid: i64, partitions: &[(&str, i32)]) -> TransactionMetadata {
        let mut m = TransactionMetadata::new(id, pid, 0, 60_000, NOW);
        m.transition(TransactionState::Ongoing).expect("Empty -> Ongoing");
        m.partitions.extend(partitions.iter().map(|(t, p)| TopicPartition::new(*t, *p)));
        m.txn_start_timestamp = NOW;
        m
    }

    fn partition_log(
        manager: &TransactionStateManager,
        id: &str,
    ) -> crate::log::manager::SharedLog {
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, manager.partition_for(id));
        manager.logs.get_log(&tp).expect("partition")
    }

    #[test]
    fn config_defaults_are_kafkas() {
        let c = TransactionConfig::default();
        assert_eq!(c.transaction_log_num_partitions, 50);
        assert_eq!(c.transaction_log_segment_bytes, 104_857_600);
        assert_eq!((c.transaction_log_replication_factor, c.transaction_log_min_isr), (3, 2));
        assert_eq!(c.transaction_max_timeout_ms, 900_000);
        assert_eq!(c.transactional_id_expiration_ms, 604_800_000);
        assert_eq!(c.abort_timed_out_transactions_interval_ms, 10_000);
        assert_eq!(c.remove_expired_transactional_ids_interval_ms, 3_600_000);
    }

    #[test]
    fn the_topic_has_kafkas_configs_and_its_partition_count_decides() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = MockClock::new(NOW);
        let manager = open(dir.path(), &clock);
        // "my-txn".hashCode() is -1061187895: 1061187895 % 5 = 0, % 50 = 45.
        assert_eq!(manager.partition_for("my-txn"), 0);
        manager.ensure_transaction_state_topic().expect("create");
        let info = manager.logs.topic(TRANSACTION_STATE_TOPIC).expect("created");
        assert_eq!(info.partitions, 5);
        assert!(info.config.compact && !info.config.delete);
        assert_eq!(info.config.compression_type, "uncompressed");
        assert_eq!(info.config.segment_bytes, 104_857_600);
        // A later config with 50 partitions does not move ids of the existing topic.
        let other = TransactionStateManager::new(
            TransactionConfig::default(),
            Arc::clone(&manager.logs),
            clock.clone(),
        );
        assert_eq!(other.partition_for("my-txn"), 0);
        assert_eq!(coordinator_partition("my-txn", 50), 45);
    }

    #[test]
    fn the_cache_answers_only_after_the_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manager = open(dir.path(), &MockClock::new(NOW));
        assert!(!manager.is_loaded());
        assert!(matches!(
            manager.get_transaction_state("t"),
            Err(TxnError::CoordinatorLoadInProgress)
        ));
        let m = TransactionMetadata::new("t", 1, 0, 1000, NOW);
        assert!(matches!(
            manager.put_transaction_state_if_not_exists(m.clone()),
            Err(TxnError::CoordinatorLoadInProgress)
        ));
        // No topic yet: an empty load.
        assert_eq!(manager.load(), TxnLoadOutcome::default());
        assert!(manager.is_loaded());
        assert!(manager.get_transaction_state("t").expect("loaded").is_none());
        let cached = manager.put_transaction_state_if_not_exists(m.clone()).expect("put");
        let other = TransactionMetadata::new("t", 2, 0, 1000, NOW);
        let again = manager.put_transaction_state_if_not_exists(other).expect("put");
        assert!(Arc::ptr_eq(&cached, &again), "the first metadata stays");
        assert_eq!(*again.lock(), m);
    }

    #[test]
    fn a_producer_id_resolves_to_its_transactional_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manager = open(dir.path(), &MockClock::new(NOW));
        assert_eq!(manager.transactional_id(7), None, "nothing before the load");
        manager.load();
        let mut rotated = TransactionMetadata::new("rotated", 9, 0, 1000, NOW);
        rotated.prev_producer_id = 7;
        manager.put_transaction_state_if_not_exists(rotated).expect("put");
        assert_eq!(manager.transactional_id(7).as_deref(), Some("rotated"), "a previous id");
        let current = TransactionMetadata::new("current", 7, 3, 1000, NOW);
        manager.put_transaction_state_if_not_exists(current).expect("put");
        assert_eq!(manager.transactional_id(7).as_deref(), Some("current"), "current wins");
        assert_eq!(manager.transactional_id(9).as_deref(), Some("rotated"));
        assert_eq!(manager.transactional_id(8), None);
        assert_eq!(manager.transactional_id(-1), None);
    }

    #[test]
    fn a_reopened_log_loads_the_same_map() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = MockClock::new(NOW);
        let manager = open(dir.path(), &clock);
        let mut expected = BTreeMap::new();

        // committed: Empty, Ongoing, PrepareCommit, CompleteCommit.
        let mut m = TransactionMetadata::new("committed", 1000, 0, 60_000, NOW);
        write(&manager, &mut expected, &m);
        m.transition(TransactionState::Ongoing).expect("legal");
        m.partitions.insert(TopicPartition::new("orders", 2));
        m.txn_start_timestamp = NOW;
        write(&manager, &mut expected, &m);
        m.transition(TransactionState::PrepareCommit).expect("legal");
        write(&manager, &mut expected, &m);
        m.transition(TransactionState::CompleteCommit).expect("legal");
        m.partitions.clear();
        m.last_producer_epoch = 4; // memory only: -1 after the load
        write(&manager, &mut expected, &m);
        // Open, and decided but not complete.
        write(&manager, &mut expected, &ongoing("open", 1001, &[("a", 0), ("b", 1)]));
        let mut aborting = ongoing("aborting", 1002, &[("a", 1)]);
        aborting.transition(TransactionState::PrepareAbort).expect("legal");
        aborting.producer_epoch = 1;
        aborting.client_transaction_version = 1;
        write(&manager, &mut expected, &aborting);
        let mut committing = ongoing("committing", 1003, &[("c", 0)]);
        committing.transition(TransactionState::PrepareCommit).expect("legal");
        write(&manager, &mut expected, &committing);
        // Expired: a tombstone deletes; then the id comes back.
        write(&manager, &mut expected, &TransactionMetadata::new("expired", 900, 3, 1000, NOW));
        manager.append_tombstone("expired").expect("tombstone");
        expected.remove("expired");
        write(&manager, &mut expected, &TransactionMetadata::new("gone", 901, 0, 1000, NOW));
        manager.append_tombstone("gone").expect("tombstone");
        expected.remove("gone");
        write(&manager, &mut expected, &TransactionMetadata::new("gone", 1004, 0, 1000, NOW));
        assert_eq!(expected.len(), 5);

        manager.logs.shutdown().expect("shutdown");
        drop(manager);
        let reopened = open(dir.path(), &clock);
        let outcome = reopened.load();
        assert_eq!(reopened.snapshot().expect("loaded"), expected);
        let pending: Vec<&str> =
            outcome.pending_completion.iter().map(|m| m.transactional_id.as_str()).collect();
        assert_eq!(pending, ["aborting", "committing"]);
        assert_eq!(outcome.pending_completion[0], expected["aborting"]);
        assert_eq!(outcome.max_producer_id, Some(1004));
        let stats =
            LoadStats { batches: 12, records: 12, unreadable_batches: 0, unreadable_records: 0 };
        assert_eq!(outcome.stats, stats);
        assert_eq!(reopened.load_stats(), stats);
        let shared = reopened.get_transaction_state("open").expect("loaded").expect("present");
        assert_eq!(shared.lock().partitions.len(), 2);
    }

    #[test]
    fn unreadable_records_are_reported_counted_and_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = MockClock::new(NOW);
        let manager = open(dir.path(), &clock);
        let good = ongoing("t", 77, &[("a", 0)]);
        manager.append_transaction_to_log(&good).expect("append");
        let log = partition_log(&manager, "t");
        let key = TransactionLogKey { transactional_id: "t".into() }.encode().expect("key");
        let value = |status: i8| {
            let v =
                TransactionLogValue { transaction_status: status, ..good.to_log_value().unwrap() };
            v.encode(1).expect("value")
        };
        let mut cut = value(2);
        cut.truncate(cut.len() - 3);
        let bad: [(Vec<u8>, Vec<u8>); 5] = [
            (key.clone(), value(9)),            // unknown state id
            (key.clone(), value(6)),            // Dead is never written
            (key.clone(), value(7)),            // nor PrepareEpochFence
            (key.clone(), cut),                 // truncated value
            (vec![0, 1, 0, 1, b't'], value(2)), // key of another record type
        ];
        let mut builder = BatchBuilder::new(Compression::None, NOW);
        for (k, v) in &bad {
            builder.append(NOW, Some(k), Some(v));
        }
        log.write().append_as_leader(&mut builder.build()).expect("append bad records");

        let outcome = manager.load();
        let stats =
            LoadStats { batches: 2, records: 6, unreadable_batches: 0, unreadable_records: 5 };
        assert_eq!(outcome.stats, stats);
        // The good record stands: none of the later, unreadable ones replaced it.
        let loaded = manager.snapshot().expect("loaded");
        assert_eq!(loaded.len(), 1);
        let mut want = good;
        want.last_producer_epoch = -1;
        assert_eq!(loaded["t"], want);
        assert!(outcome.pending_completion.is_empty());
    }

    #[test]
    fn states_that_are_never_written_are_refused_before_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manager = open(dir.path(), &MockClock::new(NOW));
        let mut m = ongoing("t", 1, &[("a", 0)]);
        m.transition(TransactionState::PrepareEpochFence).expect("legal");
        assert!(matches!(
            manager.append_transaction_to_log(&m),
            Err(TxnError::InvalidRecord(LogValueError::NotLogged(
                TransactionState::PrepareEpochFence
            )))
        ));
        let mut empty = TransactionMetadata::new("u", 1, 0, 1000, NOW);
        empty.partitions.insert(TopicPartition::new("a", 0));
        assert!(matches!(
            manager.append_transaction_to_log(&empty),
            Err(TxnError::InvalidRecord(LogValueError::UnexpectedPartitions(
                TransactionState::Empty
            )))
        ));
        let long = TransactionMetadata::new("x".repeat(40_000), 1, 0, 1000, NOW);
        assert!(matches!(manager.append_transaction_to_log(&long), Err(TxnError::Schema(_))));
        // Nothing reached the log, and nothing was created for it.
        assert!(manager.logs.topic(TRANSACTION_STATE_TOPIC).is_none());
    }
}

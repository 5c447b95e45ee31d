//! Shared pieces of the coordinator's tests: a node (real `LogManager` in a
//! temp dir, state manager, real `ProducerIdManager`, coordinator), a
//! recording marker writer that can fail, call back into the coordinator, or
//! "crash" (copy the log dir as a crash would leave it, then fail every write),
//! and a reader of an id's records in `__transaction_state`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::config::TransactionConfig;
use super::coordinator::{ProducerIdAndEpoch, TransactionCoordinator};
use super::error::TxnError;
use super::marker_writer::{
    MarkerWriteError, TransactionMarkerWriter, TransactionResult, TxnMarker,
};
use super::schema::{TransactionLogKey, TransactionLogValue};
use super::state_manager::{TransactionStateManager, TRANSACTION_STATE_TOPIC};
use super::transaction_metadata::TransactionMetadata;
use crate::clock::MockClock;
use crate::log::coordinator_loader::{load_partition, CoordinatorRecordVisitor, LoadStats};
use crate::log::producer_id_manager::ProducerIdManager;
use crate::log::record_batch::BatchHeader;
use crate::log::{LogManager, LogManagerConfig, TopicPartition};

pub(super) const NOW: i64 = 1_700_000_000_000;
pub(super) const TIMEOUT: i32 = 60_000;

type Hook = Box<dyn FnMut(&TopicPartition) + Send>;

/// Where and when to "crash".
#[derive(Debug)]
struct CrashPlan {
    after: usize,
    written: usize,
    from: PathBuf,
    to: PathBuf,
}

/// A marker writer that records what it was asked to write.
#[derive(Default)]
pub(super) struct FakeMarkerWriter {
    written: Mutex<Vec<(TopicPartition, TxnMarker)>>,
    failing: Mutex<BTreeSet<TopicPartition>>,
    deleted_topics: Mutex<BTreeSet<String>>,
    crash: Mutex<Option<CrashPlan>>,
    crashed: Mutex<bool>,
    hook: Mutex<Option<Hook>>,
    /// Partitions reported with no open transaction (`has_open_transaction`).
    closed: Mutex<BTreeSet<TopicPartition>>,
}

impl std::fmt::Debug for FakeMarkerWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeMarkerWriter").field("written", &self.written.lock()).finish()
    }
}

impl FakeMarkerWriter {
    pub fn written(&self) -> Vec<(TopicPartition, TxnMarker)> {
        self.written.lock().clone()
    }

    pub fn take_written(&self) -> Vec<(TopicPartition, TxnMarker)> {
        std::mem::take(&mut *self.written.lock())
    }

    /// Writes to `tp` fail until [`FakeMarkerWriter::heal`].
    pub fn fail(&self, tp: TopicPartition) {
        self.failing.lock().insert(tp);
    }

    /// Report `tp` as holding no open transaction (its marker landed before a crash).
    pub fn close(&self, tp: TopicPartition) {
        self.closed.lock().insert(tp);
    }

    pub fn heal(&self) {
        self.failing.lock().clear();
    }

    /// Writes to `topic` answer UNKNOWN_TOPIC_OR_PARTITION.
    pub fn delete_topic(&self, topic: &str) {
        self.deleted_topics.lock().insert(topic.to_string());
    }

    /// After `after` more markers (before the first one if 0), copy the log
    /// dir `from` to `to` and fail every later write: `to` is then what a
    /// process killed at that point leaves on disk.
    pub fn crash_after(&self, after: usize, from: &Path, to: &Path) {
        let plan = CrashPlan { after, written: 0, from: from.into(), to: to.into() };
        *self.crash.lock() = Some(plan);
    }

    /// Run `hook` at every marker write, before the marker is recorded.
    pub fn set_hook(&self, hook: impl FnMut(&TopicPartition) + Send + 'static) {
        *self.hook.lock() = Some(Box::new(hook));
    }

    fn crash_now(&self, plan: &CrashPlan) {
        copy_dir(&plan.from, &plan.to);
        *self.crashed.lock() = true;
    }
}

impl TransactionMarkerWriter for FakeMarkerWriter {
    fn write_marker(
        &self,
        tp: &TopicPartition,
        marker: &TxnMarker,
    ) -> Result<(), MarkerWriteError> {
        let failed = || MarkerWriteError::Failed { partition: tp.clone(), reason: "test".into() };
        if let Some(plan) = self.crash.lock().as_ref().filter(|p| p.after == 0 && p.written == 0) {
            self.crash_now(plan);
        }
        if *self.crashed.lock() || self.failing.lock().contains(tp) {
            return Err(failed());
        }
        if let Some(hook) = self.hook.lock().as_mut() {
            hook(tp);
        }
        if self.deleted_topics.lock().contains(&tp.topic) {
            return Err(MarkerWriteError::UnknownTopicOrPartition(tp.clone()));
        }
        self.written.lock().push((tp.clone(), *marker));
        if let Some(plan) = self.crash.lock().as_mut() {
            plan.written += 1;
            if plan.written == plan.after {
                self.crash_now(plan);
            }
        }
        Ok(())
    }

    fn has_open_transaction(&self, tp: &TopicPartition, _producer_id: i64) -> Option<bool> {
        self.closed.lock().contains(tp).then_some(false)
    }
}

pub(super) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// One broker's transaction side, on `dir`.
pub(super) struct Node {
    pub logs: Arc<LogManager>,
    pub state: Arc<TransactionStateManager>,
    pub coordinator: Arc<TransactionCoordinator>,
    pub writer: Arc<FakeMarkerWriter>,
}

pub(super) fn config() -> TransactionConfig {
    TransactionConfig { transaction_log_num_partitions: 3, ..Default::default() }
}

/// Open the logs, the state manager and the coordinator on `dir`, without
/// loading.
pub(super) fn open_unloaded(dir: &Path, clock: &Arc<MockClock>) -> Node {
    let logs = LogManager::open(LogManagerConfig::new(dir), clock.clone()).expect("open logs");
    let logs = Arc::new(logs);
    let state = Arc::new(TransactionStateManager::new(config(), Arc::clone(&logs), clock.clone()));
    let ids = ProducerIdManager::load(dir, 0).expect("producer ids");
    let writer = Arc::new(FakeMarkerWriter::default());
    let coordinator = Arc::new(TransactionCoordinator::new(
        Arc::clone(&state),
        Arc::new(Mutex::new(ids)),
        writer.clone(),
        clock.clone(),
    ));
    Node { logs, state, coordinator, writer }
}

/// [`open_unloaded`], then the coordinator's load.
pub(super) fn open(dir: &Path, clock: &Arc<MockClock>) -> Node {
    let node = open_unloaded(dir, clock);
    node.coordinator.load();
    node
}

pub(super) fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

pub(super) fn set(partitions: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    partitions.iter().map(|(t, p)| tp(t, *p)).collect()
}

/// The cached metadata of `id`.
pub(super) fn cached(node: &Node, id: &str) -> TransactionMetadata {
    node.state.get_transaction_state(id).expect("loaded").expect("cached").lock().clone()
}

/// Every record of `id` in its `__transaction_state` partition, in order
/// (None = tombstone).
pub(super) fn records(node: &Node, id: &str) -> Vec<Option<TransactionMetadata>> {
    records_in(&node.logs, &node.state, id)
}

/// [`records`] from the parts, for hooks that cannot hold the node.
pub(super) fn records_in(
    logs: &LogManager,
    state: &TransactionStateManager,
    id: &str,
) -> Vec<Option<TransactionMetadata>> {
    struct Collect<'a>(&'a str, Vec<Option<TransactionMetadata>>);
    impl CoordinatorRecordVisitor for Collect<'_> {
        type Error = String;
        fn record(
            &mut self,
            _: &BatchHeader,
            _: i64,
            key: Option<&[u8]>,
            value: Option<&[u8]>,
        ) -> Result<(), String> {
            let key = TransactionLogKey::decode(key.ok_or("no key")?).map_err(|e| e.to_string())?;
            if key.transactional_id != self.0 {
                return Ok(());
            }
            let m = value
                .map(|v| {
                    let v = TransactionLogValue::decode(v).map_err(|e| e.to_string())?;
                    TransactionMetadata::from_log_value(self.0, &v).map_err(|e| e.to_string())
                })
                .transpose()?;
            self.1.push(m);
            Ok(())
        }
    }
    let partition = tp(TRANSACTION_STATE_TOPIC, state.partition_for(id));
    let Some(log) = logs.get_log(&partition) else {
        return Vec::new();
    };
    let mut visitor = Collect(id, Vec::new());
    let mut stats = LoadStats::default();
    load_partition(&log.read(), 1 << 20, &mut visitor, &mut stats);
    assert_eq!(stats.unreadable_records + stats.unreadable_batches, 0);
    visitor.1
}

/// The states of `records`, tombstones as None.
pub(super) fn states(node: &Node, id: &str) -> Vec<Option<super::TransactionState>> {
    records(node, id).iter().map(|r| r.as_ref().map(|m| m.state())).collect()
}

pub(super) const ID: &str = "txn-a";

pub(super) fn pe(producer_id: i64, epoch: i16) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch { producer_id, epoch }
}

pub(super) fn marker(p: ProducerIdAndEpoch, result: TransactionResult) -> TxnMarker {
    TxnMarker { producer_id: p.producer_id, producer_epoch: p.epoch, coordinator_epoch: 0, result }
}

pub(super) fn fresh() -> (tempfile::TempDir, Arc<MockClock>, Node) {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = MockClock::new(NOW);
    let node = open(dir.path(), &clock);
    (dir, clock, node)
}

/// InitProducerId, then AddPartitions of `partitions`: an Ongoing transaction.
pub(super) fn begin(node: &Node, id: &str, partitions: &[(&str, i32)]) -> ProducerIdAndEpoch {
    let p = node.coordinator.init_producer_id(id, TIMEOUT, None).expect("init");
    node.coordinator
        .add_partitions_to_txn(id, p.producer_id, p.epoch, &set(partitions))
        .expect("add");
    p
}

pub(super) fn is_fenced(r: Result<impl std::fmt::Debug, TxnError>) -> bool {
    matches!(r, Err(TxnError::ProducerFenced { .. }))
}

pub(super) fn is_concurrent(r: Result<impl std::fmt::Debug, TxnError>) -> bool {
    matches!(r, Err(TxnError::ConcurrentTransactions { .. }))
}

pub(super) fn is_bad_mapping(r: Result<impl std::fmt::Debug, TxnError>) -> bool {
    matches!(r, Err(TxnError::InvalidProducerIdMapping { .. }))
}

/// Set the cached epoch of `id` directly (the epoch tests start near its end).
pub(super) fn set_epoch(node: &Node, id: &str, epoch: i16) {
    let shared = node.state.get_transaction_state(id).expect("loaded").expect("cached");
    shared.lock().producer_epoch = epoch;
}

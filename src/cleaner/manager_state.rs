//! What `LogCleanerManager` keeps under its one mutex (Kafka's
//! `inProgress`, `uncleanablePartitions` and the checkpoints it caches): the
//! cleaning state of each partition, the uncleanable partitions and offline
//! log dirs, the cached cleaner checkpoints, the last cleans and the delete
//! horizons. The eligibility rules read it (`eligibility.rs`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use super::checkpoint::CleanerOffsetCheckpoint;
use super::cleaning_state::LogCleaningState;
use super::io_context::CancellationToken;
use super::last_clean::LastClean;
use super::log_to_clean::LogToClean;
use super::stale_list::earliest_deadline;
use super::tombstone_guard::KeptTombstones;
use crate::log::{Log, TopicPartition};

/// A partition whose last clean failed, with why and since when.
#[derive(Debug, Clone)]
pub(super) struct Uncleanable {
    pub(super) cause: String,
    pub(super) since_ms: i64,
}

/// The manager's state, under its one mutex.
#[derive(Debug, Default)]
pub(super) struct ManagerState {
    pub(super) states: HashMap<TopicPartition, (LogCleaningState, CancellationToken)>,
    pub(super) uncleanable: HashMap<TopicPartition, Uncleanable>,
    pub(super) offline_dirs: BTreeMap<PathBuf, String>,
    pub(super) checkpoints: HashMap<PathBuf, BTreeMap<TopicPartition, i64>>,
    /// The last [`CLEAN_HISTORY`] cleans of each partition, oldest first.
    pub(super) history: HashMap<TopicPartition, VecDeque<LastClean>>,
    pub(super) delete_horizons: HashMap<TopicPartition, i64>,
    /// When a clean is due for the partition's stale lists (`None`: none
    /// is); read from the lists at a partition's first measure after a
    /// start, then from each clean.
    pub(super) stale_deadlines: HashMap<TopicPartition, Option<i64>>,
    /// The tombstones the last clean kept with a horizon.
    pub(super) kept_tombstones: HashMap<TopicPartition, KeptTombstones>,
    pub(super) dirtiest_ratio: f64,
    pub(super) max_compaction_delay_ms: i64,
    pub(super) time_of_last_run_ms: i64,
}

impl ManagerState {
    /// The cached checkpoint of `dir`, read on first use. An unreadable file
    /// only costs work (everything is dirty again), so it is logged and ignored.
    pub(super) fn checkpoint(&mut self, dir: &Path) -> &mut BTreeMap<TopicPartition, i64> {
        self.checkpoints.entry(dir.to_path_buf()).or_insert_with(|| {
            CleanerOffsetCheckpoint::new(dir).read().unwrap_or_else(|e| {
                tracing::warn!(target: "log_cleaner", dir = %dir.display(), error = %e, "unreadable cleaner checkpoint; cleaning from the log starts");
                BTreeMap::new()
            })
        })
    }

    /// The cleaner checkpoint of `tp`, if its log dir has one for it.
    pub(super) fn checkpoint_of(&mut self, log_dir: &Path, tp: &TopicPartition) -> Option<i64> {
        self.checkpoint(log_dir).get(tp).copied()
    }

    /// `log` measured from its cleaner checkpoint.
    pub(super) fn measure(&mut self, log: &Log, now_ms: i64) -> LogToClean {
        let checkpoint = self.checkpoint_of(&log_dir_of(log), log.topic_partition());
        self.stale_deadlines.entry(log.topic_partition().clone()).or_insert_with(|| {
            // After a start: the lists a clean left (one read of the dir).
            let segments: Vec<(i64, u64)> =
                log.segments().map(|s| (s.base_offset(), s.size())).collect();
            earliest_deadline(log.dir(), &segments)
        });
        LogToClean::measure(log, checkpoint, now_ms)
    }
}

pub(super) fn log_dir_of(log: &Log) -> PathBuf {
    log.dir().parent().map(Path::to_path_buf).unwrap_or_default()
}

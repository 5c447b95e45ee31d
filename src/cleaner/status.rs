//! What the manager shows: `sediment cleaner-status` (JSON), the
//! `/cleaner-status` endpoint and the cleaner gauges of `/metrics` all read
//! [`ManagerStatus`], built fresh by [`LogCleanerManager::status`].
//!
//! Invariants:
//! * A partition is `eligible` exactly when the manager's eligibility rules
//!   would let a thread take it now; otherwise `ineligible` says why, in the
//!   order the rules are tried (its own state first, then its log).
//! * Field names and the `code` of [`Ineligible`] are an interface (scripts
//!   and dashboards read them): they change only with a note.
//!
//! [`LogCleanerManager::status`]: super::LogCleanerManager::status

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::cleaner::CleanResult;
use super::log_to_clean::{oldest_dirty_timestamp, LogToClean, OpenTransaction};
use super::manager::{log_dir_of, LogCleanerManager};
use super::stats::CleanerStats;
use super::tiered_store::{StoreCleanState, StoreCleaning};
use super::tombstone_guard::TombstonesAtRisk;
use crate::log::manager::SharedLog;
use crate::log::{Log, TopicPartition};

/// How many cleans of each partition the manager remembers.
pub const CLEAN_HISTORY: usize = 10;

/// What one successful clean of a partition did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastClean {
    pub start_time_ms: i64,
    pub end_time_ms: i64,
    pub first_dirty_offset: i64,
    pub end_offset: i64,
    pub elapsed_ms: i64,
    pub bytes_read: u64,
    /// Bytes of batches the recopy dropped without reading them again
    /// (every record superseded, known from the map pass).
    pub bytes_dropped_unread: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_written: u64,
    pub keys_in_map: u64,
    /// The map filled before the end of the dirty range.
    pub map_filled: bool,
    pub aborted_batches_removed: u64,
    pub horizons_stamped: u64,
    pub start_size: u64,
    pub end_size: u64,
    pub start_messages: u64,
    pub end_messages: u64,
    pub buffer_utilization: f64,
    pub tombstones_removed: u64,
    /// Tombstones past their horizon kept for a group that has not read them.
    pub tombstones_guarded: u64,
    /// `1 - end size / start size` (0 when nothing was recopied).
    pub size_reduction: f64,
}

impl LastClean {
    /// The record of `result`, a clean from `first_dirty_offset` that ended at `end_time_ms`.
    pub(super) fn new(end_time_ms: i64, first_dirty_offset: i64, result: &CleanResult) -> Self {
        Self::of_stats(end_time_ms, first_dirty_offset, result.end_offset, &result.stats)
    }

    /// The record of a clean from `first_dirty_offset` to `end_offset` that
    /// ended at `end_time_ms` having done what `s` counts (a store clean
    /// reports its own this way).
    pub fn of_stats(
        end_time_ms: i64,
        first_dirty_offset: i64,
        end_offset: i64,
        s: &CleanerStats,
    ) -> Self {
        Self {
            start_time_ms: s.start_ms,
            end_time_ms,
            first_dirty_offset,
            end_offset,
            elapsed_ms: s.elapsed_ms(),
            bytes_read: s.map_bytes_read + s.bytes_read,
            bytes_dropped_unread: s.bytes_dropped_unread,
            bytes_written: s.bytes_written,
            records_read: s.map_messages_read + s.messages_read,
            records_written: s.messages_written,
            keys_in_map: s.map_entries,
            map_filled: s.map_filled,
            aborted_batches_removed: s.aborted_batches_removed,
            horizons_stamped: s.horizons_stamped,
            start_size: s.start_size,
            end_size: s.end_size,
            start_messages: s.start_messages,
            end_messages: s.end_messages,
            buffer_utilization: s.buffer_utilization,
            tombstones_removed: s.tombstones_removed,
            tombstones_guarded: s.tombstones_guarded,
            size_reduction: if s.start_size == 0 {
                0.0
            } else {
                1.0 - s.end_size as f64 / s.start_size as f64
            },
        }
    }
}

/// Why a compacted log is not eligible for cleaning now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Ineligible {
    InProgress,
    Paused {
        state: String,
    },
    LogDirOffline {
        cause: String,
    },
    Uncleanable {
        cause: String,
        retry_in_ms: i64,
    },
    Empty,
    NoDirtyRecords,
    OnlyActiveSegmentDirty,
    InsideMinCompactionLag,
    /// The dirty records start at or past the first unstable offset: an open
    /// transaction (its producer id, first offset, age and, when the
    /// coordinator knows it, transactional id) holds cleaning back.
    OpenTransaction(OpenTransaction),
    UnderRatio {
        ratio: f64,
        min_cleanable_dirty_ratio: f64,
    },
}

impl std::fmt::Display for Ineligible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InProgress => write!(f, "being cleaned"),
            Self::Paused { state } => {
                write!(f, "cleaning {state} (delete or DeleteRecords running)")
            }
            Self::LogDirOffline { cause } => {
                write!(f, "cleaning stopped in its log dir after an I/O error: {cause}")
            }
            Self::Uncleanable { cause, retry_in_ms } => {
                write!(f, "uncleanable, retried in {}s: {cause}", retry_in_ms / 1000)
            }
            Self::Empty => write!(f, "empty log"),
            Self::NoDirtyRecords => write!(f, "no dirty records"),
            Self::OnlyActiveSegmentDirty => write!(f, "only the active segment is dirty"),
            Self::InsideMinCompactionLag => {
                write!(f, "dirty records are inside min.compaction.lag.ms")
            }
            Self::OpenTransaction(t) => {
                write!(
                    f,
                    "the dirty records are past the first unstable offset {}: ",
                    t.first_offset
                )?;
                match &t.transactional_id {
                    Some(id) => {
                        write!(f, "transactional id {id:?} (producer id {})", t.producer_id)?
                    }
                    None => write!(
                        f,
                        "producer id {} (no transactional id known for it)",
                        t.producer_id
                    )?,
                }
                write!(f, " has a transaction open there")?;
                match t.age_ms {
                    Some(age) => write!(f, " for {}s", age / 1000),
                    None => write!(f, " (age unknown)"),
                }
            }
            Self::UnderRatio { ratio, min_cleanable_dirty_ratio } => {
                write!(f, "dirty ratio {ratio:.3} is not above min.cleanable.dirty.ratio {min_cleanable_dirty_ratio}")
            }
        }
    }
}

/// One compacted partition as `sediment cleaner-status` and the metrics see it.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionCleaningStatus {
    pub topic: String,
    pub partition: i32,
    pub log_dir: String,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
    pub segments: usize,
    pub first_dirty_offset: i64,
    pub first_uncleanable_offset: i64,
    pub clean_bytes: u64,
    pub cleanable_bytes: u64,
    pub dirty_ratio: f64,
    pub min_cleanable_dirty_ratio: f64,
    /// How long past `max.compaction.lag.ms` the oldest dirty record is.
    pub compaction_delay_ms: i64,
    pub eligible: bool,
    /// Why not, when not eligible.
    pub ineligible: Option<Ineligible>,
    pub reason: Option<String>,
    pub uncleanable_cause: Option<String>,
    pub latest_delete_horizon_ms: Option<i64>,
    /// The first dirty batch's timestamp ([`oldest_dirty_timestamp`]): no
    /// superseded copy has waited to be erased for longer than since then.
    pub oldest_dirty_timestamp_ms: Option<i64>,
    /// The open transaction whose first offset (the first unstable offset)
    /// is the first uncleanable offset, holding back closed segments.
    pub open_transaction: Option<OpenTransaction>,
    /// Per consumer group with offsets here: the kept tombstones it has not
    /// read, whose delete horizons are running (the resurrection guard's view).
    pub tombstones_at_risk: Vec<TombstonesAtRisk>,
    pub last_clean: Option<LastClean>,
    /// The last [`CLEAN_HISTORY`] cleans, oldest first (the last is `last_clean`).
    pub history: Vec<LastClean>,
    /// A tiered partition: its segments in the object store and the store
    /// cleaner's measure of them (`tiered_store.rs`).
    pub store: Option<StoreCleaning>,
}

impl PartitionCleaningStatus {
    /// The status of `log`, measured as `to_clean`, with the verdict of the
    /// eligibility rules; what the manager remembers of it is left empty.
    pub(super) fn new(
        log: &Log,
        log_dir: &Path,
        to_clean: &LogToClean,
        ineligible: Option<Ineligible>,
    ) -> Self {
        let tp = log.topic_partition();
        Self {
            topic: tp.topic.clone(),
            partition: tp.partition,
            log_dir: log_dir.display().to_string(),
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            size_bytes: log.size(),
            segments: log.segments().len(),
            first_dirty_offset: to_clean.first_dirty_offset,
            first_uncleanable_offset: to_clean.first_uncleanable_offset,
            clean_bytes: to_clean.clean_bytes,
            cleanable_bytes: to_clean.cleanable_bytes,
            dirty_ratio: to_clean.cleanable_ratio(),
            min_cleanable_dirty_ratio: log.config().min_cleanable_dirty_ratio,
            compaction_delay_ms: to_clean.compaction_delay_ms,
            eligible: ineligible.is_none(),
            reason: ineligible.as_ref().map(ToString::to_string),
            ineligible,
            uncleanable_cause: None,
            latest_delete_horizon_ms: None,
            oldest_dirty_timestamp_ms: oldest_dirty_timestamp(log, to_clean.first_dirty_offset),
            open_transaction: to_clean.open_transaction.clone(),
            tombstones_at_risk: Vec::new(),
            last_clean: None,
            history: Vec::new(),
            store: None,
        }
    }
}

/// Per log dir: uncleanable partitions and their cleanable bytes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LogDirCleaningStatus {
    pub log_dir: String,
    pub uncleanable_partitions: usize,
    pub uncleanable_bytes: u64,
    pub offline_cause: Option<String>,
}

impl LogDirCleaningStatus {
    /// A log dir with nothing to report yet.
    pub(super) fn new(log_dir: &Path) -> Self {
        Self { log_dir: log_dir.display().to_string(), ..Default::default() }
    }
}

/// The manager's gauges and every compacted partition.
#[derive(Debug, Clone, Serialize)]
pub struct ManagerStatus {
    pub now_ms: i64,
    /// Kafka's `max-dirty-percent`: the highest dirty ratio seen by the last
    /// choice, or a store's dirty ratio (a tiered partition's store-only
    /// segments) when higher, as an integer percent.
    pub max_dirty_percent: i64,
    pub time_since_last_run_ms: i64,
    pub max_compaction_delay_ms: i64,
    pub log_dirs: Vec<LogDirCleaningStatus>,
    pub partitions: Vec<PartitionCleaningStatus>,
}

impl LogCleanerManager {
    /// The gauges and every compacted partition's status, read fresh.
    pub fn status(&self) -> ManagerStatus {
        let now = self.clock.now_ms();
        let all = self.logs.all_logs();
        let committed = self.committed_offsets();
        let store_states = self.store_clean_states(&all);
        let mut inner = self.lock();
        let mut partitions = Vec::new();
        let mut dirs: BTreeMap<PathBuf, LogDirCleaningStatus> = BTreeMap::new();
        for dir in &self.logs.config().log_dirs {
            dirs.insert(dir.clone(), LogDirCleaningStatus::new(dir));
        }
        for (tp, shared) in all {
            let log = shared.read();
            if !log.config().compact {
                continue;
            }
            let dir = log_dir_of(&log);
            let to_clean = inner.measure(&log, now);
            let ineligible = self.eligibility(&inner, &log, &to_clean, now).err();
            let uncleanable = inner.uncleanable.get(&tp).cloned();
            let dir_status =
                dirs.entry(dir.clone()).or_insert_with(|| LogDirCleaningStatus::new(&dir));
            if uncleanable.is_some() {
                dir_status.uncleanable_partitions += 1;
                dir_status.uncleanable_bytes += to_clean.cleanable_bytes;
            }
            partitions.push(PartitionCleaningStatus {
                uncleanable_cause: uncleanable.map(|u| u.cause),
                latest_delete_horizon_ms: inner.delete_horizons.get(&tp).copied(),
                tombstones_at_risk: match (inner.kept_tombstones.get(&tp), committed.get(&tp)) {
                    (Some(kept), Some(c)) => kept.at_risk(c, log.log_start_offset()),
                    _ => Vec::new(),
                },
                last_clean: inner.history.get(&tp).and_then(|h| h.back()).cloned(),
                history: inner
                    .history
                    .get(&tp)
                    .map(|h| h.iter().cloned().collect())
                    .unwrap_or_default(),
                store: StoreCleaning::of(
                    &log,
                    store_states.get(&tp).cloned(),
                    (to_clean.clean_bytes, to_clean.cleanable_bytes),
                ),
                ..PartitionCleaningStatus::new(&log, &dir, &to_clean, ineligible)
            });
        }
        for (dir, cause) in &inner.offline_dirs {
            if let Some(d) = dirs.get_mut(dir) {
                d.offline_cause = Some(cause.clone());
            }
        }
        let store_dirtiest = partitions
            .iter()
            .filter_map(|p| p.store.as_ref()?.cleaning.as_ref())
            // A store with nothing to rewrite is not behind, however dirty.
            .filter(|c| c.rewritable)
            .map(|c| c.dirty_ratio)
            .fold(0.0, f64::max);
        let status = ManagerStatus {
            now_ms: now,
            max_dirty_percent: (100.0 * inner.dirtiest_ratio.max(store_dirtiest)) as i64,
            time_since_last_run_ms: (now - inner.time_of_last_run_ms).max(0),
            max_compaction_delay_ms: inner.max_compaction_delay_ms,
            log_dirs: dirs.into_values().collect(),
            partitions,
        };
        drop(inner);
        self.name_open_transactions(status)
    }

    /// The store cleaner's measure of every tiered partition among `all`
    /// that it measured, asked before any lock of the manager is taken.
    fn store_clean_states(
        &self,
        all: &[(TopicPartition, SharedLog)],
    ) -> HashMap<TopicPartition, StoreCleanState> {
        let Some(store) = self.tiered_store() else { return HashMap::new() };
        all.iter().filter_map(|(tp, _)| Some((tp.clone(), store.store_clean_state(tp)?))).collect()
    }

    /// The groups' committed offsets on every partition that has some,
    /// asked once per status before any lock of the manager is taken.
    fn committed_offsets(&self) -> HashMap<TopicPartition, Vec<(String, i64)>> {
        self.consumer_offsets().map(|o| o.committed_by_partition()).unwrap_or_default()
    }

    /// `status` with the transactional id of every open transaction it shows,
    /// from the resolver, asked with no lock held (it takes the coordinator's).
    fn name_open_transactions(&self, mut status: ManagerStatus) -> ManagerStatus {
        let Some(resolver) = self.producer_id_resolver() else { return status };
        for p in &mut status.partitions {
            let Some(open) = &mut p.open_transaction else { continue };
            open.transactional_id = resolver.transactional_id(open.producer_id);
            if let Some(Ineligible::OpenTransaction(t)) = &mut p.ineligible {
                t.transactional_id.clone_from(&open.transactional_id);
                p.reason = p.ineligible.as_ref().map(ToString::to_string);
            }
        }
        status
    }
}

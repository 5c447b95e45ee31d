//! What the manager shows: `sediment cleaner-status` (JSON), the
//! `/cleaner-status` endpoint and the cleaner gauges of `/metrics` all read
//! [`ManagerStatus`], built fresh by [`LogCleanerManager::status`]
//! (`manager_status.rs`).
//!
//! Invariants:
//! * A partition is `eligible` exactly when the manager's eligibility rules
//!   would let a thread take it now; otherwise `ineligible` says why, in the
//!   order the rules are tried (its own state first, then its log).
//! * Field names and the `code` of [`Ineligible`] are an interface (scripts
//!   and dashboards read them): they change only with a note.
//!
//! [`LogCleanerManager::status`]: super::LogCleanerManager::status

use std::path::Path;

use serde::Serialize;

use super::last_clean::LastClean;
use super::log_to_clean::{oldest_dirty_timestamp, LogToClean, OpenTransaction};
use super::source_segment::strategy_for;
use super::tiered_store::StoreCleaning;
use super::tombstone_guard::TombstonesAtRisk;
use crate::log::Log;

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
    /// Which copy of a key the cleaner keeps: `offset`, `timestamp` or
    /// `header(<name>)` (coordinator topics are always `offset`).
    pub compaction_strategy: String,
    /// How long past `max.compaction.lag.ms` the oldest dirty record is.
    pub compaction_delay_ms: i64,
    pub eligible: bool,
    /// Why not, when not eligible.
    pub ineligible: Option<Ineligible>,
    pub reason: Option<String>,
    pub uncleanable_cause: Option<String>,
    pub latest_delete_horizon_ms: Option<i64>,
    /// `sediment.compaction.min.segment.garbage.ratio` (0: off).
    pub min_segment_garbage_ratio: f64,
    /// When a clean is due for the stale copies kept in segments under
    /// that ratio (their earliest deadline; `None`: none is).
    pub stale_deadline_ms: Option<i64>,
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
            compaction_strategy: strategy_for(&tp.topic, log.config()).to_string(),
            compaction_delay_ms: to_clean.compaction_delay_ms,
            eligible: ineligible.is_none(),
            reason: ineligible.as_ref().map(ToString::to_string),
            ineligible,
            uncleanable_cause: None,
            latest_delete_horizon_ms: None,
            min_segment_garbage_ratio: log.config().min_segment_garbage_ratio,
            stale_deadline_ms: None,
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

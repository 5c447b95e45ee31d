//! The key audit: every physical copy of one key in one compacted partition,
//! the region each lies in, and by when compaction guarantees that the
//! superseded copies (and a tombstone) are gone under the current config.
//!
//! Invariants:
//! * Read-only. The audit reads segment files through handles it was given
//!   and writes nothing.
//! * A consistent snapshot. A [`PartitionView`] holds handles to the segment
//!   files opened while the caller held the log's read lock, each read only
//!   up to its size at that moment. A clean that swaps segments meanwhile
//!   replaces files, not the bytes behind these handles, so the audit sees
//!   the log as it was when it started and holds no lock while it reads.
//! * Bounded. Memory is one batch (at most the segment's `max.message.bytes`
//!   bound), its inflated records (bounded the same way) and the copies found.
//! * Every read is counted against the throttle given (the broker passes the
//!   cleaner's, so an audit and the cleaner share one I/O budget), and the
//!   bytes read are reported.
//!
//! # When a copy is gone
//!
//! A superseded copy leaves with the first clean whose offset map holds a
//! newer copy of the key. A newer copy enters the map once it is cleanable:
//! at once when it lies in a closed segment below the first uncleanable
//! offset; when its segment's newest timestamp is `min.compaction.lag.ms`
//! old; never while it is in the active segment (which rolls only on an
//! append, after `segment.ms` or `max.compaction.lag.ms`) or past the first
//! unstable offset (an open transaction ends when its producer ends it). A
//! clean of the partition is then bound to start by the time its dirty ratio
//! exceeds `min.cleanable.dirty.ratio` (true now, or not known to become
//! true) or `max.compaction.lag.ms` has passed since the newer copy's
//! segment began. The time given adds one `log.cleaner.backoff.ms`, the
//! longest an idle cleaner thread waits before it looks again, and assumes a
//! thread is free; a partition that cannot be cleaned (cleaner off,
//! uncleanable, log dir offline, paused) has no guarantee.
//!
//! Under a versioned compaction strategy (`sediment.compaction.strategy`)
//! the winner is the copy with the greatest (version, offset), and a copy is
//! superseded by every copy that outranks it. One that outranks it from a
//! higher offset removes it once mapped, as above; one from a lower offset
//! (an older write of a higher version) removes it once the superseded copy
//! is mapped itself. A local copy outranked only by copies below it that are
//! only in the object store stays until local retention moves it there: the
//! local cleaner never reads the store.
//!
//! A tombstone leaves with the first clean after its delete horizon: the
//! horizon is stamped, `delete.retention.ms` ahead, by the clean that first
//! covers the tombstone, and the manager takes the partition again once the
//! horizon has passed.

use std::fs::File;
use std::path::PathBuf;

use serde::Serialize;

use super::log_cleaner::LogCleanerHandle;
use super::log_to_clean::dirty_ratio;
use super::manager::LogCleanerManager;
use super::manager_state::log_dir_of;
use super::source_segment::strategy_for;
use super::status::Ineligible;
use super::throttler::Throttler;
use crate::log::batch_reader::{BatchReadError, BatchReader, ChunkHook};
use crate::log::compaction_strategy::{record_timestamp, CompactionStrategy};
use crate::log::config::LogConfig;
use crate::log::record_batch::{self, BatchHeader, RecordIter};
use crate::log::segment::SegmentConfig;
use crate::log::topic_partition::default_partition;
use crate::log::{Log, TopicPartition};

/// The largest inflated payload of one batch the audit accepts.
const MAX_RECORDS_BYTES: usize = 256 << 20;

/// One segment file to read: a handle opened under the log's read lock.
#[derive(Debug)]
pub struct SegmentFile {
    pub path: PathBuf,
    pub base_offset: i64,
    /// Bytes to read: the size when the snapshot was taken.
    pub size: u64,
    pub file: File,
}

/// What the cleaner would do with the partition, as the caller knows it.
#[derive(Debug, Clone, Default)]
pub struct CleanerView {
    pub enabled: bool,
    pub backoff_ms: i64,
    /// Why the partition cannot be cleaned now and for an unknown time
    /// (uncleanable, log dir offline, paused), if so.
    pub blocked: Option<String>,
}

/// A snapshot of one partition for an audit.
#[derive(Debug)]
pub struct PartitionView {
    pub topic_partition: TopicPartition,
    /// Ascending by base offset; the last is the active segment.
    pub segments: Vec<SegmentFile>,
    pub log_start_offset: i64,
    /// The cleaner checkpoint (missing or outside the log: the log start).
    pub checkpoint: Option<i64>,
    /// `None` when no transaction is open, or when not known (a data dir).
    pub first_unstable_offset: Option<i64>,
    pub config: LogConfig,
    pub cleaner: CleanerView,
    pub max_batch_size: usize,
    /// The offsets only in the object store, when the log has some.
    pub store: Option<StorePart>,
}

impl PartitionView {
    /// How the cleaner ranks the copies of a key in this partition.
    fn strategy(&self) -> CompactionStrategy {
        strategy_for(&self.topic_partition.topic, &self.config)
    }
}

impl PartitionView {
    /// The snapshot of `log`, taken while the caller holds its read lock.
    ///
    /// # Errors
    /// A segment file that cannot be duplicated (out of descriptors).
    pub fn of_log(
        log: &Log,
        checkpoint: Option<i64>,
        cleaner: CleanerView,
    ) -> std::io::Result<Self> {
        let segments = log
            .segments()
            .map(|s| {
                Ok(SegmentFile {
                    path: s.log_path(),
                    base_offset: s.base_offset(),
                    size: s.size(),
                    file: s.file().try_clone()?,
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self {
            topic_partition: log.topic_partition().clone(),
            segments,
            log_start_offset: log.log_start_offset(),
            checkpoint,
            first_unstable_offset: log.first_unstable_offset(),
            config: (**log.config()).clone(),
            cleaner,
            max_batch_size: log.active_segment().max_batch_size(),
            store: None,
        })
    }
}

/// Where a copy lies, as the cleaner sees the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    /// Below the first dirty offset: cleaned before.
    Clean,
    /// Cleanable, not cleaned yet.
    Dirty,
    /// The active segment, never cleaned.
    ActiveSegment,
    /// A closed segment whose records are younger than `min.compaction.lag.ms`.
    MinCompactionLag,
    /// At or past the first unstable offset: an open transaction holds it.
    OpenTransaction,
    /// Below the local log start: only in the object store, where the store
    /// cleaner removes it.
    Store,
}

/// One physical copy of the key.
#[derive(Debug, Clone, Serialize)]
pub struct KeyCopy {
    pub offset: i64,
    pub segment: String,
    pub timestamp_ms: i64,
    /// Bytes of the value; `None` for a tombstone.
    pub value_bytes: Option<usize>,
    pub tombstone: bool,
    pub region: Region,
    pub superseded: bool,
    /// Its version under a versioned compaction strategy (absent under
    /// `offset`); a missing or unreadable header is `i64::MIN`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// The delete horizon stamped on its batch by an earlier clean.
    pub delete_horizon_ms: Option<i64>,
    /// When it is guaranteed gone (superseded copies and tombstones).
    pub gone_by_ms: Option<i64>,
    /// Superseded, and listed in its segment's `.stale` list: a clean kept
    /// the segment under `sediment.compaction.min.segment.garbage.ratio`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub listed_stale: bool,
    /// Why no time can be given, when it cannot.
    pub no_guarantee: Option<String>,
}

/// The audit's conclusion about the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No copy of the key is in the partition.
    Absent,
    /// The newest copy is a tombstone and no older copy remains.
    Erased,
    /// Superseded copies remain.
    Pending,
    /// The newest copy is a value and it is the only one.
    Live,
    /// No superseded copy in what was read, but offsets only in the object
    /// store were not read: absent, live or erased cannot be told.
    Incomplete,
}

/// The partition's regions when the audit ran.
#[derive(Debug, Clone, Serialize)]
pub struct Regions {
    pub log_start_offset: i64,
    pub first_dirty_offset: i64,
    pub first_uncleanable_offset: i64,
    pub active_segment_base_offset: i64,
    pub first_unstable_offset: Option<i64>,
    pub log_end_offset: i64,
    pub dirty_ratio: f64,
}

/// The configuration the guarantees were computed from.
#[derive(Debug, Clone, Serialize)]
pub struct AuditConfig {
    pub min_cleanable_dirty_ratio: f64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub delete_retention_ms: i64,
    pub segment_ms: i64,
    pub cleaner_enabled: bool,
    pub cleaner_backoff_ms: i64,
    pub cleaner_blocked: Option<String>,
    /// `offset`, `timestamp` or `header(<name>)`: how copies rank.
    pub compaction_strategy: String,
}

/// The whole answer, as `/key-audit` serves it.
#[derive(Debug, Clone, Serialize)]
pub struct KeyAudit {
    pub topic: String,
    pub partition: i32,
    pub key: String,
    pub now_ms: i64,
    pub regions: Regions,
    pub config: AuditConfig,
    pub copies: Vec<KeyCopy>,
    pub verdict: Verdict,
    /// For `pending`: when every superseded copy is guaranteed gone.
    pub guaranteed_by_ms: Option<i64>,
    /// For `pending` without a time: why.
    pub no_guarantee: Option<String>,
    pub segments_read: usize,
    pub bytes_read: u64,
    /// A tiered partition: what the audit read of the store.
    pub store: Option<StoreAudit>,
}

/// Why an audit could not finish.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Read(#[from] BatchReadError),
    #[error("{path}: batch at offset {offset}: {reason}")]
    Corrupt { path: PathBuf, offset: i64, reason: String },
}

/// What the scan learns of each segment besides the copies.
#[derive(Debug, Clone)]
struct SegmentFacts {
    base_offset: i64,
    next_offset: i64,
    size: u64,
    /// The newest record timestamp (`min.compaction.lag.ms` is measured from it).
    largest_timestamp: i64,
    /// The first batch's max timestamp (`max.compaction.lag.ms` is measured from it).
    first_batch_timestamp: Option<i64>,
}

/// Read every segment of `view` and find the copies of `key`.
///
/// # Errors
/// An unreadable or corrupt segment, naming the file and the batch.
pub fn audit(
    view: &PartitionView,
    key: &[u8],
    now_ms: i64,
    throttler: Option<&Throttler>,
) -> Result<KeyAudit, AuditError> {
    let mut copies = Vec::new();
    let mut buf = Vec::new();
    let store = match &view.store {
        Some(part) => Some(store::scan_store(view, part, key, &mut buf, throttler, &mut copies)?),
        None => None,
    };
    let mut facts = Vec::new();
    let mut bytes_read = 0;
    for seg in &view.segments {
        let (f, read) = scan_segment(view, seg, key, &mut buf, Throttled(throttler), &mut copies)?;
        bytes_read += read;
        facts.push(f);
    }
    let listed = stale::listed_copies(view, key);
    let mut audit = assess(view, &facts, copies, (now_ms, &listed));
    audit.key = String::from_utf8_lossy(key).into_owned();
    audit.segments_read = facts.len();
    audit.bytes_read = bytes_read;
    if let Some(why) = store.as_ref().and_then(|s| s.not_read.as_ref()) {
        // Older copies may be in the store's part: no verdict but pending
        // holds, and no time for it.
        if audit.verdict == Verdict::Pending {
            audit.guaranteed_by_ms = None;
            audit.no_guarantee.get_or_insert_with(|| {
                format!("offsets only in the object store were not read ({why})")
            });
        } else {
            audit.verdict = Verdict::Incomplete;
        }
    }
    audit.store = store;
    Ok(audit)
}

/// Reads count against the throttle, if any.
#[derive(Clone, Copy)]
struct Throttled<'a>(Option<&'a Throttler>);

impl ChunkHook for Throttled<'_> {
    type Error = BatchReadError;

    fn before_chunk(&mut self, len: usize) -> Result<(), BatchReadError> {
        if let Some(t) = self.0 {
            t.maybe_throttle(len as u64);
        }
        Ok(())
    }
}

fn scan_segment(
    view: &PartitionView,
    seg: &SegmentFile,
    key: &[u8],
    buf: &mut Vec<u8>,
    hook: Throttled<'_>,
    copies: &mut Vec<KeyCopy>,
) -> Result<(SegmentFacts, u64), AuditError> {
    let name = seg.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut facts = SegmentFacts {
        base_offset: seg.base_offset,
        next_offset: seg.base_offset,
        size: seg.size,
        largest_timestamp: -1,
        first_batch_timestamp: None,
    };
    let mut scratch = Vec::new();
    let strategy = view.strategy();
    let mut reader = BatchReader::new(&seg.file, &seg.path, 0..seg.size, view.max_batch_size, buf)
        .with_hook(hook);
    while let Some((_, batch)) = reader.next_batch()? {
        let corrupt =
            |offset, reason: String| AuditError::Corrupt { path: seg.path.clone(), offset, reason };
        let h = BatchHeader::parse(batch).map_err(|e| corrupt(-1, e.to_string()))?;
        facts.next_offset = h.next_offset();
        facts.largest_timestamp = facts.largest_timestamp.max(h.max_timestamp);
        facts.first_batch_timestamp.get_or_insert(h.max_timestamp);
        if h.is_control() {
            continue;
        }
        let payload = record_batch::records_bytes(&h, batch, &mut scratch, MAX_RECORDS_BYTES)
            .map_err(|e| corrupt(h.base_offset, e.to_string()))?;
        for record in RecordIter::new(payload, h.records_count) {
            let r = record.map_err(|e| corrupt(h.base_offset, e.to_string()))?;
            if r.key != Some(key) {
                continue;
            }
            copies.push(KeyCopy {
                offset: h.base_offset + i64::from(r.offset_delta),
                segment: name.clone(),
                timestamp_ms: record_timestamp(&h, &r),
                version: strategy.is_versioned().then(|| strategy.version(&h, &r)),
                value_bytes: r.value.map(<[u8]>::len),
                tombstone: r.is_tombstone(),
                region: Region::Clean,
                superseded: false,
                delete_horizon_ms: h.delete_horizon_ms(),
                gone_by_ms: None,
                listed_stale: false,
                no_guarantee: None,
            });
        }
    }
    Ok((facts, reader.bytes_read()))
}

/// The regions, as [`super::cleanable_offsets`] draws them, from the facts
/// the scan read (the same rules, on the snapshot).
fn regions(view: &PartitionView, facts: &[SegmentFacts], now_ms: i64) -> Regions {
    let log_end = facts.last().map_or(view.log_start_offset, |f| f.next_offset);
    let active = facts.last().map_or(log_end, |f| f.base_offset);
    let local_start = facts.first().map_or(log_end, |f| f.base_offset).max(view.log_start_offset);
    let first_dirty = match view.checkpoint {
        Some(c) if c >= view.log_start_offset && c <= log_end => c,
        _ => view.log_start_offset,
    }
    .max(local_start.min(log_end));
    let mut uncleanable = active;
    if let Some(u) = view.first_unstable_offset {
        uncleanable = uncleanable.min(u);
    }
    let lag = view.config.min_compaction_lag_ms;
    if lag > 0 {
        let young = facts.iter().take_while(|f| f.base_offset < uncleanable).find(|f| {
            f.next_offset > first_dirty && f.largest_timestamp > now_ms.saturating_sub(lag)
        });
        if let Some(f) = young {
            uncleanable = f.base_offset;
        }
    }
    let uncleanable = uncleanable.max(first_dirty);
    let bytes = |keep: &dyn Fn(&SegmentFacts) -> bool| -> u64 {
        facts.iter().filter(|f| keep(f)).map(|f| f.size).sum()
    };
    let clean = bytes(&|f| f.next_offset <= first_dirty);
    let cleanable = bytes(&|f| {
        f.next_offset > first_dirty && f.base_offset < uncleanable && f.base_offset < active
    });
    Regions {
        log_start_offset: view.log_start_offset,
        first_dirty_offset: first_dirty,
        first_uncleanable_offset: uncleanable,
        active_segment_base_offset: active,
        first_unstable_offset: view.first_unstable_offset,
        log_end_offset: log_end,
        dirty_ratio: dirty_ratio(cleanable, clean),
    }
}

fn region_of(offset: i64, r: &Regions) -> Region {
    if offset >= r.active_segment_base_offset {
        Region::ActiveSegment
    } else if r.first_unstable_offset.is_some_and(|u| offset >= u) {
        Region::OpenTransaction
    } else if offset >= r.first_uncleanable_offset {
        Region::MinCompactionLag
    } else if offset >= r.first_dirty_offset {
        Region::Dirty
    } else {
        Region::Clean
    }
}

/// A time, or why there is none.
type Bound = Result<i64, String>;

/// The guarantee rules of the module doc, for one view.
struct Rules<'a> {
    view: &'a PartitionView,
    regions: &'a Regions,
    facts: &'a [SegmentFacts],
    now_ms: i64,
}

impl Rules<'_> {
    fn segment_of(&self, offset: i64) -> Option<&SegmentFacts> {
        self.facts.iter().rev().find(|f| f.base_offset <= offset)
    }

    /// When the copy at `offset` (`what` it is, for the reason) can enter a
    /// clean's offset map.
    fn cleanable_at(&self, offset: i64, what: &str) -> Bound {
        let c = &self.view.config;
        match region_of(offset, self.regions) {
            Region::Clean | Region::Dirty => Ok(self.now_ms),
            Region::MinCompactionLag => self
                .segment_of(offset)
                .map(|f| f.largest_timestamp.saturating_add(c.min_compaction_lag_ms))
                .ok_or_else(|| "its segment is gone".to_string()),
            Region::ActiveSegment => Err(format!(
                "{what} is in the active segment, which is never cleaned; it rolls at the first append once it holds segment.bytes or spans {} ms (segment.ms, bounded by max.compaction.lag.ms)",
                c.segment_ms.min(c.max_compaction_lag_ms)
            )),
            // Local rules only: a copy in the store follows `key_audit_store`'s.
            Region::Store => Err(format!("{what} is only in the object store")),
            Region::OpenTransaction => Err(format!(
                "{what} is past the first unstable offset {}: a transaction is open there",
                self.regions.first_unstable_offset.unwrap_or(-1)
            )),
        }
    }

    /// The dirty ratio once the copy at `offset` is cleanable: every dirty
    /// segment up to its own counts as cleanable then. Later writes and
    /// time only add cleanable bytes until a clean runs, so this is the
    /// least the ratio will be.
    fn ratio_once_cleanable(&self, offset: i64) -> f64 {
        let first_dirty = self.regions.first_dirty_offset;
        let upto = self.segment_of(offset).map_or(offset, |f| f.base_offset);
        let bytes = |keep: &dyn Fn(&SegmentFacts) -> bool| -> u64 {
            self.facts.iter().filter(|f| keep(f)).map(|f| f.size).sum()
        };
        let clean = bytes(&|f| f.next_offset <= first_dirty);
        let cleanable = bytes(&|f| f.next_offset > first_dirty && f.base_offset <= upto);
        dirty_ratio(cleanable, clean)
    }

    /// When a clean that can map the copy at `offset` is bound to start.
    fn clean_starts_by(&self, offset: i64, what: &str) -> Bound {
        let cleaner = &self.view.cleaner;
        if !cleaner.enabled {
            return Err("the cleaner is off (log.cleaner.enable=false)".into());
        }
        if let Some(why) = &cleaner.blocked {
            return Err(format!("the partition cannot be cleaned now: {why}"));
        }
        let cleanable = self.cleanable_at(offset, what)?;
        let c = &self.view.config;
        let start = if self.ratio_once_cleanable(offset) > c.min_cleanable_dirty_ratio {
            cleanable
        } else if c.max_compaction_lag_ms < i64::MAX {
            let began = self.segment_of(offset).and_then(|f| f.first_batch_timestamp);
            let overdue = began.unwrap_or(self.now_ms).saturating_add(c.max_compaction_lag_ms);
            cleanable.max(overdue)
        } else {
            return Err(format!(
                "max.compaction.lag.ms is not set and the dirty ratio {:.3} is not above min.cleanable.dirty.ratio {}: only more writes start a clean",
                self.ratio_once_cleanable(offset), c.min_cleanable_dirty_ratio
            ));
        };
        Ok(start.max(self.now_ms).saturating_add(cleaner.backoff_ms))
    }

    /// A superseded copy: gone with the first clean mapping any newer copy.
    fn superseded_gone_by(&self, newer: &[i64]) -> Bound {
        let mut last_err = None;
        let mut best: Option<i64> = None;
        for &offset in newer {
            match self.clean_starts_by(offset, "the newer copy") {
                Ok(t) => best = Some(best.map_or(t, |b| b.min(t))),
                Err(e) => last_err = Some(e),
            }
        }
        best.ok_or_else(|| last_err.unwrap_or_default())
    }

    /// The newest copy, a tombstone: gone with the first clean after its horizon.
    fn tombstone_gone_by(&self, copy: &KeyCopy) -> Bound {
        let backoff = self.view.cleaner.backoff_ms;
        if let Some(h) = copy.delete_horizon_ms {
            if !self.view.cleaner.enabled {
                return Err("the cleaner is off (log.cleaner.enable=false)".into());
            }
            return Ok(h.max(self.now_ms).saturating_add(backoff));
        }
        let stamped = self.clean_starts_by(copy.offset, "the tombstone")?;
        Ok(stamped.saturating_add(self.view.config.delete_retention_ms).saturating_add(backoff))
    }
}

fn assess(
    view: &PartitionView,
    facts: &[SegmentFacts],
    mut copies: Vec<KeyCopy>,
    (now_ms, listed): (i64, &[(i64, i64)]),
) -> KeyAudit {
    let regions = regions(view, facts, now_ms);
    let rules = Rules { view, regions: &regions, facts, now_ms };
    let store_end = view.store.as_ref().map(|s| s.offsets.end);
    let in_store = |offset: i64| store_end.is_some_and(|end| offset < end);
    let ranks: Vec<(i64, i64)> = copies.iter().map(rank).collect();
    let winner = ranks.iter().enumerate().max_by_key(|(_, r)| **r).map(|(i, _)| i);
    for (i, copy) in copies.iter_mut().enumerate() {
        let in_store = in_store(copy.offset);
        copy.region = if in_store { Region::Store } else { region_of(copy.offset, &regions) };
        copy.superseded = Some(i) != winner;
        let triggers = removing_clean_offsets(&ranks, i, !in_store, store_end);
        let bound = match (copy.superseded, copy.tombstone, in_store) {
            (true, _, false) if triggers.is_empty() => Some(Err(OUTRANKED_IN_STORE.into())),
            (true, _, false) => Some(rules.superseded_gone_by(&triggers)),
            (true, _, true) => Some(rules.store_superseded_gone_by(copy.offset, &triggers)),
            // The local cleaner keeps tombstones while older segments are
            // only in the store (a copy there would come back).
            (false, true, false) if view.store.is_some() => Some(Err("kept by the local cleaner while older segments are only in the object store: it leaves with a store clean once local retention moves it there".into())),
            (false, true, false) => Some(rules.tombstone_gone_by(copy)),
            (false, true, true) => Some(rules.store_tombstone_gone_by(copy)),
            (false, false, _) => None,
        };
        match bound {
            Some(Ok(t)) => copy.gone_by_ms = Some(t),
            Some(Err(why)) => copy.no_guarantee = Some(why),
            None => {}
        }
    }
    stale::assess_listed(&rules, &mut copies, listed);
    let (verdict, guaranteed_by_ms, no_guarantee) = verdict(&copies);
    let c = &view.config;
    KeyAudit {
        topic: view.topic_partition.topic.clone(),
        partition: view.topic_partition.partition,
        key: String::new(),
        now_ms,
        regions,
        config: AuditConfig {
            min_cleanable_dirty_ratio: c.min_cleanable_dirty_ratio,
            min_compaction_lag_ms: c.min_compaction_lag_ms,
            max_compaction_lag_ms: c.max_compaction_lag_ms,
            delete_retention_ms: c.delete_retention_ms,
            segment_ms: c.segment_ms,
            cleaner_enabled: view.cleaner.enabled,
            cleaner_backoff_ms: view.cleaner.backoff_ms,
            cleaner_blocked: view.cleaner.blocked.clone(),
            compaction_strategy: view.strategy().to_string(),
        },
        copies,
        verdict,
        guaranteed_by_ms,
        no_guarantee,
        segments_read: 0,
        bytes_read: 0,
        store: None,
    }
}

/// Why a local copy outranked only by copies in the store has no time.
const OUTRANKED_IN_STORE: &str = "only copies below it that are only in the object store outrank it (a higher version), and the local cleaner does not read the store: it leaves once local retention moves its segment there and a store clean rewrites it";

/// How the cleaner ranks a copy: version (0 under `offset`), then offset.
fn rank(copy: &KeyCopy) -> (i64, i64) {
    (copy.version.unwrap_or(0), copy.offset)
}

/// The offsets whose mapping removes copy `i`: for each copy outranking it,
/// the later of the two (a clean mapping the higher offset holds both).
/// A local copy (`local`) is not removed by a clean of the local log
/// through a copy below it that is only in the store.
fn removing_clean_offsets(
    ranks: &[(i64, i64)],
    i: usize,
    local: bool,
    store_end: Option<i64>,
) -> Vec<i64> {
    let (mine, offset) = (ranks[i], ranks[i].1);
    ranks
        .iter()
        .filter(|r| **r > mine)
        .filter(|r| !(local && r.1 < offset && store_end.is_some_and(|end| r.1 < end)))
        .map(|r| r.1.max(offset))
        .collect()
}

fn verdict(copies: &[KeyCopy]) -> (Verdict, Option<i64>, Option<String>) {
    let Some(newest) = copies.iter().find(|c| !c.superseded) else {
        return (Verdict::Absent, None, None);
    };
    let superseded: Vec<&KeyCopy> = copies.iter().filter(|c| c.superseded).collect();
    if superseded.is_empty() {
        let v = if newest.tombstone { Verdict::Erased } else { Verdict::Live };
        return (v, None, None);
    }
    match superseded.iter().find_map(|c| c.no_guarantee.clone()) {
        Some(why) => (Verdict::Pending, None, Some(why)),
        None => (Verdict::Pending, superseded.iter().filter_map(|c| c.gone_by_ms).max(), None),
    }
}

/// Why an audit of a broker's partition could not run.
#[derive(Debug, thiserror::Error)]
pub enum KeyAuditError {
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),
    #[error("topic {topic:?} has no partition {partition} (it has {count})")]
    UnknownPartition { topic: String, partition: i32, count: i32 },
    #[error("topic {0:?} is not compacted: its records leave by retention, not by compaction")]
    NotCompacted(String),
    #[error("cannot open the segments of {partition}: {source}")]
    Snapshot { partition: TopicPartition, source: std::io::Error },
    #[error(transparent)]
    Audit(#[from] AuditError),
}

impl LogCleanerHandle {
    /// Audit `key` in `topic`'s partition `partition` (default: the one the
    /// Java client's default partitioner picks for the key), reading under
    /// the cleaner's I/O throttle. The log's read lock is held only while
    /// the segment handles are taken.
    ///
    /// # Errors
    /// Unknown topic or partition, a topic that is not compacted, unreadable
    /// or corrupt segments.
    pub fn audit_key(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: &[u8],
    ) -> Result<KeyAudit, KeyAuditError> {
        let manager = self.manager();
        let info =
            manager.logs.topic(topic).ok_or_else(|| KeyAuditError::UnknownTopic(topic.into()))?;
        let partition = partition.unwrap_or_else(|| default_partition(key, info.partitions));
        let tp = TopicPartition::new(topic, partition);
        let unknown = || KeyAuditError::UnknownPartition {
            topic: topic.into(),
            partition,
            count: info.partitions,
        };
        let shared = manager.logs.get_log(&tp).ok_or_else(unknown)?;
        let now = manager.clock.now_ms();
        let (compact, log_dir) = {
            let log = shared.read();
            (log.config().compact, log_dir_of(&log))
        };
        if !compact {
            return Err(KeyAuditError::NotCompacted(topic.into()));
        }
        // The manager's lock is never taken under a log's lock (its own order).
        let (checkpoint, blocked) = {
            let mut inner = manager.lock();
            let ruled_out =
                inner.ruled_out(&tp, &log_dir, now, manager.uncleanable_retry_backoff_ms);
            (inner.checkpoint_of(&log_dir, &tp), ruled_out.filter(|r| *r != Ineligible::InProgress))
        };
        let cleaner = CleanerView {
            enabled: self.config().enable,
            backoff_ms: self.config().backoff_ms,
            blocked: blocked.map(|b| b.to_string()),
        };
        let (mut view, store_offsets, segment_config) = {
            let log = shared.read();
            let view = PartitionView::of_log(&log, checkpoint, cleaner)
                .map_err(|source| KeyAuditError::Snapshot { partition: tp.clone(), source })?;
            let offsets = log.log_start_offset()..log.local_log_start_offset();
            (view, offsets, log.segment_config_for_cleaning())
        };
        // Read after the snapshot, with no lock held: the store's part up
        // to the local start the snapshot saw.
        if !store_offsets.is_empty() {
            view.store = Some(manager.store_part(&tp, store_offsets, segment_config));
        }
        Ok(audit(&view, key, now, Some(self.throttler()))?)
    }
}

#[path = "key_audit_stale.rs"]
mod stale;
#[path = "key_audit_store.rs"]
mod store;
pub use store::{StoreAudit, StorePart};

impl LogCleanerManager {
    /// The store's part of `tp` for a key audit: `offsets` (from the log
    /// start to the local start) read through tiered storage, or why not.
    pub(super) fn store_part(
        &self,
        tp: &TopicPartition,
        offsets: std::ops::Range<i64>,
        config: SegmentConfig,
    ) -> StorePart {
        let Some(store) = self.tiered_store() else {
            return StorePart {
                offsets,
                segments: Err("tiered storage is not running on this broker".into()),
                state: None,
            };
        };
        StorePart {
            segments: store.store_only_segments(tp, offsets.clone(), config),
            state: store.store_clean_state(tp),
            offsets,
        }
    }
}

#[cfg(test)]
#[path = "key_audit_tests.rs"]
mod tests;

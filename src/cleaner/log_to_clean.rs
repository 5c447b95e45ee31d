//! What the policy measures of a compacted log before it decides (Kafka's
//! `LogToClean` and the `cleanableOffsets`/`maxCompactionDelay` helpers of
//! `LogCleanerManager`): where the dirty region starts and ends, how many
//! bytes are clean and cleanable, and how overdue the oldest dirty record is.
//!
//! Invariants:
//! * `first_dirty_offset <= first_uncleanable_offset`, and the first
//!   uncleanable offset is never past the active segment's base: the active
//!   segment is never cleaned.
//! * A checkpoint outside `[log start, log end]` counts as missing: the dirty
//!   region then starts at the log start (more work, never lost data).
//! * Nothing at or past the first unstable offset is cleanable: a clean
//!   must not decide on data whose transaction is still open (Kafka's
//!   `firstUncleanableOffset` takes the minimum with it).
//! * Everything here reads the log's *current* config, so a runtime config
//!   change takes effect at the next measurement.

use super::tombstone_guard::TombstoneGuard;
use super::transactions::AbortedTxn;
use crate::log::segment::LogSegment;
use crate::log::{Log, TopicPartition};

/// A partition chosen for cleaning and its regions (Kafka's `LogToClean`).
#[derive(Debug, Clone)]
pub struct LogToClean {
    pub topic_partition: TopicPartition,
    /// Start of the dirty region: the cleaner checkpoint.
    pub first_dirty_offset: i64,
    /// End of the cleanable region: nothing at or past it is mapped or rewritten.
    pub first_uncleanable_offset: i64,
    /// Bytes of segments wholly before the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of segments from the first dirty one up to the uncleanable offset.
    pub cleanable_bytes: u64,
    pub total_bytes: u64,
    /// How long past `max.compaction.lag.ms` the oldest dirty record is (0:
    /// not overdue, or not measured). Kafka's `needCompactionNow` is `> 0`.
    pub compaction_delay_ms: i64,
    /// Aborted transactions to drop besides those the clean reads from the
    /// `.txnindex` of the range it cleans (Kafka's `collectAbortedTransactions`
    /// at the start of each clean); empty when measured.
    pub aborted_transactions: Vec<AbortedTxn>,
    /// The open transaction that holds cleaning back, when the first unstable
    /// offset is what set `first_uncleanable_offset`.
    pub open_transaction: Option<OpenTransaction>,
    /// The resurrection guard this clean respects (the topic turned it on and
    /// groups have offsets on the partition); set by the manager when it
    /// hands the log to a thread.
    pub tombstone_guard: Option<TombstoneGuard>,
}

/// The oldest open transaction of a log, when it bounds the cleanable range.
/// The log layer knows producer ids only: which transactional id owns one is
/// the coordinator's, which `cleaner` does not read; the manager asks its
/// [`ProducerIdResolver`] for it.
///
/// [`ProducerIdResolver`]: super::ProducerIdResolver
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OpenTransaction {
    pub producer_id: i64,
    /// Its first offset: the log's first unstable offset.
    pub first_offset: i64,
    /// Now minus its start time in the producer state (the broker's time of
    /// its first append; see `log::producer_state`). `None`: not known.
    pub age_ms: Option<i64>,
    /// The transactional id whose producer id this is, when the transaction
    /// coordinator knows one (`None` also when measured, before the manager
    /// asked; a transaction opened without the coordinator has none).
    pub transactional_id: Option<String>,
}

impl OpenTransaction {
    /// The oldest open transaction of `log`, if the first unstable offset
    /// `fuo` is the first uncleanable offset `uncleanable` and holds back part
    /// of the closed segments. Reads only the producer state (no I/O).
    fn holding_back(log: &Log, fuo: Option<i64>, uncleanable: i64, now_ms: i64) -> Option<Self> {
        let fuo = fuo?;
        if upload_bound(log, fuo) != uncleanable || fuo >= log.active_segment().base_offset() {
            return None;
        }
        let txn = log.producer_state().oldest_ongoing_txn()?;
        let age_ms = (txn.start_timestamp_ms >= 0)
            .then(|| now_ms.saturating_sub(txn.start_timestamp_ms).max(0));
        Some(Self {
            producer_id: txn.producer_id,
            first_offset: fuo,
            age_ms,
            transactional_id: None,
        })
    }
}

impl LogToClean {
    /// The regions of `log` between the two offsets (the compaction delay is
    /// left at 0; [`LogToClean::measure`] fills it in).
    pub fn new(log: &Log, first_dirty_offset: i64, first_uncleanable_offset: i64) -> Self {
        let mut clean_bytes = 0;
        let mut cleanable_bytes = 0;
        let segs: Vec<&LogSegment> = log.segments().collect();
        for (i, seg) in segs.iter().enumerate() {
            let next_base = segs.get(i + 1).map_or(i64::MAX, |s| s.base_offset());
            if next_base <= first_dirty_offset {
                clean_bytes += seg.size();
            } else if seg.base_offset() < first_uncleanable_offset {
                cleanable_bytes += seg.size();
            }
        }
        Self {
            topic_partition: log.topic_partition().clone(),
            first_dirty_offset,
            first_uncleanable_offset,
            clean_bytes,
            cleanable_bytes,
            total_bytes: log.size(),
            compaction_delay_ms: 0,
            aborted_transactions: Vec::new(),
            open_transaction: None,
            tombstone_guard: None,
        }
    }

    /// Everything the manager decides on: the regions from the cleaner
    /// `checkpoint` and the log's first unstable offset ([`cleanable_offsets`]),
    /// the open transaction that bounds them, if any, and the compaction delay
    /// ([`max_compaction_delay`]).
    pub fn measure(log: &Log, checkpoint: Option<i64>, now_ms: i64) -> Self {
        let fuo = log.first_unstable_offset();
        let (first_dirty, first_uncleanable) = cleanable_offsets(log, checkpoint, fuo, now_ms);
        Self {
            compaction_delay_ms: max_compaction_delay(log, first_dirty, now_ms),
            open_transaction: OpenTransaction::holding_back(log, fuo, first_uncleanable, now_ms),
            ..Self::new(log, first_dirty, first_uncleanable)
        }
    }

    /// Dirty share of the cleanable log, what the manager ranks by.
    pub fn cleanable_ratio(&self) -> f64 {
        dirty_ratio(self.cleanable_bytes, self.clean_bytes)
    }
}

/// Kafka's cleanable ratio: `dirty` bytes over those and the `clean` ones
/// (0 for an empty log).
pub fn dirty_ratio(dirty: u64, clean: u64) -> f64 {
    let total = dirty + clean;
    if total == 0 {
        0.0
    } else {
        dirty as f64 / total as f64
    }
}

/// Kafka's `cleanableOffsets`: the first dirty offset (the checkpoint, reset
/// to the log start when it is missing or outside the log, and never below
/// the first offset on local disk) and the first
/// uncleanable offset: the smallest of the active segment's base, the first
/// unstable offset (open transactions) and the base of the first segment
/// holding a record younger than `min.compaction.lag.ms`.
pub fn cleanable_offsets(
    log: &Log,
    checkpoint: Option<i64>,
    first_unstable_offset: Option<i64>,
    now_ms: i64,
) -> (i64, i64) {
    let start = log.log_start_offset();
    let first_dirty = match checkpoint {
        Some(c) if c >= start && c <= log.log_end_offset() => c,
        Some(c) => {
            tracing::warn!(partition = %log.topic_partition(), checkpoint = c, log_start = start, "cleaner checkpoint outside the log; cleaning from the log start");
            start
        }
        None => start,
    }
    // Below the local start the segments are only in the object store.
    .max(log.local_log_start_offset());
    // Kafka bounds a clean by the last stable offset: the first unstable
    // offset, and nothing past the high watermark either, which a replica
    // may still have to cut back (`Log::truncate_to`).
    let mut uncleanable = log.active_segment().base_offset().min(log.high_watermark());
    if let Some(u) = first_unstable_offset {
        uncleanable = uncleanable.min(upload_bound(log, u));
    }
    let lag = log.config().min_compaction_lag_ms;
    if lag > 0 {
        for seg in log.segments() {
            if seg.base_offset() >= uncleanable {
                break;
            }
            if seg.next_offset() > first_dirty
                && seg.largest_timestamp() > now_ms.saturating_sub(lag)
            {
                uncleanable = seg.base_offset();
                break;
            }
        }
    }
    (first_dirty, uncleanable.max(first_dirty))
}

/// With `remote.storage.enable`, the first unstable offset rounded down to
/// its segment's base: only segments wholly below it are copied to the store
/// (no open transaction's records go there without their marker), and a
/// clean may drop a record only for a newer one in such a segment, so the
/// store never lists a cleaned segment without the records that superseded
/// what it dropped. Without it, the first unstable offset itself.
fn upload_bound(log: &Log, first_unstable_offset: i64) -> i64 {
    if !log.config().remote_storage_enable {
        return first_unstable_offset;
    }
    log.segments()
        .take_while(|s| s.base_offset() <= first_unstable_offset)
        .last()
        .map_or(first_unstable_offset, |s| s.base_offset())
}

/// The timestamp of the first batch at or past the cleaner checkpoint (its
/// first record's, or its max when a delete horizon holds the base field);
/// `None` when nothing is dirty or the batch has no timestamp.
///
/// A clean removes every copy superseded by a record below its end offset,
/// and the checkpoint moves to that end, so every superseded copy still in
/// the log was superseded by a record at or past the checkpoint: none has
/// waited to be erased for longer than `now` minus this (by record time).
pub fn oldest_dirty_timestamp(log: &Log, first_dirty_offset: i64) -> Option<i64> {
    let seg = log.segments().find(|s| s.next_offset() > first_dirty_offset && s.size() > 0)?;
    let header = seg.translate_offset(first_dirty_offset).ok().flatten()?.header;
    let ts = if header.has_delete_horizon() { header.max_timestamp } else { header.base_timestamp };
    (ts >= 0).then_some(ts)
}

/// How long past `max.compaction.lag.ms` the oldest dirty closed segment is
/// (Kafka's `maxCompactionDelay`; the segment's age is its first batch's max
/// timestamp). 0 when not overdue.
pub fn max_compaction_delay(log: &Log, first_dirty_offset: i64, now_ms: i64) -> i64 {
    let clean_until = now_ms.saturating_sub(log.config().max_compaction_lag_ms.max(0));
    if clean_until <= 0 {
        // The default lag (Long.MAX_VALUE): nothing can be overdue; skip the reads.
        return 0;
    }
    let active = log.active_segment().base_offset();
    let earliest = log
        .segments()
        .filter(|s| {
            s.base_offset() < active && s.next_offset() > first_dirty_offset && s.size() > 0
        })
        .filter_map(|s| s.read_header_at(0).ok().flatten())
        .map(|h| h.max_timestamp)
        .filter(|t| *t > 0)
        .min();
    match earliest {
        Some(t) if t < clean_until => clean_until - t,
        _ => 0,
    }
}

//! The per-segment garbage threshold
//! (`sediment.compaction.min.segment.garbage.ratio`): before the recopy, a
//! clean surveys the clean region and keeps, as it is, each segment whose
//! superseded share is below the ratio, listing its superseded copies
//! beside it (`stale_list.rs`) instead of rewriting it.
//!
//! # The plan of one clean ([`StalePlan`])
//!
//! 1. **Load** every list of the log: one whose segment is gone or has
//!    another size is obsolete (its segment was replaced) and is deleted
//!    after the clean. An unreadable one loses copies no map can find
//!    again: the clean then keeps nothing and hands back the log start as
//!    its checkpoint, so the next clean maps the log from the start.
//! 2. **Survey** each segment wholly below the first dirty offset (only
//!    with the ratio on and the topic not tiered): every record not listed
//!    already is decided against the map as the recopy would decide it (a
//!    versioned strategy's clean copy that outranks the mapped winner takes
//!    its place in the map here). A superseded copy is new garbage.
//! 3. **Decide.** A segment is rewritten when (listed + new garbage) /
//!    records reaches the ratio, its list's deadline or the new copies'
//!    has come, its list would pass [`MAX_STALE_ENTRIES`] (or the kept
//!    lists together their share of the dedupe buffer), or it holds
//!    what only a rewrite changes: a tombstone past its horizon or without
//!    one, a key-less record, an aborted transaction's batch, or a marker
//!    the recopy would drop or stamp (the survey walks the transactions as
//!    the recopy does, over the same batches). Every other segment the
//!    recopy reaches is rewritten, as without the ratio.
//! 5. **Transactions in kept segments.** The recopy does not read a kept
//!    segment, so its transaction walk is shown the segment's transactional
//!    batches and markers, recorded by the survey, when it passes it: a
//!    later marker stays needed while its transaction's data is kept.
//! 4. **Tombstones.** An expired tombstone whose key some list names is
//!    held for one more clean (the clean part of the segment holding the
//!    first dirty offset is read for them too), and each kept segment whose list names it is
//!    rewritten in this one: so whatever order the groups are swapped in,
//!    and wherever a crash stops the clean, no tombstone leaves while a
//!    listed copy of its key remains. The next clean, due at once, removes
//!    it. Past [`MAX_EXPIRED_TOMBSTONES`] the clean keeps no segment and
//!    holds every expired tombstone while any list exists.
//!
//! Invariants:
//! * A copy is listed only if the clean listing it would have removed it:
//!   its key's winner is above it in the map (so at a higher offset). A
//!   later clean that rewrites the segment removes it.
//! * A kept segment is not read by the recopy: its bytes, files and
//!   indexes stay as they are, like a kept group's.
//! * Memory: the lists of the segments the clean reaches (at most
//!   [`MAX_STALE_ENTRIES`] each; the kept ones together name at most as
//!   many copies as the dedupe buffer has bytes / 20, so they take about
//!   the map's memory again) and at most [`MAX_EXPIRED_TOMBSTONES`]
//!   fingerprints in each of two sets.

use std::collections::HashSet;
use std::path::PathBuf;

use super::buffers::{CleanerBuffers, MAX_BATCHED_LOOKUPS};
use super::clean_into::{resolve_clean_copy, MapLookup};
use super::error::CleanerError;
use super::io_context::{IoContext, READAHEAD};
use super::offset_map::{hash_key, CleanVerdict, KeyHash};
use super::source_segment::{LogSnapshot, SourceSegment};
use super::stale_list::{lists_in, StaleList, MAX_STALE_ENTRIES};
use super::stats::CleanerStats;
use super::tombstone_guard::MAX_TRACKED_TOMBSTONES;
use super::transactions::{marker_type, AbortedTxn, CleanedTransactionMetadata};
use crate::log::batch_reader::BatchReader;
use crate::log::error::LogError;
use crate::log::record_batch::{self, BatchHeader, RecordIter};

/// The most expired tombstones a survey remembers by key.
pub const MAX_EXPIRED_TOMBSTONES: usize = 1 << 18;

/// Which tombstones past their horizon a clean keeps for a listed copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum TombstoneHold {
    #[default]
    None,
    /// Those whose key's fingerprint is here.
    Named(HashSet<KeyHash>),
    /// Every one.
    All,
}

/// A transactional batch or marker of a surveyed segment, as the recopy's
/// transaction walk must see it when it passes the segment kept.
#[derive(Debug, Clone, Copy)]
pub(super) enum TxnEvent {
    Data(BatchHeader),
    Marker(BatchHeader, Option<i16>),
}

/// What one clean does with the segments it reaches and their lists.
#[derive(Debug, Default)]
pub(super) struct StalePlan {
    /// Per segment the recopy reaches: rewritten (true) or kept.
    pub(super) rewrite: Vec<bool>,
    /// Per segment the recopy reaches: its list (a kept one's extended).
    pub(super) lists: Vec<Option<StaleList>>,
    /// Per segment: its list gained copies and must be written.
    pub(super) changed: Vec<bool>,
    pub(super) hold: TombstoneHold,
    /// Some list names a copy: an expired tombstone the survey did not see
    /// (in the dirty range) is held.
    pub(super) any_listed: bool,
    /// The end of the segments the survey read (`i64::MIN`: none).
    pub(super) surveyed_end: i64,
    /// A list was unreadable: the checkpoint goes back to the log start.
    pub(super) reset_checkpoint: bool,
    /// Lists whose segment is gone or was replaced.
    pub(super) obsolete: Vec<PathBuf>,
    /// Tombstones kept with a horizon in kept segments: (offset, horizon).
    pub(super) kept_tombstones: Vec<(i64, i64)>,
    /// Per segment surveyed: its transactional batches and markers.
    pub(super) txn_events: Vec<Vec<TxnEvent>>,
}

/// What the survey needs besides the snapshot.
pub(super) struct Survey<'a> {
    pub(super) io: &'a IoContext<'a>,
    pub(super) first_dirty: i64,
    pub(super) now_ms: i64,
    pub(super) ratio: f64,
    /// When `max.compaction.lag.ms` requires the copies this clean lists gone.
    pub(super) new_deadline_ms: i64,
    /// The aborted transactions the recopy walks with.
    pub(super) aborted: Vec<AbortedTxn>,
    /// The most copies the kept segments' lists may name together (as many
    /// entries as the dedupe buffer holds bytes / 20): past it, segments
    /// are rewritten instead of kept.
    pub(super) max_listed: usize,
}

/// What the survey learns across segments: the keys of expired tombstones,
/// the keys whose winner moved below a clean copy, and whether either set
/// (or a segment's tombstones) outgrew its bound.
#[derive(Default)]
struct SurveyKeys {
    expired: HashSet<KeyHash>,
    moved: HashSet<KeyHash>,
    overflow: bool,
}

impl SurveyKeys {
    /// Take in what `found` learned; returns its tombstones whose horizon
    /// is still running, (offset, horizon), each noted in `stats`.
    fn absorb(
        &mut self,
        found: &mut SegmentGarbage,
        now_ms: i64,
        stats: &mut CleanerStats,
    ) -> Vec<(i64, i64)> {
        self.overflow |= found.overflow;
        // The recopy decides these copies `Keep` again: counted here.
        stats.clean_copies_won += found.displaced.len() as u64;
        for hash in found.displaced.drain(..) {
            insert_bounded(&mut self.moved, hash, &mut self.overflow);
        }
        let mut running = Vec::new();
        for (hash, offset, horizon) in found.tombstones.drain(..) {
            match horizon {
                Some(h) if h > now_ms => {
                    stats.note_delete_horizon(Some(h));
                    running.push((offset, h));
                }
                Some(_) => insert_bounded(&mut self.expired, hash, &mut self.overflow),
                None => {}
            }
        }
        running
    }
}

fn insert_bounded(set: &mut HashSet<KeyHash>, hash: KeyHash, overflow: &mut bool) {
    if set.len() < MAX_EXPIRED_TOMBSTONES {
        set.insert(hash);
    } else {
        *overflow = true;
    }
}

/// What the survey found in one segment.
#[derive(Default)]
struct SegmentGarbage {
    records: u64,
    new: Vec<(u32, KeyHash)>,
    must_rewrite: bool,
    /// Its keys' newest copies that are tombstones: fingerprint, offset,
    /// delete horizon.
    tombstones: Vec<(KeyHash, i64, Option<i64>)>,
    /// Keys whose copy here outranked their mapped winner: a listed copy
    /// of theirs may now lie above its winner.
    displaced: Vec<KeyHash>,
    txn_events: Vec<TxnEvent>,
    /// More tombstones than [`MAX_EXPIRED_TOMBSTONES`]: not all are here.
    overflow: bool,
}

impl StalePlan {
    /// Load the lists of the first `reach` segments of `snapshot`.
    ///
    /// # Errors
    /// The log's directory cannot be listed.
    pub(super) fn load(snapshot: &LogSnapshot, reach: usize) -> Result<Self, CleanerError> {
        let mut plan = Self {
            rewrite: vec![true; reach],
            lists: vec![None; reach],
            changed: vec![false; reach],
            txn_events: vec![Vec::new(); reach],
            surveyed_end: i64::MIN,
            ..Self::default()
        };
        let found = lists_in(&snapshot.dir).map_err(LogError::io(snapshot.dir.clone()))?;
        for (base, path) in found {
            let at = snapshot.segments.iter().position(|s| s.snapshot.base_offset == base);
            let Some(i) = at else {
                plan.obsolete.push(path);
                continue;
            };
            match StaleList::read(&path, base) {
                Ok(Some(list)) if list.segment_size == snapshot.segments[i].snapshot.size => {
                    plan.any_listed |= !list.entries.is_empty();
                    // Past the recopy's reach a list stays as it is.
                    if i < reach {
                        plan.lists[i] = Some(list);
                    }
                }
                Ok(_) => plan.obsolete.push(path),
                Err(e) => {
                    tracing::error!(error = %e, "unreadable stale list: the cleaner checkpoint goes back to the log start, so the next clean finds its copies again");
                    plan.reset_checkpoint = true;
                    // Whatever it named may be any key's: no expired
                    // tombstone leaves until a clean from the start.
                    plan.any_listed = true;
                    plan.obsolete.push(path);
                }
            }
        }
        if plan.any_listed {
            // No survey (or a reset): every segment is rewritten and drops
            // its listed copies; expired tombstones wait one clean for that.
            plan.hold = TombstoneHold::All;
        }
        Ok(plan)
    }

    /// The listed offsets of segment `i` (ascending), if it is rewritten.
    pub(super) fn listed(&self, i: usize) -> Vec<i64> {
        match self.lists.get(i) {
            Some(Some(list)) if self.rewrite[i] => list.offsets().collect(),
            _ => Vec::new(),
        }
    }

    /// Whether a tombstone past its horizon, of `key` at `offset`, stays
    /// for a listed copy: `Some(true)` when this clean removes every such
    /// copy, so the next clean, due at once, removes the tombstone;
    /// `Some(false)` when it stays until later cleans (at or above
    /// `surveyed_end` the survey did not see it, and it stays while any
    /// list names a copy); `None` when it goes.
    pub(super) fn holds(&self, key: &[u8], offset: i64) -> Option<bool> {
        let unseen = offset >= self.surveyed_end && self.any_listed;
        match &self.hold {
            TombstoneHold::All => Some(true),
            _ if unseen => Some(false),
            TombstoneHold::Named(set) => set.contains(&hash_key(key)).then_some(true),
            TombstoneHold::None => None,
        }
    }

    /// Walk `txn` past kept segment `i` as the recopy would have walked it
    /// reading the segment: a later marker is needed while a batch of its
    /// transaction lies in a kept segment.
    pub(super) fn replay_kept(&self, i: usize, txn: &mut CleanedTransactionMetadata) {
        for event in &self.txn_events[i] {
            match event {
                TxnEvent::Data(h) => {
                    txn.on_batch_read(h);
                }
                TxnEvent::Marker(h, t) => {
                    txn.on_control_batch_read(h, *t);
                }
            }
        }
        // Its ABORT markers' entries stay in its own `.txnindex`.
        txn.take_kept_aborted();
    }

    /// The earliest deadline of the kept lists.
    pub(super) fn earliest_deadline(&self) -> Option<i64> {
        let kept = self.lists.iter().zip(&self.rewrite).filter(|(_, rewrite)| !**rewrite);
        kept.filter_map(|(l, _)| l.as_ref().filter(|l| !l.entries.is_empty()))
            .map(|l| l.deadline_ms)
            .min()
    }
}

impl CleanerBuffers {
    /// Survey the segments of `snapshot` wholly below the first dirty
    /// offset and decide, in `plan`, which are kept (steps 2 to 4 of the
    /// module doc).
    ///
    /// # Errors
    /// I/O and corruption errors, cancellation.
    pub(super) fn survey_clean_region(
        &mut self,
        snapshot: &LogSnapshot,
        survey: &Survey<'_>,
        plan: &mut StalePlan,
        stats: &mut CleanerStats,
    ) -> Result<(), CleanerError> {
        let mut keys = SurveyKeys::default();
        let mut kept_tombstones: Vec<Vec<(i64, i64)>> = vec![Vec::new(); plan.rewrite.len()];
        let (mut listed_total, mut kept_total) = (0usize, 0usize);
        // The recopy's transaction walk over the same batches, in the same
        // order: what it would change in a segment makes it be rewritten.
        let mut txn = CleanedTransactionMetadata::new(survey.aborted.clone());
        for (i, kept_here) in kept_tombstones.iter_mut().enumerate() {
            let seg = &snapshot.segments[i];
            if seg.next_offset > survey.first_dirty {
                // The segment holding the first dirty offset is rewritten;
                // its clean part may hold expired tombstones all the same.
                self.survey_straddling(snapshot, (i, plan), survey, &mut keys, stats)?;
                break;
            }
            let (base, size) = (seg.snapshot.base_offset, seg.snapshot.size);
            plan.surveyed_end = seg.next_offset;
            let mut list = plan.lists[i].take().unwrap_or_else(|| StaleList::new(base, size));
            let listed: Vec<i64> = list.offsets().collect();
            let mut found = SegmentGarbage::default();
            let walk = (&listed[..], &mut txn);
            self.survey_segment(snapshot, (seg, size), survey, walk, &mut found, stats)?;
            let running = keys.absorb(&mut found, survey.now_ms, stats);
            let room = MAX_TRACKED_TOMBSTONES.saturating_sub(kept_total);
            kept_here.extend(running.into_iter().take(room));
            kept_total += kept_here.len();
            let garbage = list.entries.len() + found.new.len();
            // A kept segment's transaction events cost about 4 entries each.
            let cost = garbage + 4 * found.txn_events.len();
            let due = |d: i64| d <= survey.now_ms;
            let rewrite = found.must_rewrite
                || due(list.deadline_ms)
                || (!found.new.is_empty() && due(survey.new_deadline_ms))
                || garbage > MAX_STALE_ENTRIES
                || listed_total + cost > survey.max_listed
                || garbage as f64 >= survey.ratio * found.records.max(1) as f64;
            if !rewrite {
                plan.txn_events[i] = std::mem::take(&mut found.txn_events);
                plan.changed[i] = !found.new.is_empty();
                stats.stale_copies_listed += found.new.len() as u64;
                listed_total += cost;
            }
            list.add(&found.new, survey.new_deadline_ms);
            plan.any_listed |= !list.entries.is_empty();
            plan.rewrite[i] = rewrite;
            plan.lists[i] = Some(list);
        }
        plan.hold = Self::hold_for(plan, &keys);
        for (i, tombstones) in kept_tombstones.into_iter().enumerate() {
            if plan.rewrite[i] {
                plan.txn_events[i] = Vec::new();
            } else {
                plan.kept_tombstones.extend(tombstones);
            }
        }
        Ok(())
    }

    /// The clean part of segment `i`, the one holding the first dirty
    /// offset (rewritten whatever it holds): its expired tombstones and
    /// displaced keys join `keys`, so `surveyed_end` reaches the first
    /// dirty offset.
    ///
    /// # Errors
    /// As [`CleanerBuffers::survey_clean_region`].
    fn survey_straddling(
        &mut self,
        snapshot: &LogSnapshot,
        (i, plan): (usize, &mut StalePlan),
        survey: &Survey<'_>,
        keys: &mut SurveyKeys,
        stats: &mut CleanerStats,
    ) -> Result<(), CleanerError> {
        let seg = &snapshot.segments[i];
        let Some(end) =
            seg.dirty_position.filter(|_| seg.snapshot.base_offset < survey.first_dirty)
        else {
            return Ok(());
        };
        let listed: Vec<i64> = plan.lists[i].iter().flat_map(StaleList::offsets).collect();
        // A walk of its own: nothing after it is decided from it.
        let mut txn = CleanedTransactionMetadata::new(survey.aborted.clone());
        let mut found = SegmentGarbage::default();
        let walk = (&listed[..], &mut txn);
        self.survey_segment(snapshot, (seg, end), survey, walk, &mut found, stats)?;
        // Its running tombstones: the recopy, which rewrites it, keeps them.
        keys.absorb(&mut found, survey.now_ms, stats);
        plan.surveyed_end = survey.first_dirty;
        Ok(())
    }

    /// Which expired tombstones wait for a listed copy, rewriting each kept
    /// segment whose list names one, or names a key whose winner moved
    /// below its listed copies (`moved`).
    fn hold_for(plan: &mut StalePlan, keys: &SurveyKeys) -> TombstoneHold {
        let (expired, moved) = (&keys.expired, &keys.moved);
        if keys.overflow {
            plan.rewrite.iter_mut().for_each(|r| *r = true);
            return if plan.any_listed { TombstoneHold::All } else { TombstoneHold::None };
        }
        let mut named = HashSet::new();
        for (i, list) in plan.lists.iter().enumerate() {
            let Some(list) = list else { continue };
            for (_, hash) in &list.entries {
                if expired.contains(hash) {
                    named.insert(*hash);
                    plan.rewrite[i] = true;
                } else if moved.contains(hash) {
                    plan.rewrite[i] = true;
                }
            }
        }
        if named.is_empty() {
            TombstoneHold::None
        } else {
            TombstoneHold::Named(named)
        }
    }

    /// Read one clean-region segment into `found`: its records, the
    /// copies the map supersedes that `listed` does not name, and its keys'
    /// newest tombstones.
    fn survey_segment(
        &mut self,
        snapshot: &LogSnapshot,
        (seg, end): (&SourceSegment, u64),
        survey: &Survey<'_>,
        (listed, txn): (&[i64], &mut CleanedTransactionMetadata),
        found: &mut SegmentGarbage,
        stats: &mut CleanerStats,
    ) -> Result<(), CleanerError> {
        let io = survey.io;
        let file = seg.file()?;
        let mut buf = self.take_read_buffer();
        let mut reader = BatchReader::new(&file, &seg.path, 0..end, io.grow_limit, &mut buf)
            .with_hook(io)
            .with_readahead(READAHEAD)
            .deferring_crc();
        let result = (|| -> Result<(), CleanerError> {
            while let Some((position, batch)) = reader.next_batch()? {
                // Checked here, once: a kept segment is read by nothing else.
                let err = |source| CleanerError::Batch { path: seg.path.clone(), position, source };
                let header = record_batch::check_batch(batch, usize::MAX).map_err(err)?;
                found.records += header.records_count.max(0) as u64;
                if header.is_control() {
                    let limit = io.decompress_limit();
                    let inflated = &mut self.bufs.inflated;
                    let t = marker_type(&header, batch, inflated, limit).map_err(err)?;
                    let not_needed = txn.on_control_batch_read(&header, t);
                    let expired = header.delete_horizon_ms().is_some_and(|h| h <= survey.now_ms);
                    // The recopy would drop it, empty it or stamp its horizon.
                    found.must_rewrite |= header.records_count <= 0
                        || (not_needed && (expired || !header.has_delete_horizon()));
                    found.txn_events.push(TxnEvent::Marker(header, t));
                    continue;
                }
                if txn.on_batch_read(&header) {
                    // An aborted transaction's batch: the recopy drops it.
                    found.must_rewrite = true;
                    continue;
                }
                if header.is_transactional() {
                    found.txn_events.push(TxnEvent::Data(header));
                }
                self.survey_batch(snapshot, seg, survey, (&header, batch), listed, found)
                    .map_err(err)?;
            }
            Ok(())
        })();
        stats.bytes_read += reader.bytes_read();
        stats.survey_bytes_read += reader.bytes_read();
        self.bufs.read = buf;
        result
    }

    /// One data batch of the survey, into `found`.
    fn survey_batch(
        &mut self,
        snapshot: &LogSnapshot,
        seg: &SourceSegment,
        survey: &Survey<'_>,
        (header, batch): (&BatchHeader, &[u8]),
        listed: &[i64],
        found: &mut SegmentGarbage,
    ) -> Result<(), crate::log::error::BatchError> {
        let limit = survey.io.decompress_limit();
        let payload = record_batch::records_bytes(header, batch, &mut self.bufs.inflated, limit)?;
        let strategy = &snapshot.strategy;
        let batched = usize::try_from(header.records_count).is_ok_and(|n| n <= MAX_BATCHED_LOOKUPS)
            && !strategy.is_versioned();
        self.bufs.newest_by_map.clear();
        if batched {
            let lookup = MapLookup {
                hasher: self.key_hasher,
                bits: &self.newest,
                end: i64::MAX,
                hashes: &mut self.bufs.hashes,
                looked_up: &mut self.bufs.looked_up,
            };
            lookup.answer(&mut self.map, header, payload, &mut self.bufs.newest_by_map)?;
        }
        let horizon = header.delete_horizon_ms();
        let mut hashed = self.bufs.hashes.iter().zip(self.bufs.looked_up.iter()).peekable();
        for (i, rec) in RecordIter::new(payload, header.records_count).enumerate() {
            let rec = rec?;
            let offset = header.base_offset + i64::from(rec.offset_delta);
            let from_batch = match hashed.peek() {
                Some(((hash, _), j)) if batched && **j == i => {
                    let hash = *hash;
                    hashed.next();
                    Some(hash)
                }
                _ => None,
            };
            let Some(key) = rec.key else {
                found.must_rewrite = true;
                continue;
            };
            if listed.binary_search(&offset).is_ok() {
                continue;
            }
            let hash = from_batch.unwrap_or_else(|| hash_key(key));
            let newest = match self.bufs.newest_by_map.get(i) {
                Some(newest) if batched => *newest,
                _ if strategy.is_versioned() && offset >= snapshot.log_start_offset => {
                    let version = strategy.version(header, &rec);
                    match resolve_clean_copy(
                        &mut self.map,
                        &mut self.newest,
                        &hash,
                        offset,
                        version,
                    ) {
                        CleanVerdict::Keep => true,
                        CleanVerdict::KeepDisplacing(_) => {
                            found.displaced.push(hash);
                            true
                        }
                        CleanVerdict::Drop => {
                            // Listed copies lie below their winner, so a
                            // reader from the start still ends with it: a
                            // loser above its winner leaves with a rewrite.
                            let winner = self.map.get_versioned(&hash).map(|(m, _)| m);
                            found.must_rewrite |= winner.is_some_and(|m| m < offset);
                            false
                        }
                    }
                }
                _ => self.map.is_newest(&hash, offset),
            };
            match u32::try_from(offset - seg.snapshot.base_offset) {
                Ok(rel) if !newest => found.new.push((rel, hash)),
                Ok(_) => {}
                Err(_) => found.must_rewrite = true,
            }
            if newest && rec.value.is_none() {
                // One past its horizon leaves only with a rewrite; one
                // without a horizon gets it stamped by one.
                found.must_rewrite |= horizon.is_none_or(|h| h <= survey.now_ms);
                if found.tombstones.len() < MAX_EXPIRED_TOMBSTONES {
                    found.tombstones.push((hash, offset, horizon));
                } else {
                    found.overflow = true;
                }
            }
        }
        Ok(())
    }
}

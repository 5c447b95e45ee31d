//! Steps 2 to 5 of a clean, the recopy (Kafka's `cleanSegments` and
//! `cleanInto`): every segment of a group is read batch by batch and what
//! survives the filter is written into the group's `.cleaned` segment. The
//! rules (which record stays, tombstones and their delete horizon, markers,
//! a producer's last batch, the offset fence) are in the module doc of
//! `cleaner/`.
//!
//! Invariants:
//! * A batch whose records all stay, and that needs no horizon stamped, is
//!   copied byte for byte; any other is rewritten with the same base offset,
//!   last offset delta, producer fields and codec, or dropped when empty.
//! * Output is written in order through one buffer of `io_buffer_size`
//!   (larger only while one batch needs it), checked for cancellation and
//!   throttled at every flush.
//! * Nothing is buffered or written while the group is unchanged (every
//!   batch so far forwarded, or rewritten into the same bytes); the first
//!   change starts the `.cleaned` segment with that prefix
//!   (`group_writer.rs`).

use std::collections::HashMap;

use super::batch_writer;
use super::buffers::{CleanerBuffers, MAX_BATCHED_LOOKUPS};
use super::error::CleanerError;
use super::garbage_survey::StalePlan;
use super::group_writer::GroupWriter;
use super::io_context::{IoContext, READAHEAD};
use super::mapped_batches::SegmentBatches;
use super::newest_offsets::NewestOffsets;
use super::offset_map::{hash_key, CleanVerdict, KeyHash, KeyHasher, KeyLanes, OffsetMap};
use super::source_segment::SourceSegment;
use super::stats::CleanerStats;
use super::tombstone_guard::{KeptTombstones, TombstoneGuard};
use super::transactions::{marker_type, CleanedTransactionMetadata};
use crate::log::batch_reader::BatchReader;
use crate::log::compaction_strategy::CompactionStrategy;
use crate::log::error::BatchError;
use crate::log::producer_state::LastRecord;
use crate::log::record_batch::{self, BatchHeader, Record, RecordIter};

/// What the recopy of every group of one clean shares.
pub(super) struct Recopy<'a> {
    pub(super) io: &'a IoContext<'a>,
    /// The first dirty offset: where the map pass started.
    pub(super) first_dirty: i64,
    /// End of the mapped range: records at or past it are kept (nothing newer
    /// is known for their keys).
    pub(super) end: i64,
    /// Batches at or past this offset (the first uncleanable offset, never
    /// past the first unstable offset) are copied as they are.
    pub(super) upper: i64,
    /// What decides whether a stamped delete horizon has passed.
    pub(super) now_ms: i64,
    /// The horizon a tombstone or marker kept for the first time gets.
    pub(super) horizon_to_stamp: i64,
    /// What each producer with state needs kept, even empty: its last data
    /// batch, else its current epoch's marker.
    pub(super) last_records: &'a HashMap<i64, LastRecord>,
    /// The last offsets of those last data batches, sorted: a batch holding
    /// one is never dropped unread.
    pub(super) last_data_offsets: Vec<i64>,
    pub(super) txn: CleanedTransactionMetadata,
    pub(super) stats: &'a mut CleanerStats,
    /// Tombstones past their horizon stay while a group has not read them.
    pub(super) guard: Option<TombstoneGuard>,
    /// Every tombstone kept with a horizon, for the at-risk counts.
    pub(super) kept_tombstones: KeptTombstones,
    /// How copies of a key rank (the snapshot's strategy).
    pub(super) strategy: &'a CompactionStrategy,
    /// The log start offset: a record below it (still in its segment's
    /// bytes after DeleteRecords) never outranks a visible copy.
    pub(super) log_start: i64,
    /// The kept segments' lists and the tombstones they hold
    /// (`garbage_survey.rs`).
    pub(super) stale: &'a StalePlan,
    /// The index in the snapshot of the group's first segment.
    pub(super) group_start: usize,
    /// The listed copies of the segment being recopied, ascending: each is
    /// dropped.
    pub(super) listed: Vec<i64>,
}

/// The last offsets of the producers' last data batches, sorted.
pub(super) fn last_data_offsets(last_records: &HashMap<i64, LastRecord>) -> Vec<i64> {
    let mut offsets: Vec<i64> = last_records.values().filter_map(|l| l.last_data_offset).collect();
    offsets.sort_unstable();
    offsets
}

impl Recopy<'_> {
    /// Whether the batches holding offsets `[from, to)` may go unread: all
    /// in the mapped dirty range, none a key's newest, none a producer's
    /// last data batch.
    fn may_drop_unread(&self, newest: &NewestOffsets, from: i64, to: i64) -> bool {
        from >= self.first_dirty && to <= self.end && newest.any_in(from, to) == Some(false) && {
            let i = self.last_data_offsets.partition_point(|o| *o < from);
            self.last_data_offsets.get(i).is_none_or(|o| *o >= to)
        }
    }
}

/// What the filter made of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Kept byte for byte: the caller forwards the batch (nothing was appended).
    Forward,
    /// Something was appended in its place (survivors, a stamped horizon, an empty batch).
    Rewritten,
    /// Nothing is left of it.
    Dropped,
}

/// What the recopy of one segment wrote, for the offset fence.
struct SegmentCopy {
    wrote_any: bool,
    last_header: Option<BatchHeader>,
}

impl CleanerBuffers {
    /// Recopy one group of segments into `writer`.
    pub(super) fn clean_group(
        &mut self,
        recopy: &mut Recopy<'_>,
        group: &[SourceSegment],
        writer: &mut GroupWriter<'_>,
    ) -> Result<(), CleanerError> {
        let mut out = std::mem::take(&mut self.bufs.write);
        out.clear();
        let mapped = std::mem::take(&mut self.mapped);
        let result = (|| -> Result<(), CleanerError> {
            for (si, seg) in group.iter().enumerate() {
                recopy.stats.start_size += seg.snapshot.size;
                recopy.listed = recopy.stale.listed(recopy.group_start + si);
                let mut batches = mapped.segment(seg.snapshot.base_offset);
                let copy = self.clean_into(recopy, (group, si), &mut batches, writer, &mut out)?;
                // The offset fence: the group's output must reach into its last
                // segment, so that recovery from a `.swap` (which replaces the old
                // segments within the swap's offsets) also replaces that segment.
                // A group of one segment needs none: recovery always replaces the
                // segment at the swap's own base offset.
                let is_last_segment = si + 1 == group.len();
                // An unchanged group is kept as it is and needs none either.
                if is_last_segment && group.len() > 1 && !copy.wrote_any {
                    if let Some(h) = copy.last_header {
                        batch_writer::write_empty_batch(&mut out, &h, false);
                        recopy.stats.empty_batches_retained += 1;
                    }
                }
            }
            writer.maybe_flush(&mut out, recopy.stats, true)
        })();
        self.mapped = mapped;
        out.clear();
        self.bufs.write = out;
        self.restore_buffers();
        result
    }

    /// Recopy the batches of segment `si` of `group` into `out`, flushing
    /// through `writer`; while the group is unchanged, only note that.
    fn clean_into(
        &mut self,
        recopy: &mut Recopy<'_>,
        (group, si): (&[SourceSegment], usize),
        batches: &mut SegmentBatches<'_>,
        writer: &mut GroupWriter<'_>,
        out: &mut Vec<u8>,
    ) -> Result<SegmentCopy, CleanerError> {
        let io = recopy.io;
        let seg = &group[si];
        let file = seg.file()?;
        let mut buf = self.take_read_buffer();
        let mut reader =
            BatchReader::new(&file, &seg.path, 0..seg.snapshot.size, io.grow_limit, &mut buf)
                .with_hook(io)
                .with_readahead(READAHEAD)
                .deferring_crc();
        let mut copy = SegmentCopy { wrote_any: false, last_header: None };
        let result = (|| -> Result<(), CleanerError> {
            loop {
                let at = reader.position();
                let newest = &self.newest;
                let run = batches.droppable_run(at, seg.snapshot.size, |from, to| {
                    recopy.may_drop_unread(newest, from, to)
                });
                if let Some(run) = run {
                    // Nothing of these batches stays: the group changes here.
                    self.start_group_output(recopy, (group, si, at), writer)?;
                    // The run ends at a batch start inside the segment, so
                    // the skip cannot fail; if it did, the batches are read.
                    if reader.skip_to(run.end_position) {
                        recopy.stats.note_dropped_unread(run.end_position - at, run);
                    }
                    continue;
                }
                let Some((position, batch)) = reader.next_batch()? else { break };
                let err = |source| CleanerError::Batch { path: seg.path.clone(), position, source };
                let header = BatchHeader::parse(batch).map_err(err)?;
                // The map pass of this clean checked the CRC of every batch of
                // the mapped range, read through the same descriptor of the
                // same closed segment (a store segment fetched again holds
                // the same bytes: the cache verifies every download against
                // the manifest's CRC32C). Any other batch is checked now; a
                // mapped one again only if its bytes are dropped or re-encoded
                // (below), so corruption is never hidden under a fresh CRC. A
                // batch forwarded as it is keeps its own CRC for every reader.
                let mapped =
                    header.last_offset() >= recopy.first_dirty && header.last_offset() < recopy.end;
                if !mapped {
                    record_batch::check_batch(batch, usize::MAX).map_err(err)?;
                }
                copy.last_header = Some(header);
                let written_before = out.len();
                let outcome = self.recopy_batch(recopy, &header, batch, out).map_err(err)?;
                if mapped && outcome != Outcome::Forward {
                    record_batch::check_batch(batch, usize::MAX).map_err(err)?;
                }
                let same = match outcome {
                    Outcome::Forward => true,
                    Outcome::Rewritten => !writer.started() && out[written_before..] == *batch,
                    Outcome::Dropped => false,
                };
                copy.wrote_any |= outcome != Outcome::Dropped;
                if !writer.started() {
                    if same {
                        // Output still equals input: nothing to write yet.
                        out.truncate(written_before);
                        continue;
                    }
                    self.start_group_output(recopy, (group, si, position), writer)?;
                }
                if outcome == Outcome::Forward {
                    out.extend_from_slice(batch);
                }
                writer.maybe_flush(out, recopy.stats, false)?;
            }
            Ok(())
        })();
        if reader.grew() {
            recopy.stats.buffer_grows += 1;
        }
        recopy.stats.bytes_read += reader.bytes_read();
        self.bufs.read = buf;
        result.map(|()| copy)
    }

    /// The first change of a group: its `.cleaned` segment starts with the
    /// batches forwarded so far, those before `position` of segment `si`
    /// (nothing when it has started already). NOTE: the inflate buffer is
    /// free here (the filter is done with the batch before), so the prefix
    /// is read through it and costs no extra memory.
    fn start_group_output(
        &mut self,
        recopy: &mut Recopy<'_>,
        (group, si, position): (&[SourceSegment], usize, u64),
        writer: &mut GroupWriter<'_>,
    ) -> Result<(), CleanerError> {
        if writer.started() {
            return Ok(());
        }
        let mut scratch = std::mem::take(&mut self.bufs.inflated);
        let started = writer.start(group, (si, position), &mut scratch, recopy.stats);
        self.bufs.inflated = scratch;
        started
    }

    /// Append to `out` what survives of one batch.
    fn recopy_batch(
        &mut self,
        recopy: &mut Recopy<'_>,
        header: &BatchHeader,
        batch: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Outcome, BatchError> {
        let count = header.records_count.max(0) as u64;
        recopy.stats.messages_read += count;
        recopy.stats.start_messages += count;
        if header.base_offset >= recopy.upper {
            // Not cleanable (an open transaction may be before it): unchanged.
            if header.is_control() {
                let limit = recopy.io.decompress_limit();
                let t = marker_type(header, batch, &mut self.bufs.inflated, limit)?;
                recopy.txn.on_control_batch_kept(header, t);
            } else {
                recopy.txn.on_batch_read(header);
            }
            recopy.stats.batches_copied += 1;
            recopy.stats.messages_written += count;
            return Ok(Outcome::Forward);
        }
        let last_of_producer = header.has_producer_id()
            && recopy.last_records.get(&header.producer_id).is_some_and(|last| {
                match last.last_data_offset {
                    Some(offset) => header.last_offset() == offset,
                    None => header.is_control() && header.producer_epoch == last.producer_epoch,
                }
            });
        if header.is_control() {
            self.recopy_control_batch(recopy, header, batch, last_of_producer, out)
        } else {
            self.recopy_data_batch(recopy, header, batch, last_of_producer, out)
        }
    }

    /// A transaction marker stays while its transaction has batches in this
    /// clean; the first clean in which it has none stamps its delete horizon
    /// (like a tombstone's), and a clean at or past the horizon drops it.
    fn recopy_control_batch(
        &mut self,
        recopy: &mut Recopy<'_>,
        header: &BatchHeader,
        batch: &[u8],
        last_of_producer: bool,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, BatchError> {
        let count = header.records_count.max(0) as u64;
        let limit = recopy.io.decompress_limit();
        let control_type = marker_type(header, batch, &mut self.bufs.inflated, limit)?;
        let not_needed = recopy.txn.on_control_batch_read(header, control_type);
        let expired = header.delete_horizon_ms().is_some_and(|h| h <= recopy.now_ms);
        if (not_needed && expired) || count == 0 {
            if !last_of_producer {
                return Ok(Outcome::Dropped);
            }
            batch_writer::write_empty_batch(out, header, true);
            recopy.stats.empty_batches_retained += 1;
            Ok(Outcome::Rewritten)
        } else if header.has_delete_horizon() || !not_needed {
            if header.has_delete_horizon() {
                recopy.stats.note_delete_horizon(header.delete_horizon_ms());
            }
            recopy.stats.batches_copied += 1;
            recopy.stats.messages_written += count;
            Ok(Outcome::Forward)
        } else {
            // The first clean in which its transaction has no batch left:
            // stamp its horizon, so readers have delete.retention.ms from now.
            let payload =
                record_batch::records_bytes(header, batch, &mut self.bufs.inflated, limit)?;
            self.bufs.retained.clear();
            let mut at = 0;
            for rec in RecordIter::new(payload, header.records_count) {
                let rec = rec?;
                self.bufs.retained.push(at..at + rec.raw.len());
                at += rec.raw.len();
            }
            let horizon = Some(recopy.horizon_to_stamp);
            let retained = &self.bufs.retained;
            let scratch = &mut self.bufs.writer;
            batch_writer::write_retained_batch(out, header, payload, retained, horizon, scratch)?;
            recopy.stats.note_delete_horizon(horizon);
            recopy.stats.horizons_stamped += 1;
            recopy.stats.batches_rewritten += 1;
            recopy.stats.messages_written += count;
            Ok(Outcome::Rewritten)
        }
    }

    /// Keep the records that pass [`should_keep`]: the whole batch as it is,
    /// a rewritten batch of the survivors, or (for a producer's last batch)
    /// an empty one.
    fn recopy_data_batch(
        &mut self,
        recopy: &mut Recopy<'_>,
        header: &BatchHeader,
        batch: &[u8],
        last_of_producer: bool,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, BatchError> {
        let count = header.records_count.max(0) as u64;
        let discard_all = recopy.txn.on_batch_read(header);
        let limit = recopy.io.decompress_limit();
        let payload = record_batch::records_bytes(header, batch, &mut self.bufs.inflated, limit)?;
        self.bufs.newest_by_map.clear();
        // Under a versioned strategy a copy below the first dirty offset can
        // change the map (`resolve_clean`), so records are decided one by
        // one, in order.
        let batched = usize::try_from(header.records_count).is_ok_and(|n| n <= MAX_BATCHED_LOOKUPS)
            && !recopy.strategy.is_versioned();
        if batched
            && !discard_all
            && header.base_offset < recopy.end
            && self.newest.get(header.base_offset).is_none()
        {
            let lookup = MapLookup {
                hasher: self.key_hasher,
                bits: &self.newest,
                end: recopy.end,
                hashes: &mut self.bufs.hashes,
                looked_up: &mut self.bufs.looked_up,
            };
            lookup.answer(&mut self.map, header, payload, &mut self.bufs.newest_by_map)?;
        }
        self.bufs.retained.clear();
        let mut retained_tombstone = false;
        let batch_horizon = header.delete_horizon_ms().unwrap_or(recopy.horizon_to_stamp);
        let mut at = 0usize;
        for (i, rec) in RecordIter::new(payload, header.records_count).enumerate() {
            let rec = rec?;
            let range = at..at + rec.raw.len();
            at += rec.raw.len();
            let by_map = self.bufs.newest_by_map.get(i).copied();
            if !discard_all
                && should_keep(&mut self.map, &mut self.newest, recopy, header, &rec, by_map)
            {
                if rec.value.is_none() && rec.key.is_some() {
                    retained_tombstone = true;
                    let offset = header.base_offset + i64::from(rec.offset_delta);
                    recopy.kept_tombstones.push(offset, batch_horizon);
                }
                self.bufs.retained.push(range);
            }
        }
        let kept = self.bufs.retained.len() as u64;
        if discard_all && count > 0 {
            recopy.stats.aborted_batches_removed += 1;
        }
        let needs_horizon = retained_tombstone && !header.has_delete_horizon();
        recopy.stats.horizons_stamped += u64::from(needs_horizon && kept > 0);
        if retained_tombstone {
            recopy.stats.note_delete_horizon(if needs_horizon {
                Some(recopy.horizon_to_stamp)
            } else {
                header.delete_horizon_ms()
            });
        }
        recopy.stats.messages_written += kept;
        if kept == count && !needs_horizon {
            recopy.stats.batches_copied += 1;
            Ok(Outcome::Forward)
        } else if kept > 0 {
            let horizon = needs_horizon.then_some(recopy.horizon_to_stamp);
            let retained = &self.bufs.retained;
            let scratch = &mut self.bufs.writer;
            batch_writer::write_retained_batch(out, header, payload, retained, horizon, scratch)?;
            recopy.stats.batches_rewritten += 1;
            Ok(Outcome::Rewritten)
        } else if last_of_producer {
            // Keep the producer's sequence state: an empty batch in its place.
            batch_writer::write_empty_batch(out, header, true);
            recopy.stats.empty_batches_retained += 1;
            Ok(Outcome::Rewritten)
        } else {
            Ok(Outcome::Dropped)
        }
    }
}

/// The map's answers for the records of one batch that the newest-offset
/// bits do not cover (a batch of the clean region, or any batch when the
/// bits did not fit the budget): their keys are fingerprinted
/// [`HASH_LANES`] at a time and their slots fetched from memory together,
/// as the map pass does, instead of one digest and one cache miss after
/// another.
pub(super) struct MapLookup<'a> {
    pub(super) hasher: KeyHasher,
    pub(super) bits: &'a NewestOffsets,
    pub(super) end: i64,
    pub(super) hashes: &'a mut Vec<(KeyHash, i64)>,
    pub(super) looked_up: &'a mut Vec<usize>,
}

impl MapLookup<'_> {
    /// `newest[i]`: whether record `i` of the batch is its key's newest by
    /// the map; `true` for a record that needs no answer from the map
    /// (key-less, past the mapped range, or covered by the bits).
    pub(super) fn answer(
        self,
        map: &mut OffsetMap,
        header: &BatchHeader,
        payload: &[u8],
        newest: &mut Vec<bool>,
    ) -> Result<(), BatchError> {
        self.hashes.clear();
        self.looked_up.clear();
        newest.clear();
        let mut lanes = KeyLanes::new(self.hasher);
        for (i, rec) in RecordIter::new(payload, header.records_count).enumerate() {
            let rec = rec?;
            newest.push(true);
            let offset = header.base_offset + i64::from(rec.offset_delta);
            let Some(key) = rec.key.filter(|_| offset < self.end) else { continue };
            if self.bits.get(offset).is_some() {
                continue;
            }
            lanes.push(key, offset, self.hashes);
            self.looked_up.push(i);
        }
        lanes.finish(self.hashes);
        for (hash, _) in self.hashes.iter() {
            map.prefetch(hash);
        }
        for ((hash, offset), i) in self.hashes.iter().zip(self.looked_up.iter()) {
            newest[*i] = map.is_newest(hash, *offset);
        }
        Ok(())
    }
}

/// Whether a record of a data batch stays: past the mapped range, or the
/// newest of its key (a tombstone only until its horizon). Key-less records
/// are dropped and counted. `by_map`: the map's answer for the record when
/// [`MapLookup`] computed it for the batch.
fn should_keep(
    map: &mut OffsetMap,
    newest_bits: &mut NewestOffsets,
    recopy: &mut Recopy<'_>,
    header: &BatchHeader,
    rec: &Record<'_>,
    by_map: Option<bool>,
) -> bool {
    let offset = header.base_offset + rec.offset_delta as i64;
    if !recopy.listed.is_empty() && recopy.listed.binary_search(&offset).is_ok() {
        // Superseded when a clean kept its segment: it goes with this rewrite.
        recopy.stats.stale_copies_removed += 1;
        return false;
    }
    if offset >= recopy.end {
        // Past the mapped range: nothing newer is known.
        return true;
    }
    let Some(key) = rec.key else {
        recopy.stats.invalid_messages_read += 1;
        return false;
    };
    let visible = offset >= recopy.log_start;
    let newest = if offset < recopy.first_dirty && visible && recopy.strategy.is_versioned() {
        clean_copy_stays(map, newest_bits, recopy, header, rec, key)
    } else {
        is_mapped_winner(map, newest_bits, by_map, key, offset)
    };
    if !newest {
        false
    } else if rec.value.is_none() {
        let Some(horizon) = header.delete_horizon_ms().filter(|h| *h <= recopy.now_ms) else {
            return true;
        };
        if let Some(due_now) = recopy.stale.holds(key, offset) {
            // A list names an older copy of its key: it waits for that
            // copy's rewrite (this clean's, when the next is due at once).
            recopy.stats.tombstones_held_for_stale += 1;
            if due_now {
                let now = recopy.now_ms;
                let due = recopy.stats.stale_deadline_ms.map_or(now, |d| d.min(now));
                recopy.stats.stale_deadline_ms = Some(due);
            }
            return true;
        }
        match recopy.guard.filter(|g| g.keeps(offset, horizon, recopy.now_ms)) {
            Some(guard) => {
                // A group has not read it: kept, and a clean is due when the wait ends.
                recopy.stats.tombstones_guarded += 1;
                recopy.stats.note_delete_horizon(Some(guard.deadline(horizon)));
                true
            }
            None => {
                recopy.stats.tombstones_removed += 1;
                false
            }
        }
    } else {
        true
    }
}

/// Whether the record at `offset` with `key` is its key's winner by the
/// map: the newest bits' answer, else the batched lookup's, else the map's.
fn is_mapped_winner(
    map: &mut OffsetMap,
    newest_bits: &NewestOffsets,
    by_map: Option<bool>,
    key: &[u8],
    offset: i64,
) -> bool {
    let from_map = |map: &mut OffsetMap| map.is_newest(&hash_key(key), offset);
    match (newest_bits.get(offset), by_map) {
        (Some(newest), _) => {
            debug_assert_eq!(
                newest,
                from_map(map),
                "the bit of offset {offset} disagrees with the map"
            );
            newest
        }
        (None, Some(newest)) => {
            debug_assert_eq!(newest, from_map(map), "batched lookup of offset {offset}");
            newest
        }
        (None, None) => from_map(map),
    }
}

/// Under a version strategy, whether a visible copy below the first dirty
/// offset stays: its key is unmapped, or it outranks the mapped winner,
/// which it then replaces in the map (the winner's newest bit cleared).
fn clean_copy_stays(
    map: &mut OffsetMap,
    newest_bits: &mut NewestOffsets,
    recopy: &mut Recopy<'_>,
    header: &BatchHeader,
    rec: &Record<'_>,
    key: &[u8],
) -> bool {
    let offset = header.base_offset + i64::from(rec.offset_delta);
    let version = recopy.strategy.version(header, rec);
    match resolve_clean_copy(map, newest_bits, &hash_key(key), offset, version) {
        CleanVerdict::Keep => true,
        CleanVerdict::KeepDisplacing(_) => {
            recopy.stats.clean_copies_won += 1;
            true
        }
        CleanVerdict::Drop => false,
    }
}

/// [`OffsetMap::resolve_clean`] for a visible copy below the first dirty
/// offset, clearing the newest bit of the winner it displaces (the survey
/// of kept segments and the recopy decide such copies alike; a second
/// decision of the same copy is `Keep`).
pub(super) fn resolve_clean_copy(
    map: &mut OffsetMap,
    newest_bits: &mut NewestOffsets,
    hash: &KeyHash,
    offset: i64,
    version: i64,
) -> CleanVerdict {
    let verdict = map.resolve_clean(hash, offset, version);
    if let CleanVerdict::KeepDisplacing(mapped) = verdict {
        newest_bits.unset(mapped);
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::compression::Compression;
    use crate::log::record_batch::BatchBuilder;

    #[test]
    fn batched_map_lookups_answer_as_single_ones() {
        // 40 records at offsets 100..140 (more than two chunks of lanes):
        // keys k0..k24, k0..k14 twice; every seventh record key-less; the
        // mapped range ends at 130.
        let (base, end) = (100i64, 130i64);
        let key = |i: usize| format!("k{}", i % 25);
        let mut builder = BatchBuilder::new(Compression::None, 0);
        for i in 0..40 {
            let k = key(i);
            builder.append(0, (i % 7 != 3).then_some(k.as_bytes()), Some(b"v"));
        }
        let mut batch = builder.build();
        record_batch::set_base_offset(&mut batch, base);
        let header = BatchHeader::parse(&batch).unwrap();
        let mut map = OffsetMap::new(24 * 1000, 0.9).unwrap();
        for j in 0..25usize {
            // Even keys were written again after the batch; odd ones are
            // newest at their last record here.
            let newest =
                if j % 2 == 0 { 500 } else { base + (if j < 15 { j + 25 } else { j }) as i64 };
            map.put(key(j).as_bytes(), newest).unwrap();
        }
        let (mut hashes, mut looked_up, mut newest) = (Vec::new(), Vec::new(), Vec::new());
        let bits = NewestOffsets::default();
        let lookup = MapLookup {
            hasher: KeyHasher::default(),
            bits: &bits,
            end,
            hashes: &mut hashes,
            looked_up: &mut looked_up,
        };
        let mut inflated = Vec::new();
        let payload = record_batch::records_bytes(&header, &batch, &mut inflated, 1 << 20).unwrap();
        lookup.answer(&mut map, &header, payload, &mut newest).unwrap();
        assert_eq!(newest.len(), 40);
        let mut superseded = 0;
        for (i, rec) in RecordIter::new(payload, header.records_count).enumerate() {
            let rec = rec.unwrap();
            let offset = base + i64::from(rec.offset_delta);
            let want = match rec.key.filter(|_| offset < end) {
                Some(k) => map.get(k).is_none_or(|m| offset >= m),
                None => true,
            };
            assert_eq!(newest[i], want, "record {i} at offset {offset}");
            superseded += usize::from(!want);
        }
        // Even keys, and odd keys' first records of k1..k13: both answers occur.
        assert!(superseded > 15 && superseded < 30, "{superseded} superseded");
    }
}

//! `MappedBatches`: where the map pass found each plain data batch of the
//! mapped range (file position, offsets, record count), so that the recopy
//! can drop a run of batches whose every record is superseded without
//! reading it again. In a first clean of a log with many versions per key,
//! most of the older batches hold no key's newest record: the recopy then
//! reads only the batches with survivors, and the clean reads most of the
//! log once.
//!
//! Invariants:
//! * Only plain data batches are recorded: not control batches, not
//!   transactional ones (the recopy's transaction walk must see those), not
//!   empty ones or ones with a key-less record or a record below the first
//!   dirty offset (the recopy forwards or counts those), so a batch dropped
//!   unread is exactly one the recopy would have dropped whole on reading
//!   it; and only batches the map pass put in the map and CRC-checked, read from
//!   the same closed segment through the same descriptor (a store segment
//!   fetched again holds the same, verified bytes). A batch is dropped
//!   unread only on what the map pass read: its position and offsets.
//! * Entries of a segment are in file order. A run of adjacent plain batches
//!   ends with an end mark at the position and offset just past its last
//!   batch, so the batch before it has a known end; the offsets from a
//!   batch's base to the next entry's base hold no record of another batch.
//! * Memory is bounded: the cleaner records only while the entries fit in
//!   the dedupe budget beside the map and the newest-offset bits, and gives
//!   them up (with their memory) when they no longer do; the recopy then
//!   reads every batch as before.
//! * Cleared after every clean.

/// Set on an entry's position when it only marks where the run before it ends.
const END_MARK: u32 = 1 << 31;

/// One recorded batch, relative to its segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// File position of the batch (or of the end of the run, with [`END_MARK`]).
    position: u32,
    /// Base offset minus the segment's base (for an end mark: the offset after the run).
    base_delta: u32,
    records: u32,
}

impl Entry {
    fn is_end(self) -> bool {
        self.position & END_MARK != 0
    }
    fn position(self) -> u64 {
        u64::from(self.position & !END_MARK)
    }
}

/// The plain batches the map pass read, per segment.
#[derive(Debug, Default)]
pub(super) struct MappedBatches {
    /// (segment base offset, index of its first entry), in segment order.
    segments: Vec<(i64, usize)>,
    entries: Vec<Entry>,
    /// The end mark the open run gets when it ends.
    open_end: Option<Entry>,
    given_up: bool,
}

/// A run of batches the recopy drops without reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DroppedRun {
    /// File position just past the run (a batch the recopy reads).
    pub(super) end_position: u64,
    pub(super) batches: u64,
    pub(super) records: u64,
}

/// Bytes one recorded batch costs.
const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();

impl MappedBatches {
    /// Forget everything and give the memory back; recording starts afresh.
    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }

    /// Stop recording for this clean and give the memory back.
    pub(super) fn give_up(&mut self) {
        *self = Self { given_up: true, ..Self::default() };
    }

    pub(super) fn is_recording(&self) -> bool {
        !self.given_up
    }

    /// Bytes held.
    pub(super) fn memory_bytes(&self) -> usize {
        self.bytes_with_entries(self.entries.capacity())
    }

    /// Bytes held once one more entry is pushed (a full vector doubles).
    pub(super) fn memory_bytes_after_push(&self) -> usize {
        let (len, capacity) = (self.entries.len(), self.entries.capacity());
        self.bytes_with_entries(if len < capacity { capacity } else { (capacity * 2).max(4) })
    }

    fn bytes_with_entries(&self, entries: usize) -> usize {
        entries * ENTRY_BYTES + self.segments.capacity() * std::mem::size_of::<(i64, usize)>()
    }

    /// Record a plain data batch of segment `segment_base` at `position`,
    /// `size` bytes, offsets `base..=last`. Batches must come in log order.
    pub(super) fn push_plain(
        &mut self,
        segment_base: i64,
        position: u64,
        size: usize,
        (base, last): (i64, i64),
        records: u32,
    ) {
        if self.given_up {
            return;
        }
        let relative = |p: u64, o: i64| -> Option<(u32, u32)> {
            let p = u32::try_from(p).ok().filter(|p| p & END_MARK == 0)?;
            Some((p, u32::try_from(o - segment_base).ok()?))
        };
        let (Some((pos, base_delta)), Some((end_pos, end_delta))) =
            (relative(position, base), relative(position + size as u64, last + 1))
        else {
            // Not expressible relative to the segment (never for a valid
            // segment): end the run; the batch is read by the recopy.
            self.end_run();
            return;
        };
        if self.segments.last().is_none_or(|(b, _)| *b != segment_base) {
            self.end_run();
            self.segments.push((segment_base, self.entries.len()));
        }
        self.entries.push(Entry { position: pos, base_delta, records });
        self.open_end =
            Some(Entry { position: end_pos | END_MARK, base_delta: end_delta, records: 0 });
    }

    /// The batch read next is not recorded (or its segment ends): close the
    /// open run with its end mark.
    pub(super) fn end_run(&mut self) {
        if let Some(end) = self.open_end.take() {
            self.entries.push(end);
        }
    }

    /// The recorded entries of the segment based at `segment_base`.
    pub(super) fn segment(&self, segment_base: i64) -> SegmentBatches<'_> {
        let found = self.segments.binary_search_by_key(&segment_base, |(b, _)| *b);
        let entries = match found {
            Ok(i) => {
                let from = self.segments[i].1;
                let to = self.segments.get(i + 1).map_or(self.entries.len(), |(_, at)| *at);
                &self.entries[from..to]
            }
            Err(_) => &[],
        };
        SegmentBatches { base: segment_base, entries, next: 0 }
    }
}

/// A cursor over one segment's recorded batches, moving forward with the recopy.
#[derive(Debug)]
pub(super) struct SegmentBatches<'a> {
    base: i64,
    entries: &'a [Entry],
    next: usize,
}

impl SegmentBatches<'_> {
    /// The longest run of recorded batches starting at `position` that
    /// `droppable(base, next_base)` allows to drop, ending before
    /// `segment_size` (the segment's last batch is always read: the recopy
    /// needs its header); `None` when not even the first batch may go.
    pub(super) fn droppable_run(
        &mut self,
        position: u64,
        segment_size: u64,
        mut droppable: impl FnMut(i64, i64) -> bool,
    ) -> Option<DroppedRun> {
        while self.entries.get(self.next).is_some_and(|e| e.position() < position) {
            self.next += 1;
        }
        let mut i = self.next;
        let mut run = DroppedRun { end_position: position, batches: 0, records: 0 };
        while let (Some(e), Some(after)) = (self.entries.get(i), self.entries.get(i + 1)) {
            let offsets =
                (self.base + i64::from(e.base_delta), self.base + i64::from(after.base_delta));
            if e.is_end()
                || e.position() != run.end_position
                || after.position() >= segment_size
                || !droppable(offsets.0, offsets.1)
            {
                break;
            }
            run.end_position = after.position();
            run.batches += 1;
            run.records += u64::from(e.records);
            i += 1;
        }
        self.next = i;
        (run.batches > 0).then_some(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_end_at_marks_at_undroppable_batches_and_before_the_last_batch() {
        let mut m = MappedBatches::default();
        // Segment 100: batches at 0 (100..=104), 50 (105..=109), 90 (110..=119),
        // then a control batch at 140, then 160 (121..=121), last batch at 200.
        m.push_plain(100, 0, 50, (100, 104), 5);
        m.push_plain(100, 50, 40, (105, 109), 5);
        m.push_plain(100, 90, 50, (110, 119), 10);
        m.end_run();
        m.push_plain(100, 160, 40, (121, 121), 1);
        m.end_run();
        // Segment 300: one batch, the segment's last.
        m.push_plain(300, 0, 70, (300, 309), 10);
        m.end_run();

        let mut s = m.segment(100);
        let run = s.droppable_run(0, 240, |_, _| true).unwrap();
        assert_eq!(run, DroppedRun { end_position: 140, batches: 3, records: 20 });
        assert_eq!(s.droppable_run(140, 240, |_, _| true), None, "a control batch is read");
        let run = s.droppable_run(160, 240, |a, b| (a, b) == (121, 122)).unwrap();
        assert_eq!(run.end_position, 200);

        let mut s = m.segment(100);
        let mut asked = Vec::new();
        let run = s.droppable_run(0, 240, |a, b| {
            asked.push((a, b));
            a != 105
        });
        assert_eq!(run, Some(DroppedRun { end_position: 50, batches: 1, records: 5 }));
        assert_eq!(asked, vec![(100, 105), (105, 110)]);
        assert_eq!(s.droppable_run(50, 240, |_, _| false), None);
        let run = s.droppable_run(90, 240, |_, _| true).unwrap();
        assert_eq!(run.end_position, 140);

        let mut s = m.segment(100);
        let run = s.droppable_run(160, 200, |_, _| true);
        assert_eq!(run, None, "the last batch of the segment is read");
        assert_eq!(m.segment(300).droppable_run(0, 70, |_, _| true), None);
        assert_eq!(m.segment(200).droppable_run(0, 70, |_, _| true), None);
    }

    #[test]
    fn a_given_up_record_holds_nothing_until_cleared() {
        let mut m = MappedBatches::default();
        m.push_plain(0, 0, 50, (0, 4), 5);
        m.give_up();
        m.push_plain(0, 50, 50, (5, 9), 5);
        m.end_run();
        assert!(!m.is_recording());
        assert_eq!(m.entries.capacity(), 0);
        assert_eq!(m.segment(0).droppable_run(0, 1000, |_, _| true), None);
        m.clear();
        assert!(m.is_recording());
    }
}

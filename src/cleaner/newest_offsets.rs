//! `NewestOffsets`: which offsets of the mapped dirty range are the newest of
//! their key, one bit per offset, set from the [`OffsetMap`] once the map is
//! built. The recopy answers "is this dirty record its key's newest?" from
//! the bit instead of hashing the key again and probing the map: the map
//! holds, for every key of the mapped range, the highest offset of a record
//! with that key, so a record in `[first dirty, end)` survives the map test
//! exactly when the map holds its own offset, which is when its bit is set.
//! Records below the first dirty offset still need the lookup (the map
//! knows their key only by its hash).
//!
//! Invariants:
//! * Built only when the range fits both [`MAX_OFFSETS`] and what the dedupe
//!   budget leaves beside the map's table, so map plus bits stay within
//!   `log.cleaner.dedupe.buffer.size`; otherwise the recopy uses the map.
//! * Every record the recopy asks about in the range was mapped (a keyed
//!   record of a mapped, non-aborted data batch): key-less records, control
//!   batches and aborted batches are settled before the question. Debug
//!   builds check every answer against the map.
//! * Under a versioned compaction strategy a bit is cleared when a copy
//!   below the range outranks the offset's record (the recopy meets that
//!   copy first); bits are only ever cleared, so a run the bits call
//!   droppable stays droppable.
//! * Given back after each clean, so its memory follows the dirty range.
//!
//! [`OffsetMap`]: super::OffsetMap

use super::offset_map::OffsetMap;

/// The most offsets the bits cover (8 MiB of bits).
pub const MAX_OFFSETS: i64 = 64 << 20;

/// One bit per offset of `[start, end)`: set when the offset is its key's newest.
#[derive(Debug, Default)]
pub(super) struct NewestOffsets {
    start: i64,
    end: i64,
    bits: Vec<u64>,
}

impl NewestOffsets {
    /// Set the bits for `[start, end)` from `map`, if the range fits in
    /// `max_bytes` and [`MAX_OFFSETS`]; otherwise leave them empty (every
    /// answer is then `None`). Returns whether they were built.
    pub(super) fn build(
        &mut self,
        map: &OffsetMap,
        start: i64,
        end: i64,
        max_bytes: usize,
    ) -> bool {
        self.clear();
        let len = end - start;
        if len <= 0 || len > MAX_OFFSETS {
            return false;
        }
        let bytes = Self::bytes_for(len);
        if bytes > max_bytes {
            return false;
        }
        self.bits = vec![0u64; bytes / 8];
        (self.start, self.end) = (start, end);
        let bits = &mut self.bits;
        map.for_each_offset(|offset| {
            if (start..end).contains(&offset) {
                let i = (offset - start) as usize;
                bits[i / 64] |= 1 << (i % 64);
            }
        });
        true
    }

    /// Bytes of the bits for a range of `len` offsets.
    pub(super) fn bytes_for(len: i64) -> usize {
        usize::try_from((len.max(0) + 63) / 64).map_or(usize::MAX, |w| w.saturating_mul(8))
    }

    /// Whether `offset` is its key's newest, when the bits cover it.
    pub(super) fn get(&self, offset: i64) -> Option<bool> {
        if offset < self.start || offset >= self.end {
            return None;
        }
        let i = (offset - self.start) as usize;
        self.bits.get(i / 64).map(|w| w & (1 << (i % 64)) != 0)
    }

    /// Whether any offset of `[from, to)` is its key's newest, when the bits
    /// cover the whole range.
    pub(super) fn any_in(&self, from: i64, to: i64) -> Option<bool> {
        if from < self.start || to > self.end || from > to {
            return None;
        }
        let (from, to) = ((from - self.start) as usize, (to - self.start) as usize);
        let mut i = from;
        while i < to {
            let word = self.bits.get(i / 64)?;
            let bit = i % 64;
            let span = (64 - bit).min(to - i);
            let mask = if span == 64 { u64::MAX } else { ((1u64 << span) - 1) << bit };
            if word & mask != 0 {
                return Some(true);
            }
            i += span;
        }
        Some(false)
    }

    /// `offset` is no longer its key's winner (a copy below the range
    /// outranked it, `OffsetMap::resolve_clean`); nothing when not covered.
    pub(super) fn unset(&mut self, offset: i64) {
        if (self.start..self.end).contains(&offset) {
            let i = (offset - self.start) as usize;
            if let Some(word) = self.bits.get_mut(i / 64) {
                *word &= !(1 << (i % 64));
            }
        }
    }

    /// Bytes held.
    pub(super) fn memory_bytes(&self) -> usize {
        self.bits.capacity() * 8
    }

    /// Forget the range and give the memory back.
    pub(super) fn clear(&mut self) {
        self.bits = Vec::new();
        (self.start, self.end) = (0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_follow_the_map_within_the_range_and_the_budget() {
        let mut map = OffsetMap::new(24 * 100, 0.9).unwrap();
        for (key, offset) in [(&b"a"[..], 3), (b"b", 10), (b"a", 70), (b"c", 200)] {
            map.put(key, offset).unwrap();
        }
        let mut n = NewestOffsets::default();
        assert!(n.build(&map, 5, 100, 1 << 10));
        assert_eq!(n.get(70), Some(true));
        assert_eq!(n.get(10), Some(true));
        assert_eq!(n.get(11), Some(false));
        assert_eq!(n.get(3), None, "below the range: ask the map");
        assert_eq!(n.get(100), None);
        assert_eq!(n.bits.len(), 2);
        assert_eq!(n.any_in(5, 10), Some(false));
        assert_eq!(n.any_in(5, 11), Some(true));
        assert_eq!(n.any_in(11, 70), Some(false));
        assert_eq!(n.any_in(11, 71), Some(true));
        assert_eq!(n.any_in(71, 100), Some(false));
        assert_eq!(n.any_in(70, 70), Some(false), "an empty range");
        assert_eq!(n.any_in(4, 10), None, "not covered");
        assert_eq!(n.any_in(90, 101), None);
        n.unset(70);
        n.unset(3);
        assert_eq!((n.get(70), n.get(10)), (Some(false), Some(true)));
        assert_eq!(n.any_in(11, 100), Some(false));
        assert!(!n.build(&map, 0, 1 << 20, 1 << 10), "over the budget");
        assert_eq!(n.get(70), None);
        assert!(!n.build(&map, 0, MAX_OFFSETS + 1, usize::MAX));
        assert!(n.build(&map, 0, 64, 8));
        n.clear();
        assert_eq!((n.get(10), n.bits.capacity()), (None, 0));
    }
}

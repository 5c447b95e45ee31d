//! `OffsetMap`: the cleaner's dedupe table, key fingerprint → newest offset.
//!
//! Kafka calls its implementation "skimpy": it stores no keys, only a 16-byte
//! MD5 fingerprint of each key and the 8-byte offset of the newest record seen
//! for it, 24 bytes per entry whatever the key's length.
//!
//! Under a versioned compaction strategy (`sediment.compaction.strategy`
//! `timestamp` or `header`) each entry also holds the winning copy's 8-byte
//! version: 32 bytes an entry, so a clean of such a topic maps a quarter fewer
//! keys in the same budget. The width is chosen per clean
//! ([`OffsetMap::set_versioned`]); offset-ranked topics keep 24 bytes.
//!
//! Layout and invariants:
//! * One table of `slots × entry width` bytes: fingerprint, big-endian offset,
//!   then (versioned) big-endian version. The byte budget
//!   (`log.cleaner.dedupe.buffer.size` divided among the threads) bounds it,
//!   but the table starts at [`INITIAL_SLOTS`] and grows by half (rehashing
//!   every entry into a new table) when a new key would pass its load factor,
//!   up to the budget's slots: memory follows the keys a clean meets, not the
//!   budget. Kafka allocates the whole budget up front. Growing by half, not
//!   doubling, keeps both the peak while rehashing (old plus new table, 2.5×
//!   the old) and the final table's slack small, at the price of rehashing
//!   each key about twice in all instead of once. [`OffsetMap::clear`] gives a grown
//!   table back and starts the next clean small again.
//! * What the cleaner and the gauges see is the budget: [`OffsetMap::max_entries`],
//!   [`OffsetMap::remaining`] and [`OffsetMap::utilization`] count against the
//!   budget's slots, whatever the table's size now.
//! * Open addressing with linear probing: a fingerprint starts at the slot its
//!   first 8 bytes select and moves to the next slot (wrapping) while the slot
//!   holds a different fingerprint. Entries are never removed, so a lookup may
//!   stop at the first empty slot.
//! * The map accepts at most `floor(slots × load_factor)` distinct keys
//!   (`log.cleaner.io.buffer.load.factor`, 0.9): past that, probe chains grow
//!   quickly. The cleaner checks [`OffsetMap::remaining`] before mapping a
//!   batch, so a put never finds the map full.
//! * An all-zero fingerprint marks an empty slot. The one key whose MD5 is all
//!   zero (none is known) is stored with its last bit flipped, which can only
//!   collide with another astronomically unlikely fingerprint.
//!
//! Two different keys with the same 128-bit fingerprint would be treated as one
//! key; the design accepts that risk (about 2^-64 for 2^32 keys) for the memory
//! it saves, as Kafka does.

use md5::{Digest, Md5};

/// Bytes of a key fingerprint (MD5).
pub const HASH_SIZE: usize = 16;
/// Bytes of one entry: fingerprint plus offset.
pub const BYTES_PER_ENTRY: usize = HASH_SIZE + 8;
/// Bytes of one entry of a versioned map: fingerprint, offset and version.
pub const VERSIONED_BYTES_PER_ENTRY: usize = BYTES_PER_ENTRY + 8;

/// A key fingerprint.
pub type KeyHash = [u8; HASH_SIZE];

/// Fingerprint of a key as the map stores it (never all zero).
pub fn hash_key(key: &[u8]) -> KeyHash {
    let mut hash: KeyHash = Md5::digest(key).into();
    if hash == [0u8; HASH_SIZE] {
        hash[HASH_SIZE - 1] = 1;
    }
    hash
}

/// Keys fingerprinted together by [`KeyHasher::hash_into`]: two passes of
/// 8 AVX2 lanes, or one of 16 AVX-512 lanes (measured with AVX2: a batch of
/// 16 short keys costs about a sixth of 16 single digests).
pub const HASH_LANES: usize = 16;

/// Fingerprints many keys at once, with the CPU's widest SIMD lanes; the
/// digests are exactly [`hash_key`]'s (MD5), whichever path computes them.
#[derive(Debug, Clone, Copy)]
pub struct KeyHasher(md5_many::Md5Many);

impl Default for KeyHasher {
    /// Detects the CPU's SIMD level once.
    fn default() -> Self {
        Self(md5_many::Md5Many::new())
    }
}

impl KeyHasher {
    /// Append `(fingerprint of keys[i], offsets[i])` for each key to `out`.
    pub fn hash_into(self, keys: &[&[u8]], offsets: &[i64], out: &mut Vec<(KeyHash, i64)>) {
        let mut digests = [[0u8; HASH_SIZE]; HASH_LANES];
        for (keys, offsets) in keys.chunks(HASH_LANES).zip(offsets.chunks(HASH_LANES)) {
            let digests = &mut digests[..keys.len()];
            self.0.hash_many(keys, digests);
            for (hash, offset) in digests.iter_mut().zip(offsets) {
                if *hash == [0u8; HASH_SIZE] {
                    hash[HASH_SIZE - 1] = 1;
                }
                out.push((*hash, *offset));
            }
        }
    }
}

/// Keys gathered for [`KeyHasher`]: each time [`HASH_LANES`] are in they
/// are fingerprinted into `out`; [`KeyLanes::finish`] does the rest.
pub struct KeyLanes<'k> {
    hasher: KeyHasher,
    keys: [&'k [u8]; HASH_LANES],
    offsets: [i64; HASH_LANES],
    n: usize,
}

impl<'k> KeyLanes<'k> {
    pub fn new(hasher: KeyHasher) -> Self {
        Self { hasher, keys: [&[]; HASH_LANES], offsets: [0; HASH_LANES], n: 0 }
    }

    /// Add `key` (of the record at `offset`).
    pub fn push(&mut self, key: &'k [u8], offset: i64, out: &mut Vec<(KeyHash, i64)>) {
        (self.keys[self.n], self.offsets[self.n]) = (key, offset);
        self.n += 1;
        if self.n == HASH_LANES {
            self.hasher.hash_into(&self.keys, &self.offsets, out);
            self.n = 0;
        }
    }

    /// Fingerprint the keys still waiting.
    pub fn finish(self, out: &mut Vec<(KeyHash, i64)>) {
        self.hasher.hash_into(&self.keys[..self.n], &self.offsets[..self.n], out);
    }
}

/// What [`OffsetMap::resolve_clean`] made of a copy below the mapped range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanVerdict {
    /// Its key is not mapped: it stays.
    Keep,
    /// It outranks the mapped winner, whose offset is given: it stays and
    /// is the winner now.
    KeepDisplacing(i64),
    /// A mapped copy outranks it.
    Drop,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OffsetMapError {
    #[error("dedupe buffer of {budget} bytes holds no entry of {entry_bytes} bytes")]
    BudgetTooSmall { budget: usize, entry_bytes: usize },
    #[error("load factor {0} is not in (0, 1]")]
    InvalidLoadFactor(f64),
    #[error("offset map is full ({entries} of {max_entries} entries)")]
    Full { entries: usize, max_entries: usize },
}

/// Slots of a fresh table (768 KiB).
pub const INITIAL_SLOTS: usize = 1 << 15;

/// Fingerprint → offset table, growing up to a byte budget.
pub struct OffsetMap {
    /// `slots × entry_bytes` bytes: fingerprint, big-endian offset and, when
    /// versioned, big-endian version.
    bytes: Vec<u8>,
    /// [`BYTES_PER_ENTRY`], or [`VERSIONED_BYTES_PER_ENTRY`] when versioned.
    entry_bytes: usize,
    budget_bytes: usize,
    /// Slots of the table now.
    table_slots: usize,
    /// Keys the table takes before it grows: `floor(slots × load_factor)`.
    grow_at: usize,
    entries: usize,
    load_factor: f64,
    /// Slots and keys the budget allows.
    budget_slots: usize,
    max_entries: usize,
    /// The largest offset put since the last clear (-1 when empty).
    latest_offset: i64,
    /// Probes made by puts and lookups since the last clear (for diagnosis).
    probes: u64,
}

impl std::fmt::Debug for OffsetMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetMap")
            .field("table_slots", &self.table_slots)
            .field("budget_slots", &self.budget_slots)
            .field("entries", &self.entries)
            .field("max_entries", &self.max_entries)
            .field("latest_offset", &self.latest_offset)
            .field("entry_bytes", &self.entry_bytes)
            .finish()
    }
}

impl OffsetMap {
    /// A map using `budget_bytes` of memory, filled to at most `load_factor`.
    ///
    /// # Errors
    /// A budget below one entry, or a load factor outside (0, 1].
    pub fn new(budget_bytes: usize, load_factor: f64) -> Result<Self, OffsetMapError> {
        Self::with_entry_bytes(budget_bytes, load_factor, BYTES_PER_ENTRY)
    }

    fn with_entry_bytes(
        budget_bytes: usize,
        load_factor: f64,
        entry_bytes: usize,
    ) -> Result<Self, OffsetMapError> {
        let (budget_slots, max_entries) =
            Self::check_budget_of(budget_bytes, load_factor, entry_bytes)?;
        let slots = budget_slots.min(INITIAL_SLOTS);
        Ok(Self {
            bytes: vec![0u8; slots * entry_bytes],
            entry_bytes,
            budget_bytes,
            table_slots: slots,
            grow_at: Self::keys_for(slots, load_factor),
            entries: 0,
            load_factor,
            budget_slots,
            max_entries,
            latest_offset: -1,
            probes: 0,
        })
    }

    fn keys_for(slots: usize, load_factor: f64) -> usize {
        ((slots as f64) * load_factor).floor() as usize
    }

    /// The slots and the entries a map of `budget_bytes` holds, without
    /// allocating it.
    ///
    /// # Errors
    /// A load factor outside (0, 1], or a budget too small for one entry.
    pub fn check_budget(
        budget_bytes: usize,
        load_factor: f64,
    ) -> Result<(usize, usize), OffsetMapError> {
        Self::check_budget_of(budget_bytes, load_factor, BYTES_PER_ENTRY)
    }

    fn check_budget_of(
        budget_bytes: usize,
        load_factor: f64,
        entry_bytes: usize,
    ) -> Result<(usize, usize), OffsetMapError> {
        if !(load_factor > 0.0 && load_factor <= 1.0) {
            return Err(OffsetMapError::InvalidLoadFactor(load_factor));
        }
        let slots = budget_bytes / entry_bytes;
        let max_entries = ((slots as f64) * load_factor).floor() as usize;
        if slots == 0 || max_entries == 0 {
            return Err(OffsetMapError::BudgetTooSmall { budget: budget_bytes, entry_bytes });
        }
        Ok((slots, max_entries))
    }

    /// Make the entries hold a version (32 bytes each) or not (24), for the
    /// next clean; a change of width forgets every entry and starts a fresh
    /// small table.
    ///
    /// # Errors
    /// `BudgetTooSmall` when the budget holds no entry of the new width
    /// (the map is left as it was).
    pub fn set_versioned(&mut self, versioned: bool) -> Result<(), OffsetMapError> {
        let entry_bytes = if versioned { VERSIONED_BYTES_PER_ENTRY } else { BYTES_PER_ENTRY };
        if entry_bytes != self.entry_bytes {
            *self = Self::with_entry_bytes(self.budget_bytes, self.load_factor, entry_bytes)?;
        }
        Ok(())
    }

    /// Whether entries hold a version.
    pub fn is_versioned(&self) -> bool {
        self.entry_bytes == VERSIONED_BYTES_PER_ENTRY
    }

    /// Slots the budget allows (entries the budget could hold at load factor 1).
    pub fn slots(&self) -> usize {
        self.budget_slots
    }
    /// Slots of the table now (at most [`OffsetMap::slots`]).
    pub fn table_slots(&self) -> usize {
        self.table_slots
    }
    /// Distinct keys stored.
    pub fn len(&self) -> usize {
        self.entries
    }
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
    /// Most distinct keys the map accepts: `floor(slots × load_factor)`.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
    /// Distinct keys that may still be added.
    pub fn remaining(&self) -> usize {
        self.max_entries - self.entries
    }
    /// Share of the budget's slots in use, as Kafka's
    /// `max-buffer-utilization-percent` reports it (its map is the whole budget).
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.budget_slots as f64
    }
    /// Largest offset put since the last clear, -1 if none.
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }
    /// Bytes of memory the table holds.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.len()
    }
    /// Probes made since the last clear.
    pub fn probes(&self) -> u64 {
        self.probes
    }

    /// Call `f` with the offset of every entry, in table order.
    pub fn for_each_offset(&self, mut f: impl FnMut(i64)) {
        for slot in self.bytes.chunks_exact(self.entry_bytes) {
            let (hash, rest) = slot.split_at(HASH_SIZE);
            if hash.iter().any(|b| *b != 0) {
                f(i64::from_be_bytes(rest[..8].try_into().expect("8 bytes")));
            }
        }
    }

    /// Forget every entry. A grown table is given back for a fresh small
    /// one; a small one is zeroed in place.
    pub fn clear(&mut self) {
        let initial = self.budget_slots.min(INITIAL_SLOTS);
        if self.table_slots > initial {
            self.bytes = vec![0u8; initial * self.entry_bytes];
            self.table_slots = initial;
            self.grow_at = Self::keys_for(initial, self.load_factor);
        } else if self.entries > 0 {
            // Slots are only written by puts: an empty map's memory is already
            // zero (and a fresh map's pages stay untouched until used).
            self.bytes.fill(0);
        }
        self.entries = 0;
        self.latest_offset = -1;
        self.probes = 0;
    }

    fn start_slot(&self, hash: &KeyHash) -> usize {
        let h = u64::from_be_bytes(hash[..8].try_into().expect("8 bytes"));
        (h % self.table_slots as u64) as usize
    }

    /// Start loading the slot `hash` probes first into the CPU cache, so
    /// that a put or lookup of it soon after does not wait for memory: the
    /// table is larger than the caches, and a batch's keys are prefetched
    /// together before they are put. A hint only; it changes no state.
    #[inline]
    pub fn prefetch(&self, hash: &KeyHash) {
        #[cfg(target_arch = "x86_64")]
        {
            let at = self.start_slot(hash) * self.entry_bytes;
            if let Some(slot) = self.bytes.get(at..at + self.entry_bytes) {
                // SAFETY: a prefetch of memory inside our own table; it
                // reads nothing into the program and cannot fault.
                unsafe {
                    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                    _mm_prefetch::<_MM_HINT_T0>(slot.as_ptr().cast());
                    // An entry may straddle two cache lines.
                    _mm_prefetch::<_MM_HINT_T0>(slot.as_ptr().add(self.entry_bytes - 1).cast());
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// Slot holding `hash`, or the empty slot where it would go.
    #[inline]
    fn find(&mut self, hash: &KeyHash) -> (usize, bool) {
        // The width as a constant in the probe loop: the offset-ranked
        // map's hot path costs what it did before widths varied.
        if self.entry_bytes == BYTES_PER_ENTRY {
            self.find_in::<BYTES_PER_ENTRY>(hash)
        } else {
            self.find_in::<VERSIONED_BYTES_PER_ENTRY>(hash)
        }
    }

    #[inline]
    fn find_in<const WIDTH: usize>(&mut self, hash: &KeyHash) -> (usize, bool) {
        let mut slot = self.start_slot(hash);
        // A table filled to a load factor of 1 has no empty slot: after one
        // lap the key is not there (a put then finds the map full).
        for _ in 0..self.table_slots {
            self.probes += 1;
            let at = slot * WIDTH;
            let stored = &self.bytes[at..at + HASH_SIZE];
            if stored == hash {
                return (slot, true);
            }
            if stored.iter().all(|&b| b == 0) {
                return (slot, false);
            }
            slot += 1;
            if slot == self.table_slots {
                slot = 0;
            }
        }
        (slot, false)
    }

    /// Record `offset` as the newest for the key with fingerprint `hash`.
    ///
    /// # Errors
    /// `Full` when the key is new and the map already holds `max_entries` keys.
    pub fn put_hash(&mut self, hash: &KeyHash, offset: i64) -> Result<(), OffsetMapError> {
        let (slot, _) = self.slot_for_put(hash)?;
        self.write_offset(slot, offset);
        Ok(())
    }

    /// The slot of `hash`, claimed for it if new, and whether it was there.
    #[inline]
    fn slot_for_put(&mut self, hash: &KeyHash) -> Result<(usize, bool), OffsetMapError> {
        // Grow before probing: a table filled to a load factor of 1 has no
        // empty slot to end a probe for a new key.
        if self.entries >= self.grow_at && self.table_slots < self.budget_slots {
            self.grow();
        }
        let (slot, found) = self.find(hash);
        if !found {
            if self.entries >= self.max_entries {
                return Err(OffsetMapError::Full {
                    entries: self.entries,
                    max_entries: self.max_entries,
                });
            }
            self.bytes[slot * self.entry_bytes..slot * self.entry_bytes + HASH_SIZE]
                .copy_from_slice(hash);
            self.entries += 1;
        }
        Ok((slot, found))
    }

    #[inline]
    fn write_offset(&mut self, slot: usize, offset: i64) {
        let at = slot * self.entry_bytes + HASH_SIZE;
        self.bytes[at..at + 8].copy_from_slice(&offset.to_be_bytes());
        self.latest_offset = self.latest_offset.max(offset);
    }

    /// The offset and version in `slot` (version 0 without versions).
    fn read_slot(&self, slot: usize) -> (i64, i64) {
        let at = slot * self.entry_bytes + HASH_SIZE;
        let word = |at: usize| i64::from_be_bytes(self.bytes[at..at + 8].try_into().expect("8"));
        (word(at), if self.is_versioned() { word(at + 8) } else { 0 })
    }

    /// Grow the table by half (at most to the budget) and put every entry back.
    fn grow(&mut self) {
        let slots = self.budget_slots.min(self.table_slots.saturating_add(self.table_slots / 2));
        let old = std::mem::replace(&mut self.bytes, vec![0u8; slots * self.entry_bytes]);
        self.table_slots = slots;
        // The budget's load factor may be 1: the last growth must still take
        // every key the budget allows.
        self.grow_at = if slots == self.budget_slots {
            self.max_entries
        } else {
            Self::keys_for(slots, self.load_factor)
        };
        // Entries are read in order and land at random: prefetch the slot of
        // an entry a few ahead while placing this one.
        const AHEAD: usize = 8;
        for (i, entry) in old.chunks_exact(self.entry_bytes).enumerate() {
            if let Some(next) =
                old.get((i + AHEAD) * self.entry_bytes..(i + AHEAD) * self.entry_bytes + HASH_SIZE)
            {
                self.prefetch(next.try_into().expect("16 bytes"));
            }
            let hash: KeyHash = entry[..HASH_SIZE].try_into().expect("16 bytes");
            if hash == [0u8; HASH_SIZE] {
                continue;
            }
            let (slot, _) = self.find(&hash);
            self.bytes[slot * self.entry_bytes..(slot + 1) * self.entry_bytes]
                .copy_from_slice(entry);
        }
    }

    /// Record `offset` as the newest for `key`.
    ///
    /// # Errors
    /// `Full`, as for [`OffsetMap::put_hash`].
    pub fn put(&mut self, key: &[u8], offset: i64) -> Result<(), OffsetMapError> {
        self.put_hash(&hash_key(key), offset)
    }

    /// The offset stored for fingerprint `hash`.
    pub fn get_hash(&mut self, hash: &KeyHash) -> Option<i64> {
        let (slot, found) = self.find(hash);
        found.then(|| {
            let at = slot * self.entry_bytes + HASH_SIZE;
            i64::from_be_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"))
        })
    }

    /// Whether the record at `offset` with key fingerprint `hash` is its
    /// key's winner: the map knows no copy of the key, or holds this very
    /// offset. Every keyed record of the mapped dirty range was put, so for
    /// them this is "no copy ranks above it"; a record below the mapped
    /// range is the winner only while its key is unmapped (see
    /// [`OffsetMap::resolve_clean`] for versioned maps).
    pub fn is_newest(&mut self, hash: &KeyHash, offset: i64) -> bool {
        self.get_hash(hash).is_none_or(|m| offset == m)
    }

    /// Record the copy at `offset` with `version` for the key `hash` if it
    /// ranks at or above the stored one (the map pass walks in offset
    /// order, so a tie goes to the later copy). A map without versions
    /// takes every put, as [`OffsetMap::put_hash`].
    ///
    /// # Errors
    /// `Full`, as for [`OffsetMap::put_hash`].
    pub fn put_versioned(
        &mut self,
        hash: &KeyHash,
        offset: i64,
        version: i64,
    ) -> Result<(), OffsetMapError> {
        if !self.is_versioned() {
            return self.put_hash(hash, offset);
        }
        let (slot, found) = self.slot_for_put(hash)?;
        if found && version < self.read_slot(slot).1 {
            return Ok(());
        }
        self.write_offset(slot, offset);
        self.write_version(slot, version);
        Ok(())
    }

    fn write_version(&mut self, slot: usize, version: i64) {
        let at = slot * self.entry_bytes + BYTES_PER_ENTRY;
        self.bytes[at..at + 8].copy_from_slice(&version.to_be_bytes());
    }

    /// The offset and version stored for `hash` (version 0 in a map without
    /// versions).
    pub fn get_versioned(&mut self, hash: &KeyHash) -> Option<(i64, i64)> {
        let (slot, found) = self.find(hash);
        found.then(|| self.read_slot(slot))
    }

    /// Decide a copy from below the mapped range (the clean region) of a
    /// versioned map: it stays if its key is unmapped, or if its version is
    /// above the mapped winner's (a tie goes to the mapped copy, whose
    /// offset is higher); it then becomes the key's winner in the map, and
    /// the offset it displaced is returned so its newest bit can be cleared.
    pub fn resolve_clean(&mut self, hash: &KeyHash, offset: i64, version: i64) -> CleanVerdict {
        let (slot, found) = self.find(hash);
        if !found {
            return CleanVerdict::Keep;
        }
        let (stored_offset, stored) = self.read_slot(slot);
        if stored_offset == offset {
            // Already this copy's (it displaced the mapped winner before).
            return CleanVerdict::Keep;
        }
        if !self.is_versioned() || (version, offset) <= (stored, stored_offset) {
            return CleanVerdict::Drop;
        }
        let at = slot * self.entry_bytes + HASH_SIZE;
        self.bytes[at..at + 8].copy_from_slice(&offset.to_be_bytes());
        self.write_version(slot, version);
        CleanVerdict::KeepDisplacing(stored_offset)
    }

    /// The offset stored for `key`.
    pub fn get(&mut self, key: &[u8]) -> Option<i64> {
        self.get_hash(&hash_key(key))
    }

    /// Whether fingerprint `hash` is stored.
    pub fn contains_hash(&mut self, hash: &KeyHash) -> bool {
        self.find(hash).1
    }
}

#[cfg(test)]
#[path = "offset_map_tests.rs"]
mod tests;

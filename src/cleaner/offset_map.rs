//! `OffsetMap`: the cleaner's dedupe table, key fingerprint → newest offset.
//!
//! Kafka calls its implementation "skimpy": it stores no keys, only a 16-byte
//! MD5 fingerprint of each key and the 8-byte offset of the newest record seen
//! for it, 24 bytes per entry whatever the key's length.
//!
//! Layout and invariants:
//! * One allocation of `slots × 24` bytes, made when the map is created from
//!   its byte budget (`log.cleaner.dedupe.buffer.size` divided among the
//!   threads); nothing is allocated per key and [`OffsetMap::clear`] zeroes the
//!   same memory for the next clean.
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

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OffsetMapError {
    #[error("dedupe buffer of {budget} bytes holds no entry of {BYTES_PER_ENTRY} bytes")]
    BudgetTooSmall { budget: usize },
    #[error("load factor {0} is not in (0, 1]")]
    InvalidLoadFactor(f64),
    #[error("offset map is full ({entries} of {max_entries} entries)")]
    Full { entries: usize, max_entries: usize },
}

/// Fixed-size fingerprint → offset table over a byte budget.
pub struct OffsetMap {
    /// `slots × BYTES_PER_ENTRY` bytes: fingerprint then big-endian offset.
    bytes: Vec<u8>,
    slots: usize,
    entries: usize,
    max_entries: usize,
    /// The largest offset put since the last clear (-1 when empty).
    latest_offset: i64,
    /// Probes made by puts and lookups since the last clear (for diagnosis).
    probes: u64,
}

impl std::fmt::Debug for OffsetMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetMap")
            .field("slots", &self.slots)
            .field("entries", &self.entries)
            .field("max_entries", &self.max_entries)
            .field("latest_offset", &self.latest_offset)
            .finish()
    }
}

impl OffsetMap {
    /// A map using `budget_bytes` of memory, filled to at most `load_factor`.
    ///
    /// # Errors
    /// A budget below one entry, or a load factor outside (0, 1].
    pub fn new(budget_bytes: usize, load_factor: f64) -> Result<Self, OffsetMapError> {
        let (slots, max_entries) = Self::check_budget(budget_bytes, load_factor)?;
        Ok(Self {
            bytes: vec![0u8; slots * BYTES_PER_ENTRY],
            slots,
            entries: 0,
            max_entries,
            latest_offset: -1,
            probes: 0,
        })
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
        if !(load_factor > 0.0 && load_factor <= 1.0) {
            return Err(OffsetMapError::InvalidLoadFactor(load_factor));
        }
        let slots = budget_bytes / BYTES_PER_ENTRY;
        let max_entries = ((slots as f64) * load_factor).floor() as usize;
        if slots == 0 || max_entries == 0 {
            return Err(OffsetMapError::BudgetTooSmall { budget: budget_bytes });
        }
        Ok((slots, max_entries))
    }

    /// Number of slots (entries the memory could hold at load factor 1).
    pub fn slots(&self) -> usize {
        self.slots
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
    /// Share of the slots in use, as Kafka's `max-buffer-utilization-percent` reports it.
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.slots as f64
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

    /// Forget every entry, keeping the memory.
    pub fn clear(&mut self) {
        // Slots are only written by puts: an empty map's memory is already zero
        // (and a fresh map's pages stay untouched until used).
        if self.entries > 0 {
            self.bytes.fill(0);
        }
        self.entries = 0;
        self.latest_offset = -1;
        self.probes = 0;
    }

    fn start_slot(&self, hash: &KeyHash) -> usize {
        let h = u64::from_be_bytes(hash[..8].try_into().expect("8 bytes"));
        (h % self.slots as u64) as usize
    }

    /// Slot holding `hash`, or the empty slot where it would go.
    fn find(&mut self, hash: &KeyHash) -> (usize, bool) {
        let mut slot = self.start_slot(hash);
        loop {
            self.probes += 1;
            let at = slot * BYTES_PER_ENTRY;
            let stored = &self.bytes[at..at + HASH_SIZE];
            if stored == hash {
                return (slot, true);
            }
            if stored.iter().all(|&b| b == 0) {
                return (slot, false);
            }
            // NOTE: the map is never completely full (max_entries <= slots and a
            // put into a full map is refused), so this loop finds an empty slot.
            slot += 1;
            if slot == self.slots {
                slot = 0;
            }
        }
    }

    /// Record `offset` as the newest for the key with fingerprint `hash`.
    ///
    /// # Errors
    /// `Full` when the key is new and the map already holds `max_entries` keys.
    pub fn put_hash(&mut self, hash: &KeyHash, offset: i64) -> Result<(), OffsetMapError> {
        let (slot, found) = self.find(hash);
        if !found {
            if self.entries >= self.max_entries {
                return Err(OffsetMapError::Full {
                    entries: self.entries,
                    max_entries: self.max_entries,
                });
            }
            self.bytes[slot * BYTES_PER_ENTRY..slot * BYTES_PER_ENTRY + HASH_SIZE]
                .copy_from_slice(hash);
            self.entries += 1;
        }
        let at = slot * BYTES_PER_ENTRY + HASH_SIZE;
        self.bytes[at..at + 8].copy_from_slice(&offset.to_be_bytes());
        self.latest_offset = self.latest_offset.max(offset);
        Ok(())
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
            let at = slot * BYTES_PER_ENTRY + HASH_SIZE;
            i64::from_be_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"))
        })
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
mod tests {
    use super::*;

    #[test]
    fn capacity_follows_budget_and_load_factor() {
        let map = OffsetMap::new(24 * 1000, 0.9).unwrap();
        assert_eq!(map.slots(), 1000);
        assert_eq!(map.max_entries(), 900);
        let map = OffsetMap::new(24 * 1000 + 23, 0.9).unwrap();
        assert_eq!(map.slots(), 1000, "a partial entry of budget is not a slot");
        assert_eq!(map.memory_bytes(), 24_000);
        // Kafka's default: 128 MiB and 0.9 map about 5.03 million keys.
        let map = OffsetMap::new(134_217_728, 0.9).unwrap();
        assert_eq!(map.max_entries(), 5_033_164);
        assert!(OffsetMap::new(23, 0.9).is_err());
        assert!(OffsetMap::new(1 << 20, 0.0).is_err());
        assert!(OffsetMap::new(1 << 20, 1.5).is_err());
    }

    #[test]
    fn put_get_overwrite_and_full() {
        let mut map = OffsetMap::new(24 * 100, 0.9).unwrap();
        for i in 0..90i64 {
            map.put(format!("key-{i}").as_bytes(), i).unwrap();
        }
        assert_eq!(map.len(), 90);
        assert_eq!(map.remaining(), 0);
        // Overwriting an existing key is always allowed.
        map.put(b"key-7", 1000).unwrap();
        assert_eq!(map.get(b"key-7"), Some(1000));
        assert_eq!(map.len(), 90);
        assert_eq!(
            map.put(b"another", 5),
            Err(OffsetMapError::Full { entries: 90, max_entries: 90 })
        );
        for i in 0..90i64 {
            let want = if i == 7 { 1000 } else { i };
            assert_eq!(map.get(format!("key-{i}").as_bytes()), Some(want));
        }
        assert_eq!(map.get(b"missing"), None);
        assert_eq!(map.latest_offset(), 1000);
        assert!((map.utilization() - 0.9).abs() < 1e-9);
    }

    #[test]
    fn clear_reuses_memory() {
        let mut map = OffsetMap::new(24 * 64, 0.75).unwrap();
        let ptr = map.bytes.as_ptr();
        for round in 0..3 {
            for i in 0..48i64 {
                map.put(format!("{round}-{i}").as_bytes(), i).unwrap();
            }
            assert_eq!(map.remaining(), 0);
            map.clear();
            assert!(map.is_empty());
            assert_eq!(map.get(format!("{round}-0").as_bytes()), None);
            assert_eq!(map.latest_offset(), -1);
        }
        assert_eq!(map.bytes.as_ptr(), ptr, "clear keeps the same allocation");
    }

    #[test]
    fn linear_probing_wraps_around() {
        // Fingerprints chosen to start at the last slot collide and wrap to slot 0.
        let mut map = OffsetMap::new(24 * 4, 1.0).unwrap();
        let mut a = [0u8; 16];
        a[7] = 3; // start slot 3 of 4
        let mut b = a;
        b[15] = 9; // same start slot, different fingerprint
        map.put_hash(&a, 1).unwrap();
        map.put_hash(&b, 2).unwrap();
        assert_eq!(map.get_hash(&a), Some(1));
        assert_eq!(map.get_hash(&b), Some(2));
        assert_eq!(&map.bytes[..16], &b, "the second fingerprint wrapped to slot 0");
    }

    #[test]
    fn zero_hash_is_never_stored() {
        assert_ne!(hash_key(b""), [0u8; 16]);
        assert_eq!(hash_key(b"abc"), hash_key(b"abc"));
        assert_ne!(hash_key(b"abc"), hash_key(b"abd"));
    }
}

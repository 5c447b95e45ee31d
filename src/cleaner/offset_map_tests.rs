//! The offset map: capacity, puts and overwrites, growth, versions.

use super::*;

#[test]
fn batched_fingerprints_are_the_single_ones() {
    // Lengths across MD5's block and padding boundaries (55, 56, 64,
    // 119, 120), mixed in one call, more than one chunk of lanes.
    let mut keys: Vec<Vec<u8>> = (0..200u32)
        .map(|i| (0..(i * 7 % 150)).map(|j| (i * 31 + j * 17) as u8).collect())
        .collect();
    keys.extend([55usize, 56, 63, 64, 65, 119, 120, 0].map(|n| vec![b'k'; n]));
    let slices: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let offsets: Vec<i64> = (0..slices.len() as i64).collect();
    let mut out = Vec::new();
    KeyHasher::default().hash_into(&slices, &offsets, &mut out);
    assert_eq!(out.len(), keys.len());
    // Gathered a key at a time: the same digests, in the same order.
    let mut lanes = KeyLanes::new(KeyHasher::default());
    let mut gathered = Vec::new();
    for (key, offset) in slices.iter().zip(&offsets) {
        lanes.push(key, *offset, &mut gathered);
    }
    lanes.finish(&mut gathered);
    assert_eq!(gathered, out);
    for (key, (hash, offset)) in keys.iter().zip(&out) {
        assert_eq!(*hash, hash_key(key), "key of {} bytes", key.len());
        assert_eq!(slices[*offset as usize], key.as_slice());
    }
}

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
    assert_eq!(map.put(b"another", 5), Err(OffsetMapError::Full { entries: 90, max_entries: 90 }));
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
fn the_table_grows_with_the_keys_up_to_the_budget_and_shrinks_on_clear() {
    let budget = 24 * (INITIAL_SLOTS * 4 + 10);
    let mut map = OffsetMap::new(budget, 0.9).unwrap();
    assert_eq!(map.memory_bytes(), 24 * INITIAL_SLOTS, "starts small");
    assert_eq!(map.max_entries(), ((INITIAL_SLOTS * 4 + 10) as f64 * 0.9) as usize);
    let n = map.max_entries() as i64;
    for i in 0..n {
        map.put(format!("key-{i}").as_bytes(), i).unwrap();
    }
    assert_eq!(map.table_slots(), map.slots(), "grew to the whole budget");
    assert_eq!(map.remaining(), 0);
    assert!(matches!(map.put(b"one-more", 0), Err(OffsetMapError::Full { .. })));
    for i in (0..n).step_by(997) {
        assert_eq!(map.get(format!("key-{i}").as_bytes()), Some(i), "survived the rehashes");
    }
    assert!((map.utilization() - 0.9).abs() < 1e-3, "against the budget");
    map.clear();
    assert_eq!(map.memory_bytes(), 24 * INITIAL_SLOTS, "given back");
    assert_eq!(map.get(b"key-0"), None);
    // A few keys keep the table small.
    for i in 0..1000i64 {
        map.put(format!("k{i}").as_bytes(), i).unwrap();
    }
    assert_eq!(map.table_slots(), INITIAL_SLOTS);
}

#[test]
fn each_growth_adds_half_the_table_so_the_rehash_peak_stays_small() {
    let mut map = OffsetMap::new(24 << 24, 0.9).unwrap();
    let mut sizes = vec![map.table_slots()];
    for i in 0..200_000i64 {
        map.put(&i.to_be_bytes(), i).unwrap();
        if map.table_slots() != *sizes.last().unwrap() {
            sizes.push(map.table_slots());
        }
    }
    for w in sizes.windows(2) {
        assert_eq!(w[1], w[0] + w[0] / 2, "grew by half: {sizes:?}");
    }
    // 200,000 keys at 0.9 need 222,223 slots: the table is the first
    // step past that, not a power of two above it.
    assert!(map.table_slots() < 222_223 * 3 / 2, "{sizes:?}");
    for i in (0..200_000i64).step_by(101) {
        assert_eq!(map.get(&i.to_be_bytes()), Some(i));
    }
}

#[test]
fn a_load_factor_of_one_fills_the_whole_budget() {
    let mut map = OffsetMap::new(24 * (INITIAL_SLOTS * 2), 1.0).unwrap();
    for i in 0..(INITIAL_SLOTS * 2) as i64 {
        map.put(format!("key-{i}").as_bytes(), i).unwrap();
    }
    assert_eq!(map.remaining(), 0);
    assert_eq!(map.get(b"key-5"), Some(5));
    assert_eq!(map.get(b"missing"), None, "a full table ends its probe");
    assert!(matches!(map.put(b"missing", 1), Err(OffsetMapError::Full { .. })));
    map.put(b"key-5", 50).unwrap();
    assert_eq!(map.get(b"key-5"), Some(50), "an existing key is still updated");
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
fn a_versioned_map_keeps_the_highest_version_and_decides_the_clean_region() {
    let budget = VERSIONED_BYTES_PER_ENTRY * INITIAL_SLOTS * 2;
    let mut map = OffsetMap::new(budget, 0.9).unwrap();
    let offset_keys = map.max_entries();
    map.set_versioned(true).unwrap();
    assert!(map.is_versioned());
    assert_eq!(map.max_entries(), (INITIAL_SLOTS as f64 * 2.0 * 0.9) as usize);
    assert!(map.max_entries() < offset_keys, "32-byte entries: fewer keys");
    let k = hash_key(b"k");
    map.put_versioned(&k, 10, 5).unwrap();
    map.put_versioned(&k, 11, 3).unwrap();
    assert_eq!(map.get_versioned(&k), Some((10, 5)), "a lower version loses");
    map.put_versioned(&k, 12, 5).unwrap();
    assert_eq!(map.get_versioned(&k), Some((12, 5)), "a tie goes to the later copy");
    assert!(!map.is_newest(&k, 10) && !map.is_newest(&k, 11) && map.is_newest(&k, 12));
    // Copies below the mapped range.
    assert_eq!(map.resolve_clean(&hash_key(b"other"), 1, 0), CleanVerdict::Keep);
    assert_eq!(map.resolve_clean(&k, 2, 5), CleanVerdict::Drop, "a tie: the mapped copy");
    assert_eq!(map.resolve_clean(&k, 3, 6), CleanVerdict::KeepDisplacing(12));
    assert_eq!(map.get_versioned(&k), Some((3, 6)));
    assert!(!map.is_newest(&k, 12), "the displaced copy is no longer the winner");
    assert_eq!(map.resolve_clean(&k, 3, 6), CleanVerdict::Keep, "asked again");
    assert_eq!(map.resolve_clean(&k, 1, 4), CleanVerdict::Drop);
    // Versions survive the table's growth.
    let n = 40_000i64;
    for i in 0..n {
        map.put_versioned(&hash_key(&i.to_be_bytes()), i, -i).unwrap();
    }
    assert!(map.table_slots() > INITIAL_SLOTS);
    for i in (0..n).step_by(37) {
        assert_eq!(map.get_versioned(&hash_key(&i.to_be_bytes())), Some((i, -i)));
    }
    let mut offsets = 0;
    map.for_each_offset(|_| offsets += 1);
    assert_eq!(offsets, n + 1);
    map.set_versioned(false).unwrap();
    assert!(map.is_empty() && !map.is_versioned());
    // A budget of one 24-byte entry cannot hold a versioned one.
    let mut tiny = OffsetMap::new(30, 1.0).unwrap();
    let too_small = OffsetMapError::BudgetTooSmall { budget: 30, entry_bytes: 32 };
    assert_eq!(tiny.set_versioned(true), Err(too_small));
    assert!(!tiny.is_versioned());
    assert_eq!(map.max_entries(), offset_keys);
    map.put_versioned(&k, 7, 100).unwrap();
    map.put_versioned(&k, 8, 1).unwrap();
    assert_eq!(map.get_versioned(&k), Some((8, 0)), "without versions the later copy wins");
    assert_eq!(map.resolve_clean(&k, 2, 9), CleanVerdict::Drop);
}

#[test]
fn zero_hash_is_never_stored() {
    assert_ne!(hash_key(b""), [0u8; 16]);
    assert_eq!(hash_key(b"abc"), hash_key(b"abc"));
    assert_ne!(hash_key(b"abc"), hash_key(b"abd"));
}

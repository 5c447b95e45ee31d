//! Any bytes as a segment's `.index` and `.timeindex` files, opened as a
//! segment opens them: opening, the sanity check, lookups and truncation
//! never panic, and a file larger than the configured index size is refused
//! before it is read. For an index that passes its sanity check, every
//! lookup answers what a linear scan of the entries answers, truncation
//! keeps exactly the entries below the offset (in memory and in the file),
//! and the last time-index entry read from the file's bytes alone (how a
//! tiered read learns a store segment's newest timestamp) is the opened
//! index's last entry.
//!
//! Input: base offset (8 bytes, made non-negative), log size / next offset
//! (8), a target offset or timestamp (8), the configured index size (4,
//! bounded), the `.index` bytes (a part), then the `.timeindex` bytes.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sediment::log::index::{OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset};

fn offsets(dir: &std::path::Path, base: i64, bytes: &[u8], max: usize, log_size: u64, target: i64) {
    let path = dir.join("00000000000000000000.index");
    std::fs::write(&path, bytes).expect("write");
    let Ok(mut idx) = OffsetIndex::open(&path, base, max, false) else {
        return;
    };
    assert_eq!(idx.entries(), bytes.len() / OffsetIndex::ENTRY_SIZE);
    if idx.sanity_check(log_size).is_err() {
        return;
    }
    let all: Vec<OffsetPosition> = (0..idx.entries()).map(|i| idx.entry(i)).collect();
    let expected = |t: i64| {
        all.iter()
            .rev()
            .find(|e| e.offset <= t)
            .copied()
            .unwrap_or(OffsetPosition { offset: base, position: 0 })
    };
    for t in [target, base, i64::MIN, i64::MAX, target.wrapping_add(1)] {
        assert_eq!(idx.lookup(t), expected(t), "lookup({t})");
    }
    let pos = target as u32;
    let floor = all.iter().rev().find(|e| e.position <= pos).map(|e| e.position);
    assert_eq!(idx.floor_position(pos), floor);
    assert_eq!(idx.last_offset(), all.last().map_or(base, |e| e.offset));
    idx.truncate_to(target).expect("truncate");
    let kept: Vec<OffsetPosition> = all.iter().copied().filter(|e| e.offset < target).collect();
    assert_eq!((0..idx.entries()).map(|i| idx.entry(i)).collect::<Vec<_>>(), kept);
    let len = std::fs::metadata(&path).expect("stat").len();
    assert!(len <= (kept.len() * OffsetIndex::ENTRY_SIZE) as u64, "{len} bytes after truncation");
}

fn times(
    dir: &std::path::Path,
    base: i64,
    bytes: &[u8],
    max: usize,
    next_offset: i64,
    target: i64,
) {
    let path = dir.join("00000000000000000000.timeindex");
    std::fs::write(&path, bytes).expect("write");
    let Ok(mut idx) = TimeIndex::open(&path, base, max, false) else {
        return;
    };
    assert_eq!(idx.entries(), bytes.len() / TimeIndex::ENTRY_SIZE);
    assert_eq!(TimeIndex::last_entry_of(bytes, base), idx.last_entry());
    if idx.sanity_check(next_offset).is_err() {
        return;
    }
    let all: Vec<TimestampOffset> = (0..idx.entries()).map(|i| idx.entry(i)).collect();
    let expected = |t: i64| {
        all.iter()
            .rev()
            .find(|e| e.timestamp <= t)
            .copied()
            .unwrap_or(TimestampOffset { timestamp: -1, offset: base })
    };
    for t in [target, i64::MIN, i64::MAX, target.wrapping_sub(1)] {
        assert_eq!(idx.lookup(t), expected(t), "lookup({t})");
    }
    idx.truncate_to(target).expect("truncate");
    let kept: Vec<TimestampOffset> =
        all.iter().copied().take_while(|e| e.offset < target).collect();
    assert_eq!((0..idx.entries()).map(|i| idx.entry(i)).collect::<Vec<_>>(), kept);
}

fuzz_target!(|data: &[u8]| {
    let mut f = common::Fields(data);
    let base = f.i64() & i64::MAX;
    let size_or_next = f.i64();
    let target = f.i64();
    // Up to 1 MiB, as a topic's segment.index.bytes may be far larger: the
    // refusal of an oversized file is exercised either way.
    let max = (f.u32() as usize) % (1 << 20);
    let index = f.part(1 << 16);
    let time_index = f.rest();
    let dir = common::scratch_dir();
    offsets(dir, base, index, max, size_or_next as u64, target);
    times(dir, base, time_index, max, size_or_next, target);
});

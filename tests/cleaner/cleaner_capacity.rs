//! Capacity of one pass: with a dedupe buffer of B bytes and one thread the
//! map holds floor(B / 24 × 0.9) keys (±1 for the flooring of the slot count),
//! one pass maps exactly that many new keys, stops at a batch boundary, and the
//! stats say so. A single segment holding more keys than the map still makes
//! progress, pass by pass, until it is fully cleaned.

use parking_lot::RwLock;

use crate::common::{append, clean_once, cleaner, open_log, read_all};
use sediment::clock::MockClock;
use sediment::log::compression::Compression;

const NOW: i64 = 1_700_000_000_000;

#[test]
fn one_pass_maps_budget_over_24_times_load_factor_keys() {
    for budget in [24 * 1000, 24 * 1000 + 23, 10_007, 65_536] {
        let dir = tempfile::tempdir().unwrap();
        let clock = MockClock::new(NOW);
        let mut log = open_log(dir.path(), "cap", &[("cleanup.policy", "compact")], clock.clone());
        // One segment, one record per batch, every key distinct and then all of them again.
        let keys = 3000;
        for round in 0..2 {
            for k in 0..keys {
                let key = format!("key-{k}");
                append(
                    &mut log,
                    Compression::None,
                    &[(NOW, Some(key.as_bytes()), Some(format!("v{round}").as_bytes()))],
                );
            }
        }
        log.roll_if_not_empty().unwrap();
        let log = RwLock::new(log);
        let mut c = cleaner(budget, clock.clone());
        let formula = (budget as f64 / 24.0 * 0.9).floor() as i64;
        let result = clean_once(&mut c, &log, 0, NOW);
        let mapped = result.stats.map_entries as i64;
        assert!(
            (mapped - formula).abs() <= 1,
            "budget {budget}: mapped {mapped}, formula {formula}"
        );
        assert_eq!(mapped as u64, result.stats.map_max_entries, "the pass filled the map");
        assert_eq!(
            result.end_offset, mapped,
            "one-record batches: the pass ends right after the last key that fit"
        );
        assert!(
            (result.stats.buffer_utilization - mapped as f64 / (budget / 24) as f64).abs() < 1e-12
        );
        assert!(result
            .stats
            .summary(0, "cap-0", 0, result.end_offset)
            .contains(&format!("({mapped} of {mapped} keys)")));

        // The oversized segment makes progress until everything is mapped.
        let mut checkpoint = result.end_offset;
        let mut passes = 1;
        while checkpoint < 2 * keys {
            let r = clean_once(&mut c, &log, checkpoint, NOW);
            assert!(r.end_offset > checkpoint, "pass {passes} made no progress");
            checkpoint = r.end_offset;
            passes += 1;
        }
        let expected_passes = (2 * keys + mapped - 1) / mapped;
        assert_eq!(passes, expected_passes, "budget {budget}");
        let records = read_all(&log.read(), 0, 1 << 20);
        assert_eq!(records.len(), keys as usize, "one record per key");
        assert!(records.iter().all(|r| r.value.as_deref() == Some(&b"v1"[..]) && r.offset >= keys));
    }
}

#[test]
fn a_pass_stops_before_a_batch_that_would_overfill_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let mut log = open_log(dir.path(), "cap", &[("cleanup.policy", "compact")], clock.clone());
    // Batches of 7 distinct keys; the map holds floor(100 × 0.9) = 90 keys: 12 batches (84 keys) fit, the 13th does not.
    for b in 0..30 {
        let keys: Vec<String> = (0..7).map(|j| format!("key-{b}-{j}")).collect();
        let records: Vec<_> =
            keys.iter().map(|k| (NOW, Some(k.as_bytes()), Some(&b"v"[..]))).collect();
        append(&mut log, Compression::Gzip, &records);
    }
    log.roll_if_not_empty().unwrap();
    let log = RwLock::new(log);
    let mut c = cleaner(24 * 100, clock.clone());
    let r = clean_once(&mut c, &log, 0, NOW);
    assert_eq!(r.stats.map_max_entries, 90);
    assert_eq!(r.stats.map_entries, 84);
    assert_eq!(r.end_offset, 84, "the mapped range ends at a batch boundary");
    // A batch with more keys than the whole map cannot be mapped: an error that says what to raise.
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), "cap", &[("cleanup.policy", "compact")], clock.clone());
    let keys: Vec<String> = (0..20).map(|j| format!("key-{j}")).collect();
    let records: Vec<_> = keys.iter().map(|k| (NOW, Some(k.as_bytes()), Some(&b"v"[..]))).collect();
    append(&mut log, Compression::None, &records);
    log.roll_if_not_empty().unwrap();
    let log = RwLock::new(log);
    let mut small = cleaner(24 * 10, clock.clone());
    let to_clean = sediment::cleaner::LogToClean::new(&log.read(), 0, 20);
    let err = small
        .clean(&log, &to_clean, NOW, &sediment::cleaner::CancellationToken::new())
        .unwrap_err();
    assert!(err.to_string().contains("log.cleaner.dedupe.buffer.size"), "{err}");
}

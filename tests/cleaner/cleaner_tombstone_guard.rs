//! The resurrection guard in the cleaner: a tombstone past its delete
//! horizon stays while a consumer group has committed at or below it, goes
//! once every group is past it, and goes at the cap when a group never
//! moves; every tombstone kept with a horizon is reported for the at-risk
//! counts.

use parking_lot::RwLock;

use crate::common::{append, cleaner, open_log, read_all};
use sediment::cleaner::tombstone_guard::TombstoneGuard;
use sediment::cleaner::{cleanable_offsets, CancellationToken, CleanResult, Cleaner, LogToClean};
use sediment::clock::MockClock;
use sediment::log::compression::Compression;
use sediment::log::Log;

const NOW: i64 = 1_700_000_000_000;
const RETENTION: i64 = 1_000;
const CAP: i64 = 10_000;

/// A value for k at 0, a tombstone for k at 1, a value for other at 2; all closed.
fn log_with_tombstone(dir: &std::path::Path) -> RwLock<Log> {
    let config = [("cleanup.policy", "compact"), ("delete.retention.ms", "1000")];
    let mut log = open_log(dir, "g", &config, MockClock::new(NOW));
    for (i, (k, v)) in [("k", Some("v")), ("k", None), ("other", Some("x"))].iter().enumerate() {
        append(
            &mut log,
            Compression::None,
            &[(NOW + i as i64, Some(k.as_bytes()), v.map(str::as_bytes))],
        );
    }
    log.roll_if_not_empty().unwrap();
    RwLock::new(log)
}

fn clean(
    c: &mut Cleaner,
    log: &RwLock<Log>,
    now: i64,
    guard: Option<TombstoneGuard>,
) -> CleanResult {
    let mut to_clean = {
        let log = log.read();
        let (dirty, uncleanable) = cleanable_offsets(&log, Some(0), None, now);
        LogToClean::new(&log, dirty, uncleanable)
    };
    to_clean.tombstone_guard = guard;
    c.clean(log, &to_clean, now, &CancellationToken::new()).expect("clean")
}

fn offsets(log: &RwLock<Log>) -> Vec<i64> {
    read_all(&log.read(), 0, 1 << 20).iter().map(|r| r.offset).collect()
}

fn guard(min_committed: i64) -> Option<TombstoneGuard> {
    Some(TombstoneGuard { min_committed, max_wait_ms: CAP })
}

#[test]
fn a_guarded_tombstone_waits_for_the_slowest_group_and_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_with_tombstone(dir.path());
    let mut c = cleaner(1 << 20, MockClock::new(NOW));
    // First clean: the old value goes, the tombstone is stamped and reported.
    let first = clean(&mut c, &log, NOW, guard(0));
    assert_eq!(offsets(&log), vec![1, 2]);
    let kept = first.kept_tombstones.expect("recopied");
    assert_eq!(kept.len(), 1);
    let risk = kept.at_risk(&[("slow".to_string(), 0)], 0);
    assert_eq!((risk[0].tombstones, risk[0].earliest_horizon_ms), (1, NOW + RETENTION));

    // Past the horizon, a group at offset 1 has not read it: it stays, and a
    // clean is due when the wait ends.
    let later = NOW + RETENTION + 1;
    let r = clean(&mut c, &log, later, guard(1));
    assert_eq!(offsets(&log), vec![1, 2], "kept for the group at offset 1");
    assert_eq!(r.stats.tombstones_guarded, 1);
    assert_eq!(r.stats.latest_delete_horizon_ms, Some(NOW + RETENTION + CAP));

    // Every group past it: it goes.
    let r = clean(&mut c, &log, later, guard(2));
    assert_eq!(offsets(&log), vec![2]);
    assert_eq!(r.stats.tombstones_removed, 1);
}

#[test]
fn the_cap_ends_the_wait_and_no_guard_is_kafkas_behaviour() {
    for (guard_at, now, kept) in [
        (guard(0), NOW + RETENTION + CAP, false),
        (guard(0), NOW + RETENTION + CAP - 1, true),
        (None, NOW + RETENTION + 1, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let log = log_with_tombstone(dir.path());
        let mut c = cleaner(1 << 20, MockClock::new(NOW));
        clean(&mut c, &log, NOW, guard_at);
        clean(&mut c, &log, now, guard_at);
        assert_eq!(offsets(&log).contains(&1), kept, "guard {guard_at:?} at {now}");
    }
}

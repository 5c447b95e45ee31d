//! The per-segment garbage threshold
//! (`sediment.compaction.min.segment.garbage.ratio`) against an oracle.
//!
//! The property: random workloads (the strategy model's: several producers
//! and codecs, out-of-order versions, tombstones that win and lose, rolls,
//! cleans and clock advances) under `offset` and `header`, with a tiny and
//! a large map, ratios 0.3, 0.6 and 1, and `max.compaction.lag.ms` unset or
//! 2.5 s. After every clean:
//! * every record in the log is one that was written, unchanged;
//! * every key's winner is there, unless it is a tombstone (which may go
//!   after its horizon);
//! * under `offset`, a reader from offset 0 ends with exactly what a
//!   reader of everything ever written ends with: no value lost, no
//!   deleted key back, although segments keep superseded copies.
//!
//! At the end, once everything is cleaned, a reader from offset 0 ends
//! with the oracle's winner per key under either strategy; and with the
//! lag set, once it has passed, no key has two copies below the checkpoint
//! and no list remains: the lag bounds how long a kept copy survives.
//!
//! Targeted tests: the changelog shape (5% of the keys updated across
//! every segment) writes only the dirty range and lists the rest; a
//! tombstone over a listed copy leaves only with it; an unreadable list
//! sends the checkpoint back to the log start; the key audit gives a
//! listed copy its list's deadline.

use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::cleaner_model::CODECS;
use super::cleaner_strategy_model::{
    append_batch, config, final_view, run_txn, txn_op, winners, workload, Op, Ranking, TxnOp,
    Written, LARGE_BUDGET, RETENTION_MS, TINY_BUDGET,
};
use crate::common::{clean_once, cleaner, open_log, read_all, Rec};
use proptest::prelude::*;
use sediment::clock::{Clock, MockClock};
use sediment::log::Log;

/// The same op with every tombstone an empty value instead.
fn without_tombstones(op: TxnOp) -> TxnOp {
    let fill = |mut records: Vec<super::cleaner_strategy_model::VRecord>| {
        records.iter_mut().for_each(|r| r.value_len = Some(r.value_len.unwrap_or(0)));
        records
    };
    match op {
        TxnOp::Data { p, records } => TxnOp::Data { p, records: fill(records) },
        TxnOp::Plain { records } => TxnOp::Plain { records: fill(records) },
        other => other,
    }
}

const RATIO_KEY: &str = "sediment.compaction.min.segment.garbage.ratio";
const LAG_MS: i64 = 2_500;

fn threshold_config(
    ranking: Ranking,
    ratio: &'static str,
    lag: bool,
) -> Vec<(&'static str, &'static str)> {
    let mut pairs = config(ranking);
    pairs.push((RATIO_KEY, ratio));
    if lag {
        pairs.push(("max.compaction.lag.ms", "2500"));
    }
    pairs
}

/// The `.stale` lists in `dir` that name at least one copy.
fn lists_with_copies(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".stale"))
        .filter(|e| e.metadata().is_ok_and(|m| m.len() > 32))
        .count()
}

/// The checks after every clean (see the module doc).
fn check(log: &Log, written: &[Written], ranking: Ranking) -> Result<(), TestCaseError> {
    let actual = read_all(log, 0, 1 << 20);
    let by_offset: HashMap<i64, &Rec> = written.iter().map(|w| (w.rec.offset, &w.rec)).collect();
    for r in &actual {
        prop_assert_eq!(Some(&r), by_offset.get(&r.offset), "a record that was not written");
    }
    let present: std::collections::HashSet<i64> = actual.iter().map(|r| r.offset).collect();
    for (key, (_, offset)) in winners(written.iter()) {
        let tombstone = by_offset[&offset].value.is_none();
        prop_assert!(tombstone || present.contains(&offset), "winner of {:?} lost", key);
    }
    if ranking == Ranking::Offset {
        let all: Vec<Rec> = written.iter().map(|w| w.rec.clone()).collect();
        prop_assert_eq!(final_view(&actual), final_view(&all), "a reader from 0 differs");
    }
    Ok(())
}

fn run(
    ops: Vec<Op>,
    ranking: Ranking,
    budget: usize,
    (ratio, lag): (&'static str, bool),
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_700_000_000_000);
    let pairs = threshold_config(ranking, ratio, lag);
    let log = RwLock::new(open_log(dir.path(), "threshold", &pairs, clock.clone()));
    let mut cleaner = cleaner(budget, clock.clone());
    let mut written: Vec<Written> = Vec::new();
    let mut sequences: HashMap<i64, i32> = HashMap::new();
    let mut checkpoint = 0;
    let leo = |log: &RwLock<Log>| log.read().log_end_offset();
    let until_clean = std::iter::repeat_n(Op::Clean, ops.len() * 4 + 8);
    let tail = [Op::Roll].into_iter().chain(until_clean.clone());
    let tail = tail.chain([Op::Advance(RETENTION_MS.max(LAG_MS) + 1)]).chain(until_clean);
    for op in ops.into_iter().chain(tail) {
        match op {
            Op::Append { producer, codec, records } => {
                let producer = producer.map(|pid| {
                    let seq = sequences.entry(pid).or_insert(0);
                    let at = *seq;
                    *seq += records.len() as i32;
                    (pid, at)
                });
                let codec = CODECS[codec as usize % CODECS.len()];
                let now = clock.now_ms();
                let mut log = log.write();
                let batch =
                    append_batch(&mut log, ranking, (producer, codec, false), &records, now);
                written.extend(batch);
            }
            Op::Roll => log.write().roll_if_not_empty().unwrap(),
            Op::Clean => {
                let result = clean_once(&mut cleaner, &log, checkpoint, clock.now_ms());
                checkpoint = result.end_offset;
                check(&log.read(), &written, ranking)?;
                log.write().delete_expired_files(clock.now_ms(), false).unwrap();
            }
            Op::Advance(ms) => clock.advance(ms),
        }
    }
    prop_assert_eq!(checkpoint, leo(&log), "the cleans covered the log");
    // Under a version strategy a tombstone removed after its horizon is
    // forgotten, and a lower version written after it may then stand
    // (KIP-280's nature, as in the strategy model): keys that ever had a
    // tombstone are held to the checks after every clean only (their
    // winner is never lost; under `offset` a reader from 0 has matched a
    // reader of everything written all along).
    let actual = read_all(&log.read(), 0, 1 << 20);
    let deleted: std::collections::HashSet<&Option<Vec<u8>>> =
        written.iter().filter(|w| w.rec.value.is_none()).map(|w| &w.rec.key).collect();
    let best = winners(written.iter());
    let mut oracle = BTreeMap::new();
    for w in written.iter().filter(|w| !deleted.contains(&w.rec.key)) {
        let key = w.rec.key.clone().unwrap_or_default();
        if best[&key].1 == w.rec.offset {
            if let Some(v) = &w.rec.value {
                oracle.insert(key, v.clone());
            }
        }
    }
    let mut view = final_view(&actual);
    view.retain(|k, _| !deleted.contains(&Some(k.clone())));
    prop_assert_eq!(view, oracle);
    if lag {
        let mut seen = std::collections::HashSet::new();
        for r in actual.iter().filter(|r| r.offset < checkpoint) {
            prop_assert!(seen.insert(r.key.clone()), "two copies of {:?} past the lag", r.key);
        }
        prop_assert_eq!(lists_with_copies(dir.path()), 0, "lists past the lag");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn kept_segments_never_lose_a_winner_nor_bring_a_deleted_key_back(
        ops in workload(),
        budget in prop_oneof![Just(TINY_BUDGET), Just(LARGE_BUDGET)],
        ratio in prop_oneof![Just("0.3"), Just("0.6"), Just("1")],
        lag in any::<bool>(),
    ) {
        run(ops, Ranking::Offset, budget, (ratio, lag))?;
    }

    /// Transactions (committed, aborted, left open until the end) with
    /// segments kept, and markers' delete horizons a few ops long (no
    /// tombstones, so every committed winner stays): read_committed sees
    /// every stable winner after each clean, and, reopened, the log has no
    /// transaction left open (no marker went while its data stayed in a
    /// kept segment).
    #[test]
    fn kept_segments_with_transactions_keep_their_markers(
        ops in prop_oneof![Just(3u16), Just(12u16)]
            .prop_flat_map(|keys| prop::collection::vec(txn_op(keys), 20..70)),
        ranking in prop_oneof![Just(Ranking::Offset), Just(Ranking::Header)],
        budget in prop_oneof![Just(TINY_BUDGET), Just(LARGE_BUDGET)],
        ratio in prop_oneof![Just("0.3"), Just("1")],
    ) {
        let ops = ops.into_iter().map(without_tombstones).collect();
        run_txn(ops, ranking, budget, &[(RATIO_KEY, ratio), ("delete.retention.ms", "5")])?;
    }

    #[test]
    fn kept_segments_keep_the_highest_version_for_a_reader_from_the_start(
        ops in workload(),
        budget in prop_oneof![Just(TINY_BUDGET), Just(LARGE_BUDGET)],
        ratio in prop_oneof![Just("0.3"), Just("0.6"), Just("1")],
        lag in any::<bool>(),
    ) {
        run(ops, Ranking::Header, budget, (ratio, lag))?;
    }
}

/// Write `keys` keys (10 a batch) at `version`, every `every`th key only.
fn write_rows(log: &RwLock<Log>, keys: usize, every: usize, version: u8, now: i64) -> u64 {
    let before = log.read().size();
    let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..keys)
        .filter(|i| i % every == 0)
        .map(|i| (format!("row-{i:05}").into_bytes(), vec![b'a' + version; 60]))
        .collect();
    for chunk in rows.chunks(10) {
        let specs: Vec<_> = chunk.iter().map(|(k, v)| (now, Some(&k[..]), Some(&v[..]))).collect();
        let mut b = crate::common::batch(sediment::log::compression::Compression::None, &specs);
        log.write().append_as_leader(&mut b).unwrap();
    }
    log.write().roll_if_not_empty().unwrap();
    log.read().size() - before
}

/// The changelog shape at a small scale: 2,000 rows, then 5% of them
/// updated across every segment.
fn changelog(ratio: &'static str) -> (RwLock<Log>, tempfile::TempDir, Arc<MockClock>, i64) {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_700_000_000_000);
    let pairs = [("cleanup.policy", "compact"), ("segment.bytes", "16384"), (RATIO_KEY, ratio)];
    let log = RwLock::new(open_log(dir.path(), "changelog", &pairs, clock.clone()));
    write_rows(&log, 2_000, 1, 0, clock.now_ms());
    let mut cleaner = cleaner(LARGE_BUDGET, clock.clone());
    let first = clean_once(&mut cleaner, &log, 0, clock.now_ms());
    (log, dir, clock, first.end_offset)
}

#[test]
fn a_changelog_round_writes_what_changed_and_lists_the_rest() {
    let (log, dir, clock, checkpoint) = changelog("0.2");
    let changed = write_rows(&log, 2_000, 20, 1, clock.now_ms());
    let mut threshold = cleaner(LARGE_BUDGET, clock.clone());
    let round = clean_once(&mut threshold, &log, checkpoint, clock.now_ms());
    let s = &round.stats;
    assert_eq!(s.stale_copies_listed, 100, "{s:#?}");
    assert!(s.segments_kept_under_ratio >= 8, "{s:#?}");
    assert!(s.bytes_written <= 2 * changed, "wrote {} for {changed} changed", s.bytes_written);
    assert!(lists_with_copies(dir.path()) >= 8);
    let view = final_view(&read_all(&log.read(), 0, 1 << 20));
    assert_eq!(view.len(), 2_000);
    assert!(view.iter().all(|(k, v)| {
        let i: usize = String::from_utf8_lossy(&k[4..]).parse().unwrap();
        v[0] == if i % 20 == 0 { b'b' } else { b'a' }
    }));

    // Kafka's rule, the same round: the whole log is rewritten.
    let (log0, _dir0, clock0, checkpoint0) = changelog("0");
    let changed0 = write_rows(&log0, 2_000, 20, 1, clock0.now_ms());
    let mut cleaner0 = cleaner(LARGE_BUDGET, clock0.clone());
    let round0 = clean_once(&mut cleaner0, &log0, checkpoint0, clock0.now_ms());
    assert!(round0.stats.bytes_written > 10 * changed0, "{:#?}", round0.stats);
    assert_eq!(round0.stats.segments_kept_under_ratio, 0);
}

#[test]
fn an_unreadable_list_sends_the_checkpoint_back_to_the_log_start() {
    let (log, dir, clock, checkpoint) = changelog("0.2");
    write_rows(&log, 2_000, 20, 1, clock.now_ms());
    let mut cleaner = cleaner(LARGE_BUDGET, clock.clone());
    let checkpoint = clean_once(&mut cleaner, &log, checkpoint, clock.now_ms()).end_offset;
    let list = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "stale"))
        .expect("a list");
    let mut bytes = std::fs::read(&list).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&list, bytes).unwrap();
    write_rows(&log, 2_000, 50, 2, clock.now_ms());
    let reset = clean_once(&mut cleaner, &log, checkpoint, clock.now_ms());
    assert_eq!(reset.end_offset, 0, "the next clean maps from the log start");
    assert!(!list.exists(), "the unreadable list is removed");
    // From the start, with every other list honoured, one copy per row.
    let mut checkpoint = 0;
    while checkpoint < log.read().log_end_offset() {
        checkpoint = clean_once(&mut cleaner, &log, checkpoint, clock.now_ms()).end_offset;
    }
    let recs = read_all(&log.read(), 0, 1 << 20);
    let mut seen = std::collections::HashSet::new();
    assert!(recs.iter().all(|r| seen.insert(r.key.clone())), "a row twice after the reset");
    assert_eq!(final_view(&recs).len(), 2_000);
}

#[test]
fn a_crash_before_the_lists_are_written_finds_the_same_copies_again() {
    use sediment::cleaner::{CancellationToken, CrashPoint, LogToClean};
    let (log, dir, clock, checkpoint) = changelog("0.2");
    write_rows(&log, 2_000, 20, 1, clock.now_ms());
    let mut c = cleaner(LARGE_BUDGET, clock.clone());
    let to_clean = LogToClean::measure(&log.read(), Some(checkpoint), clock.now_ms());
    let point = CrashPoint::StaleListsUnwritten;
    {
        let _armed = sediment::failpoint::arm(point.failpoint(), &dir.path().display().to_string());
        let crashed = c.clean(&log, &to_clean, clock.now_ms(), &CancellationToken::new());
        assert!(
            matches!(crashed, Err(sediment::cleaner::CleanerError::InjectedCrash(p)) if p == point)
        );
    }
    assert_eq!(lists_with_copies(dir.path()), 0, "nothing listed before the crash point");
    // As after a restart: the log reopened, the checkpoint where it was.
    drop(log);
    let pairs = [("cleanup.policy", "compact"), ("segment.bytes", "16384"), (RATIO_KEY, "0.2")];
    let log = RwLock::new(open_log(dir.path(), "changelog", &pairs, clock.clone()));
    let again = clean_once(&mut c, &log, checkpoint, clock.now_ms());
    assert_eq!(again.stats.stale_copies_listed, 100, "the same copies found again");
    assert!(lists_with_copies(dir.path()) >= 8);
    let view = final_view(&read_all(&log.read(), 0, 1 << 20));
    assert_eq!(view.len(), 2_000);
    assert!(view.iter().all(|(k, v)| {
        let i: usize = String::from_utf8_lossy(&k[4..]).parse().unwrap();
        v[0] == if i % 20 == 0 { b'b' } else { b'a' }
    }));
}

#[test]
fn an_unreadable_list_holds_every_expired_tombstone() {
    let (log, dir, clock, checkpoint) = changelog("0.2");
    // row-00007 deleted (no round writes it again): its value is listed in a kept segment, the
    // tombstone gets its horizon (delete.retention.ms, a day by default).
    let key = b"row-00007".to_vec();
    let specs = [(clock.now_ms(), Some(&key[..]), None)];
    let mut b = crate::common::batch(sediment::log::compression::Compression::None, &specs);
    log.write().append_as_leader(&mut b).unwrap();
    write_rows(&log, 2_000, 40, 1, clock.now_ms());
    let mut c = cleaner(LARGE_BUDGET, clock.clone());
    let checkpoint = clean_once(&mut c, &log, checkpoint, clock.now_ms()).end_offset;
    assert!(lists_with_copies(dir.path()) >= 1);
    for list in std::fs::read_dir(dir.path()).unwrap().filter_map(|e| e.ok().map(|e| e.path())) {
        if list.extension().is_some_and(|e| e == "stale") {
            let mut bytes = std::fs::read(&list).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 0xff;
            std::fs::write(&list, bytes).unwrap();
        }
    }
    clock.advance(86_400_001);
    write_rows(&log, 2_000, 50, 2, clock.now_ms());
    let reset = clean_once(&mut c, &log, checkpoint, clock.now_ms());
    assert_eq!(reset.end_offset, 0);
    assert_eq!(reset.stats.tombstones_removed, 0, "held while copies may be listed");
    let mut checkpoint = 0;
    for _ in 0..4 {
        while checkpoint < log.read().log_end_offset() {
            checkpoint = clean_once(&mut c, &log, checkpoint, clock.now_ms()).end_offset;
        }
        let view = final_view(&read_all(&log.read(), 0, 1 << 20));
        assert!(!view.contains_key(&key), "the deleted row came back");
        clean_once(&mut c, &log, checkpoint, clock.now_ms());
    }
    assert_eq!(final_view(&read_all(&log.read(), 0, 1 << 20)).len(), 1_999);
}

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

use super::cleaner_model::CODECS;
use super::cleaner_strategy_model::{
    append_batch, config, final_view, winners, workload, Op, Ranking, Written, LARGE_BUDGET,
    RETENTION_MS, TINY_BUDGET,
};
use crate::common::{clean_once, cleaner, open_log, read_all, Rec};
use proptest::prelude::*;
use sediment::clock::{Clock, MockClock};
use sediment::log::Log;

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

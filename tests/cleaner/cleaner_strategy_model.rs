//! Property test of the compaction strategies (`sediment.compaction.strategy`,
//! KIP-280) against an oracle: each key keeps the copy with the greatest
//! (version, offset), the version being the record's timestamp or its `v`
//! header (decimal or big-endian; missing ranks lowest).
//!
//! Random workloads write versions out of order, repeat versions (ties go to
//! the higher offset), leave the header out, and write tombstones that win
//! and that lose, through several producers and codecs, with rolls, cleans
//! and clock advances, once with a tiny map (6 versioned keys: most cleans
//! cover part of the dirty range, and copies below the first dirty offset
//! meet later, lower versions) and once with a large one (the recopy drops
//! superseded batches unread and reads its answers from the newest bits,
//! which a winning older copy must clear). After every clean the log holds
//! exactly the oracle's records: everything at or past the clean's end, and
//! below it each key's winner, a tombstone only until its stamped horizon.
//! A reader from offset 0 therefore ends with the oracle's winner per key.
//!
//! A second property runs transactions (committed, aborted, left open)
//! under each strategy: a read_committed reader sees only committed data,
//! every key's winner among committed records, at most one copy of a key
//! below the checkpoint, and from offset 0 ends with the winner per key.

use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};

use super::cleaner_model::{read_committed, CODECS};
use crate::common::{all_batches, clean_once, cleaner, open_log, read_all, Rec};
use proptest::prelude::*;
use sediment::clock::{Clock, MockClock};
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;
use sediment::log::Log;

pub(super) const RETENTION_MS: i64 = 1000;
/// 7 slots of 32 bytes: 6 keys at load factor 0.9.
pub(super) const TINY_BUDGET: usize = 32 * 7;
/// Room beside the table (32 Ki slots of 32 bytes to start) for the newest
/// bits and the batch record.
pub(super) const LARGE_BUDGET: usize = 2 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ranking {
    /// Kafka's rule (the garbage threshold's tests): every version is 0.
    Offset,
    Timestamp,
    Header,
}

#[derive(Debug, Clone)]
pub(super) struct VRecord {
    key: u16,
    /// `None`: a tombstone.
    pub(super) value_len: Option<u8>,
    /// `None`: no `v` header (the timestamp strategy reads version 0 then).
    version: Option<i8>,
    /// How the header is written: decimal text, or big-endian bytes.
    binary: bool,
}

#[derive(Debug, Clone)]
pub(super) enum Op {
    Append { producer: Option<i64>, codec: u8, records: Vec<VRecord> },
    Roll,
    Clean,
    Advance(i64),
}

fn vrecord(key_space: u16) -> impl Strategy<Value = VRecord> {
    (
        0..key_space,
        prop::option::weighted(0.8, 0u8..12),
        prop::option::weighted(0.85, -3i8..8),
        any::<bool>(),
    )
        .prop_map(|(key, value_len, version, binary)| VRecord {
            key,
            value_len,
            version,
            binary,
        })
}

fn op(key_space: u16) -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (prop::option::of(1i64..4), 0u8..5, prop::collection::vec(vrecord(key_space), 1..5))
            .prop_map(|(producer, codec, records)| Op::Append { producer, codec, records }),
        1 => Just(Op::Roll),
        3 => Just(Op::Clean),
        2 => (0i64..1500).prop_map(Op::Advance),
    ]
}

pub(super) fn workload() -> impl Strategy<Value = Vec<Op>> {
    prop_oneof![Just(3u16), Just(12u16), Just(200u16)]
        .prop_flat_map(|keys| prop::collection::vec(op(keys), 20..80))
}

pub(super) fn config(ranking: Ranking) -> Vec<(&'static str, &'static str)> {
    let mut pairs = vec![
        ("cleanup.policy", "compact"),
        ("segment.bytes", "1100"),
        ("index.interval.bytes", "100"),
        ("delete.retention.ms", "1000"),
        ("file.delete.delay.ms", "0"),
    ];
    match ranking {
        Ranking::Offset => {}
        Ranking::Timestamp => pairs.push(("sediment.compaction.strategy", "timestamp")),
        Ranking::Header => pairs.extend([
            ("sediment.compaction.strategy", "header"),
            ("sediment.compaction.strategy.header", "v"),
        ]),
    }
    pairs
}

/// A record as written, with the version the oracle ranks it by.
#[derive(Debug, Clone)]
pub(super) struct Written {
    pub(super) rec: Rec,
    pub(super) version: i64,
}

/// Append `records` as one batch at `now`; the records and their versions.
pub(super) fn append_batch(
    log: &mut Log,
    ranking: Ranking,
    (producer, codec, transactional): (Option<(i64, i32)>, Compression, bool),
    records: &[VRecord],
    now: i64,
) -> Vec<Written> {
    let base_ts = now - 500;
    let mut b = BatchBuilder::new(codec, base_ts);
    if let Some((pid, seq)) = producer {
        b = b.producer(pid, 0, seq);
    }
    b.transactional = transactional;
    let mut specs = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let key = format!("key-{}", r.key).into_bytes();
        let value = r.value_len.map(|n| vec![b'a' + (i as u8 % 26); n as usize]);
        let v = r.version.map(i64::from);
        let ts = base_ts + v.unwrap_or(0) * 10;
        let header: Option<Vec<u8>> = v.map(|v| {
            if r.binary {
                (v as i16).to_be_bytes().to_vec()
            } else {
                v.to_string().into_bytes()
            }
        });
        // A decoy earlier occurrence: the last one counts.
        let decoy: &[u8] = b"99";
        let mut headers: Vec<(&[u8], Option<&[u8]>)> = Vec::new();
        if header.is_some() && i % 3 == 1 {
            headers.push((b"v", Some(decoy)));
        }
        if let Some(h) = &header {
            headers.push((b"v", Some(h)));
        }
        b.append_with_headers(ts, Some(&key), value.as_deref(), &headers);
        let version = match ranking {
            Ranking::Offset => 0,
            Ranking::Timestamp => ts,
            Ranking::Header => v.unwrap_or(i64::MIN),
        };
        specs.push((ts, key, value, version));
    }
    let info = log.append_as_leader(&mut b.build()).expect("append");
    specs
        .into_iter()
        .enumerate()
        .map(|(i, (timestamp, key, value, version))| Written {
            rec: Rec { offset: info.first_offset + i as i64, timestamp, key: Some(key), value },
            version,
        })
        .collect()
}

struct Model {
    records: Vec<Written>,
    horizons: HashMap<i64, i64>,
    sequences: HashMap<i64, i32>,
    checkpoint: i64,
}

/// The oracle's winner per key among `records` below `end`: the greatest
/// (version, offset).
pub(super) fn winners<'a>(
    records: impl Iterator<Item = &'a Written>,
) -> HashMap<Vec<u8>, (i64, i64)> {
    let mut best: HashMap<Vec<u8>, (i64, i64)> = HashMap::new();
    for w in records {
        let rank = (w.version, w.rec.offset);
        let slot = best.entry(w.rec.key.clone().unwrap_or_default()).or_insert(rank);
        *slot = (*slot).max(rank);
    }
    best
}

fn clean_and_check(
    log: &RwLock<Log>,
    model: &mut Model,
    cleaner: &mut sediment::cleaner::Cleaner,
    now: i64,
) -> Result<(), TestCaseError> {
    let result = clean_once(cleaner, log, model.checkpoint, now);
    let end = result.end_offset;
    prop_assert!(end >= model.checkpoint);
    let best = winners(model.records.iter().filter(|w| w.rec.offset < end));
    let horizons = &model.horizons;
    model.records.retain(|w| {
        let r = &w.rec;
        if r.offset >= end {
            return true;
        }
        let key = r.key.clone().unwrap_or_default();
        if best[&key].1 != r.offset {
            return false;
        }
        !(r.value.is_none() && horizons.get(&r.offset).is_some_and(|&h| h <= now))
    });
    let kept: std::collections::HashSet<i64> = model.records.iter().map(|w| w.rec.offset).collect();
    model.horizons.retain(|o, _| kept.contains(o));
    model.checkpoint = end;

    let log = log.read();
    let actual = read_all(&log, 0, 1 << 20);
    let expected: Vec<Rec> = model.records.iter().map(|w| w.rec.clone()).collect();
    prop_assert_eq!(&actual, &expected, "log differs from the oracle after cleaning to {}", end);
    for (h, recs) in &all_batches(&log) {
        for r in recs.iter().filter(|r| r.value.is_none()) {
            match (h.delete_horizon_ms(), model.horizons.get(&r.offset)) {
                (Some(hz), None) => {
                    prop_assert_eq!(hz, now + RETENTION_MS);
                    model.horizons.insert(r.offset, hz);
                }
                (Some(hz), Some(&known)) => prop_assert_eq!(hz, known),
                (None, known) => prop_assert!(known.is_none() && r.offset >= end),
            }
        }
    }
    Ok(())
}

/// What a consumer reading `recs` from the start ends with: each key's
/// last value (a tombstone deletes it).
pub(super) fn final_view(recs: &[Rec]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut view = BTreeMap::new();
    for r in recs {
        let key = r.key.clone().unwrap_or_default();
        match &r.value {
            Some(v) => view.insert(key, v.clone()),
            None => view.remove(&key),
        };
    }
    view
}

fn run(ops: Vec<Op>, ranking: Ranking, budget: usize) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_700_000_000_000);
    let log = RwLock::new(open_log(dir.path(), "strategy", &config(ranking), clock.clone()));
    let mut model = Model {
        records: Vec::new(),
        horizons: HashMap::new(),
        sequences: HashMap::new(),
        checkpoint: 0,
    };
    let mut cleaner = cleaner(budget, clock.clone());
    // Then clean until every record is below the checkpoint (a tiny map
    // covers a few keys a clean), let the horizons pass, and clean again.
    let leo = |log: &RwLock<Log>| log.read().log_end_offset();
    let rounds = ops.len() * 4 + 8;
    let until_clean = std::iter::repeat_n(Op::Clean, rounds);
    let tail = [Op::Roll].into_iter().chain(until_clean.clone());
    let tail = tail.chain([Op::Advance(RETENTION_MS)]).chain(until_clean);
    for op in ops.into_iter().chain(tail) {
        if matches!(op, Op::Clean) && model.checkpoint == leo(&log) && model.checkpoint > 0 {
            // Nothing left to map: one clean still removes expired tombstones.
            clean_and_check(&log, &mut model, &mut cleaner, clock.now_ms())?;
            continue;
        }
        match op {
            Op::Append { producer, codec, records } => {
                let producer = producer.map(|pid| {
                    let seq = model.sequences.entry(pid).or_insert(0);
                    let at = *seq;
                    *seq += records.len() as i32;
                    (pid, at)
                });
                let codec = CODECS[codec as usize % CODECS.len()];
                let written = append_batch(
                    &mut log.write(),
                    ranking,
                    (producer, codec, false),
                    &records,
                    clock.now_ms(),
                );
                model.records.extend(written);
            }
            Op::Roll => log.write().roll_if_not_empty().unwrap(),
            Op::Clean => {
                clean_and_check(&log, &mut model, &mut cleaner, clock.now_ms())?;
                log.write().delete_expired_files(clock.now_ms(), false).unwrap();
            }
            Op::Advance(ms) => clock.advance(ms),
        }
    }
    // Everything is cleaned now: a reader from offset 0 sees each key's
    // winner among what the log still holds, and nothing else.
    prop_assert_eq!(model.checkpoint, leo(&log), "the cleans covered the log");
    let best = winners(model.records.iter());
    let mut oracle = BTreeMap::new();
    for w in &model.records {
        let key = w.rec.key.clone().unwrap_or_default();
        if best[&key].1 == w.rec.offset {
            if let Some(v) = &w.rec.value {
                oracle.insert(key, v.clone());
            }
        }
    }
    prop_assert_eq!(final_view(&read_all(&log.read(), 0, 1 << 20)), oracle);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn cleaned_log_keeps_the_highest_header_version_per_key(
        ops in workload(),
        budget in prop_oneof![Just(TINY_BUDGET), Just(LARGE_BUDGET)],
    ) {
        run(ops, Ranking::Header, budget)?;
    }

    #[test]
    fn cleaned_log_keeps_the_latest_timestamp_per_key(
        ops in workload(),
        budget in prop_oneof![Just(TINY_BUDGET), Just(LARGE_BUDGET)],
    ) {
        run(ops, Ranking::Timestamp, budget)?;
    }
}

/// A lower version written after a higher one loses, in the same clean and
/// across cleans (the winner below the first dirty offset), and a losing
/// tombstone deletes nothing.
#[test]
fn an_older_version_written_later_loses_and_a_losing_tombstone_is_dropped() {
    let rec = |key: u16, version: i8, value_len: Option<u8>| VRecord {
        key,
        value_len,
        version: Some(version),
        binary: version % 2 == 0,
    };
    let batch = |records: Vec<VRecord>| Op::Append { producer: None, codec: 0, records };
    let ops = vec![
        batch(vec![rec(1, 5, Some(3)), rec(2, 2, Some(3))]),
        batch(vec![rec(1, 3, Some(4)), rec(2, 4, Some(4))]),
        Op::Roll,
        Op::Clean,
        // Below the first dirty offset now: key-1 v5 and key-2 v4.
        batch(vec![rec(1, 4, None), rec(2, 1, Some(5)), rec(3, 1, Some(1))]),
        batch(vec![rec(3, 0, None)]),
        Op::Roll,
        Op::Clean,
    ];
    for budget in [TINY_BUDGET, LARGE_BUDGET] {
        run(ops.clone(), Ranking::Header, budget).unwrap();
    }
    // And the survivors are the ones named above.
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_700_000_000_000);
    let log = RwLock::new(open_log(dir.path(), "s", &config(Ranking::Header), clock.clone()));
    let mut cleaner = cleaner(LARGE_BUDGET, clock.clone());
    let mut checkpoint = 0;
    let mut won = Vec::new();
    for op in ops {
        match op {
            Op::Append { records, .. } => {
                let now = clock.now_ms();
                append_batch(
                    &mut log.write(),
                    Ranking::Header,
                    (None, Compression::None, false),
                    &records,
                    now,
                );
            }
            Op::Roll => log.write().roll_if_not_empty().unwrap(),
            Op::Clean => {
                let result = clean_once(&mut cleaner, &log, checkpoint, clock.now_ms());
                checkpoint = result.end_offset;
                won.push(result.stats.clean_copies_won);
            }
            Op::Advance(_) => unreachable!(),
        }
    }
    let left: Vec<(i64, Option<usize>)> = read_all(&log.read(), 0, 1 << 20)
        .iter()
        .map(|r| (r.offset, r.value.as_ref().map(Vec::len)))
        .collect();
    // key-1 v5 (offset 0), key-2 v4 (offset 3), key-3 v1 (offset 6).
    assert_eq!(left, [(0, Some(3)), (3, Some(4)), (6, Some(1))]);
    assert_eq!(won, [0, 2], "key-1 and key-2's older copies won the second clean");
}

/// A copy below the log start (DeleteRecords moved it into a segment's
/// middle) is invisible: however high its version, it never displaces the
/// visible winner.
#[test]
fn a_copy_below_the_log_start_never_outranks_a_visible_one() {
    let rec = |key: u16, version: i8| VRecord {
        key,
        value_len: Some(4),
        version: Some(version),
        binary: false,
    };
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_700_000_000_000);
    let log = RwLock::new(open_log(dir.path(), "s", &config(Ranking::Header), clock.clone()));
    let mut cleaner = cleaner(LARGE_BUDGET, clock.clone());
    let none = (None, Compression::None, false);
    let now = clock.now_ms();
    // key-1 version 9 at offset 0, then filler in the same segment.
    append_batch(&mut log.write(), Ranking::Header, none, &[rec(1, 9), rec(2, 1)], now);
    log.write().roll_if_not_empty().unwrap();
    let checkpoint = clean_once(&mut cleaner, &log, 0, now).end_offset;
    assert_eq!(checkpoint, 2);
    log.write().maybe_increment_log_start_offset(1).unwrap();
    // A later, lower version of key-1: the only visible copy.
    append_batch(&mut log.write(), Ranking::Header, none, &[rec(1, 5)], now);
    log.write().roll_if_not_empty().unwrap();
    let result = clean_once(&mut cleaner, &log, checkpoint, now);
    assert_eq!(result.stats.clean_copies_won, 0);
    let visible: Vec<i64> = read_all(&log.read(), 1, 1 << 20).iter().map(|r| r.offset).collect();
    assert_eq!(visible, [1, 2], "key-1's visible copy at 2 stays");
}

// ---- Transactions under each strategy ----

#[derive(Debug, Clone)]
pub(super) enum TxnOp {
    Data { p: u8, records: Vec<VRecord> },
    End { p: u8, commit: bool },
    Plain { records: Vec<VRecord> },
    Roll,
    Clean,
}

pub(super) fn txn_op(key_space: u16) -> impl Strategy<Value = TxnOp> {
    let records = move || prop::collection::vec(vrecord(key_space), 1..4);
    prop_oneof![
        6 => (0u8..3, records()).prop_map(|(p, records)| TxnOp::Data { p, records }),
        3 => (0u8..3, prop::bool::weighted(0.6)).prop_map(|(p, commit)| TxnOp::End { p, commit }),
        4 => records().prop_map(|records| TxnOp::Plain { records }),
        1 => Just(TxnOp::Roll),
        3 => Just(TxnOp::Clean),
    ]
}

#[derive(Default)]
struct TxnModel {
    /// Every record written, by offset, with its producer when transactional.
    written: BTreeMap<i64, (Written, Option<i64>)>,
    /// Offsets of each producer's records in its open transaction.
    open: HashMap<i64, Vec<i64>>,
    aborted: std::collections::HashSet<i64>,
    uncommitted: std::collections::HashSet<i64>,
    sequences: HashMap<i64, i32>,
    checkpoint: i64,
}

impl TxnModel {
    fn stable(&self, offset: i64) -> bool {
        !self.aborted.contains(&offset) && !self.uncommitted.contains(&offset)
    }
}

fn txn_check(
    log: &RwLock<Log>,
    m: &mut TxnModel,
    cleaner: &mut sediment::cleaner::Cleaner,
    (now, one_copy): (i64, bool),
) -> Result<(), TestCaseError> {
    use sediment::cleaner::{CancellationToken, LogToClean};
    let to_clean = LogToClean::measure(&log.read(), Some(m.checkpoint), now);
    let result = cleaner.clean(log, &to_clean, now, &CancellationToken::new()).expect("clean");
    m.checkpoint = result.end_offset;
    let l = log.read();
    let lso = l.last_stable_offset();
    let visible = read_committed(&l);
    for r in &visible {
        let Some((w, _)) = m.written.get(&r.offset) else {
            return Err(TestCaseError::fail(format!("unknown record at {}", r.offset)));
        };
        prop_assert_eq!(r, &w.rec, "a record changed");
        prop_assert!(m.stable(r.offset), "an uncommitted record at {} is visible", r.offset);
    }
    let visible_at: std::collections::HashSet<i64> = visible.iter().map(|r| r.offset).collect();
    let stable =
        m.written.values().map(|(w, _)| w).filter(|w| w.rec.offset < lso && m.stable(w.rec.offset));
    for (key, (_, offset)) in winners(stable) {
        prop_assert!(
            visible_at.contains(&offset),
            "the winner of {:?} at {} is not visible",
            String::from_utf8_lossy(&key),
            offset
        );
    }
    let mut seen = std::collections::HashSet::new();
    // Under the garbage ratio, listed copies stay below the checkpoint.
    let batches = if one_copy { all_batches(&l) } else { Vec::new() };
    for (h, recs) in batches.iter().filter(|(h, _)| !h.is_control()) {
        for r in recs.iter().filter(|r| r.offset < m.checkpoint) {
            prop_assert!(
                seen.insert(r.key.clone()),
                "a second copy of a key at {} ({:?})",
                r.offset,
                h
            );
        }
    }
    Ok(())
}

pub(super) fn run_txn(
    ops: Vec<TxnOp>,
    ranking: Ranking,
    budget: usize,
    extra: &[(&'static str, &'static str)],
) -> Result<(), TestCaseError> {
    use sediment::log::control_record::EndTransactionMarker;
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_700_000_000_000);
    let mut pairs = config(ranking);
    // Tombstones stay (the first property covers their removal), so the
    // oracle ranks every committed record ever written.
    pairs.retain(|(k, _)| *k != "delete.retention.ms");
    pairs.push(("delete.retention.ms", "100000000"));
    pairs.extend_from_slice(extra);
    let one_copy = extra.is_empty();
    let log = RwLock::new(open_log(dir.path(), "txnstrategy", &pairs, clock.clone()));
    let mut m = TxnModel::default();
    let mut cleaner = cleaner(budget, clock.clone());
    let end_all = (0..3u8).map(|p| TxnOp::End { p, commit: p != 1 });
    let rounds = ops.len() * 4 + 8;
    let tail = end_all.chain([TxnOp::Roll]).chain(std::iter::repeat_n(TxnOp::Clean, rounds));
    for op in ops.into_iter().chain(tail) {
        let now = clock.now_ms();
        match op {
            TxnOp::Data { p, records } => {
                let pid = 10 + i64::from(p);
                let seq = m.sequences.entry(pid).or_insert(0);
                let at = *seq;
                *seq += records.len() as i32;
                let written = append_batch(
                    &mut log.write(),
                    ranking,
                    (Some((pid, at)), Compression::None, true),
                    &records,
                    now,
                );
                for w in written {
                    m.open.entry(pid).or_default().push(w.rec.offset);
                    m.uncommitted.insert(w.rec.offset);
                    m.written.insert(w.rec.offset, (w, Some(pid)));
                }
            }
            TxnOp::End { p, commit } => {
                let pid = 10 + i64::from(p);
                if let Some(offsets) = m.open.remove(&pid) {
                    let marker = if commit {
                        EndTransactionMarker::commit(0)
                    } else {
                        EndTransactionMarker::abort(0)
                    };
                    log.write().append_end_txn_marker(pid, 0, marker).expect("marker");
                    for o in offsets {
                        m.uncommitted.remove(&o);
                        if !commit {
                            m.aborted.insert(o);
                        }
                    }
                }
            }
            TxnOp::Plain { records } => {
                let written = append_batch(
                    &mut log.write(),
                    ranking,
                    (None, Compression::None, false),
                    &records,
                    now,
                );
                for w in written {
                    m.written.insert(w.rec.offset, (w, None));
                }
            }
            TxnOp::Roll => log.write().roll_if_not_empty().unwrap(),
            TxnOp::Clean => txn_check(&log, &mut m, &mut cleaner, (now, one_copy))?,
        }
        clock.advance(1);
    }
    // Every transaction has ended and everything is cleaned: a
    // read_committed reader from offset 0 ends with each key's winner.
    prop_assert_eq!(m.checkpoint, log.read().log_end_offset(), "the cleans covered the log");
    let stable = m.written.values().map(|(w, _)| w).filter(|w| m.stable(w.rec.offset));
    let best = winners(stable);
    let mut oracle = BTreeMap::new();
    for (key, (_, offset)) in best {
        if let Some(v) = &m.written[&offset].0.rec.value {
            oracle.insert(key, v.clone());
        }
    }
    prop_assert_eq!(final_view(&read_committed(&log.read())), oracle.clone());
    // Reopened, the log finds every transaction ended (no marker of a
    // transaction whose data stayed was removed) and reads the same.
    drop(log);
    let log = open_log(dir.path(), "txnstrategy", &pairs, clock.clone());
    prop_assert_eq!(log.last_stable_offset(), log.log_end_offset(), "a transaction left open");
    prop_assert_eq!(final_view(&read_committed(&log)), oracle);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn read_committed_sees_the_winning_committed_version_per_key(
        ops in prop_oneof![Just(3u16), Just(12u16)]
            .prop_flat_map(|keys| prop::collection::vec(txn_op(keys), 20..70)),
        ranking in prop_oneof![Just(Ranking::Header), Just(Ranking::Timestamp)],
        budget in prop_oneof![Just(TINY_BUDGET), Just(LARGE_BUDGET)],
    ) {
        run_txn(ops, ranking, budget, &[])?;
    }
}

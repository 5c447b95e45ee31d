//! Property test of the cleaner against the simplest model there is: "the
//! latest value per key". Random workloads (small and large key spaces,
//! tombstones, empty values, key-less records, several producers, every
//! codec, rolls) are cleaned again and again with a tiny map (9 keys), so a
//! single clean rarely covers the dirty range; and again with a map large
//! enough for every key and for the map pass's record of the batches, so
//! the recopy drops runs of superseded batches without reading them. After
//! every clean:
//! * the log holds exactly the model's records, with original offsets,
//!   timestamps, keys and values, in order;
//! * below the clean's end offset every key has only its newest record;
//! * tombstones are kept with a delete horizon of clean time +
//!   delete.retention.ms, and are gone after a clean at or past it;
//! * the log end offset is unchanged, every batch's CRC is valid and batches
//!   do not overlap; every producer's last batch is still there.

use crate::common;

use parking_lot::RwLock;
use std::collections::HashMap;

use crate::common::{all_batches, clean_once, cleaner, open_log, read_all, stray_files, Rec};
use proptest::prelude::*;
use sediment::clock::{Clock, MockClock};
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;
use sediment::log::Log;

const RETENTION_MS: i64 = 1000;
const MAP_BUDGET: usize = 24 * 10; // 10 slots, 9 keys at load factor 0.9
/// Room for every key of the largest key space, the bits and the batch record.
const LARGE_BUDGET: usize = 1 << 20;

#[derive(Debug, Clone)]
struct RecordOp {
    /// `None`: a key-less record.
    key: Option<u16>,
    /// `None`: a tombstone; `Some(0)`: an empty (not null) value.
    value_len: Option<u8>,
}

#[derive(Debug, Clone)]
enum Op {
    Append { producer: Option<i64>, codec: u8, records: Vec<RecordOp> },
    Roll,
    Clean,
    Advance(i64),
}

fn record_op(key_space: u16) -> impl Strategy<Value = RecordOp> {
    (
        prop::option::weighted(0.95, 0..key_space),
        prop::option::weighted(0.85, prop_oneof![1 => Just(0u8), 6 => 1u8..24]),
    )
        .prop_map(|(key, value_len)| RecordOp { key, value_len })
}

fn op(key_space: u16) -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (prop::option::of(1i64..4), 0u8..5, prop::collection::vec(record_op(key_space), 1..5))
            .prop_map(|(producer, codec, records)| Op::Append { producer, codec, records }),
        1 => Just(Op::Roll),
        3 => Just(Op::Clean),
        2 => (0i64..1500).prop_map(Op::Advance),
    ]
}

fn workload() -> impl Strategy<Value = Vec<Op>> {
    prop_oneof![Just(4u16), Just(40u16), Just(400u16)]
        .prop_flat_map(|keys| prop::collection::vec(op(keys), 20..90))
}

/// Every codec, picked by index by the workloads here and in
/// `cleaner_strategy_model.rs`.
pub(crate) const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

struct Model {
    records: Vec<Rec>,
    /// Delete horizon of each tombstone, once a clean has stamped it.
    horizons: HashMap<i64, i64>,
    /// Each producer's last batch: (base offset, last offset, base sequence).
    producer_last: HashMap<i64, (i64, i64, i32)>,
    sequences: HashMap<i64, i32>,
    checkpoint: i64,
}

fn append(
    log: &mut Log,
    model: &mut Model,
    producer: Option<i64>,
    codec: u8,
    records: &[RecordOp],
    now: i64,
) {
    let codec = CODECS[codec as usize % CODECS.len()];
    let mut b = BatchBuilder::new(codec, now - 50);
    if let Some(pid) = producer {
        let seq = *model.sequences.get(&pid).unwrap_or(&0);
        b = b.producer(pid, 0, seq);
        model.sequences.insert(pid, seq + records.len() as i32);
    }
    let mut specs = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let key = r.key.map(|k| format!("key-{k}").into_bytes());
        let value = r.value_len.map(|n| vec![b'a' + (i as u8 % 26); n as usize]);
        specs.push((now - 50 + (i as i64 * 7) % 40, key, value));
    }
    for (ts, k, v) in &specs {
        b.append(*ts, k.as_deref(), v.as_deref());
    }
    let keyless = records.iter().any(|r| r.key.is_none());
    let config = std::sync::Arc::clone(log.config());
    if keyless {
        let mut c = (*config).clone();
        c.compact = false;
        log.update_config(std::sync::Arc::new(c));
    }
    let info = log.append_as_leader(&mut b.build()).expect("append");
    log.update_config(config);
    for (i, (ts, k, v)) in specs.into_iter().enumerate() {
        model.records.push(Rec {
            offset: info.first_offset + i as i64,
            timestamp: ts,
            key: k,
            value: v,
        });
    }
    if let Some(pid) = producer {
        let seq = model.sequences[&pid] - records.len() as i32;
        model.producer_last.insert(pid, (info.first_offset, info.last_offset, seq));
    }
}

fn clean_and_check(
    log: &RwLock<Log>,
    model: &mut Model,
    cleaner: &mut sediment::cleaner::Cleaner,
    now: i64,
) -> Result<u64, TestCaseError> {
    let leo = log.read().log_end_offset();
    let result = clean_once(cleaner, log, model.checkpoint, now);
    let end = result.end_offset;
    prop_assert!(end >= model.checkpoint);
    prop_assert!(result.stats.map_entries <= result.stats.map_max_entries);

    // The model's clean: below `end`, only each key's newest record stays, key-less
    // records go, and tombstones go once a horizon stamped by an earlier clean has passed.
    let mut newest: HashMap<&[u8], i64> = HashMap::new();
    for r in model.records.iter().filter(|r| r.offset < end) {
        if let Some(k) = &r.key {
            newest.insert(k, r.offset);
        }
    }
    let newest: HashMap<Vec<u8>, i64> = newest.into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
    let horizons = &model.horizons;
    model.records.retain(|r| {
        if r.offset >= end {
            return true;
        }
        let Some(k) = &r.key else { return false };
        if newest[k] != r.offset {
            return false;
        }
        !(r.value.is_none() && horizons.get(&r.offset).is_some_and(|&h| h <= now))
    });
    let kept: std::collections::HashSet<i64> = model.records.iter().map(|r| r.offset).collect();
    model.horizons.retain(|o, _| kept.contains(o));
    model.checkpoint = end;

    let log = log.read();
    prop_assert_eq!(log.log_end_offset(), leo, "log end offset unchanged");
    let actual = read_all(&log, 0, 1 << 20);
    prop_assert_eq!(
        &actual,
        &model.records,
        "log differs from the model after cleaning to {}",
        end
    );

    // Batches: valid CRCs (all_batches checks), no overlap, horizons as stamped.
    let batches = all_batches(&log);
    let mut prev_last = -1;
    let mut from_batches = Vec::new();
    for (h, recs) in &batches {
        prop_assert!(
            h.base_offset > prev_last,
            "batch at {} overlaps the one before",
            h.base_offset
        );
        prev_last = h.last_offset();
        for r in recs.iter().filter(|r| r.value.is_none() && r.key.is_some()) {
            match (h.delete_horizon_ms(), model.horizons.get(&r.offset)) {
                (Some(hz), None) => {
                    prop_assert_eq!(hz, now + RETENTION_MS, "horizon stamped by this clean");
                    model.horizons.insert(r.offset, hz);
                }
                (Some(hz), Some(&known)) => prop_assert_eq!(hz, known, "a horizon never changes"),
                (None, known) => {
                    prop_assert!(known.is_none(), "a stamped horizon was lost at {}", r.offset);
                    prop_assert!(
                        r.offset >= end,
                        "tombstone at {} was cleaned without a horizon",
                        r.offset
                    );
                }
            }
        }
        from_batches.extend(recs.iter().cloned());
    }
    prop_assert_eq!(&from_batches, &model.records);
    for (pid, (base, last, seq)) in &model.producer_last {
        let found = batches.iter().any(|(h, _)| {
            h.base_offset == *base
                && h.last_offset() == *last
                && h.producer_id == *pid
                && h.base_sequence == *seq
        });
        prop_assert!(found, "producer {}'s last batch at {} is gone", pid, base);
    }
    prop_assert!(
        stray_files(log.dir()).iter().all(|f| f.ends_with(".deleted")),
        "{:?}",
        stray_files(log.dir())
    );
    Ok(result.stats.batches_dropped_unread)
}

/// Runs the workload with a map of `budget` bytes; returns how many
/// batches the cleans dropped unread.
fn run(ops: Vec<Op>, budget: usize) -> Result<u64, TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_700_000_000_000);
    let config = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "1200"),
        ("index.interval.bytes", "100"),
        ("delete.retention.ms", "1000"),
        ("file.delete.delay.ms", "0"),
    ];
    let log = RwLock::new(open_log(dir.path(), "model", &config, clock.clone()));
    let mut model = Model {
        records: Vec::new(),
        horizons: HashMap::new(),
        producer_last: HashMap::new(),
        sequences: HashMap::new(),
        checkpoint: 0,
    };
    let mut cleaner = cleaner(budget, clock.clone());
    let mut dropped_unread = 0;
    for op in ops.into_iter().chain([
        Op::Roll,
        Op::Clean,
        Op::Clean,
        Op::Advance(RETENTION_MS),
        Op::Clean,
        Op::Clean,
        Op::Clean,
    ]) {
        match op {
            Op::Append { producer, codec, records } => {
                append(&mut log.write(), &mut model, producer, codec, &records, clock.now_ms())
            }
            Op::Roll => log.write().roll_if_not_empty().unwrap(),
            Op::Clean => {
                dropped_unread += clean_and_check(&log, &mut model, &mut cleaner, clock.now_ms())?;
                log.write().delete_expired_files(clock.now_ms(), false).unwrap();
            }
            Op::Advance(ms) => clock.advance(ms),
        }
    }
    Ok(dropped_unread)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn cleaned_log_matches_latest_value_per_key(ops in workload()) {
        let dropped_unread = run(ops, MAP_BUDGET)?;
        prop_assert_eq!(dropped_unread, 0, "a 240-byte budget has no room for the batch record");
    }

    #[test]
    fn cleaned_log_matches_latest_value_per_key_when_superseded_batches_go_unread(
        ops in workload()
    ) {
        run(ops, LARGE_BUDGET)?;
    }
}

/// The large-budget run does drop batches unread: plain batches whose keys
/// all come again, rolled and cleaned, with a producer whose last batch is
/// superseded (it stays, emptied) and tombstones.
#[test]
fn superseded_batches_go_unread_and_the_log_still_matches_the_model() {
    let rec = |key: u16, value_len: Option<u8>| RecordOp { key: Some(key), value_len };
    let batch = |producer, keys: &[u16]| Op::Append {
        producer,
        codec: 0,
        records: keys.iter().map(|&k| rec(k, Some(5))).collect(),
    };
    let mut ops = Vec::new();
    for round in 0..6u16 {
        ops.push(batch(None, &[1, 2, 3]));
        ops.push(batch(Some(1), &[4, 5]));
        ops.push(batch(None, &[6, 7, 8 + round % 2]));
        ops.push(Op::Append {
            producer: None,
            codec: 2,
            records: vec![rec(1, None), rec(6, Some(3))],
        });
        ops.push(Op::Roll);
    }
    ops.push(batch(None, &[4, 5]));
    ops.push(Op::Clean);
    let dropped_unread = run(ops, LARGE_BUDGET).unwrap();
    assert!(dropped_unread >= 10, "{dropped_unread} batches dropped unread");
}

// ---- Transactions: what a read_committed reader sees after any cleans ----
//
// Transactional producers (10..13) open, commit and abort transactions (some
// stay open), interleaved with plain producers and tombstones over a small
// key space; the log is cleaned as the manager would (measured with its first
// unstable offset) with the tiny map. After every clean:
// * a read_committed reader (read up to the LSO with the aborted list, and
//   filtering as a consumer does) sees only plain and committed records, each
//   as written, and for every key at least the newest plain-or-committed
//   record below the LSO (a tombstone only until its stamped horizon passed);
// * nothing at or past the first unstable offset changed, nor the log end;
// * every producer's last data batch is still there (maybe empty), and a
//   committed transaction with records left keeps its COMMIT marker.

#[derive(Debug, Clone)]
enum TxnOp {
    /// A transactional batch of producer `10 + p`: opens its transaction.
    Data {
        p: u8,
        records: Vec<RecordOp>,
    },
    /// Ends producer `10 + p`'s open transaction, if any.
    End {
        p: u8,
        commit: bool,
    },
    Plain {
        producer: Option<i64>,
        records: Vec<RecordOp>,
    },
    Roll,
    Clean,
    Advance(i64),
}

fn keyed_record(key_space: u16) -> impl Strategy<Value = RecordOp> {
    (0..key_space, prop::option::weighted(0.85, 0u8..16))
        .prop_map(|(key, value_len)| RecordOp { key: Some(key), value_len })
}

fn txn_op(key_space: u16) -> impl Strategy<Value = TxnOp> {
    let records = move || prop::collection::vec(keyed_record(key_space), 1..4);
    prop_oneof![
        6 => (0u8..3, records()).prop_map(|(p, records)| TxnOp::Data { p, records }),
        3 => (0u8..3, prop::bool::weighted(0.6)).prop_map(|(p, commit)| TxnOp::End { p, commit }),
        4 => (prop::option::of(1i64..3), records())
            .prop_map(|(producer, records)| TxnOp::Plain { producer, records }),
        1 => Just(TxnOp::Roll),
        3 => Just(TxnOp::Clean),
        2 => (0i64..1500).prop_map(TxnOp::Advance),
    ]
}

fn txn_workload() -> impl Strategy<Value = Vec<TxnOp>> {
    prop_oneof![Just(3u16), Just(12u16)]
        .prop_flat_map(|keys| prop::collection::vec(txn_op(keys), 20..70))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Open,
    Committed,
    Aborted,
}

#[derive(Default)]
struct TxnModel {
    /// Every record written, by offset, with its transaction (index into `txns`).
    written: std::collections::BTreeMap<i64, (Rec, Option<usize>)>,
    txns: Vec<Fate>,
    /// Offset of each ended transaction's marker.
    markers: HashMap<usize, i64>,
    open: HashMap<i64, usize>,
    sequences: HashMap<i64, i32>,
    /// Each producer's last data batch: (base offset, last offset).
    producer_last: HashMap<i64, (i64, i64)>,
    /// Delete horizons seen stamped on tombstones, by offset.
    horizons: HashMap<i64, i64>,
    checkpoint: i64,
}

fn txn_append(
    log: &mut Log,
    m: &mut TxnModel,
    pid: i64,
    txn: bool,
    records: &[RecordOp],
    now: i64,
) {
    let seq = *m.sequences.get(&pid).unwrap_or(&0);
    let mut b = BatchBuilder::new(Compression::None, now).producer(pid, 0, seq);
    b.transactional = txn;
    m.sequences.insert(pid, seq + records.len() as i32);
    let specs: Vec<(Vec<u8>, Option<Vec<u8>>)> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let key = format!("key-{}", r.key.unwrap_or(0)).into_bytes();
            (key, r.value_len.map(|n| vec![b'a' + (pid as u8 + i as u8) % 26; n as usize]))
        })
        .collect();
    for (k, v) in &specs {
        b.append(now, Some(k), v.as_deref());
    }
    let info = log.append_as_leader(&mut b.build()).expect("append");
    let t = txn.then(|| {
        *m.open.entry(pid).or_insert_with(|| {
            m.txns.push(Fate::Open);
            m.txns.len() - 1
        })
    });
    for (i, (k, v)) in specs.into_iter().enumerate() {
        let offset = info.first_offset + i as i64;
        let rec = Rec { offset, timestamp: now, key: Some(k), value: v };
        m.written.insert(offset, (rec, t));
    }
    m.producer_last.insert(pid, (info.first_offset, info.last_offset));
}

/// Everything a read_committed reader fetches from the log start, filtered
/// as a consumer filters with each fetch's aborted list.
pub(crate) fn read_committed(log: &Log) -> Vec<Rec> {
    use sediment::cleaner::transactions::{control_record_type, CONTROL_TYPE_ABORT};
    use sediment::log::record_batch::BatchHeader;
    use sediment::log::FetchIsolation;
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    loop {
        let info = log
            .read_region_with_isolation(offset, 1 << 20, true, FetchIsolation::TxnCommitted)
            .expect("read_committed");
        let Some(region) = info.records else { break };
        let bytes = region.read_to_bytes().expect("read region");
        let mut aborted = info.aborted_transactions.expect("aborted list");
        aborted.sort_by_key(|t| t.first_offset);
        let mut aborted = aborted.into_iter().peekable();
        let mut aborting = std::collections::HashSet::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]).expect("header");
            let batch = &bytes[pos..pos + h.size_in_bytes()];
            pos += h.size_in_bytes();
            offset = h.next_offset();
            while let Some(t) = aborted.next_if(|t| t.first_offset <= h.last_offset()) {
                aborting.insert(t.producer_id);
            }
            let recs = common::decode(batch);
            if h.is_control() {
                let abort =
                    recs.first().and_then(|r| r.key.as_deref()).and_then(control_record_type)
                        == Some(CONTROL_TYPE_ABORT);
                if abort {
                    aborting.remove(&h.producer_id);
                }
            } else if !(h.is_transactional() && aborting.contains(&h.producer_id)) {
                out.extend(recs.into_iter().filter(|r| r.offset >= log.log_start_offset()));
            }
        }
    }
    out
}

fn txn_clean_and_check(
    log: &RwLock<Log>,
    m: &mut TxnModel,
    cleaner: &mut sediment::cleaner::Cleaner,
    now: i64,
) -> Result<(), TestCaseError> {
    use sediment::cleaner::{CancellationToken, LogToClean};
    let (leo, fuo, unstable_before) = {
        let l = log.read();
        let fuo = l.first_unstable_offset();
        let after: Vec<_> = all_batches(&l)
            .into_iter()
            .filter(|(h, _)| fuo.is_some_and(|f| h.base_offset >= f))
            .collect();
        (l.log_end_offset(), fuo, after)
    };
    let to_clean = LogToClean::measure(&log.read(), Some(m.checkpoint), now);
    if let Some(f) = fuo {
        prop_assert!(to_clean.first_uncleanable_offset <= f, "cleanable past the FUO");
    }
    let result = cleaner.clean(log, &to_clean, now, &CancellationToken::new()).expect("clean");
    prop_assert!(result.end_offset >= m.checkpoint);
    m.checkpoint = result.end_offset;

    let l = log.read();
    prop_assert_eq!(l.log_end_offset(), leo, "log end offset unchanged");
    let batches = all_batches(&l);
    let unstable_after: Vec<_> =
        batches.iter().filter(|(h, _)| fuo.is_some_and(|f| h.base_offset >= f)).cloned().collect();
    prop_assert_eq!(&unstable_after, &unstable_before, "a clean changed data past the FUO");
    for (h, recs) in &batches {
        for r in recs.iter().filter(|r| r.value.is_none() && !h.is_control()) {
            if let Some(hz) = h.delete_horizon_ms() {
                m.horizons.entry(r.offset).or_insert(hz);
            }
        }
    }

    let lso = l.last_stable_offset();
    let visible = read_committed(&l);
    let visible_at: HashMap<i64, &Rec> = visible.iter().map(|r| (r.offset, r)).collect();
    let stable = |t: &Option<usize>| t.is_none_or(|t| m.txns[t] == Fate::Committed);
    for r in &visible {
        let Some((written, t)) = m.written.get(&r.offset) else {
            return Err(TestCaseError::fail(format!("unknown record at {}", r.offset)));
        };
        prop_assert_eq!(r, written, "a record changed");
        prop_assert!(r.offset < lso, "read_committed read past the LSO");
        prop_assert!(stable(t), "an aborted record at {} is visible", r.offset);
    }
    let mut newest: HashMap<&[u8], &Rec> = HashMap::new();
    for (rec, t) in m.written.values() {
        if rec.offset < lso && stable(t) {
            newest.insert(rec.key.as_deref().unwrap_or_default(), rec);
        }
    }
    for (key, rec) in newest {
        if visible_at.contains_key(&rec.offset) {
            continue;
        }
        let gone_after_horizon =
            rec.value.is_none() && m.horizons.get(&rec.offset).is_some_and(|&h| h <= now);
        prop_assert!(
            gone_after_horizon,
            "the newest record of {:?} at {} is gone (horizon {:?}, now {})",
            String::from_utf8_lossy(key),
            rec.offset,
            m.horizons.get(&rec.offset),
            now
        );
    }
    // Below the clean's end every key has at most one record left.
    let mut seen = std::collections::HashSet::new();
    for r in batches.iter().filter(|(h, _)| !h.is_control()).flat_map(|(_, recs)| recs) {
        if r.offset < m.checkpoint {
            prop_assert!(seen.insert(r.key.clone()), "a second record of a key at {}", r.offset);
        }
    }
    // A marker stays while records of its transaction remain below it.
    let control: std::collections::HashSet<i64> =
        batches.iter().filter(|(h, _)| h.is_control()).map(|(h, _)| h.base_offset).collect();
    for r in batches.iter().filter(|(h, _)| !h.is_control()).flat_map(|(_, recs)| recs) {
        if let Some((_, Some(t))) = m.written.get(&r.offset) {
            if let Some(marker) = m.markers.get(t) {
                prop_assert!(
                    control.contains(marker),
                    "the marker at {} went while the record at {} remains",
                    marker,
                    r.offset
                );
            }
        }
    }
    for (pid, (base, last)) in &m.producer_last {
        let found = batches.iter().any(|(h, _)| {
            h.producer_id == *pid && h.base_offset == *base && h.last_offset() == *last
        });
        prop_assert!(found, "producer {}'s last data batch at {} is gone", pid, base);
    }
    Ok(())
}

/// `budget`: the tiny map, or one with room beside its table for the bits
/// of the mapped range (debug builds check every bit against the map).
fn run_txn(ops: Vec<TxnOp>, budget: usize) -> Result<(), TestCaseError> {
    use sediment::log::control_record::EndTransactionMarker;
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_700_000_000_000);
    let config = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "900"),
        ("index.interval.bytes", "100"),
        ("delete.retention.ms", "1000"),
        ("file.delete.delay.ms", "0"),
    ];
    let log = RwLock::new(open_log(dir.path(), "txnmodel", &config, clock.clone()));
    let mut m = TxnModel::default();
    let mut cleaner = cleaner(budget, clock.clone());
    let tail =
        [TxnOp::Roll, TxnOp::Clean, TxnOp::Advance(RETENTION_MS), TxnOp::Clean, TxnOp::Clean];
    for op in ops.into_iter().chain(tail) {
        let now = clock.now_ms();
        match op {
            TxnOp::Data { p, records } => {
                txn_append(&mut log.write(), &mut m, 10 + p as i64, true, &records, now)
            }
            TxnOp::End { p, commit } => {
                let pid = 10 + p as i64;
                if let Some(t) = m.open.remove(&pid) {
                    let marker = if commit {
                        EndTransactionMarker::commit(0)
                    } else {
                        EndTransactionMarker::abort(0)
                    };
                    let info = log.write().append_end_txn_marker(pid, 0, marker).expect("marker");
                    m.markers.insert(t, info.first_offset);
                    m.txns[t] = if commit { Fate::Committed } else { Fate::Aborted };
                }
            }
            TxnOp::Plain { producer: Some(pid), records } => {
                txn_append(&mut log.write(), &mut m, pid, false, &records, now)
            }
            TxnOp::Plain { producer: None, records } => {
                let specs: Vec<(Vec<u8>, Option<Vec<u8>>)> = records
                    .iter()
                    .map(|r| {
                        let key = format!("key-{}", r.key.unwrap_or(0)).into_bytes();
                        (key, r.value_len.map(|n| vec![b'p'; n as usize]))
                    })
                    .collect();
                let mut b = BatchBuilder::new(Compression::None, now);
                for (k, v) in &specs {
                    b.append(now, Some(k), v.as_deref());
                }
                let info = log.write().append_as_leader(&mut b.build()).expect("append");
                for (i, (k, v)) in specs.into_iter().enumerate() {
                    let offset = info.first_offset + i as i64;
                    m.written.insert(
                        offset,
                        (Rec { offset, timestamp: now, key: Some(k), value: v }, None),
                    );
                }
            }
            TxnOp::Roll => log.write().roll_if_not_empty().unwrap(),
            TxnOp::Clean => {
                txn_clean_and_check(&log, &mut m, &mut cleaner, now)?;
                log.write().delete_expired_files(now, false).unwrap();
            }
            TxnOp::Advance(ms) => clock.advance(ms),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn read_committed_sees_the_newest_committed_value_per_key(
        ops in txn_workload(),
        budget in prop_oneof![Just(MAP_BUDGET), Just(1usize << 20)],
    ) {
        run_txn(ops, budget)?;
    }
}

//! Property test of the cleaner against the simplest model there is: "the
//! latest value per key". Random workloads (small and large key spaces,
//! tombstones, empty values, key-less records, several producers, every
//! codec, rolls) are cleaned again and again with a tiny map (9 keys), so a
//! single clean rarely covers the dirty range. After every clean:
//! * the log holds exactly the model's records, with original offsets,
//!   timestamps, keys and values, in order;
//! * below the clean's end offset every key has only its newest record;
//! * tombstones are kept with a delete horizon of clean time +
//!   delete.retention.ms, and are gone after a clean at or past it;
//! * the log end offset is unchanged, every batch's CRC is valid and batches
//!   do not overlap; every producer's last batch is still there.

mod common;

use parking_lot::RwLock;
use std::collections::HashMap;

use common::{all_batches, clean_once, cleaner, open_log, read_all, stray_files, Rec};
use proptest::prelude::*;
use sediment::clock::{Clock, MockClock};
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;
use sediment::log::Log;

const RETENTION_MS: i64 = 1000;
const MAP_BUDGET: usize = 24 * 10; // 10 slots, 9 keys at load factor 0.9

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

const CODECS: [Compression; 5] = [
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
) -> Result<(), TestCaseError> {
    let leo = log.read().log_end_offset();
    let result = clean_once(cleaner, log, model.checkpoint, now);
    let end = result.end_offset;
    prop_assert!(end >= model.checkpoint);
    prop_assert!(result.stats.map_entries <= 9);

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
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
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
    let mut cleaner = cleaner(MAP_BUDGET, clock.clone());
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
                clean_and_check(&log, &mut model, &mut cleaner, clock.now_ms())?;
                log.write().delete_expired_files(clock.now_ms(), false).unwrap();
            }
            Op::Advance(ms) => clock.advance(ms),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn cleaned_log_matches_latest_value_per_key(ops in workload()) {
        run(ops)?;
    }
}

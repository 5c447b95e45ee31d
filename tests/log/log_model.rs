//! Property tests of `Log` against a model: a Vec of every record appended.
//! Random appends (sizes, codecs, timestamps, tombstones), transactional
//! appends and COMMIT/ABORT markers of a few producers, rolls, reopens and
//! DeleteRecords; after each step every offset reads back, index lookups land
//! on the right batch, timestamp lookups agree with a linear search, the last
//! stable offset is the model's, and a read_committed read returns the
//! records below it with exactly the model's aborted transactions.

use crate::common;

use std::sync::Arc;

use crate::common::{batch, read_all, Rec};
use proptest::prelude::*;
use sediment::clock::{MockClock, SharedClock};
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::record_batch::{BatchBuilder, BatchHeader};
use sediment::log::transaction_index::AbortedTxn;
use sediment::log::unified_log::{LATEST_TIMESTAMP, MAX_TIMESTAMP};
use sediment::log::{FetchIsolation, LoadParams, Log, LogConfig, TopicPartition};

#[derive(Debug, Clone)]
enum Op {
    Append {
        codec: u8,
        records: Vec<(i64, u8, Option<u16>)>,
    },
    /// A transactional batch of producer `100 + pid`.
    TxnAppend {
        pid: u8,
        records: Vec<(i64, u8, Option<u16>)>,
    },
    /// A marker for producer `100 + pid`.
    Marker {
        pid: u8,
        commit: bool,
    },
    Roll,
    Reopen {
        clean: bool,
    },
    DeleteRecords(u8),
    AdvanceClock(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..5, prop::collection::vec((0i64..5_000, any::<u8>(), prop::option::weighted(0.9, 0u16..600)), 1..20))
            .prop_map(|(codec, records)| Op::Append { codec, records }),
        3 => (0u8..3, prop::collection::vec((0i64..5_000, any::<u8>(), prop::option::weighted(0.9, 0u16..300)), 1..5))
            .prop_map(|(pid, records)| Op::TxnAppend { pid, records }),
        2 => (0u8..3, any::<bool>()).prop_map(|(pid, commit)| Op::Marker { pid, commit }),
        1 => Just(Op::Roll),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
        1 => any::<u8>().prop_map(Op::DeleteRecords),
        1 => (0i64..2_000).prop_map(Op::AdvanceClock),
    ]
}

fn codec(n: u8) -> Compression {
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd]
        [n as usize % 5]
}

fn open(
    dir: &std::path::Path,
    config: &Arc<LogConfig>,
    clock: &SharedClock,
    load: LoadParams,
) -> Log {
    Log::open(
        dir,
        TopicPartition::new("model", 0),
        Arc::clone(config),
        load,
        false,
        Arc::clone(clock),
    )
    .expect("open")
}

/// The transactions of the model: what the producer state and the
/// `.txnindex` files must say.
#[derive(Debug, Default)]
struct TxnModel {
    /// Next sequence per producer.
    next_seq: [i32; 3],
    /// Open transactions: producer → first offset.
    open: std::collections::BTreeMap<i64, i64>,
    /// Every aborted transaction, with the LSO right after its marker.
    aborted: Vec<AbortedTxn>,
    /// Offsets every transaction spans (first data, marker; open: none).
    spans: Vec<(i64, Option<i64>)>,
}

impl TxnModel {
    fn lso(&self, log_start: i64, hw: i64) -> i64 {
        self.open.values().min().map_or(hw, |&f| f.max(log_start).min(hw))
    }

    /// A DeleteRecords target moved down so that it cuts no transaction: the
    /// loader rebuilds the producer state from the segments left, so one
    /// cut would forget a transaction until producer snapshots exist.
    fn uncut(&self, mut target: i64) -> i64 {
        loop {
            let cut = self
                .spans
                .iter()
                .find(|(first, end)| *first < target && end.is_none_or(|e| e >= target));
            match cut {
                Some((first, _)) => target = *first,
                None => return target,
            }
        }
    }
}

fn txn_append(
    log: &mut Log,
    model: &mut Vec<Rec>,
    txn: &mut TxnModel,
    pid: u8,
    records: &[(i64, u8, Option<u16>)],
) {
    let producer = 100 + pid as i64;
    let seq = txn.next_seq[pid as usize];
    let mut b = BatchBuilder::new(Compression::None, records[0].0).producer(producer, 0, seq);
    b.transactional = true;
    let keys: Vec<Vec<u8>> =
        records.iter().map(|r| format!("txn-{pid}-{}", r.1).into_bytes()).collect();
    let values: Vec<Option<Vec<u8>>> =
        records.iter().map(|r| r.2.map(|n| vec![b't'; n as usize])).collect();
    for (i, r) in records.iter().enumerate() {
        b.append(r.0, Some(&keys[i]), values[i].as_deref());
    }
    let info = log.append_as_leader(&mut b.build()).expect("transactional append");
    assert_eq!(info.first_offset, model.len() as i64);
    txn.next_seq[pid as usize] += records.len() as i32;
    if let std::collections::btree_map::Entry::Vacant(e) = txn.open.entry(producer) {
        e.insert(info.first_offset);
        txn.spans.push((info.first_offset, None));
    }
    for (i, r) in records.iter().enumerate() {
        model.push(Rec {
            offset: model.len() as i64,
            timestamp: r.0,
            key: Some(keys[i].clone()),
            value: values[i].clone(),
        });
    }
}

fn marker(
    log: &mut Log,
    model: &mut Vec<Rec>,
    txn: &mut TxnModel,
    now: i64,
    pid: u8,
    commit: bool,
) {
    let producer = 100 + pid as i64;
    let m = if commit { EndTransactionMarker::commit(0) } else { EndTransactionMarker::abort(0) };
    let info = log.append_end_txn_marker(producer, 0, m).expect("marker");
    let offset = model.len() as i64;
    assert_eq!(info.first_offset, offset);
    model.push(Rec {
        offset,
        timestamp: now,
        key: Some(m.control_type().key().to_vec()),
        value: Some(m.value().to_vec()),
    });
    let Some(first) = txn.open.remove(&producer) else { return };
    let span = txn.spans.iter_mut().find(|(f, end)| *f == first && end.is_none()).expect("span");
    span.1 = Some(offset);
    if !commit {
        let last_stable_offset = txn.open.values().min().copied().unwrap_or(offset + 1);
        txn.aborted.push(AbortedTxn {
            producer_id: producer,
            first_offset: first,
            last_offset: offset,
            last_stable_offset,
        });
    }
}

/// The last stable offset, ListOffsets by isolation, and a read_committed
/// read of the whole log with its aborted transactions.
fn check_transactions(log: &mut Log, model: &[Rec], txn: &TxnModel, log_start: i64) {
    let hw = model.len() as i64;
    let lso = txn.lso(log_start, hw);
    assert_eq!(log.last_stable_offset(), lso);
    assert_eq!(
        log.fetch_offset_for_isolation(LATEST_TIMESTAMP, FetchIsolation::TxnCommitted).unwrap(),
        Some((-1, lso))
    );
    assert_eq!(
        log.fetch_offset_for_isolation(LATEST_TIMESTAMP, FetchIsolation::HighWatermark).unwrap(),
        Some((-1, hw))
    );
    let expected_entries: Vec<AbortedTxn> =
        txn.aborted.iter().filter(|t| t.last_offset >= log_start).copied().collect();
    assert_eq!(log.collect_aborted_transactions(log_start, hw).unwrap(), expected_entries);
    // read_committed in small steps: every record below the LSO, no further.
    let mut next = log_start;
    let mut got = Vec::new();
    loop {
        let info =
            log.read_region_with_isolation(next, 1, true, FetchIsolation::TxnCommitted).unwrap();
        assert_eq!(info.last_stable_offset, lso);
        let Some(region) = info.records else {
            assert!(next >= lso, "read_committed stopped at {next}, below the LSO {lso}");
            assert_eq!(info.aborted_transactions, Some(Vec::new()));
            break;
        };
        let bytes = region.read_to_bytes().unwrap();
        let records = common::decode(&bytes);
        let mut end = next;
        let mut pos = 0;
        while pos < bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]).unwrap();
            end = h.next_offset();
            pos += h.size_in_bytes();
        }
        assert!(end <= lso, "read_committed returned offsets up to {end} past the LSO {lso}");
        let want: Vec<AbortedTxn> = txn
            .aborted
            .iter()
            .filter(|t| t.last_offset >= next && t.first_offset < end)
            .copied()
            .collect();
        assert_eq!(
            info.aborted_transactions,
            Some(want),
            "aborted transactions of [{next}, {end})"
        );
        got.extend(records.into_iter().filter(|r| r.offset >= next));
        next = end;
    }
    let want: Vec<Rec> =
        model.iter().filter(|r| r.offset >= log_start && r.offset < lso).cloned().collect();
    assert_eq!(got, want);
}

fn check(log: &mut Log, model: &[Rec], log_start: i64) {
    assert_eq!(log.log_end_offset(), model.len() as i64);
    assert_eq!(log.log_start_offset(), log_start);
    let expected: Vec<Rec> = model.iter().filter(|r| r.offset >= log_start).cloned().collect();
    // Small reads cross every batch and segment boundary; one big read returns whole batches.
    assert_eq!(read_all(log, log_start, 1), expected);
    assert_eq!(read_all(log, log_start, 1 << 20), expected);
    // Every offset reads from the batch holding it.
    for r in &expected {
        let data = log.read(r.offset, 1, true).expect("read");
        let got = common::decode(&data.records);
        assert!(got.iter().any(|g| g == r), "offset {} not in the batch read for it", r.offset);
        assert!(got.first().unwrap().offset <= r.offset);
    }
    // Reads outside [log start, log end] are refused; at the end they are empty.
    assert!(log.read(log.log_end_offset() + 1, 100, true).is_err());
    if log_start > 0 {
        assert!(log.read(log_start - 1, 100, true).is_err());
    }
    assert!(log.read(log.log_end_offset(), 100, true).unwrap().records.is_empty());
    // Timestamp lookups agree with a linear search for the first record at or after the target.
    for target in [0i64, 1, 999, 1000, 2500, 4999, 5000, 10_000] {
        let want = expected.iter().find(|r| r.timestamp >= target).map(|r| (r.timestamp, r.offset));
        assert_eq!(log.fetch_offset_by_timestamp(target).unwrap(), want, "timestamp {target}");
    }
    assert_eq!(
        log.fetch_offset_by_timestamp(LATEST_TIMESTAMP).unwrap(),
        Some((-1, model.len() as i64))
    );
    if let Some(max) = expected.iter().map(|r| r.timestamp).max() {
        let (ts, off) = log.fetch_offset_by_timestamp(MAX_TIMESTAMP).unwrap().unwrap();
        assert_eq!(ts, max);
        assert_eq!(model[off as usize].timestamp, max);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_model(ops in prop::collection::vec(op(), 1..40), segment_bytes in 200usize..4000, index_interval in 0usize..600) {
        let dir = tempfile::tempdir().unwrap();
        let clock_impl = MockClock::new(1_000);
        let clock: SharedClock = clock_impl.clone();
        let config = Arc::new(LogConfig::resolve(&Default::default(), common::overrides(&[
            ("segment.bytes", &segment_bytes.to_string()),
            ("index.interval.bytes", &index_interval.to_string()),
            ("message.timestamp.after.max.ms", "100000000"),
        ])).unwrap());
        let fresh = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
        let mut log = open(dir.path(), &config, &clock, fresh);
        let mut model: Vec<Rec> = Vec::new();
        let mut txn = TxnModel::default();
        let mut log_start = 0i64;
        for op in ops {
            match op {
                Op::Append { codec: c, records } => {
                    let keys: Vec<Vec<u8>> = records.iter().map(|r| format!("key-{}", r.1).into_bytes()).collect();
                    let values: Vec<Option<Vec<u8>>> = records.iter().map(|r| r.2.map(|n| vec![b'v'; n as usize])).collect();
                    let triples: Vec<_> = records.iter().enumerate().map(|(i, r)| (r.0, Some(&keys[i][..]), values[i].as_deref())).collect();
                    let mut bytes = batch(codec(c), &triples);
                    let info = log.append_as_leader(&mut bytes).unwrap();
                    prop_assert_eq!(info.first_offset, model.len() as i64);
                    for (i, r) in records.iter().enumerate() {
                        model.push(Rec { offset: model.len() as i64, timestamp: r.0, key: Some(keys[i].clone()), value: values[i].clone() });
                    }
                    prop_assert_eq!(info.last_offset, model.len() as i64 - 1);
                }
                Op::TxnAppend { pid, records } => txn_append(&mut log, &mut model, &mut txn, pid, &records),
                Op::Marker { pid, commit } => marker(&mut log, &mut model, &mut txn, clock.now_ms(), pid, commit),
                Op::Roll => log.roll_if_not_empty().unwrap(),
                Op::Reopen { clean } => {
                    if clean {
                        log.close().unwrap();
                    }
                    let load = LoadParams { recovery_point: log.recovery_point(), log_start_offset: log.log_start_offset(), clean_shutdown: clean };
                    drop(log);
                    log = open(dir.path(), &config, &clock, load);
                }
                Op::DeleteRecords(frac) => {
                    let target = txn.uncut(log_start + (model.len() as i64 - log_start) * frac as i64 / 255);
                    log_start = log.maybe_increment_log_start_offset(target).unwrap();
                    prop_assert_eq!(log_start, target.max(log_start));
                    // Segments wholly below the new start go away.
                    log.delete_old_segments().unwrap();
                    prop_assert!(log.segments().next().unwrap().base_offset() <= log_start);
                }
                Op::AdvanceClock(ms) => clock_impl.advance(ms),
            }
            check(&mut log, &model, log_start);
            check_transactions(&mut log, &model, &txn, log_start);
        }
        // Every segment but the active one respected segment.bytes (plus the batch that overflowed it).
        for seg in log.segments().rev().skip(1) {
            prop_assert!(seg.size() > 0);
        }
    }
}

#[test]
fn rolls_by_size_time_and_full_index() {
    let dir = tempfile::tempdir().unwrap();
    let clock_impl = MockClock::new(1_000_000);
    let clock: SharedClock = clock_impl.clone();
    let fresh = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    let rec = |ts: i64| batch(Compression::None, &[(ts, Some(b"k"), Some(&[7u8; 100]))]);
    let one = rec(0).len();

    // Size: a segment holds whole batches up to segment.bytes.
    let config = Arc::new(
        LogConfig::resolve(
            &Default::default(),
            common::overrides(&[("segment.bytes", &(one * 3).to_string())]),
        )
        .unwrap(),
    );
    let mut log = open(&dir.path().join("size"), &config, &clock, fresh);
    for _ in 0..7 {
        log.append_as_leader(&mut rec(1_000_000)).unwrap();
    }
    let sizes: Vec<u64> = log.segments().map(|s| s.size()).collect();
    assert_eq!(sizes, vec![3 * one as u64, 3 * one as u64, one as u64]);
    let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
    assert_eq!(bases, vec![0, 3, 6]);

    // Time: measured from the first batch's timestamp to the incoming batch's (Kafka's rule).
    let config = Arc::new(
        LogConfig::resolve(&Default::default(), common::overrides(&[("segment.ms", "1000")]))
            .unwrap(),
    );
    let mut log = open(&dir.path().join("time"), &config, &clock, fresh);
    log.append_as_leader(&mut rec(1_000_000)).unwrap();
    log.append_as_leader(&mut rec(1_001_000)).unwrap();
    assert_eq!(log.segments().len(), 1, "exactly segment.ms later does not roll");
    log.append_as_leader(&mut rec(1_001_001)).unwrap();
    assert_eq!(log.segments().len(), 2);
    assert_eq!(log.active_segment().base_offset(), 2);

    // Full index: segment.index.bytes of 24 holds three offset entries (and two
    // time entries, which equal timestamps never fill).
    let config = Arc::new(
        LogConfig::resolve(
            &Default::default(),
            common::overrides(&[("segment.index.bytes", "24"), ("index.interval.bytes", "0")]),
        )
        .unwrap(),
    );
    let mut log = open(&dir.path().join("index"), &config, &clock, fresh);
    for _ in 0..5 {
        log.append_as_leader(&mut rec(1_000_000)).unwrap();
    }
    let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
    assert_eq!(
        bases,
        vec![0, 4],
        "entries after batches 1, 2 and 3 filled the first segment's index"
    );
}

#[test]
fn retention_by_time_and_by_bytes_through_deleted_files() {
    let dir = tempfile::tempdir().unwrap();
    let clock_impl = MockClock::new(10_000_000);
    let clock: SharedClock = clock_impl.clone();
    let fresh = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    let rec = |ts: i64| batch(Compression::None, &[(ts, Some(b"k"), Some(&[1u8; 200]))]);
    let one = rec(0).len() as u64;

    let config = Arc::new(
        LogConfig::resolve(
            &Default::default(),
            common::overrides(&[
                ("segment.bytes", &one.to_string()),
                ("retention.ms", "5000"),
                ("file.delete.delay.ms", "1000"),
            ]),
        )
        .unwrap(),
    );
    let path = dir.path().join("time");
    let mut log = open(&path, &config, &clock, fresh);
    for ts in [10_000_000 - 9_000, 10_000_000 - 6_000, 10_000_000 - 1_000, 10_000_000] {
        log.append_as_leader(&mut rec(ts)).unwrap();
    }
    assert_eq!(log.segments().len(), 4);
    assert_eq!(log.delete_old_segments().unwrap(), 2, "the two segments older than retention.ms");
    assert_eq!(log.log_start_offset(), 2);
    let deleted: Vec<_> = std::fs::read_dir(&path)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".deleted"))
        .collect();
    assert_eq!(deleted.len(), 6, "three files per segment, renamed to .deleted");
    assert_eq!(log.delete_expired_files(clock.now_ms() + 999, false).unwrap(), 0);
    clock_impl.advance(1_000);
    assert_eq!(log.delete_expired_files(clock.now_ms(), false).unwrap(), 2);
    assert!(std::fs::read_dir(&path).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".deleted")));
    assert!(log.read(1, 100, true).is_err());
    assert_eq!(common::read_all(&log, 2, 1 << 20).len(), 2);

    // Bytes: keep the newest segments whose sum fits retention.bytes.
    let config = Arc::new(
        LogConfig::resolve(
            &Default::default(),
            common::overrides(&[
                ("segment.bytes", &one.to_string()),
                ("retention.bytes", &(one * 2 + 10).to_string()),
            ]),
        )
        .unwrap(),
    );
    let mut log = open(&dir.path().join("bytes"), &config, &clock, fresh);
    for _ in 0..5 {
        log.append_as_leader(&mut rec(clock.now_ms())).unwrap();
    }
    // Kafka's rule: delete the oldest segment only while the rest is still at
    // least retention.bytes, so the partition stays within one segment above it.
    assert_eq!(log.delete_old_segments().unwrap(), 2);
    assert_eq!(log.size(), 3 * one);
    assert_eq!(log.log_start_offset(), 2);

    // A compact-only topic ignores time and size retention.
    let config = Arc::new(
        LogConfig::resolve(
            &Default::default(),
            common::overrides(&[
                ("segment.bytes", &one.to_string()),
                ("retention.bytes", "0"),
                ("cleanup.policy", "compact"),
            ]),
        )
        .unwrap(),
    );
    let mut log = open(&dir.path().join("compact"), &config, &clock, fresh);
    for _ in 0..3 {
        log.append_as_leader(&mut rec(0)).unwrap();
    }
    assert_eq!(log.delete_old_segments().unwrap(), 0);
}

#[test]
fn keyless_records_are_refused_on_compacted_topics_only() {
    let dir = tempfile::tempdir().unwrap();
    let clock: SharedClock = MockClock::new(1_000);
    let fresh = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    let compact = Arc::new(
        LogConfig::resolve(
            &Default::default(),
            common::overrides(&[("cleanup.policy", "compact")]),
        )
        .unwrap(),
    );
    let mut log = open(&dir.path().join("c"), &compact, &clock, fresh);
    let mut keyless =
        batch(Compression::None, &[(1_000, Some(b"k"), Some(b"v")), (1_000, None, Some(b"v"))]);
    let err = log.append_as_leader(&mut keyless.clone()).unwrap_err();
    assert!(
        matches!(
            err,
            sediment::log::LogError::Batch(sediment::log::BatchError::InvalidRecord {
                index: 1,
                ..
            })
        ),
        "{err}"
    );
    assert_eq!(log.log_end_offset(), 0, "nothing of a refused batch is appended");
    let mut log = open(&dir.path().join("d"), &Arc::new(LogConfig::default()), &clock, fresh);
    log.append_as_leader(&mut keyless).unwrap();
    assert_eq!(log.log_end_offset(), 2);
}

#[test]
fn log_append_time_overwrites_timestamps_and_keeps_crc_valid() {
    let dir = tempfile::tempdir().unwrap();
    let clock: SharedClock = MockClock::new(77_000);
    let fresh = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    let config = Arc::new(
        LogConfig::resolve(
            &Default::default(),
            common::overrides(&[("message.timestamp.type", "LogAppendTime")]),
        )
        .unwrap(),
    );
    let mut log = open(dir.path(), &config, &clock, fresh);
    let info = log
        .append_as_leader(&mut batch(
            Compression::Lz4,
            &[(5, Some(b"a"), Some(b"1")), (6, Some(b"b"), Some(b"2"))],
        ))
        .unwrap();
    assert_eq!(info.log_append_time, 77_000);
    let data = log.read(0, 1 << 20, true).unwrap();
    let h = sediment::log::record_batch::check_batch(&data.records, usize::MAX).unwrap();
    assert_eq!(h.max_timestamp, 77_000);
    assert_eq!(h.timestamp_type(), sediment::log::record_batch::TimestampType::LogAppendTime);
}

/// Compaction leaves offset gaps; a read at a missing offset returns the batch
/// holding the next offset that exists (the seeds' "a read at offset 1 returns 4").
#[test]
fn reads_across_offset_gaps_return_the_next_offset_present() {
    use sediment::log::record_batch::set_base_offset;
    use sediment::log::segment::{LogSegment, SegmentConfig};
    let dir = tempfile::tempdir().unwrap();
    let seg_config =
        SegmentConfig { index_interval_bytes: 0, max_index_size: 1 << 20, max_batch_size: 1 << 20 };
    // Two segments as a cleaner would leave them: batches at offsets 0, 4-5, 9 and 20-21.
    for (base, batches) in [(0i64, vec![(0i64, 1usize), (4, 2)]), (9, vec![(9, 1), (20, 2)])] {
        let mut seg = LogSegment::create(dir.path(), base, seg_config, "", 0).unwrap();
        for (offset, n) in batches {
            let records: Vec<common::RecordSpec<'_>> =
                (0..n).map(|_| (100, Some(&b"k"[..]), Some(&b"v"[..]))).collect();
            let mut b = batch(Compression::None, &records);
            set_base_offset(&mut b, offset);
            seg.append(&b).unwrap();
        }
        seg.on_become_inactive().unwrap();
        seg.flush().unwrap();
    }
    let clock: SharedClock = MockClock::new(1_000);
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: false };
    let log = open(dir.path(), &Arc::new(LogConfig::default()), &clock, load);
    assert_eq!(log.log_end_offset(), 22);
    let first_offset_read =
        |at: i64| common::decode(&log.read(at, 1, true).unwrap().records)[0].offset;
    for (at, expect) in
        [(0, 0), (1, 4), (3, 4), (5, 4), (6, 9), (8, 9), (10, 20), (19, 20), (21, 20)]
    {
        assert_eq!(first_offset_read(at), expect, "read at {at}");
    }
    let offsets: Vec<i64> = common::read_all(&log, 0, 1).iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![0, 4, 5, 9, 20, 21]);
}

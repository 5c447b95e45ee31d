//! The manager's choice, states, checkpoints and history, over real logs
//! with a mock clock.

use std::collections::BTreeMap;

use super::super::last_clean::CLEAN_HISTORY;
use super::super::log_to_clean::OpenTransaction;
use super::super::stats::CleanerStats;
use super::super::status::Ineligible;
use super::super::tiered_store::StoreCleanState;
use super::*;
use crate::clock::{Clock, MockClock};
use crate::log::compression::Compression;
use crate::log::record_batch::BatchBuilder;
use crate::log::LogManagerConfig;

struct Fixture {
    _dir: tempfile::TempDir,
    clock: Arc<MockClock>,
    logs: Arc<LogManager>,
    manager: LogCleanerManager,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_000_000);
    let logs =
        Arc::new(LogManager::open(LogManagerConfig::new(dir.path()), clock.clone()).unwrap());
    let manager = LogCleanerManager::new(Arc::clone(&logs), clock.clone(), 60_000);
    Fixture { _dir: dir, clock, logs, manager }
}

/// A fixture whose manager reads the store's part of `tp` from the returned store.
fn fixture_with_store(tp: &TopicPartition) -> (Fixture, Arc<FixedStore>) {
    let store = Arc::new(FixedStore(tp.clone(), parking_lot::Mutex::new(None)));
    let mut f = fixture();
    let tiered_store: Arc<dyn TieredStore> = store.clone();
    let collaborators =
        CleanerCollaborators { tiered_store: Some(tiered_store), ..Default::default() };
    f.manager = LogCleanerManager::new(Arc::clone(&f.logs), f.clock.clone(), 60_000)
        .with_collaborators(collaborators);
    (f, store)
}

fn compacted(f: &Fixture, name: &str, extra: &[(&str, &str)]) -> TopicPartition {
    let mut overrides: BTreeMap<String, String> =
        [("cleanup.policy".to_string(), "compact".to_string())].into();
    for (k, v) in extra {
        overrides.insert(k.to_string(), v.to_string());
    }
    f.logs.create_topic(name, 1, overrides).unwrap();
    TopicPartition::new(name, 0)
}

/// Append `keys` (one record each, value = key) as one batch, then roll so they are closed.
fn append_closed(f: &Fixture, tp: &TopicPartition, keys: &[&str]) {
    let log = f.logs.get_log(tp).unwrap();
    let mut log = log.write();
    let mut b = BatchBuilder::new(Compression::None, f.clock.now_ms());
    for k in keys {
        b.append(f.clock.now_ms(), Some(k.as_bytes()), Some(b"value-of-some-length"));
    }
    log.append_as_leader(&mut b.build()).unwrap();
    log.roll_if_not_empty().unwrap();
}

fn set_checkpoint(f: &Fixture, tp: &TopicPartition, offset: i64) {
    let dir = f.logs.get_log(tp).unwrap().read().dir().parent().unwrap().to_path_buf();
    CleanerOffsetCheckpoint::new(&dir).update(tp, offset).unwrap();
}

fn finish(f: &Fixture, g: &GrabbedLog) {
    let end = g.to_clean.first_uncleanable_offset;
    f.manager
        .done_cleaning(
            g,
            &CleanResult { end_offset: end, stats: Default::default(), kept_tombstones: None },
        )
        .unwrap();
}

#[test]
fn filthiest_first_then_the_next() {
    let f = fixture();
    // Each log: a clean segment of 4 records, then d dirty segments of 4.
    let a = compacted(&f, "a", &[("min.cleanable.dirty.ratio", "0.1")]);
    let b = compacted(&f, "b", &[("min.cleanable.dirty.ratio", "0.1")]);
    let c = compacted(&f, "c", &[("min.cleanable.dirty.ratio", "0.1")]);
    for (tp, dirty) in [(&a, 1), (&b, 3), (&c, 2)] {
        append_closed(&f, tp, &["k1", "k2", "k3", "k4"]);
        for _ in 0..dirty {
            append_closed(&f, tp, &["k1", "k2", "k3", "k4"]);
        }
        set_checkpoint(&f, tp, 4);
    }
    let now = f.clock.now_ms();
    let first = f.manager.grab_filthiest_compacted_log(now).unwrap();
    assert_eq!(first.to_clean.topic_partition, b, "3/4 dirty beats 2/3 and 1/2");
    assert!((first.to_clean.cleanable_ratio() - 0.75).abs() < 1e-9);
    assert_eq!(f.manager.status().max_dirty_percent, 75);
    assert_eq!(f.manager.cleaning_state(&b), Some(LogCleaningState::InProgress));
    // b is in progress: the next thread takes c, then a.
    let second = f.manager.grab_filthiest_compacted_log(now).unwrap();
    assert_eq!(second.to_clean.topic_partition, c);
    let third = f.manager.grab_filthiest_compacted_log(now).unwrap();
    assert_eq!(third.to_clean.topic_partition, a);
    assert!(f.manager.grab_filthiest_compacted_log(now).is_none());
    for g in [&first, &second, &third] {
        finish(&f, g);
    }
    // Checkpoints moved to the end of the cleaned ranges: nothing dirty now.
    assert!(f.manager.grab_filthiest_compacted_log(now).is_none());
    assert_eq!(f.manager.status().max_dirty_percent, 0);
    let cp = CleanerOffsetCheckpoint::new(f._dir.path()).read().unwrap();
    assert_eq!(cp[&b], 16);
    assert_eq!(cp[&a], 8);
}

#[test]
fn under_the_ratio_waits_for_max_compaction_lag() {
    let f = fixture();
    let tp = compacted(
        &f,
        "lazy",
        &[("min.cleanable.dirty.ratio", "0.9"), ("max.compaction.lag.ms", "60000")],
    );
    append_closed(&f, &tp, &["k1", "k2", "k3", "k4"]);
    append_closed(&f, &tp, &["k1", "k2", "k3", "k4"]);
    set_checkpoint(&f, &tp, 4);
    assert!(
        f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none(),
        "ratio 0.5 is under 0.9"
    );
    let st = f.manager.status();
    assert!(
        matches!(st.partitions[0].ineligible, Some(Ineligible::UnderRatio { .. })),
        "{:?}",
        st.partitions[0]
    );
    f.clock.advance(59_999);
    assert!(
        f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none(),
        "lag not yet passed"
    );
    f.clock.advance(2);
    let g = f
        .manager
        .grab_filthiest_compacted_log(f.clock.now_ms())
        .expect("max.compaction.lag.ms passed");
    assert_eq!(g.to_clean.topic_partition, tp);
    assert_eq!(f.manager.status().max_compaction_delay_ms, 1, "the max-compaction-delay gauge");
    finish(&f, &g);
}

#[test]
fn runtime_config_changes_are_read_at_each_decision() {
    let f = fixture();
    let tp = compacted(&f, "t", &[("min.cleanable.dirty.ratio", "0.9")]);
    append_closed(&f, &tp, &["k1", "k2"]);
    append_closed(&f, &tp, &["k1", "k2"]);
    set_checkpoint(&f, &tp, 2);
    assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none());
    let overrides: BTreeMap<String, String> =
        [("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0.1")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    f.logs.alter_topic_config("t", overrides).unwrap();
    assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_some());
}

/// The coordinator as the status sees it: one transactional id, for pid 42.
#[derive(Debug)]
struct OneTxnId;

impl ProducerIdResolver for OneTxnId {
    fn transactional_id(&self, producer_id: i64) -> Option<String> {
        (producer_id == 42).then(|| "app-7".to_string())
    }
}

#[test]
fn an_open_transaction_bounds_cleaning_and_is_named() {
    use crate::log::control_record::EndTransactionMarker;
    let f = fixture();
    let named = LogCleanerManager::new(Arc::clone(&f.logs), f.clock.clone(), 60_000)
        .with_producer_id_resolver(Arc::new(OneTxnId));
    let tp = compacted(&f, "txn", &[]);
    append_closed(&f, &tp, &["k1", "k1"]);
    let log = f.logs.get_log(&tp).unwrap();
    // The age counts from the broker's append, not the batch's timestamp.
    let mut b = BatchBuilder::new(Compression::None, 0).producer(42, 0, 0);
    b.transactional = true;
    b.append(0, Some(b"k1"), Some(b"uncommitted"));
    log.write().append_as_leader(&mut b.build()).unwrap();
    log.write().roll_if_not_empty().unwrap();
    append_closed(&f, &tp, &["k2"]);
    f.clock.advance(5000);
    // The transaction opens the dirty range: it is why nothing is cleaned.
    set_checkpoint(&f, &tp, 2);
    let open = |id: Option<&str>| OpenTransaction {
        producer_id: 42,
        first_offset: 2,
        age_ms: Some(5000),
        transactional_id: id.map(str::to_string),
    };
    for (manager, id) in [(&f.manager, None), (&named, Some("app-7"))] {
        let st = manager.status();
        let p = &st.partitions[0];
        assert_eq!(p.first_uncleanable_offset, 2, "the first unstable offset bounds the range");
        assert_eq!(p.open_transaction, Some(open(id)));
        assert_eq!(p.ineligible, Some(Ineligible::OpenTransaction(open(id))));
        let reason = p.reason.clone().unwrap();
        assert!(reason.contains("producer id 42") && reason.contains("for 5s"), "{reason}");
        match id {
            None => assert!(reason.contains("no transactional id known"), "{reason}"),
            Some(_) => assert!(reason.contains("transactional id \"app-7\""), "{reason}"),
        }
    }
    assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none());
    // Dirty data below it: cleanable up to it, and the holder still named.
    set_checkpoint(&f, &tp, 0);
    let named = LogCleanerManager::new(Arc::clone(&f.logs), f.clock.clone(), 60_000)
        .with_producer_id_resolver(Arc::new(OneTxnId));
    let st = named.status();
    assert!(st.partitions[0].eligible, "{:?}", st.partitions[0].ineligible);
    assert_eq!(st.partitions[0].open_transaction, Some(open(Some("app-7"))));
    // Committed: the bound is the active segment again.
    log.write().append_end_txn_marker(42, 0, EndTransactionMarker::commit(0)).unwrap();
    log.write().roll_if_not_empty().unwrap();
    let st = named.status();
    let p = &st.partitions[0];
    assert_eq!(p.open_transaction, None);
    assert_eq!(p.first_uncleanable_offset, log.read().active_segment().base_offset());
    assert!(p.eligible, "{:?}", p.ineligible);
}

#[test]
fn min_lag_only_active_and_no_dirty_reasons() {
    let f = fixture();
    let lag = compacted(&f, "lag", &[("min.compaction.lag.ms", "60000")]);
    append_closed(&f, &lag, &["k1", "k1"]);
    let active = compacted(&f, "active", &[]);
    {
        let log = f.logs.get_log(&active).unwrap();
        let mut b = BatchBuilder::new(Compression::None, f.clock.now_ms());
        b.append(f.clock.now_ms(), Some(b"k"), Some(b"v"));
        log.write().append_as_leader(&mut b.build()).unwrap();
    }
    let st = f.manager.status();
    let reason = |t: &str| st.partitions.iter().find(|p| p.topic == t).unwrap().ineligible.clone();
    assert_eq!(reason("lag"), Some(Ineligible::InsideMinCompactionLag));
    assert_eq!(reason("active"), Some(Ineligible::OnlyActiveSegmentDirty));
    f.clock.advance(60_001);
    assert_eq!(
        f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap().to_clean.topic_partition,
        lag
    );
}

#[test]
fn state_transitions_and_illegal_ones() {
    let f = fixture();
    let tp = compacted(&f, "s", &[]);
    append_closed(&f, &tp, &["k1", "k1"]);
    // Idle: resume and release are illegal.
    assert!(f.manager.resume(&tp).is_err());
    assert!(f.manager.release(&tp).is_err());
    // Paused nests and is never grabbed.
    f.manager.abort_and_pause(&tp);
    f.manager.abort_and_pause(&tp);
    assert_eq!(f.manager.cleaning_state(&tp), Some(LogCleaningState::Paused(2)));
    assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none());
    f.manager.resume(&tp).unwrap();
    f.manager.resume(&tp).unwrap();
    assert_eq!(f.manager.cleaning_state(&tp), None);
    // In progress, then aborted by another thread: that thread waits until
    // the cleaner releases, and then owns Paused(1).
    let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
    let manager = Arc::new(f.manager);
    let m2 = Arc::clone(&manager);
    let tp2 = tp.clone();
    let pauser = std::thread::spawn(move || m2.abort_and_pause(&tp2));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !g.cancel.is_cancelled() {
        assert!(std::time::Instant::now() < deadline, "abort never cancelled the clean");
        std::thread::yield_now();
    }
    assert_eq!(manager.cleaning_state(&tp), Some(LogCleaningState::Aborted));
    assert!(manager.resume(&tp).is_err(), "aborted is not paused yet");
    manager.release(&tp).unwrap();
    pauser.join().unwrap();
    assert_eq!(manager.cleaning_state(&tp), Some(LogCleaningState::Paused(1)));
    assert!(manager.release(&tp).is_err(), "a paused partition is not being cleaned");
    manager.resume(&tp).unwrap();
    assert_eq!(manager.cleaning_state(&tp), None);
}

#[test]
fn uncleanable_is_skipped_until_the_backoff_and_counted() {
    let f = fixture();
    let bad = compacted(&f, "bad", &[]);
    let good = compacted(&f, "good", &[]);
    append_closed(&f, &bad, &["k1", "k1", "k1"]);
    append_closed(&f, &good, &["k1", "k1"]);
    let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
    let first = g.to_clean.topic_partition.clone();
    f.manager.mark_uncleanable(&first, "corrupt batch".into());
    f.manager.release(&first).unwrap();
    let next = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
    assert_ne!(next.to_clean.topic_partition, first);
    finish(&f, &next);
    let st = f.manager.status();
    assert_eq!(st.log_dirs[0].uncleanable_partitions, 1);
    assert!(st.log_dirs[0].uncleanable_bytes > 0);
    assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none());
    f.clock.advance(60_000);
    let retry = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
    assert_eq!(retry.to_clean.topic_partition, first);
    finish(&f, &retry);
    assert_eq!(
        f.manager.status().log_dirs[0].uncleanable_partitions,
        0,
        "a successful clean clears it"
    );
}

#[test]
fn an_expired_delete_horizon_schedules_a_clean() {
    let f = fixture();
    let tp = compacted(&f, "h", &[("min.cleanable.dirty.ratio", "0.9")]);
    append_closed(&f, &tp, &["k1", "k2"]);
    let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
    let horizon = f.clock.now_ms() + 1000;
    let stats = crate::cleaner::CleanerStats {
        latest_delete_horizon_ms: Some(horizon),
        ..Default::default()
    };
    f.manager
        .done_cleaning(&g, &CleanResult { end_offset: 2, stats, kept_tombstones: None })
        .unwrap();
    assert!(f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none());
    f.clock.advance(1000);
    let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).expect("horizon passed");
    assert!(g.for_delete_horizon);
    finish(&f, &g);
    f.clock.advance(1000);
    assert!(
        f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).is_none(),
        "no horizon left: no loop"
    );
}

#[test]
fn deleting_a_topic_forgets_its_checkpoint() {
    let f = fixture();
    let tp = compacted(&f, "gone", &[]);
    append_closed(&f, &tp, &["k1", "k1"]);
    let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
    finish(&f, &g);
    let cp = CleanerOffsetCheckpoint::new(f._dir.path());
    assert_eq!(cp.read().unwrap().get(&tp), Some(&2));
    f.manager.abort_cleaning_and_forget(&tp, f._dir.path());
    assert_eq!(cp.read().unwrap().get(&tp), None);
    assert_eq!(f.manager.cleaning_state(&tp), None);
}

/// The history keeps the last CLEAN_HISTORY cleans, oldest first, and
/// `last_clean` is its newest.
#[test]
fn the_clean_history_is_bounded_and_ordered() {
    let f = fixture();
    let tp = compacted(&f, "h", &[("min.cleanable.dirty.ratio", "0.01")]);
    for round in 0..CLEAN_HISTORY + 3 {
        append_closed(&f, &tp, &["k1", "k2"]);
        f.clock.advance(1_000);
        let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).unwrap();
        let end = g.to_clean.first_uncleanable_offset;
        let stats = CleanerStats { start_ms: round as i64, ..Default::default() };
        f.manager
            .done_cleaning(&g, &CleanResult { end_offset: end, stats, kept_tombstones: None })
            .unwrap();
    }
    let status = f.manager.status();
    let p = status.partitions.iter().find(|p| p.topic == "h").unwrap();
    let starts: Vec<i64> = p.history.iter().map(|c| c.start_time_ms).collect();
    let want: Vec<i64> = (3..CLEAN_HISTORY as i64 + 3).collect();
    assert_eq!(starts, want);
    assert_eq!(p.last_clean.as_ref().map(|c| c.start_time_ms), want.last().copied());
}

#[test]
fn the_oldest_dirty_timestamp_follows_the_checkpoint() {
    let f = fixture();
    let first = f.clock.now_ms();
    let (whole, half) = (compacted(&f, "whole", &[]), compacted(&f, "half", &[]));
    for tp in [&whole, &half] {
        append_closed(&f, tp, &["k1", "k2"]);
    }
    f.clock.advance(5_000);
    for tp in [&whole, &half] {
        append_closed(&f, tp, &["k1", "k3"]);
    }
    set_checkpoint(&f, &half, 2);
    let dirty_ts = |f: &Fixture, tp: &TopicPartition| {
        let st = f.manager.status();
        st.partitions.iter().find(|p| p.topic == tp.topic).unwrap().oldest_dirty_timestamp_ms
    };
    assert_eq!(dirty_ts(&f, &whole), Some(first), "nothing cleaned: the log's first batch");
    assert_eq!(dirty_ts(&f, &half), Some(first + 5_000), "the batch at the checkpoint");
    let g = f.manager.grab_filthiest_compacted_log(f.clock.now_ms()).expect("whole is dirty");
    assert_eq!(g.to_clean.topic_partition, whole);
    finish(&f, &g);
    assert_eq!(dirty_ts(&f, &whole), None, "cleaned through the end: nothing past the checkpoint");
}

#[test]
fn with_remote_storage_an_open_transaction_bounds_cleaning_at_its_segment() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_000_000);
    let mut config = LogManagerConfig::new(dir.path());
    config.remote_log_storage_system_enable = true;
    let logs = Arc::new(LogManager::open(config, clock.clone()).unwrap());
    let f = Fixture {
        manager: LogCleanerManager::new(Arc::clone(&logs), clock.clone(), 60_000),
        _dir: dir,
        clock,
        logs,
    };
    let local = compacted(&f, "local", &[]);
    let remote = compacted(&f, "remote", &[("remote.storage.enable", "true")]);
    for tp in [&local, &remote] {
        append_closed(&f, tp, &["k1", "k2"]);
        // One segment: committed k1 at 2, then an open transaction from 3.
        let log = f.logs.get_log(tp).unwrap();
        let mut b = BatchBuilder::new(Compression::None, f.clock.now_ms());
        b.append(f.clock.now_ms(), Some(b"k1"), Some(b"newer"));
        log.write().append_as_leader(&mut b.build()).unwrap();
        let mut b = BatchBuilder::new(Compression::None, f.clock.now_ms()).producer(42, 0, 0);
        b.transactional = true;
        b.append(f.clock.now_ms(), Some(b"k2"), Some(b"uncommitted"));
        log.write().append_as_leader(&mut b.build()).unwrap();
        log.write().roll_if_not_empty().unwrap();
    }
    let st = f.manager.status();
    let of = |tp: &TopicPartition| st.partitions.iter().find(|p| p.topic == tp.topic).unwrap();
    assert_eq!(of(&local).first_uncleanable_offset, 3, "the first unstable offset itself");
    // Only segments wholly below the last stable offset go to the store, so
    // k1 at 2 must not let a clean drop k1 at 0 before its segment is there.
    assert_eq!(of(&remote).first_uncleanable_offset, 2, "the base of its segment");
    let open = of(&remote).open_transaction.as_ref().expect("named as what holds it back");
    assert_eq!((open.producer_id, open.first_offset), (42, 3));
}

/// A store that measured one partition (once the test set its measure).
#[derive(Debug)]
struct FixedStore(TopicPartition, parking_lot::Mutex<Option<StoreCleanState>>);

impl FixedStore {
    fn measure(&self, state: StoreCleanState) {
        *self.1.lock() = Some(state);
    }
}

impl TieredStore for FixedStore {
    fn store_clean_state(&self, tp: &TopicPartition) -> Option<StoreCleanState> {
        if *tp == self.0 {
            self.1.lock().clone()
        } else {
            None
        }
    }

    fn store_only_segments(
        &self,
        _: &TopicPartition,
        _: std::ops::Range<i64>,
        _: crate::log::segment::SegmentConfig,
    ) -> Result<Arc<dyn super::super::store_segments::StoreSegmentSource>, String> {
        Err("not in this test".into())
    }
}

#[test]
fn the_status_shows_the_store_and_max_dirty_percent_counts_it() {
    let (f, tiered) = fixture_with_store(&TopicPartition::new("tiered", 0));
    let tp = compacted(&f, "tiered", &[("min.cleanable.dirty.ratio", "0.9")]);
    append_closed(&f, &tp, &["k1", "k2"]);
    append_closed(&f, &tp, &["k1", "k2"]);
    set_checkpoint(&f, &tp, 4);
    let log = f.logs.get_log(&tp).unwrap();
    let store_segment = |base, next| crate::log::StoreSegment {
        base_offset: base,
        next_offset: next,
        size_in_bytes: 1000,
        largest_timestamp: -1,
    };
    // The store lists both local segments (uploaded, still local): none is
    // only in the store.
    log.write().set_store_segments(vec![store_segment(0, 2), store_segment(2, 4)]);
    let status = f.manager.status();
    let p = &status.partitions[0];
    let store = p.store.as_ref().expect("a store section");
    assert_eq!((store.remote_bytes, store.remote_segments, store.store_only_bytes), (2000, 2, 0));
    assert_eq!((store.cleaning.as_ref(), store.tiered_dirty_ratio), (None, None));
    assert_eq!(status.max_dirty_percent, 0, "no choice was made and no store measured");

    let measured = StoreCleanState {
        rewritable: true,
        clean_bytes: 100,
        dirty_bytes: 900,
        dirty_ratio: 0.9,
        ..Default::default()
    };
    tiered.measure(measured.clone());
    let status = f.manager.status();
    let store = status.partitions[0].store.clone().unwrap();
    assert_eq!(store.cleaning, Some(measured));
    let p = &status.partitions[0];
    // Nothing is only in the store: the whole log's ratio is the local one.
    let whole = p.cleanable_bytes as f64 / (p.clean_bytes + p.cleanable_bytes) as f64;
    assert_eq!(store.tiered_dirty_ratio, Some(whole));
    assert_eq!(status.max_dirty_percent, 90, "the store's ratio, above the local one");
    // Nothing the store cleaner could rewrite: not counted.
    let idle = StoreCleanState { rewritable: false, dirty_ratio: 0.9, ..Default::default() };
    let (f2, tiered2) = fixture_with_store(&TopicPartition::new("tiered", 0));
    let tp2 = compacted(&f2, "tiered", &[]);
    append_closed(&f2, &tp2, &["k1"]);
    f2.logs.get_log(&tp2).unwrap().write().set_store_segments(vec![store_segment(0, 1)]);
    tiered2.measure(idle);
    assert_eq!(f2.manager.status().max_dirty_percent, 0);
}

#[test]
fn a_truncation_lowers_the_cleaner_checkpoint_and_writes_the_recovery_points() {
    use crate::log::checkpoint::{OffsetCheckpointFile, RECOVERY_POINT_CHECKPOINT};
    let f = fixture();
    let tp = compacted(&f, "cut", &[]);
    for i in 0..6 {
        append_closed(&f, &tp, &[&format!("k{i}")]);
    }
    set_checkpoint(&f, &tp, 5);
    let log_dir = f.logs.get_log(&tp).unwrap().read().dir().parent().unwrap().to_path_buf();
    f.logs.get_log(&tp).unwrap().write().flush().unwrap();
    f.logs.checkpoint_all().unwrap();
    let recovery_points = OffsetCheckpointFile::new(&log_dir, RECOVERY_POINT_CHECKPOINT);
    assert_eq!(recovery_points.read().unwrap().get(&tp), Some(&6));

    let truncated = f.logs.truncate_to(&tp, 3, Some(&f.manager)).unwrap();
    assert!(truncated);
    assert_eq!(f.manager.lock().checkpoint_of(&log_dir, &tp), Some(3), "in memory");
    let on_disk = CleanerOffsetCheckpoint::new(&log_dir).read().unwrap();
    assert_eq!(on_disk.get(&tp), Some(&3), "on disk");
    assert_eq!(recovery_points.read().unwrap().get(&tp), Some(&3), "written before any append");
    // Cleaning was resumed: the partition is not left paused.
    assert!(!f.manager.lock().states.contains_key(&tp));
    // A cut at or past the end changes nothing, and a checkpoint below the
    // cut stays.
    assert!(!f.logs.truncate_to(&tp, 3, Some(&f.manager)).unwrap());
    f.logs.get_log(&tp).unwrap().write().append_as_leader(&mut plain_batch(&f, "k9")).unwrap();
    set_checkpoint(&f, &tp, 1);
    f.manager.lock().checkpoints.clear();
    assert!(f.logs.truncate_to(&tp, 2, Some(&f.manager)).unwrap());
    assert_eq!(CleanerOffsetCheckpoint::new(&log_dir).read().unwrap().get(&tp), Some(&1));
}

fn plain_batch(f: &Fixture, key: &str) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, f.clock.now_ms());
    b.append(f.clock.now_ms(), Some(key.as_bytes()), Some(b"v"));
    b.build()
}

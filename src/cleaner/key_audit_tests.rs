//! The key audit over real segment files: copies, regions, guarantees and
//! verdicts, with a mock clock.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use std::fs::File;
use std::path::PathBuf;

use crate::cleaner::store_segments::{FetchedSegment, StoreSegmentMeta, StoreSegmentSource};
use crate::cleaner::StoreCleanState;
use crate::clock::{Clock, MockClock};
use crate::log::compression::Compression;
use crate::log::record_batch::BatchBuilder;
use crate::log::{LogManager, LogManagerConfig};

const MINUTE: i64 = 60_000;

struct Fixture {
    _dir: tempfile::TempDir,
    clock: Arc<MockClock>,
    logs: Arc<LogManager>,
}

fn fixture(extra: &[(&str, &str)]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(10_000_000);
    let logs =
        Arc::new(LogManager::open(LogManagerConfig::new(dir.path()), clock.clone()).unwrap());
    let mut overrides: BTreeMap<String, String> =
        [("cleanup.policy".to_string(), "compact".to_string())].into();
    for (k, v) in extra {
        overrides.insert(k.to_string(), v.to_string());
    }
    logs.create_topic("t", 1, overrides).unwrap();
    Fixture { _dir: dir, clock, logs }
}

impl Fixture {
    /// Append one record (a tombstone when `value` is `None`); `roll` closes its segment.
    fn write(&self, key: &str, value: Option<&str>, roll: bool) {
        let log = self.logs.get_log(&TopicPartition::new("t", 0)).unwrap();
        let mut log = log.write();
        let mut b = BatchBuilder::new(Compression::None, self.clock.now_ms());
        b.append(self.clock.now_ms(), Some(key.as_bytes()), value.map(str::as_bytes));
        log.append_as_leader(&mut b.build()).unwrap();
        if roll {
            log.roll_if_not_empty().unwrap();
        }
    }

    fn audit(&self, key: &str, checkpoint: Option<i64>) -> KeyAudit {
        let cleaner = CleanerView { enabled: true, backoff_ms: 15_000, blocked: None };
        self.audit_with(key, checkpoint, cleaner)
    }

    fn audit_with(&self, key: &str, checkpoint: Option<i64>, cleaner: CleanerView) -> KeyAudit {
        let log = self.logs.get_log(&TopicPartition::new("t", 0)).unwrap();
        let view = PartitionView::of_log(&log.read(), checkpoint, cleaner).unwrap();
        audit(&view, key.as_bytes(), self.clock.now_ms(), None).unwrap()
    }
}

#[test]
fn superseded_copies_are_pending_until_max_compaction_lag() {
    let f = fixture(&[("max.compaction.lag.ms", &(10 * MINUTE).to_string())]);
    let start = f.clock.now_ms();
    for i in 0..5 {
        f.write("k", Some(&format!("v{i}")), true);
        f.write("other", Some("x"), false);
    }
    f.write("other", Some("x"), false);
    let a = f.audit("k", None);
    assert_eq!(a.copies.len(), 5);
    assert_eq!(a.copies.iter().filter(|c| c.superseded).count(), 4);
    assert!(a.copies.iter().all(|c| c.region == Region::Dirty), "{:?}", a.copies);
    assert_eq!(a.verdict, Verdict::Pending);
    // The dirty ratio is 1 (nothing clean yet): eligible now, plus one backoff.
    assert_eq!(a.guaranteed_by_ms, Some(start + 15_000));
    assert_eq!(a.segments_read, 6);
    assert!(a.bytes_read > 0);
    assert_eq!(a.key, "k");
}

#[test]
fn under_the_ratio_the_max_lag_bounds_the_time_and_without_it_nothing_does() {
    for (lag, expect) in [(Some(10 * MINUTE), true), (None, false)] {
        let lag_text = lag.map(|l| l.to_string());
        let mut extra = vec![("min.cleanable.dirty.ratio", "0.9")];
        if let Some(l) = &lag_text {
            extra.push(("max.compaction.lag.ms", l));
        }
        let f = fixture(&extra);
        let start = f.clock.now_ms();
        f.write("k", Some("old"), false);
        for _ in 0..8 {
            f.write("filler", Some("x"), true);
        }
        f.clock.advance(MINUTE);
        f.write("k", Some("new"), true);
        f.write("tail", Some("x"), false);
        // Everything before the newest copy's segment counts as clean.
        let a = f.audit("k", Some(9));
        assert_eq!(a.copies[0].region, Region::Clean);
        assert_eq!(a.copies[1].region, Region::Dirty);
        assert!(a.regions.dirty_ratio < 0.9);
        assert_eq!(a.verdict, Verdict::Pending);
        if expect {
            let began = start + MINUTE;
            assert_eq!(a.guaranteed_by_ms, Some(began + 10 * MINUTE + 15_000));
        } else {
            assert_eq!(a.guaranteed_by_ms, None);
            let why = a.no_guarantee.unwrap();
            assert!(why.contains("max.compaction.lag.ms is not set"), "{why}");
        }
    }
}

#[test]
fn a_newer_copy_in_the_active_segment_guarantees_nothing() {
    let f = fixture(&[]);
    f.write("k", Some("old"), true);
    f.write("k", Some("new"), false);
    let a = f.audit("k", None);
    assert_eq!(a.copies[1].region, Region::ActiveSegment);
    assert_eq!(a.verdict, Verdict::Pending);
    let why = a.no_guarantee.unwrap();
    assert!(why.contains("active segment"), "{why}");
}

#[test]
fn min_compaction_lag_delays_the_newer_copy() {
    let f = fixture(&[("min.compaction.lag.ms", &(5 * MINUTE).to_string())]);
    let start = f.clock.now_ms();
    f.write("k", Some("old"), true);
    f.write("k", Some("new"), true);
    f.write("tail", Some("x"), false);
    let a = f.audit("k", None);
    assert_eq!(a.copies[0].region, Region::MinCompactionLag);
    assert_eq!(a.regions.first_uncleanable_offset, 0);
    assert_eq!(a.guaranteed_by_ms, Some(start + 5 * MINUTE + 15_000));
}

#[test]
fn verdicts_absent_live_erased() {
    let f = fixture(&[("delete.retention.ms", &MINUTE.to_string())]);
    f.write("k", Some("v"), true);
    f.write("gone", None, true);
    f.write("tail", Some("x"), false);
    assert_eq!(f.audit("never", None).verdict, Verdict::Absent);
    assert_eq!(f.audit("k", None).verdict, Verdict::Live);
    let a = f.audit("gone", None);
    assert_eq!(a.verdict, Verdict::Erased);
    // A tombstone not yet stamped: a clean now stamps it, one retention later it goes.
    let now = f.clock.now_ms();
    assert_eq!(a.copies[0].gone_by_ms, Some(now + 15_000 + MINUTE + 15_000));
}

#[test]
fn a_tombstone_over_a_value_is_pending() {
    let f = fixture(&[]);
    f.write("k", Some("v"), true);
    f.write("k", None, true);
    f.write("tail", Some("x"), false);
    let a = f.audit("k", None);
    assert_eq!(a.verdict, Verdict::Pending);
    assert!(a.copies[1].tombstone && a.copies[1].value_bytes.is_none());
    assert_eq!(a.copies[0].value_bytes, Some(1));
}

#[test]
fn a_blocked_or_disabled_cleaner_guarantees_nothing() {
    let f = fixture(&[]);
    f.write("k", Some("a"), true);
    f.write("k", Some("b"), true);
    f.write("tail", Some("x"), false);
    let blocked = CleanerView {
        enabled: true,
        backoff_ms: 0,
        blocked: Some("uncleanable: disk error".into()),
    };
    let why = f.audit_with("k", None, blocked).no_guarantee.unwrap();
    assert!(why.contains("uncleanable: disk error"), "{why}");
    let off = CleanerView { enabled: false, backoff_ms: 0, blocked: None };
    let why = f.audit_with("k", None, off).no_guarantee.unwrap();
    assert!(why.contains("log.cleaner.enable=false"), "{why}");
}

#[test]
fn an_open_transaction_holds_the_newer_copy() {
    let f = fixture(&[]);
    f.write("k", Some("a"), true);
    let log = f.logs.get_log(&TopicPartition::new("t", 0)).unwrap();
    {
        let mut log = log.write();
        let mut b = BatchBuilder::new(Compression::None, f.clock.now_ms()).producer(7, 0, 0);
        b.transactional = true;
        b.append(f.clock.now_ms(), Some(b"k"), Some(b"b"));
        log.append_as_leader(&mut b.build()).unwrap();
        log.roll_if_not_empty().unwrap();
    }
    f.write("tail", Some("x"), false);
    let a = f.audit("k", None);
    assert_eq!(a.copies[1].region, Region::OpenTransaction);
    let why = a.no_guarantee.unwrap();
    assert!(why.contains("first unstable offset 1"), "{why}");
}

/// Segment files standing in for the store, handed out as fetched.
#[derive(Debug)]
struct StoreFiles(Vec<StoreSegmentMeta>, Vec<PathBuf>);

impl StoreSegmentSource for StoreFiles {
    fn segments(&self) -> &[StoreSegmentMeta] {
        &self.0
    }

    fn fetch(&self, index: usize) -> Result<FetchedSegment, String> {
        let path = self.1[index].clone();
        let file = File::open(&path).map_err(|e| e.to_string())?;
        Ok(FetchedSegment { file, path, hold: Box::new(()) })
    }

    fn aborted_txns(
        &self,
        _: usize,
    ) -> Result<Vec<crate::log::transaction_index::AbortedTxn>, String> {
        Ok(Vec::new())
    }
}

/// The log's first `n` segments moved into a store part (as if local
/// retention deleted them after upload), measured as `state`.
fn tiered_view(f: &Fixture, n: usize, state: Option<StoreCleanState>) -> PartitionView {
    let log = f.logs.get_log(&TopicPartition::new("t", 0)).unwrap();
    let cleaner = CleanerView { enabled: true, backoff_ms: 15_000, blocked: None };
    let mut view = PartitionView::of_log(&log.read(), None, cleaner).unwrap();
    let local: Vec<SegmentFile> = view.segments.split_off(n);
    let store = std::mem::replace(&mut view.segments, local);
    let offsets = view.log_start_offset..view.segments[0].base_offset;
    let meta = store
        .iter()
        .map(|s| StoreSegmentMeta {
            base_offset: s.base_offset,
            next_offset: -1,
            size: s.size,
            offset_index_bytes: 0,
            time_index_bytes: 0,
            name: s.path.display().to_string(),
        })
        .collect();
    let source = StoreFiles(meta, store.into_iter().map(|s| s.path).collect());
    view.store = Some(StorePart { offsets, segments: Ok(Arc::new(source)), state });
    view
}

#[test]
fn copies_in_the_store_go_by_the_store_cleaners_rules() {
    let f = fixture(&[("min.cleanable.dirty.ratio", "0.5")]);
    let now = f.clock.now_ms();
    // Segments [0] [1] [2] in the store only, [3] [4] local (4 active).
    for v in ["v0", "v1", "v2", "v3"] {
        f.write("k", Some(v), true);
    }
    f.write("tail", Some("x"), false);
    let state = |ratio: f64, last_entry: i64| StoreCleanState {
        end_offset: 3,
        map_bound: 4,
        rewritable: true,
        last_entry_base_offset: last_entry,
        clean_offset: 0,
        dirty_ratio: ratio,
        check_within_ms: 5_000,
        ..Default::default()
    };
    let a = audit(&tiered_view(&f, 3, Some(state(0.8, 2))), b"k", now, None).unwrap();
    let regions: Vec<Region> = a.copies.iter().map(|c| c.region).collect();
    use Region::{Dirty, Store};
    assert_eq!(regions, [Store, Store, Store, Dirty], "{:?}", a.copies);
    let store = a.store.as_ref().unwrap();
    assert_eq!((store.first_offset, store.end_offset, store.segments_read), (0, 3, 3));
    assert!(store.bytes_read > 0 && a.segments_read == 2);
    // Above the ratio: gone at the uploader's next look.
    assert_eq!(a.copies[0].gone_by_ms, Some(now + 5_000));
    assert_eq!(a.copies[1].gone_by_ms, Some(now + 5_000));
    // The manifest's last entry is mapped, never rewritten.
    let why = a.copies[2].no_guarantee.as_deref().unwrap();
    assert!(why.contains("never rewrites"), "{why}");
    assert_eq!(a.verdict, Verdict::Pending);

    // At or under the ratio the store has no schedule.
    let a = audit(&tiered_view(&f, 3, Some(state(0.5, 3))), b"k", now, None).unwrap();
    let why = a.copies[0].no_guarantee.as_deref().unwrap();
    assert!(why.contains("not above min.cleanable.dirty.ratio"), "{why}");
    assert_eq!(a.guaranteed_by_ms, None);

    // A newer copy past what a store clean maps now counts for nothing.
    let mapped_to_1 = StoreCleanState { map_bound: 1, ..state(0.8, 3) };
    let a = audit(&tiered_view(&f, 1, Some(mapped_to_1)), b"k", now, None).unwrap();
    let why = a.copies[0].no_guarantee.as_deref().unwrap();
    assert!(why.contains("no newer copy is where a store clean maps yet"), "{why}");
    // A store clean that failed last promises nothing.
    let failed = StoreCleanState { last_error: Some("boom".into()), ..state(0.8, 3) };
    let a = audit(&tiered_view(&f, 3, Some(failed)), b"k", now, None).unwrap();
    assert!(a.copies[0].no_guarantee.as_deref().unwrap().contains("failed (boom)"));

    // Not measured yet, or a store not read: said so.
    let a = audit(&tiered_view(&f, 3, None), b"k", now, None).unwrap();
    assert!(a.copies[0].no_guarantee.as_deref().unwrap().contains("not measured"));
    let mut view = tiered_view(&f, 3, None);
    view.store.as_mut().unwrap().segments = Err("offline".into());
    let a = audit(&view, b"k", now, None).unwrap();
    assert_eq!(a.copies.len(), 1, "only the local copy is known");
    assert_eq!(a.verdict, Verdict::Incomplete, "not live: the store may hold older copies");
    assert_eq!(a.store.unwrap().not_read.as_deref(), Some("offline"));
    // Pending locally: still pending, but no time while the store is unread.
    let mut view = tiered_view(&f, 2, None);
    view.store.as_mut().unwrap().segments = Err("offline".into());
    let a = audit(&view, b"k", now, None).unwrap();
    assert_eq!((a.verdict, a.guaranteed_by_ms), (Verdict::Pending, None));
    assert!(a.no_guarantee.unwrap().contains("were not read (offline)"));
}

#[test]
fn tombstones_are_kept_while_older_segments_are_only_in_the_store() {
    let f = fixture(&[("min.cleanable.dirty.ratio", "0.5")]);
    let now = f.clock.now_ms();
    f.write("k", Some("v0"), true);
    f.write("k", None, true);
    f.write("tail", Some("x"), false);
    let measured = StoreCleanState {
        end_offset: 2,
        map_bound: 2,
        rewritable: true,
        last_entry_base_offset: 1,
        dirty_ratio: 0.8,
        check_within_ms: 5_000,
        ..Default::default()
    };
    // The local tombstone: the local cleaner keeps it.
    let a = audit(&tiered_view(&f, 1, Some(measured.clone())), b"k", now, None).unwrap();
    assert_eq!(a.copies[0].gone_by_ms, Some(now + 5_000), "the value goes from the store");
    let why = a.copies[1].no_guarantee.as_deref().unwrap();
    assert!(why.contains("kept by the local cleaner"), "{why}");
    // A store tombstone under the groups' guard stays in the store.
    let f = fixture(&[("sediment.tombstone.retention.wait.for.groups", "true")]);
    f.write("k", None, true);
    f.write("tail", Some("x"), true);
    f.write("tail", Some("y"), false);
    let a = audit(&tiered_view(&f, 1, Some(measured)), b"k", now, None).unwrap();
    let why = a.copies[0].no_guarantee.as_deref().unwrap();
    assert!(why.contains("keeps every tombstone"), "{why}");
}

#[test]
fn under_a_header_strategy_the_highest_version_wins_wherever_it_lies() {
    let f = fixture(&[
        ("sediment.compaction.strategy", "header"),
        ("sediment.compaction.strategy.header", "v"),
    ]);
    let now = f.clock.now_ms();
    let write = |value: Option<&str>, version: Option<&str>| {
        let log = f.logs.get_log(&TopicPartition::new("t", 0)).unwrap();
        let mut log = log.write();
        let mut b = BatchBuilder::new(Compression::None, now);
        let headers: Vec<(&[u8], Option<&[u8]>)> =
            version.map(|v| (&b"v"[..], Some(v.as_bytes()))).into_iter().collect();
        b.append_with_headers(now, Some(b"k"), value.map(str::as_bytes), &headers);
        log.append_as_leader(&mut b.build()).unwrap();
        log.roll_if_not_empty().unwrap();
    };
    write(Some("newest"), Some("5"));
    write(Some("stale"), Some("3"));
    write(None, None);
    f.write("tail", Some("x"), false);
    let a = f.audit("k", None);
    assert_eq!(a.config.compaction_strategy, "header(v)");
    let versions: Vec<_> = a.copies.iter().map(|c| c.version).collect();
    assert_eq!(versions, [Some(5), Some(3), Some(i64::MIN)]);
    let superseded: Vec<_> = a.copies.iter().map(|c| c.superseded).collect();
    assert_eq!(superseded, [false, true, true], "the oldest copy has the highest version");
    // Both later copies leave with the first clean that maps them: now,
    // plus one backoff (the dirty ratio is 1).
    assert_eq!(a.verdict, Verdict::Pending);
    assert_eq!(a.guaranteed_by_ms, Some(now + 15_000));
    assert!(a.copies.iter().skip(1).all(|c| c.gone_by_ms == Some(now + 15_000)));
    // The winner is not a tombstone: no time for it.
    assert_eq!(a.copies[0].gone_by_ms, None);
    // Served with each copy's version.
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["copies"][0]["version"], 5);
}

#[test]
fn a_local_copy_outranked_only_from_the_store_has_no_local_time() {
    // Copies: 0 in the store (version 9), 5 local (version 2), 8 local
    // (version 4): 5 is outranked from above by 8, 8 only from the store.
    let ranks = [(9, 0), (2, 5), (4, 8)];
    assert_eq!(removing_clean_offsets(&ranks, 1, true, Some(3)), [8]);
    assert!(removing_clean_offsets(&ranks, 2, true, Some(3)).is_empty());
    // Without a store part the local clean of 8 meets the copy at 0 below it.
    assert_eq!(removing_clean_offsets(&ranks, 2, true, None), [8]);
    // The store's copy is the winner: nothing outranks it.
    assert!(removing_clean_offsets(&ranks, 0, false, Some(3)).is_empty());
}

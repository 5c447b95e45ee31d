//! A clean of segments only in the object store fetches each as it reads
//! it and lets it go after: one segment at a time for the map, one group at
//! a time for the recopy, so a store larger than the local disk can be
//! cleaned. The store here is a directory the segments were copied to
//! before local retention deleted them, behind a source that counts what
//! it has handed out.

use crate::common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::common::{append, open_log};
use sediment::cleaner::store_segments::{
    FetchedSegment, StoreSegmentMeta, StoreSegmentSource, StoreSegmentsToClean,
};
use sediment::cleaner::CancellationToken;
use sediment::clock::MockClock;
use sediment::log::compression::Compression;
use sediment::log::transaction_index::AbortedTxn;
use sediment::log::Log;

const NOW: i64 = 1_700_000_000_000;

/// Store segments copied aside; counts fetches and how many are out at once.
#[derive(Debug, Default)]
struct CopiedSegments {
    meta: Vec<StoreSegmentMeta>,
    paths: Vec<PathBuf>,
    out: Arc<AtomicUsize>,
    peak: AtomicUsize,
    fetches: AtomicUsize,
}

/// Handed out with a fetched segment: one fewer out once dropped.
struct Out(Arc<AtomicUsize>);

impl Drop for Out {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

impl StoreSegmentSource for CopiedSegments {
    fn segments(&self) -> &[StoreSegmentMeta] {
        &self.meta
    }

    fn fetch(&self, index: usize) -> Result<FetchedSegment, String> {
        let now_out = self.out.fetch_add(1, SeqCst) + 1;
        self.peak.fetch_max(now_out, SeqCst);
        self.fetches.fetch_add(1, SeqCst);
        let path = self.paths[index].clone();
        let file = File::open(&path).map_err(|e| e.to_string())?;
        Ok(FetchedSegment { file, path, hold: Box::new(Out(Arc::clone(&self.out))) })
    }

    fn aborted_txns(&self, _: usize) -> Result<Vec<AbortedTxn>, String> {
        Ok(Vec::new())
    }
}

/// Copy the closed segments below `end` to `store` and describe them.
fn copy_to_store(log: &Log, end: i64, store: &Path) -> CopiedSegments {
    let mut copied = CopiedSegments::default();
    for seg in log.segments().filter(|s| s.base_offset() < end) {
        let path = store.join(seg.log_path().file_name().expect("file name"));
        std::fs::copy(seg.log_path(), &path).expect("copy a segment");
        copied.meta.push(StoreSegmentMeta {
            base_offset: seg.base_offset(),
            next_offset: seg.next_offset(),
            size: seg.size(),
            offset_index_bytes: seg.offset_index().size_in_bytes(),
            time_index_bytes: seg.time_index().size_in_bytes(),
            name: path.display().to_string(),
        });
        copied.paths.push(path);
    }
    copied
}

#[test]
fn a_store_clean_holds_one_store_segment_at_a_time() {
    let (dir, store, scratch) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let clock = MockClock::new(NOW);
    // One record per segment; segment.bytes below two of them, so each
    // recopy group is one segment.
    let config = [
        ("cleanup.policy", "compact"),
        ("remote.storage.enable", "true"),
        ("local.retention.ms", "0"),
        ("segment.bytes", "100"),
    ];
    let mut log = open_log(dir.path(), "tiered", &config, clock.clone());
    // Keys k0..k4 three times (offsets 0..15), then k0..k2 (15..18).
    for (round, keys) in [(0, 5), (1, 5), (2, 5), (3, 3)] {
        for k in 0..keys {
            let (key, value) = (format!("k{k}"), format!("v{round}"));
            let record = (NOW - 1000, Some(key.as_bytes()), Some(value.as_bytes()));
            append(&mut log, Compression::None, &[record]);
            log.roll_if_not_empty().expect("roll");
        }
    }
    // Offsets 0..15 uploaded, then deleted locally by local retention.
    let source = Arc::new(copy_to_store(&log, 15, store.path()));
    assert_eq!(source.meta.len(), 15);
    log.set_highest_offset_in_remote_storage(14);
    assert_eq!(log.delete_old_segments().expect("local retention"), 15);
    assert_eq!((log.log_start_offset(), log.local_log_start_offset()), (0, 15));

    let log = RwLock::new(log);
    let mut cleaner = common::cleaner(1 << 20, clock.clone());
    let to_clean = StoreSegmentsToClean {
        source: Arc::clone(&source) as Arc<dyn StoreSegmentSource>,
        recopy: 15,
        dir: scratch.path(),
        first_dirty_offset: 0,
        map_upper: 18,
    };
    let result = cleaner
        .clean_store_segments(&log, &to_clean, NOW, &CancellationToken::new())
        .expect("store clean");
    assert_eq!(source.peak.load(SeqCst), 1, "one store segment out at a time");
    assert_eq!(source.out.load(SeqCst), 0, "every fetched segment let go");
    assert_eq!(source.fetches.load(SeqCst), 30, "fetched once by the map, once by the recopy");
    assert_eq!(result.end_offset, 18);
    // Only k3@13 and k4@14 survive in the store: their segments stay as
    // they are; every other one is replaced by an emptied segment.
    let replaced: Vec<_> = result.groups.iter().map(|g| g.replaced.clone()).collect();
    assert_eq!(replaced, (0..13).map(|i| i..i + 1).collect::<Vec<_>>());
    assert!(result.groups.iter().all(|g| g.segment.size() == 0), "{:?}", result.groups);
}

use std::sync::Arc;

use bytes::Bytes;

use super::testing::{config, local_store, object_path, upload_segments};
use super::*;

struct Fixture {
    _store_dir: tempfile::TempDir,
    _work: tempfile::TempDir,
    cache_dir: tempfile::TempDir,
    store: RemoteStore,
    tp: TopicPartition,
    entries: Vec<SegmentEntry>,
}

async fn fixture(segments: usize) -> Fixture {
    let (store_dir, work, cache_dir) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = local_store(store_dir.path());
    let tp = TopicPartition::new("t", 0);
    let entries = upload_segments(&store, &tp, work.path(), segments, 20, &[]).await;
    Fixture { _store_dir: store_dir, _work: work, cache_dir, store, tp, entries }
}

fn cache(f: &Fixture, cap: u64) -> Arc<SegmentCache> {
    let dir = f.cache_dir.path().join(CACHE_DIR);
    SegmentCache::open(&dir, cap, f.store.clone(), Arc::default(), RemoteReadStats::default())
        .unwrap()
}

fn seg_bytes(e: &SegmentEntry) -> u64 {
    e.files.iter().map(|f| f.size).sum()
}

#[tokio::test]
async fn the_cap_is_honoured_least_recently_used_first() {
    let f = fixture(3).await;
    let (a, b, d) = (&f.entries[0], &f.entries[1], &f.entries[2]);
    // Room for a and d, not for b as well.
    let cap = seg_bytes(a) + seg_bytes(d);
    let c = cache(&f, cap);
    let got = c.get(&f.tp, a, config()).await.unwrap();
    assert_eq!(got.segment().next_offset(), a.next_offset);
    drop(got);
    drop(c.get(&f.tp, b, config()).await.unwrap());
    drop(c.get(&f.tp, a, config()).await.unwrap()); // a is now the most recent
    assert_eq!((c.reads().cache_hits.get(), c.reads().cache_misses.get()), (1, 2));
    drop(c.get(&f.tp, d, config()).await.unwrap());
    assert_eq!(c.bytes(), cap);
    assert_eq!(c.reads().cache_bytes.get(), cap as i64);
    // b was evicted (its files too), a stayed.
    let dirs = |e: &SegmentEntry| c.dir.join(segment_id(&f.tp, e)).exists();
    assert!(!dirs(b) && dirs(a) && dirs(d));
    drop(c.get(&f.tp, a, config()).await.unwrap());
    assert_eq!(c.downloads(), 3);
    drop(c.get(&f.tp, b, config()).await.unwrap());
    assert_eq!(c.downloads(), 4, "an evicted segment is downloaded again");
}

#[tokio::test]
async fn a_segment_being_read_is_never_evicted() {
    let f = fixture(2).await;
    let (first, second) = (seg_bytes(&f.entries[0]), seg_bytes(&f.entries[1]));
    let c = cache(&f, first.max(second));
    let held = c.get(&f.tp, &f.entries[0], config()).await.unwrap();
    let other = c.get(&f.tp, &f.entries[1], config()).await.unwrap();
    // Both held: over the cap, nothing evicted, both readable.
    assert_eq!(c.bytes(), first + second);
    let mut buf = Vec::new();
    assert!(held
        .segment()
        .batches(0..held.segment().size(), &mut buf)
        .next_batch()
        .unwrap()
        .is_some());
    drop(held);
    drop(other);
    c.release();
    assert_eq!(c.bytes(), second);
    assert!(!c.dir.join(segment_id(&f.tp, &f.entries[0])).exists(), "the older one went");
}

#[tokio::test]
async fn a_corrupt_or_truncated_object_is_refused_with_its_key() {
    let f = fixture(2).await;
    let c = cache(&f, 1 << 30);
    // Same size, one byte flipped.
    let key = f.store.key(&object_path(&f.tp, &f.entries[0], "log"));
    let mut bytes = f.store.get_bounded(&key, 1 << 30).await.unwrap().to_vec();
    bytes[100] ^= 0xff;
    f.store.put_verified(&key, Bytes::from(bytes.clone())).await.unwrap();
    let err = c.get(&f.tp, &f.entries[0], config()).await.unwrap_err();
    assert!(matches!(*err, RemoteError::Verify { .. }), "{err}");
    assert!(err.to_string().contains(key.as_ref()), "{err}");
    assert_eq!(c.stats().counters().errors.get("corrupt"), Some(&1));
    assert!(!c.dir.join(segment_id(&f.tp, &f.entries[0])).exists(), "nothing kept");
    assert_eq!(c.bytes(), 0);
    // Asked again at once: the same answer, no second download.
    assert!(c.get(&f.tp, &f.entries[0], config()).await.is_err());
    assert_eq!(c.downloads(), 1);
    // Truncated: the size check refuses it before any byte is read.
    let key = f.store.key(&object_path(&f.tp, &f.entries[1], "index"));
    let bytes = f.store.get_bounded(&key, 1 << 30).await.unwrap();
    f.store.put_verified(&key, bytes.slice(..bytes.len() - 8)).await.unwrap();
    let err = c.get(&f.tp, &f.entries[1], config()).await.unwrap_err();
    match &*err {
        RemoteError::Verify { key: k, got_size, size, .. } => {
            assert_eq!(k, key.as_ref());
            assert_eq!(*got_size + 8, *size);
        }
        other => panic!("{other}"),
    }
    assert_eq!(c.stats().counters().errors.get("corrupt"), Some(&2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_gets_share_one_download() {
    let f = fixture(1).await;
    let c = cache(&f, 1 << 30);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (c, tp, e) = (Arc::clone(&c), f.tp.clone(), f.entries[0].clone());
        tasks.push(tokio::spawn(async move { c.get(&tp, &e, config()).await.unwrap() }));
    }
    let mut got = Vec::new();
    for t in tasks {
        got.push(t.await.unwrap());
    }
    assert_eq!(c.downloads(), 1);
    assert!(got.iter().all(|s| Arc::ptr_eq(s, &got[0])));
    assert_eq!(c.bytes(), seg_bytes(&f.entries[0]));
}

#[tokio::test]
async fn the_directory_is_emptied_at_start() {
    let f = fixture(1).await;
    let dir = f.cache_dir.path().join(CACHE_DIR);
    std::fs::create_dir_all(dir.join("t-0/junk")).unwrap();
    std::fs::write(dir.join("t-0/junk/00000000000000000000.log"), b"old").unwrap();
    let c = cache(&f, 1 << 30);
    assert!(!dir.join("t-0/junk").exists());
    drop(c.get(&f.tp, &f.entries[0], config()).await.unwrap());
}

#[tokio::test]
async fn a_segment_larger_than_the_cap_is_served_alone_and_goes_first() {
    let f = fixture(2).await;
    let c = cache(&f, 100);
    let big = c.get(&f.tp, &f.entries[0], config()).await.unwrap();
    assert_eq!(big.segment().next_offset(), f.entries[0].next_offset);
    assert_eq!(c.bytes(), seg_bytes(&f.entries[0]), "admitted although over the cap");
    drop(big);
    let other = c.get(&f.tp, &f.entries[1], config()).await.unwrap();
    assert_eq!(c.bytes(), seg_bytes(&f.entries[1]), "the released one went");
    drop(other);
    c.release();
    assert_eq!(c.bytes(), 0);
    assert_eq!(c.reads().cache_bytes.get(), 0);
}

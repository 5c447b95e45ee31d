use std::sync::Arc;

use super::*;
use crate::log::record_batch::{BatchHeader, RecordIter};
use crate::remote::cache::testing::{
    config, local_store, timestamp, upload_segments, value, write_manifest, TOPIC_ID,
};
use crate::remote::cache::CACHE_DIR;
use crate::remote::manifest::object_key;
use crate::remote::read_stats::RemoteReadStats;

struct Fixture {
    _dirs: Vec<tempfile::TempDir>,
    store: RemoteStore,
    tp: TopicPartition,
    entries: Vec<SegmentEntry>,
    reader: RemoteLogReader,
}

async fn fixture(aborted: &[AbortedTxn]) -> Fixture {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let store = local_store(dirs[0].path());
    let tp = TopicPartition::new("t", 0);
    // 3 segments of 20 batches of 3 records: offsets 0..180.
    let entries = upload_segments(&store, &tp, dirs[1].path(), 3, 20, aborted).await;
    let cache = SegmentCache::open(
        &dirs[2].path().join(CACHE_DIR),
        1 << 30,
        store.clone(),
        Arc::default(),
        RemoteReadStats::default(),
    )
    .unwrap();
    let reader = RemoteLogReader::new(store.clone(), cache);
    Fixture { _dirs: dirs, store, tp, entries, reader }
}

fn range(offset: i64, max_bytes: usize) -> RemoteRange {
    RemoteRange {
        fetch_offset: offset,
        local_start: 180,
        max_bytes,
        min_one_batch: true,
        isolation: FetchIsolation::HighWatermark,
        topic_id: TOPIC_ID,
        listing: None,
    }
}

/// (offset, value) of every record in `bytes`.
fn records(bytes: &[u8]) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let h = BatchHeader::parse(rest).unwrap();
        let batch = &rest[..h.size_in_bytes()];
        let payload = &batch[crate::log::record_batch::RECORD_BATCH_OVERHEAD..];
        for r in RecordIter::new(payload, h.records_count) {
            let r = r.unwrap();
            out.push((h.base_offset + r.offset_delta as i64, r.value.unwrap().to_vec()));
        }
        rest = &rest[h.size_in_bytes()..];
    }
    out
}

#[tokio::test]
async fn every_offset_reads_back_from_the_store_one_segment_per_read() {
    let f = fixture(&[]).await;
    write_manifest(&f.store, &f.tp, 1, 0, f.entries.clone()).await;
    // A consumer's walk: each read starts where the last ended.
    let mut next = 0;
    let mut seen = Vec::new();
    while next < 180 {
        let got = f.reader.read(&f.tp, range(next, 700), config()).await.unwrap().unwrap();
        let recs = records(&got.records);
        let seg_end = f.entries.iter().find(|s| s.next_offset > next).unwrap().next_offset;
        assert!(recs.iter().all(|(o, _)| *o < seg_end), "one segment per read");
        assert_eq!(got.upper_bound, recs.last().unwrap().0 + 1);
        next = recs.last().unwrap().0 + 1;
        seen.extend(recs);
    }
    let expected: Vec<_> = (0..180).map(|o| (o, value(o))).collect();
    assert_eq!(seen, expected);
    // Any offset: the batch holding it comes first.
    for offset in [0, 1, 59, 60, 61, 119, 179] {
        let got = f.reader.read(&f.tp, range(offset, 1), config()).await.unwrap().unwrap();
        let recs = records(&got.records);
        assert!(recs.first().unwrap().0 <= offset && recs.last().unwrap().0 >= offset);
    }
    // At or past the local start there is nothing to read here.
    let past = RemoteRange { local_start: 60, ..range(60, 100) };
    assert!(f.reader.read(&f.tp, past, config()).await.unwrap().is_none());
    let c = f.reader.cache();
    assert_eq!(c.downloads(), 3, "each segment downloaded once");
    assert!(c.reads().cache_hits.get() > 0);
    assert!(c.reads().fetch_seconds.get_sample_count() > 0);
}

#[tokio::test]
async fn a_missing_object_makes_the_reader_take_the_latest_manifest() {
    let f = fixture(&[]).await;
    // Manifest 1 lists objects a later clean replaced and the sweep deleted.
    let mut gone = f.entries.clone();
    for s in &mut gone {
        for o in &mut s.files {
            o.crc32c ^= 1;
            o.key = object_key(s.base_offset, o.crc32c, o.size, &o.ext);
        }
    }
    write_manifest(&f.store, &f.tp, 1, 0, gone).await;
    let err = f.reader.read(&f.tp, range(0, 100), config()).await.unwrap_err();
    assert!(matches!(&err, RemoteReadError::Remote(e) if e.kind() == "not_found"), "{err}");
    write_manifest(&f.store, &f.tp, 2, 0, f.entries.clone()).await;
    let got = f.reader.read(&f.tp, range(0, 100), config()).await.unwrap().unwrap();
    assert_eq!(records(&got.records)[0], (0, value(0)));
}

#[tokio::test]
async fn a_kept_manifest_listing_otherwise_than_the_log_is_read_again() {
    let f = fixture(&[]).await;
    write_manifest(&f.store, &f.tp, 1, 0, f.entries.clone()).await;
    let got = f.reader.read(&f.tp, range(0, 100), config()).await.unwrap().unwrap();
    assert_eq!(records(&got.records)[0].0, 0);
    // A later manifest no longer lists the first segment (a clean or
    // retention replaced it); its objects are still in the read cache.
    let later = f.entries[1..].to_vec();
    write_manifest(&f.store, &f.tp, 2, 60, later.clone()).await;
    let got = f.reader.read(&f.tp, range(0, 100), config()).await.unwrap().unwrap();
    assert_eq!(records(&got.records)[0].0, 0, "without the log's listing: the kept manifest");
    let digest = |entries: &[SegmentEntry]| {
        store_listing_digest(entries.iter().map(|s| (s.base_offset, s.next_offset, s.size())))
    };
    let told = RemoteRange { listing: Some(digest(&later)), ..range(0, 100) };
    let got = f.reader.read(&f.tp, told, config()).await.unwrap().unwrap();
    assert_eq!(records(&got.records)[0].0, 60, "the manifest the log was told of");
    // Told of the same listing again: no store read of the manifest needed.
    let got = f.reader.read(&f.tp, told, config()).await.unwrap().unwrap();
    assert_eq!(records(&got.records)[0].0, 60);
    // A listing no manifest has (the log told of one the reader skips) is
    // read for once, not at every fetch: a newer manifest is not seen...
    let odd = RemoteRange { listing: Some(12_345), ..range(0, 100) };
    let got = f.reader.read(&f.tp, odd, config()).await.unwrap().unwrap();
    assert_eq!(records(&got.records)[0].0, 60);
    let last = f.entries[2..].to_vec();
    write_manifest(&f.store, &f.tp, 3, 120, last.clone()).await;
    let got = f.reader.read(&f.tp, odd, config()).await.unwrap().unwrap();
    assert_eq!(records(&got.records)[0].0, 60, "read for that listing already");
    // ...until the log is told of another listing.
    let newest = RemoteRange { listing: Some(digest(&last)), ..range(0, 100) };
    let got = f.reader.read(&f.tp, newest, config()).await.unwrap().unwrap();
    assert_eq!(records(&got.records)[0].0, 120);
}

#[tokio::test]
async fn an_offset_the_store_does_not_reach_is_not_served() {
    let f = fixture(&[]).await;
    write_manifest(&f.store, &f.tp, 1, 0, f.entries[..1].to_vec()).await;
    let err = f.reader.read(&f.tp, range(100, 100), config()).await.unwrap_err();
    assert!(matches!(err, RemoteReadError::NotInStore { end: 60, .. }), "{err}");
}

#[tokio::test]
async fn read_committed_names_aborts_from_later_segments() {
    // A transaction starting in segment 0 (offset 5), aborted in segment 1 (marker 70).
    let txn =
        AbortedTxn { producer_id: 7, first_offset: 5, last_offset: 70, last_stable_offset: 71 };
    let f = fixture(&[txn]).await;
    assert!(f.entries[1].files.iter().any(|o| o.ext == "txnindex"));
    write_manifest(&f.store, &f.tp, 1, 0, f.entries.clone()).await;
    let committed = RemoteRange { isolation: FetchIsolation::TxnCommitted, ..range(0, 1 << 20) };
    let got = f.reader.read(&f.tp, committed, config()).await.unwrap().unwrap();
    assert_eq!(got.upper_bound, 60);
    assert_eq!(got.aborted_transactions, Some(vec![txn]));
    assert!(got.aborted_complete);
    // Segment 1's abort came from its .txnindex object alone.
    assert!(f.reader.cache.peek(&f.tp, &f.entries[1]).is_none(), "segment 1 was downloaded");
    // Once segment 1 is in the cache (read itself), its copy answers alike.
    let one = RemoteRange { fetch_offset: 60, ..committed };
    f.reader.read(&f.tp, one, config()).await.unwrap().unwrap();
    assert!(f.reader.cache.peek(&f.tp, &f.entries[1]).is_some());
    let again = f.reader.read(&f.tp, committed, config()).await.unwrap().unwrap();
    assert_eq!((again.aborted_transactions, again.aborted_complete), (Some(vec![txn]), true));
    // Read past the marker: nothing overlaps.
    let later = RemoteRange { fetch_offset: 120, ..committed };
    let got = f.reader.read(&f.tp, later, config()).await.unwrap().unwrap();
    assert_eq!(got.aborted_transactions, Some(vec![]));
    assert!(!got.aborted_complete, "the local log continues the search");
    // read_uncommitted names none.
    let got = f.reader.read(&f.tp, range(0, 1 << 20), config()).await.unwrap().unwrap();
    assert_eq!(got.aborted_transactions, None);
}

#[tokio::test]
async fn a_txnindex_object_that_fails_its_checks_is_reported_not_used() {
    let txn =
        AbortedTxn { producer_id: 7, first_offset: 5, last_offset: 70, last_stable_offset: 71 };
    let f = fixture(&[txn]).await;
    let committed = RemoteRange { isolation: FetchIsolation::TxnCommitted, ..range(0, 1 << 20) };
    // Segment 1's .txnindex replaced by an entry of an unknown version,
    // listed with its true size and CRC: it passes the object check and
    // fails the entry check.
    let mut bad = txn.to_bytes();
    bad[1] = 7;
    let mut entries = f.entries.clone();
    let base = entries[1].base_offset;
    let obj = entries[1].files.iter_mut().find(|o| o.ext == "txnindex").unwrap();
    (obj.size, obj.crc32c) = (bad.len() as u64, crc32c::crc32c(&bad));
    obj.key = object_key(base, obj.crc32c, obj.size, "txnindex");
    let key = f.store.key(&format!("{}/{}", manifest::partition_dir(&f.tp), obj.key));
    f.store.put_verified(&key, Bytes::copy_from_slice(&bad)).await.unwrap();
    write_manifest(&f.store, &f.tp, 1, 0, entries.clone()).await;
    let err = f.reader.read(&f.tp, committed, config()).await.unwrap_err();
    assert!(matches!(&err, RemoteReadError::Remote(e) if e.kind() == "corrupt"), "{err}");
    assert!(err.to_string().contains("version 7"), "{err}");
    // Listed (and named) with a CRC its bytes do not have: refused before
    // parsing.
    let obj = entries[1].files.iter_mut().find(|o| o.ext == "txnindex").unwrap();
    obj.crc32c ^= 1;
    obj.key = object_key(base, obj.crc32c, obj.size, "txnindex");
    let key = f.store.key(&format!("{}/{}", manifest::partition_dir(&f.tp), obj.key));
    f.store.put_verified(&key, Bytes::copy_from_slice(&bad)).await.unwrap();
    write_manifest(&f.store, &f.tp, 2, 0, entries).await;
    f.reader.manifests.lock().clear(); // a corrupt object does not make it look again
    let err = f.reader.read(&f.tp, committed, config()).await.unwrap_err();
    assert!(
        matches!(&err, RemoteReadError::Remote(e) if matches!(**e, RemoteError::Verify { .. })),
        "{err}"
    );
    assert_eq!(f.reader.cache.stats().counters().errors.get("corrupt"), Some(&2));
    // Neither was remembered: the good manifest answers again.
    write_manifest(&f.store, &f.tp, 3, 0, f.entries.clone()).await;
    f.reader.manifests.lock().clear();
    let got = f.reader.read(&f.tp, committed, config()).await.unwrap().unwrap();
    assert_eq!(got.aborted_transactions, Some(vec![txn]));
}

#[tokio::test]
async fn timestamps_are_found_in_the_store() {
    let f = fixture(&[]).await;
    write_manifest(&f.store, &f.tp, 1, 0, f.entries.clone()).await;
    let find =
        |t, start| f.reader.find_offset_by_timestamp(&f.tp, t, start, 180, config(), &TOPIC_ID);
    assert_eq!(find(timestamp(100), 0).await.unwrap(), Some((timestamp(100), 100)));
    // Segment 0's largest timestamp came from its .timeindex: only segment 1 was downloaded.
    assert_eq!(f.reader.cache().downloads(), 1);
    assert_eq!(find(timestamp(100) - 5, 0).await.unwrap(), Some((timestamp(100), 100)));
    assert_eq!(find(0, 0).await.unwrap(), Some((timestamp(0), 0)));
    assert_eq!(find(0, 61).await.unwrap(), Some((timestamp(61), 61)), "from the log start");
    assert_eq!(find(timestamp(180), 0).await.unwrap(), None, "later: the local log's");
    assert_eq!(f.reader.cache().downloads(), 2, "no segment downloaded for a later timestamp");
}

#[tokio::test]
async fn a_manifest_of_an_earlier_topic_of_that_name_is_not_read() {
    let f = fixture(&[]).await;
    write_manifest(&f.store, &f.tp, 1, 0, f.entries.clone()).await;
    let recreated = RemoteRange { topic_id: [9; 16], ..range(0, 100) };
    let err = f.reader.read(&f.tp, recreated, config()).await.unwrap_err();
    assert!(matches!(err, RemoteReadError::OtherTopic { .. }), "{err}");
    let find = f.reader.find_offset_by_timestamp(&f.tp, 0, 0, 180, config(), &[9; 16]);
    assert!(matches!(find.await, Err(RemoteReadError::OtherTopic { .. })));
    assert_eq!(f.reader.cache().downloads(), 0, "nothing of it downloaded");
    assert!(f.reader.read(&f.tp, range(0, 100), config()).await.unwrap().is_some());
}

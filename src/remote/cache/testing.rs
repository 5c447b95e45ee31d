//! Test support: real segments written with `LogSegment`, uploaded to a
//! local-directory store under their content keys, and a manifest listing them.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;

use crate::log::compression::Compression;
use crate::log::manager::topic_id_to_string;
use crate::log::record_batch::{self, BatchBuilder};
use crate::log::segment::{LogSegment, SegmentConfig};
use crate::log::transaction_index::AbortedTxn;
use crate::log::TopicPartition;
use crate::remote::manifest::{
    self, object_key, partition_dir, Manifest, ObjectEntry, SegmentEntry,
};
use crate::remote::store::RemoteStore;
use crate::remote::RemoteStorageConfig;

/// The id of the tests' topic.
pub(crate) const TOPIC_ID: [u8; 16] = [7; 16];

pub(crate) fn config() -> SegmentConfig {
    SegmentConfig { index_interval_bytes: 200, max_index_size: 1 << 20, max_batch_size: 1 << 20 }
}

pub(crate) fn local_store(dir: &Path) -> RemoteStore {
    let url = format!("file://{}", dir.display());
    RemoteStorageConfig::for_tool(&url, None, None).open().unwrap()
}

/// The value of the record at `offset` (what the tests expect to read back).
pub(crate) fn value(offset: i64) -> Vec<u8> {
    format!("value-{offset}-{}", "x".repeat((offset % 50) as usize)).into_bytes()
}

/// The timestamp of the record at `offset`.
pub(crate) fn timestamp(offset: i64) -> i64 {
    1_000_000 + offset * 10
}

/// Segments of `batches` batches of 3 records each, written in `work` and
/// uploaded; `aborted` is added to the `.txnindex` of the segment holding
/// its marker offset. Returns the manifest's segments.
pub(crate) async fn upload_segments(
    store: &RemoteStore,
    tp: &TopicPartition,
    work: &Path,
    segments: usize,
    batches: usize,
    aborted: &[AbortedTxn],
) -> Vec<SegmentEntry> {
    let mut entries = Vec::new();
    let mut next = 0i64;
    for _ in 0..segments {
        let mut seg = LogSegment::create(work, next, config(), "", 0).unwrap();
        for _ in 0..batches {
            let mut b = BatchBuilder::new(Compression::None, timestamp(next));
            for i in 0..3 {
                let o = next + i;
                b.append(timestamp(o), Some(format!("k{o}").as_bytes()), Some(&value(o)));
            }
            let mut batch = b.build();
            record_batch::set_base_offset(&mut batch, next);
            seg.append(&batch).unwrap();
            next += 3;
        }
        let base = seg.base_offset();
        for txn in aborted.iter().filter(|t| t.last_offset >= base && t.last_offset < next) {
            seg.txn_index_mut().append(txn).unwrap();
        }
        seg.on_become_inactive().unwrap();
        seg.flush().unwrap();
        let mut files = Vec::new();
        for ext in ["log", "index", "timeindex", "txnindex"] {
            let path = work.join(format!("{:020}.{ext}", seg.base_offset()));
            let Ok(bytes) = std::fs::read(&path) else { continue };
            let crc = crc32c::crc32c(&bytes);
            let key = object_key(seg.base_offset(), crc, bytes.len() as u64, ext);
            let full = store.key(&format!("{}/{key}", partition_dir(tp)));
            store.put_verified(&full, Bytes::from(bytes.clone())).await.unwrap();
            files.push(ObjectEntry { ext: ext.into(), key, size: bytes.len() as u64, crc32c: crc });
        }
        let max_timestamp = seg.largest_timestamp();
        let base_offset = seg.base_offset();
        entries.push(SegmentEntry { base_offset, next_offset: next, files, max_timestamp });
    }
    entries
}

/// Write manifest `seq` of `tp` listing `segments` from `log_start`.
pub(crate) async fn write_manifest(
    store: &RemoteStore,
    tp: &TopicPartition,
    seq: u64,
    log_start: i64,
    segments: Vec<SegmentEntry>,
) {
    let m = Manifest {
        format: manifest::FORMAT,
        cluster_id: "c".into(),
        topic: tp.topic.clone(),
        partition: tp.partition,
        partition_metadata: format!("version: 0\ntopic_id: {}\n", topic_id_to_string(&TOPIC_ID)),
        topic_config: BTreeMap::new(),
        log_start_offset: log_start,
        clean_offset: None,
        store_clean_offset: None,
        local_log_start_offset: None,
        end_offset: segments.last().map_or(log_start, |s| s.next_offset),
        segments,
        written_at_ms: 0,
        retired: false,
    };
    manifest::write(store, tp, seq, &m).await.unwrap();
}

/// The store path of a segment's object of kind `ext`.
pub(crate) fn object_path(tp: &TopicPartition, entry: &SegmentEntry, ext: &str) -> String {
    let f = entry.files.iter().find(|f| f.ext == ext).unwrap();
    format!("{}/{}", partition_dir(tp), f.key)
}

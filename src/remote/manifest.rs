//! A partition's manifest: the segments in the store that make up the
//! partition, with their objects' keys, sizes and CRC32Cs, the topic's
//! identity and config, the log start offset and the cleaner's clean point.
//!
//! Manifests are immutable. Each is written create-only as
//! `topics/<tp>/manifest/<20-digit seq>.json`, one number above the latest;
//! the reader takes the highest number. A number already taken means another
//! writer: the write fails and nothing is overwritten.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::store::{RemoteStore, MAX_METADATA_BYTES};
use super::RemoteError;
use crate::log::TopicPartition;

pub const FORMAT: u32 = 1;

/// One file of a segment in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectEntry {
    /// `log`, `index`, `timeindex` or `txnindex`.
    pub ext: String,
    /// Relative to the partition's directory in the store (`segments/...`).
    pub key: String,
    pub size: u64,
    pub crc32c: u32,
}

/// One segment in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentEntry {
    pub base_offset: i64,
    pub next_offset: i64,
    pub files: Vec<ObjectEntry>,
}

impl SegmentEntry {
    /// The `.log` object's key (it names the segment's content).
    pub fn log_key(&self) -> Option<&str> {
        self.files.iter().find(|f| f.ext == "log").map(|f| f.key.as_str())
    }
    pub fn size(&self) -> u64 {
        self.files.iter().find(|f| f.ext == "log").map_or(0, |f| f.size)
    }
}

/// A partition's state in the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub cluster_id: String,
    pub topic: String,
    pub partition: i32,
    /// `partition.metadata` as the broker wrote it (version and topic id).
    pub partition_metadata: String,
    /// The topic's config overrides.
    pub topic_config: BTreeMap<String, String>,
    pub log_start_offset: i64,
    /// The cleaner's first dirty offset, at most `end_offset`; `None` when
    /// the partition was never cleaned.
    pub clean_offset: Option<i64>,
    /// The next offset after the last segment listed.
    pub end_offset: i64,
    pub segments: Vec<SegmentEntry>,
    pub written_at_ms: i64,
}

impl Manifest {
    /// Every object key listed.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().flat_map(|s| s.files.iter().map(|f| f.key.as_str()))
    }

    /// Whether two manifests describe the same partition state.
    pub fn same_state(&self, other: &Manifest) -> bool {
        self.segments == other.segments
            && self.log_start_offset == other.log_start_offset
            && self.clean_offset == other.clean_offset
            && self.topic_config == other.topic_config
            && self.partition_metadata == other.partition_metadata
    }

    fn check(&self, key: &str, tp: &TopicPartition) -> Result<(), RemoteError> {
        let bad = |reason: String| Err(RemoteError::Manifest { key: key.into(), reason });
        if self.format != FORMAT {
            return bad(format!("format {} is not {FORMAT}", self.format));
        }
        if self.topic != tp.topic || self.partition != tp.partition {
            return bad(format!("names {}-{}", self.topic, self.partition));
        }
        for w in self.segments.windows(2) {
            if w[0].next_offset > w[1].base_offset {
                return bad(format!(
                    "segments {} and {} overlap",
                    w[0].base_offset, w[1].base_offset
                ));
            }
        }
        for s in &self.segments {
            if s.log_key().is_none() || s.next_offset < s.base_offset {
                return bad(format!("segment {} has no .log object or no offsets", s.base_offset));
            }
            if s.files.iter().any(|f| !f.key.starts_with("segments/") || f.key.contains("..")) {
                return bad(format!("segment {} names a key outside segments/", s.base_offset));
            }
        }
        Ok(())
    }
}

/// Why `next` must not replace `prev`: it drops offsets `prev` holds that
/// neither retention nor DeleteRecords (the log start moved past them) nor a
/// clean (a cleaned segment still covers them) took away, or it is another
/// topic of the same name. A lost disk, a topic deleted and created again, or
/// a segment removed by hand leaves such a local log; replacing the manifest
/// would let the sweep delete the only copy.
///
/// Offsets are lost at the end (`next` ends before `prev` while its log
/// start is below `prev`'s end) or at the front (`next` starts above the
/// first offset of `prev` it still claims: the segments only in the store,
/// which the next manifest carries over, are missing). A segment's span runs
/// to the next segment's base, so a clean that dropped a segment's last
/// records, or merged segments, is no loss.
pub fn regression(prev: &Manifest, next: &Manifest) -> Option<String> {
    if prev.partition_metadata != next.partition_metadata {
        return Some(
            "its partition.metadata (topic id) differs: the topic was created again".into(),
        );
    }
    if next.end_offset < prev.end_offset && next.log_start_offset < prev.end_offset {
        return Some(format!(
            "it ends at offset {} where the store's ends at {}, with its log start at {}",
            next.end_offset, prev.end_offset, next.log_start_offset
        ));
    }
    let claimed = prev
        .segments
        .iter()
        .find(|s| s.next_offset > next.log_start_offset)
        .map(|s| s.base_offset.max(next.log_start_offset))?;
    let first = next.segments.first().map_or(next.end_offset, |s| s.base_offset);
    (first > claimed).then(|| {
        format!(
            "it starts at offset {first} where the store's holds offset {claimed} at or above its log start {}",
            next.log_start_offset
        )
    })
}

/// The partition's directory in the store, relative to the prefix.
pub fn partition_dir(tp: &TopicPartition) -> String {
    format!("topics/{tp}")
}

/// A manifest's key, relative to the prefix.
pub fn manifest_key(tp: &TopicPartition, seq: u64) -> String {
    format!("{}/manifest/{seq:020}.json", partition_dir(tp))
}

/// The key of a segment file with this content.
pub fn object_key(base_offset: i64, crc32c: u32, size: u64, ext: &str) -> String {
    format!("segments/{base_offset:020}-{crc32c:08x}-{size}.{ext}")
}

/// Every manifest of `tp` in the store: (sequence number, last modified ms).
///
/// # Errors
/// Store errors.
pub async fn list_manifests(
    store: &RemoteStore,
    tp: &TopicPartition,
) -> Result<Vec<(u64, i64)>, RemoteError> {
    let (objects, _) = store.list(&format!("{}/manifest", partition_dir(tp))).await?;
    let mut out: Vec<(u64, i64)> = objects
        .iter()
        .filter_map(|o| {
            let seq = o.location.filename()?.strip_suffix(".json")?.parse().ok()?;
            Some((seq, o.last_modified.timestamp_millis()))
        })
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// Read manifest `seq` of `tp`.
///
/// # Errors
/// Store errors; `Manifest` when it does not parse or names another partition.
pub async fn read(
    store: &RemoteStore,
    tp: &TopicPartition,
    seq: u64,
) -> Result<Manifest, RemoteError> {
    let key = manifest_key(tp, seq);
    let bytes = store.get_bounded(&store.key(&key), MAX_METADATA_BYTES).await?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| RemoteError::Manifest { key: key.clone(), reason: e.to_string() })?;
    manifest.check(&key, tp)?;
    Ok(manifest)
}

/// The latest manifest of `tp` and its number, if any.
///
/// # Errors
/// As [`read`].
pub async fn latest(
    store: &RemoteStore,
    tp: &TopicPartition,
) -> Result<Option<(u64, Manifest)>, RemoteError> {
    match list_manifests(store, tp).await?.last() {
        Some(&(seq, _)) => Ok(Some((seq, read(store, tp, seq).await?))),
        None => Ok(None),
    }
}

/// Write `manifest` as number `seq`, create-only.
///
/// # Errors
/// `Conflict` when the number is taken; store errors.
pub async fn write(
    store: &RemoteStore,
    tp: &TopicPartition,
    seq: u64,
    manifest: &Manifest,
) -> Result<(), RemoteError> {
    let key = manifest_key(tp, seq);
    let text = serde_json::to_vec_pretty(manifest)
        .map_err(|e| RemoteError::Manifest { key: key.clone(), reason: e.to_string() })?;
    let path = store.key(&key);
    let bytes = Bytes::from(text);
    if store.put_create(&path, bytes.clone()).await? {
        return Ok(());
    }
    // A create retried after its reply was lost finds its own first attempt:
    // the same bytes in the slot are this writer's, not another's.
    let found = store.get_bounded(&path, bytes.len() as u64 + 1).await;
    if found.is_ok_and(|b| b == bytes) {
        Ok(())
    } else {
        Err(RemoteError::Conflict { key })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(tp: &TopicPartition, segments: Vec<SegmentEntry>) -> Manifest {
        Manifest {
            format: FORMAT,
            cluster_id: "c".into(),
            topic: tp.topic.clone(),
            partition: tp.partition,
            partition_metadata: "version: 0\n".into(),
            topic_config: BTreeMap::new(),
            log_start_offset: 0,
            clean_offset: None,
            end_offset: segments.last().map_or(0, |s| s.next_offset),
            segments,
            written_at_ms: 0,
        }
    }

    fn segment(base: i64, next: i64) -> SegmentEntry {
        let key = object_key(base, 7, 10, "log");
        SegmentEntry {
            base_offset: base,
            next_offset: next,
            files: vec![ObjectEntry { ext: "log".into(), key, size: 10, crc32c: 7 }],
        }
    }

    #[test]
    fn a_manifest_that_loses_offsets_is_a_regression() {
        let tp = TopicPartition::new("t", 0);
        let prev = manifest(&tp, vec![segment(0, 5), segment(5, 9)]);
        // More segments, a cleaned replacement, retention past the end: fine.
        assert_eq!(regression(&prev, &manifest(&tp, vec![segment(0, 9), segment(9, 12)])), None);
        assert_eq!(regression(&prev, &manifest(&tp, vec![segment(0, 9)])), None);
        let retained = Manifest { log_start_offset: 9, end_offset: 9, ..manifest(&tp, vec![]) };
        assert_eq!(regression(&prev, &retained), None);
        // An emptied local log (a lost disk), or one cut short: refused.
        assert!(regression(&prev, &manifest(&tp, vec![])).is_some());
        assert!(regression(&prev, &manifest(&tp, vec![segment(0, 5)])).is_some());
        let recreated =
            Manifest { partition_metadata: "version: 0\ntopic_id: other\n".into(), ..prev.clone() };
        assert!(regression(&prev, &recreated).is_some());
    }

    #[test]
    fn dropping_store_only_segments_is_a_regression_unless_the_log_start_passed_them() {
        let tp = TopicPartition::new("t", 0);
        // 0..5 only in the store, 5..9 local too.
        let prev = manifest(&tp, vec![segment(0, 5), segment(5, 9)]);
        // Carried over, or merged by a clean whose last records went: fine.
        assert_eq!(regression(&prev, &manifest(&tp, vec![segment(0, 5), segment(5, 12)])), None);
        assert_eq!(regression(&prev, &manifest(&tp, vec![segment(0, 3), segment(5, 9)])), None);
        // The store-only segment missing while the log start is still 0: refused.
        let dropped = manifest(&tp, vec![segment(5, 9), segment(9, 12)]);
        assert!(regression(&prev, &dropped).is_some());
        // The log start moved past it (retention, DeleteRecords): fine, also
        // when it stops inside the next segment.
        let retained = Manifest { log_start_offset: 5, ..dropped.clone() };
        assert_eq!(regression(&prev, &retained), None);
        let inside = Manifest { log_start_offset: 7, ..dropped.clone() };
        assert_eq!(regression(&prev, &inside), None);
        // Past 5 but the segment holding it gone too: refused.
        let cut = Manifest { log_start_offset: 7, ..manifest(&tp, vec![segment(9, 12)]) };
        assert!(regression(&prev, &cut).is_some());
    }

    #[tokio::test]
    async fn create_only_sequence_and_latest() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let store = super::super::RemoteStorageConfig::for_tool(&url, None, None).open().unwrap();
        let tp = TopicPartition::new("t", 0);
        assert!(latest(&store, &tp).await.unwrap().is_none());
        let m1 = manifest(&tp, vec![segment(0, 5)]);
        write(&store, &tp, 1, &m1).await.unwrap();
        let m2 = manifest(&tp, vec![segment(0, 5), segment(5, 9)]);
        write(&store, &tp, 2, &m2).await.unwrap();
        // A second writer of number 2 loses and overwrites nothing.
        let err = write(&store, &tp, 2, &m1).await.unwrap_err();
        assert!(matches!(err, RemoteError::Conflict { .. }), "{err}");
        // The same writer retrying number 2 (its reply lost) finds its own bytes.
        write(&store, &tp, 2, &m2).await.unwrap();
        let (seq, got) = latest(&store, &tp).await.unwrap().unwrap();
        assert_eq!((seq, got), (2, m2));
        // A manifest naming another partition, or overlapping segments, is refused.
        let other = TopicPartition::new("t", 1);
        write(&store, &tp, 3, &manifest(&other, vec![])).await.unwrap();
        assert!(matches!(read(&store, &tp, 3).await, Err(RemoteError::Manifest { .. })));
        write(&store, &tp, 4, &manifest(&tp, vec![segment(0, 6), segment(5, 9)])).await.unwrap();
        assert!(matches!(read(&store, &tp, 4).await, Err(RemoteError::Manifest { .. })));
    }
}

//! A partition's manifest: the segments in the store that make up the
//! partition, with their objects' keys, sizes and CRC32Cs, the topic's
//! identity and config, the log start offset and the cleaner's clean point.
//!
//! Manifests are immutable. Each is written create-only as
//! `topics/<tp>/manifest/<20-digit seq>.json`, one number above the latest;
//! the reader takes the highest number. A number already taken means another
//! writer: the write fails and nothing is overwritten.
//!
//! A manifest is validated when read ([`Manifest::check`]): segments sorted
//! and disjoint, each with offsets, known file extensions, keys that name
//! exactly the entry's (base, CRC32C, size, extension), sizes a segment file
//! can have. An invalid manifest is `Corrupt` (with its key): the uploader
//! never writes past an invalid latest one (it would silently replace what
//! another sediment or a newer version wrote), while readers ([`latest_valid`])
//! fall back to the newest valid one below it, whose objects the sweep keeps
//! (it stops at an invalid manifest, see `sweep`).
//!
//! A retired manifest (`retired: true`, no segments) ends a partition whose
//! topic was deleted or whose remote storage was disabled (`retire`):
//! readers skip the partition, and a topic created again under the name goes
//! on with the next number.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::store::{RemoteStore, MAX_METADATA_BYTES};
use super::RemoteError;
use crate::log::TopicPartition;

pub const FORMAT: u32 = 1;
/// The file extensions of a segment, as uploaded.
pub const EXTS: [&str; 4] = ["log", "index", "timeindex", "txnindex"];
/// The largest segment file a manifest may list: Kafka's positions in a
/// segment are 32-bit.
pub const MAX_OBJECT_BYTES: u64 = i32::MAX as u64;

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
    /// The largest record timestamp of the segment (what `retention.ms`
    /// measures); -1 in manifests written before it was recorded: such a
    /// segment is never expired by time.
    #[serde(default = "unknown_timestamp")]
    pub max_timestamp: i64,
}

fn unknown_timestamp() -> i64 {
    -1
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
    /// The first offset on local disk when the manifest was written: below
    /// it segments were only in the store. `None` in older manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_log_start_offset: Option<i64>,
    /// The store cleaner's clean point (`store_cleaner`): the end of its
    /// last map; `None` before the first store clean (and in older manifests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_clean_offset: Option<i64>,
    /// The next offset after the last segment listed.
    pub end_offset: i64,
    pub segments: Vec<SegmentEntry>,
    pub written_at_ms: i64,
    /// The partition's last manifest: its topic was deleted or its remote
    /// storage disabled. Lists no segment. Absent (false) in older manifests.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
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
            && self.store_clean_offset == other.store_clean_offset
            && self.topic_config == other.topic_config
            && self.partition_metadata == other.partition_metadata
    }

    /// Whether the manifest is one sediment could have written for `tp`.
    ///
    /// # Errors
    /// `Corrupt`, with the reason.
    pub fn check(&self, key: &str, tp: &TopicPartition) -> Result<(), RemoteError> {
        let bad = |reason: String| Err(RemoteError::Corrupt { key: key.into(), reason });
        if self.format != FORMAT {
            return bad(format!("format {} is not {FORMAT}", self.format));
        }
        if self.topic != tp.topic || self.partition != tp.partition {
            return bad(format!("names {}-{}", self.topic, self.partition));
        }
        for w in self.segments.windows(2) {
            if w[0].next_offset > w[1].base_offset || w[0].base_offset >= w[1].base_offset {
                return bad(format!(
                    "segments {} and {} overlap or are out of order",
                    w[0].base_offset, w[1].base_offset
                ));
            }
        }
        for s in &self.segments {
            if let Err(reason) = s.check() {
                return bad(format!("segment {}: {reason}", s.base_offset));
            }
        }
        let last_next = self.segments.last().map_or(self.log_start_offset, |s| s.next_offset);
        if self.end_offset < last_next
            || self.log_start_offset < 0
            || self.log_start_offset > self.end_offset
            || self.clean_offset.is_some_and(|c| c < 0 || c > self.end_offset)
            || self.store_clean_offset.is_some_and(|c| c < 0 || c > self.end_offset)
        {
            return bad(format!(
                "offsets do not fit: log start {}, clean point {:?}, end {}, last segment ends at {last_next}",
                self.log_start_offset, self.clean_offset, self.end_offset
            ));
        }
        if self.retired && !self.segments.is_empty() {
            return bad("a retired manifest lists segments".into());
        }
        Ok(())
    }
}

impl SegmentEntry {
    /// Offsets and files consistent: base below the next offset (equal only
    /// for an empty `.log`), each extension known and once, a `.log`, keys
    /// naming the file's content, sizes bounded.
    fn check(&self) -> Result<(), String> {
        let empty = self.files.iter().any(|f| f.ext == "log" && f.size == 0);
        if self.base_offset < 0
            || self.next_offset < self.base_offset
            || (self.next_offset == self.base_offset && !empty)
        {
            return Err(format!("no offsets (next offset {})", self.next_offset));
        }
        if self.log_key().is_none() {
            return Err("no .log object".into());
        }
        let mut seen = Vec::new();
        for f in &self.files {
            if !EXTS.contains(&f.ext.as_str()) || seen.contains(&f.ext.as_str()) {
                return Err(format!("extension {:?} unknown or listed twice", f.ext));
            }
            seen.push(f.ext.as_str());
            if f.size > MAX_OBJECT_BYTES {
                return Err(format!(
                    "{} is {} bytes, more than a segment file holds",
                    f.key, f.size
                ));
            }
            if f.key != object_key(self.base_offset, f.crc32c, f.size, &f.ext) {
                return Err(format!("key {:?} does not name its content", f.key));
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

/// Why the uploader must not write `next` over `prev`: [`regression`], but
/// nothing after a retired manifest (its topic is gone; a topic of the same
/// name starts over under the next number).
pub fn refusal(prev: &Manifest, next: &Manifest) -> Option<String> {
    if prev.retired {
        return None;
    }
    regression(prev, next)
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
/// Store errors; `Corrupt` when it does not parse or is invalid ([`Manifest::check`]).
pub async fn read(
    store: &RemoteStore,
    tp: &TopicPartition,
    seq: u64,
) -> Result<Manifest, RemoteError> {
    let key = manifest_key(tp, seq);
    let bytes = store.get_bounded(&store.key(&key), MAX_METADATA_BYTES).await?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| RemoteError::Corrupt { key: key.clone(), reason: e.to_string() })?;
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

/// The newest manifest of `tp` that reads and is valid, for readers: an
/// invalid one above it is skipped (logged with its key).
///
/// # Errors
/// Store errors (a manifest that cannot be read now is not skipped: the
/// one below it may be out of date).
pub async fn latest_valid(
    store: &RemoteStore,
    tp: &TopicPartition,
) -> Result<Option<(u64, Manifest)>, RemoteError> {
    for &(seq, _) in list_manifests(store, tp).await?.iter().rev() {
        match read(store, tp, seq).await {
            Ok(m) => return Ok(Some((seq, m))),
            Err(e @ RemoteError::Corrupt { .. }) => {
                tracing::warn!(partition = %tp, "{e}; reading the manifest below it");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
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
pub(crate) mod tests {
    use super::*;

    pub(crate) fn manifest(tp: &TopicPartition, segments: Vec<SegmentEntry>) -> Manifest {
        Manifest {
            format: FORMAT,
            cluster_id: "c".into(),
            topic: tp.topic.clone(),
            partition: tp.partition,
            partition_metadata: "version: 0\n".into(),
            topic_config: BTreeMap::new(),
            log_start_offset: 0,
            clean_offset: None,
            store_clean_offset: None,
            local_log_start_offset: None,
            end_offset: segments.last().map_or(0, |s| s.next_offset),
            segments,
            written_at_ms: 0,
            retired: false,
        }
    }

    pub(crate) fn segment(base: i64, next: i64) -> SegmentEntry {
        let key = object_key(base, 7, 10, "log");
        SegmentEntry {
            base_offset: base,
            next_offset: next,
            files: vec![ObjectEntry { ext: "log".into(), key, size: 10, crc32c: 7 }],
            max_timestamp: 1_000 + base,
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
        assert!(matches!(read(&store, &tp, 3).await, Err(RemoteError::Corrupt { .. })));
        write(&store, &tp, 4, &manifest(&tp, vec![segment(0, 6), segment(5, 9)])).await.unwrap();
        assert!(matches!(read(&store, &tp, 4).await, Err(RemoteError::Corrupt { .. })));
        // Readers fall back past invalid manifests; the uploader's `latest` does not.
        let err = latest(&store, &tp).await.unwrap_err();
        assert!(err.to_string().contains(&manifest_key(&tp, 4)), "{err}");
        assert_eq!(err.kind(), "corrupt");
        assert_eq!(latest_valid(&store, &tp).await.unwrap().map(|(s, _)| s), Some(2));
    }

    #[test]
    fn invalid_manifests_are_refused_with_the_reason() {
        let tp = TopicPartition::new("t", 0);
        let ok = manifest(&tp, vec![segment(0, 5), segment(5, 9)]);
        ok.check("k", &tp).unwrap();
        let with = |f: &dyn Fn(&mut Manifest)| {
            let mut m = ok.clone();
            f(&mut m);
            m.check("k", &tp).unwrap_err().to_string()
        };
        type Edit = Box<dyn Fn(&mut Manifest)>;
        let cases: Vec<(&str, Edit)> = vec![
            ("out of order", Box::new(|m| m.segments.swap(0, 1))),
            ("out of order", Box::new(|m| m.segments[1] = segment(0, 9))),
            ("no offsets", Box::new(|m| m.segments[1] = segment(5, 5))),
            ("no offsets", Box::new(|m| m.segments[1] = segment(5, 4))),
            (
                "unknown",
                Box::new(|m| {
                    let key = object_key(0, 7, 10, "exe");
                    let f = ObjectEntry { ext: "exe".into(), key, size: 10, crc32c: 7 };
                    m.segments[0].files.push(f)
                }),
            ),
            (
                "twice",
                Box::new(|m| {
                    let dup = m.segments[0].files[0].clone();
                    m.segments[0].files.push(dup)
                }),
            ),
            ("does not name", Box::new(|m| m.segments[0].files[0].size = 11)),
            ("does not name", Box::new(|m| m.segments[0].files[0].crc32c = 8)),
            ("does not name", Box::new(|m| m.segments[1].files[0].key = "segments/../x".into())),
            (
                "more than",
                Box::new(|m| {
                    let size = MAX_OBJECT_BYTES + 1;
                    let f = &mut m.segments[0].files[0];
                    (f.size, f.key) = (size, object_key(0, 7, size, "log"));
                }),
            ),
            ("offsets do not fit", Box::new(|m| m.end_offset = 8)),
            ("offsets do not fit", Box::new(|m| m.clean_offset = Some(10))),
            ("retired", Box::new(|m| m.retired = true)),
        ];
        for (want, f) in cases {
            let err = with(&*f);
            assert!(err.contains(want), "{want}: {err}");
        }
        // An empty cleaned segment (base = next, zero bytes) is fine.
        let empty = SegmentEntry {
            base_offset: 9,
            next_offset: 9,
            files: vec![ObjectEntry {
                ext: "log".into(),
                key: object_key(9, 0, 0, "log"),
                size: 0,
                crc32c: 0,
            }],
            max_timestamp: -1,
        };
        let mut m = ok.clone();
        m.segments.push(empty);
        m.check("k", &tp).unwrap();
    }

    #[test]
    fn a_retired_manifest_is_followed_by_any_and_parses_without_the_field() {
        let tp = TopicPartition::new("t", 0);
        let prev = manifest(&tp, vec![segment(0, 5)]);
        let recreated = Manifest {
            partition_metadata: "version: 0\ntopic_id: other\n".into(),
            ..manifest(&tp, vec![])
        };
        assert!(refusal(&prev, &recreated).is_some());
        let retired = super::super::retire::retired(prev.clone());
        retired.check("k", &tp).unwrap();
        assert_eq!(refusal(&retired, &recreated), None);
        // Written without the field when false; older manifests have none.
        let text = serde_json::to_string(&prev).unwrap();
        assert!(!text.contains("retired"), "{text}");
        let back: Manifest = serde_json::from_str(&text).unwrap();
        assert!(!back.retired);
        let text = serde_json::to_string(&retired).unwrap();
        assert!(serde_json::from_str::<Manifest>(&text).unwrap().retired);
    }

    #[test]
    fn a_segment_without_max_timestamp_parses_as_unknown() {
        let tp = TopicPartition::new("t", 0);
        let m = manifest(&tp, vec![segment(0, 5)]);
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains("\"max_timestamp\":1000"), "{text}");
        let back: Manifest = serde_json::from_str(&text).unwrap();
        assert_eq!(back.segments[0].max_timestamp, 1000);
        let old = text.replace(",\"max_timestamp\":1000", "");
        assert!(!old.contains("max_timestamp"), "{old}");
        let back: Manifest = serde_json::from_str(&old).unwrap();
        back.check("k", &tp).unwrap();
        assert_eq!(back.segments[0].max_timestamp, -1);
    }
}

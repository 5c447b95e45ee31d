//! `sediment restore`: a fresh data dir built from the latest valid manifest
//! of every partition in the store (a retired partition is skipped: its
//! topic was deleted).
//!
//! Crash safety: everything is written into `DIR.restoring` beside the
//! target, fsynced, and renamed to `DIR` at the very end, so a killed restore
//! leaves no `DIR` that `serve` would start on, only a `.restoring` that the
//! next restore removes and redoes. A `DIR` that exists and is not empty is
//! refused (an empty one is replaced; an empty mount point cannot be, so
//! restore into a directory below it). Every object is checked
//! against the manifest's size and CRC32C before it is written, so a corrupt
//! object fails the restore with its key instead of being served. Then the
//! dir's checkpoints are written: log start offsets, recovery points (the end
//! of what was restored, all of it fsynced) and the cleaner's clean points;
//! and `meta.properties` with the store's cluster id, so the restored broker
//! may go on writing to the same store.
//!
//! What the store has is every closed segment uploaded: records still in a
//! partition's active segment when the old broker stopped are not in it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::manifest::{self, partition_dir, Manifest, ObjectEntry};
use super::store::{RangedRead, RemoteStore};
use super::RemoteError;
use crate::log::checkpoint::{
    OffsetCheckpointFile, CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
};
use crate::log::manager::{PARTITION_METADATA_FILE, TOPIC_CONFIG_FILE};
use crate::log::meta_properties::{MetaProperties, META_PROPERTIES_FILE};
use crate::log::TopicPartition;

/// What a restore brought back.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RestoreSummary {
    pub cluster_id: String,
    pub partitions: usize,
    pub segments: usize,
    pub bytes: u64,
}

#[derive(Default)]
struct Checkpoints {
    log_start: BTreeMap<TopicPartition, i64>,
    recovery: BTreeMap<TopicPartition, i64>,
    cleaner: BTreeMap<TopicPartition, i64>,
}

fn fail(dir: &Path, reason: impl Into<String>) -> RemoteError {
    RemoteError::Restore { dir: dir.to_path_buf(), reason: reason.into() }
}

/// Where a restore into `data_dir` is built: `DIR.restoring` beside it.
pub fn staging_dir(data_dir: &Path) -> Result<PathBuf, RemoteError> {
    let name = data_dir.file_name().ok_or_else(|| fail(data_dir, "names no directory"))?;
    let mut staged = name.to_os_string();
    staged.push(".restoring");
    Ok(data_dir.with_file_name(staged))
}

/// Build `data_dir` (missing or empty) from `store`.
///
/// # Errors
/// A non-empty `data_dir`; a store that is not sediment's; store errors; an
/// object whose size or CRC32C differs from its manifest's (named by key).
pub async fn restore(
    store: &RemoteStore,
    data_dir: &Path,
    node_id: i32,
) -> Result<RestoreSummary, RemoteError> {
    if std::fs::read_dir(data_dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(fail(
            data_dir,
            "the directory exists and is not empty; restore builds a fresh one (move it away or name another)",
        ));
    }
    let staged = staging_dir(data_dir)?;
    let marker = store.read_marker().await?.ok_or_else(|| {
        fail(data_dir, format!("{} has no sediment-store.json: not a sediment store", store.url()))
    })?;
    if staged.exists() {
        tracing::warn!("removing {}, left by a restore that did not finish", staged.display());
        std::fs::remove_dir_all(&staged).map_err(RemoteError::io(&staged))?;
    }
    std::fs::create_dir_all(&staged).map_err(RemoteError::io(&staged))?;
    let summary = restore_into(store, &staged, marker, node_id).await?;
    crate::log::checkpoint::fsync_dir(&staged)?;
    if data_dir.exists() {
        std::fs::remove_dir(data_dir).map_err(RemoteError::io(data_dir))?;
    }
    std::fs::rename(&staged, data_dir).map_err(RemoteError::io(data_dir))?;
    let parent = data_dir.parent().filter(|p| !p.as_os_str().is_empty());
    crate::log::checkpoint::fsync_dir(parent.unwrap_or(Path::new(".")))?;
    Ok(summary)
}

/// The cleaner checkpoint a restored partition starts from. The local
/// cleaner's clean point holds for what was on local disk when it was set;
/// segments that were only in the store are clean only below the store
/// cleaner's clean point (or not at all), so with such segments the lower
/// of the two: a restored log is recleaned from there, never treated as
/// clean where it is not (a tombstone removed there could bring back an
/// older copy of its key). `None`: clean from the log start.
fn restored_clean_point(m: &Manifest) -> Option<i64> {
    let clean = m.clean_offset?;
    let store_only = m.local_log_start_offset.is_none_or(|l| l > m.log_start_offset);
    if !store_only {
        return Some(clean);
    }
    Some(clean.min(m.store_clean_offset.unwrap_or(m.log_start_offset)))
}

/// Restore every partition and the dir's checkpoints into `data_dir`.
async fn restore_into(
    store: &RemoteStore,
    data_dir: &Path,
    marker: super::store::StoreMarker,
    node_id: i32,
) -> Result<RestoreSummary, RemoteError> {
    let (_, names) = store.list("topics").await?;
    let mut summary =
        RestoreSummary { cluster_id: marker.cluster_id.clone(), ..Default::default() };
    let mut checkpoints = Checkpoints::default();
    for name in names {
        let Some(tp) = TopicPartition::from_dir_name(&name) else {
            tracing::warn!("restore skips {name}: not a topic-partition");
            continue;
        };
        let Some((seq, m)) = manifest::latest_valid(store, &tp).await? else { continue };
        if m.retired {
            tracing::info!(partition = %tp, seq, "skipped: retired (its topic was deleted)");
            continue;
        }
        tracing::info!(partition = %tp, seq, segments = m.segments.len(), "restoring");
        restore_partition(store, &tp, &m, data_dir, &mut summary).await?;
        checkpoints.log_start.insert(tp.clone(), m.log_start_offset);
        checkpoints.recovery.insert(tp.clone(), m.end_offset);
        if let Some(clean) = restored_clean_point(&m) {
            checkpoints.cleaner.insert(tp, clean);
        }
        summary.partitions += 1;
    }
    for (name, map) in [
        (LOG_START_OFFSET_CHECKPOINT, &checkpoints.log_start),
        (RECOVERY_POINT_CHECKPOINT, &checkpoints.recovery),
        (CLEANER_OFFSET_CHECKPOINT, &checkpoints.cleaner),
    ] {
        OffsetCheckpointFile::new(data_dir, name).write(map)?;
    }
    let meta = MetaProperties { cluster_id: marker.cluster_id, node_id };
    let path = data_dir.join(META_PROPERTIES_FILE);
    crate::log::checkpoint::write_atomically(&path, meta.to_text().as_bytes())?;
    Ok(summary)
}

async fn restore_partition(
    store: &RemoteStore,
    tp: &TopicPartition,
    m: &Manifest,
    data_dir: &Path,
    summary: &mut RestoreSummary,
) -> Result<(), RemoteError> {
    let staged = data_dir.join(tp.to_string());
    std::fs::create_dir_all(&staged).map_err(RemoteError::io(&staged))?;
    for seg in &m.segments {
        for f in &seg.files {
            let key = store.key(&format!("{}/{}", partition_dir(tp), f.key));
            let path = staged.join(format!("{:020}.{}", seg.base_offset, f.ext));
            download_synced(store, &key, f, &path).await?;
            summary.bytes += f.size;
        }
        summary.segments += 1;
    }
    // An empty active segment at the end, so the last restored segment stays
    // closed (and in the next manifest) instead of becoming the one appended to.
    write_synced(&staged.join(format!("{:020}.log", m.end_offset)), &[])?;
    write_synced(&staged.join(PARTITION_METADATA_FILE), m.partition_metadata.as_bytes())?;
    let config: String = m.topic_config.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    write_synced(&staged.join(TOPIC_CONFIG_FILE), config.as_bytes())?;
    crate::log::checkpoint::fsync_dir(&staged)?;
    Ok(())
}

/// Download `key` to `path` in ranged GETs (never whole in memory),
/// checking size and CRC32C, and fsync it.
async fn download_synced(
    store: &RemoteStore,
    key: &object_store::path::Path,
    f: &ObjectEntry,
    path: &Path,
) -> Result<(), RemoteError> {
    let mut read = RangedRead::open(store, key, f.size, f.crc32c).await?;
    let mut file = std::fs::File::create(path).map_err(RemoteError::io(path))?;
    while let Some((_, chunk)) = read.next().await? {
        file.write_all(&chunk).map_err(RemoteError::io(path))?;
    }
    file.sync_all().map_err(RemoteError::io(path))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), RemoteError> {
    let mut f = std::fs::File::create(path).map_err(RemoteError::io(path))?;
    f.write_all(bytes).map_err(RemoteError::io(path))?;
    f.sync_all().map_err(RemoteError::io(path))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::remote::manifest::{object_key, ObjectEntry, SegmentEntry, FORMAT};
    use crate::remote::RemoteStorageConfig;

    fn one_segment(tp: &TopicPartition, content: &[u8]) -> Manifest {
        let key = object_key(0, crc32c::crc32c(content), content.len() as u64, "log");
        let file = ObjectEntry {
            ext: "log".into(),
            key,
            size: content.len() as u64,
            crc32c: crc32c::crc32c(content),
        };
        Manifest {
            format: FORMAT,
            cluster_id: "cluster-r".into(),
            topic: tp.topic.clone(),
            partition: tp.partition,
            partition_metadata: "version: 0\n".into(),
            topic_config: BTreeMap::new(),
            log_start_offset: 0,
            clean_offset: None,
            store_clean_offset: None,
            local_log_start_offset: None,
            end_offset: 1,
            segments: vec![SegmentEntry {
                base_offset: 0,
                next_offset: 1,
                files: vec![file],
                max_timestamp: -1,
            }],
            written_at_ms: 0,
            retired: false,
        }
    }

    /// A corrupt object fails the restore with its key and leaves no data
    /// dir behind (only the staging dir, which the next restore redoes); a
    /// non-empty dir and a store without a marker are refused.
    #[tokio::test]
    async fn a_failed_restore_leaves_no_data_dir_and_is_redone() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("store").display());
        std::fs::create_dir_all(dir.path().join("store")).unwrap();
        let store = RemoteStorageConfig::for_tool(&url, None, None).open().unwrap();
        let target = dir.path().join("data");
        let err = restore(&store, &target, 1).await.unwrap_err();
        assert!(err.to_string().contains("not a sediment store"), "{err}");

        store.claim("cluster-r", 1).await.unwrap();
        let (tp, gone) = (TopicPartition::new("t", 0), TopicPartition::new("gone", 0));
        let good = b"the segment's bytes";
        let m = one_segment(&tp, good);
        let path = store.key(&format!("{}/{}", partition_dir(&tp), m.segments[0].files[0].key));
        // The store holds other bytes of the same size under the key.
        store.put_verified(&path, Bytes::from_static(b"the segment's BYTES")).await.unwrap();
        manifest::write(&store, &tp, 1, &m).await.unwrap();
        // A deleted topic: its retired manifest is the latest.
        let g = one_segment(&gone, good);
        let gpath = store.key(&format!("{}/{}", partition_dir(&gone), g.segments[0].files[0].key));
        store.put_verified(&gpath, Bytes::from_static(good)).await.unwrap();
        manifest::write(&store, &gone, 1, &g).await.unwrap();
        manifest::write(&store, &gone, 2, &crate::remote::retire::retired(g)).await.unwrap();

        let err = restore(&store, &target, 1).await.unwrap_err();
        assert!(matches!(err, RemoteError::Verify { .. }), "{err}");
        assert!(err.to_string().contains(&m.segments[0].files[0].key), "{err}");
        assert!(!target.exists(), "a failed restore left a data dir to start on");
        assert!(staging_dir(&target).unwrap().exists());

        // Repaired, the next restore removes the leftover and redoes it all.
        store.put_verified(&path, Bytes::from_static(good)).await.unwrap();
        std::fs::create_dir(&target).unwrap(); // an empty dir is fine
        let summary = restore(&store, &target, 1).await.unwrap();
        assert_eq!((summary.partitions, summary.segments), (1, 1));
        assert!(!staging_dir(&target).unwrap().exists());
        assert_eq!(std::fs::read(target.join("t-0").join(format!("{:020}.log", 0))).unwrap(), good);
        assert!(!target.join("gone-0").exists(), "a retired partition came back");
        assert!(target.join(META_PROPERTIES_FILE).exists());
        let err = restore(&store, &target, 1).await.unwrap_err();
        assert!(err.to_string().contains("not empty"), "{err}");
    }

    /// An invalid latest manifest: the restore uses the valid one below it.
    #[tokio::test]
    async fn an_invalid_latest_manifest_falls_back_to_the_valid_one_below() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("store").display());
        std::fs::create_dir_all(dir.path().join("store")).unwrap();
        let store = RemoteStorageConfig::for_tool(&url, None, None).open().unwrap();
        store.claim("cluster-r", 1).await.unwrap();
        let tp = TopicPartition::new("t", 0);
        let good = b"segment";
        let m = one_segment(&tp, good);
        let path = store.key(&format!("{}/{}", partition_dir(&tp), m.segments[0].files[0].key));
        store.put_verified(&path, Bytes::from_static(good)).await.unwrap();
        manifest::write(&store, &tp, 1, &m).await.unwrap();
        let mut bad = m.clone();
        bad.segments[0].files[0].size = 3; // its key names 7 bytes
        manifest::write(&store, &tp, 2, &bad).await.unwrap();
        let target = dir.path().join("data");
        let summary = restore(&store, &target, 1).await.unwrap();
        assert_eq!(summary.partitions, 1);
        assert_eq!(std::fs::read(target.join("t-0").join(format!("{:020}.log", 0))).unwrap(), good);
    }
}

//! `sediment restore`: a fresh data dir built from the latest manifest of
//! every partition in the store.
//!
//! Each partition is written as `<tp>.creating` and renamed into place when
//! complete (a start deletes `.creating` leftovers); every object is checked
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
use std::path::Path;

use super::manifest::{self, partition_dir, Manifest};
use super::store::RemoteStore;
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
        return Err(fail(data_dir, "the directory is not empty; restore builds a fresh one"));
    }
    let marker = store.read_marker().await?.ok_or_else(|| {
        fail(data_dir, format!("{} has no sediment-store.json: not a sediment store", store.url()))
    })?;
    std::fs::create_dir_all(data_dir).map_err(RemoteError::io(data_dir))?;
    let (_, names) = store.list("topics").await?;
    let mut summary =
        RestoreSummary { cluster_id: marker.cluster_id.clone(), ..Default::default() };
    let mut checkpoints = Checkpoints::default();
    for name in names {
        let Some(tp) = TopicPartition::from_dir_name(&name) else {
            tracing::warn!("restore skips {name}: not a topic-partition");
            continue;
        };
        let Some((seq, m)) = manifest::latest(store, &tp).await? else { continue };
        tracing::info!(partition = %tp, seq, segments = m.segments.len(), "restoring");
        restore_partition(store, &tp, &m, data_dir, &mut summary).await?;
        checkpoints.log_start.insert(tp.clone(), m.log_start_offset);
        checkpoints.recovery.insert(tp.clone(), m.end_offset);
        if let Some(clean) = m.clean_offset {
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
    let staged = data_dir.join(format!("{tp}.creating"));
    std::fs::create_dir_all(&staged).map_err(RemoteError::io(&staged))?;
    for seg in &m.segments {
        for f in &seg.files {
            let key = store.key(&format!("{}/{}", partition_dir(tp), f.key));
            let bytes = store.get_bounded(&key, f.size).await?;
            let crc = crc32c::crc32c(&bytes);
            if bytes.len() as u64 != f.size || crc != f.crc32c {
                return Err(RemoteError::Verify {
                    key: key.to_string(),
                    size: f.size,
                    crc: f.crc32c,
                    got_size: bytes.len() as u64,
                    got_crc: crc,
                });
            }
            let path = staged.join(format!("{:020}.{}", seg.base_offset, f.ext));
            write_synced(&path, &bytes)?;
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
    let dir = data_dir.join(tp.to_string());
    std::fs::rename(&staged, &dir).map_err(RemoteError::io(&dir))?;
    crate::log::checkpoint::fsync_dir(data_dir)?;
    Ok(())
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

    /// A corrupt object fails the restore with its key; a non-empty dir and
    /// a store without a marker are refused.
    #[tokio::test]
    async fn corrupt_objects_foreign_stores_and_non_empty_dirs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("store").display());
        std::fs::create_dir_all(dir.path().join("store")).unwrap();
        let store = RemoteStorageConfig::for_tool(&url, None, None).open().unwrap();
        let target = dir.path().join("data");
        let err = restore(&store, &target, 1).await.unwrap_err();
        assert!(err.to_string().contains("not a sediment store"), "{err}");

        store.claim("cluster-r", 1).await.unwrap();
        let tp = TopicPartition::new("t", 0);
        let good = b"the segment's bytes";
        let key = object_key(0, crc32c::crc32c(good), good.len() as u64, "log");
        let path = store.key(&format!("{}/{key}", partition_dir(&tp)));
        // The store holds other bytes of the same size under the key.
        store.put_verified(&path, Bytes::from_static(b"the segment's BYTES")).await.unwrap();
        let file = ObjectEntry {
            ext: "log".into(),
            key: key.clone(),
            size: good.len() as u64,
            crc32c: crc32c::crc32c(good),
        };
        let m = Manifest {
            format: FORMAT,
            cluster_id: "cluster-r".into(),
            topic: "t".into(),
            partition: 0,
            partition_metadata: "version: 0\n".into(),
            topic_config: BTreeMap::new(),
            log_start_offset: 0,
            clean_offset: None,
            end_offset: 1,
            segments: vec![SegmentEntry { base_offset: 0, next_offset: 1, files: vec![file] }],
            written_at_ms: 0,
        };
        manifest::write(&store, &tp, 1, &m).await.unwrap();
        let err = restore(&store, &target, 1).await.unwrap_err();
        assert!(matches!(err, RemoteError::Verify { .. }), "{err}");
        assert!(err.to_string().contains(&key), "{err}");
        let err = restore(&store, &target, 1).await.unwrap_err();
        assert!(err.to_string().contains("not empty"), "{err}");
    }
}

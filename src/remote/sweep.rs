//! Deleting what a partition's manifests no longer need, driven by the
//! manifests alone, so the same rule removes what a clean replaced and what a
//! crash left behind:
//! * a manifest is live while it is the latest, or its successor was written
//!   less than the delay ago (a reader may still be following it);
//! * a segment object is deleted when no live manifest lists it and it is
//!   itself older than the delay (an upload whose manifest is not written
//!   yet is younger than that);
//! * manifests that are not live are deleted after the objects, so a crash
//!   in between leaves only old manifests, deleted by the next sweep.
//!
//! A sweep that finds a manifest newer than the one its caller wrote stops:
//! another writer is at work, and nothing is deleted from under it.

use std::collections::HashSet;

use super::manifest::{self, partition_dir, Manifest};
use super::store::RemoteStore;
use super::RemoteError;
use crate::log::TopicPartition;

/// Delete the out-of-date objects and manifests of `tp`, whose latest
/// manifest is `latest` (number `latest_seq`). Returns the objects deleted.
///
/// # Errors
/// Store errors; what was deleted before one stays deleted.
pub async fn sweep(
    store: &RemoteStore,
    tp: &TopicPartition,
    latest_seq: u64,
    latest: &Manifest,
    delay_ms: i64,
    now_ms: i64,
) -> Result<u64, RemoteError> {
    let manifests = manifest::list_manifests(store, tp).await?;
    if manifests.last().map(|m| m.0) != Some(latest_seq) {
        return Ok(0);
    }
    let mut live: HashSet<String> = latest.keys().map(str::to_string).collect();
    let mut dead = Vec::new();
    for pair in manifests.windows(2) {
        let ((seq, _), (_, successor_written)) = (pair[0], pair[1]);
        if now_ms - successor_written < delay_ms {
            match manifest::read(store, tp, seq).await {
                Ok(m) => live.extend(m.keys().map(str::to_string)),
                // Deleted meanwhile or unreadable: it lists nothing to keep.
                Err(e) => tracing::warn!(partition = %tp, "sweep skips manifest {seq}: {e}"),
            }
        } else {
            dead.push(seq);
        }
    }
    let dir = partition_dir(tp);
    let (objects, _) = store.list(&format!("{dir}/segments")).await?;
    let mut deleted = 0;
    for o in objects {
        let Some(name) = o.location.filename() else { continue };
        let rel = format!("segments/{name}");
        let age = now_ms - o.last_modified.timestamp_millis();
        if !live.contains(&rel) && age >= delay_ms {
            store.delete(&o.location).await?;
            deleted += 1;
        }
    }
    for seq in dead {
        store.delete(&store.key(&manifest::manifest_key(tp, seq))).await?;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::Bytes;

    use super::*;
    use crate::remote::manifest::{object_key, ObjectEntry, SegmentEntry, FORMAT};
    use crate::remote::RemoteStorageConfig;

    fn manifest(tp: &TopicPartition, keys: &[&str]) -> Manifest {
        let segments = keys
            .iter()
            .enumerate()
            .map(|(i, k)| SegmentEntry {
                base_offset: i as i64 * 10,
                next_offset: i as i64 * 10 + 10,
                files: vec![ObjectEntry {
                    ext: "log".into(),
                    key: k.to_string(),
                    size: 1,
                    crc32c: 0,
                }],
            })
            .collect();
        Manifest {
            format: FORMAT,
            cluster_id: "c".into(),
            topic: tp.topic.clone(),
            partition: tp.partition,
            partition_metadata: String::new(),
            topic_config: BTreeMap::new(),
            log_start_offset: 0,
            clean_offset: None,
            end_offset: keys.len() as i64 * 10,
            segments,
            written_at_ms: 0,
        }
    }

    async fn names(store: &RemoteStore, dir: &str) -> Vec<String> {
        let (objects, _) = store.list(dir).await.unwrap();
        let mut out: Vec<String> =
            objects.iter().filter_map(|o| o.location.filename().map(str::to_string)).collect();
        out.sort();
        out
    }

    /// The state a clean followed by a crash leaves: manifest 1 lists the
    /// replaced object, manifest 2 the cleaned one, and an upload whose
    /// manifest was never written left an orphan.
    #[tokio::test]
    async fn only_what_no_current_manifest_lists_goes_and_only_after_the_delay() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let store = RemoteStorageConfig::for_tool(&url, None, None).open().unwrap();
        let tp = TopicPartition::new("t", 0);
        let (replaced, cleaned, orphan) =
            (object_key(0, 1, 1, "log"), object_key(0, 2, 1, "log"), object_key(10, 3, 1, "log"));
        for key in [&replaced, &cleaned, &orphan] {
            let path = store.key(&format!("{}/{key}", partition_dir(&tp)));
            store.put_verified(&path, Bytes::from_static(b"x")).await.unwrap();
        }
        manifest::write(&store, &tp, 1, &manifest(&tp, &[&replaced])).await.unwrap();
        let latest = manifest(&tp, &[&cleaned]);
        manifest::write(&store, &tp, 2, &latest).await.unwrap();
        let hour = 3_600_000;
        let now = crate::remote::now_ms();
        // Within the delay nothing goes: manifest 1 was current a moment ago.
        assert_eq!(sweep(&store, &tp, 2, &latest, hour, now).await.unwrap(), 0);
        assert_eq!(names(&store, "topics/t-0/segments").await.len(), 3);
        // Another writer's manifest 3: this writer deletes nothing.
        manifest::write(&store, &tp, 3, &manifest(&tp, &[&replaced])).await.unwrap();
        assert_eq!(sweep(&store, &tp, 2, &latest, hour, now + 2 * hour).await.unwrap(), 0);
        let three = store.key(&manifest::manifest_key(&tp, 3));
        store.delete(&three).await.unwrap();
        // Past the delay: the replaced object, the orphan and manifest 1 go.
        assert_eq!(sweep(&store, &tp, 2, &latest, hour, now + 2 * hour).await.unwrap(), 2);
        let cleaned_name = cleaned.strip_prefix("segments/").unwrap().to_string();
        assert_eq!(names(&store, "topics/t-0/segments").await, vec![cleaned_name]);
        assert_eq!(names(&store, "topics/t-0/manifest").await, vec![format!("{:020}.json", 2)]);
    }
}

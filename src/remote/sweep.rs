//! Deleting what a partition's manifests no longer need, driven by the
//! manifests alone, so the same rule removes what a clean replaced, what a
//! crash left behind and what a retired partition held:
//! * a manifest is live while it is the latest, or its successor was written
//!   less than the delay ago (a reader may still be following it);
//! * a segment object is deleted when no live manifest lists it and it is
//!   itself older than the delay (an upload whose manifest is not written
//!   yet is younger than that);
//! * manifests that are not live are deleted after the objects, so a crash
//!   in between leaves only old manifests, deleted by the next sweep;
//! * a retired latest manifest is deleted last of all: only once it is the
//!   partition's only manifest, no segment object is left, and it is older
//!   than the delay. Earlier, an older manifest would become the latest again
//!   (bringing the topic back on a restore) or objects would be left that no
//!   manifest leads a sweep to.
//!
//! One clock: every age is taken on the store's clock, the newest of a
//! fresh probe's Last-Modified (`RemoteStore::now_ms`) and the Last-Modified
//! times listed, against the objects' and manifests' own Last-Modified. The
//! broker's clock is never compared with the store's, so a broker clock ahead
//! of the store's deletes nothing early (one behind it only deletes later).
//!
//! Never wider: a live manifest that cannot be read (a store error, or one
//! that is invalid) stops the partition's sweep for the round with that error
//! (counted by kind by the caller) instead of counting as listing nothing. A
//! sweep that finds a manifest newer than the one its caller holds stops:
//! another writer is at work, and nothing is deleted from under it.

use std::collections::HashSet;

use super::crash_point;
use super::manifest::{self, partition_dir, Manifest};
use super::store::RemoteStore;
use super::RemoteError;
use crate::log::TopicPartition;

/// Delete the out-of-date objects and manifests of `tp`, whose latest
/// manifest is `latest` (number `latest_seq`). Returns the objects deleted.
///
/// # Errors
/// Store errors, and `Corrupt` for a live manifest that is invalid: nothing
/// more is deleted in this sweep; what was deleted before stays deleted.
pub async fn sweep(
    store: &RemoteStore,
    tp: &TopicPartition,
    latest_seq: u64,
    latest: &Manifest,
    delay_ms: i64,
) -> Result<u64, RemoteError> {
    let clock = store.now_ms().await?;
    sweep_at(store, tp, latest_seq, latest, delay_ms, clock).await
}

/// [`sweep`] with the store's clock read as `clock` (ms).
async fn sweep_at(
    store: &RemoteStore,
    tp: &TopicPartition,
    latest_seq: u64,
    latest: &Manifest,
    delay_ms: i64,
    clock: i64,
) -> Result<u64, RemoteError> {
    let manifests = manifest::list_manifests(store, tp).await?;
    if manifests.last().map(|m| m.0) != Some(latest_seq) {
        return Ok(0);
    }
    let dir = partition_dir(tp);
    let (objects, _) = store.list(&format!("{dir}/segments")).await?;
    let now = objects
        .iter()
        .map(|o| o.last_modified.timestamp_millis())
        .chain(manifests.iter().map(|m| m.1))
        .fold(clock, i64::max);
    let mut live: HashSet<String> = latest.keys().map(str::to_string).collect();
    let mut dead = Vec::new();
    for pair in manifests.windows(2) {
        let ((seq, _), (_, successor_written)) = (pair[0], pair[1]);
        if now - successor_written < delay_ms {
            live.extend(manifest::read(store, tp, seq).await?.keys().map(str::to_string));
        } else {
            dead.push(seq);
        }
    }
    let mut deleted = 0;
    for o in &objects {
        let Some(name) = o.location.filename() else { continue };
        let age = now - o.last_modified.timestamp_millis();
        if !live.contains(&format!("segments/{name}")) && age >= delay_ms {
            store.delete(&o.location).await?;
            deleted += 1;
        }
    }
    if deleted > 0 && !dead.is_empty() {
        crash_point::reached(crash_point::MID_SWEEP);
    }
    for seq in dead {
        store.delete(&store.key(&manifest::manifest_key(tp, seq))).await?;
    }
    let alone = manifests.len() == 1 && objects.is_empty();
    if latest.retired && alone && now - manifests[0].1 >= delay_ms {
        store.delete(&store.key(&manifest::manifest_key(tp, latest_seq))).await?;
        tracing::info!(partition = %tp, "retired partition swept from the store");
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use bytes::Bytes;

    use super::*;
    use crate::remote::manifest::{object_key, ObjectEntry, SegmentEntry, FORMAT};
    use crate::remote::RemoteStorageConfig;

    const HOUR: i64 = 3_600_000;

    /// A manifest listing one-byte `.log` objects at these (base, crc).
    fn manifest(tp: &TopicPartition, objects: &[(i64, u32)]) -> Manifest {
        let segments: Vec<SegmentEntry> = objects
            .iter()
            .map(|&(base, crc)| SegmentEntry {
                base_offset: base,
                next_offset: base + 10,
                files: vec![ObjectEntry {
                    ext: "log".into(),
                    key: object_key(base, crc, 1, "log"),
                    size: 1,
                    crc32c: crc,
                }],
                max_timestamp: -1,
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
            store_clean_offset: None,
            local_log_start_offset: None,
            end_offset: segments.last().map_or(0, |s| s.next_offset),
            segments,
            written_at_ms: 0,
            retired: false,
        }
    }

    async fn names(store: &RemoteStore, dir: &str) -> Vec<String> {
        let (objects, _) = store.list(dir).await.unwrap();
        let mut out: Vec<String> =
            objects.iter().filter_map(|o| o.location.filename().map(str::to_string)).collect();
        out.sort();
        out
    }

    /// Make every file under `dir` look `ms` older to the (directory) store.
    fn age_all(dir: &Path, ms: i64) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                age_all(&path, ms);
            } else {
                let file = std::fs::File::options().write(true).open(&path).unwrap();
                let when = file.metadata().unwrap().modified().unwrap();
                file.set_modified(when - Duration::from_millis(ms as u64)).unwrap();
            }
        }
    }

    async fn setup(objects: &[(i64, u32)]) -> (tempfile::TempDir, RemoteStore, TopicPartition) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let store = RemoteStorageConfig::for_tool(&url, None, None).open().unwrap();
        let tp = TopicPartition::new("t", 0);
        for &(base, crc) in objects {
            let path =
                store.key(&format!("{}/{}", partition_dir(&tp), object_key(base, crc, 1, "log")));
            store.put_verified(&path, Bytes::from_static(b"x")).await.unwrap();
        }
        (dir, store, tp)
    }

    fn file_name(base: i64, crc: u32) -> String {
        object_key(base, crc, 1, "log").strip_prefix("segments/").unwrap().to_string()
    }

    /// The state a clean followed by a crash leaves: manifest 1 lists the
    /// replaced object, manifest 2 the cleaned one, and an upload whose
    /// manifest was never written left an orphan.
    #[tokio::test]
    async fn only_what_no_current_manifest_lists_goes_and_only_after_the_delay() {
        let (replaced, cleaned, orphan) = ((0, 1), (0, 2), (10, 3));
        let (dir, store, tp) = setup(&[replaced, cleaned, orphan]).await;
        manifest::write(&store, &tp, 1, &manifest(&tp, &[replaced])).await.unwrap();
        let latest = manifest(&tp, &[cleaned]);
        manifest::write(&store, &tp, 2, &latest).await.unwrap();
        // Within the delay nothing goes: manifest 1 was current a moment ago.
        assert_eq!(sweep(&store, &tp, 2, &latest, HOUR).await.unwrap(), 0);
        assert_eq!(names(&store, "topics/t-0/segments").await.len(), 3);
        // Another writer's manifest 3: this writer deletes nothing.
        age_all(dir.path(), 2 * HOUR);
        manifest::write(&store, &tp, 3, &manifest(&tp, &[replaced])).await.unwrap();
        assert_eq!(sweep(&store, &tp, 2, &latest, HOUR).await.unwrap(), 0);
        store.delete(&store.key(&manifest::manifest_key(&tp, 3))).await.unwrap();
        // Two hours on by the store's clock: the replaced object, the orphan
        // and manifest 1 go.
        assert_eq!(sweep(&store, &tp, 2, &latest, HOUR).await.unwrap(), 2);
        assert_eq!(names(&store, "topics/t-0/segments").await, vec![file_name(0, 2)]);
        assert_eq!(names(&store, "topics/t-0/manifest").await, vec![format!("{:020}.json", 2)]);
    }

    /// A live manifest that cannot be read stops the sweep: what it lists
    /// (and everything else) stays, and the error says which manifest.
    #[tokio::test]
    async fn an_unreadable_live_manifest_stops_the_sweep_and_deletes_nothing() {
        let (listed_by_1, orphan) = ((0, 1), (10, 3));
        let (dir, store, tp) = setup(&[listed_by_1, orphan]).await;
        manifest::write(&store, &tp, 1, &manifest(&tp, &[listed_by_1])).await.unwrap();
        age_all(dir.path(), 2 * HOUR);
        let latest = manifest(&tp, &[(20, 4)]);
        manifest::write(&store, &tp, 2, &latest).await.unwrap();
        // Manifest 1 is live (its successor is new) but its bytes are broken.
        let one = dir.path().join("topics/t-0/manifest").join(format!("{:020}.json", 1));
        std::fs::write(&one, b"{\"format\": 1, \"trunc").unwrap();
        let err = sweep(&store, &tp, 2, &latest, HOUR).await.unwrap_err();
        assert!(matches!(err, RemoteError::Corrupt { .. }), "{err}");
        assert_eq!(err.kind(), "corrupt");
        assert!(err.to_string().contains(&format!("{:020}.json", 1)), "{err}");
        assert_eq!(names(&store, "topics/t-0/segments").await.len(), 2, "the sweep widened");
    }

    /// Ages are the store's. A store whose clock is two hours behind the
    /// broker's wrote everything with Last-Modified two hours in the
    /// broker's past: by its own clock nothing is old yet, while the
    /// broker's clock would delete the replaced object and its manifest.
    #[tokio::test]
    async fn ages_are_taken_on_the_stores_clock() {
        let (replaced, cleaned) = ((0, 1), (0, 2));
        let (dir, store, tp) = setup(&[replaced, cleaned]).await;
        manifest::write(&store, &tp, 1, &manifest(&tp, &[replaced])).await.unwrap();
        let latest = manifest(&tp, &[cleaned]);
        manifest::write(&store, &tp, 2, &latest).await.unwrap();
        age_all(dir.path(), 2 * HOUR);
        let broker_now = crate::remote::now_ms();
        let store_now = broker_now - 2 * HOUR;
        assert_eq!(sweep_at(&store, &tp, 2, &latest, HOUR, store_now).await.unwrap(), 0);
        assert_eq!(names(&store, "topics/t-0/manifest").await.len(), 2);
        assert_eq!(sweep_at(&store, &tp, 2, &latest, HOUR, broker_now).await.unwrap(), 1);
        // The clock `sweep` reads is the store's: the probe's Last-Modified.
        let clock = store.now_ms().await.unwrap();
        let probe = std::fs::metadata(dir.path().join(crate::remote::store::CLOCK)).unwrap();
        let mtime = probe.modified().unwrap().duration_since(SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(clock, mtime.as_millis() as i64);
    }

    /// A retired partition: the objects and older manifests go after the
    /// delay, the retired manifest only once it is alone, never before.
    #[tokio::test]
    async fn a_retired_partition_is_swept_and_its_manifest_goes_last() {
        let (dir, store, tp) = setup(&[(0, 1)]).await;
        let m = manifest(&tp, &[(0, 1)]);
        manifest::write(&store, &tp, 1, &m).await.unwrap();
        let retired = crate::remote::retire::retired(m);
        manifest::write(&store, &tp, 2, &retired).await.unwrap();
        assert_eq!(sweep(&store, &tp, 2, &retired, HOUR).await.unwrap(), 0);
        assert_eq!(names(&store, "topics/t-0/manifest").await.len(), 2);
        age_all(&dir.path().join("topics"), 2 * HOUR);
        // Objects and manifest 1 go; the retired one stays while they were there.
        assert_eq!(sweep(&store, &tp, 2, &retired, HOUR).await.unwrap(), 1);
        assert_eq!(names(&store, "topics/t-0/manifest").await, vec![format!("{:020}.json", 2)]);
        assert!(names(&store, "topics/t-0/segments").await.is_empty());
        sweep(&store, &tp, 2, &retired, HOUR).await.unwrap();
        assert!(names(&store, "topics/t-0/manifest").await.is_empty());
    }
}

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

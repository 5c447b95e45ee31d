//! `RemoteLogManager` (Kafka's name for the broker's side of tiered
//! storage): a tokio task that copies the closed segments of every enabled
//! partition to the store and keeps each partition's manifest in step with
//! the local log, the cleaner's replacements included. The round's steps and
//! what a crash at each leaves are in the module doc of `remote`.
//!
//! It never blocks produce or fetch: it holds a log's read lock only to open
//! the segment files (`snapshot`) and its write lock only to set the highest
//! offset in the store or raise a stale log start to the store's, does file I/O on blocking threads and store I/O on
//! the runtime. A failing store makes it back off (doubling from
//! `sediment.remote.storage.upload.interval.ms` to a minute); produce and
//! fetch go on, and the highest offset stays where the last manifest put it,
//! so local retention deletes nothing newer.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::RemoteStorageConfig;
use super::manifest::{self, partition_dir, Manifest, ObjectEntry, SegmentEntry, FORMAT};
use super::snapshot::{self, LocalFile, LocalSnapshot};
use super::status::{PartitionRemoteStatus, RemoteStats};
use super::store::{FileUpload, RemoteStore, PART_BYTES};
use super::store_cleaner::StoreCleaner;
use super::{blocking, now_ms, sweep, RemoteError};
use crate::log::manager::SharedLog;
use crate::log::{LogManager, StoreSegment, TopicPartition};

pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What the task knows of one partition between rounds.
#[derive(Debug, Default)]
pub(super) struct PartitionState {
    /// The latest manifest and its number, once read from the store.
    pub(super) manifest: Option<(u64, Manifest)>,
    loaded: bool,
    /// Another writer took a manifest number: no more uploads of it.
    fenced: bool,
    digests: HashMap<(i64, u64, u64), SegmentEntry>,
    /// Objects uploaded since the last manifest (not re-uploaded on a retry).
    uploaded: HashSet<String>,
    last_sweep_ms: i64,
    /// Where the last store clean's map ended (`store_cleaner`).
    pub(super) store_mapped_to: i64,
    /// After a failed store clean: when to try again, and the wait.
    pub(super) store_clean_retry: Option<(Instant, Duration)>,
}

#[derive(Debug)]
pub struct RemoteLogManager {
    pub(super) store: RemoteStore,
    logs: Arc<LogManager>,
    pub(super) config: RemoteStorageConfig,
    cluster_id: String,
    pub(super) stats: Arc<RemoteStats>,
    retirer: super::retire::Retirer,
    /// Cleans the store-only segments of compacted topics, when the broker
    /// runs a cleaner (`store_cleaner`).
    store_cleaner: Option<StoreCleaner>,
    /// In a cluster, the partitions this broker uploads for: those it leads
    /// (set once, before the loop starts); unset, every partition.
    uploads_for: std::sync::OnceLock<UploadFilter>,
}

/// Which partitions this broker uploads for.
pub struct UploadFilter(pub Box<dyn Fn(&TopicPartition) -> bool + Send + Sync>);

impl std::fmt::Debug for UploadFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UploadFilter")
    }
}

/// The segments of `prev` (the store's latest manifest) that the next
/// manifest carries over as they are: those wholly below the local start
/// (their local copies are gone) and not wholly below the log start (those
/// retention or DeleteRecords gave up).
fn store_only(prev: Option<&Manifest>, snap: &LocalSnapshot) -> Vec<SegmentEntry> {
    prev.map_or_else(Vec::new, |m| {
        m.segments
            .iter()
            .filter(|s| {
                s.next_offset <= snap.local_start_offset && s.next_offset > snap.log_start_offset
            })
            .cloned()
            .collect()
    })
}

/// Tell the log what the store's latest manifest (not a retired one) holds:
/// local retention may drop local copies up to its end, and total retention
/// measures and expires the segments only in the store.
pub(super) fn tell_log(log: &SharedLog, manifest: &Manifest) {
    let segments = manifest
        .segments
        .iter()
        .map(|s| StoreSegment {
            base_offset: s.base_offset,
            next_offset: s.next_offset,
            size_in_bytes: s.size(),
            largest_timestamp: s.max_timestamp,
        })
        .collect();
    let mut log = log.write();
    log.set_highest_offset_in_remote_storage(manifest.end_offset - 1);
    log.set_store_segments(segments);
}

/// A log start below the store's (its checkpoint was not written before a
/// crash after DeleteRecords or retention moved it) is raised to the
/// store's: the log start only moves up, and the store's was the log's once.
/// Not for another incarnation of the topic (the regression check refuses
/// that one), nor past the local log end (a lost disk, refused too).
fn raise_log_start(
    tp: &TopicPartition,
    log: &SharedLog,
    prev: &Manifest,
    snap: &mut LocalSnapshot,
) -> bool {
    if prev.log_start_offset <= snap.log_start_offset
        || prev.partition_metadata != snap.partition_metadata
    {
        return false;
    }
    match log.write().maybe_increment_log_start_offset(prev.log_start_offset) {
        Ok(start) => {
            tracing::info!(partition = %tp, log_start = start, "log start raised to the store's");
            snap.log_start_offset = start;
            true
        }
        Err(_) => false,
    }
}

impl RemoteLogManager {
    /// Open the store and make sure it is this cluster's (writing its marker
    /// on first use). `stats` are shared with the read cache; `store_cleaner`
    /// cleans the store-only segments of compacted topics.
    ///
    /// # Errors
    /// The store unreachable, refusing the credentials, without the bucket,
    /// or another cluster's.
    pub async fn start(
        config: RemoteStorageConfig,
        logs: Arc<LogManager>,
        (cluster_id, node_id): (&str, i32),
        stats: Arc<RemoteStats>,
        store_cleaner: Option<StoreCleaner>,
    ) -> Result<Arc<Self>, RemoteError> {
        let store = config.open()?;
        store.claim(cluster_id, node_id).await?;
        let cluster_id = cluster_id.to_string();
        let retirer = Default::default();
        let uploads_for = std::sync::OnceLock::new();
        let manager =
            Self { store, logs, config, cluster_id, stats, retirer, store_cleaner, uploads_for };
        Ok(Arc::new(manager))
    }

    /// At shutdown, after the upload task is aborted: stop a store clean
    /// still running on its blocking thread, which the abort cannot cut
    /// and the runtime would wait for.
    pub fn stop(&self) {
        if let Some(cleaner) = &self.store_cleaner {
            cleaner.cancel();
        }
    }

    pub(super) fn store_cleaner(&self) -> Option<&StoreCleaner> {
        self.store_cleaner.as_ref()
    }

    /// Upload (and retire) only the partitions `filter` accepts: in a
    /// cluster, those this broker leads, so followers never write the
    /// store (their local segments stay until they lead).
    pub fn upload_only_for(&self, filter: UploadFilter) {
        if self.uploads_for.set(filter).is_err() {
            tracing::warn!("the uploader's partition filter was already set");
        }
    }

    pub fn stats(&self) -> Arc<RemoteStats> {
        Arc::clone(&self.stats)
    }

    /// Run the upload loop until the task is aborted (at any await: every
    /// step is safe to cut, see the module doc).
    pub fn spawn(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let interval = Duration::from_millis(self.config.upload_interval_ms);
            let mut states = HashMap::new();
            let mut delay = interval;
            loop {
                delay = if self.round(&mut states).await {
                    interval
                } else {
                    (delay * 2).clamp(interval, MAX_BACKOFF.max(interval))
                };
                tokio::time::sleep(delay).await;
            }
        })
    }

    /// One pass over the enabled partitions; false when any failed.
    async fn round(&self, states: &mut HashMap<TopicPartition, PartitionState>) -> bool {
        let mut enabled: Vec<(TopicPartition, SharedLog)> = self
            .logs
            .all_logs()
            .into_iter()
            .filter(|(_, log)| log.read().config().remote_storage_enable)
            .filter(|(tp, _)| self.uploads_for.get().is_none_or(|f| (f.0)(tp)))
            .collect();
        self.retirer.round(&self.store, &self.stats, &self.logs, &mut enabled, &self.config).await;
        let names: HashSet<TopicPartition> = enabled.iter().map(|(tp, _)| tp.clone()).collect();
        states.retain(|tp, _| names.contains(tp));
        self.stats.retain(|tp| names.contains(tp));
        let mut ok = true;
        for (tp, log) in enabled {
            let state = states.entry(tp.clone()).or_default();
            if state.fenced {
                continue;
            }
            if let Err(e) = self.sync_partition(&tp, log, state).await {
                self.stats.error(e.kind());
                if matches!(e, RemoteError::Conflict { .. } | RemoteError::Regressed { .. }) {
                    state.fenced = true;
                    tracing::error!(partition = %tp, "tiered storage: {e}");
                } else {
                    tracing::warn!(partition = %tp, "tiered storage: {e}; retrying with backoff");
                }
                ok = false;
            }
        }
        ok
    }

    /// Bring `tp`'s manifest in step with its local closed segments.
    async fn sync_partition(
        &self,
        tp: &TopicPartition,
        log: SharedLog,
        state: &mut PartitionState,
    ) -> Result<(), RemoteError> {
        let dir = log.read().dir().to_path_buf();
        let (mut snap, entries) = self.digested_snapshot(tp, Arc::clone(&log), &dir, state).await?;
        self.report(tp, &snap, &entries, state.manifest.as_ref().map(|m| &m.1));
        if !state.loaded {
            state.manifest = manifest::latest(&self.store, tp).await?;
            state.loaded = true;
            self.report(tp, &snap, &entries, state.manifest.as_ref().map(|m| &m.1));
        }
        // No manifest, or a retired one (a topic deleted or turned off before
        // this log was enabled): the store holds nothing of this log yet, so
        // nothing may leave local disk on its account. (The log may remember
        // an offset from an earlier enabled spell of the same log.)
        if state.manifest.as_ref().is_none_or(|(_, m)| m.retired) {
            let mut log = log.write();
            log.set_highest_offset_in_remote_storage(-1);
            log.set_store_segments(Vec::new());
        }
        if entries.is_empty() && state.manifest.is_none() {
            return Ok(());
        }
        let next = self.next_manifest(tp, &log, state, &entries, &mut snap)?;
        let listed: HashSet<String> = state
            .manifest
            .iter()
            .flat_map(|(_, m)| m.keys().map(str::to_string))
            .chain(state.uploaded.iter().cloned())
            .collect();
        for (seg, entry) in snap.segments.iter().zip(&entries) {
            for (file, object) in seg.files.iter().zip(&entry.files) {
                if !listed.contains(&object.key) {
                    let label = snapshot::label(&dir, seg.base_offset, file.ext);
                    self.upload(tp, file, object, label).await?;
                    state.uploaded.insert(object.key.clone());
                }
            }
        }
        let unchanged = state.manifest.as_ref().is_some_and(|(_, m)| m.same_state(&next));
        if !unchanged {
            self.check_still_latest(tp, &log, state).await?;
            let seq = state.manifest.as_ref().map_or(1, |(seq, _)| seq + 1);
            super::crash_point::reached(super::crash_point::BEFORE_MANIFEST);
            manifest::write(&self.store, tp, seq, &next).await?;
            super::crash_point::reached(super::crash_point::AFTER_MANIFEST);
            tracing::debug!(partition = %tp, seq, segments = next.segments.len(), "manifest written");
            tell_log(&log, &next);
            state.manifest = Some((seq, next));
            state.uploaded.clear();
            self.report(tp, &snap, &entries, state.manifest.as_ref().map(|m| &m.1));
        }
        self.maybe_clean_store(tp, &log, state).await?;
        self.maybe_sweep(tp, &log, state, !unchanged).await
    }

    /// Before a manifest is written: the one this task knows must still be
    /// the store's latest. A higher one is another writer's (`Conflict`);
    /// none, or a lower one, means the store lost manifests (a bucket emptied
    /// or restored from a backup): the task forgets what it knew and reads
    /// the store again, so it never lists objects it has not uploaded there.
    pub(super) async fn check_still_latest(
        &self,
        tp: &TopicPartition,
        log: &SharedLog,
        state: &mut PartitionState,
    ) -> Result<(), RemoteError> {
        let Some((seq, _)) = &state.manifest else { return Ok(()) };
        let seq = *seq;
        let highest = manifest::list_manifests(&self.store, tp).await?.last().map(|m| m.0);
        match highest {
            Some(h) if h == seq => Ok(()),
            Some(h) if h > seq => Err(RemoteError::Conflict { key: manifest::manifest_key(tp, h) }),
            _ => {
                state.manifest = None;
                state.loaded = false;
                state.uploaded.clear();
                // What the lost manifests listed may not be in the store now.
                let mut log = log.write();
                log.set_highest_offset_in_remote_storage(-1);
                log.set_store_segments(Vec::new());
                Err(RemoteError::Manifest {
                    key: manifest::manifest_key(tp, seq),
                    reason: "gone from the store: reading the store again".into(),
                })
            }
        }
    }

    /// The snapshot and each segment's manifest entry (digests cached by
    /// physical file, so a segment is read for its CRCs once, and not even
    /// opened again once the latest manifest lists it).
    async fn digested_snapshot(
        &self,
        tp: &TopicPartition,
        log: SharedLog,
        dir: &std::path::Path,
        state: &mut PartitionState,
    ) -> Result<(LocalSnapshot, Vec<SegmentEntry>), RemoteError> {
        let (tp2, dir) = (tp.clone(), dir.to_path_buf());
        let mut cache = std::mem::take(&mut state.digests);
        let in_manifest: HashSet<&str> = state
            .manifest
            .iter()
            .flat_map(|(_, m)| m.segments.iter().filter_map(SegmentEntry::log_key))
            .collect();
        let listed: HashSet<(i64, u64, u64)> = cache
            .iter()
            .filter(|(_, e)| e.log_key().is_some_and(|k| in_manifest.contains(k)))
            .map(|(id, _)| *id)
            .collect();
        let (snap, entries, cache) = blocking(move || {
            let snap = snapshot::take(&tp2, &log, &listed)?;
            let entries = snap
                .segments
                .iter()
                .map(|s| snapshot::digest(s, &dir, &mut cache))
                .collect::<Result<Vec<_>, _>>()?;
            let live: HashSet<_> = snap.segments.iter().map(|s| s.id).collect();
            cache.retain(|id, _| live.contains(id));
            Ok((snap, entries, cache))
        })
        .await?;
        state.digests = cache;
        Ok((snap, entries))
    }

    /// Upload one file and read it back, checking it still has the digested
    /// content (streamed: memory bounded by a part, see `store`).
    pub(super) async fn upload(
        &self,
        tp: &TopicPartition,
        file: &LocalFile,
        object: &ObjectEntry,
        label: PathBuf,
    ) -> Result<(), RemoteError> {
        let opened = file.file.try_clone().map_err(RemoteError::io(&label))?;
        let up = FileUpload {
            file: Arc::new(opened),
            path: label,
            size: object.size,
            crc32c: object.crc32c,
        };
        let key = self.store.key(&format!("{}/{}", partition_dir(tp), object.key));
        let started = Instant::now();
        self.store.put_file_verified(&key, &up, PART_BYTES).await?;
        self.stats.uploaded(object.size, started.elapsed().as_secs_f64());
        Ok(())
    }

    fn manifest_for(
        &self,
        tp: &TopicPartition,
        snap: &LocalSnapshot,
        segments: Vec<SegmentEntry>,
    ) -> Manifest {
        let end_offset = segments.last().map_or(snap.log_start_offset, |s| s.next_offset);
        Manifest {
            format: FORMAT,
            cluster_id: self.cluster_id.clone(),
            topic: tp.topic.clone(),
            partition: tp.partition,
            partition_metadata: snap.partition_metadata.clone(),
            topic_config: snap.topic_config.clone(),
            log_start_offset: snap.log_start_offset.min(end_offset),
            clean_offset: snap.clean_offset.map(|c| c.min(end_offset)),
            store_clean_offset: None,
            local_log_start_offset: Some(snap.local_start_offset),
            end_offset,
            segments,
            written_at_ms: now_ms(),
            retired: false,
        }
    }

    /// The manifest that follows the store's latest, refused (`Regressed`)
    /// when it would drop what the latest lists. The refusal is decided on
    /// the log as it is; only a manifest that passes may raise a stale log
    /// start to the store's (a raise is checkpointed, and local retention
    /// deletes below it), and only then does the log learn what the store
    /// holds.
    fn next_manifest(
        &self,
        tp: &TopicPartition,
        log: &SharedLog,
        state: &PartitionState,
        entries: &[SegmentEntry],
        snap: &mut LocalSnapshot,
    ) -> Result<Manifest, RemoteError> {
        let prev = state.manifest.as_ref().map(|(_, m)| m);
        let build = |snap: &LocalSnapshot| {
            let mut segments = store_only(prev, snap);
            segments.extend(entries.iter().cloned());
            self.manifest_for(tp, snap, segments)
        };
        let mut next = build(snap);
        let Some(prev) = prev else { return Ok(next) };
        // The store's clean point goes on while the partition is the same.
        let carried = |next: &mut Manifest| {
            if !prev.retired && prev.partition_metadata == next.partition_metadata {
                next.store_clean_offset = prev.store_clean_offset.map(|c| c.min(next.end_offset));
            }
        };
        carried(&mut next);
        if let Some(reason) = manifest::refusal(prev, &next) {
            return Err(RemoteError::Regressed { partition: tp.to_string(), reason });
        }
        // Not from a retired manifest: its log start is the end of a log that
        // was deleted or disabled, not a start this log ever had, and what it
        // listed is not this log's.
        if !prev.retired {
            if raise_log_start(tp, log, prev, snap) {
                next = build(snap);
                carried(&mut next);
            }
            // The store's latest agrees with the local log: what it lists may
            // leave local disk.
            tell_log(log, prev);
        }
        Ok(next)
    }

    /// Sweep after a new manifest, and now and then for what a manifest
    /// replaced a while ago.
    async fn maybe_sweep(
        &self,
        tp: &TopicPartition,
        log: &SharedLog,
        state: &mut PartitionState,
        committed: bool,
    ) -> Result<(), RemoteError> {
        let now = now_ms();
        let every = (self.config.delete_delay_ms / 4).max(self.config.upload_interval_ms as i64);
        if state.manifest.is_none() || (!committed && now - state.last_sweep_ms < every) {
            return Ok(());
        }
        if !committed {
            // A quiet partition writes no manifest, so this is where it
            // notices a store that lost its manifests: the log then forgets
            // what the store held, before local retention relies on it.
            self.check_still_latest(tp, log, state).await?;
        }
        let Some((seq, latest)) = &state.manifest else { return Ok(()) };
        let deleted =
            sweep::sweep(&self.store, tp, *seq, latest, self.config.delete_delay_ms).await?;
        state.last_sweep_ms = now;
        state.uploaded.clear();
        if deleted > 0 {
            self.stats.deleted(deleted);
            tracing::debug!(partition = %tp, deleted, "objects no manifest needs deleted");
        }
        Ok(())
    }

    /// Publish the partition's remote bytes and upload lag.
    fn report(
        &self,
        tp: &TopicPartition,
        snap: &LocalSnapshot,
        entries: &[SegmentEntry],
        manifest: Option<&Manifest>,
    ) {
        let listed: HashSet<&str> =
            manifest.iter().flat_map(|m| m.segments.iter().filter_map(|s| s.log_key())).collect();
        let mut status = PartitionRemoteStatus::default();
        let mut oldest: Option<i64> = None;
        for (seg, entry) in snap.segments.iter().zip(entries) {
            if !entry.log_key().is_some_and(|k| listed.contains(k)) {
                status.lag_bytes += entry.size();
                oldest = Some(oldest.map_or(seg.modified_ms, |o| o.min(seg.modified_ms)));
            }
        }
        status.lag_seconds = oldest.map_or(0.0, |o| (now_ms() - o).max(0) as f64 / 1000.0);
        if let Some(m) = manifest {
            status.remote_segments = m.segments.len() as u64;
            status.remote_bytes = m.segments.iter().map(SegmentEntry::size).sum();
            status.store_only_bytes = m
                .segments
                .iter()
                .filter(|s| s.next_offset <= snap.local_start_offset)
                .map(SegmentEntry::size)
                .sum();
        }
        self.stats.set_partition(tp, status);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use parking_lot::RwLock;

    use super::*;
    use crate::log::{LoadParams, Log, LogConfig};

    fn entry(base: i64, next: i64) -> SegmentEntry {
        let key = manifest::object_key(base, 1, 10, "log");
        let files = vec![ObjectEntry { ext: "log".into(), key, size: 10, crc32c: 1 }];
        SegmentEntry { base_offset: base, next_offset: next, files, max_timestamp: -1 }
    }

    fn snap(log_start_offset: i64, local_start_offset: i64) -> LocalSnapshot {
        LocalSnapshot {
            segments: Vec::new(),
            log_start_offset,
            local_start_offset,
            partition_metadata: "version: 0\n".into(),
            topic_config: BTreeMap::new(),
            clean_offset: None,
        }
    }

    fn prev(log_start_offset: i64, segments: Vec<SegmentEntry>) -> Manifest {
        Manifest {
            format: FORMAT,
            cluster_id: "c".into(),
            topic: "t".into(),
            partition: 0,
            partition_metadata: "version: 0\n".into(),
            topic_config: BTreeMap::new(),
            log_start_offset,
            clean_offset: None,
            store_clean_offset: None,
            local_log_start_offset: None,
            end_offset: segments.last().map_or(log_start_offset, |s| s.next_offset),
            segments,
            written_at_ms: 0,
            retired: false,
        }
    }

    #[test]
    fn store_only_segments_are_carried_over_unless_below_the_log_start() {
        let m = prev(0, vec![entry(0, 5), entry(5, 9), entry(9, 12)]);
        let bases = |v: Vec<SegmentEntry>| v.iter().map(|s| s.base_offset).collect::<Vec<_>>();
        // Local from 9: the two older ones are only in the store.
        assert_eq!(bases(store_only(Some(&m), &snap(0, 9))), [0, 5]);
        // The log start passed the first: it goes; one it is inside stays.
        assert_eq!(bases(store_only(Some(&m), &snap(5, 9))), [5]);
        assert_eq!(bases(store_only(Some(&m), &snap(6, 9))), [5]);
        // All local, or no manifest yet: nothing to carry.
        assert!(store_only(Some(&m), &snap(0, 0)).is_empty());
        assert!(store_only(None, &snap(0, 9)).is_empty());
    }

    #[test]
    fn a_stale_log_start_is_raised_to_the_stores() {
        let dir = tempfile::tempdir().unwrap();
        let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
        let tp = TopicPartition::new("t", 0);
        let config = Arc::new(LogConfig::default());
        let mut log =
            Log::open(dir.path(), tp.clone(), config, load, false, crate::clock::system()).unwrap();
        for _ in 0..10 {
            let mut b = crate::log::record_batch::BatchBuilder::new(
                crate::log::compression::Compression::None,
                0,
            );
            b.append(0, Some(b"k"), Some(b"v"));
            log.append_as_leader(&mut b.build()).unwrap();
        }
        let log: SharedLog = Arc::new(RwLock::new(log));
        let mut s = snap(0, 0);
        raise_log_start(&tp, &log, &prev(4, vec![]), &mut s);
        assert_eq!((log.read().log_start_offset(), s.log_start_offset), (4, 4));
        // Never down, never past the log end, never from another topic id.
        raise_log_start(&tp, &log, &prev(2, vec![]), &mut s);
        raise_log_start(&tp, &log, &prev(11, vec![]), &mut s);
        let other = Manifest { partition_metadata: "other".into(), ..prev(6, vec![]) };
        raise_log_start(&tp, &log, &other, &mut s);
        assert_eq!((log.read().log_start_offset(), s.log_start_offset), (4, 4));
    }
}

//! `SegmentCache`: the segments downloaded from the store to serve reads
//! below the local log, kept on local disk under
//! `<first log dir>/remote-cache/<topic>-<partition>/<base>-<id>/` in the
//! local file names (`<base20>.log`, `.index`, `.timeindex`, `.txnindex`),
//! so `log::segment::LogSegment` opens them and reads them as it reads a
//! local segment: no second parser.
//!
//! Invariants:
//! * A segment is used only after every one of its objects was read back with
//!   the size and CRC32C its manifest lists, and the opened segment ends at
//!   the offset and size the manifest says. A mismatch is an error naming the
//!   object's key, counted as `corrupt`, logged once per download, and the
//!   files are removed: wrong bytes are never served.
//! * A failed download (a corrupt object, a store that does not answer) is
//!   the answer for that segment during [`FAILED_RETRY`], so consumers
//!   retrying get the error at once and do not turn into a download loop; a
//!   missing object is not remembered (the reader reads the latest manifest
//!   again: a clean may have replaced the segment).
//! * The unit of the cache is a whole segment (its objects together: a fetch
//!   needs the `.log` and `.index`, a lookup the `.timeindex` and `.log`).
//!   Segments are evicted least recently used first, whole, until the
//!   downloaded bytes fit `sediment.remote.storage.cache.bytes`; a segment
//!   someone holds (`Arc` count above the cache's own) is never evicted. A
//!   segment larger than the cap is still downloaded, alone, and is the first
//!   out once released. Eviction unlinks; an opened segment's descriptors
//!   keep its bytes readable until the last reader drops it (Linux).
//! * Concurrent gets of one segment share one download, run as a task of its
//!   own, so a fetch that gives up (its client gone) does not cut it short.
//! * Sizes are checked before anything is written: the object's size in the
//!   store must be the manifest's, which is bounded; bytes are streamed to
//!   disk in ranged GETs of [`super::store::CHUNK`] bytes ([`RangedRead`]), never held whole in
//!   memory.
//! * The directory is emptied when the broker starts: nothing in it is
//!   trusted across a restart.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;

use super::manifest::{partition_dir, SegmentEntry};
use super::read_stats::RemoteReadStats;
use super::status::RemoteStats;
use super::store::{RangedRead, RemoteStore};
use super::{blocking, RemoteError};
use crate::log::segment::{LogSegment, SegmentConfig};
use crate::log::TopicPartition;

/// The cache's directory under the first log dir.
pub const CACHE_DIR: &str = "remote-cache";
/// Largest `.log` object accepted (`segment.bytes` is an int).
const MAX_LOG_OBJECT: u64 = i32::MAX as u64;
/// Largest index object accepted (what the local index loader accepts).
const MAX_INDEX_OBJECT: u64 = 64 << 20;
/// How long a failed download is answered from memory before the segment
/// is downloaded again (the store may be back, the object re-uploaded).
pub const FAILED_RETRY: Duration = Duration::from_secs(10);
const EXTS: [&str; 4] = ["log", "index", "timeindex", "txnindex"];

/// A downloaded, verified and opened segment.
#[derive(Debug)]
pub struct CachedSegment {
    pub entry: SegmentEntry,
    /// Its files' bytes on disk.
    pub bytes: u64,
    segment: LogSegment,
}

impl CachedSegment {
    /// The segment, read-only (nothing here appends to it).
    pub fn segment(&self) -> &LogSegment {
        &self.segment
    }
}

type Shared = Result<Arc<CachedSegment>, Arc<RemoteError>>;

#[derive(Debug)]
struct Entry {
    segment: Arc<CachedSegment>,
    dir: PathBuf,
    last_used: u64,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<String, Entry>,
    inflight: HashMap<String, watch::Receiver<Option<Shared>>>,
    failed: HashMap<String, (Instant, Arc<RemoteError>)>,
    bytes: u64,
    tick: u64,
    /// Downloads started (for tests: concurrent gets share one).
    downloads: u64,
}

#[derive(Debug)]
pub struct SegmentCache {
    dir: PathBuf,
    cap: u64,
    store: RemoteStore,
    stats: Arc<RemoteStats>,
    reads: RemoteReadStats,
    state: Mutex<State>,
}

impl SegmentCache {
    /// The cache in `dir` (emptied), holding at most `cap` bytes of segments
    /// nobody reads.
    ///
    /// # Errors
    /// `Io` when the directory cannot be emptied or created.
    pub fn open(
        dir: &Path,
        cap: u64,
        store: RemoteStore,
        stats: Arc<RemoteStats>,
        reads: RemoteReadStats,
    ) -> Result<Arc<Self>, RemoteError> {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(RemoteError::io(dir)(e)),
        }
        std::fs::create_dir_all(dir).map_err(RemoteError::io(dir))?;
        reads.cache_bytes.set(0);
        Ok(Arc::new(Self {
            dir: dir.to_path_buf(),
            cap,
            store,
            stats,
            reads,
            state: Mutex::default(),
        }))
    }

    /// The cache's directory (emptied at start).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn stats(&self) -> &Arc<RemoteStats> {
        &self.stats
    }

    pub fn reads(&self) -> &RemoteReadStats {
        &self.reads
    }

    /// Bytes of segments on disk.
    pub fn bytes(&self) -> u64 {
        self.state.lock().bytes
    }

    /// Downloads started since the cache opened.
    pub fn downloads(&self) -> u64 {
        self.state.lock().downloads
    }

    /// The segment if it is in the cache now (counted as a use); never
    /// downloads.
    pub fn peek(&self, tp: &TopicPartition, entry: &SegmentEntry) -> Option<Arc<CachedSegment>> {
        let mut st = self.state.lock();
        st.tick += 1;
        let tick = st.tick;
        let e = st.entries.get_mut(&segment_id(tp, entry))?;
        e.last_used = tick;
        Some(Arc::clone(&e.segment))
    }

    /// The segment `entry` of `tp`, downloaded first unless cached.
    ///
    /// # Errors
    /// The download's error (shared by every caller that waited for it):
    /// store errors, `Verify`/`CorruptSegment`/`TooLarge` for bytes that do
    /// not match the manifest, `Io` for the local disk.
    pub async fn get(
        self: &Arc<Self>,
        tp: &TopicPartition,
        entry: &SegmentEntry,
        config: SegmentConfig,
    ) -> Shared {
        let id = segment_id(tp, entry);
        let mut rx = {
            let mut st = self.state.lock();
            st.tick += 1;
            let tick = st.tick;
            if let Some(e) = st.entries.get_mut(&id) {
                e.last_used = tick;
                self.reads.cache_hits.inc();
                return Ok(Arc::clone(&e.segment));
            }
            if let Some((at, err)) = st.failed.get(&id) {
                if at.elapsed() < FAILED_RETRY {
                    return Err(Arc::clone(err));
                }
                st.failed.remove(&id);
            }
            self.reads.cache_misses.inc();
            match st.inflight.get(&id) {
                Some(rx) => rx.clone(),
                None => {
                    st.downloads += 1;
                    let (tx, rx) = watch::channel(None);
                    st.inflight.insert(id.clone(), rx.clone());
                    let (cache, tp, entry) = (Arc::clone(self), tp.clone(), entry.clone());
                    tokio::spawn(async move {
                        let result = cache.fill(&id, &tp, entry, config).await;
                        let _ = tx.send(Some(result));
                    });
                    rx
                }
            }
        };
        let result = match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone(),
            Err(_) => None,
        };
        result.unwrap_or_else(|| Err(Arc::new(gone())))
    }

    /// Download, verify and open one segment, then admit it (evicting what
    /// no longer fits) or remember its failure.
    async fn fill(
        &self,
        id: &str,
        tp: &TopicPartition,
        entry: SegmentEntry,
        config: SegmentConfig,
    ) -> Shared {
        let dir = self.dir.join(id);
        let result = self.download(tp, entry, config, &dir).await;
        let mut st = self.state.lock();
        st.inflight.remove(id);
        match result {
            Ok(segment) => {
                let segment = Arc::new(segment);
                st.tick += 1;
                st.bytes += segment.bytes;
                let last_used = st.tick;
                let admitted = Entry { segment: Arc::clone(&segment), dir, last_used };
                st.entries.insert(id.to_string(), admitted);
                let evicted = self.trim(&mut st, Some(id));
                drop(st);
                remove_dirs(evicted);
                Ok(segment)
            }
            Err(e) => {
                drop(st);
                self.stats.error(e.kind());
                tracing::warn!(partition = %tp, "tiered storage: reading from the store: {e}");
                let e = Arc::new(e);
                if e.kind() != "not_found" {
                    let mut st = self.state.lock();
                    st.failed.retain(|_, (at, _)| at.elapsed() < FAILED_RETRY);
                    st.failed.insert(id.to_string(), (Instant::now(), Arc::clone(&e)));
                }
                Err(e)
            }
        }
    }

    /// Evict least recently used segments nobody holds until the bytes fit
    /// the cap (`keep` stays); the directories to remove.
    fn trim(&self, st: &mut State, keep: Option<&str>) -> Vec<PathBuf> {
        let mut evicted = Vec::new();
        while st.bytes > self.cap {
            let victim = st
                .entries
                .iter()
                .filter(|(id, e)| Some(id.as_str()) != keep && Arc::strong_count(&e.segment) == 1)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(id, _)| id.clone());
            let Some(id) = victim else { break };
            if let Some(e) = st.entries.remove(&id) {
                st.bytes -= e.segment.bytes;
                evicted.push(e.dir);
            }
        }
        self.reads.cache_bytes.set(st.bytes as i64);
        evicted
    }

    /// Evict what was held while over the cap and is released now.
    pub fn release(&self) {
        let evicted = {
            let mut st = self.state.lock();
            if st.bytes <= self.cap {
                return;
            }
            self.trim(&mut st, None)
        };
        remove_dirs(evicted);
    }

    async fn download(
        &self,
        tp: &TopicPartition,
        entry: SegmentEntry,
        config: SegmentConfig,
        dir: &Path,
    ) -> Result<CachedSegment, RemoteError> {
        let d = dir.to_path_buf();
        blocking(move || {
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).map_err(RemoteError::io(&d))
        })
        .await?;
        let result = self.download_files(tp, entry, config, dir).await;
        if result.is_err() {
            remove_dirs(vec![dir.to_path_buf()]);
        }
        result
    }

    async fn download_files(
        &self,
        tp: &TopicPartition,
        entry: SegmentEntry,
        config: SegmentConfig,
        dir: &Path,
    ) -> Result<CachedSegment, RemoteError> {
        let mut bytes = 0;
        let mut log_key = String::new();
        for f in &entry.files {
            let key = self.store.key(&format!("{}/{}", partition_dir(tp), f.key));
            let Some(ext) = EXTS.iter().find(|e| **e == f.ext) else {
                return Err(RemoteError::CorruptSegment {
                    key: key.to_string(),
                    reason: format!("unknown file kind {:?}", f.ext),
                });
            };
            if *ext == "log" {
                log_key = key.to_string();
            }
            let max = if *ext == "log" { MAX_LOG_OBJECT } else { MAX_INDEX_OBJECT };
            if f.size > max {
                return Err(RemoteError::TooLarge { key: key.to_string(), size: f.size, max });
            }
            let mut read = RangedRead::open(&self.store, &key, f.size, f.crc32c).await?;
            let path = dir.join(format!("{:020}.{ext}", entry.base_offset));
            let p = path.clone();
            let file = Arc::new(
                blocking(move || std::fs::File::create(&p).map_err(RemoteError::io(&p))).await?,
            );
            while let Some((pos, chunk)) = read.next().await? {
                let (file, p) = (Arc::clone(&file), path.clone());
                blocking(move || file.write_all_at(&chunk, pos).map_err(RemoteError::io(&p)))
                    .await?;
            }
            bytes += f.size;
        }
        let (d, base) = (dir.to_path_buf(), entry.base_offset);
        let segment =
            blocking(move || LogSegment::open(&d, base, config, "").map_err(RemoteError::from))
                .await?;
        let reason = if segment.needs_recovery() {
            Some("its indexes do not match its batches".to_string())
        } else if segment.next_offset() != entry.next_offset || segment.size() != entry.size() {
            Some(format!(
                "it ends at offset {} after {} bytes, the manifest says {} after {}",
                segment.next_offset(),
                segment.size(),
                entry.next_offset,
                entry.size()
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(RemoteError::CorruptSegment { key: log_key, reason });
        }
        Ok(CachedSegment { entry, bytes, segment })
    }
}

fn gone() -> RemoteError {
    RemoteError::Join("the download of a segment ended without a result".into())
}

/// Remove evicted or failed segments' directories (a few unlinks).
fn remove_dirs(dirs: Vec<PathBuf>) {
    for dir in dirs {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %dir.display(), "tiered storage: removing a cached segment: {e}");
            }
        }
    }
}

/// The cache's name of a segment: its partition and its `.log` object's
/// name, which names the content (base offset, CRC32C, size), so a cleaned
/// replacement of the same base offset is another entry. (Without a `.log`
/// object, which a valid manifest does not allow, a digest of its keys.)
fn segment_id(tp: &TopicPartition, entry: &SegmentEntry) -> String {
    let log = entry.files.iter().find(|f| f.ext == "log");
    match log.and_then(|f| f.key.rsplit('/').next()) {
        Some(name) => format!("{tp}/{}", name.trim_end_matches(".log")),
        None => {
            let digest = entry
                .files
                .iter()
                .fold(0u32, |crc, f| crc32c::crc32c_append(crc, f.key.as_bytes()));
            format!("{tp}/{:020}-{digest:08x}", entry.base_offset)
        }
    }
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests;

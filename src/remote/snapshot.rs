//! A partition's closed segments at one instant, as the uploader sees them.
//!
//! The files are opened under the log's read lock: the cleaner's swap and
//! retention need the write lock, so the set is consistent, and the open
//! descriptors keep the bytes readable after a swap renames or unlinks them.
//! Only segments below the last stable offset are taken (no open
//! transaction's records without their marker). Closed segments are fsynced
//! when they roll, or were read back by recovery after a crash, so the store
//! never has records a restart takes back. (The recovery point is no bound:
//! after an unclean start it stays behind until the next flush.)
//!
//! A segment whose `.log` is one the latest manifest already lists (same
//! base offset, inode and size, digested before) is only stat'ed, not
//! opened: its entry comes from the digest cache and nothing of it is
//! uploaded again. Digests read a file in chunks, never whole.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::manifest::{object_key, ObjectEntry, SegmentEntry};
use super::store::CHUNK;
use super::RemoteError;
use crate::log::checkpoint::{OffsetCheckpointFile, CLEANER_OFFSET_CHECKPOINT};
use crate::log::log_file_utils::segment_files;
use crate::log::manager::{SharedLog, PARTITION_METADATA_FILE};
use crate::log::TopicPartition;

/// (base offset, inode, size) of a segment's `.log`.
pub(super) type SegmentId = (i64, u64, u64);

const EXTS: [&str; 4] = ["log", "index", "timeindex", "txnindex"];

/// One file of a closed segment, opened.
#[derive(Debug)]
pub(super) struct LocalFile {
    pub ext: &'static str,
    pub file: File,
    pub size: u64,
}

/// One closed segment: what identifies the physical `.log` file, and its
/// files (none opened when the latest manifest lists it already).
#[derive(Debug)]
pub(super) struct LocalSegment {
    pub base_offset: i64,
    pub next_offset: i64,
    /// (base offset, inode, size) of the `.log`: a cleaned replacement is a new file.
    pub id: SegmentId,
    pub modified_ms: i64,
    /// The largest record timestamp (read under the log's lock with the rest).
    pub max_timestamp: i64,
    pub files: Vec<LocalFile>,
}

/// A partition's uploadable state.
#[derive(Debug)]
pub(super) struct LocalSnapshot {
    pub segments: Vec<LocalSegment>,
    pub log_start_offset: i64,
    /// The first offset on local disk: below it segments are only in the store.
    pub local_start_offset: i64,
    pub partition_metadata: String,
    pub topic_config: BTreeMap<String, String>,
    pub clean_offset: Option<i64>,
}

/// Take the snapshot of `log` (blocking: opens files). Segments whose
/// `.log` identity is in `listed` are not opened.
pub(super) fn take(
    tp: &TopicPartition,
    log: &SharedLog,
    listed: &HashSet<SegmentId>,
) -> Result<LocalSnapshot, RemoteError> {
    // The clean point before the segments: the cleaner writes it after its
    // swap, so read first it is never ahead of the segments listed with it.
    let dir = log.read().dir().to_path_buf();
    let clean_offset = dir.parent().and_then(|parent| {
        let file = OffsetCheckpointFile::new(parent, CLEANER_OFFSET_CHECKPOINT);
        file.read().ok()?.get(tp).copied()
    });
    let log = log.read();
    let bound = log.last_stable_offset();
    let active = log.active_segment().base_offset();
    let mut segments = Vec::new();
    for seg in log.segments() {
        if seg.base_offset() == active || seg.next_offset() > bound {
            break;
        }
        let (base, next) = (seg.base_offset(), seg.next_offset());
        let known = stat_log(&dir, base)?.filter(|(id, _)| listed.contains(id));
        let max_timestamp = seg.largest_timestamp();
        segments.push(match known {
            Some((id, modified_ms)) => LocalSegment {
                base_offset: base,
                next_offset: next,
                id,
                modified_ms,
                max_timestamp,
                files: vec![],
            },
            None => LocalSegment { max_timestamp, ..open_segment(&dir, base, next)? },
        });
    }
    let log_start_offset = log.log_start_offset();
    let local_start_offset = log.local_log_start_offset();
    let topic_config = log.config().overrides.clone();
    drop(log);
    let path = dir.join(PARTITION_METADATA_FILE);
    let partition_metadata = std::fs::read_to_string(&path).map_err(RemoteError::io(&path))?;
    Ok(LocalSnapshot {
        segments,
        log_start_offset,
        local_start_offset,
        partition_metadata,
        topic_config,
        clean_offset,
    })
}

/// The identity and modification time of the `.log` at `base`, without
/// opening it (`None` when it is not there: the open that follows says why).
fn stat_log(dir: &Path, base: i64) -> Result<Option<(SegmentId, i64)>, RemoteError> {
    let path = label(dir, base, "log");
    match std::fs::metadata(&path) {
        Ok(meta) => {
            let modified_ms = meta.mtime() * 1000 + meta.mtime_nsec() / 1_000_000;
            Ok(Some(((base, meta.ino(), meta.len()), modified_ms)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(RemoteError::io(path)(e)),
    }
}

pub(super) fn open_segment(dir: &Path, base: i64, next: i64) -> Result<LocalSegment, RemoteError> {
    let mut files = Vec::new();
    let mut id = (base, 0, 0);
    let mut modified_ms = 0;
    for (ext, path) in EXTS.iter().zip(segment_files(dir, base, "")) {
        let file = match File::open(&path) {
            Ok(f) => f,
            // A segment has no .txnindex until a transaction aborts in it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && *ext != "log" => continue,
            Err(e) => return Err(RemoteError::io(path)(e)),
        };
        let meta = file.metadata().map_err(RemoteError::io(&path))?;
        if *ext == "log" {
            id = (base, meta.ino(), meta.len());
            modified_ms = meta.mtime() * 1000 + meta.mtime_nsec() / 1_000_000;
        }
        files.push(LocalFile { ext, file, size: meta.len() });
    }
    Ok(LocalSegment {
        base_offset: base,
        next_offset: next,
        id,
        modified_ms,
        max_timestamp: -1,
        files,
    })
}

/// The CRC32C of an opened file's first `f.size` bytes (the size it had
/// when opened), read in chunks of [`CHUNK`]: never held whole.
fn crc_of(f: &LocalFile, label: &Path) -> Result<u32, RemoteError> {
    let mut buf = vec![0; CHUNK.min(f.size) as usize];
    let (mut pos, mut crc) = (0u64, 0u32);
    while pos < f.size {
        let len = CHUNK.min(f.size - pos) as usize;
        f.file.read_exact_at(&mut buf[..len], pos).map_err(RemoteError::io(label))?;
        crc = crc32c::crc32c_append(crc, &buf[..len]);
        pos += len as u64;
    }
    Ok(crc)
}

/// The manifest entry of `seg`: its files' CRC32Cs and content keys, from
/// `cache` when this physical file was digested before.
pub(super) fn digest(
    seg: &LocalSegment,
    dir: &Path,
    cache: &mut HashMap<(i64, u64, u64), SegmentEntry>,
) -> Result<SegmentEntry, RemoteError> {
    if let Some(entry) = cache.get(&seg.id) {
        return Ok(entry.clone());
    }
    let mut files = Vec::new();
    for f in &seg.files {
        let label = label(dir, seg.base_offset, f.ext);
        let crc = crc_of(f, &label)?;
        let size = f.size;
        let key = object_key(seg.base_offset, crc, size, f.ext);
        files.push(ObjectEntry { ext: f.ext.to_string(), key, size, crc32c: crc });
    }
    let entry = SegmentEntry {
        base_offset: seg.base_offset,
        next_offset: seg.next_offset,
        files,
        max_timestamp: seg.max_timestamp,
    };
    cache.insert(seg.id, entry.clone());
    Ok(entry)
}

/// A file's path, for messages.
pub(super) fn label(dir: &Path, base: i64, ext: &str) -> PathBuf {
    dir.join(format!("{base:020}.{ext}"))
}

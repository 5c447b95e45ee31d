//! The stale list of a kept segment (`<base>.stale`): the superseded
//! copies a clean left in a segment of the clean region because the
//! segment's superseded share was below the topic's
//! `sediment.compaction.min.segment.garbage.ratio`.
//!
//! Without lists a later clean could not find these copies again: its map
//! holds only the keys of its own dirty range, so a copy superseded by a
//! record that is already clean would stay for ever, and a tombstone
//! removed above it would bring it back. A list is what a clean would have
//! removed, deferred; any later clean that rewrites the segment drops what
//! it names.
//!
//! # Format (big-endian)
//!
//! ```text
//! magic "SDSTALE1" | segment size u64 | deadline ms i64 | count u32 |
//! count x (offset - base u32, MD5 fingerprint of the key 16 bytes) | CRC32C u32
//! ```
//!
//! Invariants:
//! * A list belongs to the segment with its base offset *and* the size it
//!   records. The cleaner never changes a kept segment, so a list whose
//!   segment is gone or has another size belongs to a segment a clean
//!   replaced (or retention deleted) and is obsolete.
//! * Entries are sorted by offset and unique; at most [`MAX_STALE_ENTRIES`]
//!   (a segment with more is rewritten instead), so reading one is bounded.
//! * Written to `<base>.stale.tmp`, fsynced and renamed, after the clean's
//!   swaps and before its checkpoint moves: a crash before the rename
//!   leaves the checkpoint where it was, and the next clean, mapping the
//!   same range, finds the same copies again.
//! * `deadline_ms` is the earliest time by which `max.compaction.lag.ms`
//!   requires one of its copies gone (`i64::MAX`: none); a clean at or past
//!   it rewrites the segment.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::offset_map::KeyHash;

/// The suffix of a stale list beside its segment's `.log`.
pub const STALE_SUFFIX: &str = "stale";
/// The most copies one list names (20 MiB of entries).
pub const MAX_STALE_ENTRIES: usize = 1 << 20;

const MAGIC: &[u8; 8] = b"SDSTALE1";
const HEADER_BYTES: usize = 8 + 8 + 8 + 4;
const ENTRY_BYTES: usize = 4 + 16;

/// The superseded copies kept in one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleList {
    pub base_offset: i64,
    /// The segment's size when the list was written.
    pub segment_size: u64,
    /// When the first of its copies must be gone (`i64::MAX`: no bound).
    pub deadline_ms: i64,
    /// (offset - base, key fingerprint), ascending by offset, unique.
    pub entries: Vec<(u32, KeyHash)>,
}

/// Why a list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StaleListError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

impl StaleList {
    /// An empty list for the segment at `base_offset` of `segment_size` bytes.
    pub fn new(base_offset: i64, segment_size: u64) -> Self {
        Self { base_offset, segment_size, deadline_ms: i64::MAX, entries: Vec::new() }
    }

    /// Where the list of the segment at `base_offset` lives in `dir`.
    pub fn path(dir: &Path, base_offset: i64) -> PathBuf {
        dir.join(format!("{base_offset:020}.{STALE_SUFFIX}"))
    }

    /// The absolute offsets the list names, ascending.
    pub fn offsets(&self) -> impl Iterator<Item = i64> + '_ {
        self.entries.iter().map(move |(rel, _)| self.base_offset + i64::from(*rel))
    }

    /// Whether some entry has the fingerprint `hash`.
    pub fn names(&self, hash: &KeyHash) -> bool {
        self.entries.iter().any(|(_, h)| h == hash)
    }

    /// Add copies (any order; ones already listed are ignored), each due by
    /// `deadline_ms`.
    pub fn add(&mut self, copies: &[(u32, KeyHash)], deadline_ms: i64) {
        if copies.is_empty() {
            return;
        }
        self.entries.extend_from_slice(copies);
        self.entries.sort_unstable_by_key(|(rel, _)| *rel);
        self.entries.dedup_by_key(|(rel, _)| *rel);
        self.deadline_ms = self.deadline_ms.min(deadline_ms);
    }

    /// Read the list at `path`; `None` when there is none.
    ///
    /// # Errors
    /// An unreadable file, or one that is not a whole list (bad magic,
    /// length, count or checksum).
    pub fn read(path: &Path, base_offset: i64) -> Result<Option<Self>, StaleListError> {
        let io = |source| StaleListError::Io { path: path.to_path_buf(), source };
        let corrupt = |reason: &str| StaleListError::Corrupt {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        };
        let len = match std::fs::metadata(path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        let most = (HEADER_BYTES + MAX_STALE_ENTRIES * ENTRY_BYTES + 4) as u64;
        if len > most || len < (HEADER_BYTES + 4) as u64 {
            return Err(corrupt(&format!("{len} bytes is not the size of a list")));
        }
        let bytes = std::fs::read(path).map_err(io)?;
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body).to_be_bytes() != crc {
            return Err(corrupt("checksum mismatch"));
        }
        let Some(header) = Header::parse(body) else {
            return Err(corrupt("not a stale list"));
        };
        let count = header.count as usize;
        if count > MAX_STALE_ENTRIES || body.len() != HEADER_BYTES + count * ENTRY_BYTES {
            return Err(corrupt(&format!("{count} entries do not fill {} bytes", body.len())));
        }
        let entries: Vec<(u32, KeyHash)> = body[HEADER_BYTES..]
            .chunks_exact(ENTRY_BYTES)
            .map(|e| {
                let rel = u32::from_be_bytes(e[..4].try_into().expect("4 bytes"));
                (rel, e[4..].try_into().expect("16 bytes"))
            })
            .collect();
        if entries.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(corrupt("entries are not ascending"));
        }
        Ok(Some(Self {
            base_offset,
            segment_size: header.segment_size,
            deadline_ms: header.deadline_ms,
            entries,
        }))
    }

    /// Write the list into `dir` crash-safely: a temporary file, fsynced,
    /// renamed over the old list. The caller fsyncs the directory.
    ///
    /// # Errors
    /// I/O errors; the temporary file is removed.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let path = Self::path(dir, self.base_offset);
        let tmp = path.with_extension(format!("{STALE_SUFFIX}.tmp"));
        let mut bytes = Vec::with_capacity(HEADER_BYTES + self.entries.len() * ENTRY_BYTES + 4);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&self.segment_size.to_be_bytes());
        bytes.extend_from_slice(&self.deadline_ms.to_be_bytes());
        bytes.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for (rel, hash) in &self.entries {
            bytes.extend_from_slice(&rel.to_be_bytes());
            bytes.extend_from_slice(hash);
        }
        bytes.extend_from_slice(&crc32c::crc32c(&bytes).to_be_bytes());
        let written = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

/// The lists in `dir`, by base offset; leftover temporary files are removed.
///
/// # Errors
/// The directory cannot be read.
pub fn lists_in(dir: &Path) -> std::io::Result<Vec<(i64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((stem, rest)) = name.split_once('.') else { continue };
        let Ok(base) = stem.parse::<i64>() else { continue };
        if stem.len() != 20 {
            continue;
        }
        if rest == STALE_SUFFIX {
            out.push((base, entry.path()));
        } else if rest == format!("{STALE_SUFFIX}.tmp") {
            // A write that never reached its rename: the old list stands.
            let _ = std::fs::remove_file(entry.path());
        }
    }
    out.sort_unstable_by_key(|(base, _)| *base);
    Ok(out)
}

/// The earliest deadline among the lists in `dir` that still match a
/// segment (`segments`: base offset and size); `None` with none. Only each
/// list's header is read: the deadline decides when a clean runs, and the
/// clean reads (and checks) the lists themselves.
pub fn earliest_deadline(dir: &Path, segments: &[(i64, u64)]) -> Option<i64> {
    let lists = lists_in(dir).ok()?;
    lists
        .iter()
        .filter_map(|(base, path)| Some((*base, Header::read(path)?)))
        .filter(|(base, h)| h.count > 0 && segments.contains(&(*base, h.segment_size)))
        .map(|(_, h)| h.deadline_ms)
        .min()
}

/// A list's fixed part: what `earliest_deadline` reads alone, unchecked
/// (the clean reads and checks the whole list).
struct Header {
    segment_size: u64,
    deadline_ms: i64,
    count: u32,
}

impl Header {
    /// The header at the start of `bytes`; `None` without the magic.
    fn parse(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..HEADER_BYTES)?;
        if &bytes[..8] != MAGIC {
            return None;
        }
        Some(Self {
            segment_size: u64::from_be_bytes(bytes[8..16].try_into().ok()?),
            deadline_ms: i64::from_be_bytes(bytes[16..24].try_into().ok()?),
            count: u32::from_be_bytes(bytes[24..28].try_into().ok()?),
        })
    }

    fn read(path: &Path) -> Option<Self> {
        use std::io::Read;
        let mut bytes = [0u8; HEADER_BYTES];
        File::open(path).ok()?.read_exact(&mut bytes).ok()?;
        Self::parse(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(i: u8) -> KeyHash {
        [i; 16]
    }

    #[test]
    fn a_list_survives_a_round_trip_and_merges_unions() {
        let dir = tempfile::tempdir().unwrap();
        let mut list = StaleList::new(1_000, 4_096);
        list.add(&[(7, hash(1)), (3, hash(2))], 9_000);
        list.add(&[(3, hash(2)), (12, hash(3))], 5_000);
        assert_eq!(list.offsets().collect::<Vec<_>>(), vec![1_003, 1_007, 1_012]);
        assert_eq!(list.deadline_ms, 5_000);
        assert!(list.names(&hash(3)) && !list.names(&hash(4)));
        list.write(dir.path()).unwrap();
        let path = StaleList::path(dir.path(), 1_000);
        assert!(path.ends_with("00000000000000001000.stale"));
        assert_eq!(StaleList::read(&path, 1_000).unwrap(), Some(list.clone()));
        assert_eq!(StaleList::read(&dir.path().join("x.stale"), 0).unwrap(), None);
        assert_eq!(earliest_deadline(dir.path(), &[(1_000, 4_096)]), Some(5_000));
        assert_eq!(earliest_deadline(dir.path(), &[(1_000, 4_097)]), None, "another size");
    }

    #[test]
    fn damaged_lists_are_refused_and_temporary_files_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut list = StaleList::new(0, 10);
        list.add(&[(1, hash(1))], 1);
        list.write(dir.path()).unwrap();
        let path = StaleList::path(dir.path(), 0);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[30] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(StaleList::read(&path, 0), Err(StaleListError::Corrupt { .. })));
        std::fs::write(&path, vec![0u8; 3]).unwrap();
        assert!(matches!(StaleList::read(&path, 0), Err(StaleListError::Corrupt { .. })));
        // A huge count is refused before anything is allocated for it.
        let mut big = Vec::from(*MAGIC);
        big.extend_from_slice(&[0; 16]);
        big.extend_from_slice(&u32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&big).to_be_bytes();
        big.extend_from_slice(&crc);
        std::fs::write(&path, &big).unwrap();
        assert!(matches!(StaleList::read(&path, 0), Err(StaleListError::Corrupt { .. })));
        let tmp = dir.path().join("00000000000000000005.stale.tmp");
        std::fs::write(&tmp, b"partial").unwrap();
        assert_eq!(lists_in(dir.path()).unwrap().len(), 1);
        assert!(!tmp.exists());
    }
}

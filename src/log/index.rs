//! The two sparse indexes of a segment, in Kafka's on-disk formats.
//!
//! * `.index` (`OffsetIndex`): 8-byte entries, a 4-byte offset relative to the
//!   segment's base offset and the 4-byte file position of the batch whose last
//!   offset it is. An entry is added when more than `index.interval.bytes` were
//!   appended since the previous one.
//! * `.timeindex` (`TimeIndex`): 12-byte entries, the largest timestamp seen so
//!   far in the segment and the 4-byte relative last offset of the batch holding
//!   it. Entries are strictly increasing in both fields.
//!
//! Invariants: entries are strictly increasing; the file holds exactly the
//! entries (no preallocated tail), so kafka-dump-log reads it as Kafka's own.
//! The entries are also kept in memory, which is what lookups read; the file is
//! written as entries are added and is rebuilt from the log on recovery, so it
//! never needs to be fsynced before the log itself.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{LogError, Result};

/// Entries kept in memory and mirrored to the file.
#[derive(Debug)]
struct IndexFile {
    path: PathBuf,
    /// Shared with a deferred flush (`FlushJob`), which fsyncs it unlocked.
    file: Arc<File>,
    bytes: Vec<u8>,
    /// Bytes of `bytes` already written to the file; the rest is written by
    /// `write_out` (on flush, roll, close and rename). Recovery rebuilds any
    /// index of the unflushed tail, so entries need not reach the file sooner.
    written: usize,
    entry_size: usize,
    max_entries: usize,
}

impl IndexFile {
    fn open(path: &Path, entry_size: usize, max_index_size: usize, truncate: bool) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(truncate)
            .open(path)
            .map_err(LogError::io(path))?;
        let len = file.metadata().map_err(LogError::io(path))?.len();
        // Bound the read by the configured index size (and a sane ceiling) before allocating.
        let limit = max_index_size.max(entry_size) as u64;
        if len > limit.max(64 << 20) {
            return Err(LogError::CorruptIndex {
                path: path.into(),
                reason: format!("{len} bytes is larger than any index"),
            });
        }
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, 0).map_err(LogError::io(path))?;
        let written = bytes.len();
        Ok(Self {
            path: path.into(),
            file: Arc::new(file),
            bytes,
            written,
            entry_size,
            max_entries: (max_index_size / entry_size).max(1),
        })
    }

    fn entries(&self) -> usize {
        self.bytes.len() / self.entry_size
    }

    fn entry(&self, i: usize) -> &[u8] {
        &self.bytes[i * self.entry_size..(i + 1) * self.entry_size]
    }

    fn push(&mut self, entry: &[u8]) -> Result<()> {
        self.bytes.extend_from_slice(entry);
        Ok(())
    }

    fn write_out(&mut self) -> Result<()> {
        if self.written < self.bytes.len() {
            self.file
                .write_all_at(&self.bytes[self.written..], self.written as u64)
                .map_err(LogError::io(&self.path))?;
            self.written = self.bytes.len();
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.write_out()?;
        self.file.sync_data().map_err(LogError::io(&self.path))
    }

    /// Write pending entries out and return the file, for an fsync done
    /// later without the partition's lock.
    fn sync_handle(&mut self) -> Result<(PathBuf, Arc<File>)> {
        self.write_out()?;
        Ok((self.path.clone(), Arc::clone(&self.file)))
    }

    fn truncate_entries(&mut self, n: usize) -> Result<()> {
        self.bytes.truncate(n * self.entry_size);
        self.written = self.written.min(self.bytes.len());
        self.file.set_len(self.written as u64).map_err(LogError::io(&self.path))
    }

    fn rename(&mut self, to: &Path) -> Result<()> {
        self.write_out()?;
        std::fs::rename(&self.path, to).map_err(LogError::io(&self.path))?;
        self.path = to.into();
        Ok(())
    }

    fn corrupt(&self, reason: String) -> LogError {
        LogError::CorruptIndex { path: self.path.clone(), reason }
    }

    /// Index of the last entry whose key is <= target, by binary search.
    fn floor(&self, target: i64, key: impl Fn(&[u8]) -> i64) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.entries());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if key(self.entry(mid)) <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The offset an entry's relative offset names. Saturates rather than
/// overflows: only a damaged file name or a store manifest gives a base
/// offset within `u32::MAX` of `i64::MAX`, and its entries must not panic
/// the reader nor wrap to negative offsets.
fn absolute(base_offset: i64, relative: u32) -> i64 {
    base_offset.saturating_add(i64::from(relative))
}

/// `offset` relative to `base_offset`, if it fits an entry's 4 bytes.
fn relative(offset: i64, base_offset: i64) -> Option<u32> {
    offset.checked_sub(base_offset).and_then(|rel| u32::try_from(rel).ok())
}

/// Maps offsets to file positions (Kafka's `OffsetIndex`).
#[derive(Debug)]
pub struct OffsetIndex {
    inner: IndexFile,
    base_offset: i64,
}

/// An offset-index entry resolved to absolute values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: u32,
}

impl OffsetIndex {
    pub const ENTRY_SIZE: usize = 8;

    /// Open (or create, or with `truncate` empty) the index at `path` and read its entries.
    ///
    /// # Errors
    /// I/O errors; a file over the size limit is `CorruptIndex`.
    pub fn open(
        path: &Path,
        base_offset: i64,
        max_index_size: usize,
        truncate: bool,
    ) -> Result<Self> {
        Ok(Self {
            inner: IndexFile::open(path, Self::ENTRY_SIZE, max_index_size, truncate)?,
            base_offset,
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }
    pub fn entries(&self) -> usize {
        self.inner.entries()
    }
    pub fn is_full(&self) -> bool {
        self.inner.entries() >= self.inner.max_entries
    }
    pub fn max_entries(&self) -> usize {
        self.inner.max_entries
    }
    pub fn size_in_bytes(&self) -> usize {
        self.inner.bytes.len()
    }

    pub fn entry(&self, i: usize) -> OffsetPosition {
        let e = self.inner.entry(i);
        OffsetPosition { offset: absolute(self.base_offset, u32_at(e, 0)), position: u32_at(e, 4) }
    }

    pub fn last_offset(&self) -> i64 {
        match self.entries() {
            0 => self.base_offset,
            n => self.entry(n - 1).offset,
        }
    }

    /// The entry with the largest offset <= `target`, or (base offset, 0).
    pub fn lookup(&self, target: i64) -> OffsetPosition {
        let base = self.base_offset;
        match self.inner.floor(target, |e| absolute(base, u32_at(e, 0))) {
            Some(i) => self.entry(i),
            None => OffsetPosition { offset: base, position: 0 },
        }
    }

    /// The largest entry position that is <= `position` (entries grow in both fields).
    pub fn floor_position(&self, position: u32) -> Option<u32> {
        self.inner.floor(position as i64, |e| u32_at(e, 4) as i64).map(|i| self.entry(i).position)
    }

    /// Add an entry; offsets must grow and the index must not be full.
    ///
    /// # Errors
    /// A non-increasing offset or a full index is a `CorruptIndex` error: the caller broke an invariant.
    pub fn append(&mut self, offset: i64, position: u32) -> Result<()> {
        if self.entries() > 0 && offset <= self.last_offset() {
            return Err(self
                .inner
                .corrupt(format!("entry for offset {offset} after {}", self.last_offset())));
        }
        if self.is_full() {
            return Err(self.inner.corrupt(format!("index is full at {} entries", self.entries())));
        }
        let Some(rel) = relative(offset, self.base_offset) else {
            return Err(self
                .inner
                .corrupt(format!("offset {offset} is not relative to {}", self.base_offset)));
        };
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&rel.to_be_bytes());
        e[4..].copy_from_slice(&position.to_be_bytes());
        self.inner.push(&e)
    }

    /// Remove every entry with an offset >= `offset`.
    ///
    /// # Errors
    /// I/O errors resizing the file.
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let keep = self
            .inner
            .floor(offset.saturating_sub(1), |e| absolute(self.base_offset, u32_at(e, 0)))
            .map_or(0, |i| i + 1);
        self.inner.truncate_entries(keep)
    }

    /// Check the entries read from disk: whole entries, increasing offsets, positions inside the log.
    ///
    /// # Errors
    /// `CorruptIndex` naming the first problem.
    pub fn sanity_check(&self, log_size: u64) -> Result<()> {
        if self.inner.bytes.len() % Self::ENTRY_SIZE != 0 {
            return Err(self.inner.corrupt(format!(
                "size {} is not a multiple of {}",
                self.inner.bytes.len(),
                Self::ENTRY_SIZE
            )));
        }
        let mut prev: Option<OffsetPosition> = None;
        for i in 0..self.entries() {
            let e = self.entry(i);
            if e.position as u64 >= log_size.max(1) {
                return Err(self.inner.corrupt(format!(
                    "entry {i} points at position {} past the log's {log_size} bytes",
                    e.position
                )));
            }
            if let Some(p) = prev {
                if e.offset <= p.offset || e.position <= p.position {
                    return Err(self.inner.corrupt(format!(
                        "entry {i} ({}, {}) does not follow ({}, {})",
                        e.offset, e.position, p.offset, p.position
                    )));
                }
            }
            prev = Some(e);
        }
        Ok(())
    }

    /// Write pending entries to the file and fsync it.
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }

    /// Write pending entries to the file (no fsync).
    ///
    /// # Errors
    /// I/O errors.
    pub fn write_out(&mut self) -> Result<()> {
        self.inner.write_out()
    }

    /// Pending entries written, the file to fsync later (`FlushJob`).
    ///
    /// # Errors
    /// I/O errors writing the entries.
    pub fn sync_handle(&mut self) -> Result<(PathBuf, Arc<File>)> {
        self.inner.sync_handle()
    }

    /// # Errors
    /// I/O errors.
    pub fn rename(&mut self, to: &Path) -> Result<()> {
        self.inner.rename(to)
    }
}

/// Maps timestamps to offsets (Kafka's `TimeIndex`).
#[derive(Debug)]
pub struct TimeIndex {
    inner: IndexFile,
    base_offset: i64,
}

/// A time-index entry resolved to absolute values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

impl TimeIndex {
    pub const ENTRY_SIZE: usize = 12;

    /// Open (or create, or with `truncate` empty) the time index at `path`.
    ///
    /// # Errors
    /// I/O errors; a file over the size limit is `CorruptIndex`.
    pub fn open(
        path: &Path,
        base_offset: i64,
        max_index_size: usize,
        truncate: bool,
    ) -> Result<Self> {
        Ok(Self {
            inner: IndexFile::open(path, Self::ENTRY_SIZE, max_index_size, truncate)?,
            base_offset,
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }
    pub fn entries(&self) -> usize {
        self.inner.entries()
    }
    pub fn is_full(&self) -> bool {
        self.inner.entries() >= self.inner.max_entries
    }
    pub fn size_in_bytes(&self) -> usize {
        self.inner.bytes.len()
    }

    pub fn entry(&self, i: usize) -> TimestampOffset {
        Self::decode(self.inner.entry(i), self.base_offset)
    }

    fn decode(e: &[u8], base_offset: i64) -> TimestampOffset {
        TimestampOffset {
            timestamp: i64::from_be_bytes(e[..8].try_into().expect("8 bytes")),
            offset: absolute(base_offset, u32_at(e, 8)),
        }
    }

    /// The last whole entry of a time index file's bytes: for a closed
    /// segment, its largest timestamp (written when it rolled), known
    /// without opening the segment.
    pub fn last_entry_of(bytes: &[u8], base_offset: i64) -> Option<TimestampOffset> {
        let n = bytes.len() / Self::ENTRY_SIZE;
        let start = n.checked_sub(1)? * Self::ENTRY_SIZE;
        Some(Self::decode(&bytes[start..start + Self::ENTRY_SIZE], base_offset))
    }

    pub fn last_entry(&self) -> Option<TimestampOffset> {
        self.entries().checked_sub(1).map(|i| self.entry(i))
    }

    /// The entry with the largest timestamp <= `target`, or (-1, base offset).
    pub fn lookup(&self, target: i64) -> TimestampOffset {
        match self.inner.floor(target, |e| i64::from_be_bytes(e[..8].try_into().expect("8 bytes")))
        {
            Some(i) => self.entry(i),
            None => TimestampOffset { timestamp: -1, offset: self.base_offset },
        }
    }

    /// Add (timestamp, offset) unless the timestamp is not newer than the last
    /// entry's. `skip_full_check` is for the final entry written when the
    /// segment is closed, which Kafka allows past the limit.
    ///
    /// # Errors
    /// An offset below the last entry's is a `CorruptIndex` error.
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> Result<()> {
        if !skip_full_check && self.is_full() {
            return Err(self
                .inner
                .corrupt(format!("time index is full at {} entries", self.entries())));
        }
        if let Some(last) = self.last_entry() {
            if offset < last.offset {
                return Err(self
                    .inner
                    .corrupt(format!("entry for offset {offset} after {}", last.offset)));
            }
            if timestamp <= last.timestamp {
                return Ok(());
            }
        }
        let Some(rel) = relative(offset, self.base_offset) else {
            return Err(self
                .inner
                .corrupt(format!("offset {offset} is not relative to {}", self.base_offset)));
        };
        let mut e = [0u8; 12];
        e[..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..].copy_from_slice(&rel.to_be_bytes());
        self.inner.push(&e)
    }

    /// Remove every entry with an offset >= `offset`.
    ///
    /// # Errors
    /// I/O errors resizing the file.
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let keep = (0..self.entries()).take_while(|&i| self.entry(i).offset < offset).count();
        self.inner.truncate_entries(keep)
    }

    /// Check the entries read from disk: whole entries, both fields increasing,
    /// offsets inside the segment.
    ///
    /// # Errors
    /// `CorruptIndex` naming the first problem.
    pub fn sanity_check(&self, next_offset: i64) -> Result<()> {
        if self.inner.bytes.len() % Self::ENTRY_SIZE != 0 {
            return Err(self.inner.corrupt(format!(
                "size {} is not a multiple of {}",
                self.inner.bytes.len(),
                Self::ENTRY_SIZE
            )));
        }
        let mut prev: Option<TimestampOffset> = None;
        for i in 0..self.entries() {
            let e = self.entry(i);
            if e.offset >= next_offset.max(self.base_offset.saturating_add(1)) {
                return Err(self
                    .inner
                    .corrupt(format!("entry {i} names offset {} past the segment", e.offset)));
            }
            if let Some(p) = prev {
                if e.timestamp <= p.timestamp || e.offset < p.offset {
                    return Err(self.inner.corrupt(format!(
                        "entry {i} ({}, {}) does not follow ({}, {})",
                        e.timestamp, e.offset, p.timestamp, p.offset
                    )));
                }
            }
            prev = Some(e);
        }
        Ok(())
    }

    /// Write pending entries to the file and fsync it.
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }

    /// Write pending entries to the file (no fsync).
    ///
    /// # Errors
    /// I/O errors.
    pub fn write_out(&mut self) -> Result<()> {
        self.inner.write_out()
    }

    /// Pending entries written, the file to fsync later (`FlushJob`).
    ///
    /// # Errors
    /// I/O errors writing the entries.
    pub fn sync_handle(&mut self) -> Result<(PathBuf, Arc<File>)> {
        self.inner.sync_handle()
    }

    /// # Errors
    /// I/O errors.
    pub fn rename(&mut self, to: &Path) -> Result<()> {
        self.inner.rename(to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_lookup_and_truncate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::open(&path, 100, 1024, true).unwrap();
        assert_eq!(idx.lookup(150), OffsetPosition { offset: 100, position: 0 });
        idx.append(110, 4096).unwrap();
        idx.append(120, 8192).unwrap();
        assert!(idx.append(120, 9000).is_err());
        assert_eq!(idx.lookup(109).offset, 100);
        assert_eq!(idx.lookup(110), OffsetPosition { offset: 110, position: 4096 });
        assert_eq!(idx.lookup(500).offset, 120);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "entries reach the file lazily");
        idx.write_out().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
        assert_eq!(idx.floor_position(8191), Some(4096));
        assert_eq!(idx.floor_position(8192), Some(8192));
        assert_eq!(idx.floor_position(10), None);
        let reopened = OffsetIndex::open(&path, 100, 1024, false).unwrap();
        assert_eq!(reopened.entries(), 2);
        reopened.sanity_check(10_000).unwrap();
        assert!(reopened.sanity_check(8000).is_err());
        idx.truncate_to(120).unwrap();
        assert_eq!(idx.entries(), 1);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8);
    }

    #[test]
    fn time_index_only_grows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.timeindex");
        let mut idx = TimeIndex::open(&path, 0, 1200, true).unwrap();
        idx.maybe_append(1000, 5, false).unwrap();
        idx.maybe_append(1000, 7, false).unwrap();
        idx.maybe_append(900, 8, false).unwrap();
        idx.maybe_append(2000, 9, false).unwrap();
        assert_eq!(idx.entries(), 2);
        idx.write_out().unwrap();
        assert_eq!(idx.lookup(1500), TimestampOffset { timestamp: 1000, offset: 5 });
        assert_eq!(idx.lookup(10).timestamp, -1);
        idx.sanity_check(10).unwrap();
        assert!(idx.sanity_check(9).is_err());
        idx.truncate_to(9).unwrap();
        assert_eq!(idx.entries(), 1);
    }

    /// Found by the offset_time_index fuzz target: a base offset near
    /// `i64::MAX` (a damaged file name, a store manifest) overflowed the
    /// entries' offsets.
    #[test]
    fn a_base_offset_near_the_last_offset_neither_overflows_nor_wraps() {
        let base = i64::MAX - 1;
        let entry = [0x7f, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9];
        let last = TimeIndex::last_entry_of(&entry, base).unwrap();
        assert_eq!(last, TimestampOffset { timestamp: 0x7f00_0000_0000_0001, offset: i64::MAX });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("09223372036854775806.index");
        std::fs::write(&path, [0, 0, 0, 9, 0, 0, 0, 0]).unwrap();
        let mut idx = OffsetIndex::open(&path, base, 1024, false).unwrap();
        assert_eq!(idx.entry(0).offset, i64::MAX);
        assert_eq!(idx.lookup(i64::MAX).offset, i64::MAX);
        idx.sanity_check(1).unwrap();
        idx.truncate_to(i64::MAX).unwrap();
        assert!(idx.append(i64::MIN, 0).is_err(), "not relative to the base");
        let tpath = dir.path().join("09223372036854775806.timeindex");
        std::fs::write(&tpath, entry).unwrap();
        let tidx = TimeIndex::open(&tpath, i64::MAX, 1024, false).unwrap();
        assert!(tidx.sanity_check(i64::MAX).is_err(), "names an offset past the segment");
    }

    #[test]
    fn torn_index_fails_the_sanity_check() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        std::fs::write(&path, [0u8; 13]).unwrap();
        let idx = OffsetIndex::open(&path, 0, 1024, false).unwrap();
        assert!(idx.sanity_check(100).is_err());
    }
}

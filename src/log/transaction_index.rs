//! `.txnindex` (Kafka's `TransactionIndex`): the aborted transactions whose
//! ABORT marker is in a segment, so a read_committed fetch can name the
//! aborted data in the range it returns without reading the data.
//!
//! File `<base offset, 20 digits>.txnindex` next to the segment's `.log`, no
//! header, no preallocation, entries of 34 bytes appended one after another:
//!
//! ```text
//! offset size  field
//!      0    2  version i16 = 0   (a reader refuses any other)
//!      2    8  producer_id i64
//!     10    8  first_offset i64       first offset of the transaction's data in the partition
//!     18    8  last_offset i64        offset of the ABORT marker
//!     26    8  last_stable_offset i64 the LSO right after the marker
//! ```
//!
//! Invariants:
//! * The file exists only while it has an entry: it is created by the first
//!   append, and [`TransactionIndex::reset`] removes it. Most segments never
//!   have one.
//! * `last_offset` strictly increases and is at least the segment's base
//!   offset; [`TransactionIndex::append`] refuses anything else and opening
//!   an index that breaks it is a `CorruptIndex` error (the loader then
//!   rebuilds it from the log).
//! * A trailing partial entry (a crash in the middle of an append) is cut off
//!   when the index is opened.
//! * Entries are written to the file as they are appended (a crash of the
//!   process loses none); [`TransactionIndex::flush`] makes them durable and
//!   runs with the segment's flush. The index of a segment in the unflushed
//!   tail is rebuilt by recovery anyway.
//! * Nothing is kept in memory but the size and the last entry's offset:
//!   reads go to the file in chunks of a fixed size.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{LogError, Result};

/// Bytes of one entry.
pub const ENTRY_SIZE: usize = 34;

/// The fail point where opening a `.txnindex` for its first entry fails as
/// if descriptors had run out (scope: the log dir's path): the entry's
/// records are on disk by then, so the log must stop taking writes.
pub const OPEN_FAILPOINT: &str = "log-txn-index-open-error";

/// The only entry version there is.
pub const CURRENT_VERSION: i16 = 0;
/// Entries read per I/O.
const CHUNK_ENTRIES: usize = 256;

/// One aborted transaction (Kafka's `AbortedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// First offset of the transaction's data in this partition.
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
    /// The partition's last stable offset right after the marker.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// The 34-byte entry.
    pub fn to_bytes(&self) -> [u8; ENTRY_SIZE] {
        let mut e = [0u8; ENTRY_SIZE];
        e[..2].copy_from_slice(&CURRENT_VERSION.to_be_bytes());
        e[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        e[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        e[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        e[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        e
    }

    /// Decode an entry; `Err` with the version when it is not 0.
    pub fn from_bytes(e: &[u8; ENTRY_SIZE]) -> std::result::Result<Self, i16> {
        let i64_at = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().expect("8 bytes"));
        let version = i16::from_be_bytes([e[0], e[1]]);
        if version != CURRENT_VERSION {
            return Err(version);
        }
        Ok(Self {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// What one index contributes to a read (Kafka's `TxnIndexSearchResult`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxnIndexSearchResult {
    pub aborted: Vec<AbortedTxn>,
    /// An entry's LSO reached the upper bound: later segments need no look.
    pub complete: bool,
}

impl TxnIndexSearchResult {
    /// Take the next entry of an index into the search of
    /// `[fetch_offset, upper_bound)`; true once the search is complete.
    fn take(&mut self, txn: AbortedTxn, fetch_offset: i64, upper_bound: i64) -> bool {
        if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound {
            self.aborted.push(txn);
        }
        self.complete = txn.last_stable_offset >= upper_bound;
        self.complete
    }

    /// [`TransactionIndex::collect_aborted_txns`] over entries already
    /// read (those of a `.txnindex` object of a store, [`parse_entries`]).
    pub fn search(entries: &[AbortedTxn], fetch_offset: i64, upper_bound: i64) -> Self {
        let mut result = Self::default();
        for txn in entries {
            if result.take(*txn, fetch_offset, upper_bound) {
                break;
            }
        }
        result
    }
}

/// The entries of an index file's bytes (a `.txnindex` object read from a
/// store), checked as [`TransactionIndex::open`] checks a file: a trailing
/// partial entry is cut off, and every entry must be of the known version,
/// at or past `base_offset` and after the one before.
///
/// # Errors
/// The first entry that fails, with the reason.
pub fn parse_entries(
    bytes: &[u8],
    base_offset: i64,
) -> std::result::Result<Vec<AbortedTxn>, String> {
    let mut last = None;
    bytes
        .chunks_exact(ENTRY_SIZE)
        .map(|entry| {
            let entry: &[u8; ENTRY_SIZE] = entry.try_into().expect("whole entries");
            let txn = AbortedTxn::from_bytes(entry).map_err(unknown_version)?;
            match out_of_order(&txn, base_offset, &mut last) {
                Some(reason) => Err(reason),
                None => Ok(txn),
            }
        })
        .collect()
}

fn unknown_version(version: i16) -> String {
    format!("entry of version {version}, only {CURRENT_VERSION} is known")
}

/// Why `txn` cannot follow the entry whose marker is at `last` in a segment
/// based at `base_offset` (none when it can; `last` moves on to it).
fn out_of_order(txn: &AbortedTxn, base_offset: i64, last: &mut Option<i64>) -> Option<String> {
    if txn.last_offset < base_offset || last.is_some_and(|l| txn.last_offset <= l) {
        return Some(format!(
            "entry with last offset {} after {last:?} in a segment based at {base_offset}",
            txn.last_offset
        ));
    }
    *last = Some(txn.last_offset);
    None
}

/// The transaction index of one segment.
#[derive(Debug)]
pub struct TransactionIndex {
    path: PathBuf,
    base_offset: i64,
    /// Open while the file exists.
    /// Shared with a deferred flush (`FlushJob`), which fsyncs it unlocked.
    file: Option<Arc<File>>,
    /// Bytes of whole entries in the file.
    len: u64,
    last_offset: Option<i64>,
}

impl TransactionIndex {
    /// The index of a new segment: a file left at `path` by an earlier
    /// segment of that name is removed.
    ///
    /// # Errors
    /// I/O errors removing it.
    pub fn create(path: &Path, base_offset: i64) -> Result<Self> {
        remove_if_exists(path)?;
        Ok(Self::absent(path, base_offset))
    }

    fn absent(path: &Path, base_offset: i64) -> Self {
        Self { path: path.into(), base_offset, file: None, len: 0, last_offset: None }
    }

    /// Open the index at `path` if the file exists, cutting off a trailing
    /// partial entry and checking every entry.
    ///
    /// # Errors
    /// I/O errors, and `CorruptIndex` for an entry of another version, one
    /// below the base offset or one out of order.
    pub fn open(path: &Path, base_offset: i64) -> Result<Self> {
        let file = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self::absent(path, base_offset))
            }
            Err(e) => return Err(LogError::io(path)(e)),
        };
        let size = file.metadata().map_err(LogError::io(path))?.len();
        let len = size - size % ENTRY_SIZE as u64;
        if len != size {
            tracing::warn!(index = %path.display(), bytes = size - len, "cutting off a partial entry at the end of the transaction index");
            file.set_len(len).map_err(LogError::io(path))?;
        }
        let mut index = Self {
            path: path.into(),
            base_offset,
            file: Some(Arc::new(file)),
            len,
            last_offset: None,
        };
        let mut last: Option<i64> = None;
        index.visit(|txn| out_of_order(&txn, base_offset, &mut last))?;
        index.last_offset = last;
        Ok(index)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Entries in the index.
    pub fn len(&self) -> usize {
        (self.len / ENTRY_SIZE as u64) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The marker offset of the last entry.
    pub fn last_offset(&self) -> Option<i64> {
        self.last_offset
    }

    /// Add an entry, creating the file if needed.
    ///
    /// # Errors
    /// `CorruptIndex` when `txn.last_offset` is not above the last entry's
    /// (or is below the base offset): the caller broke an invariant. I/O errors.
    pub fn append(&mut self, txn: &AbortedTxn) -> Result<()> {
        if txn.last_offset < self.base_offset
            || self.last_offset.is_some_and(|l| txn.last_offset <= l)
        {
            return Err(self.corrupt(format!(
                "appending an entry with last offset {} after {:?}",
                txn.last_offset, self.last_offset
            )));
        }
        if self.file.is_none() {
            let log_dir = self.path.parent().and_then(Path::parent).unwrap_or(Path::new(""));
            if crate::failpoint::fires_in(OPEN_FAILPOINT, &log_dir.to_string_lossy()) {
                let injected = std::io::Error::from_raw_os_error(libc::EMFILE);
                return Err(LogError::io(&self.path)(injected));
            }
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&self.path)
                .map_err(LogError::io(&self.path))?;
            self.file = Some(Arc::new(file));
            self.len = 0;
        }
        let file = self.file.as_ref().expect("opened above");
        file.write_all_at(&txn.to_bytes(), self.len).map_err(LogError::io(&self.path))?;
        self.len += ENTRY_SIZE as u64;
        self.last_offset = Some(txn.last_offset);
        Ok(())
    }

    /// Remove every entry, and the file (recovery rebuilds the entries).
    ///
    /// # Errors
    /// I/O errors.
    pub fn reset(&mut self) -> Result<()> {
        self.file = None;
        self.len = 0;
        self.last_offset = None;
        remove_if_exists(&self.path)
    }

    /// Remove every entry whose marker is at or past `offset` (the log was
    /// cut there). Entries are in marker order, so the kept ones are a
    /// prefix and the file is only shortened.
    ///
    /// # Errors
    /// I/O errors and entries of an unknown version.
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let mut keep = 0usize;
        let mut last = None;
        self.visit_until(|txn| {
            if txn.last_offset >= offset {
                return true;
            }
            keep += 1;
            last = Some(txn.last_offset);
            false
        })?;
        if keep == self.len() {
            return Ok(());
        }
        let Some(file) = &self.file else { return Ok(()) };
        let len = (keep * ENTRY_SIZE) as u64;
        file.set_len(len).map_err(LogError::io(&self.path))?;
        self.len = len;
        self.last_offset = last;
        Ok(())
    }

    /// Fsync the file, if there is one.
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&self) -> Result<()> {
        match &self.file {
            Some(f) => f.sync_data().map_err(LogError::io(&self.path)),
            None => Ok(()),
        }
    }

    /// The file to fsync later (`FlushJob`), if it exists.
    pub fn sync_handle(&self) -> Option<(PathBuf, Arc<File>)> {
        self.file.as_ref().map(|f| (self.path.clone(), Arc::clone(f)))
    }

    /// Give the index a new path, renaming the file if there is one.
    ///
    /// # Errors
    /// I/O errors; the index keeps its old path then.
    pub fn rename(&mut self, to: &Path) -> Result<()> {
        if self.file.is_some() {
            std::fs::rename(&self.path, to).map_err(LogError::io(&self.path))?;
        }
        self.path = to.into();
        Ok(())
    }

    /// Every entry, in order.
    ///
    /// # Errors
    /// I/O errors and entries of an unknown version.
    pub fn all_aborted_txns(&self) -> Result<Vec<AbortedTxn>> {
        let mut out = Vec::with_capacity(self.len());
        self.visit(|txn| {
            out.push(txn);
            None
        })?;
        Ok(out)
    }

    /// The aborted transactions overlapping `[fetch_offset, upper_bound)`:
    /// marker at or after `fetch_offset` and data starting before
    /// `upper_bound`. The search is complete once an entry's LSO reaches the
    /// upper bound: any later abort has its marker past every offset read.
    ///
    /// # Errors
    /// I/O errors and entries of an unknown version.
    pub fn collect_aborted_txns(
        &self,
        fetch_offset: i64,
        upper_bound: i64,
    ) -> Result<TxnIndexSearchResult> {
        let mut result = TxnIndexSearchResult::default();
        self.visit_until(|txn| result.take(txn, fetch_offset, upper_bound))?;
        Ok(result)
    }

    /// Call `check` on every entry; the first `Some(reason)` is a `CorruptIndex` error.
    fn visit(&self, mut check: impl FnMut(AbortedTxn) -> Option<String>) -> Result<()> {
        let mut problem = None;
        self.visit_until(|txn| {
            problem = check(txn);
            problem.is_some()
        })?;
        match problem {
            Some(reason) => Err(self.corrupt(reason)),
            None => Ok(()),
        }
    }

    /// Read the entries in order, in chunks, until `stop` returns true.
    fn visit_until(&self, mut stop: impl FnMut(AbortedTxn) -> bool) -> Result<()> {
        let Some(file) = &self.file else { return Ok(()) };
        let mut buf = vec![0u8; ENTRY_SIZE * CHUNK_ENTRIES];
        let mut position = 0u64;
        while position < self.len {
            let n = ((self.len - position) as usize).min(buf.len());
            file.read_exact_at(&mut buf[..n], position).map_err(LogError::io(&self.path))?;
            for entry in buf[..n].chunks_exact(ENTRY_SIZE) {
                let entry: &[u8; ENTRY_SIZE] = entry.try_into().expect("whole entries");
                let txn = AbortedTxn::from_bytes(entry)
                    .map_err(|version| self.corrupt(unknown_version(version)))?;
                if stop(txn) {
                    return Ok(());
                }
            }
            position += n as u64;
        }
        Ok(())
    }

    fn corrupt(&self, reason: String) -> LogError {
        LogError::CorruptIndex { path: self.path.clone(), reason }
    }
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io(path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn entries_are_kafkas_34_bytes() {
        let golden: [u8; ENTRY_SIZE] = [
            0x00, 0x00, // version 0
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, // producer id 1000
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, // first offset 10
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, // last offset 20
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, // last stable offset 12
        ];
        let t = txn(1000, 10, 20, 12);
        assert_eq!(t.to_bytes(), golden);
        assert_eq!(AbortedTxn::from_bytes(&golden), Ok(t));
        let mut v1 = golden;
        v1[1] = 1;
        assert_eq!(AbortedTxn::from_bytes(&v1), Err(1));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000005.txnindex");
        let mut index = TransactionIndex::create(&path, 5).unwrap();
        assert!(!path.exists(), "no file until the first entry");
        index.append(&t).unwrap();
        index.append(&txn(7, 21, 30, 31)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 2 * ENTRY_SIZE);
        assert_eq!(bytes[..ENTRY_SIZE], golden);
        assert_eq!(bytes[ENTRY_SIZE..], txn(7, 21, 30, 31).to_bytes());
    }

    #[test]
    fn appends_must_increase_and_stay_in_the_segment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.txnindex");
        let mut index = TransactionIndex::create(&path, 100).unwrap();
        assert!(index.append(&txn(1, 50, 99, 100)).is_err(), "below the base offset");
        index.append(&txn(1, 50, 120, 121)).unwrap();
        assert!(index.append(&txn(2, 110, 120, 121)).is_err(), "same last offset");
        assert!(index.append(&txn(2, 110, 119, 121)).is_err(), "lower last offset");
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn a_partial_trailing_entry_is_cut_off_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut index = TransactionIndex::create(&path, 0).unwrap();
        index.append(&txn(1, 0, 4, 5)).unwrap();
        index.append(&txn(2, 3, 8, 9)).unwrap();
        drop(index);
        // A crash in the middle of the third append.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&txn(3, 9, 12, 13).to_bytes()[..20]);
        std::fs::write(&path, &bytes).unwrap();

        let mut index = TransactionIndex::open(&path, 0).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * ENTRY_SIZE as u64);
        assert_eq!(index.all_aborted_txns().unwrap(), vec![txn(1, 0, 4, 5), txn(2, 3, 8, 9)]);
        assert_eq!(index.last_offset(), Some(8));
        // Appends continue right after the last whole entry.
        index.append(&txn(3, 9, 12, 13)).unwrap();
        let reopened = TransactionIndex::open(&path, 0).unwrap();
        assert_eq!(reopened.all_aborted_txns().unwrap().len(), 3);
    }

    #[test]
    fn corrupt_indexes_are_refused_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000010.txnindex");
        let out_of_order = [txn(1, 10, 20, 21).to_bytes(), txn(2, 11, 15, 21).to_bytes()].concat();
        std::fs::write(&path, out_of_order).unwrap();
        assert!(matches!(TransactionIndex::open(&path, 10), Err(LogError::CorruptIndex { .. })));
        std::fs::write(&path, txn(1, 0, 5, 6).to_bytes()).unwrap();
        assert!(TransactionIndex::open(&path, 10).is_err(), "marker below the base offset");
        let mut v1 = txn(1, 10, 20, 21).to_bytes();
        v1[1] = 1;
        std::fs::write(&path, v1).unwrap();
        assert!(TransactionIndex::open(&path, 10).is_err(), "unknown version");
        std::fs::remove_file(&path).unwrap();
        let absent = TransactionIndex::open(&path, 10).unwrap();
        assert!(absent.is_empty() && !path.exists());
    }

    #[test]
    fn collect_stops_at_the_first_entry_whose_lso_reaches_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut index = TransactionIndex::create(&path, 0).unwrap();
        // pid 1 aborted [0, 10], pid 2 aborted [5, 20] (LSO 12: pid 3 still open),
        // pid 3 aborted [12, 30].
        for t in [txn(1, 0, 10, 5), txn(2, 5, 20, 12), txn(3, 12, 30, 31)] {
            index.append(&t).unwrap();
        }
        let r = index.collect_aborted_txns(11, 15).unwrap();
        assert_eq!(r.aborted, vec![txn(2, 5, 20, 12), txn(3, 12, 30, 31)]);
        assert!(r.complete);
        let r = index.collect_aborted_txns(0, 6).unwrap();
        assert_eq!(r.aborted, vec![txn(1, 0, 10, 5), txn(2, 5, 20, 12)]);
        assert!(r.complete, "pid 2's LSO 12 is past 6: nothing later can overlap");
        let r = index.collect_aborted_txns(31, 40).unwrap();
        assert!(r.aborted.is_empty());
        assert!(!r.complete, "the next segment may hold aborts overlapping the range");
        // Many entries: reads cross chunk boundaries.
        for i in 0..1000 {
            index.append(&txn(9, 100 + i, 100 + i, 101 + i)).unwrap();
        }
        assert_eq!(index.collect_aborted_txns(0, 2000).unwrap().aborted.len(), 1003);
        // The same search over the file's bytes (a store's object) agrees.
        let bytes = std::fs::read(&path).unwrap();
        let entries = parse_entries(&bytes, 0).unwrap();
        for (from, upper) in [(11, 15), (0, 6), (31, 40), (0, 2000), (500, 600)] {
            let from_file = index.collect_aborted_txns(from, upper).unwrap();
            let from_bytes = TxnIndexSearchResult::search(&entries, from, upper);
            assert_eq!(from_bytes, from_file, "[{from}, {upper})");
        }
        // Checked as a file is on open: a partial entry is cut off; another
        // version, an entry out of order or below the base are refused.
        assert_eq!(parse_entries(&bytes[..ENTRY_SIZE + 3], 0).unwrap().len(), 1);
        let mut unknown = bytes[..ENTRY_SIZE].to_vec();
        unknown[1] = 7;
        assert!(parse_entries(&unknown, 0).unwrap_err().contains("version 7"));
        let swapped = [&bytes[ENTRY_SIZE..2 * ENTRY_SIZE], &bytes[..ENTRY_SIZE]].concat();
        assert!(parse_entries(&swapped, 0).unwrap_err().contains("after Some(20)"));
        assert!(parse_entries(&bytes[..ENTRY_SIZE], 11).unwrap_err().contains("based at 11"));
        index.reset().unwrap();
        assert!(!path.exists() && index.is_empty());
    }
}

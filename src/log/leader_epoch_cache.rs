//! `LeaderEpochFileCache` (Kafka's name): the leader epochs of one partition
//! and the offset each began at, kept in the partition directory's
//! `leader-epoch-checkpoint`, in Kafka's format:
//!
//! ```text
//! 0          version
//! 2          number of entries
//! 0 0        epoch, start offset
//! 3 1500
//! ```
//!
//! Every batch carries the epoch of the leader that appended it
//! (`partitionLeaderEpoch`); this cache is the index of where those epochs
//! change, which OffsetsForLeaderEpoch answers from and a returning replica
//! truncates by (KIP-101, KIP-279).
//!
//! Invariants:
//! * entries strictly increase in epoch and in start offset;
//! * a change that adds an entry or drops entries at the end is on disk
//!   (written through a fsynced temporary file and a rename) before the
//!   call returns, so an entry is durable before any batch of its epoch;
//!   a change at the start (the log start moved) may be lost in a crash,
//!   since the load truncates by the log start again;
//! * a file that is missing, malformed or not monotonic is never trusted:
//!   the load rebuilds the cache from the batch headers, which are the
//!   source of truth.

use std::path::{Path, PathBuf};

use super::checkpoint;
use super::error::{LogError, Result};

pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

/// Kafka's `UNDEFINED_EPOCH` and `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// Largest checkpoint read: an entry per leader election, far below this.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// One epoch and the first offset appended under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

#[derive(Debug)]
pub struct LeaderEpochFileCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochFileCache {
    /// An empty cache for the partition in `dir`; nothing is written.
    pub fn empty(dir: &Path) -> Self {
        Self { path: dir.join(LEADER_EPOCH_CHECKPOINT), entries: Vec::new() }
    }

    /// The cache of the partition in `dir` as its file holds it; `None`
    /// when the file is missing.
    ///
    /// # Errors
    /// I/O errors, and `Corrupt` (naming the line) for a malformed file or
    /// entries that do not increase.
    pub fn read(dir: &Path) -> Result<Option<Self>> {
        let mut cache = Self::empty(dir);
        let path = cache.path.clone();
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LogError::io(&path)(e)),
        };
        if meta.len() > MAX_FILE_BYTES {
            return Err(corrupt(&path, 0, format!("{} bytes is too large", meta.len())));
        }
        let text = std::fs::read_to_string(&path).map_err(LogError::io(&path))?;
        cache.entries = parse(&path, &text)?;
        Ok(Some(cache))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Record that `epoch` begins at `start_offset` (a leader's first
    /// append of it, or a replicated batch of it); written before it
    /// returns. Entries it would make non-monotonic (an epoch at or above
    /// it, or one starting at or past the offset) are dropped first, as
    /// Kafka's cache does. A negative epoch (a batch from before leader
    /// epochs) or the latest epoch again at a later offset changes nothing.
    /// Returns whether the cache changed.
    ///
    /// # Errors
    /// I/O errors writing the file; the cache is then left as it was.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool> {
        let before = self.entries.clone();
        if !self.assign_in_memory(epoch, start_offset) {
            return Ok(false);
        }
        if let Err(e) = self.write() {
            self.entries = before;
            return Err(e);
        }
        Ok(true)
    }

    /// [`assign`](Self::assign) without writing (the load, which writes
    /// once at its end).
    pub fn assign_in_memory(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        let needed = match self.entries.last() {
            None => true,
            Some(last) => epoch != last.epoch || start_offset < last.start_offset,
        };
        if !needed {
            return false;
        }
        let before = self.entries.len();
        self.entries.retain(|e| e.epoch < epoch && e.start_offset < start_offset);
        if self.entries.len() < before {
            tracing::warn!(file = %self.path.display(), epoch, start_offset, dropped = before - self.entries.len(), "leader epoch entries above a new one dropped");
        }
        self.entries.push(EpochEntry { epoch, start_offset });
        true
    }

    /// The epoch of the record at `offset`: that of the last entry
    /// starting at or below it.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries.iter().rev().find(|e| e.start_offset <= offset).map(|e| e.epoch)
    }

    /// Kafka's `endOffsetFor`: the largest epoch at or below `requested`
    /// and the offset after its last record: the log end `log_end_offset`
    /// for the latest epoch, else the start of the next epoch. A requested
    /// epoch below every entry answers itself with the first start offset;
    /// one above every entry, or an undefined one, answers
    /// (`UNDEFINED_EPOCH`, `UNDEFINED_EPOCH_OFFSET`).
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self.entries.iter().rev().find(|e| e.epoch <= requested) {
            None => (requested, higher.start_offset),
            Some(floor) => (floor.epoch, higher.start_offset),
        }
    }

    /// Drop the entries starting at or past `end_offset` (the log was cut
    /// there); written before it returns.
    ///
    /// # Errors
    /// I/O errors writing the file.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<()> {
        if self.truncate_from_end_in_memory(end_offset) {
            self.write()?;
        }
        Ok(())
    }

    fn truncate_from_end_in_memory(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        self.entries.len() < before
    }

    /// The log now starts at `start_offset`: the entries before it go, but
    /// the epoch in force there stays, starting at `start_offset`. Written
    /// at once; a failed write is only logged (module doc).
    pub fn truncate_from_start(&mut self, start_offset: i64) {
        if self.truncate_from_start_in_memory(start_offset) {
            if let Err(e) = self.write() {
                tracing::warn!(
                    "leader epoch checkpoint not rewritten after the log start moved: {e}"
                );
            }
        }
    }

    fn truncate_from_start_in_memory(&mut self, start_offset: i64) -> bool {
        let below = self.entries.iter().take_while(|e| e.start_offset <= start_offset).count();
        let Some(&floor) = below.checked_sub(1).and_then(|i| self.entries.get(i)) else {
            return false;
        };
        if below == 1 && floor.start_offset == start_offset {
            return false;
        }
        self.entries.drain(..below);
        self.entries.insert(0, EpochEntry { epoch: floor.epoch, start_offset });
        true
    }

    /// Bring a cache read at load in line with the log it belongs to: no
    /// entry at or past its end, none before its start. Writes if that
    /// changed anything, or if `force` (a cache rebuilt from headers).
    ///
    /// # Errors
    /// I/O errors writing the file.
    pub fn fit_to(
        &mut self,
        log_start_offset: i64,
        log_end_offset: i64,
        force: bool,
    ) -> Result<()> {
        let cut_end = self.truncate_from_end_in_memory(log_end_offset);
        let cut_start = self.truncate_from_start_in_memory(log_start_offset);
        if cut_end || cut_start || force {
            self.write()?;
        }
        Ok(())
    }

    fn write(&self) -> Result<()> {
        let mut text = format!("0\n{}\n", self.entries.len());
        for e in &self.entries {
            text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        checkpoint::write_atomically(&self.path, text.as_bytes())
    }
}

fn parse(path: &Path, text: &str) -> Result<Vec<EpochEntry>> {
    let mut lines = text.lines();
    let version = lines.next().ok_or_else(|| corrupt(path, 1, "empty file".into()))?;
    if version.trim() != "0" {
        return Err(corrupt(path, 1, format!("unknown version {version:?}")));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| corrupt(path, 2, "bad entry count".into()))?;
    let mut entries: Vec<EpochEntry> = Vec::new();
    for (i, line) in lines.enumerate() {
        let n = i as u64 + 3;
        let mut parts = line.split(' ');
        let (Some(epoch), Some(offset), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(corrupt(path, n, format!("malformed entry {line:?}")));
        };
        let (Ok(epoch), Ok(start_offset)) = (epoch.parse::<i32>(), offset.parse::<i64>()) else {
            return Err(corrupt(path, n, format!("malformed entry {line:?}")));
        };
        let entry = EpochEntry { epoch, start_offset };
        let increasing = entries
            .last()
            .is_none_or(|last| last.epoch < epoch && last.start_offset < start_offset);
        if epoch < 0 || start_offset < 0 || !increasing {
            return Err(corrupt(path, n, format!("entry {line:?} does not follow the one before")));
        }
        entries.push(entry);
    }
    if entries.len() != count {
        return Err(corrupt(path, 2, format!("expected {count} entries, found {}", entries.len())));
    }
    Ok(entries)
}

fn corrupt(path: &Path, line: u64, reason: String) -> LogError {
    LogError::Corrupt {
        path: path.into(),
        position: line,
        reason: format!("line {line}: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> (tempfile::TempDir, LeaderEpochFileCache) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochFileCache::empty(dir.path());
        for &(e, o) in entries {
            assert!(c.assign(e, o).unwrap());
        }
        (dir, c)
    }

    fn pairs(c: &LeaderEpochFileCache) -> Vec<(i32, i64)> {
        c.entries().iter().map(|e| (e.epoch, e.start_offset)).collect()
    }

    #[test]
    fn writes_kafkas_format_and_reads_it_back() {
        let (dir, c) = cache(&[(0, 0), (3, 1500)]);
        let text = std::fs::read_to_string(c.path()).unwrap();
        assert_eq!(text, "0\n2\n0 0\n3 1500\n");
        let back = LeaderEpochFileCache::read(dir.path()).unwrap().unwrap();
        assert_eq!(pairs(&back), vec![(0, 0), (3, 1500)]);
        let empty = tempfile::tempdir().unwrap();
        assert!(LeaderEpochFileCache::read(empty.path()).unwrap().is_none());
    }

    #[test]
    fn refuses_malformed_and_non_monotonic_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
        for bad in [
            "",
            "1\n0\n",
            "0\nx\n",
            "0\n2\n0 0\n",
            "0\n1\n0 0 0\n",
            "0\n2\n1 5\n1 9\n",
            "0\n2\n1 5\n2 5\n",
            "0\n2\n2 5\n1 9\n",
            "0\n1\n-1 0\n",
        ] {
            std::fs::write(&path, bad).unwrap();
            assert!(LeaderEpochFileCache::read(dir.path()).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn assign_keeps_entries_monotonic() {
        let (_d, mut c) = cache(&[(0, 0), (2, 10), (4, 20)]);
        assert!(!c.assign(4, 25).unwrap(), "the latest epoch again changes nothing");
        assert!(!c.assign(-1, 30).unwrap());
        // An epoch at or below a known one, or a start at or below a known
        // start, drops the entries it contradicts.
        assert!(c.assign(3, 15).unwrap());
        assert_eq!(pairs(&c), vec![(0, 0), (2, 10), (3, 15)]);
        assert!(c.assign(5, 12).unwrap());
        assert_eq!(pairs(&c), vec![(0, 0), (2, 10), (5, 12)]);
        let back = LeaderEpochFileCache::read(c.path().parent().unwrap()).unwrap().unwrap();
        assert_eq!(pairs(&back), pairs(&c));
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let (_d, c) = cache(&[(1, 0), (3, 10), (6, 20)]);
        let leo = 35;
        assert_eq!(c.end_offset_for(6, leo), (6, 35), "latest epoch: the log end");
        assert_eq!(c.end_offset_for(3, leo), (3, 20));
        assert_eq!(c.end_offset_for(4, leo), (3, 20), "an unknown epoch: the largest below it");
        assert_eq!(c.end_offset_for(0, leo), (0, 0), "below every epoch: itself, the first start");
        assert_eq!(c.end_offset_for(7, leo), (-1, -1), "above every epoch");
        assert_eq!(c.end_offset_for(-1, leo), (-1, -1));
        let (_e, empty) = cache(&[]);
        assert_eq!(empty.end_offset_for(0, leo), (-1, -1));
    }

    #[test]
    fn truncations_keep_the_epoch_in_force() {
        let (dir, mut c) = cache(&[(1, 0), (3, 10), (6, 20)]);
        c.truncate_from_start(15);
        assert_eq!(pairs(&c), vec![(3, 15), (6, 20)]);
        c.truncate_from_start(15);
        assert_eq!(pairs(&c), vec![(3, 15), (6, 20)]);
        c.truncate_from_start(5);
        assert_eq!(pairs(&c), vec![(3, 15), (6, 20)], "a start below every entry changes nothing");
        c.truncate_from_end(20).unwrap();
        assert_eq!(pairs(&c), vec![(3, 15)]);
        let back = LeaderEpochFileCache::read(dir.path()).unwrap().unwrap();
        assert_eq!(pairs(&back), vec![(3, 15)]);
        assert_eq!(c.epoch_for_offset(14), None);
        assert_eq!(c.epoch_for_offset(99), Some(3));
    }

    #[test]
    fn fit_to_cuts_both_ends() {
        let (_d, mut c) = cache(&[(1, 0), (3, 10), (6, 20)]);
        c.fit_to(12, 20, false).unwrap();
        assert_eq!(pairs(&c), vec![(3, 12)]);
    }
}

//! `cleaner-offset-checkpoint`: per log dir, the first dirty offset of every
//! compacted partition there, in Kafka's format (`0`, a count line, then
//! `topic partition offset` lines). Written through a temporary file that is
//! fsynced and renamed over the old one, then the directory is fsynced: a
//! crash leaves the old or the new file, never a mix.
//!
//! The offset recorded after a clean is the clean's end offset, the first
//! offset it did not map; the next clean's dirty range starts there. A
//! checkpoint that is behind only costs work (records are re-mapped); one that
//! is ahead would skip records, so it is written only after the swap.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::log::checkpoint::{OffsetCheckpointFile, CLEANER_OFFSET_CHECKPOINT};
use crate::log::error::Result;
use crate::log::TopicPartition;

/// The cleaner checkpoint of one log dir.
#[derive(Debug, Clone)]
pub struct CleanerOffsetCheckpoint {
    file: OffsetCheckpointFile,
    log_dir: PathBuf,
}

impl CleanerOffsetCheckpoint {
    /// The checkpoint at the root of `log_dir`.
    pub fn new(log_dir: &Path) -> Self {
        Self {
            file: OffsetCheckpointFile::new(log_dir, CLEANER_OFFSET_CHECKPOINT),
            log_dir: log_dir.into(),
        }
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// Every partition's first dirty offset; a missing file is empty.
    ///
    /// # Errors
    /// I/O errors and a malformed file (`Corrupt`, naming the line).
    pub fn read(&self) -> Result<BTreeMap<TopicPartition, i64>> {
        self.file.read()
    }

    /// Replace the whole file.
    ///
    /// # Errors
    /// I/O errors; the old file then stays.
    pub fn write(&self, entries: &BTreeMap<TopicPartition, i64>) -> Result<()> {
        self.file.write(entries)
    }

    /// Set one partition's offset, keeping the others.
    ///
    /// # Errors
    /// As for `read` and `write`.
    pub fn update(&self, tp: &TopicPartition, offset: i64) -> Result<()> {
        let mut entries = self.read()?;
        entries.insert(tp.clone(), offset);
        self.write(&entries)
    }

    /// Drop one partition (deleted, or moved to another dir).
    ///
    /// # Errors
    /// As for `read` and `write`.
    pub fn remove(&self, tp: &TopicPartition) -> Result<()> {
        let mut entries = self.read()?;
        if entries.remove(tp).is_some() {
            self.write(&entries)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_format_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let cp = CleanerOffsetCheckpoint::new(dir.path());
        assert!(cp.read().unwrap().is_empty());
        cp.update(&TopicPartition::new("users", 0), 42).unwrap();
        cp.update(&TopicPartition::new("users", 3), 7).unwrap();
        cp.update(&TopicPartition::new("users", 0), 50).unwrap();
        let text = std::fs::read_to_string(dir.path().join("cleaner-offset-checkpoint")).unwrap();
        assert_eq!(text, "0\n2\nusers 0 50\nusers 3 7\n");
        cp.remove(&TopicPartition::new("users", 3)).unwrap();
        assert_eq!(
            cp.read().unwrap().into_iter().collect::<Vec<_>>(),
            vec![(TopicPartition::new("users", 0), 50)]
        );
        std::fs::write(cp.path(), "0\nx\n").unwrap();
        assert!(cp.read().is_err());
    }
}

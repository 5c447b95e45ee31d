//! Kafka's offset checkpoint files (`recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `cleaner-offset-checkpoint`), one per log dir:
//!
//! ```text
//! 0                      version
//! 2                      number of entries
//! my-topic 0 1234        topic, partition, offset
//! my-topic 1 99
//! ```
//!
//! Written to `<file>.tmp`, fsynced, renamed over the old file and the directory
//! fsynced, so a crash leaves either the old or the new checkpoint, never a mix.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::{LogError, Result};
use super::topic_partition::TopicPartition;

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// Largest checkpoint file read (a line per partition; far above any real count).
const MAX_CHECKPOINT_BYTES: u64 = 256 << 20;

#[derive(Debug, Clone)]
pub struct OffsetCheckpointFile {
    path: PathBuf,
}

impl OffsetCheckpointFile {
    pub fn new(dir: &Path, name: &str) -> Self {
        Self { path: dir.join(name) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Atomically replace the file with `entries`.
    ///
    /// # Errors
    /// I/O errors; the old file is then left as it was.
    pub fn write(&self, entries: &BTreeMap<TopicPartition, i64>) -> Result<()> {
        let mut text = format!("0\n{}\n", entries.len());
        for (tp, offset) in entries {
            text.push_str(&format!("{} {} {offset}\n", tp.topic, tp.partition));
        }
        write_atomically(&self.path, text.as_bytes())
    }

    /// Read the entries; a missing file is empty.
    ///
    /// # Errors
    /// I/O errors, and `Corrupt` for a malformed file (naming the line).
    pub fn read(&self) -> Result<BTreeMap<TopicPartition, i64>> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(LogError::io(&self.path)(e)),
        };
        if meta.len() > MAX_CHECKPOINT_BYTES {
            return Err(self.corrupt(0, format!("{} bytes is too large", meta.len())));
        }
        let text = std::fs::read_to_string(&self.path).map_err(LogError::io(&self.path))?;
        let mut lines = text.lines();
        let version = lines.next().ok_or_else(|| self.corrupt(1, "empty file".into()))?;
        if version.trim() != "0" {
            return Err(self.corrupt(1, format!("unknown version {version:?}")));
        }
        let count: usize = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| self.corrupt(2, "bad entry count".into()))?;
        let mut entries = BTreeMap::new();
        for (i, line) in lines.enumerate() {
            let mut parts = line.split(' ');
            let (Some(topic), Some(partition), Some(offset), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(self.corrupt(i as u64 + 3, format!("malformed entry {line:?}")));
            };
            let (Ok(partition), Ok(offset)) = (partition.parse::<i32>(), offset.parse::<i64>())
            else {
                return Err(self.corrupt(i as u64 + 3, format!("malformed entry {line:?}")));
            };
            entries.insert(TopicPartition::new(topic, partition), offset);
        }
        if entries.len() != count {
            return Err(
                self.corrupt(2, format!("expected {count} entries, found {}", entries.len()))
            );
        }
        Ok(entries)
    }

    fn corrupt(&self, line: u64, reason: String) -> LogError {
        LogError::Corrupt {
            path: self.path.clone(),
            position: line,
            reason: format!("line {line}: {reason}"),
        }
    }
}

/// Write `bytes` to `path` through a fsynced temporary file and a rename.
///
/// # Errors
/// I/O errors.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(LogError::io(&tmp))?;
    f.write_all(bytes).map_err(LogError::io(&tmp))?;
    f.sync_all().map_err(LogError::io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(LogError::io(path))?;
    if let Some(dir) = path.parent() {
        fsync_dir(dir)?;
    }
    Ok(())
}

/// Fsync a directory so renames and creations in it are durable.
///
/// # Errors
/// I/O errors.
pub fn fsync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(LogError::io(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_kafka_format() {
        let dir = tempfile::tempdir().unwrap();
        let file = OffsetCheckpointFile::new(dir.path(), CLEANER_OFFSET_CHECKPOINT);
        assert!(file.read().unwrap().is_empty());
        let entries: BTreeMap<_, _> =
            [(TopicPartition::new("a-b", 0), 5), (TopicPartition::new("x", 12), 99)].into();
        file.write(&entries).unwrap();
        assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "0\n2\na-b 0 5\nx 12 99\n");
        assert_eq!(file.read().unwrap(), entries);
        std::fs::write(file.path(), "0\n3\na 0 1\n").unwrap();
        assert!(file.read().is_err());
    }
}

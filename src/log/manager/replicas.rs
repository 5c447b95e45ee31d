//! The partitions of a cluster on this broker (`partitions_placed_by_cluster`):
//! one partition of a topic created where the cluster placed it, with the
//! cluster's topic id; and the `replication-offset-checkpoint` of each log
//! dir (Kafka's file and format), the high watermark of every replicated
//! partition, read at start and written with the other checkpoints, so a
//! restarted replica does not count as committed what only it held.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::{read_checkpoint_or_empty, CleaningControl, LogManager, TopicInfo};
use crate::log::checkpoint::{
    OffsetCheckpointFile, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use crate::log::error::{LogError, Result};
use crate::log::topic_partition::TopicPartition;

/// Kafka's high watermark checkpoint, one per log dir.
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";

impl LogManager {
    /// Create one partition of a topic the cluster placed here, with the
    /// cluster's topic id and overrides (`partitions_placed_by_cluster`).
    /// The topic's local partition count is its highest partition here + 1.
    ///
    /// # Errors
    /// `TopicExists` when the topic here has another id, `InvalidConfig`, I/O errors.
    pub fn create_replica(
        &self,
        name: &str,
        id: [u8; 16],
        partition: i32,
        overrides: BTreeMap<String, String>,
    ) -> Result<()> {
        Self::validate_topic_name(name)?;
        let tp = TopicPartition::new(name, partition);
        if self.get_log(&tp).is_some() {
            return Ok(());
        }
        let config = Arc::new(self.resolve_config(overrides)?);
        let mut info = TopicInfo { name: name.into(), id, partitions: partition + 1, config };
        let exists = || LogError::TopicExists(name.into());
        let _reserved = self.reserve(name, exists(), |topics| match topics.get(name) {
            Some(t) if t.id != id => Err(exists()),
            _ => Ok(()),
        })?;
        if let Some(t) = self.topic(name) {
            info.config = t.config;
        }
        self.create_partition(&info, partition)?;
        let mut topics = self.topics.write();
        let entry = topics.entry(name.into()).or_insert_with(|| info.clone());
        entry.partitions = entry.partitions.max(partition + 1);
        Ok(())
    }

    /// Delete this broker's copy of `tp`, a partition the cluster moved
    /// away (Kafka's StopReplica with deletion); the topic is forgotten
    /// here once it has no partition left.
    ///
    /// # Errors
    /// I/O errors.
    pub fn delete_replica(
        &self,
        tp: &TopicPartition,
        cleaning: Option<&dyn CleaningControl>,
    ) -> Result<()> {
        self.remove_partition_log(tp, cleaning)?;
        // One lock at a time (other paths take them in either order).
        let left = self.logs.read().keys().any(|other| other.topic == tp.topic);
        if !left {
            self.topics.write().remove(&tp.topic);
        }
        Ok(())
    }

    /// Remove `tp`'s log and its files, stopping a clean of it first (the
    /// cleaner holds duplicated descriptors and would otherwise swap into a
    /// directory being removed).
    pub(super) fn remove_partition_log(
        &self,
        tp: &TopicPartition,
        cleaning: Option<&dyn CleaningControl>,
    ) -> Result<()> {
        self.offline.write().remove(tp);
        if let (Some(control), Some(log)) = (cleaning, self.get_log(tp)) {
            let log_dir = log.read().dir().parent().map(Path::to_path_buf).unwrap_or_default();
            control.abort_cleaning_and_forget(tp, &log_dir);
        }
        let Some(shared) = self.logs.write().remove(tp) else { return Ok(()) };
        // Wait for readers and appenders to drop the log, then remove it.
        match Arc::try_unwrap(shared) {
            Ok(lock) => lock.into_inner().delete(),
            Err(shared) => {
                let log = shared.write();
                let dir = log.dir().to_path_buf();
                drop(log);
                std::fs::remove_dir_all(&dir).map_err(LogError::io(&dir))
            }
        }
    }

    /// Empty `tp`'s log and start it at `offset` (a follower behind its
    /// leader's log start, Kafka's `truncateFullyAndStartAt`), with its
    /// cleaning paused, its cleaner checkpoint lowered and the dir's
    /// recovery points written before anything is appended.
    ///
    /// # Errors
    /// `UnknownTopicOrPartition`, and the truncation's errors.
    pub fn truncate_fully_and_start_at(
        &self,
        tp: &TopicPartition,
        offset: i64,
        cleaning: Option<&dyn CleaningControl>,
    ) -> Result<()> {
        let log =
            self.get_log(tp).ok_or_else(|| LogError::UnknownTopicOrPartition(tp.to_string()))?;
        self.with_cleaning_paused(tp, cleaning, || {
            let log_dir = {
                let mut log = log.write();
                log.truncate_fully_and_start_at(offset)?;
                crate::log::dir_failure::log_dir_of(log.dir()).to_path_buf()
            };
            if let Some(c) = cleaning {
                c.maybe_truncate_checkpoint(&log_dir, tp, offset);
            }
            self.checkpoint(|log| log.recovery_point(), RECOVERY_POINT_CHECKPOINT)?;
            self.checkpoint(|log| log.log_start_offset(), LOG_START_OFFSET_CHECKPOINT)
        })
    }

    /// The high watermark `tp` had at the last checkpoint before this
    /// start (read once, at open, in a cluster).
    pub fn checkpointed_high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.hw_checkpoint.read().get(tp).copied()
    }

    /// Read every log dir's high watermark checkpoint.
    pub(super) fn read_high_watermarks(&self) {
        let mut all = BTreeMap::new();
        for dir in &self.config.log_dirs {
            all.extend(read_checkpoint_or_empty(dir, REPLICATION_OFFSET_CHECKPOINT));
        }
        *self.hw_checkpoint.write() = all;
    }

    /// Write each log dir's high watermark checkpoint: every partition whose
    /// high watermark replication sets.
    ///
    /// # Errors
    /// I/O errors.
    pub(super) fn checkpoint_high_watermarks(&self) -> Result<()> {
        let _one_writer = self.checkpoint_writes.lock();
        for dir in self.online_dirs() {
            let mut entries = BTreeMap::new();
            for (tp, log) in self.all_logs() {
                let log = log.read();
                if log.dir().parent() == Some(dir.as_path())
                    && log.replicated_high_watermark().is_some()
                {
                    entries.insert(tp, log.high_watermark());
                }
            }
            OffsetCheckpointFile::new(&dir, REPLICATION_OFFSET_CHECKPOINT).write(&entries)?;
        }
        Ok(())
    }
}

//! The periodic work of the log layer (Kafka's `LogManager` scheduled
//! tasks): retention, time-based flushes, unlinking `.deleted` files, the
//! offset checkpoints and producer expiry, on one background thread.
//!
//! The log start checkpoint is written right after a retention pass that
//! deleted segments of a `remote.storage.enable` log: such a log's loader
//! keeps the checkpointed log start (it is below the first local segment
//! once the store holds the older ones), so it must not lag behind a log
//! start that retention moved.

use std::sync::Arc;

use super::dir_failure::Failed;
use super::{dir_failure, CleaningControl, LogManager, Result, LOG_START_OFFSET_CHECKPOINT};

impl LogManager {
    /// Forget, in every log, the producers with no open transaction whose
    /// last write is older than `producer.id.expiration.ms` (Kafka's
    /// `removeExpiredProducers`): their state is what lets a retry be answered
    /// as a duplicate, and without expiry it grows with every producer ever
    /// seen. Returns how many were removed.
    pub fn remove_expired_producers(&self) -> usize {
        let now = self.clock.now_ms();
        let expiration = self.config.producer_id_expiration_ms;
        let mut removed = 0;
        for (_, log) in self.all_logs() {
            removed += log.write().remove_expired_producers(now, expiration);
        }
        removed
    }

    /// One pass of the periodic work: retention, time-based flushes, removal of
    /// `.deleted` files, checkpoints. The scheduler thread calls it; tests call it
    /// directly with a mock clock.
    ///
    /// # Errors
    /// The first I/O error; other logs are still processed.
    pub fn run_periodic_tasks(
        &self,
        retention: bool,
        checkpoints: bool,
        cleaning: Option<&dyn CleaningControl>,
    ) -> Result<()> {
        let now = self.clock.now_ms();
        let mut first_error = None;
        let control = if retention { cleaning } else { None };
        let mut remote_deleted = false;
        for (tp, log) in self.all_logs() {
            // Kafka's pauseCleaningForNonCompactedPartitions: a log whose policy
            // no longer has compact (altered while a clean ran) must not be
            // swapped into while retention deletes its segments. Compacted logs
            // are cleaned concurrently: the cleaner's swap refuses segments that
            // retention changed, and that clean is retried.
            let paused = match &control {
                Some(c) if !log.read().config().compact => {
                    c.abort_and_pause_cleaning(&tp);
                    Some(c)
                }
                _ => None,
            };
            let mut log = log.write();
            let log_dir = dir_failure::log_dir_of(log.dir()).to_path_buf();
            let result = (|| -> Result<()> {
                if retention {
                    let deleted = log.delete_old_segments()?;
                    remote_deleted |= deleted > 0 && log.config().remote_storage_enable;
                }
                log.maybe_flush_by_time(now)?;
                log.delete_expired_files(now, false)?;
                Ok(())
            })();
            drop(log);
            if let Some(c) = paused {
                c.resume_cleaning(&tp);
            }
            if let Err(e) = result {
                tracing::error!(partition = %tp, error = %e, "periodic log maintenance failed");
                if dir_failure::is_dir_failure(&e) {
                    self.dir_failures.report(&log_dir, &e.to_string());
                }
                first_error.get_or_insert(e);
            }
        }
        let written = if checkpoints {
            self.checkpoint_all()
        } else if remote_deleted {
            self.checkpoint(|log| log.log_start_offset(), LOG_START_OFFSET_CHECKPOINT)
        } else {
            Ok(())
        };
        if let Err(e) = written {
            first_error.get_or_insert(e);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Start the background thread that runs [`LogManager::run_periodic_tasks`],
    /// stopping `cleaning`'s cleans of a log while retention deletes from it,
    /// and the one that takes a failed log dir's partitions offline (and
    /// stops `cleaning` there).
    pub fn start_scheduler(self: &Arc<Self>, cleaning: Option<Arc<dyn CleaningControl>>) {
        let me = Arc::clone(self);
        let control = cleaning.clone();
        let handle = std::thread::Builder::new()
            .name("log-scheduler".into())
            .spawn(move || me.scheduler_loop(control.as_deref()))
            .expect("spawn log scheduler");
        *self.scheduler_thread.lock() = Some(handle);
        let me = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name("log-dir-failure-handler".into())
            .spawn(move || me.failure_loop(cleaning.as_deref()))
            .expect("spawn log dir failure handler");
        *self.failure_handler.lock() = Some(handle);
    }

    /// Kafka's `LogDirFailureHandler`: each failed dir's partitions go
    /// offline; with every dir offline the broker halts, as Kafka's does,
    /// so that whatever supervises it restarts it and recovery runs.
    fn failure_loop(&self, cleaning: Option<&dyn CleaningControl>) {
        while let Some(failed) = self.dir_failures.next_failed() {
            match failed {
                Failed::Dir(dir, cause) => {
                    self.handle_log_dir_failure(&dir, &cause, cleaning);
                }
                Failed::Log(tp, cause) => self.take_partition_offline(&tp, &cause),
            }
            if self.all_dirs_offline() {
                tracing::error!("every log dir has failed; halting the broker");
                std::process::exit(1);
            }
        }
    }

    fn scheduler_loop(&self, cleaning: Option<&dyn CleaningControl>) {
        let tick_ms = 1000.min(self.config.retention_check_interval_ms.max(1));
        let start = self.clock.now_ms();
        let (mut last_retention, mut last_checkpoint, mut last_expiry) = (start, start, start);
        let checkpoint_every = self
            .config
            .flush_offset_checkpoint_interval_ms
            .min(self.config.flush_start_offset_checkpoint_interval_ms);
        loop {
            {
                let mut state = self.scheduler.0.lock();
                let tick = std::time::Duration::from_millis(tick_ms as u64);
                self.scheduler.1.wait_while_for(&mut state, |s| !s.stop, tick);
                if state.stop {
                    return;
                }
            }
            let now = self.clock.now_ms();
            let retention = now - last_retention >= self.config.retention_check_interval_ms;
            let checkpoints = now - last_checkpoint >= checkpoint_every;
            if retention {
                last_retention = now;
            }
            if checkpoints {
                last_checkpoint = now;
            }
            if let Err(e) = self.run_periodic_tasks(retention, checkpoints, cleaning) {
                tracing::error!(error = %e, "log scheduler task failed");
            }
            if now - last_expiry >= self.config.producer_id_expiration_check_interval_ms {
                last_expiry = now;
                let removed = self.remove_expired_producers();
                if removed > 0 {
                    tracing::debug!(removed, "expired producer state removed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::clock::MockClock;
    use crate::log::checkpoint::{OffsetCheckpointFile, LOG_START_OFFSET_CHECKPOINT};
    use crate::log::compression::Compression;
    use crate::log::record_batch::BatchBuilder;
    use crate::log::{LogManager, LogManagerConfig, TopicPartition};

    #[test]
    fn retention_of_a_remote_log_writes_the_log_start_checkpoint_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let now = 1_000_000_000;
        let mut config = LogManagerConfig::new(dir.path());
        config.remote_log_storage_system_enable = true;
        let logs = LogManager::open(config, MockClock::new(now)).unwrap();
        let overrides: BTreeMap<String, String> =
            [("remote.storage.enable", "true"), ("retention.ms", "1000")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        logs.create_topic("t", 1, overrides).unwrap();
        let tp = TopicPartition::new("t", 0);
        let log = logs.get_log(&tp).unwrap();
        for i in 0..3 {
            let mut b = BatchBuilder::new(Compression::None, now - 5000);
            b.append(now - 5000, Some(format!("k{i}").as_bytes()), Some(b"v"));
            let mut log = log.write();
            log.append_as_leader(&mut b.build()).unwrap();
            log.roll_if_not_empty().unwrap();
        }
        log.write().set_highest_offset_in_remote_storage(1);
        // Retention only, no periodic checkpoint: the file is written anyway.
        logs.run_periodic_tasks(true, false, None).unwrap();
        assert_eq!(log.read().log_start_offset(), 2);
        let file = OffsetCheckpointFile::new(dir.path(), LOG_START_OFFSET_CHECKPOINT);
        assert_eq!(file.read().unwrap().get(&tp), Some(&2));
    }
}

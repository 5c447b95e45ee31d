//! A failed log dir's partitions going offline (Kafka's log dir failure
//! handling, `dir_failure`): the dirs and partitions the manager no longer
//! serves, and taking them out of service.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{CleaningControl, LogManager};
use crate::log::dir_failure;
use crate::log::topic_partition::TopicPartition;

impl LogManager {
    /// The log dirs that failed, each with its first error.
    pub fn offline_dirs(&self) -> BTreeMap<PathBuf, String> {
        self.dir_failures.offline_dirs()
    }

    /// Report that `dir` failed (an I/O error met outside a log's own
    /// writes: the cleaner's files, a checkpoint).
    pub fn report_log_dir_failure(&self, dir: &Path, cause: &str) {
        self.dir_failures.report(dir, cause);
    }

    /// Take the partitions of the failed `dir` offline (Kafka's
    /// `handleLogDirFailure`): out of the logs served, into the offline
    /// ones, which answer KAFKA_STORAGE_ERROR; `cleaning` stops there.
    /// Returns the partitions taken offline.
    pub fn handle_log_dir_failure(
        &self,
        dir: &Path,
        cause: &str,
        cleaning: Option<&dyn CleaningControl>,
    ) -> Vec<TopicPartition> {
        let in_dir: Vec<TopicPartition> = self
            .all_logs()
            .into_iter()
            .filter(|(_, log)| dir_failure::log_dir_of(log.read().dir()) == dir)
            .map(|(tp, _)| tp)
            .collect();
        if let Some(c) = cleaning {
            c.handle_log_dir_failure(dir, cause, &in_dir);
        }
        let reason = format!("log dir {} is offline: {cause}", dir.display());
        let mut logs = self.logs.write();
        let mut offline = self.offline.write();
        for tp in &in_dir {
            logs.remove(tp);
            offline.insert(tp.clone(), reason.clone());
        }
        drop((logs, offline));
        tracing::error!(dir = %dir.display(), partitions = in_dir.len(), "log dir offline: its partitions answer KAFKA_STORAGE_ERROR until a restart");
        in_dir
    }

    /// Take `tp` alone offline (its memory may be ahead of its files; its
    /// dir is sound): it answers KAFKA_STORAGE_ERROR until a restart
    /// recovers it.
    pub fn take_partition_offline(&self, tp: &TopicPartition, cause: &str) {
        let mut logs = self.logs.write();
        let mut offline = self.offline.write();
        if logs.remove(tp).is_some() {
            offline.insert(tp.clone(), cause.to_string());
        }
    }

    /// Whether every log dir is offline (Kafka then halts the broker).
    pub fn all_dirs_offline(&self) -> bool {
        self.config.log_dirs.iter().all(|d| self.dir_failures.is_offline(d))
    }
}

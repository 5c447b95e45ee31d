//! `LogDirFailureChannel` (Kafka's name): where a log reports that its log
//! dir failed, and where the `LogManager` learns which dirs are offline.
//!
//! Kafka's rule, kept here: an I/O error while writing a partition (an
//! append, a roll, a flush, retention, the cleaner's files) means the disk
//! under its log dir can no longer be trusted, so the whole dir goes offline
//! until the broker restarts and recovers it: its partitions answer
//! KAFKA_STORAGE_ERROR, the other dirs keep serving.
//!
//! Invariants:
//! * A dir, once offline, stays offline for the life of the process; the
//!   first cause reported is the one kept.
//! * Running out of file descriptors (EMFILE, ENFILE) is not a disk failure:
//!   the operation that hit it fails with a clear error and changes nothing
//!   (see `Log::roll`), and the dir keeps serving once descriptors free up.
//!   Where it strikes after records are written (a transaction's first
//!   `.txnindex` entry), only that partition goes offline
//!   ([`LogDirFailureChannel::report_log`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::{Condvar, Mutex};

use super::error::LogError;
use super::topic_partition::TopicPartition;

/// The fail point that makes every segment write under a log dir fail with
/// EIO (scope: the log dir's path), as a dying disk does: tests take a dir
/// offline with it.
pub const WRITE_FAILPOINT: &str = "log-dir-write-error";

/// Whether `e` is the process or the system running out of file
/// descriptors, which a later retry may not meet.
pub fn is_out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Whether `e` says the disk under a log dir failed (Kafka takes the dir
/// offline on any `IOException`; descriptors running out is not one here).
pub fn is_dir_failure(e: &LogError) -> bool {
    matches!(e, LogError::Io { source, .. } if !is_out_of_descriptors(source))
}

/// The log dir of a partition directory (`<log.dir>/<topic>-<partition>`).
pub fn log_dir_of(partition_dir: &Path) -> &Path {
    partition_dir.parent().unwrap_or(partition_dir)
}

#[derive(Debug, Default)]
struct Offline {
    /// Offline dirs with the first cause reported.
    dirs: BTreeMap<PathBuf, String>,
    /// Failures reported and not yet taken by [`LogDirFailureChannel::next_failed`].
    unhandled: Vec<Failed>,
    stop: bool,
}

/// What failed, for the `LogManager` to take offline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failed {
    /// A log dir, with its first cause.
    Dir(PathBuf, String),
    /// One partition whose memory may be ahead of its files.
    Log(TopicPartition, String),
}

/// Shared by a `LogManager` and every log it opened.
#[derive(Debug, Default)]
pub struct LogDirFailureChannel {
    offline: Mutex<Offline>,
    changed: Condvar,
}

impl LogDirFailureChannel {
    /// Report that `dir` failed with `cause`; true when it was online until now.
    pub fn report(&self, dir: &Path, cause: &str) -> bool {
        let mut offline = self.offline.lock();
        if offline.dirs.contains_key(dir) {
            return false;
        }
        tracing::error!(dir = %dir.display(), "log dir failed, taking it offline: {cause}");
        offline.dirs.insert(dir.to_path_buf(), cause.to_string());
        offline.unhandled.push(Failed::Dir(dir.to_path_buf(), cause.to_string()));
        self.changed.notify_all();
        true
    }

    /// Report that partition `tp` must go offline (its dir stays online).
    pub fn report_log(&self, tp: &TopicPartition, cause: &str) {
        tracing::error!(partition = %tp, "taking the partition offline: {cause}");
        self.offline.lock().unhandled.push(Failed::Log(tp.clone(), cause.to_string()));
        self.changed.notify_all();
    }

    pub fn is_offline(&self, dir: &Path) -> bool {
        self.offline.lock().dirs.contains_key(dir)
    }

    /// The offline dirs, each with the first cause reported.
    pub fn offline_dirs(&self) -> BTreeMap<PathBuf, String> {
        self.offline.lock().dirs.clone()
    }

    /// Wait for a failure reported since the last call (`None` once stopped).
    pub(super) fn next_failed(&self) -> Option<Failed> {
        let mut offline = self.offline.lock();
        self.changed.wait_while(&mut offline, |o| o.unhandled.is_empty() && !o.stop);
        if offline.stop {
            return None;
        }
        Some(offline.unhandled.remove(0))
    }

    /// Wake and end the waiter of [`Self::next_failed`].
    pub(super) fn stop(&self) {
        self.offline.lock().stop = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dir_is_reported_once_and_keeps_its_first_cause() {
        let channel = LogDirFailureChannel::default();
        assert!(channel.report(Path::new("/d1"), "EIO"));
        assert!(!channel.report(Path::new("/d1"), "later"));
        assert!(channel.is_offline(Path::new("/d1")));
        assert!(!channel.is_offline(Path::new("/d2")));
        assert_eq!(channel.next_failed(), Some(Failed::Dir(PathBuf::from("/d1"), "EIO".into())));
        channel.stop();
        assert_eq!(channel.next_failed(), None);
        assert_eq!(channel.offline_dirs().len(), 1);
    }

    #[test]
    fn running_out_of_descriptors_is_not_a_disk_failure() {
        let io = |code| LogError::Io {
            path: "/d/t-0/0.log".into(),
            source: std::io::Error::from_raw_os_error(code),
        };
        assert!(!is_dir_failure(&io(libc::EMFILE)));
        assert!(!is_dir_failure(&io(libc::ENFILE)));
        assert!(is_dir_failure(&io(libc::EIO)));
        assert!(is_dir_failure(&io(libc::ENOSPC)));
        assert!(!is_dir_failure(&LogError::Deleted("t-0".into())));
    }
}

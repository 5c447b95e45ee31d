//! Flushing a `Log`: fsyncs that move the recovery point, done either under
//! the partition's lock ([`Log::flush`]) or after it is released
//! ([`FlushJob`], what Produce uses).
//!
//! Invariants:
//! * The recovery point moves only past bytes (and index entries) already
//!   fsynced: a deferred flush names the offset it may move to, and the log
//!   moves there only once the job has run ([`Log::complete_flush`]).
//! * A deferred flush covers every segment from the recovery point at the
//!   time it was taken, so jobs may run concurrently and complete in any
//!   order; each only ever raises the recovery point.
//! * Segments the cleaner swaps in meanwhile were fsynced by the cleaner
//!   before the swap, so a job that synced the files they replaced still
//!   leaves everything below its offset durable.
//! * A job taken before a truncation moves nothing: the offsets it names
//!   may hold other records by the time it completes.
//! * Linux reports a failed writeback to one fsync of a file only. So the
//!   fsyncs of a log (jobs and in-place flushes) run one at a time under
//!   its `flush_failure` lock, and the first failure is kept there: every
//!   later flush fails with it, and a log that failed moves its recovery
//!   point no more.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Log, LogError, Result};
use crate::log::segment;

/// How an append treats the fsyncs its flush policy or a roll calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FlushMode {
    /// Under the partition's lock, before the append returns.
    Inline,
    /// Left to the caller as a [`FlushJob`], run after the lock is released.
    Deferred,
}

/// Files to fsync with no lock held, and the offset the recovery point may
/// then move to.
#[derive(Debug)]
pub struct FlushJob {
    partition_dir: PathBuf,
    upto: i64,
    files: Vec<(PathBuf, Arc<File>)>,
    /// The log's fsync lock and first failure (module doc).
    failure: Arc<Mutex<Option<String>>>,
    /// The log's truncation count when the job was taken: a job from before
    /// a truncation names offsets whose records may have been replaced.
    truncations: u64,
}

impl FlushJob {
    /// The offset below which everything is durable once the job has run.
    pub fn upto(&self) -> i64 {
        self.upto
    }

    /// Fsync every file; returns [`FlushJob::upto`] for
    /// [`Log::complete_flush`].
    ///
    /// # Errors
    /// The first fsync that failed.
    pub fn run(&self) -> Result<i64> {
        synced(&self.failure, &self.partition_dir, || {
            for (path, file) in &self.files {
                file.sync_data().map_err(LogError::io(path))?;
            }
            Ok(self.upto)
        })
    }
}

/// Run `fsyncs` under the log's fsync lock: refused once any earlier
/// flush of the log failed, and its own failure kept for the later ones.
pub(super) fn synced<T>(
    failure: &Mutex<Option<String>>,
    partition_dir: &std::path::Path,
    fsyncs: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let mut failed = failure.lock();
    if let Some(cause) = failed.as_ref() {
        let partition = partition_dir.file_name().unwrap_or_default().to_string_lossy();
        return Err(LogError::Offline { partition: partition.into_owned(), reason: cause.clone() });
    }
    segment::slow_fsync_point(partition_dir);
    let outcome = fsyncs();
    if let Err(e) = &outcome {
        *failed = Some(e.to_string());
    }
    outcome
}

impl Log {
    /// Fsync everything up to the log end and advance the recovery point.
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&mut self) -> Result<()> {
        self.check_writable()?;
        let flushed = self.flush_once();
        self.note_write(flushed)
    }

    fn flush_once(&mut self) -> Result<()> {
        let rp = self.recovery_point;
        let (failure, dir) = (Arc::clone(&self.flush_failure), self.dir.clone());
        synced(&failure, &dir, || {
            for (path, file) in self.pending_closed.drain(..) {
                file.sync_data().map_err(LogError::io(path))?;
            }
            for seg in self
                .segments
                .values_mut()
                .filter(|s| s.next_offset() > rp || s.size() > 0 && s.base_offset() >= rp)
            {
                seg.flush()?;
            }
            Ok(())
        })?;
        self.recovery_point = self.next_offset;
        self.pending_flush = None;
        self.unflushed_messages = 0;
        self.last_flush_ms = self.clock.now_ms();
        Ok(())
    }

    /// Time-based flush (`flush.ms`), called by the scheduler; it also runs
    /// a deferred flush whose job no caller took (an append that failed
    /// after its roll).
    ///
    /// # Errors
    /// I/O errors.
    pub fn maybe_flush_by_time(&mut self, now: i64) -> Result<bool> {
        let due = self.unflushed_messages > 0
            && now.saturating_sub(self.last_flush_ms) >= self.config.flush_ms;
        if due || self.pending_flush.is_some() {
            self.flush()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Record that a deferred append's fsyncs must reach `upto`.
    pub(super) fn defer_flush(&mut self, upto: i64) {
        self.pending_flush = Some(self.pending_flush.map_or(upto, |p| p.max(upto)));
    }

    /// The fsyncs deferred by the last appends, as a job to run without the
    /// lock (`None`: nothing to do).
    ///
    /// # Errors
    /// I/O errors writing pending index entries out.
    pub(super) fn take_flush_job(&mut self) -> Result<Option<FlushJob>> {
        let Some(upto) = self.pending_flush.take() else { return Ok(None) };
        let upto = upto.min(self.next_offset);
        let rp = self.recovery_point;
        let mut files = std::mem::take(&mut self.pending_closed);
        for seg in self.segments.values_mut().filter(|s| {
            s.base_offset() < upto
                && (s.next_offset() > rp || s.size() > 0 && s.base_offset() >= rp)
        }) {
            files.extend(seg.sync_handles()?);
        }
        if upto == self.next_offset {
            // Whatever flush.messages or flush.ms counted is covered.
            self.unflushed_messages = 0;
            self.last_flush_ms = self.clock.now_ms();
        }
        let failure = Arc::clone(&self.flush_failure);
        let truncations = self.truncations;
        Ok(Some(FlushJob { partition_dir: self.dir.clone(), upto, files, failure, truncations }))
    }

    /// Take the outcome of a [`FlushJob`] of this log: the recovery point
    /// moves to its offset, or the disk failed (`dir_failure`).
    ///
    /// # Errors
    /// The job's I/O error.
    pub fn complete_flush(&mut self, outcome: Result<i64>) -> Result<()> {
        self.complete_flush_of(outcome, self.truncations)
    }

    /// [`Log::complete_flush`] for `job`, which knows whether the log was
    /// truncated since it was taken: then its offsets no longer say what
    /// is durable, and the recovery point stays.
    ///
    /// # Errors
    /// The job's I/O error.
    pub fn complete_flush_job(&mut self, job: &FlushJob, outcome: Result<i64>) -> Result<()> {
        self.complete_flush_of(outcome, job.truncations)
    }

    fn complete_flush_of(&mut self, outcome: Result<i64>, truncations: u64) -> Result<()> {
        let upto = self.note_write(outcome)?;
        // Another flush of the log may have failed since this one's fsyncs.
        self.check_writable()?;
        if truncations == self.truncations {
            self.recovery_point = self.recovery_point.max(upto.min(self.next_offset));
        }
        Ok(())
    }
}

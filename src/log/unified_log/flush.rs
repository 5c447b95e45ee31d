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

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

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
        segment::slow_fsync_point(&self.partition_dir);
        for (path, file) in &self.files {
            file.sync_data().map_err(LogError::io(path))?;
        }
        Ok(self.upto)
    }
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
        for seg in self
            .segments
            .values_mut()
            .filter(|s| s.next_offset() > rp || s.size() > 0 && s.base_offset() >= rp)
        {
            seg.flush()?;
        }
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
        let mut files = Vec::new();
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
        Ok(Some(FlushJob { partition_dir: self.dir.clone(), upto, files }))
    }

    /// Take the outcome of a [`FlushJob`] of this log: the recovery point
    /// moves to its offset, or the disk failed (`dir_failure`).
    ///
    /// # Errors
    /// The job's I/O error.
    pub fn complete_flush(&mut self, outcome: Result<i64>) -> Result<()> {
        let upto = self.note_write(outcome)?;
        self.recovery_point = self.recovery_point.max(upto.min(self.next_offset));
        Ok(())
    }
}

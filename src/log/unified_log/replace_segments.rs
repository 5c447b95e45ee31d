//! The cleaner's swap (Kafka's `LocalLog.replaceSegments`): how cleaned
//! segments replace the segments they were cleaned from, crash-safely.
//!
//! Invariants:
//! * Only closed segments are replaced, and only by segments covering offsets
//!   inside the replaced range, so the log's offsets, its active segment and
//!   `log_start_offset <= recovery_point <= next_offset` are untouched.
//! * Nothing is renamed unless the segments to replace are exactly as the
//!   cleaner read them (same base offsets and sizes); otherwise the swap is a
//!   `SwapConflict` and the directory is as before.
//! * At every instant the directory is in a state the loader settles into
//!   either the old segments or the new ones, never a mix and never a loss:
//!   each step of [`Log::replace_segments`] says which.
//!
//! Nothing on the append and read paths calls into this module.

use std::path::Path;

use super::Log;
use crate::log::error::{LogError, Result};
use crate::log::segment::{self, LogSegment, SegmentConfig};

/// Points of the swap protocol where a test may stop it, leaving the files as
/// a crash right there would. The numbers are the steps of
/// [`Log::replace_segments`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SwapStep {
    /// After step 3: every new segment is `.swap` and the directory is fsynced.
    SwapRenamed,
    /// During step 4: the first replaced segment is `.deleted`, the others are not.
    FirstDeletedRenamed,
    /// After step 4: every replaced segment is `.deleted`.
    DeletedRenamed,
    /// After step 5, before the directory fsync of step 6.
    SwapStripped,
}

/// How [`Log::replace_segments`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapOutcome {
    Replaced,
    /// Stopped on request at this step; the in-memory log no longer matches
    /// the directory and must be dropped and reopened (tests only).
    StoppedAt(SwapStep),
}

/// A segment the cleaner read, as it was when read: the swap refuses to
/// replace a segment that has changed since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSnapshot {
    pub base_offset: i64,
    pub size: u64,
}

impl Log {
    /// The segment settings the cleaner's `.cleaned` segments are created with.
    pub fn segment_config_for_cleaning(&self) -> SegmentConfig {
        Self::segment_config(self.config())
    }

    /// Replace the closed segments `old` with `new_segments` (written by the
    /// cleaner as `.cleaned`, fsynced, covering the same offsets), crash-safely.
    /// Kafka's `LocalLog.replaceSegments`. Each step says what `Log::open`
    /// (the loader's `complete_interrupted_swaps`) does if the process dies
    /// right there:
    ///
    /// 1. (the cleaner, before calling) Write `<base>.log.cleaned` and its
    ///    indexes, fsync them. Crash: `.cleaned` files are deleted; the old
    ///    segments are intact and the next clean redoes the work.
    /// 2. Rename each new segment `.cleaned` → `.swap`, in descending offset
    ///    order, its indexes first and its log file last, so a `.log.swap`
    ///    always has its `.index`, `.timeindex` and `.txnindex` beside it.
    ///    Crash midway: a `.log.cleaned` still exists, so every `.swap` at or
    ///    above the smallest `.cleaned` offset (all the renamed ones, thanks
    ///    to the descending order), and an index `.swap` beside a
    ///    `.log.cleaned`, is deleted with it; the old segments are intact.
    /// 3. Fsync the directory, so no old segment can lose its name below
    ///    while a `.swap` rename is still volatile. Crash: as after step 2 —
    ///    every `.swap` is complete; recovery deletes the old segments whose
    ///    offsets a `.swap` covers and strips the suffix (the clean commits).
    /// 4. Rename each old segment to `.deleted`, ascending, log file first.
    ///    Crash midway or after: `.deleted` files are deleted; the `.swap`
    ///    commits as above, deleting whichever old segments still have their
    ///    name, and the indexes an old segment at the swap's own base left
    ///    under theirs (none may pass for the new segment's).
    /// 5. Strip `.swap` from each new segment, log file first. Crash midway: a
    ///    `.log.swap` still commits; an index `.swap` beside its stripped
    ///    `.log` is stripped too (a `.txnindex` cannot be rebuilt from its
    ///    segment alone).
    /// 6. Fsync the directory. Crash before it completes: the directory shows
    ///    one of the states above, each of which recovers.
    /// 7. Later, after `file.delete.delay.ms`, unlink the `.deleted` files
    ///    ([`Log::delete_expired_files`]); readers holding the old files keep
    ///    reading them until then. Crash: recovery deletes them.
    ///
    /// Recovery decides which old segments a `.swap` replaces from the offsets
    /// the `.swap` holds (`[base, next offset)`), so the cleaner keeps at least
    /// an empty batch from the last segment of every group (its offset fence).
    ///
    /// `stop_at` (tests) returns right after that step, files left as they are.
    ///
    /// # Errors
    /// `SwapConflict` before anything is renamed when `old` no longer matches
    /// the log (a segment was deleted or changed, or is the active one) or a
    /// new segment is not a `.cleaned` segment inside the replaced range. I/O
    /// errors at any step; the files are then in one of the states above.
    pub fn replace_segments(
        &mut self,
        mut new_segments: Vec<LogSegment>,
        old: &[SegmentSnapshot],
        stop_at: Option<SwapStep>,
    ) -> Result<SwapOutcome> {
        self.check_replaceable(&new_segments, old)?;
        let dir_sync = |dir: &Path| {
            std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(LogError::io(dir))
        };

        // Step 2: `.cleaned` → `.swap`, highest base first.
        new_segments.sort_by_key(|s| std::cmp::Reverse(s.base_offset()));
        for seg in &mut new_segments {
            seg.change_file_suffix(segment::SWAP_SUFFIX)?;
        }
        // Step 3: make the `.swap` names durable before any old name goes.
        dir_sync(self.dir())?;
        if stop_at == Some(SwapStep::SwapRenamed) {
            return Ok(SwapOutcome::StoppedAt(SwapStep::SwapRenamed));
        }

        // Step 4: old segments → `.deleted`, lowest first, out of the readable set.
        let due = self.file_delete_due_ms();
        for (i, snap) in old.iter().enumerate() {
            self.retire_segment(snap.base_offset, due)?;
            // As Kafka, the snapshot of a replaced segment goes unless a new
            // segment starts at its offset (the state there is unchanged).
            if !new_segments.iter().any(|s| s.base_offset() == snap.base_offset) {
                crate::log::producer_snapshot::delete(self.dir(), snap.base_offset)?;
            }
            if i == 0 && stop_at == Some(SwapStep::FirstDeletedRenamed) {
                return Ok(SwapOutcome::StoppedAt(SwapStep::FirstDeletedRenamed));
            }
        }
        if stop_at == Some(SwapStep::DeletedRenamed) {
            return Ok(SwapOutcome::StoppedAt(SwapStep::DeletedRenamed));
        }

        // Step 5: strip `.swap`; the new segments become the readable ones.
        new_segments.reverse();
        for mut seg in new_segments {
            seg.change_file_suffix("")?;
            self.install_segment(seg);
        }
        if stop_at == Some(SwapStep::SwapStripped) {
            return Ok(SwapOutcome::StoppedAt(SwapStep::SwapStripped));
        }

        // Step 6: make the final names durable. Step 7 is `delete_expired_files`.
        dir_sync(self.dir())?;
        Ok(SwapOutcome::Replaced)
    }

    /// The swap's preconditions, checked before anything is renamed: every
    /// segment of `old` is present, closed and unchanged, and every new
    /// segment is `.cleaned` and fits between the first replaced segment and
    /// the segment after the last one.
    fn check_replaceable(
        &self,
        new_segments: &[LogSegment],
        old: &[SegmentSnapshot],
    ) -> Result<()> {
        let conflict = |reason: String| LogError::SwapConflict {
            partition: self.topic_partition().to_string(),
            reason,
        };
        let (Some(first), Some(last)) = (old.first(), old.last()) else {
            return Err(conflict("no segments to replace".into()));
        };
        let segments = self.segment_map();
        let active_base = self.active_segment().base_offset();
        for snap in old {
            match segments.get(&snap.base_offset) {
                None => return Err(conflict(format!("segment {} is gone", snap.base_offset))),
                Some(_) if snap.base_offset == active_base => {
                    return Err(conflict(format!(
                        "segment {} is the active segment",
                        snap.base_offset
                    )))
                }
                Some(seg) if seg.size() != snap.size => {
                    return Err(conflict(format!(
                        "segment {} changed size from {} to {}",
                        snap.base_offset,
                        snap.size,
                        seg.size()
                    )))
                }
                Some(_) => {}
            }
        }
        let end = segments.range(last.base_offset + 1..).next().map_or(i64::MAX, |(b, _)| *b);
        for seg in new_segments {
            let ok = seg.log_path().to_string_lossy().ends_with(segment::CLEANED_SUFFIX)
                && seg.base_offset() >= first.base_offset
                && seg.next_offset() <= end;
            if !ok {
                return Err(conflict(format!(
                    "{} does not fit in [{}, {end})",
                    seg.log_path().display(),
                    first.base_offset
                )));
            }
        }
        Ok(())
    }
}

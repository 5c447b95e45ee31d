//! Cutting a log back (Kafka's `UnifiedLog.truncateTo` and
//! `truncateFullyAndStartAt`): what a follower does where its log diverged
//! from its leader's (KIP-101, KIP-279, Fetch's diverging epoch), and what
//! a replica whose whole log is below its leader's log start does.
//!
//! Steps of [`Log::truncate_to`], and what a crash after each leaves (the
//! loader settles every case, `log_loader`):
//! 1. The segments wholly past the offset leave the readable set, renamed
//!    `.deleted`, and their producer snapshots go. Crash: the next load
//!    deletes the renamed files; the log ends with the last kept segment.
//! 2. The segment holding the offset is cut before the first batch ending
//!    at or past it (its file, `.index`, `.timeindex`, `.txnindex`) and
//!    fsynced, so no cut record comes back after a crash. Without an
//!    unclean election that batch starts at the offset: epochs change only
//!    at batch starts, and every replica holds the leader's offsets.
//!    Crash: the load finds a whole log ending there.
//! 3. The leader epoch entries at or past the new end go (their checkpoint
//!    fsynced), and the producer state is rebuilt from the newest snapshot
//!    below it. Crash: the load fits the epochs to the log's end and
//!    rebuilds the producer state itself.
//! 4. The log end is the offset (or the start of the batch it fell in);
//!    the recovery point and the log start are lowered to it if above.
//!
//! Library tests stop a truncation after step 1, 2 or 3 with the fail
//! point [`TRUNCATE_CRASH_POINT`] (argument: the step) and reopen the
//! files, as a crash there would leave them.
//!
//! The caller (`LogManager::truncate_to`) pauses the cleaner around it,
//! lowers the cleaner's checkpoint and writes the dir's recovery-point
//! checkpoint before anything is appended past the cut, so a crash never
//! finds new, unflushed records below a recovery point on disk.

use super::{Log, LogError, Result};
use crate::failpoint;
use crate::log::log_loader;
use crate::log::producer_snapshot;
use crate::log::segment::LogSegment;

/// Stops a truncation after a step with an error, as if the broker died
/// there (library tests); its argument is `<partition dir>:<step>`, the
/// step `1` to `3`.
pub const TRUNCATE_CRASH_POINT: &str = "log-truncate-crash";

fn crash_point(dir: &std::path::Path, step: &str) -> Result<()> {
    if failpoint::fires_in(TRUNCATE_CRASH_POINT, &format!("{}:{step}", dir.display())) {
        let injected = std::io::Error::other(format!("{TRUNCATE_CRASH_POINT} after step {step}"));
        return Err(LogError::io("truncation")(injected));
    }
    Ok(())
}

impl Log {
    /// Remove every record at or past `offset`; returns whether anything
    /// was removed (an offset at or past the log end changes nothing).
    /// Below the first local segment the log is emptied and starts there
    /// ([`Log::truncate_fully_and_start_at`]).
    ///
    /// # Errors
    /// `OffsetOutOfRange` for a negative offset; I/O errors (the log then
    /// takes no more writes, `dir_failure`).
    pub fn truncate_to(&mut self, offset: i64) -> Result<bool> {
        self.check_cut(offset)?;
        if offset >= self.next_offset {
            return Ok(false);
        }
        let first_base = *self.segments.keys().next().expect("a log always has a segment");
        if offset < first_base {
            self.cut(offset, Self::truncate_fully_once)?;
        } else {
            self.cut(offset, Self::truncate_once)?;
        }
        Ok(true)
    }

    /// A cut to `offset` may start: the log takes writes, the offset is not negative.
    fn check_cut(&self, offset: i64) -> Result<()> {
        self.check_writable()?;
        if offset < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end: self.next_offset,
            });
        }
        Ok(())
    }

    /// Run one of the cuts; a failure halfway through its steps stops the
    /// log taking writes, as memory and disk may then disagree.
    fn cut(&mut self, offset: i64, steps: fn(&mut Self, i64) -> Result<()>) -> Result<()> {
        let outcome = steps(self, offset);
        if let Err(e) = &outcome {
            self.fail(e);
        }
        outcome
    }

    fn truncate_once(&mut self, offset: i64) -> Result<()> {
        tracing::info!(partition = %self.tp, offset, log_end = self.next_offset, "truncating the log");
        self.truncations += 1;
        self.pending_flush = None;
        // Step 1.
        let due = self.file_delete_due_ms();
        let doomed: Vec<i64> = self.segments.range(offset + 1..).map(|(&b, _)| b).collect();
        for base in doomed {
            self.retire_segment(base, due)?;
            producer_snapshot::delete(&self.dir, base)?;
        }
        crash_point(&self.dir, "1")?;
        // Step 2: the last kept segment becomes the active one.
        let seg = self.segments.values_mut().next_back().expect("the first segment is kept");
        let cut_at = seg.truncate_to(offset)?;
        seg.flush()?;
        let end = cut_at.map_or(offset, |base| base.min(offset));
        crash_point(&self.dir, "2")?;
        self.after_cut(end)
    }

    /// Steps 3 and 4 once the segments end at `end`.
    fn after_cut(&mut self, end: i64) -> Result<()> {
        self.next_offset = end;
        self.recovery_point = self.recovery_point.min(end);
        self.replicated_hw = self.replicated_hw.map(|hw| hw.min(end));
        self.log_start_offset = self.log_start_offset.min(end);
        self.leader_epochs.truncate_from_end(end)?;
        self.producers = log_loader::reload_producer_state(
            &self.dir,
            &self.tp,
            &mut self.segments,
            self.log_start_offset,
            end,
            self.clock.now_ms(),
        )?;
        crash_point(&self.dir, "3")?;
        self.unflushed_messages = 0;
        // A follower's epochs are its leader's; the replica layer sets
        // the epoch it leads at again before it appends as leader.
        self.leader_epoch = self.leader_epochs.latest_epoch().unwrap_or(0);
        Ok(())
    }

    /// Empty the log and start it at `offset` (Kafka's
    /// `truncateFullyAndStartAt`): a replica whose whole log is below its
    /// leader's log start, or that diverged below its first segment.
    ///
    /// # Errors
    /// `OffsetOutOfRange` for a negative offset; I/O errors (the log then
    /// takes no more writes).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        self.check_cut(offset)?;
        self.cut(offset, Self::truncate_fully_once)
    }

    fn truncate_fully_once(&mut self, offset: i64) -> Result<()> {
        tracing::info!(partition = %self.tp, offset, log_end = self.next_offset, "emptying the log to start at a new offset");
        self.truncations += 1;
        self.pending_flush = None;
        self.pending_closed.clear();
        let now = self.clock.now_ms();
        // The new segment first: failing to make it changes nothing.
        let new =
            LogSegment::create(&self.dir, offset, Self::segment_config(&self.config), "", now)?;
        let due = self.file_delete_due_ms();
        let old: Vec<i64> = self.segments.keys().copied().collect();
        for base in old {
            if base == offset {
                // `create` already truncated its files: this is the new one.
                self.segments.remove(&base);
                continue;
            }
            self.retire_segment(base, due)?;
        }
        for (snapshot, _) in producer_snapshot::list(&self.dir)? {
            producer_snapshot::delete(&self.dir, snapshot)?;
        }
        self.segments.insert(offset, new);
        self.next_offset = offset;
        self.log_start_offset = offset;
        self.recovery_point = offset;
        self.replicated_hw = self.replicated_hw.map(|_| offset);
        self.leader_epochs.truncate_from_end(0)?;
        self.producers = crate::log::producer_state::ProducerStateManager::new();
        self.unflushed_messages = 0;
        self.leader_epoch = 0;
        Ok(())
    }
}

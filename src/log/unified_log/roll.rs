//! Rolling a `Log`'s active segment (Kafka's `maybeRoll` and `roll`): when
//! an append would outgrow it or age it past `segment.ms`, a new segment
//! starts at the next offset, its files opened before the old one is
//! touched, the closed one fsynced in place or by the caller's flush job.

use std::sync::Arc;

use super::flush::{self, FlushMode};
use super::{Log, LogError, Result};
use crate::log::checkpoint;
use crate::log::producer_snapshot;
use crate::log::segment::{LogSegment, RollParams};

impl Log {
    pub(super) fn maybe_roll(
        &mut self,
        params: RollParams,
        next_base: i64,
        flush: FlushMode,
    ) -> Result<()> {
        let jitter = self.roll_jitter_ms();
        let config = Arc::clone(&self.config);
        let active = self.active_segment();
        if active.should_roll(&params, config.segment_bytes, self.roll_ms(), jitter) {
            tracing::debug!(partition = %self.tp, size = active.size(), base_offset = active.base_offset(), "rolling segment");
            // The append's own outcome reports a failure (`append_checked`).
            self.roll_once(next_base, flush)?;
        }
        Ok(())
    }

    /// Active-segment age limit. For compacted topics the cleaner's max lag also
    /// bounds it, since the active segment is never cleaned.
    pub fn roll_ms(&self) -> i64 {
        if self.config.compact {
            self.config.segment_ms.min(self.config.max_compaction_lag_ms)
        } else {
            self.config.segment_ms
        }
    }

    pub(super) fn roll_jitter_ms(&self) -> i64 {
        if self.config.segment_jitter_ms <= 0 {
            return 0;
        }
        // Kafka draws the jitter at random per segment; a hash of the partition and
        // segment spreads rolls the same way and keeps them reproducible.
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.tp, self.active_segment().base_offset()).hash(&mut h);
        (h.finish() % self.config.segment_jitter_ms as u64) as i64
    }

    /// Start a new active segment at `base` (the next offset), closing the current one.
    ///
    /// # Errors
    /// I/O errors; one opening the new segment's files (descriptors run
    /// out) leaves the log as it was.
    pub fn roll(&mut self, base: i64) -> Result<()> {
        self.check_writable()?;
        let rolled = self.roll_once(base, FlushMode::Inline);
        self.note_write(rolled)
    }

    pub(super) fn roll_once(&mut self, base: i64, flush: FlushMode) -> Result<()> {
        let now = self.clock.now_ms();
        let seg_config = Self::segment_config(&self.config);
        let active_base = self.active_segment().base_offset();
        if active_base == base {
            // The active segment is empty at this offset already (Kafka replaces it).
            if self.active_segment().size() == 0 {
                return Ok(());
            }
            return Err(LogError::Corrupt {
                path: self.dir.clone(),
                position: 0,
                reason: format!("cannot roll to {base}: segment exists"),
            });
        }
        // The new files first: failing to open them changes nothing.
        let new = LogSegment::create(&self.dir, base, seg_config, "", now)?;
        if self.flush_before_ack {
            // Acknowledged appends will live in it: its directory entries
            // must survive a crash as their bytes do.
            if let Err(e) = checkpoint::fsync_dir(&self.dir) {
                let _ = new.delete_files();
                return Err(e);
            }
        }
        let old = self.segments.values_mut().next_back().expect("active");
        old.on_become_inactive()?;
        // The recovery point moves past the closed segment once it is
        // fsynced, so a restart only scans the new active segment. Kafka
        // flushes it asynchronously; Produce's appends do too (`flush`).
        match flush {
            FlushMode::Inline => {
                flush::synced(&self.flush_failure, &self.dir, || old.flush())?;
                self.recovery_point = self.recovery_point.max(base);
            }
            FlushMode::Deferred => {
                self.pending_closed.extend(old.sync_handles()?);
                self.defer_flush(base);
            }
        }
        // The state covers every offset below the new segment (Kafka's
        // snapshot at roll), so a restart replays from here.
        if let Err(e) =
            producer_snapshot::write(&self.dir, base, &self.producers.snapshot_entries())
        {
            // The closed segment stays active: appending to it is still right.
            let _ = new.delete_files();
            return Err(e);
        }
        self.segments.insert(base, new);
        Ok(())
    }

    /// Roll if the active segment holds anything (retention and tests use it).
    ///
    /// # Errors
    /// I/O errors.
    pub fn roll_if_not_empty(&mut self) -> Result<()> {
        if self.active_segment().size() > 0 {
            self.roll(self.next_offset)?;
        }
        Ok(())
    }
}

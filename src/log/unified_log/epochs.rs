//! Leader epochs of a `Log` (`leader_epoch_cache`): the epoch its appends
//! as leader carry, becoming leader at a new one, and the answers
//! OffsetForLeaderEpoch and ListOffsets give from the cache.

use super::{Log, LogError, Result};
use crate::log::leader_epoch_cache::LeaderEpochFileCache;

impl Log {
    /// Record where `epoch` begins before a batch of it is written (the
    /// invariant of `leader_epoch_cache`).
    pub(super) fn maybe_assign_epoch(&mut self, epoch: i32, start_offset: i64) -> Result<()> {
        if self.leader_epochs.latest_epoch().is_none_or(|latest| epoch > latest) {
            self.leader_epochs.assign(epoch, start_offset)?;
        }
        Ok(())
    }

    /// The epoch this log stamps on its appends as leader.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// Where each leader epoch of this log began.
    pub fn leader_epoch_cache(&self) -> &LeaderEpochFileCache {
        &self.leader_epochs
    }

    /// Become leader at `epoch` (Kafka's `maybeAssignEpochStartOffset`):
    /// appends from now on carry it, and it begins at the log end. An epoch
    /// below the latest the log holds is refused: it would drop entries.
    ///
    /// # Errors
    /// `StaleLeaderEpoch` for an epoch below the latest, I/O errors writing
    /// the checkpoint (the log is then as it was).
    pub fn become_leader(&mut self, epoch: i32) -> Result<()> {
        self.check_writable()?;
        if let Some(latest) = self.leader_epochs.latest_epoch() {
            if epoch < latest {
                return Err(LogError::StaleLeaderEpoch { epoch, latest });
            }
        }
        let assigned = self.leader_epochs.assign(epoch, self.next_offset).map(|_| ());
        self.note_write(assigned)?;
        self.leader_epoch = epoch;
        Ok(())
    }

    /// The end of `epoch` as OffsetsForLeaderEpoch answers it: the largest
    /// epoch at or below it and the offset after its last record (the log
    /// end for the current one); `None` when the log holds no such epoch
    /// (Kafka's `endOffsetForEpoch`).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let latest = self.leader_epochs.latest_epoch();
        let leo = self.next_offset;
        // The current epoch begins at the log end until its first append
        // writes it down: answer as if its entry were there (Kafka writes
        // it when the replica becomes leader).
        if epoch >= 0 && latest.is_none_or(|l| self.leader_epoch > l) {
            match latest {
                _ if epoch > self.leader_epoch => return None,
                _ if epoch == self.leader_epoch => return Some((epoch, leo)),
                // Below every epoch: itself, with the first one's start.
                None => return Some((epoch, leo)),
                Some(l) if epoch > l => return Some((l, leo)),
                Some(_) => {}
            }
        }
        let (found, end) = self.leader_epochs.end_offset_for(epoch, leo);
        (end != crate::log::leader_epoch_cache::UNDEFINED_EPOCH_OFFSET).then_some((found, end))
    }

    /// The leader epoch of the record at `offset`, as ListOffsets answers
    /// it: an empty cache stands for the current epoch from the log start
    /// (Kafka's cache holds that entry from the moment it leads); an offset
    /// before every entry has none (-1).
    pub fn epoch_at(&self, offset: i64) -> i32 {
        if self.leader_epochs.entries().is_empty() {
            return self.leader_epoch;
        }
        self.leader_epochs
            .epoch_for_offset(offset)
            .unwrap_or(crate::log::leader_epoch_cache::UNDEFINED_EPOCH)
    }
}

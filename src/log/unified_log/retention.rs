//! Retention of a `Log` (Kafka's `deleteOldSegments`) and DeleteRecords.
//!
//! Rules, applied from the oldest segment on, each stopping at the first
//! segment it keeps; the active segment is never deleted (when a rule takes
//! every segment, the log rolls first):
//! 1. Segments wholly below the log start offset go (after DeleteRecords).
//! 2. With `delete` in `cleanup.policy`: segments whose newest record is
//!    older than `retention.ms`, then the oldest while the local size is over
//!    `retention.bytes`. They move the log start offset past them.
//! 3. With `remote.storage.enable` (whatever the policy): the same two rules
//!    with `local.retention.ms` / `local.retention.bytes` (Kafka's
//!    `localRetentionMs/Bytes`: -2 takes the total retention). They move only
//!    the local start ([`Log::local_log_start_offset`]): the log start offset
//!    stays the earliest offset of the whole log, the store's included.
//!    Not on the coordinators' topics (`__consumer_offsets`,
//!    `__transaction_state`): their state is loaded from the local log at
//!    start, so it stays whole on local disk.
//!
//! With `remote.storage.enable`, rules 2 and 3 delete a segment only when the
//! store holds it: every offset it covers is at or below
//! `highest_offset_in_remote_storage` (what the uploader last saw listed in
//! the store's manifest; -1 until it has read one, so after a start nothing
//! goes before the store was heard from) and below the last stable offset.
//! Nothing that is not yet in the store is ever deleted by retention; rule 1
//! deletes only what DeleteRecords gave up. On such a topic rule 2 first
//! expires the segments only in the store (`store_retention`: the size rule
//! measures the whole log, store-only bytes included), then applies to the
//! local segments.
//!
//! A deleted segment is renamed `.deleted` and its files unlinked after
//! `file.delete.delay.ms` (`delete_expired_files`); the log start and
//! recovery point move before anything is unlinked.

use super::Log;
use crate::log::error::{LogError, Result};
use crate::log::producer_snapshot;
use crate::log::segment::LogSegment;
use crate::log::topic_partition::is_coordinator_topic;

/// What a retention rule may delete and which start offset it moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Rule 1: below the log start; no store condition.
    BelowLogStart,
    /// Rule 2: total retention; moves the log start.
    Total,
    /// Rule 3: local retention; moves only the local start.
    Local,
}

impl Log {
    /// DeleteRecords: move the log start offset forward (never back).
    ///
    /// # Errors
    /// `OffsetOutOfRange` past the high watermark.
    pub fn maybe_increment_log_start_offset(&mut self, new_start: i64) -> Result<i64> {
        if new_start > self.next_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: new_start,
                log_start: self.log_start_offset,
                log_end: self.next_offset,
            });
        }
        if new_start > self.log_start_offset {
            self.log_start_offset = new_start;
            self.recovery_point = self.recovery_point.max(new_start);
            self.leader_epochs.truncate_from_start(new_start);
        }
        Ok(self.log_start_offset)
    }

    /// The last offset of the log the object store is known to hold (Kafka's
    /// `highestOffsetInRemoteStorage`); -1 until the uploader reports one.
    pub fn highest_offset_in_remote_storage(&self) -> i64 {
        self.highest_offset_in_remote_storage
    }

    /// The uploader read or wrote a manifest listing every offset up to
    /// `offset`: local retention may delete segments at or below it. Set as
    /// given, not only up: the uploader sets -1 when the store lost its
    /// manifests, so nothing more goes until it lists them again.
    pub fn set_highest_offset_in_remote_storage(&mut self, offset: i64) {
        self.highest_offset_in_remote_storage = offset;
    }

    /// Retention by the rules of the module doc. Returns the number of
    /// segments removed, local ones and store-only ones expired.
    ///
    /// # Errors
    /// I/O errors renaming files.
    pub fn delete_old_segments(&mut self) -> Result<usize> {
        let now = self.clock.now_ms();
        let mut deleted = self
            .delete_segments_while(Rule::BelowLogStart, |_, next_base, log| {
                next_base.is_some_and(|n| n <= log.log_start_offset)
            })?;
        if self.config.delete {
            let (ms, bytes) = (self.config.retention_ms, self.config.retention_bytes);
            if self.config.remote_storage_enable {
                deleted += self.expire_store_only_segments(now, ms, bytes);
            }
            deleted += self.delete_by_time_and_size(Rule::Total, now, ms, bytes)?;
        }
        if self.config.remote_storage_enable && !is_coordinator_topic(&self.tp.topic) {
            let ms = self.config.local_retention_ms();
            let bytes = self.config.local_retention_bytes();
            deleted += self.delete_by_time_and_size(Rule::Local, now, ms, bytes)?;
        }
        Ok(deleted)
    }

    /// Segments older than `retention_ms`, then the oldest while the log is
    /// over `retention_bytes` (negative: no limit).
    fn delete_by_time_and_size(
        &mut self,
        rule: Rule,
        now: i64,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> Result<usize> {
        let mut deleted = 0;
        if retention_ms >= 0 {
            deleted += self.delete_segments_while(rule, |seg, _, _| {
                now - seg.largest_timestamp() > retention_ms
            })?;
        }
        if retention_bytes >= 0 {
            let mut diff = self.size() as i64 - retention_bytes;
            deleted += self.delete_segments_while(rule, |seg, _, _| {
                if diff - seg.size() as i64 >= 0 {
                    diff -= seg.size() as i64;
                    true
                } else {
                    false
                }
            })?;
        }
        Ok(deleted)
    }

    /// Whether the store holds every offset of `seg`, a closed segment
    /// (`next_base` is the next segment's base), below the LSO.
    fn held_by_store(&self, seg: &LogSegment, next_base: Option<i64>) -> bool {
        next_base.is_some()
            && seg.next_offset() <= self.last_stable_offset()
            && seg.next_offset() - 1 <= self.highest_offset_in_remote_storage
    }

    /// Delete segments from the oldest while `pred(segment, next segment's
    /// base, log)` holds and `rule` allows.
    fn delete_segments_while(
        &mut self,
        rule: Rule,
        mut pred: impl FnMut(&LogSegment, Option<i64>, &Self) -> bool,
    ) -> Result<usize> {
        let store_bound = rule != Rule::BelowLogStart && self.config.remote_storage_enable;
        let mut doomed = Vec::new();
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        for (i, base) in bases.iter().enumerate() {
            let seg = &self.segments[base];
            let next = bases.get(i + 1).copied();
            let last_and_empty = next.is_none() && seg.size() == 0;
            if last_and_empty
                || (store_bound && !self.held_by_store(seg, next))
                || !pred(seg, next, self)
            {
                break;
            }
            doomed.push(*base);
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        if doomed.len() == self.segments.len() {
            // Never leave a log without an active segment.
            self.roll(self.next_offset)?;
        }
        let due = self.file_delete_due_ms();
        let reason = if rule == Rule::Local { "local retention" } else { "retention" };
        for &base in &doomed {
            let size = self.segments[&base].size();
            tracing::info!(partition = %self.tp, base_offset = base, size, reason, "deleting segment");
            self.retire_segment(base, due)?;
            // Kafka deletes the producer snapshot with its segment.
            producer_snapshot::delete(&self.dir, base)?;
        }
        let first = *self.segments.keys().next().expect("non-empty");
        if rule != Rule::Local {
            self.log_start_offset = self.log_start_offset.max(first);
            self.leader_epochs.truncate_from_start(self.log_start_offset);
        }
        self.recovery_point = self.recovery_point.max(self.local_log_start_offset());
        Ok(doomed.len())
    }

    /// Unlink `.deleted` files whose `file.delete.delay.ms` has passed (all of them with `force`).
    ///
    /// # Errors
    /// I/O errors.
    pub fn delete_expired_files(&mut self, now: i64, force: bool) -> Result<usize> {
        let mut n = 0;
        let mut i = 0;
        while i < self.pending_deletes.len() {
            if force || self.pending_deletes[i].0 <= now {
                let (_, seg) = self.pending_deletes.swap_remove(i);
                seg.delete_files()?;
                n += 1;
            } else {
                i += 1;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use crate::clock::{MockClock, SharedClock};
    use crate::log::compression::Compression;
    use crate::log::error::LogError;
    use crate::log::record_batch::BatchBuilder;
    use crate::log::{LoadParams, Log, LogConfig, TopicPartition};

    pub(crate) const NOW: i64 = 1_000_000_000;

    pub(crate) fn open(
        dir: &std::path::Path,
        pairs: &[(&str, &str)],
        clock: &SharedClock,
        start: i64,
    ) -> Log {
        let overrides = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let config = LogConfig::resolve(&BTreeMap::new(), overrides).expect("config");
        let load = LoadParams { recovery_point: 0, log_start_offset: start, clean_shutdown: true };
        let tp = TopicPartition::new("t", 0);
        Log::open(dir, tp, Arc::new(config), load, false, Arc::clone(clock)).expect("open")
    }

    /// One closed segment per record, timestamped `ts`, keyed.
    pub(crate) fn append_segments(log: &mut Log, timestamps: &[i64]) {
        for (i, &ts) in timestamps.iter().enumerate() {
            let mut b = BatchBuilder::new(Compression::None, ts);
            b.append(ts, Some(format!("k{i}").as_bytes()), Some(b"value"));
            log.append_as_leader(&mut b.build()).expect("append");
            log.roll_if_not_empty().expect("roll");
        }
    }

    pub(crate) fn bases(log: &Log) -> Vec<i64> {
        log.segments().map(|s| s.base_offset()).collect()
    }

    const REMOTE_COMPACT: [(&str, &str); 2] =
        [("remote.storage.enable", "true"), ("cleanup.policy", "compact")];

    /// Remote storage turned off then on again: the store's copy may have
    /// been retired and swept meanwhile, so what it held is forgotten.
    #[test]
    fn turning_remote_storage_off_or_on_forgets_what_the_store_held() {
        let dir = tempfile::tempdir().unwrap();
        let clock: SharedClock = MockClock::new(NOW);
        let pairs = [REMOTE_COMPACT[0], REMOTE_COMPACT[1], ("local.retention.ms", "0")];
        let mut log = open(dir.path(), &pairs, &clock, 0);
        append_segments(&mut log, &[NOW - 10; 3]);
        log.set_highest_offset_in_remote_storage(2);
        let on = log.config().clone();
        log.update_config(Arc::clone(&on));
        assert_eq!(log.highest_offset_in_remote_storage(), 2, "the same setting keeps it");
        let off = BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]);
        log.update_config(Arc::new(LogConfig::resolve(&BTreeMap::new(), off).unwrap()));
        assert_eq!(log.highest_offset_in_remote_storage(), -1);
        // Without remote storage nothing is pending: -1, as Kafka answers.
        let pending = super::super::EARLIEST_PENDING_UPLOAD_TIMESTAMP;
        assert_eq!(log.fetch_offset_by_timestamp(pending).unwrap(), Some((-1, -1)));
        log.set_highest_offset_in_remote_storage(2);
        log.update_config(on);
        assert_eq!(log.highest_offset_in_remote_storage(), -1, "on again: forgotten");
        assert_eq!(log.delete_old_segments().unwrap(), 0, "nothing leaves local disk");
    }

    #[test]
    fn local_retention_deletes_only_segments_the_store_holds() {
        let dir = tempfile::tempdir().unwrap();
        let clock: SharedClock = MockClock::new(NOW);
        let pairs = [REMOTE_COMPACT[0], REMOTE_COMPACT[1], ("local.retention.ms", "0")];
        let mut log = open(dir.path(), &pairs, &clock, 0);
        append_segments(&mut log, &[NOW - 10; 4]);
        assert_eq!(bases(&log), [0, 1, 2, 3, 4]);
        // The store not heard from (-1): nothing goes, however old, and
        // nothing is uploaded yet: pending from the log start.
        assert_eq!(log.delete_old_segments().unwrap(), 0);
        let pending = super::super::EARLIEST_PENDING_UPLOAD_TIMESTAMP;
        assert_eq!(log.fetch_offset_by_timestamp(pending).unwrap(), Some((-1, 0)));
        // Offsets 0 and 1 in the store: their segments go, no further.
        log.set_highest_offset_in_remote_storage(1);
        assert_eq!(log.delete_old_segments().unwrap(), 2);
        assert_eq!(bases(&log), [2, 3, 4]);
        assert_eq!((log.log_start_offset(), log.local_log_start_offset()), (0, 2));
        assert_eq!(
            log.fetch_offset_by_timestamp(super::super::EARLIEST_TIMESTAMP).unwrap(),
            Some((-1, 0))
        );
        let local = log.fetch_offset_by_timestamp(super::super::EARLIEST_LOCAL_TIMESTAMP).unwrap();
        assert_eq!(local, Some((-1, 2)));
        // KIP-1023: the first offset the store does not hold.
        let pending = super::super::EARLIEST_PENDING_UPLOAD_TIMESTAMP;
        assert_eq!(log.fetch_offset_by_timestamp(pending).unwrap(), Some((-1, 2)));
        // Below the local start nothing is read here; from it on, as before.
        assert!(matches!(log.read(0, 1 << 20, true), Err(LogError::OffsetOutOfRange { .. })));
        assert!(!log.read(2, 1 << 20, true).unwrap().records.is_empty());
        // The active segment never goes.
        log.set_highest_offset_in_remote_storage(100);
        assert_eq!(log.delete_old_segments().unwrap(), 2);
        assert_eq!(bases(&log), [4]);
        assert_eq!((log.log_start_offset(), log.local_log_start_offset()), (0, 4));
        assert!(log.recovery_point() >= 4);
    }

    #[test]
    fn local_retention_by_time_and_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let clock: SharedClock = MockClock::new(NOW);
        let pairs = [REMOTE_COMPACT[0], REMOTE_COMPACT[1], ("local.retention.ms", "5000")];
        let mut log = open(&dir.path().join("time"), &pairs, &clock, 0);
        append_segments(&mut log, &[NOW - 9000, NOW - 6000, NOW - 1000, NOW - 9000]);
        log.set_highest_offset_in_remote_storage(i64::MAX - 1);
        // The two oldest are past 5 s; the third is not, which stops the walk
        // before the fourth (Kafka's rule: from the oldest, while it holds).
        assert_eq!(log.delete_old_segments().unwrap(), 2);
        assert_eq!(bases(&log), [2, 3, 4]);
        assert_eq!(log.log_start_offset(), 0);

        let one = log.segments().next().unwrap().size();
        let limit = (2 * one).to_string();
        let pairs = [REMOTE_COMPACT[0], REMOTE_COMPACT[1], ("local.retention.bytes", &limit)];
        let mut log = open(&dir.path().join("size"), &pairs, &clock, 0);
        append_segments(&mut log, &[NOW; 5]);
        log.set_highest_offset_in_remote_storage(2);
        // Over the limit by three segments, but the store holds only 0..=2.
        assert_eq!(log.delete_old_segments().unwrap(), 3);
        assert_eq!(bases(&log), [3, 4, 5]);
        log.set_highest_offset_in_remote_storage(3);
        assert_eq!(log.delete_old_segments().unwrap(), 0, "within the limit now");
        assert_eq!(log.size(), 2 * one);
        assert_eq!((log.log_start_offset(), log.local_log_start_offset()), (0, 3));
    }

    #[test]
    fn minus_two_takes_total_retention_which_moves_the_log_start_only_for_stored_segments() {
        let dir = tempfile::tempdir().unwrap();
        let clock: SharedClock = MockClock::new(NOW);
        let pairs = [("remote.storage.enable", "true"), ("retention.ms", "5000")];
        let mut log = open(dir.path(), &pairs, &clock, 0);
        append_segments(&mut log, &[NOW - 9000, NOW - 9000, NOW - 9000]);
        assert_eq!(log.delete_old_segments().unwrap(), 0, "nothing in the store yet");
        log.set_highest_offset_in_remote_storage(0);
        assert_eq!(log.delete_old_segments().unwrap(), 1);
        // Total retention: the log start moves with it (the store drops it too).
        assert_eq!((log.log_start_offset(), log.local_log_start_offset()), (1, 1));
    }

    #[test]
    fn a_coordinator_topic_keeps_its_local_copies() {
        let dir = tempfile::tempdir().unwrap();
        let clock: SharedClock = MockClock::new(NOW);
        let pairs = [REMOTE_COMPACT[0], REMOTE_COMPACT[1], ("local.retention.ms", "0")];
        let overrides = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let config = Arc::new(LogConfig::resolve(&BTreeMap::new(), overrides).unwrap());
        let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
        let tp = TopicPartition::new("__consumer_offsets", 0);
        let mut log = Log::open(dir.path(), tp, config, load, false, Arc::clone(&clock)).unwrap();
        append_segments(&mut log, &[NOW - 10; 2]);
        log.set_highest_offset_in_remote_storage(100);
        assert_eq!(log.delete_old_segments().unwrap(), 0);
    }

    #[test]
    fn a_reopened_remote_log_keeps_its_checkpointed_start() {
        let dir = tempfile::tempdir().unwrap();
        let clock: SharedClock = MockClock::new(NOW);
        let pairs = [REMOTE_COMPACT[0], REMOTE_COMPACT[1], ("local.retention.ms", "0")];
        let mut log = open(dir.path(), &pairs, &clock, 0);
        append_segments(&mut log, &[NOW - 10; 3]);
        log.set_highest_offset_in_remote_storage(1);
        assert_eq!(log.delete_old_segments().unwrap(), 2);
        log.close().unwrap();
        drop(log);
        let mut log = open(dir.path(), &pairs, &clock, 0);
        assert_eq!((log.log_start_offset(), log.local_log_start_offset()), (0, 2));
        // After the start the store is unheard from again: nothing more goes.
        assert_eq!(log.highest_offset_in_remote_storage(), -1);
        assert_eq!(log.delete_old_segments().unwrap(), 0);
        drop(log);
        // Without remote storage nothing exists below the first segment.
        let log = open(dir.path(), &[("cleanup.policy", "compact")], &clock, 0);
        assert_eq!((log.log_start_offset(), log.local_log_start_offset()), (2, 2));
    }
}

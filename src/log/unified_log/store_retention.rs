//! Total retention over segments that are only in the object store (Kafka's
//! `RemoteLogManager` expiration: `cleanupExpiredRemoteLogSegments`).
//!
//! The log knows nothing of the store: the uploader hands it, as numbers,
//! the segments the store's latest manifest lists
//! ([`Log::set_store_segments`]). Those wholly below the local start and not
//! wholly below the log start are the store-only ones
//! ([`Log::store_only_segments`]); the others are either local too or already
//! given up.
//!
//! With `delete` in `cleanup.policy` and `remote.storage.enable`, retention
//! first walks the store-only segments from the oldest, each rule stopping at
//! the first segment it keeps:
//! * time: a segment whose largest timestamp is older than `retention.ms`.
//!   A segment with an unknown largest timestamp (-1: listed by a manifest
//!   written before timestamps were recorded) is never expired by time, and
//!   stops the walk;
//! * size: the oldest, while the size of the whole log (store-only bytes
//!   plus local bytes) less the segment is still at least `retention.bytes`.
//!
//! Expiring a store-only segment only moves the log start offset to its next
//! offset (the broker persists the log start checkpoint after the pass): the
//! uploader's next manifest leaves it out (it carries over only segments
//! above the log start) and the sweep deletes its objects after the delay.
//! Reads below the new log start are out of range; ListOffsets EARLIEST
//! answers it. The local segments then follow the local rules of
//! `retention`: when the walk over the store-only segments stopped early the
//! whole log is still within `retention.bytes`, so the local size rule takes
//! nothing; a local segment expired by time moves the log start past every
//! store-only segment below it.

use std::hash::{Hash, Hasher};

use super::Log;

/// The digest of a store listing, segment by segment `(base offset, next
/// offset, size)`: the same for a manifest and for the log told of it.
pub fn store_listing_digest(segments: impl Iterator<Item = (i64, i64, u64)>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for s in segments {
        s.hash(&mut h);
    }
    h.finish()
}

/// A segment that the object store holds, as the log needs to know it for
/// retention: its offsets, its `.log` size and its largest record timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSegment {
    pub base_offset: i64,
    /// One past the last offset it covers.
    pub next_offset: i64,
    pub size_in_bytes: u64,
    /// -1 when unknown: then never expired by time.
    pub largest_timestamp: i64,
}

impl Log {
    /// What the store's latest manifest lists, in offset order (the uploader
    /// calls it with each manifest it reads or writes, and with none when the
    /// store lost its manifests).
    pub fn set_store_segments(&mut self, mut segments: Vec<StoreSegment>) {
        segments.sort_by_key(|s| s.base_offset);
        self.store_segments = segments;
    }

    /// Every segment the store's latest manifest lists, oldest first.
    pub fn store_segments(&self) -> &[StoreSegment] {
        &self.store_segments
    }

    /// A digest of [`Log::store_segments`]: a reader holding a manifest
    /// whose listing digests differently holds an older (or newer) one.
    pub fn store_listing(&self) -> u64 {
        store_listing_digest(
            self.store_segments.iter().map(|s| (s.base_offset, s.next_offset, s.size_in_bytes)),
        )
    }

    /// The segments only in the store: wholly below the local start, not
    /// wholly below the log start; oldest first.
    pub fn store_only_segments(&self) -> impl Iterator<Item = &StoreSegment> {
        let (start, local_start) = (self.log_start_offset, self.local_log_start_offset());
        self.store_segments
            .iter()
            .filter(move |s| s.next_offset > start && s.next_offset <= local_start)
    }

    /// The bytes of [`Log::store_only_segments`].
    pub fn store_only_size(&self) -> u64 {
        self.store_only_segments().map(|s| s.size_in_bytes).sum()
    }

    /// Expire store-only segments by the rules of the module doc; returns
    /// how many went (the log start moved past them).
    pub(super) fn expire_store_only_segments(
        &mut self,
        now: i64,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> usize {
        let segments: Vec<StoreSegment> = self.store_only_segments().copied().collect();
        let mut expired = 0;
        if retention_ms >= 0 {
            expired += segments
                .iter()
                .take_while(|s| {
                    s.largest_timestamp >= 0 && now - s.largest_timestamp > retention_ms
                })
                .count();
        }
        if retention_bytes >= 0 {
            let store: u64 = segments[expired..].iter().map(|s| s.size_in_bytes).sum();
            let mut diff = (store + self.size()) as i64 - retention_bytes;
            expired += segments[expired..]
                .iter()
                .take_while(|s| {
                    let fits = diff - s.size_in_bytes as i64 >= 0;
                    if fits {
                        diff -= s.size_in_bytes as i64;
                    }
                    fits
                })
                .count();
        }
        let Some(last) = expired.checked_sub(1).map(|i| segments[i]) else { return 0 };
        for s in &segments[..expired] {
            tracing::info!(
                partition = %self.tp,
                base_offset = s.base_offset,
                size = s.size_in_bytes,
                "store-only segment expired by retention"
            );
        }
        self.log_start_offset = self.log_start_offset.max(last.next_offset);
        self.leader_epochs.truncate_from_start(self.log_start_offset);
        self.recovery_point = self.recovery_point.max(self.log_start_offset);
        expired
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::StoreSegment;
    use crate::clock::{MockClock, SharedClock};
    use crate::log::error::LogError;
    use crate::log::unified_log::retention::tests::{append_segments, bases, open, NOW};
    use crate::log::unified_log::EARLIEST_TIMESTAMP;
    use crate::log::{Log, LogConfig};

    fn seg(base: i64, size: u64, ts: i64) -> StoreSegment {
        StoreSegment {
            base_offset: base,
            next_offset: base + 1,
            size_in_bytes: size,
            largest_timestamp: ts,
        }
    }

    /// A remote log whose offsets 0..3 are only in the store (their local
    /// copies gone by local retention) and 3..6 local; the store lists
    /// `store` plus the local segment 3 it holds too.
    fn tiered(dir: &std::path::Path, pairs: &[(&str, &str)], store: [StoreSegment; 3]) -> Log {
        let clock: SharedClock = MockClock::new(NOW);
        let mut all = vec![("remote.storage.enable", "true"), ("local.retention.ms", "0")];
        let mut log = open(dir, &all, &clock, 0);
        append_segments(&mut log, &[NOW - 1; 6]);
        log.set_highest_offset_in_remote_storage(2);
        assert_eq!(log.delete_old_segments().unwrap(), 3, "local copies of 0..3");
        assert_eq!(bases(&log), [3, 4, 5, 6]);
        // The retention under test from here on.
        all.extend_from_slice(pairs);
        let overrides = all.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let config = LogConfig::resolve(&BTreeMap::new(), overrides).expect("config");
        log.update_config(Arc::new(config));
        let mut listed = store.to_vec();
        listed.push(seg(3, 999, NOW - 99_999));
        log.set_store_segments(listed);
        assert_eq!(log.store_only_segments().copied().collect::<Vec<_>>(), store);
        log
    }

    fn earliest(log: &mut Log) -> i64 {
        log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).unwrap().unwrap().1
    }

    #[test]
    fn store_only_segments_expire_by_time_from_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let old = NOW - 9000;
        let store = [seg(0, 10, old), seg(1, 10, old), seg(2, 10, NOW - 1000)];
        let mut log = tiered(dir.path(), &[("retention.ms", "5000")], store);
        assert_eq!(log.delete_old_segments().unwrap(), 2);
        assert_eq!((log.log_start_offset(), log.local_log_start_offset()), (2, 3));
        assert_eq!(log.store_only_segments().copied().collect::<Vec<_>>(), [store[2]]);
        assert_eq!(earliest(&mut log), 2);
        assert!(matches!(log.read(1, 1 << 20, true), Err(LogError::OffsetOutOfRange { .. })));
        // Local segments stay: retention.ms does not reach them yet.
        assert_eq!(bases(&log), [3, 4, 5, 6]);
        assert_eq!(log.delete_old_segments().unwrap(), 0);
    }

    #[test]
    fn a_store_only_segment_with_unknown_timestamp_is_never_expired_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let old = NOW - 9000;
        let store = [seg(0, 10, -1), seg(1, 10, old), seg(2, 10, old)];
        let mut log = tiered(dir.path(), &[("retention.ms", "5000")], store);
        // The unknown one is the oldest and stops the walk.
        assert_eq!(log.delete_old_segments().unwrap(), 0);
        assert_eq!(log.log_start_offset(), 0);
    }

    #[test]
    fn retention_bytes_measures_store_only_and_local_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = [seg(0, 100, NOW), seg(1, 100, NOW), seg(2, 100, NOW)];
        let log = tiered(&dir.path().join("a"), &[], store);
        let local = log.size();
        assert_eq!(log.store_only_size(), 300);
        drop(log);
        // The whole log is 150 over: the oldest (100) goes, the next would
        // take it under the limit.
        let limit = (local + 150).to_string();
        let mut log = tiered(&dir.path().join("b"), &[("retention.bytes", &limit)], store);
        assert_eq!(log.delete_old_segments().unwrap(), 1);
        assert_eq!((log.log_start_offset(), log.store_only_size()), (1, 200));
        assert_eq!(earliest(&mut log), 1);
        assert_eq!(log.delete_old_segments().unwrap(), 0, "within the limit now");
        // Local bytes alone over the limit: every store-only segment goes;
        // the local ones only as far as the store holds them (none here).
        let mut log = tiered(&dir.path().join("c"), &[("retention.bytes", "0")], store);
        assert_eq!(log.delete_old_segments().unwrap(), 3);
        assert_eq!((log.log_start_offset(), log.local_log_start_offset()), (3, 3));
        assert_eq!(log.store_only_segments().count(), 0);
        assert_eq!(bases(&log), [3, 4, 5, 6]);
        // Exactly at the limit: nothing goes.
        let limit = (local + 300).to_string();
        let mut log = tiered(&dir.path().join("d"), &[("retention.bytes", &limit)], store);
        assert_eq!(log.delete_old_segments().unwrap(), 0);
    }

    #[test]
    fn compacted_topics_and_unlimited_retention_expire_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = [seg(0, 100, NOW - 9000), seg(1, 100, NOW - 9000), seg(2, 100, -1)];
        let compact =
            [("cleanup.policy", "compact"), ("retention.ms", "0"), ("retention.bytes", "0")];
        let mut log = tiered(&dir.path().join("compact"), &compact, store);
        assert_eq!(log.delete_old_segments().unwrap(), 0);
        assert_eq!(log.log_start_offset(), 0);
        let unlimited = [("retention.ms", "-1"), ("retention.bytes", "-1")];
        let mut log = tiered(&dir.path().join("unlimited"), &unlimited, store);
        assert_eq!(log.delete_old_segments().unwrap(), 0);
        // Both policies: delete applies.
        let both = [("cleanup.policy", "compact,delete"), ("retention.ms", "5000")];
        let mut log = tiered(&dir.path().join("both"), &both, store);
        assert_eq!(log.delete_old_segments().unwrap(), 2);
        assert_eq!(log.log_start_offset(), 2);
    }

    #[test]
    fn the_store_forgotten_expires_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = [seg(0, 100, NOW - 9000), seg(1, 100, NOW - 9000), seg(2, 100, NOW)];
        let mut log = tiered(dir.path(), &[("retention.ms", "5000")], store);
        log.set_store_segments(Vec::new());
        assert_eq!(log.delete_old_segments().unwrap(), 0);
        assert_eq!(log.log_start_offset(), 0);
    }
}

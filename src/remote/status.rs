//! What the uploader reports for the metrics endpoint: per partition the
//! bytes and segments in the store (and of those, the bytes only there) and
//! the upload lag; store errors by kind;
//! upload count and time. The uploader writes it, scrapes read a copy.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::cleaner::{LastClean, StoreCleanState};
use crate::log::TopicPartition;

/// One partition's remote state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartitionRemoteStatus {
    /// `.log` bytes of the segments the latest manifest lists.
    pub remote_bytes: u64,
    pub remote_segments: u64,
    /// `.log` bytes of the listed segments below the local start: in the
    /// store only, their local copies deleted by local retention.
    pub store_only_bytes: u64,
    /// `.log` bytes of closed segments not in the latest manifest.
    pub lag_bytes: u64,
    /// Age of the oldest closed segment not in the latest manifest (0: none).
    pub lag_seconds: f64,
    /// A compacted partition with segments only in the store: the store
    /// cleaner's measure and its last clean (`store_cleaner`); `None` otherwise.
    pub store_clean: Option<StoreCleanState>,
}

#[derive(Debug, Default, Clone)]
pub struct RemoteCounters {
    pub errors: BTreeMap<&'static str, u64>,
    pub uploads: u64,
    pub upload_bytes: u64,
    pub upload_seconds: f64,
    pub deleted_objects: u64,
    /// Cleans of store-only segments, and the `.log` bytes they removed.
    pub store_cleans: u64,
    pub store_clean_removed_bytes: u64,
}

#[derive(Debug, Default)]
pub struct RemoteStats {
    partitions: Mutex<BTreeMap<TopicPartition, PartitionRemoteStatus>>,
    counters: Mutex<RemoteCounters>,
}

impl RemoteStats {
    /// Replace what the uploader measured of `tp` (the store cleaner's
    /// measure stays).
    pub fn set_partition(&self, tp: &TopicPartition, mut status: PartitionRemoteStatus) {
        let mut partitions = self.partitions.lock();
        if let Some(old) = partitions.get_mut(tp) {
            status.store_clean = old.store_clean.take();
        }
        partitions.insert(tp.clone(), status);
    }

    /// What the store cleaner measured of `tp` last (`None`: nothing only in
    /// the store, or not compacted); its last clean and failure stay.
    pub fn set_store_measure(&self, tp: &TopicPartition, measure: Option<StoreCleanState>) {
        let mut partitions = self.partitions.lock();
        let Some(p) = partitions.get_mut(tp) else { return };
        p.store_clean = measure.map(|mut m| {
            if let Some(old) = p.store_clean.take() {
                (m.last_clean, m.last_error, m.retry_at_ms) =
                    (old.last_clean, old.last_error, old.retry_at_ms);
            }
            m
        });
    }

    /// The outcome of a store clean of `tp`: what it did, or why it failed
    /// and when it is tried again.
    pub fn set_store_clean_outcome(
        &self,
        tp: &TopicPartition,
        outcome: Result<LastClean, (String, i64)>,
    ) {
        let mut partitions = self.partitions.lock();
        let Some(state) = partitions.get_mut(tp).and_then(|p| p.store_clean.as_mut()) else {
            return;
        };
        match outcome {
            Ok(clean) => {
                (state.last_clean, state.last_error, state.retry_at_ms) = (Some(clean), None, None)
            }
            Err((error, retry_at_ms)) => {
                (state.last_error, state.retry_at_ms) = (Some(error), Some(retry_at_ms))
            }
        }
    }

    /// A store clean of `tp` that failed before went through without a new
    /// manifest (nothing to rewrite): the failure is over.
    pub fn store_clean_recovered(&self, tp: &TopicPartition) {
        let mut partitions = self.partitions.lock();
        if let Some(state) = partitions.get_mut(tp).and_then(|p| p.store_clean.as_mut()) {
            (state.last_error, state.retry_at_ms) = (None, None);
        }
    }

    /// The store cleaner's state of `tp`, if it measured it.
    pub fn store_clean_state(&self, tp: &TopicPartition) -> Option<StoreCleanState> {
        self.partitions.lock().get(tp)?.store_clean.clone()
    }

    /// Forget partitions no longer enabled or no longer present.
    pub fn retain(&self, keep: impl Fn(&TopicPartition) -> bool) {
        self.partitions.lock().retain(|tp, _| keep(tp));
    }

    pub fn partition(&self, tp: &TopicPartition) -> Option<PartitionRemoteStatus> {
        self.partitions.lock().get(tp).cloned()
    }

    pub fn partitions(&self) -> BTreeMap<TopicPartition, PartitionRemoteStatus> {
        self.partitions.lock().clone()
    }

    pub fn error(&self, kind: &'static str) {
        *self.counters.lock().errors.entry(kind).or_default() += 1;
    }

    pub fn uploaded(&self, bytes: u64, seconds: f64) {
        let mut c = self.counters.lock();
        c.uploads += 1;
        c.upload_bytes += bytes;
        c.upload_seconds += seconds;
    }

    pub fn deleted(&self, objects: u64) {
        self.counters.lock().deleted_objects += objects;
    }

    pub fn store_cleaned(&self, removed_bytes: u64) {
        let mut c = self.counters.lock();
        c.store_cleans += 1;
        c.store_clean_removed_bytes += removed_bytes;
    }

    pub fn counters(&self) -> RemoteCounters {
        self.counters.lock().clone()
    }
}

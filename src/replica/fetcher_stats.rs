//! What the replica fetchers measure, read by the metrics: each followed
//! partition's lag behind its leader's high watermark (Kafka's
//! FetcherLagMetrics and MaxLag), each fetcher thread's answered requests
//! and replicated bytes (Kafka's FetcherStats RequestsPerSec and
//! BytesPerSec, keyed by the thread's client id
//! `ReplicaFetcherThread-<fetcher id>-<leader>`), and how many fetcher
//! threads ended while still assigned partitions (Kafka's
//! ReplicaFetcherManager DeadThreadCount).
//!
//! Invariant: the dead-thread count covers exactly the threads that ended
//! without being stopped and have not been stopped (joined) since; their
//! partitions go unreplicated until the leader or the fetcher assignment
//! changes, so any value above 0 needs an operator.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::log::TopicPartition;

/// Each followed partition's lag behind its leader's high watermark, in
/// messages (offsets), as its last answered fetch gave it.
#[derive(Debug, Default)]
pub struct FetcherLags(Mutex<HashMap<TopicPartition, i64>>);

impl FetcherLags {
    /// Kafka's MaxLag: the largest lag of a followed partition, 0 for none.
    pub fn max_lag(&self) -> i64 {
        self.0.lock().values().copied().max().unwrap_or(0)
    }

    /// Whether a fetch of `tp` was answered since this broker last began
    /// following it: only then does its high watermark come from its
    /// leader (before, it may be the log end a restart left).
    pub fn heard_from_leader(&self, tp: &TopicPartition) -> bool {
        self.0.lock().contains_key(tp)
    }

    /// Each followed partition's lag (Kafka's FetcherLagMetrics).
    pub fn each(&self) -> Vec<(TopicPartition, i64)> {
        self.0.lock().iter().map(|(tp, lag)| (tp.clone(), *lag)).collect()
    }

    /// Whether `tp`'s last answer left it at its leader's high watermark
    /// (Kafka's `isReplicaInSync` of a fetch state).
    pub(super) fn caught_up(&self, tp: &TopicPartition) -> bool {
        self.0.lock().get(tp) == Some(&0)
    }

    pub(super) fn set(&self, tp: &TopicPartition, lag: i64) {
        self.0.lock().insert(tp.clone(), lag.max(0));
    }

    pub(super) fn retain(&self, followed: &HashMap<TopicPartition, (i32, i32)>) {
        self.0.lock().retain(|tp, _| followed.contains_key(tp));
    }
}

/// A fetcher thread's answered fetches and the record bytes they brought.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FetcherThreadCounts {
    pub requests: u64,
    pub bytes: u64,
}

/// Kafka's FetcherStats per fetcher thread, and DeadThreadCount.
#[derive(Debug, Default)]
pub struct FetcherStats {
    threads: Mutex<BTreeMap<String, FetcherThreadCounts>>,
    dead: AtomicI64,
}

impl FetcherStats {
    /// Thread `client_id` had a fetch answered, carrying `bytes` of records
    /// for partitions it follows.
    pub(super) fn record(&self, client_id: &str, bytes: u64) {
        let mut threads = self.threads.lock();
        let counts = threads.entry(client_id.to_string()).or_default();
        counts.requests += 1;
        counts.bytes += bytes;
    }

    /// Each thread's counts so far (threads since stopped included: the
    /// counts only grow).
    pub fn each(&self) -> Vec<(String, FetcherThreadCounts)> {
        self.threads.lock().iter().map(|(id, c)| (id.clone(), *c)).collect()
    }

    /// Fetcher threads that ended while assigned partitions.
    pub fn dead_threads(&self) -> i64 {
        self.dead.load(Ordering::Relaxed)
    }
}

/// Held by a running fetcher thread: when the thread ends (returning or
/// unwinding from a panic) before it was told to stop, it counts as dead
/// until it is stopped.
pub(super) struct DeathWatch {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) dead: Arc<AtomicBool>,
    pub(super) stats: Arc<FetcherStats>,
    pub(super) client_id: String,
}

impl Drop for DeathWatch {
    fn drop(&mut self) {
        if !self.stop.load(Ordering::Acquire) {
            tracing::error!(thread = %self.client_id, "a replica fetcher thread ended while assigned partitions: they are not replicated until their leader changes");
            self.dead.store(true, Ordering::Release);
            self.stats.dead.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A stopped thread was joined: if it had died, it no longer counts.
pub(super) fn joined(stats: &FetcherStats, dead: &AtomicBool) {
    if dead.load(Ordering::Acquire) {
        stats.dead.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(stats: &Arc<FetcherStats>) -> (DeathWatch, Arc<AtomicBool>, Arc<AtomicBool>) {
        let (stop, dead) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let w = DeathWatch {
            stop: Arc::clone(&stop),
            dead: Arc::clone(&dead),
            stats: Arc::clone(stats),
            client_id: "ReplicaFetcherThread-0-1".into(),
        };
        (w, stop, dead)
    }

    #[test]
    fn a_thread_that_panics_counts_as_dead_until_joined() {
        let stats = Arc::new(FetcherStats::default());
        let (w, _stop, dead) = watch(&stats);
        let ended = std::thread::spawn(move || {
            let _w = w;
            panic!("a fetcher bug");
        })
        .join();
        assert!(ended.is_err());
        assert_eq!(stats.dead_threads(), 1);
        joined(&stats, &dead);
        assert_eq!(stats.dead_threads(), 0);
    }

    #[test]
    fn a_stopped_thread_is_not_dead() {
        let stats = Arc::new(FetcherStats::default());
        let (w, stop, dead) = watch(&stats);
        stop.store(true, Ordering::Release);
        drop(w);
        joined(&stats, &dead);
        assert_eq!(stats.dead_threads(), 0);
    }

    #[test]
    fn counts_accumulate_per_thread() {
        let stats = FetcherStats::default();
        stats.record("ReplicaFetcherThread-0-2", 100);
        stats.record("ReplicaFetcherThread-0-2", 0);
        stats.record("ReplicaFetcherThread-1-3", 7);
        let each: HashMap<_, _> = stats.each().into_iter().collect();
        assert_eq!(
            each["ReplicaFetcherThread-0-2"],
            FetcherThreadCounts { requests: 2, bytes: 100 }
        );
        assert_eq!(each["ReplicaFetcherThread-1-3"], FetcherThreadCounts { requests: 1, bytes: 7 });
    }
}

//! The fetch session cache (KIP-227): Kafka's `NumIncrementalFetchSessions`,
//! `NumIncrementalFetchPartitionsCached` and
//! `IncrementalFetchSessionEvictionsPerSec`, under sediment's names, and the
//! incremental fetches served. Set by the cache as it changes, never read
//! from it at scrape time (no lock is taken by a scrape).

use prometheus::{IntCounter, IntGauge, Registry};

/// Gauges and counters of one broker's fetch session cache.
#[derive(Debug, Clone)]
pub struct FetchSessionMetrics {
    sessions: IntGauge,
    partitions: IntGauge,
    evictions: IntCounter,
    incremental: IntCounter,
}

impl Default for FetchSessionMetrics {
    fn default() -> Self {
        Self {
            sessions: IntGauge::new(
                "sediment_fetch_session_cache_sessions",
                "Incremental fetch sessions in the cache (Kafka's NumIncrementalFetchSessions)",
            )
            .expect("valid metric"),
            partitions: IntGauge::new(
                "sediment_fetch_session_cache_partitions",
                "Partitions held by all cached fetch sessions (Kafka's NumIncrementalFetchPartitionsCached)",
            )
            .expect("valid metric"),
            evictions: IntCounter::new(
                "sediment_fetch_session_cache_evictions_total",
                "Fetch sessions evicted to make room for a new one (Kafka's IncrementalFetchSessionEvictionsPerSec)",
            )
            .expect("valid metric"),
            incremental: IntCounter::new(
                "sediment_fetch_session_incremental_fetches_total",
                "Fetch requests served from an existing session (incremental fetches)",
            )
            .expect("valid metric"),
        }
    }
}

impl FetchSessionMetrics {
    pub(super) fn register(&self, r: &Registry) -> Result<(), prometheus::Error> {
        r.register(Box::new(self.sessions.clone()))?;
        r.register(Box::new(self.partitions.clone()))?;
        r.register(Box::new(self.evictions.clone()))?;
        r.register(Box::new(self.incremental.clone()))
    }

    /// The cache now holds `sessions` sessions of `partitions` partitions in all.
    pub fn set_size(&self, sessions: usize, partitions: usize) {
        self.sessions.set(sessions as i64);
        self.partitions.set(partitions as i64);
    }

    pub fn evicted(&self) {
        self.evictions.inc();
    }

    pub fn incremental_fetch(&self) {
        self.incremental.inc();
    }

    /// The sessions and partitions gauges.
    pub fn cached(&self) -> (i64, i64) {
        (self.sessions.get(), self.partitions.get())
    }

    /// Evictions so far (for tests and status output).
    pub fn evictions(&self) -> u64 {
        self.evictions.get()
    }

    /// Incremental fetches served so far.
    pub fn incremental_fetches(&self) -> u64 {
        self.incremental.get()
    }
}

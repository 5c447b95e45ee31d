//! What reads from the store report for the metrics endpoint: each remote
//! fetch's duration, the cache's hits and misses (by segment), and the bytes
//! the cache holds. The reader and the cache update them as they go; the
//! metrics endpoint registers them as they are.

use prometheus::{Histogram, HistogramOpts, IntCounter, IntGauge};

#[derive(Debug, Clone)]
pub struct RemoteReadStats {
    /// Seconds per remote read (a fetch's, or an offset lookup's), download included.
    pub fetch_seconds: Histogram,
    pub cache_hits: IntCounter,
    pub cache_misses: IntCounter,
    pub cache_bytes: IntGauge,
}

impl Default for RemoteReadStats {
    fn default() -> Self {
        // The names and help are fixed and valid: building them cannot fail.
        let buckets = vec![0.001, 0.005, 0.025, 0.1, 0.25, 1.0, 2.5, 10.0, 30.0, 120.0];
        let opts = HistogramOpts::new(
            "sediment_remote_fetch_seconds",
            "Time to serve one partition's fetch or offset lookup from the store, downloading included when the cache misses",
        )
        .buckets(buckets);
        Self {
            fetch_seconds: Histogram::with_opts(opts).expect("valid histogram"),
            cache_hits: IntCounter::new(
                "sediment_remote_cache_hits_total",
                "Remote reads whose segment was already in the local cache",
            )
            .expect("valid counter"),
            cache_misses: IntCounter::new(
                "sediment_remote_cache_misses_total",
                "Remote reads that had to download their segment (hits / (hits + misses): hit ratio)",
            )
            .expect("valid counter"),
            cache_bytes: IntGauge::new(
                "sediment_remote_cache_bytes",
                "Bytes of downloaded segments in the local cache",
            )
            .expect("valid gauge"),
        }
    }
}

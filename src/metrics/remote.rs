//! Tiered storage's metrics, from the uploader's [`RemoteStats`] at each
//! scrape: per topic the bytes and segments in the store and the upload lag
//! (bytes, and age of the oldest closed segment not yet uploaded); per
//! partition the bytes in the store and those only there (the local bytes
//! are `kafka_log_log_size`) and, for compacted ones, the store's dirty
//! ratio; store errors by kind; uploads, their bytes and time; cleans of
//! store-only segments and the bytes they removed. The unlabelled
//! `sediment_remote_upload_lag_max_seconds` and the error counter's kinds
//! exist on every broker (0 without tiered storage), so alerts on them work
//! before the first upload. Reads from the store (latency, the cache's hits,
//! misses and bytes) are the reader's own metrics, registered as they are
//! when tiered storage is on.

use std::collections::BTreeMap;

use prometheus::{Counter, GaugeVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry};

use super::{Metrics, MetricsError};
use crate::remote::read_stats::RemoteReadStats;
use crate::remote::RemoteStats;

/// The kinds of `sediment_remote_store_errors_total` (`RemoteError::kind`).
const KINDS: &[&str] = &[
    "auth",
    "not_found",
    "unreachable",
    "conflict",
    "corrupt",
    "manifest",
    "unsupported",
    "local",
    "config",
    "other",
];

#[derive(Debug)]
pub(super) struct RemoteGauges {
    bytes: IntGaugeVec,
    partition_bytes: IntGaugeVec,
    store_only_bytes: IntGaugeVec,
    store_dirty_ratio: prometheus::GaugeVec,
    segments: IntGaugeVec,
    lag_bytes: IntGaugeVec,
    lag_seconds: GaugeVec,
    lag_max_seconds: prometheus::Gauge,
    errors: IntCounterVec,
    uploads: IntCounter,
    upload_bytes: IntCounter,
    upload_seconds: Counter,
    deleted: IntCounter,
    store_cleans: IntCounter,
    store_clean_removed: IntCounter,
}

fn reg<T: prometheus::core::Collector + Clone + 'static>(
    r: &Registry,
    c: T,
) -> Result<T, prometheus::Error> {
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

impl RemoteGauges {
    pub(super) fn register(r: &Registry) -> Result<Self, prometheus::Error> {
        let topic = &["topic"];
        let errors = reg(r, IntCounterVec::new(Opts::new("sediment_remote_store_errors_total", "Failed tiered storage operations, by kind: auth, not_found, unreachable, conflict, corrupt, manifest, unsupported, local, config, other"), &["kind"])?)?;
        for kind in KINDS {
            errors.with_label_values(&[kind]);
        }
        Ok(Self {
            bytes: reg(r, IntGaugeVec::new(Opts::new("sediment_remote_log_size_bytes", "Bytes of .log objects the latest manifests list, per topic"), topic)?)?,
            partition_bytes: reg(r, IntGaugeVec::new(Opts::new("sediment_remote_partition_log_size_bytes", "Bytes of .log objects the partition's latest manifest lists"), &["topic", "partition"])?)?,
            store_only_bytes: reg(r, IntGaugeVec::new(Opts::new("sediment_remote_partition_store_only_bytes", "Bytes of .log objects the partition's latest manifest lists below its local log start: in the store only"), &["topic", "partition"])?)?,
            store_dirty_ratio: reg(r, GaugeVec::new(Opts::new("sediment_remote_partition_store_dirty_ratio", "A compacted partition with segments only in the store: bytes no store clean has rewritten or mapped yet over those and the bytes below the store's clean point (the store cleaner runs when it is above min.cleanable.dirty.ratio)"), &["topic", "partition"])?)?,
            segments: reg(r, IntGaugeVec::new(Opts::new("sediment_remote_log_segments", "Segments the latest manifests list, per topic"), topic)?)?,
            lag_bytes: reg(r, IntGaugeVec::new(Opts::new("sediment_remote_upload_lag_bytes", "Bytes of closed segments not yet in the store, per topic"), topic)?)?,
            lag_seconds: reg(r, GaugeVec::new(Opts::new("sediment_remote_upload_lag_seconds", "Age of the oldest closed segment not yet in the store, per topic (0: none)"), topic)?)?,
            lag_max_seconds: reg(r, prometheus::Gauge::new("sediment_remote_upload_lag_max_seconds", "Age of the oldest closed segment of any enabled topic not yet in the store (0: none, or tiered storage off)")?)?,
            errors,
            uploads: reg(r, IntCounter::new("sediment_remote_uploads_total", "Segment files uploaded and verified")?)?,
            upload_bytes: reg(r, IntCounter::new("sediment_remote_upload_bytes_total", "Bytes uploaded and verified")?)?,
            upload_seconds: reg(r, Counter::new("sediment_remote_upload_seconds_total", "Time spent uploading and verifying segment files (divide by sediment_remote_uploads_total for the mean)")?)?,
            deleted: reg(r, IntCounter::new("sediment_remote_deleted_objects_total", "Objects deleted because no current manifest lists them")?)?,
            store_cleans: reg(r, IntCounter::new("sediment_remote_store_cleans_total", "Cleans of segments only in the store that wrote a manifest")?)?,
            store_clean_removed: reg(r, IntCounter::new("sediment_remote_store_clean_removed_bytes_total", "Bytes of .log objects the cleans of segments only in the store removed from the latest manifests")?)?,
        })
    }

    pub(super) fn refresh(&self, stats: &RemoteStats) {
        let mut topics: BTreeMap<String, (i64, i64, i64, f64)> = BTreeMap::new();
        self.partition_bytes.reset();
        self.store_only_bytes.reset();
        self.store_dirty_ratio.reset();
        for (tp, p) in stats.partitions() {
            let labels = [tp.topic.as_str(), &tp.partition.to_string()];
            self.partition_bytes.with_label_values(&labels).set(p.remote_bytes as i64);
            self.store_only_bytes.with_label_values(&labels).set(p.store_only_bytes as i64);
            if let Some(state) = &p.store_clean {
                self.store_dirty_ratio.with_label_values(&labels).set(state.dirty_ratio);
            }
            let t = topics.entry(tp.topic.clone()).or_default();
            t.0 += p.remote_bytes as i64;
            t.1 += p.remote_segments as i64;
            t.2 += p.lag_bytes as i64;
            t.3 = t.3.max(p.lag_seconds);
        }
        for v in [&self.bytes, &self.segments, &self.lag_bytes] {
            v.reset();
        }
        self.lag_seconds.reset();
        let mut max = 0.0f64;
        for (topic, (bytes, segments, lag_bytes, lag_seconds)) in topics {
            self.bytes.with_label_values(&[&topic]).set(bytes);
            self.segments.with_label_values(&[&topic]).set(segments);
            self.lag_bytes.with_label_values(&[&topic]).set(lag_bytes);
            self.lag_seconds.with_label_values(&[&topic]).set(lag_seconds);
            max = max.max(lag_seconds);
        }
        self.lag_max_seconds.set(max);
        let c = stats.counters();
        for (kind, n) in c.errors {
            let counter = self.errors.with_label_values(&[kind]);
            counter.inc_by(n.saturating_sub(counter.get()));
        }
        self.uploads.inc_by(c.uploads.saturating_sub(self.uploads.get()));
        self.upload_bytes.inc_by(c.upload_bytes.saturating_sub(self.upload_bytes.get()));
        if c.upload_seconds > self.upload_seconds.get() {
            self.upload_seconds.inc_by(c.upload_seconds - self.upload_seconds.get());
        }
        self.deleted.inc_by(c.deleted_objects.saturating_sub(self.deleted.get()));
        self.store_cleans.inc_by(c.store_cleans.saturating_sub(self.store_cleans.get()));
        let removed = c.store_clean_removed_bytes.saturating_sub(self.store_clean_removed.get());
        self.store_clean_removed.inc_by(removed);
    }
}

impl Metrics {
    /// Export reads from the tiered storage store too (latency, cache).
    ///
    /// # Errors
    /// A metric registered twice.
    pub fn with_remote_reads(self, reads: &RemoteReadStats) -> Result<Self, MetricsError> {
        self.registry.register(Box::new(reads.fetch_seconds.clone()))?;
        self.registry.register(Box::new(reads.cache_hits.clone()))?;
        self.registry.register(Box::new(reads.cache_misses.clone()))?;
        self.registry.register(Box::new(reads.cache_bytes.clone()))?;
        Ok(self)
    }
}

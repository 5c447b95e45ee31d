//! Metrics: a Prometheus registry and the HTTP endpoint that serves it
//! (`metrics.listen`, default `127.0.0.1:9404`).
//!
//! * `GET /metrics`: the Prometheus text format. Kafka's gauges carry the names
//!   the Prometheus JMX exporter gives Kafka's MBeans
//!   (`kafka.log:type=LogCleanerManager,name=max-dirty-percent` →
//!   `kafka_log_logcleanermanager_max_dirty_percent`), so dashboards and
//!   alerts written for Kafka carry over; what Kafka lacks is `sediment_*`.
//! * `GET /cleaner-status`: JSON of every compacted partition (dirty ratio,
//!   cleanable bytes, eligible or why not, last clean) and the gauges; what
//!   `sediment cleaner-status` prints.
//! * `GET /key-audit?topic=T&key=K[&partition=P]`: every copy of one key in a
//!   compacted partition and when compaction guarantees the old ones gone
//!   ([`crate::cleaner::key_audit`]); what `sediment key-audit` prints.
//!
//! Gauges are read fresh from the cleaner manager, the cleaner threads and the
//! logs at each scrape (one scrape at a time), on a blocking thread: reading
//! them takes the logs' read locks. Request metrics are updated by the server
//! as requests complete. Per-partition series of deleted partitions vanish at
//! the next scrape, and so does a partition's
//! `sediment_log_oldest_open_transaction_age_seconds` once its last open
//! transaction ends: the series exists exactly while one is open (a 0 would
//! read as a transaction just opened), so `max by (topic)` or an alert on it
//! sees only real transactions.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ResponseKind;
use parking_lot::Mutex;
use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

pub mod access;
mod auth;
mod authz;
mod cleaner_views;
pub mod cluster;
mod fetch_session;
mod http_server;
mod remote;
mod tls;
mod tombstones;

pub use http_server::serve;

pub use auth::AuthMetrics;
pub use authz::{Denial, DenialRecorder};
pub use fetch_session::FetchSessionMetrics;
pub use tls::TlsMetrics;

use crate::cleaner::{CleanerThreadsStatus, LogCleanerHandle, ManagerStatus};
use crate::log::disk::disk_space;
use crate::log::{Log, LogManager};

/// Errors building the registry or rendering it.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("metrics registry: {0}")]
    Prometheus(#[from] prometheus::Error),
    #[error("metrics output is not UTF-8: {0}")]
    Utf8(#[from] std::string::FromUtf8Error),
    #[error("cleaner status as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Per-API request counters and latency (Kafka's `kafka.network:type=RequestMetrics`),
/// the connections of SSL listeners that failed their TLS handshake, and
/// SASL authentication outcomes (`auth`), TLS reloads (`tls`), authorization
/// denials (`denials`).
#[derive(Debug, Clone)]
pub struct RequestMetrics {
    requests: IntCounterVec,
    errors: IntCounterVec,
    latency: HistogramVec,
    tls_handshake_failures: IntCounterVec,
    pub auth: AuthMetrics,
    pub tls: TlsMetrics,
    pub denials: DenialRecorder,
    pub fetch_sessions: FetchSessionMetrics,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestMetrics {
    pub fn new() -> Self {
        let requests = IntCounterVec::new(
            Opts::new(
                "kafka_network_requestmetrics_requests_total",
                "Requests handled, per API and request version (Kafka's RequestsPerSec)",
            ),
            &["request", "version"],
        )
        .expect("valid metric");
        let errors = IntCounterVec::new(
            Opts::new(
                "kafka_network_requestmetrics_errors_total",
                "Error codes in responses, per API and error (Kafka's ErrorsPerSec); closed connections count as error=\"CONNECTION_CLOSED\"",
            ),
            &["request", "error"],
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "kafka_network_requestmetrics_total_time_seconds",
                "Time from a request's arrival to its response, per API (Kafka's TotalTimeMs)",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0, 30.0,
            ]),
            &["request"],
        )
        .expect("valid metric");
        let tls_handshake_failures = IntCounterVec::new(
            Opts::new(
                "sediment_tls_handshake_failures_total",
                "Connections to an SSL listener closed before the TLS handshake completed, per listener and reason (not_tls, timeout, bad_certificate, protocol)",
            ),
            &["listener", "reason"],
        )
        .expect("valid metric");
        let (auth, tls) = (AuthMetrics::default(), TlsMetrics::default());
        let (denials, fetch_sessions) = (DenialRecorder::default(), FetchSessionMetrics::default());
        Self {
            requests,
            errors,
            latency,
            tls_handshake_failures,
            auth,
            tls,
            denials,
            fetch_sessions,
        }
    }

    /// Count a connection of `listener` whose TLS handshake failed for `reason`.
    pub fn tls_handshake_failed(&self, listener: &str, reason: &str) {
        self.tls_handshake_failures.with_label_values(&[listener, reason]).inc();
    }

    /// One more request of `api` at `version`: the label is a static string
    /// for every version any API has, so the request path allocates nothing.
    fn count_request(&self, api: &str, version: i16) {
        const LABELS: [&str; 32] = [
            "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15",
            "16", "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29",
            "30", "31",
        ];
        match usize::try_from(version).ok().and_then(|v| LABELS.get(v)) {
            Some(label) => self.requests.with_label_values(&[api, label]).inc(),
            None => self.requests.with_label_values(&[api, &version.to_string()]).inc(),
        }
    }

    /// Record a request that owes no response (acks=0 produce).
    pub fn observe_unanswered(&self, api: &str, version: i16, seconds: f64) {
        self.count_request(api, version);
        self.latency.with_label_values(&[api]).observe(seconds);
    }

    /// Record one request of `api` that took `seconds`; `response` is `None`
    /// when the connection was closed instead of answered.
    pub fn observe(&self, api: &str, version: i16, seconds: f64, response: Option<&ResponseKind>) {
        self.count_request(api, version);
        self.latency.with_label_values(&[api]).observe(seconds);
        match response {
            None => self.errors.with_label_values(&[api, "CONNECTION_CLOSED"]).inc(),
            Some(r) => {
                for code in response_error_codes(r) {
                    let name = ResponseError::try_from_code(code)
                        .map_or_else(|| format!("CODE_{code}"), |e| error_name(&e));
                    self.errors.with_label_values(&[api, &name]).inc();
                }
            }
        }
    }
}

/// `UnknownTopicOrPartition` → `UNKNOWN_TOPIC_OR_PARTITION`, as Kafka labels errors.
fn error_name(e: &ResponseError) -> String {
    let debug = format!("{e:?}");
    let mut out = String::with_capacity(debug.len() + 8);
    for (i, c) in debug.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Non-zero error codes in a response (top level and per topic/partition), for
/// the APIs whose errors operators watch.
pub fn response_error_codes(r: &ResponseKind) -> Vec<i16> {
    let codes: Vec<i16> = match r {
        ResponseKind::Produce(p) => p
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
            .collect(),
        ResponseKind::Fetch(f) => std::iter::once(f.error_code)
            .chain(f.responses.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            .collect(),
        ResponseKind::ListOffsets(l) => {
            l.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::Metadata(m) => m.topics.iter().map(|t| t.error_code).collect(),
        ResponseKind::CreateTopics(c) => c.topics.iter().map(|t| t.error_code).collect(),
        ResponseKind::DeleteTopics(d) => d.responses.iter().map(|t| t.error_code).collect(),
        ResponseKind::DeleteRecords(d) => {
            d.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect()
        }
        ResponseKind::AlterConfigs(a) => a.responses.iter().map(|r| r.error_code).collect(),
        ResponseKind::IncrementalAlterConfigs(a) => {
            a.responses.iter().map(|r| r.error_code).collect()
        }
        ResponseKind::ApiVersions(a) => vec![a.error_code],
        ResponseKind::CreateAcls(c) => c.results.iter().map(|r| r.error_code).collect(),
        ResponseKind::DescribeAcls(d) => vec![d.error_code],
        ResponseKind::DeleteAcls(d) => d.filter_results.iter().map(|f| f.error_code).collect(),
        _ => Vec::new(),
    };
    codes.into_iter().filter(|c| *c != 0).collect()
}

/// Gauges refreshed at each scrape.
#[derive(Debug)]
struct Gauges {
    cleaner: CleanerGauges,
    logs: LogGauges,
    late_transactions: IntGauge,
    tombstones: tombstones::TombstoneGauges,
    remote: remote::RemoteGauges,
    cluster: cluster::ClusterGauges,
}

/// Kafka's `ProducerStateManager.LATE_TRANSACTION_BUFFER_MS`: how far past
/// `transaction.max.timeout.ms` an open transaction counts as late.
pub const LATE_TRANSACTION_BUFFER_MS: i64 = 5 * 60 * 1000;

/// Kafka's `hasLateTransaction`: the oldest open transaction's producer last
/// wrote (its entry's last timestamp, a batch's max timestamp) longer ago
/// than the longest timeout a transaction may have plus the buffer; the
/// coordinator would have aborted it by then, so it hangs.
fn has_late_transaction(log: &Log, now_ms: i64, max_timeout_ms: i64) -> bool {
    let Some(txn) = log.producer_state().oldest_ongoing_txn() else { return false };
    let last = log.producer_state().entry(txn.producer_id).map_or(-1, |e| e.last_timestamp());
    last > 0 && now_ms.saturating_sub(last) > max_timeout_ms + LATE_TRANSACTION_BUFFER_MS
}

/// The cleaner's own gauges (Kafka's LogCleaner and LogCleanerManager MBeans).
#[derive(Debug)]
struct CleanerGauges {
    max_dirty_percent: IntGauge,
    time_since_last_run_ms: IntGauge,
    uncleanable_partitions: IntGaugeVec,
    uncleanable_bytes: IntGaugeVec,
    recopy_percent: IntGauge,
    max_clean_time_secs: IntGauge,
    max_buffer_utilization_percent: IntGauge,
    max_compaction_delay_secs: IntGauge,
    dead_threads: IntGauge,
    io_bytes: IntCounter,
    throttle_sleep_seconds: prometheus::Counter,
    io_limit: Gauge,
    cleans: IntCounter,
    threads: IntGauge,
    backoff_seconds: Gauge,
}

/// Per log dir and per partition.
#[derive(Debug)]
struct LogGauges {
    offline_dirs: IntGauge,
    dir_total_bytes: IntGaugeVec,
    dir_usable_bytes: IntGaugeVec,
    log_size: IntGaugeVec,
    log_start: IntGaugeVec,
    log_end: IntGaugeVec,
    log_segments: IntGaugeVec,
    dirty_ratio: GaugeVec,
    cleanable_bytes: IntGaugeVec,
    first_dirty_offset: IntGaugeVec,
    seconds_since_last_clean: GaugeVec,
    last_clean_size_reduction: GaugeVec,
    eligible: IntGaugeVec,
    uncleanable: IntGaugeVec,
    oldest_open_transaction_age: GaugeVec,
    oldest_dirty_age: GaugeVec,
}

/// The registry and what it reads.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    gauges: Gauges,
    logs: Arc<LogManager>,
    cleaner: Arc<LogCleanerHandle>,
    /// One refresh-and-gather at a time, so concurrent scrapes see whole states.
    scrape: Mutex<()>,
    /// `transaction.max.timeout.ms`, for the late transactions count.
    max_transaction_timeout_ms: i64,
    /// The uploader's state, when tiered storage is on.
    remote: Option<Arc<crate::remote::RemoteStats>>,
    /// The cluster member's state, in a cluster.
    cluster: Option<Arc<dyn cluster::ClusterStatus>>,
}

fn int_gauge(r: &Registry, name: &str, help: &str) -> Result<IntGauge, prometheus::Error> {
    let g = IntGauge::new(name, help)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

fn int_gauge_vec(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<IntGaugeVec, prometheus::Error> {
    let g = IntGaugeVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

fn gauge_vec(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<GaugeVec, prometheus::Error> {
    let g = GaugeVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

impl CleanerGauges {
    fn register(r: &Registry) -> Result<Self, MetricsError> {
        let io_bytes = IntCounter::new("sediment_log_cleaner_io_bytes_total", "Bytes the cleaner threads read and wrote (what log.cleaner.io.max.bytes.per.second limits)")?;
        r.register(Box::new(io_bytes.clone()))?;
        let throttle_sleep_seconds = prometheus::Counter::new(
            "sediment_log_cleaner_throttle_sleep_seconds_total",
            "Time the cleaner threads slept to stay under the I/O limit",
        )?;
        r.register(Box::new(throttle_sleep_seconds.clone()))?;
        let io_limit = Gauge::new(
            "sediment_log_cleaner_io_limit_bytes_per_second",
            "log.cleaner.io.max.bytes.per.second; 0 when unlimited",
        )?;
        r.register(Box::new(io_limit.clone()))?;
        let cleans = IntCounter::new("sediment_log_cleaner_cleans_total", "Cleans completed")?;
        r.register(Box::new(cleans.clone()))?;
        let backoff_seconds = Gauge::new("sediment_log_cleaner_backoff_seconds", "log.cleaner.backoff.ms in seconds: how long an idle cleaner thread sleeps between passes")?;
        r.register(Box::new(backoff_seconds.clone()))?;
        Ok(Self {
            max_dirty_percent: int_gauge(
                r,
                "kafka_log_logcleanermanager_max_dirty_percent",
                "Highest dirty ratio (percent) among compacted logs at the cleaner's last choice",
            )?,
            time_since_last_run_ms: int_gauge(
                r,
                "kafka_log_logcleanermanager_time_since_last_run_ms",
                "Milliseconds since a cleaner thread last finished a pass",
            )?,
            uncleanable_partitions: int_gauge_vec(
                r,
                "kafka_log_logcleanermanager_uncleanable_partitions_count",
                "Partitions whose last clean failed",
                &["logDirectory"],
            )?,
            uncleanable_bytes: int_gauge_vec(
                r,
                "kafka_log_logcleanermanager_uncleanable_bytes",
                "Cleanable bytes of the uncleanable partitions",
                &["logDirectory"],
            )?,
            recopy_percent: int_gauge(
                r,
                "kafka_log_logcleaner_cleaner_recopy_percent",
                "Bytes written per byte read by the threads' last cleans, percent",
            )?,
            max_clean_time_secs: int_gauge(
                r,
                "kafka_log_logcleaner_max_clean_time_secs",
                "Longest of the threads' last cleans, seconds",
            )?,
            max_buffer_utilization_percent: int_gauge(
                r,
                "kafka_log_logcleaner_max_buffer_utilization_percent",
                "Fullest offset map of the threads' last cleans, percent",
            )?,
            max_compaction_delay_secs: int_gauge(
                r,
                "kafka_log_logcleaner_max_compaction_delay_secs",
                "How far past max.compaction.lag.ms the most overdue log is, seconds",
            )?,
            dead_threads: int_gauge(
                r,
                "kafka_log_logcleaner_deadthreadcount",
                "Cleaner threads that died",
            )?,
            io_bytes,
            throttle_sleep_seconds,
            io_limit,
            cleans,
            threads: int_gauge(
                r,
                "sediment_log_cleaner_threads",
                "Cleaner threads started (log.cleaner.threads; 0 when log.cleaner.enable=false)",
            )?,
            backoff_seconds,
        })
    }
}

impl LogGauges {
    fn register(r: &Registry) -> Result<Self, MetricsError> {
        const TP: &[&str] = &["topic", "partition"];
        Ok(Self {
            offline_dirs: int_gauge(
                r,
                "kafka_log_logmanager_offlinelogdirectorycount",
                "Log dirs taken offline after an I/O error; their partitions answer KAFKA_STORAGE_ERROR until a restart",
            )?,
            dir_total_bytes: int_gauge_vec(
                r,
                "sediment_log_dir_total_bytes",
                "Size of the file system holding the log dir",
                &["log_dir"],
            )?,
            dir_usable_bytes: int_gauge_vec(
                r,
                "sediment_log_dir_usable_bytes",
                "Bytes of the file system holding the log dir that the broker may still use",
                &["log_dir"],
            )?,
            log_size: int_gauge_vec(
                r,
                "kafka_log_log_size",
                "Bytes of all segments of the partition",
                TP,
            )?,
            log_start: int_gauge_vec(r, "kafka_log_log_logstartoffset", "Log start offset", TP)?,
            log_end: int_gauge_vec(r, "kafka_log_log_logendoffset", "Log end offset", TP)?,
            log_segments: int_gauge_vec(
                r,
                "kafka_log_log_numlogsegments",
                "Segments of the partition",
                TP,
            )?,
            dirty_ratio: gauge_vec(
                r,
                "sediment_log_cleaner_dirty_ratio",
                "Dirty bytes / (clean + dirty bytes) of a compacted partition",
                TP,
            )?,
            cleanable_bytes: int_gauge_vec(
                r,
                "sediment_log_cleaner_cleanable_bytes",
                "Bytes between the first dirty and the first uncleanable offset",
                TP,
            )?,
            first_dirty_offset: int_gauge_vec(
                r,
                "sediment_log_cleaner_first_dirty_offset",
                "Where the next clean starts (the cleaner checkpoint)",
                TP,
            )?,
            seconds_since_last_clean: gauge_vec(
                r,
                "sediment_log_cleaner_seconds_since_last_clean",
                "Seconds since the partition's last successful clean (absent: none since start)",
                TP,
            )?,
            last_clean_size_reduction: gauge_vec(
                r,
                "sediment_log_cleaner_last_clean_size_reduction_ratio",
                "1 - end size / start size of the partition's last clean",
                TP,
            )?,
            eligible: int_gauge_vec(
                r,
                "sediment_log_cleaner_eligible",
                "1 when the partition would be cleaned now",
                TP,
            )?,
            uncleanable: int_gauge_vec(
                r,
                "sediment_log_cleaner_uncleanable",
                "1 when the partition's last clean failed",
                TP,
            )?,
            oldest_dirty_age: gauge_vec(
                r,
                "sediment_log_cleaner_oldest_dirty_age_seconds",
                "Age of the first record at or past the cleaner checkpoint, by record time (0: nothing dirty). Every copy superseded by an older record went with the last clean, so no unerased superseded copy has waited longer than this",
                TP,
            )?,
            oldest_open_transaction_age: gauge_vec(
                r,
                "sediment_log_oldest_open_transaction_age_seconds",
                "Age of the partition's oldest open transaction, the one its last stable offset and the cleaner wait for (absent: none open)",
                TP,
            )?,
        })
    }
}

impl Metrics {
    /// Register every metric (request metrics are the server's, shared).
    ///
    /// # Errors
    /// A registration conflict (a bug).
    pub fn new(
        logs: Arc<LogManager>,
        cleaner: Arc<LogCleanerHandle>,
        requests: &RequestMetrics,
    ) -> Result<Self, MetricsError> {
        let r = Registry::new();
        r.register(Box::new(requests.requests.clone()))?;
        r.register(Box::new(requests.errors.clone()))?;
        r.register(Box::new(requests.latency.clone()))?;
        r.register(Box::new(requests.tls_handshake_failures.clone()))?;
        requests.auth.register(&r)?;
        requests.tls.register(&r)?;
        requests.denials.register(&r)?;
        requests.fetch_sessions.register(&r)?;
        #[cfg(target_os = "linux")]
        r.register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))?;
        let late_transactions = int_gauge(
            &r,
            "kafka_server_replicamanager_partitionswithlatetransactionscount",
            "Partitions whose oldest open transaction's producer last wrote more than transaction.max.timeout.ms + 5 minutes ago (KIP-664): hanging transactions",
        )?;
        let gauges = Gauges {
            cleaner: CleanerGauges::register(&r)?,
            logs: LogGauges::register(&r)?,
            late_transactions,
            tombstones: tombstones::TombstoneGauges::register(&r)?,
            remote: remote::RemoteGauges::register(&r)?,
            cluster: cluster::ClusterGauges::register(&r)?,
        };
        Ok(Self {
            registry: r,
            gauges,
            logs,
            cleaner,
            scrape: Mutex::new(()),
            max_transaction_timeout_ms: 900_000,
            remote: None,
            cluster: None,
        })
    }

    /// Count a transaction as late past `ms` (`transaction.max.timeout.ms`,
    /// Kafka's default 900000 otherwise) plus the buffer.
    #[must_use]
    pub fn with_max_transaction_timeout_ms(mut self, ms: i64) -> Self {
        self.max_transaction_timeout_ms = ms;
        self
    }

    /// Export tiered storage's state too.
    #[must_use]
    pub fn with_remote(mut self, stats: Arc<crate::remote::RemoteStats>) -> Self {
        self.remote = Some(stats);
        self
    }

    /// The cleaner's own gauges, from the manager's status and the threads'.
    fn refresh_cleaner(&self, status: &ManagerStatus, threads: &CleanerThreadsStatus) {
        let g = &self.gauges;
        g.cleaner.max_dirty_percent.set(status.max_dirty_percent);
        g.cleaner.time_since_last_run_ms.set(status.time_since_last_run_ms);
        g.cleaner.max_compaction_delay_secs.set(status.max_compaction_delay_ms / 1000);
        g.cleaner.uncleanable_partitions.reset();
        g.cleaner.uncleanable_bytes.reset();
        for d in &status.log_dirs {
            g.cleaner
                .uncleanable_partitions
                .with_label_values(&[&d.log_dir])
                .set(d.uncleanable_partitions as i64);
            g.cleaner
                .uncleanable_bytes
                .with_label_values(&[&d.log_dir])
                .set(d.uncleanable_bytes as i64);
        }
        g.cleaner.recopy_percent.set(threads.cleaner_recopy_percent);
        g.cleaner.max_clean_time_secs.set(threads.max_clean_time_secs);
        g.cleaner.max_buffer_utilization_percent.set(threads.max_buffer_utilization_percent);
        g.cleaner.dead_threads.set(threads.dead_thread_count as i64);
        g.cleaner.io_bytes.inc_by(threads.io_bytes_total.saturating_sub(g.cleaner.io_bytes.get()));
        let slept = threads.throttle_sleep_ms_total as f64 / 1000.0;
        if slept > g.cleaner.throttle_sleep_seconds.get() {
            g.cleaner.throttle_sleep_seconds.inc_by(slept - g.cleaner.throttle_sleep_seconds.get());
        }
        g.cleaner.io_limit.set(threads.io_limit_bytes_per_second.unwrap_or(0.0));
        g.cleaner.cleans.inc_by(threads.cleans_total.saturating_sub(g.cleaner.cleans.get()));
        g.cleaner.threads.set(threads.threads as i64);
        g.cleaner.backoff_seconds.set(self.cleaner.config().backoff_ms as f64 / 1000.0);
    }

    fn refresh(&self) {
        let g = &self.gauges;
        let status = self.cleaner.manager_status();
        let threads = self.cleaner.threads_status();
        self.refresh_cleaner(&status, &threads);
        g.logs.offline_dirs.set(self.logs.offline_dirs().len() as i64);
        g.logs.dir_total_bytes.reset();
        g.logs.dir_usable_bytes.reset();
        for dir in &self.logs.config().log_dirs {
            // Labelled as the config names the dir, like the cleaner's logDirectory.
            let label = dir.display().to_string();
            if let Some((total, usable)) = disk_space(dir) {
                g.logs.dir_total_bytes.with_label_values(&[&label]).set(total);
                g.logs.dir_usable_bytes.with_label_values(&[&label]).set(usable);
            }
        }

        for v in [
            &g.logs.log_size,
            &g.logs.log_start,
            &g.logs.log_end,
            &g.logs.log_segments,
            &g.logs.cleanable_bytes,
            &g.logs.first_dirty_offset,
            &g.logs.eligible,
            &g.logs.uncleanable,
        ] {
            v.reset();
        }
        for v in [
            &g.logs.dirty_ratio,
            &g.logs.seconds_since_last_clean,
            &g.logs.last_clean_size_reduction,
            &g.logs.oldest_open_transaction_age,
            &g.logs.oldest_dirty_age,
        ] {
            v.reset();
        }
        let now = self.logs.clock().now_ms();
        let mut late = 0;
        for (tp, log) in self.logs.all_logs() {
            let log = log.read();
            let labels = [tp.topic.as_str(), &tp.partition.to_string()];
            g.logs.log_size.with_label_values(&labels).set(log.size() as i64);
            g.logs.log_start.with_label_values(&labels).set(log.log_start_offset());
            g.logs.log_end.with_label_values(&labels).set(log.log_end_offset());
            g.logs.log_segments.with_label_values(&labels).set(log.segments().len() as i64);
            // The producer state's first entry: no I/O under the read lock. The
            // loader dates every open transaction, so the start is known.
            if let Some(txn) = log.producer_state().oldest_ongoing_txn() {
                let age_ms = now.saturating_sub(txn.start_timestamp_ms.max(0)).max(0);
                g.logs
                    .oldest_open_transaction_age
                    .with_label_values(&labels)
                    .set(age_ms as f64 / 1000.0);
            }
            late += i64::from(has_late_transaction(&log, now, self.max_transaction_timeout_ms));
        }
        g.late_transactions.set(late);
        self.refresh_cluster();
        g.tombstones.refresh(&status.partitions, status.now_ms);
        g.remote.refresh(self.remote.as_deref().unwrap_or(&crate::remote::RemoteStats::default()));
        for p in &status.partitions {
            let labels = [p.topic.as_str(), &p.partition.to_string()];
            g.logs.dirty_ratio.with_label_values(&labels).set(p.dirty_ratio);
            g.logs.cleanable_bytes.with_label_values(&labels).set(p.cleanable_bytes as i64);
            g.logs.first_dirty_offset.with_label_values(&labels).set(p.first_dirty_offset);
            // Nothing dirty: 0; dirty batches without a timestamp: no series.
            let dirty_age_ms = if p.first_dirty_offset >= p.log_end_offset {
                Some(0)
            } else {
                p.oldest_dirty_timestamp_ms.map(|t| (status.now_ms - t).max(0))
            };
            if let Some(ms) = dirty_age_ms {
                g.logs.oldest_dirty_age.with_label_values(&labels).set(ms as f64 / 1000.0);
            }
            g.logs.eligible.with_label_values(&labels).set(i64::from(p.eligible));
            g.logs
                .uncleanable
                .with_label_values(&labels)
                .set(i64::from(p.uncleanable_cause.is_some()));
            if let Some(last) = &p.last_clean {
                g.logs
                    .seconds_since_last_clean
                    .with_label_values(&labels)
                    .set((status.now_ms - last.end_time_ms).max(0) as f64 / 1000.0);
                g.logs
                    .last_clean_size_reduction
                    .with_label_values(&labels)
                    .set(last.size_reduction);
            }
        }
    }

    /// Refresh the gauges and render the Prometheus text format.
    ///
    /// # Errors
    /// Encoding failures (a bug).
    pub fn render(&self) -> Result<String, MetricsError> {
        let _one = self.scrape.lock();
        self.refresh();
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out)?;
        Ok(String::from_utf8(out)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The open-transaction series over a log with a mock clock: the age
    /// exactly, and the late count past `transaction.max.timeout.ms` + 5 min.
    #[test]
    fn open_transactions_are_aged_and_late_ones_counted() {
        use crate::cleaner::{LogCleaner, LogCleanerConfig};
        use crate::clock::{Clock, MockClock};
        use crate::log::compression::Compression;
        use crate::log::control_record::EndTransactionMarker;
        use crate::log::record_batch::BatchBuilder;
        use crate::log::{LogManagerConfig, TopicPartition};
        let dir = tempfile::tempdir().unwrap();
        let clock = MockClock::new(1_000_000);
        let logs =
            Arc::new(LogManager::open(LogManagerConfig::new(dir.path()), clock.clone()).unwrap());
        let config = LogCleanerConfig { enable: false, ..Default::default() };
        let cleaner =
            LogCleaner::start(config, Arc::clone(&logs), clock.clone(), Default::default())
                .unwrap();
        let metrics =
            Metrics::new(Arc::clone(&logs), Arc::clone(cleaner.handle()), &RequestMetrics::new())
                .unwrap()
                .with_max_transaction_timeout_ms(1_000);
        logs.create_topic("t", 2, Default::default()).unwrap();
        let log = logs.get_log(&TopicPartition::new("t", 1)).unwrap();
        let value = |series: &str| {
            let text = metrics.render().unwrap();
            text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
        };
        let age = "sediment_log_oldest_open_transaction_age_seconds{partition=\"1\",topic=\"t\"}";
        let late = "kafka_server_replicamanager_partitionswithlatetransactionscount";
        assert_eq!((value(age), value(late)), (None, Some(0.0)), "nothing open");
        let mut b = BatchBuilder::new(Compression::None, clock.now_ms()).producer(7, 0, 0);
        b.transactional = true;
        b.append(clock.now_ms(), Some(b"k"), Some(b"v"));
        log.write().append_as_leader(&mut b.build()).unwrap();
        assert_eq!((value(age), value(late)), (Some(0.0), Some(0.0)));
        clock.advance(301_000);
        assert_eq!((value(age), value(late)), (Some(301.0), Some(0.0)), "not past the buffer yet");
        clock.advance(1);
        assert_eq!((value(age), value(late)), (Some(301.001), Some(1.0)), "late");
        log.write().append_end_txn_marker(7, 0, EndTransactionMarker::commit(0)).unwrap();
        assert_eq!((value(age), value(late)), (None, Some(0.0)), "committed: the series is gone");
        assert!(!metrics.render().unwrap().contains("sediment_log_oldest_open_transaction_age"));
    }

    #[test]
    fn error_names_follow_kafka() {
        assert_eq!(
            error_name(&ResponseError::UnknownTopicOrPartition),
            "UNKNOWN_TOPIC_OR_PARTITION"
        );
        assert_eq!(error_name(&ResponseError::InvalidConfig), "INVALID_CONFIG");
    }

    #[test]
    fn request_metrics_count_errors_per_code() {
        use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
        use kafka_protocol::messages::DeleteTopicsResponse;
        let m = RequestMetrics::new();
        let r = ResponseKind::DeleteTopics(DeleteTopicsResponse::default().with_responses(vec![
            DeletableTopicResult::default().with_error_code(3),
            DeletableTopicResult::default(),
        ]));
        m.observe("DeleteTopics", 6, 0.002, Some(&r));
        m.observe("Produce", 9, 0.1, None);
        assert_eq!(m.requests.with_label_values(&["DeleteTopics", "6"]).get(), 1);
        assert_eq!(
            m.errors.with_label_values(&["DeleteTopics", "UNKNOWN_TOPIC_OR_PARTITION"]).get(),
            1
        );
        assert_eq!(m.errors.with_label_values(&["Produce", "CONNECTION_CLOSED"]).get(), 1);
        assert_eq!(m.latency.with_label_values(&["Produce"]).get_sample_count(), 1);
    }
}

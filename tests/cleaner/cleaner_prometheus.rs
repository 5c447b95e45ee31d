//! A real Prometheus server (Debian's `prometheus` package) scrapes the
//! broker's `/metrics` after a clean; its HTTP query API returns the cleaner's
//! gauges with the values the clean implies, and `promtool check metrics`
//! accepts the endpoint's output.

use crate::broker;

use std::time::{Duration, Instant};

use crate::broker::{
    cleaner_checkpoint, create_topic, now_ms, produce, promtool_check_metrics, Prometheus,
    TestBroker, Wire,
};

/// The value of an instant query with exactly one series, once Prometheus has one.
fn query(prometheus: &Prometheus, promql: &str) -> Option<f64> {
    let result = prometheus.query(promql);
    if result.is_empty() {
        return None;
    }
    assert_eq!(result.len(), 1, "{promql}: one series expected: {result:?}");
    result[0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn prometheus_scrapes_the_cleaner_gauges() {
    let b = TestBroker::start(&["log.cleaner.backoff.ms=100"]);
    create_topic(
        b.port,
        "prices",
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    // Ten rounds over ten keys, one equal-sized batch per round; then one
    // record two seconds (of record time) later, which rolls the segment.
    let mut w = Wire::connect(b.port);
    let t = now_ms() - 60_000;
    for round in 0..10 {
        let records: Vec<_> =
            (0..10).map(|k| (format!("k{k}"), Some(format!("price-{round}-{k}")))).collect();
        produce(&mut w, "prices", 0, t, &records);
    }
    produce(&mut w, "prices", 0, t + 2_000, &[("k0".into(), Some("price-final".into()))]);
    b.wait_for(15, "the clean", || {
        cleaner_checkpoint(&b.data_dir(), "prices", 0).filter(|o| *o == 100)
    });
    let records = broker::fetch_all(b.port, "prices", 0);
    let offsets: Vec<i64> = records.iter().map(|r| r.0).collect();
    assert_eq!(
        offsets,
        (90..=100).collect::<Vec<_>>(),
        "only the last round and the active segment remain"
    );

    // promtool on the endpoint's own output. It parses it (a format error is
    // reported as "error while linting") and lints the names. The only
    // findings allowed are the ones the Kafka names themselves cause — the
    // names the JMX exporter gives Kafka's MBeans, kept so dashboards and
    // alerts carry over (`_ms`, `logDirectory`, `_count` on a gauge); any
    // other finding fails the test.
    let text = b.metrics();
    let (_, report) = promtool_check_metrics(&text);
    let mut findings: Vec<&str> = report.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    findings.sort_unstable();
    assert_eq!(
        findings,
        vec![
            "kafka_log_logcleanermanager_time_since_last_run_ms metric names should not contain abbreviated units",
            "kafka_log_logcleanermanager_uncleanable_bytes label names should be written in 'snake_case' not 'camelCase'",
            "kafka_log_logcleanermanager_uncleanable_partitions_count label names should be written in 'snake_case' not 'camelCase'",
            "kafka_log_logcleanermanager_uncleanable_partitions_count non-histogram and non-summary metrics should not have \"_count\" suffix",
        ],
        "promtool check metrics found more than the Kafka names' own lint:\n{report}"
    );
    // And with those Kafka-named series left out, promtool passes outright.
    let kafka_named = [
        "kafka_log_logcleanermanager_time_since_last_run_ms",
        "kafka_log_logcleanermanager_uncleanable_bytes",
        "kafka_log_logcleanermanager_uncleanable_partitions_count",
    ];
    let rest: String = text
        .lines()
        .filter(|l| !kafka_named.iter().any(|n| l.contains(n)))
        .map(|l| format!("{l}\n"))
        .collect();
    let (passed, report) = promtool_check_metrics(&rest);
    assert!(passed, "promtool check metrics:\n{report}");

    // A real Prometheus scraping every second.
    let prometheus = Prometheus::start(&format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sediment\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
        b.metrics_port
    ));
    let wait_query = |promql: &str| -> f64 {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut value = None;
        prometheus.wait_until(
            deadline,
            Duration::from_millis(200),
            &format!("no {promql}"),
            &mut || {
                value = if prometheus.ready() { query(&prometheus, promql) } else { None };
                value.is_some()
            },
        );
        value.expect("the wait ends with a value")
    };
    assert_eq!(wait_query("up{job=\"sediment\"}"), 1.0, "the target is up");
    let data_dir = b.data_dir().display().to_string();
    let part = "topic=\"prices\",partition=\"0\"";
    assert_eq!(wait_query("kafka_log_logcleanermanager_max_dirty_percent"), 0.0);
    assert_eq!(wait_query(&format!("kafka_log_logcleanermanager_uncleanable_partitions_count{{logDirectory=\"{data_dir}\"}}")), 0.0);
    assert_eq!(
        wait_query(&format!(
            "kafka_log_logcleanermanager_uncleanable_bytes{{logDirectory=\"{data_dir}\"}}"
        )),
        0.0
    );
    // One batch of ten survives out of ten equal ones: 10% recopied.
    assert_eq!(wait_query("kafka_log_logcleaner_cleaner_recopy_percent"), 10.0);
    assert_eq!(wait_query("kafka_log_logcleaner_deadthreadcount"), 0.0);
    assert_eq!(wait_query("kafka_log_logcleaner_max_compaction_delay_secs"), 0.0);
    let utilization = wait_query("kafka_log_logcleaner_max_buffer_utilization_percent");
    assert_eq!(utilization, 0.0, "10 keys in a 128 MiB map round down to 0%");
    assert!(
        wait_query("kafka_log_logcleanermanager_time_since_last_run_ms") < 10_000.0,
        "the thread loops every backoff"
    );
    assert_eq!(wait_query("sediment_log_cleaner_cleans_total"), 1.0);
    assert!(wait_query("sediment_log_cleaner_io_bytes_total") > 0.0);
    assert_eq!(wait_query(&format!("sediment_log_cleaner_first_dirty_offset{{{part}}}")), 100.0);
    assert_eq!(wait_query(&format!("sediment_log_cleaner_dirty_ratio{{{part}}}")), 0.0);
    assert_eq!(wait_query(&format!("kafka_log_log_logendoffset{{{part}}}")), 101.0);
    assert_eq!(wait_query(&format!("kafka_log_log_logstartoffset{{{part}}}")), 0.0);
    let on_disk: u64 = std::fs::read_dir(b.data_dir().join("prices-0"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert_eq!(wait_query(&format!("kafka_log_log_size{{{part}}}")), on_disk as f64);
    assert!(
        wait_query("sum(kafka_network_requestmetrics_requests_total{request=\"Produce\"})") >= 11.0
    );
    assert!(wait_query("process_resident_memory_bytes") > 0.0);
}

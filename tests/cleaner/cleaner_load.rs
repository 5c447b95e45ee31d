//! Load: continuous produce to 50 compacted partitions while 2 cleaner threads
//! run under a shared 3 MB/s throttle. The broker keeps serving (every produce
//! succeeds, with bounded latency), the cleaner's measured I/O stays within 10%
//! of its limit, max-dirty-percent stays bounded, and every partition still
//! holds the newest value of every key. The figures are printed (run with
//! `--nocapture` to see them).

use crate::broker;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::broker::{create_topic, fetch_all, now_ms, produce, TestBroker, Wire};

const PARTITIONS: i32 = 50;
const KEYS: usize = 400;
const LIMIT: f64 = 3_000_000.0;
const RUN: Duration = Duration::from_secs(30);
/// Total produce rate the two producers pace themselves to.
/// Total produce rate the two producers pace themselves to: about a third of
/// the cleaner's budget, which (each clean re-reading its partition's clean
/// region too) keeps the cleaner busy without outrunning it.
const PRODUCE_BYTES_PER_SEC: f64 = 1_000_000.0;

#[test]
fn fifty_partitions_two_throttled_threads() {
    let b = TestBroker::start(&[
        "log.cleaner.threads=2",
        "log.cleaner.io.max.bytes.per.second=3000000",
        "log.cleaner.backoff.ms=200",
        "log.cleaner.dedupe.buffer.size=33554432",
    ]);
    create_topic(
        b.port,
        "load",
        PARTITIONS,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "32768"),
            ("min.cleanable.dirty.ratio", "0.5"),
        ],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let value_len = 100;
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let stop = Arc::clone(&stop);
            let port = b.port;
            std::thread::spawn(move || {
                let mut w = Wire::connect(port);
                let mut latest: BTreeMap<(i32, String), String> = BTreeMap::new();
                let mut latencies = Vec::new();
                let mut sent = 0u64;
                let start = Instant::now();
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for partition in (p..PARTITIONS).step_by(2) {
                        let records: Vec<_> = (0..50)
                            .map(|i| {
                                let key = format!(
                                    "key-{:04}",
                                    (seq as usize * 50 + i * 7 + partition as usize) % KEYS
                                );
                                let value = format!("{seq:010}-{}", "v".repeat(value_len - 11));
                                (key, Some(value))
                            })
                            .collect();
                        let bytes: u64 = records
                            .iter()
                            .map(|(k, v)| (k.len() + v.as_ref().map_or(0, String::len)) as u64)
                            .sum();
                        let t = Instant::now();
                        produce(&mut w, "load", partition, now_ms(), &records);
                        latencies.push(t.elapsed());
                        for (k, v) in records {
                            latest.insert((partition, k), v.unwrap());
                        }
                        sent += bytes;
                        seq += 1;
                        // Pace to this producer's half of the target rate.
                        let due =
                            Duration::from_secs_f64(sent as f64 / (PRODUCE_BYTES_PER_SEC / 2.0));
                        if let Some(wait) = due.checked_sub(start.elapsed()) {
                            std::thread::sleep(wait);
                        }
                    }
                }
                (latest, latencies, sent)
            })
        })
        .collect();

    // Sample the endpoint once a second.
    let series = |text: &str, name: &str| {
        broker::metric_value(text, name).unwrap_or_else(|| panic!("{name} missing"))
    };
    let start = Instant::now();
    let mut samples: Vec<(f64, f64, f64, f64)> = Vec::new(); // (secs, io bytes, max dirty %, cleans)
    while start.elapsed() < RUN {
        std::thread::sleep(Duration::from_secs(1));
        let text = b.metrics();
        samples.push((
            start.elapsed().as_secs_f64(),
            series(&text, "sediment_log_cleaner_io_bytes_total"),
            series(&text, "kafka_log_logcleanermanager_max_dirty_percent"),
            series(&text, "sediment_log_cleaner_cleans_total"),
        ));
    }
    stop.store(true, Ordering::Relaxed);
    let mut latest = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut sent = 0;
    for p in producers {
        let (l, lat, s) = p.join().expect("producer");
        latest.extend(l);
        latencies.extend(lat);
        sent += s;
    }
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    let max_latency = *latencies.last().unwrap();

    // Cleaner I/O: over the whole run from the first sample, and per 5 s window.
    // From the first sample in which the cleaner had started (segments roll after ~1.6 s).
    let first_active = samples.iter().position(|s| s.1 > 0.0).expect("the cleaner never ran");
    let (t0, io0, ..) = samples[first_active.saturating_sub(1)];
    let (t1, io1, _, cleans) = *samples.last().unwrap();
    let overall = (io1 - io0) / (t1 - t0);
    let windows: Vec<f64> =
        samples.windows(6).map(|w| (w[5].1 - w[0].1) / (w[5].0 - w[0].0)).collect();
    let max_window = windows.iter().copied().fold(0.0, f64::max);
    let dirty: Vec<f64> = samples.iter().map(|s| s.2).collect();
    let second_half = &dirty[dirty.len() / 2..];
    eprintln!(
        "load figures: {} produce requests ({:.2} MB in {:.0} s, {:.0} KB/s), produce latency p99 {:?} max {:?}; \
         cleaner I/O {:.2} MB/s overall ({:.1}% of the {:.1} MB/s limit), busiest 5 s window {:.2} MB/s ({:.1}%); \
         {} cleans; max-dirty-percent per second: {:?}",
        latencies.len(),
        sent as f64 / 1e6,
        RUN.as_secs_f64(),
        sent as f64 / 1e3 / RUN.as_secs_f64(),
        p99,
        max_latency,
        overall / 1e6,
        100.0 * overall / LIMIT,
        LIMIT / 1e6,
        max_window / 1e6,
        100.0 * max_window / LIMIT,
        cleans,
        dirty
    );

    // The broker kept serving: every produce succeeded (asserted in `produce`) and quickly.
    assert!(p99 < Duration::from_millis(500), "produce p99 {p99:?}");
    // The throttle held: within 10% of the limit, overall and in every 5 s window.
    assert!(overall <= LIMIT * 1.1, "cleaner I/O {overall} bytes/s over a {LIMIT} limit");
    assert!(max_window <= LIMIT * 1.1, "a 5 s window at {max_window} bytes/s");
    // The cleaner was the bottleneck, not idle: it used most of its budget.
    assert!(
        overall >= LIMIT * 0.5,
        "cleaner I/O {overall} bytes/s: the workload did not load the cleaner"
    );
    // max-dirty-percent stayed bounded: it never pinned at 100 once the cleaner got going.
    assert!(second_half.iter().all(|d| *d < 95.0), "max-dirty-percent {dirty:?}");
    assert_eq!(b.metric("kafka_log_logcleaner_deadthreadcount"), Some(0.0));

    // No key lost anywhere.
    for partition in 0..PARTITIONS {
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for (_, k, v) in fetch_all(b.port, "load", partition) {
            seen.insert(k.unwrap(), v.unwrap());
        }
        for ((p, k), v) in latest.range((partition, String::new())..(partition + 1, String::new()))
        {
            assert_eq!(seen.get(k), Some(v), "{p}: newest value of {k}");
        }
    }
}

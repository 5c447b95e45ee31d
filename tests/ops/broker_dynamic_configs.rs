//! Live cleaner tuning with Kafka's kafka-configs: the cleaner's thread
//! count and I/O limit altered at the cluster-default and per-broker levels
//! while a compaction load runs, seen in /metrics without a restart, kept
//! across one, and described with Kafka's sources; Kafka's refusals for a
//! static key and for more than doubling the threads.

use crate::broker;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::broker::{
    create_topic, kafka_tool, kafka_tool_output, now_ms, produce, TestBroker, Wire,
};

const CONFIGS: &str = "kafka.admin.ConfigCommand";

fn configs(b: &TestBroker, args: &[&str]) -> String {
    let bs = b.bootstrap();
    let mut all = vec!["--bootstrap-server", bs.as_str()];
    all.extend_from_slice(args);
    kafka_tool(b, CONFIGS, &all, None)
}

fn configs_refused(b: &TestBroker, args: &[&str]) -> String {
    let bs = b.bootstrap();
    let mut all = vec!["--bootstrap-server", bs.as_str()];
    all.extend_from_slice(args);
    let (ok, out, err) = kafka_tool_output(CONFIGS, &all, None);
    assert!(!ok, "{args:?} must be refused:\n{out}");
    err
}

/// Keep rewriting the same keys of every partition of `state`, with record
/// timestamps a second apart so each batch rolls a segment.
fn compaction_load(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut w = Wire::connect(port);
        let mut round = 0u64;
        let mut ts = now_ms();
        while !stop.load(Ordering::Relaxed) {
            for p in 0..4 {
                let records: Vec<(String, Option<String>)> = (0..200)
                    .map(|k| (format!("key-{k}"), Some(format!("{round}-{}", "v".repeat(200)))))
                    .collect();
                produce(&mut w, "state", p, ts, &records);
            }
            ts += 1_000;
            round += 1;
        }
        round
    })
}

#[test]
fn kafka_configs_retunes_the_cleaner_live_and_durably() {
    let mut b = TestBroker::start(&["log.cleaner.threads=1", "log.cleaner.backoff.ms=100"]);
    create_topic(
        b.port,
        "state",
        4,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let load = compaction_load(b.port, Arc::clone(&stop));
    b.wait_for(60, "a first clean", || {
        b.metric("sediment_log_cleaner_cleans_total").filter(|n| *n > 0.0)
    });
    assert_eq!(b.metric("sediment_log_cleaner_threads"), Some(1.0));

    // Kafka's bounds: at most double the current count in one change.
    let err = configs_refused(
        &b,
        &[
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--add-config",
            "log.cleaner.threads=4",
        ],
    );
    assert!(
        err.contains(
            "Log cleaner threads cannot be increased to more than double the current value 1"
        ),
        "{err}"
    );
    let err = configs_refused(
        &b,
        &[
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--add-config",
            "num.partitions=3",
        ],
    );
    assert!(err.contains("Cannot update these configs dynamically: Set(num.partitions)"), "{err}");

    configs(
        &b,
        &[
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--add-config",
            "log.cleaner.threads=2,log.cleaner.io.max.bytes.per.second=50000000",
        ],
    );
    configs(
        &b,
        &[
            "--entity-type",
            "brokers",
            "--entity-name",
            "1",
            "--alter",
            "--add-config",
            "log.cleaner.threads=4",
        ],
    );
    b.wait_for(20, "four cleaner threads and the new limit in /metrics", || {
        let text = b.metrics();
        let threads = broker::metric_value(&text, "sediment_log_cleaner_threads");
        let limit = broker::metric_value(&text, "sediment_log_cleaner_io_limit_bytes_per_second");
        (threads == Some(4.0) && limit == Some(5e7)).then_some(())
    });
    // The new pool cleans.
    let before = b.metric("sediment_log_cleaner_cleans_total").unwrap_or(0.0);
    b.wait_for(60, "cleans by the new threads", || {
        b.metric("sediment_log_cleaner_cleans_total").filter(|n| *n > before)
    });
    stop.store(true, Ordering::Relaxed);
    assert!(load.join().expect("the load thread") > 0);
    assert_eq!(b.metric("kafka_log_logcleaner_deadthreadcount"), Some(0.0));

    let shown = configs(&b, &["--describe", "--entity-type", "brokers", "--entity-default"]);
    assert!(shown.contains("log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2, STATIC_BROKER_CONFIG:log.cleaner.threads=1, DEFAULT_CONFIG:log.cleaner.threads=1}"), "{shown}");
    assert!(shown.contains("log.cleaner.io.max.bytes.per.second=50000000"), "{shown}");
    let shown = configs(&b, &["--describe", "--entity-type", "brokers", "--entity-name", "1"]);
    assert!(shown.contains("log.cleaner.threads=4 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=4, DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2"), "{shown}");

    // A topic default altered live: the topic inherits it, sourced as Kafka does.
    configs(
        &b,
        &[
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--add-config",
            "log.cleaner.delete.retention.ms=1000",
        ],
    );
    let topic =
        configs(&b, &["--describe", "--entity-type", "topics", "--entity-name", "state", "--all"]);
    assert!(topic.contains("delete.retention.ms=1000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.delete.retention.ms=1000, DEFAULT_CONFIG:log.cleaner.delete.retention.ms=86400000}"), "{topic}");

    b.stop();
    b.restart();
    b.wait_for(20, "the altered values after a restart", || {
        let text = b.metrics();
        let threads = broker::metric_value(&text, "sediment_log_cleaner_threads");
        let limit = broker::metric_value(&text, "sediment_log_cleaner_io_limit_bytes_per_second");
        (threads == Some(4.0) && limit == Some(5e7)).then_some(())
    });
    let shown = configs(&b, &["--describe", "--entity-type", "brokers", "--entity-default"]);
    assert!(shown.contains("log.cleaner.threads=2"), "{shown}");
    // Deleting the per-broker value uncovers the cluster default, live.
    configs(
        &b,
        &[
            "--entity-type",
            "brokers",
            "--entity-name",
            "1",
            "--alter",
            "--delete-config",
            "log.cleaner.threads",
        ],
    );
    b.wait_for(20, "two threads again", || {
        (b.metric("sediment_log_cleaner_threads") == Some(2.0)).then_some(())
    });
}

/// IncrementalAlterConfigs SET on the cluster-default broker resource.
fn alter_broker_default(port: u16, key: &str, value: &str) {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str(""))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_string(key.into()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value.into())))]),
    ]);
    let response = Wire::connect(port).call(1, &request);
    assert_eq!(response.responses[0].error_code, 0, "{:?}", response.responses[0].error_message);
}

#[test]
fn a_thread_retired_mid_clean_leaves_no_half_swap_and_loses_no_key() {
    const KEYS: usize = 2000;
    const ROUNDS: usize = 4;
    // About 8 MB to clean at the slow cleaner's 2 MB/s: seconds in progress.
    let b = TestBroker::start_with_slow_cleaner();
    let mut w = Wire::connect(b.port);
    let t = now_ms() - 60_000;
    let pad = "x".repeat(1000);
    for round in 0..ROUNDS {
        for chunk in (0..KEYS).collect::<Vec<_>>().chunks(100) {
            let records: Vec<_> = chunk
                .iter()
                .map(|k| (format!("key-{k:05}"), Some(format!("{round}-{pad}"))))
                .collect();
            produce(&mut w, "state", 0, t, &records);
        }
    }
    produce(&mut w, "state", 0, t + 2_000, &[("key-00000".into(), Some("final".into()))]);
    let dir = b.data_dir().join("state-0");
    b.wait_for_clean_in_progress(&dir, 30);

    // A new thread count replaces the pool: the running clean is aborted.
    alter_broker_default(b.port, "log.cleaner.threads", "2");
    b.wait_for(20, "two threads", || {
        (b.metric("sediment_log_cleaner_threads") == Some(2.0)).then_some(())
    });
    assert!(b.log().contains("clean aborted"), "the clean in progress was retired:\n{}", b.log());
    // The new threads clean it from the start, to one record per key.
    let end = b.wait_for(60, "the clean to complete on the new threads", || {
        broker::cleaner_checkpoint(&b.data_dir(), "state", 0)
    });
    assert_eq!(end, (KEYS * ROUNDS) as i64);
    let records = broker::fetch_all(b.port, "state", 0);
    assert_eq!(records.len(), KEYS + 1, "one record per key, plus the active segment's");
    let latest: std::collections::BTreeMap<_, _> =
        records.iter().map(|(_, k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(latest.len(), KEYS);
    assert_eq!(latest[&Some("key-00000".to_string())].as_deref(), Some("final"));
    assert!(latest
        .values()
        .filter(|v| v.as_deref() != Some("final"))
        .all(|v| v.as_deref().is_some_and(|v| v.starts_with(&format!("{}-", ROUNDS - 1)))));
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(b.metric("kafka_log_logcleaner_deadthreadcount"), Some(0.0));

    // Legacy AlterConfigs replaces the whole cluster-default set: without
    // log.cleaner.threads in it, the file's single thread is back.
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use kafka_protocol::messages::AlterConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let legacy = |validate_only: bool| {
        AlterConfigsRequest::default().with_validate_only(validate_only).with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str(""))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("log.cleaner.backoff.ms"))
                    .with_value(Some(StrBytes::from_static_str("200")))]),
        ])
    };
    let r = Wire::connect(b.port).call(2, &legacy(true));
    assert_eq!(r.responses[0].error_code, 0, "{:?}", r.responses[0].error_message);
    assert_eq!(
        b.metric("sediment_log_cleaner_threads"),
        Some(2.0),
        "validate_only changes nothing"
    );
    let r = Wire::connect(b.port).call(2, &legacy(false));
    assert_eq!(r.responses[0].error_code, 0, "{:?}", r.responses[0].error_message);
    b.wait_for(20, "one thread and a 0.2 s backoff", || {
        let text = b.metrics();
        let threads = broker::metric_value(&text, "sediment_log_cleaner_threads");
        let backoff = broker::metric_value(&text, "sediment_log_cleaner_backoff_seconds");
        (threads == Some(1.0) && backoff == Some(0.2)).then_some(())
    });
}

/// Kafka keys sediment ignores but Kafka changes on a running broker
/// (issue 30, item 6): accepted where Kafka accepts them (the SASL ones per
/// broker only), their values checked against Kafka's types, described as
/// set, kept across a restart, logged as having no effect; a static ignored
/// key is still refused, as Kafka refuses it.
#[test]
fn kafka_keys_sediment_ignores_are_accepted_where_kafka_accepts_them() {
    let mut b = TestBroker::start(&["sasl.kerberos.kinit.cmd=/usr/bin/kinit"]);
    let per_broker = |config: &'static str| {
        ["--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", config]
    };
    configs(&b, &per_broker("sasl.kerberos.service.name=kafka,num.network.threads=8"));
    let err = configs_refused(&b, &per_broker("sasl.kerberos.ticket.renew.jitter=most"));
    assert!(err.contains("Not a number of type DOUBLE"), "{err}");
    let err = configs_refused(&b, &per_broker("process.roles=broker"));
    assert!(err.contains("Cannot update these configs dynamically: Set(process.roles)"), "{err}");
    let err = configs_refused(
        &b,
        &[
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--add-config",
            "sasl.kerberos.service.name=kafka",
        ],
    );
    assert!(
        err.contains(
            "Cannot update these configs at default cluster level, broker id must be specified"
        ),
        "{err}"
    );
    assert!(b.log().contains("it has no effect on sediment"), "{}", b.log());

    assert!(b.stop().success(), "{}", b.log());
    b.restart();
    let described =
        configs(&b, &["--entity-type", "brokers", "--entity-name", "1", "--describe", "--all"]);
    for line in [
        "sasl.kerberos.service.name=kafka sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:sasl.kerberos.service.name=kafka}",
        "num.network.threads=8 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:num.network.threads=8}",
        "sasl.kerberos.kinit.cmd=/usr/bin/kinit sensitive=false synonyms={STATIC_BROKER_CONFIG:sasl.kerberos.kinit.cmd=/usr/bin/kinit}",
    ] {
        assert!(described.lines().any(|l| l.trim() == line), "{line} in\n{described}");
    }
}

//! End to end: the broker compacts a topic by itself, as seen by Apache
//! Kafka's own console consumer reading from offset 0 — seed 003's
//! customer-email example, before and after the clean — with the
//! max-dirty-percent gauge rising before and falling after, the
//! cleaner-offset-checkpoint advancing, a topic config changed at runtime with
//! kafka-configs taking effect without a restart, and `sediment cleaner-status`
//! describing it all.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::broker::{formatter_property, kafka_tool, reader_property, TestBroker};

const TOPICS: &str = "org.apache.kafka.tools.TopicCommand";
const CONFIGS: &str = "kafka.admin.ConfigCommand";
const PRODUCER: &str = "org.apache.kafka.tools.ConsoleProducer";
const CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";

fn consume(b: &TestBroker, topic: &str, count: usize) -> Vec<String> {
    let bs = b.bootstrap();
    let n = count.to_string();
    let args = [
        "--bootstrap-server",
        &bs,
        "--topic",
        topic,
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        &n,
        formatter_property(),
        "print.key=true",
        formatter_property(),
        "print.offset=true",
        "--timeout-ms",
        "20000",
    ];
    kafka_tool(b, CONSUMER, &args, None).lines().map(String::from).collect()
}

/// The partition's entry in the log dir's cleaner-offset-checkpoint.
fn checkpoint(b: &TestBroker, topic: &str) -> Option<i64> {
    let text = std::fs::read_to_string(b.data_dir().join("cleaner-offset-checkpoint")).ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.split(' ');
        (parts.next() == Some(topic) && parts.next() == Some("0"))
            .then(|| parts.next().and_then(|o| o.parse().ok()))?
    })
}

const MAX_DIRTY: &str = "kafka_log_logcleanermanager_max_dirty_percent";

#[test]
fn seed_customer_email_is_compacted_by_the_running_broker() {
    let b = TestBroker::start(&["log.cleaner.backoff.ms=100"]);
    let bs = b.bootstrap();
    // Seed 003's topic, except that the dirty ratio starts at 1.0: a ratio can
    // never exceed it, so the cleaner holds off while the dirty state is
    // checked; the seed's 0.01 is then set at runtime with kafka-configs.
    let created = kafka_tool(
        &b,
        TOPICS,
        &[
            "--bootstrap-server",
            &bs,
            "--create",
            "--topic",
            "customer-email",
            "--partitions",
            "1",
            "--config",
            "cleanup.policy=compact",
            "--config",
            "segment.ms=1000",
            "--config",
            "min.cleanable.dirty.ratio=1.0",
        ],
        None,
    );
    assert!(created.contains("Created topic customer-email."), "{created}");
    assert_eq!(b.metric(MAX_DIRTY), Some(0.0), "nothing dirty yet");
    let produce = |input: &str| {
        kafka_tool(
            &b,
            PRODUCER,
            &[
                "--bootstrap-server",
                &bs,
                "--topic",
                "customer-email",
                reader_property(),
                "parse.key=true",
                reader_property(),
                "key.separator=:",
            ],
            Some(input),
        )
    };
    produce("c1:ana@old.example\nc2:ben@example.com\nc1:ana@new.example\nc3:cy@example.com\nc2:ben@work.example\n");
    // The active segment rolls when a record arrives more than segment.ms
    // after its first one (Kafka's rule, on record timestamps).
    let first_done = Instant::now();
    std::thread::sleep(Duration::from_millis(1100).saturating_sub(first_done.elapsed()));
    produce("c9:tick\nc9:tock\n");

    // Before: the closed segment is all dirty and max-dirty-percent shows it.
    b.wait_for(10, "max-dirty-percent 100", || (b.metric(MAX_DIRTY) == Some(100.0)).then_some(()));
    assert_eq!(checkpoint(&b, "customer-email"), None, "not cleaned yet");
    let status = b.cleaner_status();
    let p = &status["manager"]["partitions"][0];
    assert_eq!(p["topic"], "customer-email");
    assert_eq!(p["eligible"], false);
    assert_eq!(p["ineligible"]["code"], "under_ratio", "{p}");
    assert_eq!(p["dirty_ratio"], 1.0);
    assert_eq!(p["first_dirty_offset"], 0);
    assert_eq!(p["first_uncleanable_offset"], 5);
    let before = consume(&b, "customer-email", 7);
    assert_eq!(before.len(), 7, "{before:?}");

    // The seed's ratio, at runtime.
    kafka_tool(
        &b,
        CONFIGS,
        &[
            "--bootstrap-server",
            &bs,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            "customer-email",
            "--add-config",
            "min.cleanable.dirty.ratio=0.01",
        ],
        None,
    );
    let altered = Instant::now();
    let end = b.wait_for(10, "the checkpoint to advance", || checkpoint(&b, "customer-email"));
    assert_eq!(end, 5, "the clean mapped the whole closed segment");
    eprintln!("cleaned {:?} after the config change", altered.elapsed());
    b.wait_for(10, "max-dirty-percent back to 0", || {
        (b.metric(MAX_DIRTY) == Some(0.0)).then_some(())
    });

    // After, from the beginning, exactly as seed 003 shows it.
    assert_eq!(
        consume(&b, "customer-email", 5),
        vec![
            "Offset:2\tc1\tana@new.example",
            "Offset:3\tc3\tcy@example.com",
            "Offset:4\tc2\tben@work.example",
            "Offset:5\tc9\ttick",
            "Offset:6\tc9\ttock",
        ]
    );
    let series = |name: &str| format!("{name}{{partition=\"0\",topic=\"customer-email\"}}");
    assert_eq!(b.metric(&series("sediment_log_cleaner_first_dirty_offset")), Some(5.0));
    assert_eq!(b.metric(&series("sediment_log_cleaner_dirty_ratio")), Some(0.0));
    assert!(b
        .metric(&series("sediment_log_cleaner_last_clean_size_reduction_ratio"))
        .is_some_and(|r| r > 0.0));
    assert_eq!(b.metric("sediment_log_cleaner_cleans_total"), Some(1.0));
    assert_eq!(b.metric("kafka_log_logcleaner_deadthreadcount"), Some(0.0));

    // The operator's view.
    let out = Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(["cleaner-status", "--metrics", &format!("127.0.0.1:{}", b.metrics_port)])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("max-dirty-percent 0"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("customer-email-0"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("not eligible: only the active segment is dirty"), "{text}");
    assert!(
        text.contains("last clean")
            && text.contains("offsets [0, 5)")
            && text.contains("5 -> 3 records"),
        "{text}"
    );
}

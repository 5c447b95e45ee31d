//! Apache Kafka 4.1.2's own CLI tools (from Maven Central, run with
//! `java -cp` through scripts/kafka-tool.sh) against the real broker:
//! kafka-topics, kafka-configs, kafka-console-producer/-consumer,
//! kafka-get-offsets, kafka-log-dirs and kafka-broker-api-versions.

use crate::broker;

use std::process::Command;

use crate::broker::{
    console_produce_keyed, formatter_property, kafka_tool, reader_property, repo_root, TestBroker,
};

const TOPICS: &str = "org.apache.kafka.tools.TopicCommand";
const CONFIGS: &str = "kafka.admin.ConfigCommand";
const PRODUCER: &str = "org.apache.kafka.tools.ConsoleProducer";
const REASSIGN: &str = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
const CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";

fn consume(b: &TestBroker, topic: &str, partition: &str, count: usize) -> Vec<String> {
    let bs = b.bootstrap();
    let n = count.to_string();
    let args = [
        "--bootstrap-server",
        &bs,
        "--topic",
        topic,
        "--partition",
        partition,
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

#[test]
fn seed_customer_email_example_with_console_tools() {
    // The picture before the cleaner runs; cleaner_end_to_end.rs has the one after.
    let b = TestBroker::start(&["log.cleaner.enable=false"]);
    let bs = b.bootstrap();
    // As written in seed 003 (kafka-topics + kafka-console-producer).
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
            "min.cleanable.dirty.ratio=0.01",
        ],
        None,
    );
    assert!(created.contains("Created topic customer-email."), "{created}");
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
    produce("c9:tick\nc9:tock\n");
    let lines = consume(&b, "customer-email", "0", 7);
    assert_eq!(
        lines,
        vec![
            "Offset:0\tc1\tana@old.example",
            "Offset:1\tc2\tben@example.com",
            "Offset:2\tc1\tana@new.example",
            "Offset:3\tc3\tcy@example.com",
            "Offset:4\tc2\tben@work.example",
            "Offset:5\tc9\ttick",
            "Offset:6\tc9\ttock",
        ]
    );
}

#[test]
fn topics_configs_offsets_log_dirs_and_api_versions() {
    let b = TestBroker::start(&["num.partitions=2"]);
    let bs = b.bootstrap();
    kafka_tool(
        &b,
        TOPICS,
        &[
            "--bootstrap-server",
            &bs,
            "--create",
            "--topic",
            "orders",
            "--partitions",
            "3",
            "--replication-factor",
            "1",
        ],
        None,
    );
    kafka_tool(
        &b,
        TOPICS,
        &[
            "--bootstrap-server",
            &bs,
            "--create",
            "--topic",
            "profiles",
            "--config",
            "cleanup.policy=compact",
        ],
        None,
    );
    let list = kafka_tool(&b, TOPICS, &["--bootstrap-server", &bs, "--list"], None);
    assert_eq!(list.lines().collect::<Vec<_>>(), vec!["orders", "profiles"]);
    let describe = kafka_tool(
        &b,
        TOPICS,
        &["--bootstrap-server", &bs, "--describe", "--topic", "profiles"],
        None,
    );
    assert!(
        describe.contains("PartitionCount: 2")
            && describe.contains("Configs: cleanup.policy=compact"),
        "{describe}"
    );
    assert!(describe.contains("Partition: 1\tLeader: 1\tReplicas: 1\tIsr: 1"), "{describe}");

    // A duplicate and an invalid config are refused with Kafka's messages.
    let mut dup = Command::new("bash");
    dup.arg(repo_root().join("scripts/kafka-tool.sh")).arg(TOPICS).args([
        "--bootstrap-server",
        &bs,
        "--create",
        "--topic",
        "orders",
    ]);
    let (ok, out, err) = broker::run(&mut dup);
    assert!(!ok && (out + &err).contains("already exists"));
    let mut bad = Command::new("bash");
    bad.arg(repo_root().join("scripts/kafka-tool.sh")).arg(TOPICS).args([
        "--bootstrap-server",
        &bs,
        "--create",
        "--topic",
        "bad",
        "--config",
        "cleanup.policy=shred",
    ]);
    let (ok, out, err) = broker::run(&mut bad);
    assert!(!ok && (out + &err).contains("cleanup.policy"), "the error names the key");

    // kafka-configs: alter, describe, delete.
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
            "orders",
            "--add-config",
            "retention.ms=3600000,cleanup.policy=[compact,delete]",
        ],
        None,
    );
    let described = kafka_tool(
        &b,
        CONFIGS,
        &[
            "--bootstrap-server",
            &bs,
            "--describe",
            "--entity-type",
            "topics",
            "--entity-name",
            "orders",
        ],
        None,
    );
    assert!(described.contains("retention.ms=3600000"), "{described}");
    assert!(described.contains("cleanup.policy=compact,delete"), "{described}");
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
            "orders",
            "--delete-config",
            "retention.ms",
        ],
        None,
    );
    let all = kafka_tool(
        &b,
        CONFIGS,
        &[
            "--bootstrap-server",
            &bs,
            "--describe",
            "--all",
            "--entity-type",
            "topics",
            "--entity-name",
            "orders",
        ],
        None,
    );
    assert!(all.contains("retention.ms=604800000 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.hours=168}"), "{all}");
    let broker_all = kafka_tool(
        &b,
        CONFIGS,
        &[
            "--bootstrap-server",
            &bs,
            "--describe",
            "--all",
            "--entity-type",
            "brokers",
            "--entity-name",
            "1",
        ],
        None,
    );
    assert!(
        broker_all.contains(
            "num.partitions=2 sensitive=false synonyms={STATIC_BROKER_CONFIG:num.partitions=2, DEFAULT_CONFIG:num.partitions=1}"
        ),
        "{broker_all}"
    );

    // Data, then offsets and log dirs.
    console_produce_keyed(&b, "orders", "=", "k1=v1\nk2=v2\nk3=v3\nk4=v4\n");
    let offsets = kafka_tool(
        &b,
        "org.apache.kafka.tools.GetOffsetShell",
        &["--bootstrap-server", &bs, "--topic", "orders"],
        None,
    );
    let total: i64 =
        offsets.lines().map(|l| l.rsplit(':').next().unwrap().parse::<i64>().unwrap()).sum();
    assert_eq!(total, 4, "{offsets}");
    assert_eq!(offsets.lines().count(), 3, "{offsets}");
    let earliest = kafka_tool(
        &b,
        "org.apache.kafka.tools.GetOffsetShell",
        &["--bootstrap-server", &bs, "--topic", "orders", "--time", "-2"],
        None,
    );
    assert!(earliest.lines().all(|l| l.ends_with(":0")), "{earliest}");

    let dirs = kafka_tool(
        &b,
        "org.apache.kafka.tools.LogDirsCommand",
        &["--bootstrap-server", &bs, "--describe", "--topic-list", "orders"],
        None,
    );
    assert!(dirs.contains("\"partition\":\"orders-0\""), "{dirs}");
    let data_dir = std::fs::canonicalize(b.data_dir()).unwrap();
    assert!(dirs.contains(&format!("\"logDir\":\"{}\"", data_dir.display())), "{dirs}");

    let versions = kafka_tool(
        &b,
        "org.apache.kafka.tools.BrokerApiVersionsCommand",
        &["--bootstrap-server", &bs],
        None,
    );
    assert!(versions.contains("Produce(0): 0 to 13 [usable: 13]"), "{versions}");
    assert!(
        versions.contains("Fetch(1): 4 to 18 [usable: 17]")
            || versions.contains("Fetch(1): 4 to 18 [usable: 18]"),
        "{versions}"
    );
    assert!(versions.contains("JoinGroup(11): 0 to 9 [usable: 9]"), "{versions}");
    // The consumer group protocol (KIP-848) is served; an API that is not
    // implemented is not advertised.
    assert!(versions.contains("ConsumerGroupHeartbeat(68): 0 to 1 [usable: 1]"), "{versions}");
    assert!(versions.contains("ConsumerGroupDescribe(69): 0 to 1 [usable: 1]"), "{versions}");
    assert!(versions.contains("ShareGroupHeartbeat(76): UNSUPPORTED"), "{versions}");

    // Alone, a partition's only replica is this broker: a reassignment onto
    // it changes nothing and completes; none is ever in progress.
    let file = b.data_dir().parent().unwrap().join("reassignment.json");
    let json = r#"{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1]}]}"#;
    std::fs::write(&file, json).unwrap();
    let file = file.display().to_string();
    let reassign = |action: &str| {
        let args = ["--bootstrap-server", &bs, action, "--reassignment-json-file", &file];
        kafka_tool(&b, REASSIGN, &args, None)
    };
    let out = reassign("--execute");
    assert!(out.contains("Successfully started partition reassignment for orders-0"), "{out}");
    let out = reassign("--verify");
    assert!(out.contains("Reassignment of partition orders-0 is completed."), "{out}");
    let out = kafka_tool(&b, REASSIGN, &["--bootstrap-server", &bs, "--list"], None);
    assert!(out.contains("No partition reassignments found."), "{out}");
}

//! Consumer groups with Apache Kafka 4.1.2's own tools: kafka-console-consumer
//! with --group, kafka-consumer-groups --list/--describe/--reset-offsets/
//! --delete, and kafka-dump-log's offsets decoder on `__consumer_offsets`.

use crate::broker::{console_produce_keyed, kafka_tool, kafka_tool_output, TestBroker};

const CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";
const GROUPS: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";

#[test]
fn console_consumer_group_and_consumer_groups_command() {
    let b = TestBroker::start(&[
        "group.initial.rebalance.delay.ms=0",
        "offsets.topic.num.partitions=5",
        "num.partitions=2",
    ]);
    let bs = b.bootstrap();
    console_produce_keyed(&b, "orders", ":", "k1:a\nk2:b\nk3:c\nk4:d\nk5:e\nk6:f\n");

    let consume_group = |max: Option<&str>| {
        let mut args = vec![
            "--bootstrap-server",
            bs.as_str(),
            "--topic",
            "orders",
            "--group",
            "g",
            "--from-beginning",
            "--timeout-ms",
            "10000",
        ];
        if let Some(m) = max {
            args.extend(["--max-messages", m]);
        }
        let (_, stdout, stderr) = kafka_tool_output(CONSUMER, &args, None);
        let mut values: Vec<String> = stdout.lines().map(String::from).collect();
        values.sort();
        (values, stderr)
    };
    // First run: everything, then the offsets are committed on close.
    let (values, stderr) = consume_group(Some("6"));
    assert_eq!(values, ["a", "b", "c", "d", "e", "f"], "{stderr}\n{}", b.log());
    // Second run with the same group: nothing old.
    let (values, stderr) = consume_group(None);
    assert!(values.is_empty(), "{values:?}");
    assert!(stderr.contains("Processed a total of 0 messages"), "{stderr}");

    let list = kafka_tool(&b, GROUPS, &["--bootstrap-server", &bs, "--list"], None);
    assert_eq!(list.lines().collect::<Vec<_>>(), ["g"]);
    let describe =
        kafka_tool(&b, GROUPS, &["--bootstrap-server", &bs, "--describe", "--group", "g"], None);
    let lag: Vec<(String, String, String)> = describe
        .lines()
        .filter(|l| l.starts_with("g "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[2].to_string(), f[3].to_string(), f[5].to_string())
        })
        .collect();
    // Every partition committed at its end: lag 0.
    assert_eq!(lag.len(), 2, "{describe}");
    assert!(lag.iter().all(|(_, _, l)| l == "0"), "{describe}");
    let state = kafka_tool(
        &b,
        GROUPS,
        &["--bootstrap-server", &bs, "--describe", "--group", "g", "--state"],
        None,
    );
    assert!(state.contains("Empty"), "{state}");

    let reset = kafka_tool(
        &b,
        GROUPS,
        &[
            "--bootstrap-server",
            &bs,
            "--reset-offsets",
            "--group",
            "g",
            "--topic",
            "orders",
            "--to-earliest",
            "--execute",
        ],
        None,
    );
    assert_eq!(
        reset.lines().filter(|l| l.starts_with("g ") && l.trim_end().ends_with(" 0")).count(),
        2,
        "{reset}"
    );
    let (values, _) = consume_group(Some("6"));
    assert_eq!(values.len(), 6, "after the reset everything is read again");

    let deleted =
        kafka_tool(&b, GROUPS, &["--bootstrap-server", &bs, "--delete", "--group", "g"], None);
    assert!(
        deleted.contains("Deletion of requested consumer groups ('g') was successful."),
        "{deleted}"
    );
    assert_eq!(kafka_tool(&b, GROUPS, &["--bootstrap-server", &bs, "--list"], None).trim(), "");

    // Kafka's own decoder reads the offsets topic: commits, group metadata and
    // the deletion tombstones.
    // "g".hashCode() = 103; 103 % 5 = 3.
    let partition = b.data_dir().join("__consumer_offsets-3");
    let segment = partition.join("00000000000000000000.log");
    let dump = kafka_tool(
        &b,
        "kafka.tools.DumpLogSegments",
        &["--offsets-decoder", "--files", segment.to_str().unwrap()],
        None,
    );
    assert!(dump.contains(r#"key: {"type":"1","data":{"group":"g","topic":"orders","partition":0}} payload: {"version":"3","data":{"offset":"#), "{dump}");
    assert!(dump.contains(r#"key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer""#), "{dump}");
    assert!(dump.contains(r#"key: {"type":"2","data":{"group":"g"}} payload: <DELETE>"#), "{dump}");
}

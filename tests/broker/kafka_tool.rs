//! Apache Kafka's Java tools run from its jars (scripts/kafka-tool.sh), at
//! the suite's Kafka version (`KAFKA_VERSION`, default 4.1.2) or a given
//! one, against any broker a scenario runs on ([`AnyBroker`]: sediment's, or
//! a reference Kafka); and the console tools' option names, which Kafka 4.2
//! renamed.

use std::process::{Command, Stdio};

use super::reference_kafka;
use super::{repo_root, TestBroker};

/// Run one of Apache Kafka's tools (scripts/kafka-tool.sh MAIN_CLASS args),
/// with `stdin` piped in: (success, stdout, stderr).
pub fn kafka_tool_output(
    main_class: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    kafka_tool_output_at(None, main_class, args, stdin)
}

/// As [`kafka_tool_output`], with the jars of Kafka `version` (default:
/// scripts/kafka-tool.sh's).
pub fn kafka_tool_output_at(
    version: Option<&str>,
    main_class: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    use std::io::Write;
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/kafka-tool.sh"))
        .arg(main_class)
        .args(args)
        .env("KAFKA_HEAP_OPTS", "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC");
    if let Some(version) = version {
        cmd.env("KAFKA_VERSION", version);
    }
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("scripts/kafka-tool.sh (needs Java 17 and Maven)");
    if let Some(input) = stdin {
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A broker a scenario can run against: sediment's, or a reference Kafka
/// (to measure the same scenario on both).
pub trait AnyBroker {
    fn port(&self) -> u16;
    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port())
    }
    /// Its log, for failure messages.
    fn log(&self) -> String;
}

impl AnyBroker for TestBroker {
    fn port(&self) -> u16 {
        self.port
    }

    fn bootstrap(&self) -> String {
        TestBroker::bootstrap(self)
    }

    fn log(&self) -> String {
        TestBroker::log(self)
    }
}

impl AnyBroker for reference_kafka::ReferenceKafka {
    fn port(&self) -> u16 {
        self.port
    }

    fn log(&self) -> String {
        reference_kafka::ReferenceKafka::log(self)
    }
}

/// As `kafka_tool_output`, failing the test (with the broker's log) unless
/// the tool succeeds; returns its stdout.
pub fn kafka_tool(
    b: &impl AnyBroker,
    main_class: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> String {
    let (ok, stdout, stderr) = kafka_tool_output(main_class, args, stdin);
    assert!(
        ok,
        "{main_class} {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}\nbroker:\n{}",
        b.log()
    );
    stdout
}

/// Whether the console tools of `KAFKA_VERSION` (the suite's default is
/// 4.1.2) have Kafka 4.2's option names: `--property` became
/// `--formatter-property` (consumer) and `--reader-property` (producer),
/// `--consumer.config` and `--consumer-property` became `--command-config`
/// and `--command-property`, and an old name prints a
/// deprecation notice to stdout.
fn console_options_renamed() -> bool {
    std::env::var("KAFKA_VERSION").is_ok_and(|v| {
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (4, 2)
    })
}

/// The console consumer's option for a formatter property.
pub fn formatter_property() -> &'static str {
    if console_options_renamed() {
        "--formatter-property"
    } else {
        "--property"
    }
}

/// The console consumer's option for a client config file
/// (`--consumer.config`, `--command-config` from 4.2).
pub fn consumer_config_flag() -> &'static str {
    if console_options_renamed() {
        "--command-config"
    } else {
        "--consumer.config"
    }
}

/// The console consumer's option for a client property
/// (`--consumer-property`, `--command-property` from 4.2).
pub fn consumer_property_flag() -> &'static str {
    if console_options_renamed() {
        "--command-property"
    } else {
        "--consumer-property"
    }
}

/// The console producer's option for a reader property.
pub fn reader_property() -> &'static str {
    if console_options_renamed() {
        "--reader-property"
    } else {
        "--property"
    }
}

/// Kafka's console producer writing `input` (`key<separator>value` lines) to `topic`.
pub fn console_produce_keyed(b: &impl AnyBroker, topic: &str, separator: &str, input: &str) {
    let separator = format!("key.separator={separator}");
    let args = [
        "--bootstrap-server",
        &b.bootstrap(),
        "--topic",
        topic,
        reader_property(),
        "parse.key=true",
        reader_property(),
        &separator,
    ];
    kafka_tool(b, "org.apache.kafka.tools.ConsoleProducer", &args, Some(input));
}

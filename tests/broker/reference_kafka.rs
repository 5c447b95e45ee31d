//! A real Apache Kafka broker (KRaft, broker and controller in one JVM)
//! started from the jars of scripts/kafka-jars.sh, for tests that compare
//! sediment's answers with Kafka's own: 4.1.2, and the newest release
//! ([`VERSIONS`]). Loopback only; its data dir and log live in a temporary
//! dir; the JVM is killed when the value is dropped.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, repo_root, Reaper, Wire};

/// The Kafka releases the conformance tests compare with: the one
/// sediment's versions follow, and the newest.
pub const VERSIONS: [&str; 2] = ["4.1.2", "4.4.0"];

pub struct ReferenceKafka {
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub version: &'static str,
    _jvm: Reaper,
}

impl ReferenceKafka {
    /// [`Self::start_version`] of Kafka 4.1.2.
    pub fn start(extra: &[(&str, &str)]) -> Self {
        Self::start_version(VERSIONS[0], extra)
    }

    /// Format a data dir and start Kafka `version` with `extra` properties
    /// on top of a single-node KRaft config; returns once Metadata names a
    /// controller, so topics can be created.
    pub fn start_version(version: &'static str, extra: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let (port, controller_port) = (free_port(), free_port());
        let mut props = vec![
            ("process.roles".to_string(), "broker,controller".to_string()),
            ("node.id".into(), "1".into()),
            ("controller.quorum.bootstrap.servers".into(), format!("127.0.0.1:{controller_port}")),
            (
                "listeners".into(),
                format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"),
            ),
            ("advertised.listeners".into(), format!("PLAINTEXT://127.0.0.1:{port}")),
            ("controller.listener.names".into(), "CONTROLLER".into()),
            ("inter.broker.listener.name".into(), "PLAINTEXT".into()),
            (
                "listener.security.protocol.map".into(),
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT".into(),
            ),
            ("log.dirs".into(), dir.path().join("data").display().to_string()),
            ("offsets.topic.replication.factor".into(), "1".into()),
            ("transaction.state.log.replication.factor".into(), "1".into()),
            ("transaction.state.log.min.isr".into(), "1".into()),
            ("share.coordinator.state.topic.replication.factor".into(), "1".into()),
            ("share.coordinator.state.topic.min.isr".into(), "1".into()),
            ("group.initial.rebalance.delay.ms".into(), "0".into()),
        ];
        props.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let conf = dir.path().join("server.properties");
        let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        std::fs::write(&conf, text).expect("write server.properties");
        let conf = conf.display().to_string();

        let cluster_id = {
            use base64::Engine;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
        };
        // Glued to its flag: a URL-safe base64 id starts with '-' one time in
        // 64, and the tool's argument parser would take it for an option.
        let cluster_id = format!("--cluster-id={cluster_id}");
        let format = ["format", &cluster_id, "-c", &conf, "--standalone"];
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/kafka-tool.sh"))
            .arg("kafka.tools.StorageTool")
            .args(format)
            .env("KAFKA_VERSION", version)
            .env("KAFKA_HEAP_OPTS", "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
            .stdin(Stdio::null())
            .output()
            .expect("scripts/kafka-tool.sh (needs Java 17 and Maven)");
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "kafka-storage {version} format failed:\n{stdout}\n{stderr}");

        let log = std::fs::File::create(dir.path().join("kafka.log")).expect("kafka.log");
        let child = Command::new("bash")
            .arg(repo_root().join("scripts/kafka-tool.sh"))
            .arg("kafka.Kafka")
            .arg(&conf)
            .env("KAFKA_VERSION", version)
            .env("KAFKA_HEAP_OPTS", "-Xmx512m -XX:+UseSerialGC")
            .env("KAFKA_LOG_LEVEL", "INFO")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start Kafka (needs Java 17)");
        let kafka = Self { port, dir, version, _jvm: Reaper(child) };
        kafka.wait_ready();
        kafka
    }

    /// Kafka's own log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kafka.log")).unwrap_or_default()
    }

    fn wait_ready(&self) {
        use kafka_protocol::messages::MetadataRequest;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            assert!(Instant::now() < deadline, "Kafka did not start; its log:\n{}", self.log());
            if let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
                let mut w = Wire::from_stream(stream);
                let request = MetadataRequest::default().with_topics(Some(vec![]));
                if let Some(r) = super::txn::try_call(&mut w, 12, &request) {
                    if r.controller_id.0 >= 0 && !r.brokers.is_empty() {
                        return;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// `what: answer` lines keyed by `what` (the part before the last `": "`).
pub fn answers(lines: Vec<String>) -> std::collections::BTreeMap<String, String> {
    lines
        .into_iter()
        .map(|l| {
            let (what, answer) = l.rsplit_once(": ").expect("line: answer");
            (what.to_string(), answer.to_string())
        })
        .collect()
}

/// Fail, listing every difference, unless sediment's answers (`got`) are
/// Kafka `version`'s (`want`), key by key.
pub fn assert_same_answers(
    version: &str,
    want: &std::collections::BTreeMap<String, String>,
    got: &std::collections::BTreeMap<String, String>,
) {
    let mut diff = Vec::new();
    for key in want.keys().chain(got.keys()).collect::<std::collections::BTreeSet<_>>() {
        let (k, s) = (want.get(key), got.get(key));
        if k != s {
            diff.push(format!("{key}: Kafka {k:?}, sediment {s:?}"));
        }
    }
    assert!(
        diff.is_empty(),
        "{} answers differ from Kafka {version} (of {}):\n{}",
        diff.len(),
        want.len(),
        diff.join("\n")
    );
}

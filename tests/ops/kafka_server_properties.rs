//! A `server.properties` laid out as Kafka 4.1.2's sample (KRaft combined
//! mode, a CONTROLLER listener, Kafka's thread, socket and replication keys)
//! runs sediment with one warning that lists the keys it ignores; Kafka's
//! console tools produce and consume through it; a mistyped key stops it
//! with the nearest known key suggested.

use std::process::Command;

use crate::broker::{free_port, kafka_tool, run, TestBroker};

const PRODUCER: &str = "org.apache.kafka.tools.ConsoleProducer";
const CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";

/// The keys of Kafka's sample, in its order, with values for this test.
fn kafka_style_properties(port: u16, controller_port: u16, log_dir: &str) -> String {
    format!(
        "# Server basics: a combined broker and controller\n\
         process.roles=broker,controller\n\
         node.id=1\n\
         controller.quorum.bootstrap.servers=localhost:{controller_port}\n\
         \n\
         # Socket server settings\n\
         listeners=PLAINTEXT://:{port},CONTROLLER://:{controller_port}\n\
         inter.broker.listener.name=PLAINTEXT\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
         controller.listener.names=CONTROLLER\n\
         listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL\n\
         num.network.threads=3\n\
         num.io.threads=8\n\
         socket.send.buffer.bytes=102400\n\
         socket.receive.buffer.bytes=102400\n\
         socket.request.max.bytes=104857600\n\
         \n\
         # Log basics\n\
         log.dirs={log_dir}\n\
         num.partitions=1\n\
         num.recovery.threads.per.data.dir=1\n\
         \n\
         # Internal topic settings\n\
         offsets.topic.replication.factor=1\n\
         share.coordinator.state.topic.replication.factor=1\n\
         share.coordinator.state.topic.min.isr=1\n\
         transaction.state.log.replication.factor=1\n\
         transaction.state.log.min.isr=1\n\
         \n\
         # Log retention policy\n\
         log.retention.hours=168\n\
         log.segment.bytes=1073741824\n\
         log.retention.check.interval.ms=300000\n\
         log.cleaner.threads=2\n"
    )
}

#[test]
fn a_kafka_server_properties_runs_with_one_warning_and_serves_kafka_clients() {
    let dir = tempfile::tempdir().unwrap();
    let (port, controller_port) = (free_port(), free_port());
    // The test holds the controller port while the broker runs: a broker
    // that tried to open the controller listener would fail to bind it.
    // (Probing the port afterwards raced other tests' brokers, which may be
    // given the same free port.)
    let held = std::net::TcpListener::bind(("127.0.0.1", controller_port))
        .expect("the controller port is free");
    let data = dir.path().join("kraft-combined-logs");
    let file = dir.path().join("server.properties");
    std::fs::write(&file, kafka_style_properties(port, controller_port, &data.to_string_lossy()))
        .unwrap();

    // check-config lists what it ignores, with the same warning.
    let (ok, out, err) =
        run(Command::new(env!("CARGO_BIN_EXE_sediment")).arg("check-config").arg(&file));
    assert!(ok, "{out}{err}");
    assert!(out.contains("- num.network.threads = \"3\"    # ignored (threads)"), "{out}");
    // Served: it bounds the appends that inflate records at once.
    assert!(out.contains("* num.io.threads = \"8\""), "{out}");
    assert!(out.contains("* log.cleaner.threads = \"2\""), "{out}");
    // Served since brokers reach each other on it: no longer ignored.
    assert!(out.contains("* inter.broker.listener.name = \"PLAINTEXT\""), "{out}");
    assert!(out.contains("warning: ignoring 9 Kafka config key(s)"), "{out}");

    let b = TestBroker::start_with_config(&file, &[]);
    assert_eq!(b.port, port);
    let log = b.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "exactly one warning:\n{log}");
    for key in [
        "process.roles (kraft)",
        "controller.quorum.bootstrap.servers (kraft)",
        "controller.listener.names (kraft)",
        "num.network.threads (threads)",
        "num.recovery.threads.per.data.dir (threads)",
        "socket.send.buffer.bytes (sockets)",
        "socket.receive.buffer.bytes (sockets)",
        "share.coordinator.state.topic.min.isr (replication)",
        "controller listener(s) CONTROLLER not opened",
    ] {
        assert!(warnings[0].contains(key), "{key} missing from {}", warnings[0]);
    }
    assert!(!log.contains("Address already in use"), "the controller listener was tried:\n{log}");
    drop(held);

    let bs = b.bootstrap();
    kafka_tool(
        &b,
        PRODUCER,
        &["--bootstrap-server", &bs, "--topic", "carried-over"],
        Some("one\ntwo\nthree\n"),
    );
    let consumed = kafka_tool(
        &b,
        CONSUMER,
        &[
            "--bootstrap-server",
            &bs,
            "--topic",
            "carried-over",
            "--from-beginning",
            "--max-messages",
            "3",
            "--timeout-ms",
            "20000",
        ],
        None,
    );
    assert_eq!(consumed.lines().collect::<Vec<_>>(), ["one", "two", "three"]);
    assert!(data.join("carried-over-0").is_dir(), "the partition lives in the file's log.dirs");
}

#[test]
fn a_mistyped_key_stops_the_broker_with_a_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    let text = kafka_style_properties(free_port(), free_port(), &dir.path().to_string_lossy())
        .replace("log.retention.hours=168", "log.retension.hours=168");
    std::fs::write(&file, text).unwrap();
    for sub in ["serve", "check-config"] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sediment"));
        if sub == "serve" {
            cmd.arg(sub).arg("--config").arg(&file);
        } else {
            cmd.arg(sub).arg(&file);
        }
        let (ok, _, err) = run(&mut cmd);
        assert!(!ok, "{sub} must fail");
        assert!(
            err.contains(
                "unknown config key log.retension.hours; did you mean log.retention.hours?"
            ),
            "{sub}: {err}"
        );
    }
    // TOML gets the same suggestion; a file that is neither says what it tried.
    let toml = dir.path().join("server.toml");
    std::fs::write(&toml, "num.partitons = 3\n").unwrap();
    let (ok, _, err) =
        run(Command::new(env!("CARGO_BIN_EXE_sediment")).arg("check-config").arg(&toml));
    assert!(!ok && err.contains("did you mean num.partitions?"), "{err}");
    std::fs::write(&toml, "num.partitions=3\nlisteners=PLAINTEXT://:9092\n").unwrap();
    let (ok, _, err) =
        run(Command::new(env!("CARGO_BIN_EXE_sediment")).arg("check-config").arg(&toml));
    assert!(!ok && err.contains("not a TOML file") && err.contains(".properties"), "{err}");
}

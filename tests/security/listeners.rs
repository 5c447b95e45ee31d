//! Several named listeners on one broker (`listeners`,
//! `listener.security.protocol.map`, `advertised.listeners`): each answers
//! Metadata, DescribeCluster and FindCoordinator with its own advertised
//! endpoint, as seen on the wire, by kcat (librdkafka) and by Apache Kafka
//! 4.1.2's Java AdminClient (tests/java/ListenerEndpoints.java); records
//! produced through one listener are read through the other; a Password key
//! is described by `kafka-configs` as sensitive with a null value and
//! appears nowhere in the log or `/metrics`; `check-config` refuses a SASL
//! mechanism not yet served.

use std::process::Command;

use crate::broker::{http_get, kafka_tool, repo_root, TestBroker, Wire};
use kafka_protocol::messages::{DescribeClusterRequest, FindCoordinatorRequest, MetadataRequest};
use kafka_protocol::protocol::StrBytes;

const SECRET: &str = "never-shown-s3cret";

/// (host, port) of the broker in Metadata, DescribeCluster and FindCoordinator
/// asked on `port`.
fn endpoints_on(port: u16) -> [(String, i32); 3] {
    let mut w = Wire::connect(port);
    let m = w.call(12, &MetadataRequest::default().with_topics(Some(vec![])));
    assert_eq!(m.brokers.len(), 1);
    let d = w.call(0, &DescribeClusterRequest::default());
    assert_eq!(d.brokers.len(), 1);
    let f = w.call(
        4,
        &FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_static_str("g")]),
    );
    let c = &f.coordinators[0];
    [
        (m.brokers[0].host.to_string(), m.brokers[0].port),
        (d.brokers[0].host.to_string(), d.brokers[0].port),
        (c.host.to_string(), c.port),
    ]
}

fn kcat(args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("kcat is not runnable ({e}); scripts/test.sh installs it"));
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !stderr.contains("ERROR"), "kcat {args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn each_listener_advertises_its_own_endpoint_to_every_client() {
    let b = TestBroker::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        // PLAINTEXT advertises its own host; INTERNAL another name for it.
        "advertised.listeners=INTERNAL://localhost:0",
        &format!("ssl.keystore.password={SECRET}"),
    ]);
    let plain = b.listener_port("PLAINTEXT");
    let internal = b.listener_port("INTERNAL");
    assert_eq!(plain, b.port, "the first listener is the one `listening=` names");
    assert_ne!(plain, internal);

    // The wire: every answer naming this broker names the request's listener.
    for (port, host) in [(plain, "127.0.0.1"), (internal, "localhost")] {
        for (api, got) in
            ["Metadata", "DescribeCluster", "FindCoordinator"].iter().zip(endpoints_on(port))
        {
            assert_eq!(got, (host.to_string(), i32::from(port)), "{api} on port {port}");
        }
    }

    // kcat: metadata per listener; produce through one, consume through the other.
    for (port, host) in [(plain, "127.0.0.1"), (internal, "localhost")] {
        let meta = kcat(&["-b", &format!("127.0.0.1:{port}"), "-L", "-m", "10"], "");
        assert!(meta.contains(&format!("broker 1 at {host}:{port}")), "{meta}");
    }
    let via_internal = format!("127.0.0.1:{internal}");
    let via_plain = format!("127.0.0.1:{plain}");
    kcat(&["-b", &via_internal, "-P", "-t", "two-doors", "-K:"], "k1:v1\nk2:v2\n");
    let got = kcat(
        &[
            "-b",
            &via_plain,
            "-C",
            "-t",
            "two-doors",
            "-o",
            "beginning",
            "-c",
            "2",
            "-e",
            "-f",
            "%k=%s\n",
        ],
        "",
    );
    assert_eq!(got, "k1=v1\nk2=v2\n");

    // Java AdminClient: describeCluster per listener, then a request through
    // the node it was told about.
    let program = repo_root().join("tests/java/ListenerEndpoints.java").display().to_string();
    for (port, host) in [(plain, "127.0.0.1"), (internal, "localhost")] {
        let out = kafka_tool(&b, &program, &[&format!("127.0.0.1:{port}")], None);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                format!("node 1 {host}:{port}").as_str(),
                format!("controller 1 {host}:{port}").as_str(),
                "topics 1",
            ],
            "listener on port {port}"
        );
    }

    // The secret: null and sensitive in DescribeConfigs, nowhere else.
    let described = kafka_tool(
        &b,
        "kafka.admin.ConfigCommand",
        &[
            "--bootstrap-server",
            &via_internal,
            "--describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            "1",
            "--all",
        ],
        None,
    );
    let line = described
        .lines()
        .find(|l| l.trim_start().starts_with("ssl.keystore.password="))
        .unwrap_or_else(|| panic!("{described}"));
    assert!(line.contains("ssl.keystore.password=null sensitive=true"), "{line}");
    assert!(
        described.contains(
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT sensitive=false"
        ),
        "{described}"
    );
    let (_, metrics) = http_get(b.metrics_port, "/metrics");
    assert!(!metrics.contains(SECRET));
    assert!(!described.contains(SECRET));
    assert!(!b.log().contains(SECRET), "{}", b.log());
}

#[test]
fn check_config_refuses_mechanisms_not_served_and_hides_secrets() {
    let sediment = env!("CARGO_BIN_EXE_sediment");
    let out = Command::new(sediment)
        .args(["check-config", &repo_root().join("config/dev.toml").display().to_string()])
        .args(["--override", "listeners=PLAINTEXT://:9092,SECURE://:9093"])
        .args([
            "--override",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
        ])
        .args(["--override", "listener.name.secure.sasl.enabled.mechanisms=OAUTHBEARER"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("OAUTHBEARER is not supported"), "{stderr}");

    let out = Command::new(sediment)
        .args(["check-config", &repo_root().join("config/dev.toml").display().to_string()])
        .args(["--override", &format!("listener.name.plaintext.ssl.key.password={SECRET}")])
        .args(["--override", &format!("ssl.truststore.password={SECRET}")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!stdout.contains(SECRET), "{stdout}");
    assert!(
        stdout.contains("* listener.name.plaintext.ssl.key.password = \"[hidden]\""),
        "{stdout}"
    );
    assert!(stdout.contains("* ssl.truststore.password = \"[hidden]\""), "{stdout}");
}

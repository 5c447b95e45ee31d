//! Re-authentication of SASL sessions (KIP-368) with
//! `connections.max.reauth.ms=3000`, on one broker with a PLAINTEXT and a
//! SASL_PLAINTEXT listener (PLAIN users alice and bob, SCRAM-SHA-256 users
//! made with `kafka-configs`).
//!
//! Real clients keep producing across several session lifetimes without an
//! error, re-authenticating on their connections (counted per mechanism):
//! Kafka 4.1.2's console producer with PLAIN and kafka-python 3 with
//! SCRAM-SHA-256; all their records arrive. A SCRAM user deleted with
//! `kafka-configs` loses its connection at its next re-authentication.
//! On the wire: a v2 SaslAuthenticate carries the lifetime; a
//! re-authentication as the same user renews the session and the
//! connection keeps serving; a second one within a second is an ordinary
//! SaslHandshake (ILLEGAL_SASL_STATE, still open); one as another user fails
//! with Kafka's reason and closes; one with another mechanism closes; a
//! client that authenticated with SaslAuthenticate v0 (which cannot
//! re-authenticate) is closed at its first request after expiry.

use crate::broker;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::broker::{create_topic, kafka_tool, python, repo_root, Reaper, TestBroker, Wire};
use bytes::Bytes;
use kafka_protocol::messages::{
    ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;

const LIFETIME_MS: i64 = 3000;

fn users() -> String {
    "org.apache.kafka.common.security.plain.PlainLoginModule required \
     user_alice=\"alice-pw\" user_bob=\"bob-pw\";"
        .to_string()
}

struct Setup {
    b: TestBroker,
    sasl: u16,
}

impl Setup {
    fn start() -> Self {
        let users = users();
        let b = TestBroker::start(&[
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
            &format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={users}"),
            &format!("listener.name.sasl_plaintext.connections.max.reauth.ms={LIFETIME_MS}"),
            "connection.failed.authentication.delay.ms=0",
        ]);
        let sasl = b.listener_port("SASL_PLAINTEXT");
        Self { sasl, b }
    }

    fn count(&self, series: &str) -> f64 {
        self.b.metric(series).unwrap_or(0.0)
    }

    fn reauths(&self, mechanism: &str, result: &str) -> f64 {
        self.count(&format!(
            "sediment_reauthentications_total{{listener=\"SASL_PLAINTEXT\",mechanism=\"{mechanism}\",result=\"{result}\"}}"
        ))
    }

    fn expired(&self) -> f64 {
        self.count("sediment_expired_sessions_closed_total{listener=\"SASL_PLAINTEXT\"}")
    }

    fn scram_user(&self, args: &[&str]) {
        let bootstrap = self.b.bootstrap();
        let mut all =
            vec!["--bootstrap-server", bootstrap.as_str(), "--alter", "--entity-type", "users"];
        all.extend_from_slice(args);
        kafka_tool(&self.b, "kafka.admin.ConfigCommand", &all, None);
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn handshake(w: &mut Wire, mechanism: &str) -> i16 {
    w.call(1, &SaslHandshakeRequest::default().with_mechanism(s(mechanism))).error_code
}

fn plain(w: &mut Wire, version: i16, user: &str, password: &str) -> (i16, Option<String>, i64) {
    let token = Bytes::from(format!("\0{user}\0{password}"));
    let r = w.call(version, &SaslAuthenticateRequest::default().with_auth_bytes(token));
    (r.error_code, r.error_message.map(|m| m.to_string()), r.session_lifetime_ms)
}

fn authenticated(port: u16, version: i16) -> Wire {
    let mut w = Wire::connect(port);
    assert_eq!(w.call(3, &ApiVersionsRequest::default()).error_code, 0);
    assert_eq!(handshake(&mut w, "PLAIN"), 0);
    let (code, message, lifetime) = plain(&mut w, version, "alice", "alice-pw");
    assert_eq!(code, 0, "{message:?}");
    // v0 has no lifetime field.
    assert_eq!(lifetime, if version >= 1 { LIFETIME_MS } else { 0 });
    w
}

fn metadata_ok(w: &mut Wire) -> bool {
    w.call(12, &MetadataRequest::default()).brokers.len() == 1
}

#[test]
fn on_the_wire_a_session_renews_as_the_same_principal_and_ends_otherwise() {
    let st = Setup::start();
    // Renewed as the same user: the connection keeps serving.
    let mut w = authenticated(st.sasl, 2);
    assert_eq!(handshake(&mut w, "PLAIN"), 0);
    let (code, message, lifetime) = plain(&mut w, 2, "alice", "alice-pw");
    assert_eq!((code, lifetime), (0, LIFETIME_MS), "{message:?}");
    assert!(metadata_ok(&mut w));
    assert_eq!(st.reauths("PLAIN", "success"), 1.0);
    // Within a second of the last one: an ordinary SaslHandshake request.
    assert_eq!(handshake(&mut w, "PLAIN"), 34, "ILLEGAL_SASL_STATE");
    assert!(metadata_ok(&mut w));

    // As another user: Kafka's reason, then closed.
    let mut w = authenticated(st.sasl, 2);
    assert_eq!(handshake(&mut w, "PLAIN"), 0);
    let (code, message, _) = plain(&mut w, 2, "bob", "bob-pw");
    assert_eq!(code, 58, "SASL_AUTHENTICATION_FAILED");
    let message = message.unwrap_or_default();
    assert!(message.contains("User:alice") && message.contains("User:bob"), "{message}");
    assert!(w.is_closed());

    // With another mechanism: the handshake is answered, then closed.
    let mut w = authenticated(st.sasl, 2);
    assert_eq!(handshake(&mut w, "SCRAM-SHA-256"), 0);
    w.send(2, &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from("n,,n=alice,r=x")));
    assert!(w.is_closed());
    assert_eq!(st.reauths("PLAIN", "failure"), 2.0);

    // A v0 client cannot re-authenticate: closed at its first request after
    // the session ended; a v2 client that did not renew, the same.
    let mut v0 = authenticated(st.sasl, 0);
    let mut v2 = authenticated(st.sasl, 2);
    let ends = Instant::now() + Duration::from_millis(LIFETIME_MS as u64);
    assert!(metadata_ok(&mut v0) && metadata_ok(&mut v2));
    std::thread::sleep(ends.saturating_duration_since(Instant::now()) + Duration::from_millis(200));
    for w in [&mut v0, &mut v2] {
        w.send(12, &MetadataRequest::default());
        assert!(w.is_closed());
    }
    assert_eq!(st.expired(), 2.0);
    assert!(!st.b.log().contains("panicked"), "{}", st.b.log());
}

/// Kafka's console producer over SASL_PLAINTEXT with PLAIN, fed from a pipe.
fn console_producer(st: &Setup, dir: &std::path::Path) -> Reaper {
    let config = dir.join("plain.properties");
    std::fs::write(
        &config,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"alice-pw\";\n",
    )
    .expect("write");
    let child: Child = Command::new("bash")
        .arg(repo_root().join("scripts/kafka-tool.sh"))
        .args(["org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server"])
        .arg(format!("127.0.0.1:{}", st.sasl))
        .args(["--topic", "reauth-java", "--producer.config"])
        .arg(&config)
        .args(["--producer-property", "linger.ms=0", "--producer-property", "acks=all"])
        .env("KAFKA_HEAP_OPTS", "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("scripts/kafka-tool.sh");
    Reaper(child)
}

fn python_client(
    st: &Setup,
    user: &str,
    password: &str,
    stop: &std::path::Path,
    mode: &str,
) -> Child {
    Command::new("timeout")
        .args(["--kill-after=5", "150"])
        .arg(python())
        .arg(repo_root().join("tests/python/reauth_kafka_python.py"))
        .arg(format!("127.0.0.1:{}", st.sasl))
        .args(["reauth-py", user, password, "SCRAM-SHA-256"])
        .arg(stop)
        .arg(mode)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python")
}

fn finished(st: &Setup, child: Child, what: &str) -> String {
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("done"),
        "{what}\n{stdout}\n{}\nbroker:\n{}",
        String::from_utf8_lossy(&out.stderr),
        st.b.log()
    );
    stdout
}

#[test]
fn java_and_kafka_python_clients_reauthenticate_and_a_deleted_user_is_cut_off() {
    let st = Setup::start();
    create_topic(st.b.port, "reauth-java", 1, &[]);
    create_topic(st.b.port, "reauth-py", 1, &[]);
    for user in ["carol", "dave"] {
        st.scram_user(&[
            "--entity-name",
            user,
            "--add-config",
            &format!("SCRAM-SHA-256=[iterations=4096,password={user}-pw]"),
        ]);
    }
    let dir = tempfile::tempdir().expect("tmp");
    let stop = dir.path().join("stop");
    let py = python_client(&st, "carol", "carol-pw", &stop, "until-stop");

    // The Java producer sends a line every 200 ms until it has renewed its
    // session twice; kafka-python until it has too.
    let mut java = console_producer(&st, dir.path());
    let mut stdin = java.0.stdin.take().expect("stdin");
    let mut sent = 0;
    st.b.wait_for(90, "two PLAIN and two SCRAM-SHA-256 re-authentications", || {
        writeln!(stdin, "java-{sent}").ok()?;
        sent += 1;
        std::thread::sleep(Duration::from_millis(200));
        (st.reauths("PLAIN", "success") >= 2.0 && st.reauths("SCRAM-SHA-256", "success") >= 2.0)
            .then_some(())
    });
    drop(stdin);
    let status = java.0.wait().expect("wait");
    assert!(status.success(), "console producer failed\nbroker:\n{}", st.b.log());
    std::fs::write(&stop, "").expect("stop");
    let out = finished(&st, py, "kafka-python until-stop");
    let acked: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("done "))
        .and_then(|n| n.trim().parse().ok())
        .expect("done N");
    assert!(acked > 0, "{out}");
    assert_eq!(st.reauths("PLAIN", "failure") + st.reauths("SCRAM-SHA-256", "failure"), 0.0);
    assert_eq!(st.expired(), 0.0, "no client outlived its session");
    // Every line the Java producer sent arrived, in order.
    let got = broker::fetch_all(st.b.port, "reauth-java", 0);
    let values: Vec<String> = got.iter().map(|r| r.2.clone().unwrap_or_default()).collect();
    let expected: Vec<String> = (0..sent).map(|i| format!("java-{i}")).collect();
    assert_eq!(values, expected);

    // dave's credential is deleted while its client produces: its next
    // re-authentication fails and the client reports it.
    let py = python_client(&st, "dave", "dave-pw", &stop, "until-auth-fails");
    st.b.wait_for(60, "dave's first records", || {
        (broker::fetch_all(st.b.port, "reauth-py", 0).len() as u64 > acked).then_some(())
    });
    st.scram_user(&["--entity-name", "dave", "--delete-config", "SCRAM-SHA-256"]);
    finished(&st, py, "kafka-python until-auth-fails");
    assert!(st.reauths("SCRAM-SHA-256", "failure") >= 1.0, "{}", st.b.metrics());
}

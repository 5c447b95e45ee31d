//! The metrics endpoint bound beyond loopback (issue 28 item 5): a bearer
//! token guards it, a slow client cannot hold a connection open without
//! sending a request, and under an authorizer `/key-audit` answers only for
//! topics the endpoint's principal may describe (the internal topics only
//! for a super user).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::broker::{create_topic, TestBroker};

/// One HTTP/1.0 request with `headers`: the status and body.
fn get(port: u16, path: &str, headers: &[&str]) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{extra}\r\n").expect("write");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").expect("HTTP response");
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("status");
    (status, body.to_string())
}

const TOKEN: &str = "Authorization: Bearer s3cret-token";

#[test]
fn a_token_a_header_deadline_and_the_authorizer_guard_the_endpoint() {
    let b = TestBroker::start(&[
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        // The test's Kafka clients (PLAINTEXT, anonymous) administer the broker.
        "super.users=User:ANONYMOUS",
        "sediment.metrics.auth.token=s3cret-token",
        "sediment.metrics.auth.principal=User:metrics",
        "sediment.metrics.request.timeout.ms=1000",
    ]);
    create_topic(b.port, "state", 1, &[("cleanup.policy", "compact")]);
    let m = b.metrics_port;

    assert_eq!(get(m, "/metrics", &[]).0, 401, "no token");
    assert_eq!(get(m, "/metrics", &["Authorization: Bearer wrong"]).0, 401, "a wrong token");
    let (status, body) = get(m, "/metrics", &[TOKEN]);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("kafka_log_log_size"), "{body}");

    // The CLI sends the token of $SEDIMENT_METRICS_TOKEN.
    let addr = format!("127.0.0.1:{m}");
    let status = |token: Option<&str>| {
        let mut cli = std::process::Command::new(env!("CARGO_BIN_EXE_sediment"));
        cli.args(["cleaner-status", "--metrics", &addr, "--json"]);
        match token {
            Some(t) => cli.env("SEDIMENT_METRICS_TOKEN", t),
            None => cli.env_remove("SEDIMENT_METRICS_TOKEN"),
        };
        cli.output().expect("sediment cleaner-status")
    };
    let with = status(Some("s3cret-token"));
    assert!(with.status.success(), "{}", String::from_utf8_lossy(&with.stderr));
    assert!(!status(None).status.success(), "refused without the token");

    // User:metrics has no ACL and is no super user.
    for topic in ["state", "__consumer_offsets", "__transaction_state"] {
        let (status, body) = get(m, &format!("/key-audit?topic={topic}&key=k"), &[TOKEN]);
        assert_eq!(status, 403, "{topic}: {body}");
        assert!(body.contains("topic_authorization_failed"), "{body}");
    }

    // A client that connects and never finishes its headers is closed.
    let mut slow = TcpStream::connect(("127.0.0.1", m)).expect("connect");
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n").expect("write");
    slow.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let started = Instant::now();
    let mut rest = Vec::new();
    let read = slow.read_to_end(&mut rest);
    assert!(read.is_ok(), "the server closed the connection: {read:?}");
    assert!(!String::from_utf8_lossy(&rest).contains("200 OK"), "no answer to half a request");
    assert!(started.elapsed() < Duration::from_secs(20), "closed by the header deadline");
}

#[test]
fn a_super_user_principal_audits_every_topic() {
    let b = TestBroker::start(&[
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS",
    ]);
    create_topic(b.port, "state", 1, &[("cleanup.policy", "compact")]);
    // No token configured, and the default principal is User:ANONYMOUS.
    let (status, body) = get(b.metrics_port, "/key-audit?topic=state&key=k", &[]);
    assert_eq!(status, 200, "{body}");
    let (status, body) = get(b.metrics_port, "/key-audit?topic=__consumer_offsets&key=k", &[]);
    assert_ne!(status, 403, "{body}");
}

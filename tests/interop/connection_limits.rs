//! Kafka's connection limits on a real broker over real sockets:
//! `max.connections.per.ip` (with its overrides) closes one connection too
//! many at once, `max.connections` holds a client in the backlog until a
//! connection closes, and `connections.max.idle.ms` closes a connection
//! that sends nothing, an unfinished SASL handshake (a slowloris) included.
//! Each leaves the broker serving its other clients.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::broker::{TestBroker, Wire};
use kafka_protocol::messages::{ApiVersionsRequest, SaslHandshakeRequest};

/// The connection answers an ApiVersions request.
fn answers(w: &mut Wire) -> bool {
    w.send_checked(3, &ApiVersionsRequest::default()).is_some() && w.recv_frame().is_ok()
}

fn connect(port: u16, read_timeout: Duration) -> Wire {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(read_timeout)).expect("timeout");
    Wire::from_stream(stream)
}

#[test]
fn one_connection_too_many_from_an_address_is_closed_and_the_override_counts() {
    // The default allows 1; the override gives 127.0.0.1 three.
    let b = TestBroker::start(&[
        "max.connections.per.ip=1",
        "max.connections.per.ip.overrides=127.0.0.1:3",
    ]);
    let mut held: Vec<Wire> = (0..3).map(|_| connect(b.port, Duration::from_secs(30))).collect();
    for w in &mut held {
        assert!(answers(w), "a connection within the override's limit is served");
    }
    let mut fourth = connect(b.port, Duration::from_secs(30));
    assert!(fourth.is_closed(), "the fourth from 127.0.0.1 is closed at once");
    // Closing one gives its place back (the broker counts the close when it
    // sees it, so the next connection may need a retry).
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut again = connect(b.port, Duration::from_secs(30));
        if answers(&mut again) {
            break;
        }
        assert!(Instant::now() < deadline, "the freed place was never given back");
        std::thread::sleep(Duration::from_millis(20));
    }
    for w in &mut held {
        assert!(answers(w), "the held connections keep being served");
    }
}

#[test]
fn past_max_connections_a_client_waits_until_one_closes() {
    let b = TestBroker::start(&["max.connections=2"]);
    let mut first = connect(b.port, Duration::from_secs(30));
    let mut second = connect(b.port, Duration::from_secs(30));
    assert!(answers(&mut first) && answers(&mut second));
    // The third is in the kernel's backlog: its request is not read yet.
    let mut third = connect(b.port, Duration::from_millis(500));
    third.send_checked(3, &ApiVersionsRequest::default()).expect("write");
    let mut byte = [0u8; 1];
    let waited = third.stream.read(&mut byte);
    assert!(
        matches!(&waited, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the third connection was served past max.connections: {waited:?}"
    );
    drop(first);
    // Once a place is free it is accepted, and its request answered.
    third.stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let (_, _) = third.recv_frame().expect("answered once a connection closed");
    assert!(answers(&mut second));
}

#[test]
fn idle_connections_and_unfinished_sasl_handshakes_are_closed() {
    let users =
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-pw\";";
    let b = TestBroker::start(&[
        "connections.max.idle.ms=2000",
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN",
        &format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={users}"),
    ]);
    let started = Instant::now();
    let mut idle = connect(b.port, Duration::from_secs(30));
    assert!(answers(&mut idle));
    assert!(idle.is_closed(), "an idle connection is closed");
    // A client that starts SASL and then trickles nothing more.
    let sasl_port = b.listener_port("SASL_PLAINTEXT");
    let mut slow = connect(sasl_port, Duration::from_secs(30));
    let handshake = SaslHandshakeRequest::default()
        .with_mechanism(kafka_protocol::protocol::StrBytes::from_static_str("PLAIN"));
    slow.send_checked(1, &handshake).expect("handshake");
    let _ = slow.recv_frame().expect("the handshake is answered");
    // Half of a SaslAuthenticate frame, and no more.
    slow.stream.write_all(&[0, 0, 0, 40, 0, 36]).expect("partial frame");
    assert!(slow.is_closed(), "an authentication that never finishes is closed");
    assert!(started.elapsed() < Duration::from_secs(20), "closed by the idle timeout");
    // A request whose size arrives and whose body never does.
    let mut stalled = connect(b.port, Duration::from_secs(30));
    stalled.stream.write_all(&[0, 0, 0, 64, 0, 18, 0, 3]).expect("partial request");
    assert!(stalled.is_closed(), "a request body that never arrives closes the connection");
    assert!(started.elapsed() < Duration::from_secs(30), "closed by the idle timeout");
    // Meanwhile a new client is served.
    assert!(answers(&mut connect(b.port, Duration::from_secs(30))));
}

#[test]
fn a_broker_stops_while_clients_hold_half_a_frame() {
    let users =
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-pw\";";
    // connections.max.idle.ms is its default (10 minutes): only the stop ends these.
    let mut b = TestBroker::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN",
        &format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={users}"),
    ]);
    let mut slow = connect(b.listener_port("SASL_PLAINTEXT"), Duration::from_secs(30));
    slow.stream.write_all(&[0, 0, 0, 40, 0, 17]).expect("half a SaslHandshake");
    let mut stalled = connect(b.port, Duration::from_secs(30));
    stalled.stream.write_all(&[0, 0, 0, 64, 0, 18, 0, 3]).expect("half a request");
    assert!(answers(&mut connect(b.port, Duration::from_secs(30))), "both are being read");
    b.terminate();
    let status = b.wait_exit(30);
    assert!(status.success(), "a clean stop: {status}");
    drop((slow, stalled));
}

//! SCRAM credentials through Kafka 4.1.2's `kafka-configs` (ConfigCommand):
//! `--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`,
//! `--describe` (DescribeClientQuotas + DescribeUserScramCredentials) and
//! `--delete-config`; a restart keeps the credential; the store file holds
//! salted keys, never the password, and is readable by its owner only.
//! On the wire (a SASL_PLAINTEXT listener, the user put in with
//! AlterUserScramCredentials): a good exchange ends with the server
//! signature; a flipped proof bit, a truncated proof, a nonce not ours, a
//! `c=` other than the gs2 header, a client-final replayed on a new
//! connection and an unknown user each get SASL_AUTHENTICATION_FAILED (58)
//! and a closed connection.

use std::num::NonZeroU32;

use crate::broker::{kafka_tool, kafka_tool_output, TestBroker, Wire};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiVersionsRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use sediment::security::sasl::ScramMechanism;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

const CONFIGS: &str = "kafka.admin.ConfigCommand";
const ALICE_PW: &str = "alice-Scram-Secret-1";
const BOB_PW: &str = "bob-Scram-Secret-2";

fn configs(b: &TestBroker, args: &[&str]) -> String {
    let bootstrap = b.bootstrap();
    let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
    all.extend_from_slice(args);
    kafka_tool(b, CONFIGS, &all, None)
}

fn describe(b: &TestBroker, user: &str) -> String {
    configs(b, &["--describe", "--entity-type", "users", "--entity-name", user])
}

#[test]
fn kafka_configs_adds_describes_and_deletes_scram_users_durably() {
    let mut b = TestBroker::start(&[]);
    let add = |b: &TestBroker, user: &str, config: &str| {
        configs(
            b,
            &["--alter", "--entity-type", "users", "--entity-name", user, "--add-config", config],
        )
    };
    add(&b, "alice", &format!("SCRAM-SHA-256=[iterations=8192,password={ALICE_PW}]"));
    add(&b, "alice", &format!("SCRAM-SHA-512=[password={ALICE_PW}]"));
    add(&b, "bob", &format!("SCRAM-SHA-512=[iterations=4096,password={BOB_PW}]"));
    let out = describe(&b, "alice");
    assert!(out.contains("SCRAM-SHA-256=iterations=8192"), "{out}");
    assert!(out.contains("SCRAM-SHA-512=iterations=4096"), "{out}");

    // Kafka's bounds: fewer than 4096 iterations is refused by the broker.
    let bootstrap = b.bootstrap();
    let (ok, stdout, stderr) = kafka_tool_output(
        CONFIGS,
        &[
            "--bootstrap-server",
            &bootstrap,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "carol",
            "--add-config",
            "SCRAM-SHA-256=[iterations=100,password=x]",
        ],
        None,
    );
    assert!(
        !ok || stderr.contains("iterations") || stdout.contains("iterations"),
        "{stdout}{stderr}"
    );
    assert!(!describe(&b, "carol").contains("SCRAM"), "carol must have no credential");

    let file = b.data_dir().join("sediment-scram-credentials.json");
    let text = std::fs::read_to_string(&file).expect("the credential file");
    for secret in [ALICE_PW, BOB_PW] {
        assert!(!text.contains(secret), "{secret} stored:\n{text}");
    }
    assert!(text.contains("\"stored_key\"") && text.contains("\"alice\""), "{text}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&file).expect("metadata").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    b.stop();
    b.restart();
    let out = describe(&b, "alice");
    assert!(out.contains("SCRAM-SHA-256=iterations=8192"), "after restart: {out}");
    configs(
        &b,
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--delete-config",
            "SCRAM-SHA-256",
        ],
    );
    let out = describe(&b, "alice");
    assert!(
        !out.contains("SCRAM-SHA-256") && out.contains("SCRAM-SHA-512=iterations=4096"),
        "{out}"
    );
    let out = configs(&b, &["--describe", "--entity-type", "users"]);
    assert!(out.contains("bob") && out.contains("alice"), "{out}");
    for secret in [ALICE_PW, BOB_PW] {
        assert!(!b.log().contains(secret), "{secret} logged");
    }
}

#[test]
fn a_damaged_credential_file_stops_the_start_naming_the_entry() {
    let mut b = TestBroker::start(&[]);
    configs(
        &b,
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--add-config",
            &format!("SCRAM-SHA-256=[password={ALICE_PW}]"),
        ],
    );
    b.stop();
    let file = b.data_dir().join("sediment-scram-credentials.json");
    let text = std::fs::read_to_string(&file).expect("file");
    std::fs::write(&file, text.replace("\"iterations\": 4096", "\"iterations\": 10"))
        .expect("write");
    let out = std::process::Command::new("timeout")
        .args(["60", env!("CARGO_BIN_EXE_sediment"), "serve", "--override"])
        .arg(format!("log.dirs={}", b.data_dir().display()))
        .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
        .output()
        .expect("run sediment");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.status.code() != Some(124), "{log}");
    assert!(
        log.contains("sediment-scram-credentials.json") && log.contains("user \"alice\""),
        "{log}"
    );
}

const SALT: &[u8] = b"wire-test-salt";
const WIRE_PW: &str = "wire-Secret-3";

/// Handshake v1 and the client-first on a new connection; the server-first.
fn scram_first(port: u16, client_first: &str) -> (Wire, Result<String, i16>) {
    let mut w = Wire::connect(port);
    let h = w.call(1, &SaslHandshakeRequest::default().with_mechanism(s("SCRAM-SHA-256")));
    assert_eq!(h.error_code, 0);
    let r = w.call(
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(client_first.to_string())),
    );
    let first = if r.error_code == 0 {
        Ok(String::from_utf8(r.auth_bytes.to_vec()).expect("ascii"))
    } else {
        Err(r.error_code)
    };
    (w, first)
}

/// The RFC 5802 client-final for `server_first` (password WIRE_PW).
fn client_final(bare: &str, server_first: &str) -> (String, String) {
    let m = ScramMechanism::Sha256;
    let nonce = &server_first.split(',').next().expect("r")[2..];
    let salted = m.salted_password(WIRE_PW.as_bytes(), SALT, NonZeroU32::new(4096).expect("n"));
    let client_key = m.hmac(&salted, b"Client Key");
    let without_proof = format!("c=biws,r={nonce}");
    let auth = format!("{bare},{server_first},{without_proof}");
    let sig = m.hmac(&m.hash(&client_key), auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
    let server_sig = m.hmac(&m.hmac(&salted, b"Server Key"), auth.as_bytes());
    (format!("{without_proof},p={}", B64.encode(proof)), format!("v={}", B64.encode(server_sig)))
}

fn send_final(w: &mut Wire, fin: &str) -> (i16, String) {
    let r = w
        .call(2, &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(fin.to_string())));
    (r.error_code, String::from_utf8_lossy(&r.auth_bytes).into_owned())
}

#[test]
fn on_the_wire_every_bad_client_final_fails_with_58_and_closes() {
    let b = TestBroker::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=SCRAM-SHA-256",
    ]);
    let port = b.listener_port("SASL_PLAINTEXT");
    // The credential goes in through AlterUserScramCredentials on the wire.
    let m = ScramMechanism::Sha256;
    let salted = m.salted_password(WIRE_PW.as_bytes(), SALT, NonZeroU32::new(4096).expect("n"));
    let upsert = ScramCredentialUpsertion::default()
        .with_name(s("alice"))
        .with_mechanism(m.kafka_type())
        .with_iterations(4096)
        .with_salt(Bytes::from_static(SALT))
        .with_salted_password(Bytes::from(salted));
    let r = Wire::connect(b.port)
        .call(0, &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsert]));
    assert_eq!(r.results[0].error_code, 0, "{:?}", r.results[0].error_message);

    let bare = "n=alice,r=wireclientnonce";
    let (mut w, first) = scram_first(port, &format!("n,,{bare}"));
    let server_first = first.expect("server-first");
    let (good, server_final) = client_final(bare, &server_first);
    assert_eq!(send_final(&mut w, &good), (0, server_final));
    // Authenticated: requests are served.
    assert_eq!(w.call(3, &ApiVersionsRequest::default()).error_code, 0);

    let flip = |f: &str| {
        let (head, p) = f.rsplit_once(",p=").expect("p");
        let mut proof = B64.decode(p).expect("b64");
        proof[0] ^= 1;
        format!("{head},p={}", B64.encode(proof))
    };
    let truncate = |f: &str| {
        let (head, p) = f.rsplit_once(",p=").expect("p");
        let proof = B64.decode(p).expect("b64");
        format!("{head},p={}", B64.encode(&proof[..16]))
    };
    let nonce = |f: &str| f.replacen(",p=", "x,p=", 1);
    let binding = |f: &str| f.replacen("c=biws", "c=eSws", 1);
    for (what, tamper) in [
        ("flipped bit", &flip as &dyn Fn(&str) -> String),
        ("truncated proof", &truncate),
        ("nonce not ours", &nonce),
        ("channel binding", &binding),
    ] {
        let (mut w, first) = scram_first(port, &format!("n,,{bare}"));
        let (fin, _) = client_final(bare, &first.expect("server-first"));
        let (code, _) = send_final(&mut w, &tamper(&fin));
        assert_eq!(code, 58, "{what}");
        assert!(w.is_closed(), "{what}: the connection stays open");
    }
    // The good client-final of the first connection, replayed on a new one.
    let (mut w, first) = scram_first(port, &format!("n,,{bare}"));
    assert_ne!(first.expect("server-first"), server_first, "a fresh server nonce");
    assert_eq!(send_final(&mut w, &good).0, 58, "replay");
    assert!(w.is_closed());
    // An unknown user fails at the first message.
    let (mut w, first) = scram_first(port, "n,,n=mallory,r=abc");
    assert_eq!(first, Err(58));
    assert!(w.is_closed());
    assert!(!b.log().contains(WIRE_PW));
}

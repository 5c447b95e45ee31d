//! Unit tests of the SASL state machine (`authenticator`).
use super::*;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use crate::security::sasl::scram_credential::ScramCredential;
use crate::security::sasl::{jaas, scram, CredentialLookup, PlainUsers, ScramMechanism};
use bytes::BytesMut;
use kafka_protocol::messages::{
    ApiVersionsRequest, MetadataRequest, RequestHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::Encodable;

fn listener() -> Arc<SaslListener> {
    let text =
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"pw\";";
    let users = PlainUsers::from_jaas(&jaas::parse(text).unwrap()).unwrap();
    Arc::new(SaslListener {
        mechanisms: vec!["PLAIN".into()],
        plain: Some(Arc::new(users)),
        scram: None,
        max_receive_size: 524_288,
        failed_authentication_delay: Duration::from_millis(100),
        max_reauth: std::collections::HashMap::new(),
    })
}

fn frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Bytes {
    let mut b = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .encode(&mut b, key.request_header_version(version))
        .unwrap();
    body.encode(&mut b, version).unwrap();
    b.freeze()
}

fn handshake(m: &str, v: i16) -> Bytes {
    frame(ApiKey::SaslHandshake, v, &SaslHandshakeRequest::default().with_mechanism(str_bytes(m)))
}

fn sasl_auth(token: &[u8], v: i16) -> Bytes {
    let r = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    frame(ApiKey::SaslAuthenticate, v, &r)
}

fn code(step: &AuthStep) -> Option<i16> {
    let out = match step {
        AuthStep::Reply(o) | AuthStep::Done { reply: o, .. } => o,
        AuthStep::Fail { reply: Some(o), .. } => o,
        _ => return None,
    };
    let Out::Kafka(a) = out else { return None };
    match &a.response {
        ResponseKind::SaslHandshake(r) => Some(r.error_code),
        ResponseKind::SaslAuthenticate(r) => Some(r.error_code),
        ResponseKind::ApiVersions(r) => Some(r.error_code),
        ResponseKind::Produce(r) => Some(r.responses[0].partition_responses[0].error_code),
        _ => None,
    }
}

#[test]
fn plain_with_headers_completes_with_the_user_as_principal() {
    let mut a = Authenticator::new(listener());
    let versions = a.on_frame(frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()));
    assert_eq!(code(&versions), Some(0));
    match a.on_frame(handshake("PLAIN", 1)) {
        AuthStep::Reply(Out::Kafka(ans)) => {
            let ResponseKind::SaslHandshake(r) = ans.response else { panic!() };
            assert_eq!((r.error_code, r.mechanisms.len()), (0, 1));
        }
        other => panic!("{other:?}"),
    }
    assert!(!a.is_complete());
    for v in [0, 1, 2] {
        let mut a = Authenticator::new(listener());
        a.on_frame(handshake("PLAIN", 1));
        match a.on_frame(sasl_auth(b"\0alice\0pw", v)) {
            AuthStep::Done { principal, .. } => assert_eq!(principal.to_string(), "User:alice"),
            other => panic!("v{v}: {other:?}"),
        }
        assert!(a.is_complete());
        assert!(matches!(a.on_frame(sasl_auth(b"\0alice\0pw", v)), AuthStep::Close(_)));
    }
}

#[test]
fn raw_tokens_after_a_v0_handshake() {
    let mut a = Authenticator::new(listener());
    assert_eq!(code(&a.on_frame(handshake("PLAIN", 0))), Some(0));
    // A raw token is any bytes, shorter than a request header too.
    match a.on_frame(Bytes::from_static(b"\0alice\0pw")) {
        AuthStep::Done { reply: Out::Raw(last), principal, .. } => {
            assert!(last.is_empty());
            assert_eq!(principal.name, "alice");
        }
        other => panic!("{other:?}"),
    }
    let mut a = Authenticator::new(listener());
    a.on_frame(handshake("PLAIN", 0));
    let step = a.on_frame(Bytes::from_static(b"\0alice\0nope"));
    assert!(matches!(step, AuthStep::Fail { reason: "bad_credentials", reply: None, .. }));
}

#[test]
fn every_wrong_move_fails_or_closes() {
    let mut a = Authenticator::new(listener());
    let step = a.on_frame(handshake("SCRAM-SHA-256", 1));
    assert_eq!(code(&step), Some(33));
    match step {
        AuthStep::Fail {
            reason: "unsupported_mechanism", reply: Some(Out::Kafka(ans)), ..
        } => {
            let ResponseKind::SaslHandshake(r) = ans.response else { panic!() };
            assert_eq!(r.mechanisms, vec![str_bytes("PLAIN")]);
        }
        other => panic!("{other:?}"),
    }
    // Mechanism names are exact, as Kafka compares them.
    let mut a = Authenticator::new(listener());
    assert_eq!(code(&a.on_frame(handshake("plain", 1))), Some(33));
    // Metadata before authentication: no answer.
    let mut a = Authenticator::new(listener());
    let step = a.on_frame(frame(ApiKey::Metadata, 12, &MetadataRequest::default()));
    assert!(matches!(step, AuthStep::Fail { reason: "illegal_state", reply: None, .. }));
    // A second ApiVersions closes at once.
    let mut a = Authenticator::new(listener());
    a.on_frame(frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()));
    let again = a.on_frame(frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()));
    assert!(matches!(again, AuthStep::Close(_)));
    // A second handshake, ApiVersions and Metadata after the handshake.
    for (second, expected) in [
        (handshake("PLAIN", 1), Some(34)),
        (frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()), Some(34)),
        (frame(ApiKey::Metadata, 12, &MetadataRequest::default()), None),
    ] {
        let mut a = Authenticator::new(listener());
        a.on_frame(handshake("PLAIN", 1));
        let step = a.on_frame(second);
        assert!(matches!(step, AuthStep::Fail { reason: "illegal_state", .. }), "{step:?}");
        assert_eq!(code(&step), expected);
    }
    // A bad password: 58 with Kafka's message.
    let mut a = Authenticator::new(listener());
    a.on_frame(handshake("PLAIN", 1));
    match a.on_frame(sasl_auth(b"\0alice\0pW", 2)) {
        AuthStep::Fail { reason: "bad_credentials", reply: Some(Out::Kafka(ans)), .. } => {
            let ResponseKind::SaslAuthenticate(r) = ans.response else { panic!() };
            assert_eq!(r.error_code, 58);
            let msg = r.error_message.unwrap();
            assert_eq!(msg.as_str(), "Authentication failed: Invalid username or password");
        }
        other => panic!("{other:?}"),
    }
    assert!(!a.is_complete());
    // Garbage: short frames, unknown keys, bodies that do not decode.
    for junk in [&b"\0\0"[..], b"\x7f\x7f\0\0\0\0\0\0", b"\0\x11\0\x01\0\0\0\x07\xff\xff"] {
        let mut a = Authenticator::new(listener());
        assert!(matches!(a.on_frame(Bytes::copy_from_slice(junk)), AuthStep::Close(_)), "{junk:?}");
    }
}

struct OneUser(crate::security::sasl::scram_credential::ScramCredential);

impl CredentialLookup for OneUser {
    fn lookup(&self, user: &str, m: ScramMechanism) -> Option<ScramCredential> {
        (user == "alice" && m == self.0.mechanism).then(|| self.0.clone())
    }
}

fn scram_listener(m: ScramMechanism) -> Arc<SaslListener> {
    let n = std::num::NonZeroU32::new(4096).unwrap();
    let c = ScramCredential::from_password(m, "alice-secret", b"pepper".to_vec(), n);
    let mut l = (*listener()).clone();
    l.mechanisms.push(m.name().into());
    l.scram = Some(Arc::new(OneUser(c)));
    Arc::new(l)
}

/// Runs a SCRAM exchange over SaslAuthenticate v2; `tamper` changes the
/// client-final. Returns the last step and the client-final sent.
fn scram_exchange(m: ScramMechanism, tamper: impl Fn(String) -> String) -> (AuthStep, String) {
    let mut a = Authenticator::new(scram_listener(m));
    assert_eq!(code(&a.on_frame(handshake(m.name(), 1))), Some(0));
    let bare = "n=alice,r=clientnonce";
    let first = a.on_frame(sasl_auth(format!("n,,{bare}").as_bytes(), 2));
    let AuthStep::Reply(Out::Kafka(ans)) = first else { panic!("{first:?}") };
    let ResponseKind::SaslAuthenticate(r) = ans.response else { panic!() };
    let server_first = String::from_utf8(r.auth_bytes.to_vec()).unwrap();
    let fin = tamper(scram::client_final(m, "alice-secret", bare, &server_first, "n,,"));
    (a.on_frame(sasl_auth(fin.as_bytes(), 2)), fin)
}

#[test]
fn scram_authenticates_and_every_bad_final_fails_with_58() {
    for m in ScramMechanism::ALL {
        let (step, good) = scram_exchange(m, |f| f);
        match step {
            AuthStep::Done { principal, mechanism, .. } => {
                assert_eq!((principal.to_string().as_str(), mechanism), ("User:alice", m.name()));
            }
            other => panic!("{other:?}"),
        }
        // The same client-final on a new connection: another server nonce.
        let (replay, _) = scram_exchange(m, |_| good.clone());
        assert_eq!(code(&replay), Some(58));
        assert!(matches!(replay, AuthStep::Fail { reason: "bad_credentials", .. }));
        let flip = |f: String| {
            let (head, p) = f.rsplit_once(",p=").unwrap();
            let mut proof = B64.decode(p).unwrap();
            proof[3] ^= 0x10;
            format!("{head},p={}", B64.encode(proof))
        };
        let truncate = |f: String| f[..f.len() - 8].to_string();
        let nonce = |f: String| f.replacen("r=clientnonce", "r=clientnoncf", 1);
        let binding = |f: String| f.replacen("c=biws", "c=eSws", 1);
        for tamper in [&flip as &dyn Fn(String) -> String, &truncate, &nonce, &binding] {
            let (step, _) = scram_exchange(m, tamper);
            assert_eq!(code(&step), Some(58));
            assert!(matches!(step, AuthStep::Fail { reason: "bad_credentials", .. }));
        }
    }
    // Unknown user: failed at the first message.
    let mut a = Authenticator::new(scram_listener(ScramMechanism::Sha256));
    a.on_frame(handshake("SCRAM-SHA-256", 1));
    let step = a.on_frame(sasl_auth(b"n,,n=mallory,r=abc", 2));
    assert_eq!(code(&step), Some(58));
    // SCRAM is served only with a store, even when enabled.
    let mut l = (*listener()).clone();
    l.mechanisms.push("SCRAM-SHA-512".into());
    let mut a = Authenticator::new(Arc::new(l));
    assert_eq!(code(&a.on_frame(handshake("SCRAM-SHA-512", 1))), Some(33));
}

/// PLAIN users alice and bob, SCRAM offered too, sessions of 5 s for PLAIN.
fn reauth_listener() -> Arc<SaslListener> {
    let text = "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"pw\" user_bob=\"pw2\";";
    let users = PlainUsers::from_jaas(&jaas::parse(text).unwrap()).unwrap();
    let mut max_reauth = std::collections::HashMap::new();
    max_reauth.insert("PLAIN".to_string(), Duration::from_secs(5));
    Arc::new(SaslListener {
        mechanisms: vec!["PLAIN".into(), "SCRAM-SHA-256".into()],
        plain: Some(Arc::new(users)),
        scram: Some(Arc::new(NoUsers)),
        max_receive_size: 524_288,
        failed_authentication_delay: Duration::from_millis(100),
        max_reauth,
    })
}

struct NoUsers;

impl CredentialLookup for NoUsers {
    fn lookup(&self, _: &str, _: ScramMechanism) -> Option<ScramCredential> {
        None
    }
}

fn alice() -> KafkaPrincipal {
    KafkaPrincipal { principal_type: "User".into(), name: "alice".into() }
}

fn session_lifetime(step: &AuthStep) -> i64 {
    let AuthStep::Done { reply: Out::Kafka(a), .. } = step else { panic!("{step:?}") };
    let ResponseKind::SaslAuthenticate(r) = &a.response else { panic!("{a:?}") };
    r.session_lifetime_ms
}

#[test]
fn a_session_carries_its_lifetime_and_renews_as_the_same_principal() {
    let mut a = Authenticator::new(reauth_listener());
    a.on_frame(handshake("PLAIN", 1));
    let done = a.on_frame(sasl_auth(b"\0alice\0pw", 1));
    assert_eq!(session_lifetime(&done), 5000);
    let AuthStep::Done { lifetime, .. } = done else { unreachable!() };
    assert_eq!(lifetime, Some(Duration::from_secs(5)));

    let mut r = Authenticator::reauthenticate(reauth_listener(), alice(), "PLAIN");
    assert_eq!(code(&r.on_frame(handshake("PLAIN", 1))), Some(0));
    let renewed = r.on_frame(sasl_auth(b"\0alice\0pw", 2));
    assert_eq!(session_lifetime(&renewed), 5000);
    // Without connections.max.reauth.ms the field is 0: no re-authentication.
    let mut a = Authenticator::new(listener());
    a.on_frame(handshake("PLAIN", 1));
    assert_eq!(session_lifetime(&a.on_frame(sasl_auth(b"\0alice\0pw", 1))), 0);
}

#[test]
fn reauthentication_as_another_principal_fails_with_a_reason() {
    let mut r = Authenticator::reauthenticate(reauth_listener(), alice(), "PLAIN");
    r.on_frame(handshake("PLAIN", 1));
    let step = r.on_frame(sasl_auth(b"\0bob\0pw2", 1));
    assert_eq!(code(&step), Some(ResponseError::SaslAuthenticationFailed.code()));
    let AuthStep::Fail { reply: Some(Out::Kafka(a)), .. } = step else { panic!("{step:?}") };
    let ResponseKind::SaslAuthenticate(resp) = &a.response else { panic!() };
    let message = resp.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
    assert!(message.contains("User:alice") && message.contains("User:bob"), "{message}");
    // A wrong password fails as on a first authentication.
    let mut r = Authenticator::reauthenticate(reauth_listener(), alice(), "PLAIN");
    r.on_frame(handshake("PLAIN", 1));
    assert!(matches!(r.on_frame(sasl_auth(b"\0alice\0nope", 1)), AuthStep::Fail { .. }));
}

#[test]
fn reauthentication_keeps_the_mechanism_and_starts_at_the_handshake() {
    // Another enabled mechanism: the handshake is answered, the next frame
    // fails without an answer (Kafka's REAUTH_BAD_MECHANISM).
    let mut r = Authenticator::reauthenticate(reauth_listener(), alice(), "PLAIN");
    assert_eq!(code(&r.on_frame(handshake("SCRAM-SHA-256", 1))), Some(0));
    let step = r.on_frame(sasl_auth(b"n,,n=alice,r=abc", 1));
    assert!(matches!(step, AuthStep::Fail { reply: None, .. }), "{step:?}");
    // ApiVersions is not part of a re-authentication.
    let mut r = Authenticator::reauthenticate(reauth_listener(), alice(), "PLAIN");
    let versions = r.on_frame(frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()));
    assert!(matches!(versions, AuthStep::Close(_)), "{versions:?}");
}

#[test]
fn a_session_expires_and_renews_at_most_once_a_second() {
    let now = Instant::now();
    let never =
        SaslSession { principal: alice(), mechanism: "PLAIN", expires_at: None, last_reauth: None };
    assert!(!never.expired(now + Duration::from_secs(3600)));
    assert!(!never.may_reauthenticate(now), "no lifetime: a handshake is an ordinary request");
    let mut s = SaslSession { expires_at: Some(now + Duration::from_secs(5)), ..never };
    assert!(!s.expired(now) && s.expired(now + Duration::from_secs(6)));
    assert!(s.may_reauthenticate(now));
    s.last_reauth = Some(now);
    assert!(!s.may_reauthenticate(now + Duration::from_millis(999)));
    assert!(s.may_reauthenticate(now + Duration::from_secs(1)));
    assert!(is_sasl_handshake(&handshake("PLAIN", 1)));
    assert!(!is_sasl_handshake(&sasl_auth(b"x", 1)) && !is_sasl_handshake(&[0x00]));
}

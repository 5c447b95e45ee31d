//! SASL authentication of a connection to a SASL_PLAINTEXT or SASL_SSL
//! listener, before any request is dispatched (Kafka's
//! `SaslServerAuthenticator`).
//!
//! States and transitions (anything not listed fails; nothing else exists):
//!
//! | state | frame | answer | next |
//! |---|---|---|---|
//! | HandshakeOrVersions | ApiVersions (known version) | the full API list | Handshake |
//! | HandshakeOrVersions | ApiVersions (newer than ours) | UNSUPPORTED_VERSION and the list, v0 | HandshakeOrVersions |
//! | HandshakeOrVersions, Handshake | SaslHandshake, mechanism enabled | NONE and the enabled list | Authenticate (headers from v1) |
//! | HandshakeOrVersions, Handshake | SaslHandshake, other mechanism | UNSUPPORTED_SASL_MECHANISM and the list | Failed |
//! | HandshakeOrVersions, Handshake | any other API | none | Failed |
//! | Handshake | ApiVersions again | none, closed at once | Failed |
//! | Authenticate, headers | SaslAuthenticate | the mechanism's bytes; SASL_AUTHENTICATION_FAILED and its message | Authenticate or Complete; Failed |
//! | Authenticate, headers | SaslHandshake, ApiVersions, Produce | that API's answer with ILLEGAL_SASL_STATE | Failed |
//! | Authenticate, headers | any other API | none | Failed |
//! | Authenticate, raw (handshake v0) | any bytes: a token | the raw token back; none | Authenticate or Complete; Failed |
//!
//! Invariants:
//! * Every frame before `Complete` is bounded by `sasl.server.max.receive.size`
//!   before anything is allocated for it; a larger (or negative) size fails
//!   authentication (Kafka: "invalid receive size").
//! * "Failed" is answered (if it has an answer) and closed only after
//!   `connection.failed.authentication.delay.ms`, slept in the connection's
//!   own task: other connections never wait for it. An answered failure then
//!   waits up to one second for the client to close first, so a client that
//!   drops data arriving together with the close still reads the error.
//! * A frame that is not a well-formed request (short, unknown key, a body
//!   that does not decode, an unserved version) closes the connection at once
//!   without an answer, as Kafka closes on a parse error, and is counted as
//!   `malformed` only in sediment's counter (Kafka does not count it as a
//!   failed authentication).
//! * Raw-token mode (SaslHandshake v0) takes every frame as a SASL token: no
//!   request header, no 8-byte minimum; a failure has no answer to carry it.
//! * The principal comes only from a mechanism's [`Authenticated`] value,
//!   which only a successful exchange builds.
//! * Nothing here logs a token or the offered user name.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, ProduceRequest, ProduceResponse, RequestKind, ResponseKind,
    SaslAuthenticateResponse, SaslHandshakeResponse,
};
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::watch;

use super::connection::ConnWriter;
use super::{encode_response, parse_frame, ConnError, Frame, ResponseBuf, MIN_FRAME};
use crate::api::{api_versions, str_bytes};
use crate::metrics::RequestMetrics;
use crate::security::sasl::{SaslListener, SaslServer, SaslStep};
use crate::security::{KafkaPrincipal, Session};

/// The authenticator's state (the table of the module doc).
enum SaslState {
    /// Nothing yet: ApiVersions or SaslHandshake.
    HandshakeOrVersions,
    /// ApiVersions answered: SaslHandshake next.
    Handshake,
    /// A mechanism was chosen; `headers`: tokens come in SaslAuthenticate
    /// requests (handshake v1), else raw (v0).
    Authenticate {
        server: Box<dyn SaslServer>,
        headers: bool,
    },
    Complete,
    Failed,
}

/// A Kafka response to one request.
#[derive(Debug)]
pub struct Answer {
    pub correlation_id: i32,
    pub header_version: i16,
    pub version: i16,
    pub response: ResponseKind,
}

/// Bytes to send.
#[derive(Debug)]
pub enum Out {
    Kafka(Box<Answer>),
    /// A size-prefixed raw token (handshake v0).
    Raw(Vec<u8>),
}

/// What one frame leads to.
#[derive(Debug)]
pub enum AuthStep {
    /// Send and read the next frame.
    Reply(Out),
    /// Authenticated: send the mechanism's last bytes, then serve requests.
    Done { principal: KafkaPrincipal, mechanism: &'static str, reply: Out },
    /// Authentication failed: after the delay, send `reply` if any, close.
    Fail { reason: &'static str, mechanism: Option<&'static str>, reply: Option<Out> },
    /// Not a well-formed request (or a second ApiVersions): close now.
    Close(String),
}

/// The state machine of one connection. Pure (no I/O), so unit tests and a
/// fuzz target drive it with frames.
pub struct Authenticator {
    listener: Arc<SaslListener>,
    state: SaslState,
}

fn answer(header: (i32, ApiKey, i16), response: ResponseKind) -> Out {
    let (correlation_id, key, version) = header;
    Out::Kafka(Box::new(Answer {
        correlation_id,
        header_version: key.response_header_version(version),
        version,
        response,
    }))
}

fn handshake_response(code: i16, mechanisms: &[String]) -> ResponseKind {
    ResponseKind::SaslHandshake(
        SaslHandshakeResponse::default()
            .with_error_code(code)
            .with_mechanisms(mechanisms.iter().map(|m| str_bytes(m.as_str())).collect()),
    )
}

/// Kafka's error response to a Produce: the code on every partition.
fn produce_error(request: &ProduceRequest, code: i16) -> ResponseKind {
    let responses = request
        .topic_data
        .iter()
        .map(|t| {
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partition_responses(
                    t.partition_data
                        .iter()
                        .map(|p| {
                            PartitionProduceResponse::default()
                                .with_index(p.index)
                                .with_error_code(code)
                                .with_base_offset(-1)
                                .with_log_append_time_ms(-1)
                                .with_log_start_offset(-1)
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::Produce(ProduceResponse::default().with_responses(responses))
}

impl Authenticator {
    pub fn new(listener: Arc<SaslListener>) -> Self {
        Self { listener, state: SaslState::HandshakeOrVersions }
    }

    /// Whether authentication completed.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, SaslState::Complete)
    }

    /// Take one frame (the bytes after its size).
    pub fn on_frame(&mut self, frame: Bytes) -> AuthStep {
        match std::mem::replace(&mut self.state, SaslState::Failed) {
            SaslState::HandshakeOrVersions => self.handshake(frame, false),
            SaslState::Handshake => self.handshake(frame, true),
            SaslState::Authenticate { server, headers: false } => self.raw_token(server, &frame),
            SaslState::Authenticate { server, headers: true } => self.authenticate(server, frame),
            SaslState::Complete | SaslState::Failed => {
                AuthStep::Close("a frame after authentication ended".into())
            }
        }
    }

    fn handshake(&mut self, frame: Bytes, versions_seen: bool) -> AuthStep {
        if frame.len() < MIN_FRAME {
            return AuthStep::Close(format!(
                "frame of {} bytes before authentication",
                frame.len()
            ));
        }
        let key = (&frame[..2]).get_i16();
        let Ok(api_key) = ApiKey::try_from(key) else {
            return AuthStep::Close(format!("unknown api key {key} before authentication"));
        };
        // Refused before the body is parsed, as Kafka does, so no other
        // request schema is exposed before authentication.
        if api_key != ApiKey::ApiVersions && api_key != ApiKey::SaslHandshake {
            return AuthStep::Fail { reason: "illegal_state", mechanism: None, reply: None };
        }
        if api_key == ApiKey::ApiVersions && versions_seen {
            return AuthStep::Close("a second ApiVersions during SASL authentication".into());
        }
        let (api_key, header, request) = match parse_frame(frame) {
            Err(e) => return AuthStep::Close(e),
            Ok(Frame::ApiVersionsTooNew { correlation_id }) => {
                self.state = SaslState::HandshakeOrVersions;
                let response = ResponseKind::ApiVersions(api_versions::unsupported_version());
                return AuthStep::Reply(answer((correlation_id, ApiKey::ApiVersions, 0), response));
            }
            Ok(Frame::LegacyProduce { .. }) => return AuthStep::Close("Produce v0-2".into()),
            Ok(Frame::Request { api_key, header, request }) => (api_key, header, request),
        };
        let version = header.request_api_version;
        let head = (header.correlation_id, api_key, version);
        match *request {
            RequestKind::ApiVersions(r) => {
                self.state = SaslState::Handshake;
                AuthStep::Reply(answer(
                    head,
                    ResponseKind::ApiVersions(api_versions::handle(&r, version)),
                ))
            }
            RequestKind::SaslHandshake(r) => {
                let mechanisms = &self.listener.mechanisms;
                match self.listener.server(r.mechanism.as_str()) {
                    Some(server) => {
                        self.state = SaslState::Authenticate { server, headers: version >= 1 };
                        AuthStep::Reply(answer(head, handshake_response(0, mechanisms)))
                    }
                    None => {
                        let code = ResponseError::UnsupportedSaslMechanism.code();
                        AuthStep::Fail {
                            reason: "unsupported_mechanism",
                            mechanism: None,
                            reply: Some(answer(head, handshake_response(code, mechanisms))),
                        }
                    }
                }
            }
            _ => AuthStep::Close("unexpected request during the SASL handshake".into()),
        }
    }

    fn raw_token(&mut self, mut server: Box<dyn SaslServer>, token: &[u8]) -> AuthStep {
        let mechanism = Some(server.mechanism());
        match server.evaluate_response(token) {
            Ok(SaslStep::Challenge(bytes)) => {
                self.state = SaslState::Authenticate { server, headers: false };
                AuthStep::Reply(Out::Raw(bytes))
            }
            Ok(SaslStep::Complete { last, id }) => {
                self.state = SaslState::Complete;
                AuthStep::Done {
                    principal: id.principal(),
                    mechanism: server.mechanism(),
                    reply: Out::Raw(last),
                }
            }
            Err(_) => AuthStep::Fail { reason: "bad_credentials", mechanism, reply: None },
        }
    }

    fn authenticate(&mut self, mut server: Box<dyn SaslServer>, frame: Bytes) -> AuthStep {
        let mechanism = Some(server.mechanism());
        if frame.len() < MIN_FRAME {
            return AuthStep::Close(format!(
                "frame of {} bytes during authentication",
                frame.len()
            ));
        }
        let (api_key, header, request) = match parse_frame(frame) {
            Err(e) => return AuthStep::Close(e),
            Ok(Frame::Request { api_key, header, request }) => (api_key, header, request),
            Ok(_) => {
                return AuthStep::Fail { reason: "illegal_state", mechanism, reply: None };
            }
        };
        let head = (header.correlation_id, api_key, header.request_api_version);
        let illegal = ResponseError::IllegalSaslState.code();
        let r = match *request {
            RequestKind::SaslAuthenticate(r) => r,
            other => {
                // Kafka answers the request's own error response; sediment
                // builds it for the requests a confused client sends here.
                let reply = match other {
                    RequestKind::SaslHandshake(_) => Some(handshake_response(illegal, &[])),
                    RequestKind::ApiVersions(_) => Some(ResponseKind::ApiVersions(
                        ApiVersionsResponse::default().with_error_code(illegal),
                    )),
                    RequestKind::Produce(p) if p.acks != 0 => Some(produce_error(&p, illegal)),
                    _ => None,
                };
                let reply = reply.map(|r| answer(head, r));
                return AuthStep::Fail { reason: "illegal_state", mechanism, reply };
            }
        };
        match server.evaluate_response(&r.auth_bytes) {
            Ok(SaslStep::Challenge(bytes)) => {
                self.state = SaslState::Authenticate { server, headers: true };
                let response = SaslAuthenticateResponse::default().with_auth_bytes(bytes.into());
                AuthStep::Reply(answer(head, ResponseKind::SaslAuthenticate(response)))
            }
            Ok(SaslStep::Complete { last, id }) => {
                self.state = SaslState::Complete;
                // session_lifetime_ms 0: no re-authentication (connections.max.reauth.ms=0).
                let response = SaslAuthenticateResponse::default().with_auth_bytes(last.into());
                AuthStep::Done {
                    principal: id.principal(),
                    mechanism: server.mechanism(),
                    reply: answer(head, ResponseKind::SaslAuthenticate(response)),
                }
            }
            Err(e) => {
                let response = SaslAuthenticateResponse::default()
                    .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                    .with_error_message(Some(str_bytes(e.0)));
                let reply = Some(answer(head, ResponseKind::SaslAuthenticate(response)));
                AuthStep::Fail { reason: "bad_credentials", mechanism, reply }
            }
        }
    }
}

/// At most one INFO line per second for failed authentications (a client
/// retrying in a loop must not flood the log); the rest go to DEBUG.
fn log_failure(session: &Session, mechanism: &str, reason: &str) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (peer, listener) = (session.peer, &session.listener);
    if LAST.swap(now, Ordering::Relaxed) != now {
        tracing::info!(%peer, %listener, mechanism, reason, "failed authentication");
    } else {
        tracing::debug!(%peer, %listener, mechanism, reason, "failed authentication");
    }
}

async fn send(writer: &mut ConnWriter, out: &mut ResponseBuf, reply: Out) -> Result<(), ConnError> {
    out.clear();
    match reply {
        Out::Kafka(a) => {
            encode_response(out, a.correlation_id, a.header_version, &a.response, a.version)?
        }
        Out::Raw(token) => {
            let size = i32::try_from(token.len())
                .map_err(|_| ConnError::Protocol("SASL token larger than 2 GiB".into()))?;
            out.head_mut().put_i32(size);
            out.head_mut().put_slice(&token);
        }
    }
    writer.write(out).await?;
    Ok(())
}

/// How long a failed connection that was answered stays open for the client
/// to read the answer and close first.
const FAILED_LINGER: Duration = Duration::from_secs(1);

/// Wait (bounded by [`FAILED_LINGER`]) for the client to close after reading
/// a failure answer, discarding anything it still sends. A client that reads
/// in a loop until EOF and drops what came with the EOF (kafka-python 3 does)
/// would otherwise see "socket disconnected" instead of the error.
async fn linger<R: AsyncRead + Unpin>(reader: &mut BufReader<R>, stop: &mut watch::Receiver<bool>) {
    let drain = async {
        let mut scratch = [0u8; 512];
        while let Ok(n) = reader.read(&mut scratch).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::select! {
        _ = tokio::time::timeout(FAILED_LINGER, drain) => {}
        _ = stop.changed() => {}
    }
}

/// Authenticate the connection: `Some(principal)` once the client proved who
/// it is, `None` when the connection must close (failed, malformed, or the
/// broker is stopping). Failures are counted and answered here, after the delay.
///
/// # Errors
/// Socket errors.
pub(super) async fn authenticate<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    writer: &mut ConnWriter,
    listener: &Arc<SaslListener>,
    session: &Session,
    metrics: &RequestMetrics,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<KafkaPrincipal>, ConnError> {
    let mut auth = Authenticator::new(Arc::clone(listener));
    let mut out = ResponseBuf::with_capacity(1024);
    let max = listener.max_receive_size;
    loop {
        let size = tokio::select! {
            size = reader.read_i32() => match size {
                Ok(s) => s,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(e.into()),
            },
            _ = stop.changed() => return Ok(None),
        };
        let step = match usize::try_from(size) {
            Ok(size) if size <= max => {
                let mut frame = vec![0u8; size];
                reader.read_exact(&mut frame).await?;
                auth.on_frame(Bytes::from(frame))
            }
            // Refused before anything is allocated for it.
            _ => AuthStep::Fail { reason: "oversized", mechanism: None, reply: None },
        };
        match step {
            AuthStep::Reply(reply) => send(writer, &mut out, reply).await?,
            AuthStep::Done { principal, mechanism, reply } => {
                send(writer, &mut out, reply).await?;
                metrics.auth.authenticated(&session.listener);
                tracing::debug!(peer = %session.peer, listener = %session.listener, mechanism, %principal, "authenticated");
                return Ok(Some(principal));
            }
            AuthStep::Fail { reason, mechanism, reply } => {
                let mechanism = mechanism.unwrap_or("none");
                metrics.auth.failed(&session.listener, mechanism, reason);
                log_failure(session, mechanism, reason);
                let delay = listener.failed_authentication_delay;
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = stop.changed() => return Ok(None),
                }
                if let Some(reply) = reply {
                    send(writer, &mut out, reply).await?;
                    linger(reader, stop).await;
                }
                return Ok(None);
            }
            AuthStep::Close(why) => {
                metrics.auth.malformed(&session.listener);
                return Err(ConnError::Protocol(format!(
                    "closing during SASL authentication: {why}"
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
        frame(
            ApiKey::SaslHandshake,
            v,
            &SaslHandshakeRequest::default().with_mechanism(str_bytes(m)),
        )
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
                reason: "unsupported_mechanism",
                reply: Some(Out::Kafka(ans)),
                ..
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
            assert!(
                matches!(a.on_frame(Bytes::copy_from_slice(junk)), AuthStep::Close(_)),
                "{junk:?}"
            );
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
                    assert_eq!(
                        (principal.to_string().as_str(), mechanism),
                        ("User:alice", m.name())
                    );
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
}

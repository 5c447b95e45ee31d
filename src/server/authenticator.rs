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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestKind, ResponseKind, SaslAuthenticateResponse,
    SaslHandshakeResponse,
};
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::watch;

use super::connection::ConnWriter;
use super::{encode_response, parse_frame, ConnError, Frame, ResponseBuf, MIN_FRAME};
use crate::api::{api_versions, produce, str_bytes};
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
    /// Re-authentication asked for another mechanism than the session's:
    /// the handshake was answered, the next frame fails (Kafka's
    /// REAUTH_BAD_MECHANISM, which answers nothing).
    ReauthBadMechanism,
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
    /// `lifetime`: `connections.max.reauth.ms` of the mechanism, if set.
    Done {
        principal: KafkaPrincipal,
        mechanism: &'static str,
        lifetime: Option<Duration>,
        reply: Out,
    },
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
    /// Re-authenticating: the session's principal and mechanism, which the
    /// new exchange must not change.
    previous: Option<(KafkaPrincipal, &'static str)>,
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

impl Authenticator {
    pub fn new(listener: Arc<SaslListener>) -> Self {
        Self { listener, state: SaslState::HandshakeOrVersions, previous: None }
    }

    /// Re-authentication of an authenticated session (KIP-368): it starts
    /// at a SaslHandshake (no ApiVersions), must use the session's
    /// mechanism and must end with the same principal.
    pub fn reauthenticate(
        listener: Arc<SaslListener>,
        principal: KafkaPrincipal,
        mechanism: &'static str,
    ) -> Self {
        Self { listener, state: SaslState::Handshake, previous: Some((principal, mechanism)) }
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
            SaslState::ReauthBadMechanism => AuthStep::Fail {
                reason: "unsupported_mechanism",
                mechanism: self.previous.as_ref().map(|p| p.1),
                reply: None,
            },
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
                    ResponseKind::ApiVersions(api_versions::handle_unauthenticated(&r)),
                ))
            }
            RequestKind::SaslHandshake(r) => {
                let mechanisms = &self.listener.mechanisms;
                match self.listener.server(r.mechanism.as_str()) {
                    Some(server) => {
                        self.state = match &self.previous {
                            Some((_, m)) if *m != server.mechanism() => {
                                SaslState::ReauthBadMechanism
                            }
                            _ => SaslState::Authenticate { server, headers: version >= 1 },
                        };
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
                let principal = id.principal();
                if self.principal_changed(&principal) {
                    return AuthStep::Fail { reason: "bad_credentials", mechanism, reply: None };
                }
                self.state = SaslState::Complete;
                AuthStep::Done {
                    lifetime: self.lifetime(server.mechanism()),
                    principal,
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
                    RequestKind::Produce(p) if p.acks != 0 => {
                        Some(ResponseKind::Produce(produce::every_partition(&p, illegal)))
                    }
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
                let principal = id.principal();
                if let Some((before, _)) =
                    self.previous.as_ref().filter(|_| self.principal_changed(&principal))
                {
                    let why = format!("Cannot change principals during re-authentication from {before}: {principal}");
                    return authentication_failed(head, mechanism, why);
                }
                self.state = SaslState::Complete;
                let lifetime = self.lifetime(server.mechanism());
                // 0: the session never expires (connections.max.reauth.ms=0);
                // absent from v0, whose clients cannot re-authenticate.
                let ms = lifetime.map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
                let response = SaslAuthenticateResponse::default()
                    .with_auth_bytes(last.into())
                    .with_session_lifetime_ms(ms);
                AuthStep::Done {
                    principal,
                    mechanism: server.mechanism(),
                    lifetime,
                    reply: answer(head, ResponseKind::SaslAuthenticate(response)),
                }
            }
            Err(e) => authentication_failed(head, mechanism, e.0),
        }
    }
}

impl Authenticator {
    /// Re-authenticating as another principal than the session's.
    fn principal_changed(&self, principal: &KafkaPrincipal) -> bool {
        self.previous.as_ref().is_some_and(|(before, _)| before != principal)
    }

    fn lifetime(&self, mechanism: &str) -> Option<Duration> {
        self.listener.max_reauth.get(mechanism).copied()
    }
}

/// SASL_AUTHENTICATION_FAILED with `why`, then close.
fn authentication_failed(
    head: (i32, ApiKey, i16),
    mechanism: Option<&'static str>,
    why: String,
) -> AuthStep {
    let response = SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
        .with_error_message(Some(str_bytes(why)));
    let reply = Some(answer(head, ResponseKind::SaslAuthenticate(response)));
    AuthStep::Fail { reason: "bad_credentials", mechanism, reply }
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

/// An authenticated SASL session of a connection.
#[derive(Debug)]
pub(super) struct SaslSession {
    pub principal: KafkaPrincipal,
    pub mechanism: &'static str,
    /// When the session ends (`connections.max.reauth.ms`), if it does.
    pub expires_at: Option<Instant>,
    /// When the last re-authentication started.
    pub last_reauth: Option<Instant>,
}

/// Kafka's shortest interval between two re-authentications of a connection.
const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

impl SaslSession {
    /// Past its lifetime: the connection is closed at its next request.
    pub fn expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|at| now > at)
    }

    /// Whether a SaslHandshake arriving `now` starts a re-authentication
    /// (Kafka's `maybeBeginServerReauthentication`): only on a session that
    /// expires, and at most once a second. Otherwise the handshake is an
    /// ordinary request, answered ILLEGAL_SASL_STATE.
    pub fn may_reauthenticate(&self, now: Instant) -> bool {
        self.expires_at.is_some()
            && self.last_reauth.is_none_or(|at| now.duration_since(at) >= MIN_REAUTH_INTERVAL)
    }
}

/// Whether a request frame is a SaslHandshake.
pub(super) fn is_sasl_handshake(frame: &[u8]) -> bool {
    frame.len() >= 2 && i16::from_be_bytes([frame[0], frame[1]]) == ApiKey::SaslHandshake as i16
}

/// The connection an exchange runs on.
pub(super) struct SaslIo<'a, R> {
    pub reader: &'a mut BufReader<R>,
    pub writer: &'a mut ConnWriter,
    pub listener: &'a Arc<SaslListener>,
    pub session: &'a Session,
    pub metrics: &'a RequestMetrics,
    pub stop: &'a mut watch::Receiver<bool>,
}

/// Authenticate the connection: `Some` once the client proved who it is,
/// `None` when the connection must close (failed, malformed, or the broker
/// is stopping). Failures are counted and answered here, after the delay.
///
/// # Errors
/// Socket errors.
pub(super) async fn authenticate<R: AsyncRead + Unpin>(
    io: SaslIo<'_, R>,
) -> Result<Option<SaslSession>, ConnError> {
    let auth = Authenticator::new(Arc::clone(io.listener));
    let Some((principal, mechanism, lifetime)) = exchange(io, auth, None).await? else {
        return Ok(None);
    };
    let expires_at = lifetime.map(|d| Instant::now() + d);
    Ok(Some(SaslSession { principal, mechanism, expires_at, last_reauth: None }))
}

/// Re-authenticate `previous` on its connection, starting at the SaslHandshake
/// `handshake` (KIP-368): `Some` with the renewed session, `None` when the
/// connection must close (the exchange failed, or changed mechanism or
/// principal).
///
/// # Errors
/// Socket errors.
pub(super) async fn reauthenticate<R: AsyncRead + Unpin>(
    io: SaslIo<'_, R>,
    previous: &SaslSession,
    handshake: Bytes,
) -> Result<Option<SaslSession>, ConnError> {
    let started = Instant::now();
    let (listener, metrics) = (io.session.listener.clone(), io.metrics);
    let auth = Authenticator::reauthenticate(
        Arc::clone(io.listener),
        previous.principal.clone(),
        previous.mechanism,
    );
    let renewed = exchange(io, auth, Some(handshake)).await?;
    metrics.auth.reauthenticated(&listener, previous.mechanism, renewed.is_some());
    Ok(renewed.map(|(principal, mechanism, lifetime)| SaslSession {
        principal,
        mechanism,
        expires_at: lifetime.map(|d| Instant::now() + d),
        last_reauth: Some(started),
    }))
}

/// The next frame of an exchange as a step; `None` at end of stream or stop.
async fn next_step<R: AsyncRead + Unpin>(
    io: &mut SaslIo<'_, R>,
    auth: &mut Authenticator,
) -> Result<Option<AuthStep>, ConnError> {
    let size = tokio::select! {
        size = io.reader.read_i32() => match size {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        },
        _ = io.stop.changed() => return Ok(None),
    };
    Ok(Some(match usize::try_from(size) {
        Ok(size) if size <= io.listener.max_receive_size => {
            let mut frame = vec![0u8; size];
            // A client that stops half-way through a frame holds neither the
            // broker's shutdown (here) nor the connection past the exchange's
            // deadline (the caller's).
            tokio::select! {
                read = io.reader.read_exact(&mut frame) => { read?; }
                _ = io.stop.changed() => return Ok(None),
            }
            auth.on_frame(Bytes::from(frame))
        }
        // Refused before anything is allocated for it.
        _ => AuthStep::Fail { reason: "oversized", mechanism: None, reply: None },
    }))
}

type Exchanged = (KafkaPrincipal, &'static str, Option<Duration>);

/// Run `auth` over the connection, from `first` (an already read frame) if
/// given: the principal, mechanism and session lifetime once it completes.
async fn exchange<R: AsyncRead + Unpin>(
    mut io: SaslIo<'_, R>,
    mut auth: Authenticator,
    mut first: Option<Bytes>,
) -> Result<Option<Exchanged>, ConnError> {
    let reauth = auth.previous.is_some();
    let mut out = ResponseBuf::with_capacity(1024);
    let (session, metrics) = (io.session, io.metrics);
    loop {
        let step = match first.take() {
            Some(frame) => auth.on_frame(frame),
            None => match next_step(&mut io, &mut auth).await? {
                Some(step) => step,
                None => return Ok(None),
            },
        };
        match step {
            AuthStep::Reply(reply) => send(io.writer, &mut out, reply).await?,
            AuthStep::Done { principal, mechanism, lifetime, reply } => {
                send(io.writer, &mut out, reply).await?;
                if !reauth {
                    metrics.auth.authenticated(&session.listener);
                }
                tracing::debug!(peer = %session.peer, listener = %session.listener, mechanism, %principal, reauth, "authenticated");
                return Ok(Some((principal, mechanism, lifetime)));
            }
            AuthStep::Fail { reason, mechanism, reply } => {
                let mechanism = mechanism.unwrap_or("none");
                if !reauth {
                    metrics.auth.failed(&session.listener, mechanism, reason);
                }
                log_failure(session, mechanism, reason);
                tokio::select! {
                    _ = tokio::time::sleep(io.listener.failed_authentication_delay) => {}
                    _ = io.stop.changed() => return Ok(None),
                }
                if let Some(reply) = reply {
                    send(io.writer, &mut out, reply).await?;
                    linger(io.reader, io.stop).await;
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
#[path = "authenticator_tests.rs"]
mod tests;

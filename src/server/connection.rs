//! One listener's accept loop and its connections: the TLS handshake (SSL
//! and SASL_SSL listeners), SASL authentication (SASL listeners,
//! `authenticator`), the session, and the request loop.
//!
//! Invariants:
//! * Every connection is counted (`connection_quotas`) from accept to close:
//!   past `max.connections` a listener waits before accepting, and one more
//!   than its address's `max.connections.per.ip` is closed at once.
//! * A connection that sends no request for `connections.max.idle.ms` is
//!   closed, and a SASL authentication must finish within that time.
//! * The accept loop awaits nothing but a place and `accept`; the TLS handshake runs in
//!   the connection's own task, bounded by `ssl.handshake.timeout.ms`, so a
//!   client that stalls or sends garbage (plaintext on the TLS port, half a
//!   ClientHello) ends only its own task, at the latest at that timeout.
//! * A session's principal is fixed before the first request is dispatched:
//!   on SASL listeners the authenticated user (nothing is dispatched before
//!   authentication completes), else the subject of the verified client
//!   certificate, else `User:ANONYMOUS`.
//! * On plaintext sockets fetched records go out with `sendfile`; through TLS
//!   they are read in 64 KiB chunks into one buffer per connection and
//!   written through the stream, so the memory a connection holds stays
//!   bounded (that chunk, the read buffer and rustls's buffers).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, BufReader, WriteHalf};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::authenticator::{authenticate, is_sasl_handshake, reauthenticate, SaslIo, SaslSession};
use super::connection_quotas::{ConnectionQuotas, ConnectionSlot};
use super::{handle_frame_into, BoundListener, ConnError, ResponseBuf, MIN_FRAME};
use crate::api::KafkaApis;
use crate::security::principal_mapper::SslPrincipalMapper;
use crate::security::sasl::SaslListener;
use crate::security::tls::LiveTlsConfig;
use crate::security::{principal, SecurityProtocol, Session};

/// Accept on one listener until `stop`, then wait for its connections. The
/// loop awaits nothing but a place among `max.connections` and `accept`:
/// each connection is its own task, holding its [`ConnectionSlot`] until it
/// ends.
pub(super) async fn accept_loop(
    bound: BoundListener,
    broker: Arc<KafkaApis>,
    quotas: Arc<ConnectionQuotas>,
    mut stop: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    let name = bound.name.clone();
    loop {
        let reservation = tokio::select! {
            r = quotas.reserve() => r,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            // A dropped sender also means stop.
            _ = stop.changed() => break,
        };
        tokio::select! {
            accepted = bound.listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Some(slot) = reservation.admit(peer.ip()) else {
                        tracing::debug!(%peer, listener = %name, "connection refused: its address holds max.connections.per.ip");
                        continue;
                    };
                    spawn_connection(&bound, &broker, &stop, &mut connections, (stream, peer, slot));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(listener = %name, "accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stop.changed() => break,
        }
    }
    tracing::debug!(listener = %name, connections = connections.len(), "listener closed; draining");
    while connections.join_next().await.is_some() {}
}

/// Start the task of one accepted connection.
fn spawn_connection(
    bound: &BoundListener,
    broker: &Arc<KafkaApis>,
    stop: &watch::Receiver<bool>,
    connections: &mut JoinSet<()>,
    (stream, peer, slot): (TcpStream, SocketAddr, ConnectionSlot),
) {
    let _ = stream.set_nodelay(true);
    let broker = Arc::clone(broker);
    let conn_stop = stop.clone();
    let name = bound.name.clone();
    let tls = bound.tls.as_ref().map(|t| ListenerTlsParts {
        live: Arc::clone(&t.live),
        timeout: t.handshake_timeout,
        mapper: Arc::clone(&t.principal_mapper),
    });
    let security = (bound.protocol, tls, bound.sasl.clone());
    connections.spawn(async move {
        if let Err(e) = open(stream, peer, name, security, &broker, conn_stop).await {
            tracing::debug!(%peer, "connection closed: {e}");
        }
        drop(slot);
    });
}

/// Where responses go: the socket itself (regions by `sendfile`) or the TLS
/// stream (regions read and written through it).
pub(super) enum ConnWriter {
    Plain(OwnedWriteHalf),
    Tls(Box<WriteHalf<TlsStream<TcpStream>>>, Vec<u8>),
}

impl ConnWriter {
    pub(super) async fn write(&mut self, out: &ResponseBuf) -> std::io::Result<()> {
        match self {
            Self::Plain(w) => out.write_to(w).await,
            Self::Tls(w, chunk) => out.write_to_stream(w.as_mut(), chunk).await,
        }
    }
}

/// The `reason` label of a failed handshake: bytes that are not TLS records,
/// a client certificate that was missing or did not verify, or anything else
/// the peer got wrong (including closing midway).
fn handshake_failure(e: &std::io::Error) -> &'static str {
    use rustls::Error as E;
    match e.get_ref().and_then(|inner| inner.downcast_ref::<E>()) {
        Some(E::InvalidMessage(_)) => "not_tls",
        Some(E::InvalidCertificate(_) | E::NoCertificatesPresented) => "bad_certificate",
        _ => "protocol",
    }
}

/// What a connection of a TLS listener needs: the config current at accept,
/// the handshake timeout and the principal mapping rules.
struct ListenerTlsParts {
    live: Arc<LiveTlsConfig>,
    timeout: Duration,
    mapper: Arc<SslPrincipalMapper>,
}

/// A listener's protocol, TLS config and SASL settings, as each connection needs them.
type Security = (SecurityProtocol, Option<ListenerTlsParts>, Option<Arc<SaslListener>>);

/// Run the TLS handshake if the listener has TLS, authenticate if it is a
/// SASL listener, then serve the connection.
async fn open(
    stream: TcpStream,
    peer: SocketAddr,
    listener: String,
    (protocol, tls, sasl): Security,
    broker: &Arc<KafkaApis>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ConnError> {
    let Some(ListenerTlsParts { live, timeout, mapper }) = tls else {
        let mut session = Session::plaintext(listener, peer.ip());
        session.protocol = protocol;
        let (reader, writer) = stream.into_split();
        return serve_connection(reader, ConnWriter::Plain(writer), broker, stop, session, sasl)
            .await;
    };
    // The config current now: a reload later does not touch this session.
    let accept = TlsAcceptor::from(live.current()).accept(stream);
    let tls = tokio::select! {
        r = tokio::time::timeout(timeout, accept) => match r {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                let reason = handshake_failure(&e);
                broker.request_metrics.tls_handshake_failed(&listener, reason);
                tracing::debug!(%peer, %listener, reason, "TLS handshake failed: {e}");
                return Ok(());
            }
            Err(_) => {
                broker.request_metrics.tls_handshake_failed(&listener, "timeout");
                tracing::debug!(%peer, %listener, ?timeout, "TLS handshake timed out (ssl.handshake.timeout.ms)");
                return Ok(());
            }
        },
        _ = stop.changed() => return Ok(()),
    };
    // On SASL_SSL the principal comes from SASL, not from a client certificate.
    let subject = match protocol {
        SecurityProtocol::Ssl => tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|leaf| principal::subject_of(leaf)),
        _ => None,
    };
    let name = match subject.map(|dn| (mapper.name(&dn), dn)) {
        None => None,
        Some((Some(name), _)) => Some(name),
        Some((None, dn)) => {
            // Kafka fails the authentication: the connection gets no principal.
            broker.request_metrics.tls_handshake_failed(&listener, "no_principal_rule");
            tracing::debug!(%peer, %listener, subject = %dn, rules = %mapper, "no ssl.principal.mapping.rules rule applies; closing");
            return Ok(());
        }
    };
    let mut session = Session::ssl(listener, peer.ip(), name);
    session.protocol = protocol;
    tracing::debug!(%peer, principal = %session.principal, "TLS session established");
    let (reader, writer) = tokio::io::split(tls);
    let writer = ConnWriter::Tls(Box::new(writer), Vec::new());
    serve_connection(reader, writer, broker, stop, session, sasl).await
}

/// Bytes read ahead of the frames while a SASL client authenticates: its
/// frames are small, and a connection nobody has authenticated costs little.
const AUTH_READ_BUFFER: usize = 4 * 1024;
/// Bytes read ahead of the frames once the connection is someone's.
const READ_BUFFER: usize = 64 * 1024;

async fn serve_connection<R: AsyncRead + Unpin>(
    reader: R,
    mut writer: ConnWriter,
    broker: &Arc<KafkaApis>,
    mut stop: watch::Receiver<bool>,
    mut session: Session,
    sasl: Option<Arc<SaslListener>>,
) -> Result<(), ConnError> {
    let Some(sasl) = sasl else {
        let reader = BufReader::with_capacity(READ_BUFFER, reader);
        return serve_requests(reader, writer, broker, stop, session, None).await;
    };
    let idle = broker.config.connections_max_idle();
    let metrics = &broker.request_metrics;
    let mut reader = BufReader::with_capacity(AUTH_READ_BUFFER, reader);
    let sasl_session = {
        let io = SaslIo {
            reader: &mut reader,
            writer: &mut writer,
            listener: &sasl,
            session: &session,
            metrics,
            stop: &mut stop,
        };
        // An exchange that never completes (a client trickling its
        // handshake) ends with the idle timeout.
        let Ok(authenticated) = tokio::time::timeout(idle, authenticate(io)).await else {
            metrics.auth.authentication_timed_out(&session.listener);
            tracing::debug!(peer = %session.peer, listener = %session.listener, ?idle, "SASL authentication took longer than connections.max.idle.ms; closing");
            return Ok(());
        };
        match authenticated? {
            Some(s) => {
                session.principal = s.principal.clone();
                s
            }
            None => return Ok(()),
        }
    };
    // Authenticated: the full-size buffers, with what was read ahead kept.
    let ahead = std::io::Cursor::new(reader.buffer().to_vec());
    let reader = BufReader::with_capacity(READ_BUFFER, ahead.chain(reader.into_inner()));
    serve_requests(reader, writer, broker, stop, session, Some((sasl, sasl_session))).await
}

/// Read a request's body into `frame`, which is left empty when the
/// connection must close instead: the body did not arrive within `idle`
/// (a client that sends a size and then stalls is closed as an idle one is),
/// or the broker is stopping (a request not yet received is not one being
/// handled). The timer is armed only when the body is not buffered already.
async fn read_body<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    frame: &mut Vec<u8>,
    idle: std::time::Duration,
    stop: &mut watch::Receiver<bool>,
    session: &Session,
) -> Result<(), ConnError> {
    if reader.buffer().len() >= frame.len() {
        reader.read_exact(frame).await?;
        return Ok(());
    }
    let read = tokio::select! {
        read = tokio::time::timeout(idle, reader.read_exact(frame)) => read,
        _ = stop.changed() => {
            frame.clear();
            return Ok(());
        }
    };
    match read {
        Ok(read) => {
            read?;
        }
        Err(_) => {
            tracing::debug!(peer = %session.peer, listener = %session.listener, ?idle, "a request's body did not arrive within connections.max.idle.ms; closing");
            frame.clear();
        }
    }
    Ok(())
}

/// Serve requests on an established connection (authenticated, when its
/// listener is SASL: `sasl` then holds its listener and session).
async fn serve_requests<R: AsyncRead + Unpin>(
    mut reader: BufReader<R>,
    mut writer: ConnWriter,
    broker: &Arc<KafkaApis>,
    mut stop: watch::Receiver<bool>,
    session: Session,
    sasl: Option<(Arc<SaslListener>, SaslSession)>,
) -> Result<(), ConnError> {
    let max = broker.config.socket_request_max_bytes();
    let idle = broker.config.connections_max_idle();
    let metrics = &broker.request_metrics;
    let (sasl, mut sasl_session) = match sasl {
        Some((listener, s)) => (Some(listener), Some(s)),
        None => (None, None),
    };
    let mut out = ResponseBuf::with_capacity(READ_BUFFER);
    loop {
        // The idle timer is armed only when the next size must be waited for
        // (pipelined requests are read from the buffer without one).
        let size = if reader.buffer().len() >= 4 {
            Ok(reader.read_i32().await)
        } else {
            tokio::select! {
                size = tokio::time::timeout(idle, reader.read_i32()) => size,
                _ = stop.changed() => return Ok(()),
            }
        };
        let size = match size {
            Ok(Ok(s)) => s,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => {
                tracing::debug!(peer = %session.peer, listener = %session.listener, ?idle, "idle longer than connections.max.idle.ms; closing");
                return Ok(());
            }
        };
        if size < MIN_FRAME as i32 || size as usize > max {
            // A TLS record header (handshake type 0x16, version 3.x) read as a size.
            let hint = if (size as u32) >> 16 == 0x1603 {
                "; looks like TLS on a PLAINTEXT listener"
            } else {
                ""
            };
            return Err(ConnError::Protocol(format!(
                "frame size {size} outside [{MIN_FRAME}, {max}] (socket.request.max.bytes){hint}"
            )));
        }
        let mut frame = vec![0u8; size as usize];
        read_body(&mut reader, &mut frame, idle, &mut stop, &session).await?;
        if frame.is_empty() {
            return Ok(());
        }
        if let (Some(listener), Some(current)) = (&sasl, &mut sasl_session) {
            let now = Instant::now();
            if is_sasl_handshake(&frame) && current.may_reauthenticate(now) {
                let io = SaslIo {
                    reader: &mut reader,
                    writer: &mut writer,
                    listener,
                    session: &session,
                    metrics,
                    stop: &mut stop,
                };
                match reauthenticate(io, current, Bytes::from(frame)).await? {
                    Some(renewed) => *current = renewed,
                    None => return Ok(()),
                }
                continue;
            }
            if current.expired(now) {
                metrics.auth.session_expired(&session.listener);
                tracing::debug!(peer = %session.peer, listener = %session.listener, "SASL session expired (connections.max.reauth.ms); closing");
                return Ok(());
            }
        }
        out.clear();
        match handle_frame_into(broker, Bytes::from(frame), &mut out, &session).await {
            Ok(true) => writer.write(&out).await?,
            Ok(false) => {}
            Err(e) => return Err(e),
        }
        if out.capacity() > 1 << 20 {
            // Do not keep a large response's buffer alive per idle connection.
            out = ResponseBuf::with_capacity(READ_BUFFER);
        }
    }
}

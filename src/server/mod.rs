//! The network edge: accept connections, frame requests, dispatch them to
//! `api/`, write responses, and shut down gracefully.
//!
//! Framing invariants:
//! * A frame is a 4-byte big-endian size and that many bytes. A size below the
//!   8 bytes of a request header's fixed part, negative, or above
//!   `socket.request.max.bytes` closes the connection before anything is
//!   allocated for it.
//! * Requests on one connection are handled one at a time, in order, as Kafka
//!   does (a connection is muted while its request is in flight), so pipelined
//!   requests are answered in the order they were sent.
//! * An unknown API key, an API or version outside `SUPPORTED_APIS`, or a body
//!   that does not decode closes the connection (Kafka's behaviour), except
//!   ApiVersions with a version we do not know, which is answered with
//!   UNSUPPORTED_VERSION in a v0 body so the client can retry, and Produce
//!   v0–2, which is advertised but answered with UNSUPPORTED_VERSION.
//! * One connection's bad input never affects another: each connection is its
//!   own task and nothing here panics on client bytes.
//!
//! Listeners: `run` is given every bound listener and runs one accept loop
//! per listener, each with its own set of connection tasks. A connection
//! carries a [`Session`] naming its listener from accept to close; every
//! request is dispatched with it (`api::RequestContext`), so answers that
//! name this broker's address (Metadata, DescribeCluster, FindCoordinator)
//! give the endpoint advertised for that listener.
//!
//! An SSL listener's TLS config is replaced by its reloader
//! (`tls_reloader`) when its key or trust store file changes; each handshake
//! uses the config current at its accept.
//!
//! Shutdown is a future passed to `run` (mini-redis's pattern): every listener
//! stops accepting, every connection finishes the request it is handling and
//! closes, and `run` returns once all connection tasks of all listeners are
//! done.
//!
//! Fetch responses are written without copying their records: the response is
//! encoded into a [`ResponseBuf`] that keeps, in place of each record
//! placeholder, the segment file region it stands for, and the writer sends
//! the encoded bytes and the regions in order, the regions with `sendfile`.

pub mod authenticator;
mod connection;
pub mod connection_quotas;
mod legacy_produce;
mod response;
pub mod tls_reloader;

pub use response::ResponseBuf;

use std::future::Future;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::api::KafkaApis;
use crate::api::{self, api_versions, Close, RequestContext};
use crate::security::{SecurityProtocol, Session};

/// Size of the fixed part of every request header: key, version, correlation id.
pub(crate) const MIN_FRAME: usize = 8;

/// A bound socket of one listener of `listeners`.
#[derive(Debug)]
pub struct BoundListener {
    /// Upper case, as in `listener.security.protocol.map`.
    pub name: String,
    pub protocol: SecurityProtocol,
    pub listener: TcpListener,
    /// SSL and SASL_SSL listeners: the TLS config, `ssl.handshake.timeout.ms`
    /// and what reloads the config.
    pub tls: Option<ListenerTls>,
    /// SASL_PLAINTEXT and SASL_SSL listeners: what authentication offers.
    pub sasl: Option<Arc<crate::security::sasl::SaslListener>>,
}

/// An SSL or SASL_SSL listener's TLS: the config served now (replaced by
/// its reloader), `ssl.handshake.timeout.ms`, and what the reloader watches.
#[derive(Debug)]
pub struct ListenerTls {
    pub live: Arc<crate::security::tls::LiveTlsConfig>,
    /// `ssl.principal.mapping.rules` of the listener.
    pub principal_mapper: Arc<crate::security::principal_mapper::SslPrincipalMapper>,
    pub handshake_timeout: std::time::Duration,
    pub reload: tls_reloader::TlsWatch,
}

/// Serve every listener until `shutdown` completes, then drain the connections.
pub async fn run(
    listeners: Vec<BoundListener>,
    broker: Arc<KafkaApis>,
    shutdown: impl Future<Output = ()>,
) {
    // Polled once before anything is accepted: the process's signal handlers
    // are installed on the shutdown future's first poll, and a SIGTERM that
    // came before it would kill the process instead of draining it.
    let mut shutdown = std::pin::pin!(shutdown);
    let stopped_early = tokio::select! {
        biased;
        () = &mut shutdown => true,
        () = std::future::ready(()) => false,
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut accept_loops = JoinSet::new();
    // Checked when the config was loaded (main), so this does not fail.
    let limits =
        connection_quotas::ConnectionLimits::from_values(&broker.config).unwrap_or_else(|e| {
            tracing::error!("connection limits: {e}; none applied");
            connection_quotas::ConnectionLimits::unlimited()
        });
    let quotas = connection_quotas::ConnectionQuotas::new(limits);
    for listener in listeners {
        if let Some(tls) = &listener.tls {
            accept_loops.spawn(tls_reloader::run(
                listener.name.clone(),
                Arc::clone(&tls.live),
                tls.reload.clone(),
                broker.request_metrics.tls.clone(),
                stop_rx.clone(),
            ));
        }
        let quotas = Arc::clone(&quotas);
        accept_loops.spawn(connection::accept_loop(
            listener,
            Arc::clone(&broker),
            quotas,
            stop_rx.clone(),
        ));
    }
    if !stopped_early {
        shutdown.await;
    }
    tracing::info!("shutting down: finishing in-flight requests");
    let _ = stop_tx.send(true);
    // Long-polling fetches answer when woken: wake them all now.
    broker.replica.complete_all_delayed_fetches();
    while accept_loops.join_next().await.is_some() {}
}

/// Why a connection ends.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Protocol(String),
}

/// What a frame asks for, decoded.
#[derive(Debug)]
pub enum Frame {
    /// ApiVersions of a version newer than ours: answer in v0 with the list.
    ApiVersionsTooNew {
        correlation_id: i32,
    },
    /// Produce v0–2: the hand-written UNSUPPORTED_VERSION body, if one is owed.
    LegacyProduce {
        correlation_id: i32,
        body: Option<Vec<u8>>,
        version: i16,
    },
    Request {
        api_key: ApiKey,
        header: RequestHeader,
        request: Box<RequestKind>,
    },
}

/// Decode one request frame (the bytes after the size). Pure: no I/O, no
/// broker state, so the fuzz target drives exactly this.
///
/// # Errors
/// A message for every frame that must close the connection.
pub fn parse_frame(frame: Bytes) -> Result<Frame, String> {
    if frame.len() < MIN_FRAME {
        return Err(format!("frame of {} bytes is shorter than a request header", frame.len()));
    }
    let mut fixed = &frame[..MIN_FRAME];
    let key = fixed.get_i16();
    let version = fixed.get_i16();
    let correlation_id = fixed.get_i32();
    let api_key = ApiKey::try_from(key).map_err(|_| format!("unknown api key {key}"))?;
    if api_key == ApiKey::ApiVersions && api::supported(api_key).is_some_and(|a| version > a.max) {
        return Ok(Frame::ApiVersionsTooNew { correlation_id });
    }
    let supported =
        api::supported(api_key).ok_or_else(|| format!("{api_key:?} is not implemented"))?;
    if version < supported.min || version > supported.max {
        return Err(format!(
            "{api_key:?} v{version} is outside v{}..=v{}",
            supported.min, supported.max
        ));
    }
    if api_key == ApiKey::Produce && version < api::produce::MIN_SUPPORTED_VERSION {
        return Ok(Frame::LegacyProduce {
            correlation_id,
            body: legacy_produce::unsupported_response(&frame, version),
            version,
        });
    }
    let mut body = frame;
    let header = RequestHeader::decode(&mut body, api_key.request_header_version(version))
        .map_err(|e| format!("bad {api_key:?} header: {e}"))?;
    let request = RequestKind::decode(api_key, &mut body, version)
        .map_err(|e| format!("bad {api_key:?} v{version} body: {e}"))?;
    Ok(Frame::Request { api_key, header, request: Box::new(request) })
}

/// Decode, dispatch and encode one request into `out`, with the records of
/// a fetch read into it. `Ok(false)`: no response is owed (acks=0). Public
/// for the fuzz target.
///
/// # Errors
/// `Protocol` when the connection must be closed.
pub async fn handle_frame(
    broker: &Arc<KafkaApis>,
    frame: Bytes,
    out: &mut BytesMut,
    session: &Session,
) -> Result<bool, ConnError> {
    let mut buf = ResponseBuf::default();
    let owed = handle_frame_into(broker, frame, &mut buf, session).await?;
    buf.read_into(out)?;
    Ok(owed)
}

/// [`handle_frame`] into a [`ResponseBuf`], whose fetched records stay in
/// their segment files until it is written.
///
/// # Errors
/// `Protocol` when the connection must be closed.
pub async fn handle_frame_into(
    broker: &Arc<KafkaApis>,
    frame: Bytes,
    out: &mut ResponseBuf,
    session: &Session,
) -> Result<bool, ConnError> {
    match parse_frame(frame).map_err(ConnError::Protocol)? {
        Frame::ApiVersionsTooNew { correlation_id } => {
            // The client is newer than us: tell it what we have, in a body every
            // version can read, with a v0 header.
            let response = ResponseKind::ApiVersions(api_versions::unsupported_version());
            encode_response(out, correlation_id, 0, &response, 0)?;
            Ok(true)
        }
        Frame::LegacyProduce { correlation_id, body: Some(body), .. } => {
            let head = out.head_mut();
            head.put_i32((4 + body.len()) as i32);
            head.put_i32(correlation_id);
            head.put_slice(&body);
            Ok(true)
        }
        Frame::LegacyProduce { version, .. } => Err(ConnError::Protocol(format!(
            "Produce v{version} is not supported (acks=0 or malformed)"
        ))),
        Frame::Request { api_key, header, request } => {
            let version = header.request_api_version;
            let started = std::time::Instant::now();
            let ctx = RequestContext::new(header, session, broker.acls.as_deref())
                .with_denials(&broker.request_metrics.denials);
            let outcome = api::dispatch(broker, &ctx, *request).await;
            let header = ctx.header;
            let api_name = format!("{api_key:?}");
            let elapsed = started.elapsed().as_secs_f64();
            match outcome {
                Ok(Some(reply)) => {
                    broker.request_metrics.observe(
                        &api_name,
                        version,
                        elapsed,
                        Some(&reply.response),
                    );
                    out.expect_regions(reply.regions);
                    encode_response(
                        out,
                        header.correlation_id,
                        api_key.response_header_version(version),
                        &reply.response,
                        version,
                    )?;
                    Ok(true)
                }
                Ok(None) => {
                    broker.request_metrics.observe_unanswered(&api_name, version, elapsed);
                    Ok(false)
                }
                Err(Close) => {
                    broker.request_metrics.observe(&api_name, version, elapsed, None);
                    Err(ConnError::Protocol(format!(
                        "{api_key:?} request failed; closing as Kafka does"
                    )))
                }
            }
        }
    }
}

fn encode_response(
    out: &mut ResponseBuf,
    correlation_id: i32,
    header_version: i16,
    response: &ResponseKind,
    version: i16,
) -> Result<(), ConnError> {
    let (head_start, wire_start) = (out.head_mut().len(), out.wire_len());
    out.head_mut().put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(out, header_version)
        .map_err(|e| ConnError::Protocol(format!("encoding response header: {e}")))?;
    let encoded = match response {
        // The one response that carries records: encoded through the buffer's
        // placeholder handling (ResponseKind::encode only writes a BytesMut).
        ResponseKind::Fetch(fetch) => fetch.encode(out, version),
        other => other.encode(out.head_mut(), version),
    };
    encoded.map_err(|e| ConnError::Protocol(format!("encoding response: {e}")))?;
    out.finish().map_err(ConnError::Protocol)?;
    let size = i32::try_from(out.wire_len() - wire_start - 4)
        .map_err(|_| ConnError::Protocol("response larger than 2 GiB".into()))?;
    out.head_mut()[head_start..head_start + 4].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

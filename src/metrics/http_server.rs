//! The metrics listener's HTTP server: `/metrics`, `/cleaner-status` and
//! `/key-audit`, each answered on a blocking thread (they take the logs' read
//! locks, and a key audit reads segments under the cleaner's I/O throttle),
//! within the limits and for the principal of [`EndpointAccess`] (its module
//! doc has the rules).

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::access::EndpointAccess;
use super::Metrics;
use crate::cleaner::key_audit::{AuditError, KeyAuditError};

/// Status, content type and body of one answer.
pub type Answer = (u16, &'static str, String);

impl Metrics {
    /// The answer to a request for `path` with `query`, without the HTTP
    /// around it (public for the key audit's fuzz target).
    #[doc(hidden)]
    pub fn respond(
        &self,
        path: &str,
        query: Option<&str>,
        may_audit: &dyn Fn(&str) -> bool,
    ) -> Answer {
        match path {
            "/key-audit" => self.key_audit(query.unwrap_or_default(), may_audit),
            "/metrics" => match self.render() {
                Ok(text) => (200, "text/plain; version=0.0.4; charset=utf-8", text),
                Err(e) => (500, "text/plain", e.to_string()),
            },
            "/cleaner-status" => match self.cleaner_status_json() {
                Ok(json) => (200, "application/json", json),
                Err(e) => (500, "text/plain", e.to_string()),
            },
            _ => (
                404,
                "text/plain",
                "not found: try /metrics, /cleaner-status or /key-audit\n".to_string(),
            ),
        }
    }

    /// `/key-audit?topic=T&key=K[&partition=P]`: the audit's JSON, or an
    /// error document `{"code", "error"}` with a status that says whose
    /// fault it is (400 the request, 404 no such topic or partition, 500 the
    /// partition's files).
    fn key_audit(&self, query: &str, may_audit: &dyn Fn(&str) -> bool) -> Answer {
        let mut topic = None;
        let mut key = None;
        let mut partition = None;
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match k.as_ref() {
                "topic" => topic = Some(v.into_owned()),
                "key" => key = Some(v.into_owned()),
                "partition" => partition = Some(v.into_owned()),
                _ => {}
            }
        }
        let (Some(topic), Some(key)) = (topic, key) else {
            return error(
                400,
                "bad_request",
                "topic and key are required: /key-audit?topic=T&key=K[&partition=P]",
            );
        };
        if !may_audit(&topic) {
            let reason = format!("the endpoint's principal may not describe {topic}");
            return error(403, "topic_authorization_failed", &reason);
        }
        let partition = match partition.map(|p| p.parse::<i32>()) {
            None => None,
            Some(Ok(p)) if p >= 0 => Some(p),
            Some(_) => return error(400, "bad_request", "partition is a non-negative integer"),
        };
        match self.cleaner.audit_key(&topic, partition, key.as_bytes()) {
            Ok(audit) => {
                let answer = serde_json::to_value(&audit).map(|mut doc| {
                    self.name_replica(&mut doc, &audit.topic, audit.partition);
                    doc
                });
                match answer.and_then(|doc| serde_json::to_string_pretty(&doc)) {
                    Ok(json) => (200, "application/json", json),
                    Err(e) => error(500, "internal", &e.to_string()),
                }
            }
            Err(e) => {
                let (status, code) = match &e {
                    KeyAuditError::UnknownTopic(_) => (404, "unknown_topic"),
                    KeyAuditError::UnknownPartition { .. } => (404, "unknown_partition"),
                    KeyAuditError::NotCompacted(_) => (400, "not_compacted"),
                    KeyAuditError::Snapshot { .. } => (500, "io_error"),
                    KeyAuditError::Audit(AuditError::Read(_)) => (500, "io_error"),
                    KeyAuditError::Audit(AuditError::Corrupt { .. }) => (500, "corrupt_segment"),
                };
                error(status, code, &e.to_string())
            }
        }
    }
}

fn error(status: u16, code: &str, message: &str) -> Answer {
    let body = serde_json::json!({ "code": code, "error": message });
    (status, "application/json", body.to_string())
}

/// An answer as an HTTP response.
fn response((status, content_type, body): Answer) -> hyper::Response<Full<Bytes>> {
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    if status == 401 {
        let bearer = hyper::header::HeaderValue::from_static("Bearer");
        response.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, bearer);
    }
    response
}

/// What every request of the endpoint shares.
struct Endpoint {
    metrics: Arc<Metrics>,
    access: EndpointAccess,
    audits: Semaphore,
}

impl Endpoint {
    /// Answer one request from `peer`: the token checked, a key audit
    /// queued for its turn, the work done on a blocking thread, all within
    /// the request timeout.
    async fn answer(
        self: Arc<Self>,
        request: hyper::Request<hyper::body::Incoming>,
        peer: IpAddr,
    ) -> Answer {
        let authorization = request.headers().get(hyper::header::AUTHORIZATION);
        if !self.access.authenticated(authorization.map(|v| v.as_bytes())) {
            return error(
                401,
                "unauthorized",
                "this endpoint needs Authorization: Bearer <sediment.metrics.auth.token>",
            );
        }
        let path = request.uri().path().to_string();
        let query = request.uri().query().map(str::to_string);
        let timeout = self.access.request_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let _turn = if path == "/key-audit" {
            match tokio::time::timeout_at(deadline, self.audits.acquire()).await {
                Ok(Ok(permit)) => Some(permit),
                _ => return error(503, "busy", "too many key audits at once; try again later"),
            }
        } else {
            None
        };
        let me = Arc::clone(&self);
        // Scrapes take the logs' locks: keep them off the async workers.
        let work = tokio::task::spawn_blocking(move || {
            let may_audit = |topic: &str| me.access.may_audit(peer, topic);
            me.metrics.respond(&path, query.as_deref(), &may_audit)
        });
        match tokio::time::timeout_at(deadline, work).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => (500, "text/plain", format!("metrics task failed: {e}")),
            Err(_) => error(
                503,
                "timeout",
                "the answer took longer than sediment.metrics.request.timeout.ms",
            ),
        }
    }
}

/// Serve `/metrics`, `/cleaner-status` and `/key-audit` until `shutdown`
/// completes, within `access`'s limits. Connections still open then are
/// dropped: they only read.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    access: EndpointAccess,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let connections_allowed = Arc::new(Semaphore::new(access.max_connections.max(1)));
    let audits = Semaphore::new(access.max_concurrent_audits.max(1));
    let endpoint = Arc::new(Endpoint { metrics, access, audits });
    let mut connections = JoinSet::new();
    loop {
        // A place first, then the accept: past the limit a client waits in the backlog.
        let permit = tokio::select! {
            permit = Arc::clone(&connections_allowed).acquire_owned() => permit.expect("never closed"),
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            () = &mut shutdown => break,
        };
        let accepted = loop {
            tokio::select! {
                accepted = listener.accept() => break Some(accepted),
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                () = &mut shutdown => break None,
            }
        };
        let Some(accepted) = accepted else { break };
        match accepted {
            Ok((stream, peer)) => {
                let endpoint = Arc::clone(&endpoint);
                connections.spawn(serve_connection(endpoint, stream, peer, permit));
            }
            Err(e) => {
                tracing::warn!("metrics accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    connections.abort_all();
}

/// One connection, holding its place (`_permit`) until it closes.
async fn serve_connection(
    endpoint: Arc<Endpoint>,
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    _permit: tokio::sync::OwnedSemaphorePermit,
) {
    let timeout = endpoint.access.request_timeout;
    let service =
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let endpoint = Arc::clone(&endpoint);
            async move { Ok::<_, Infallible>(response(endpoint.answer(request, peer.ip()).await)) }
        });
    let io = hyper_util::rt::TokioIo::new(stream);
    let served = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(timeout)
        .serve_connection(io, service)
        .await;
    if let Err(e) = served {
        tracing::debug!(%peer, "metrics connection: {e}");
    }
}

//! The metrics listener's HTTP server: `/metrics`, `/cleaner-status` and
//! `/key-audit`, each answered on a blocking thread (they take the logs' read
//! locks, and a key audit reads segments under the cleaner's I/O throttle).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::Metrics;
use crate::cleaner::key_audit::{AuditError, KeyAuditError};

/// Status, content type and body of one answer.
type Answer = (u16, &'static str, String);

impl Metrics {
    fn respond(&self, path: &str, query: Option<&str>) -> hyper::Response<Full<Bytes>> {
        let (status, content_type, body) = match path {
            "/key-audit" => self.key_audit(query.unwrap_or_default()),
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
        };
        let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() =
            hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
            response.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        response
    }

    /// `/key-audit?topic=T&key=K[&partition=P]`: the audit's JSON, or an
    /// error document `{"code", "error"}` with a status that says whose
    /// fault it is (400 the request, 404 no such topic or partition, 500 the
    /// partition's files).
    fn key_audit(&self, query: &str) -> Answer {
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
        let partition = match partition.map(|p| p.parse::<i32>()) {
            None => None,
            Some(Ok(p)) if p >= 0 => Some(p),
            Some(_) => return error(400, "bad_request", "partition is a non-negative integer"),
        };
        match self.cleaner.audit_key(&topic, partition, key.as_bytes()) {
            Ok(audit) => match serde_json::to_string_pretty(&audit) {
                Ok(json) => (200, "application/json", json),
                Err(e) => error(500, "internal", &e.to_string()),
            },
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

/// Serve `/metrics` and `/cleaner-status` until `shutdown` completes.
/// Connections still open then are dropped: they only read.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let metrics = Arc::clone(&metrics);
                    connections.spawn(async move {
                        let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                            let metrics = Arc::clone(&metrics);
                            async move {
                                let path = request.uri().path().to_string();
                                let query = request.uri().query().map(str::to_string);
                                // Scrapes take the logs' locks: keep them off the async workers.
                                let response = tokio::task::spawn_blocking(move || metrics.respond(&path, query.as_deref())).await.unwrap_or_else(|e| {
                                    let mut r = hyper::Response::new(Full::new(Bytes::from(format!("metrics task failed: {e}"))));
                                    *r.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
                                    r
                                });
                                Ok::<_, Infallible>(response)
                            }
                        });
                        let io = hyper_util::rt::TokioIo::new(stream);
                        if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await {
                            tracing::debug!(%peer, "metrics connection: {e}");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!("metrics accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut shutdown => break,
        }
    }
    connections.abort_all();
}

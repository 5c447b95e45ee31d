pub mod add_scram;
pub mod cleaner_status;
pub mod dump_log;
pub mod health;
pub mod key_audit;
pub mod remote_store;

use anyhow::Context;

/// The environment variable whose value the tools send as the metrics
/// endpoint's bearer token (`sediment.metrics.auth.token`), kept out of
/// the command line where `ps` would show it.
pub const METRICS_TOKEN_ENV: &str = "SEDIMENT_METRICS_TOKEN";

/// GET a path from `addr` over plain HTTP/1.1: the status code and the body
/// (the metrics endpoint is ours and local; no client library is needed for
/// one request), with `$SEDIMENT_METRICS_TOKEN` as the bearer token when set.
///
/// # Errors
/// Connection and I/O failures, a malformed or chunked answer.
pub fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).with_context(|| format!("connecting to the metrics endpoint {addr} (is the broker running, and is metrics.listen this address?)"))?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(300)))?;
    let authorization = std::env::var(METRICS_TOKEN_ENV)
        .map(|t| format!("Authorization: Bearer {}\r\n", t.trim()))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{authorization}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8(raw).context("response is not UTF-8")?;
    let (head, body) = text.split_once("\r\n\r\n").context("malformed HTTP response")?;
    let status = head.lines().next().unwrap_or_default();
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .with_context(|| format!("malformed HTTP status line {status:?}"))?;
    anyhow::ensure!(
        !head.to_ascii_lowercase().contains("transfer-encoding: chunked"),
        "chunked responses are not expected from the broker"
    );
    Ok((code, body.to_string()))
}

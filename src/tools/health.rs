//! `sediment health`: one ApiVersions round trip, for container health checks
//! and scripts (no Kafka client or curl needed in the image).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// Send ApiVersions v0 and return how many APIs the broker lists.
///
/// # Errors
/// Connection failures, timeouts, a malformed or error response.
pub fn check(address: &str, timeout: Duration) -> anyhow::Result<usize> {
    let addr = address
        .to_socket_addrs()
        .with_context(|| format!("resolving {address}"))?
        .next()
        .context("no address")?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout).context("connecting")?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(0)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("sediment-health")));
    let mut body = BytesMut::new();
    header.encode(&mut body, 1)?;
    ApiVersionsRequest::default().encode(&mut body, 0)?;
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).context("sending")?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).context("reading the response size")?;
    let size = i32::from_be_bytes(size);
    if !(4..=1 << 20).contains(&size) {
        bail!("implausible response size {size}");
    }
    let mut buf = vec![0u8; size as usize];
    stream.read_exact(&mut buf).context("reading the response")?;
    let mut rest = bytes::Bytes::from(buf).split_off(4);
    let response = ApiVersionsResponse::decode(&mut rest, 0)?;
    if response.error_code != 0 {
        bail!("ApiVersions error code {}", response.error_code);
    }
    Ok(response.api_keys.len())
}

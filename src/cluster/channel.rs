//! `BrokerChannel`: one connection from this broker to another, over the
//! other's inter-broker listener, on which requests are sent one at a time
//! and their answers read back (docs/design/multi-broker.md, 5.3). It is
//! blocking, for the replica fetcher threads, which wait on each answer.
//!
//! Invariants: a response frame longer than the channel's bound is refused
//! before anything is allocated for it, and the connection is then dropped
//! (its stream would be out of step); an answer whose correlation id is not
//! the request's is refused the same way. A channel is used only once it is
//! authenticated as [`ChannelSecurity`] asks (TLS, then SASL); a SASL
//! session the server bounds (`connections.max.reauth.ms`) is
//! re-authenticated on the same connection before it expires (KIP-368).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};

use super::channel_security::{ChannelSecurity, ChannelStream, SaslLogin};

/// Why a call failed; the caller reconnects after a back-off.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("connecting to broker {node} at {address}: {source}")]
    Connect { node: i32, address: String, source: std::io::Error },
    #[error("broker {node}: {source}")]
    Io { node: i32, source: std::io::Error },
    #[error("broker {node}: {0}", node = .1)]
    Protocol(String, i32),
    #[error("authenticating to broker {node}: {0}", node = .1)]
    Authentication(String, i32),
}

pub struct BrokerChannel {
    node: i32,
    stream: ChannelStream,
    correlation: i32,
    client_id: StrBytes,
    /// The largest response frame accepted.
    max_response_bytes: usize,
    /// The SASL login, and when the session it opened must be renewed.
    sasl: Option<(Arc<dyn SaslLogin>, Option<Instant>)>,
}

impl std::fmt::Debug for BrokerChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerChannel").field("node", &self.node).finish()
    }
}

impl BrokerChannel {
    /// Connect to broker `node` at `host:port`, each read and write bounded
    /// by `timeout`, and authenticate as `security` says.
    ///
    /// # Errors
    /// The connection or the authentication failed.
    pub fn connect(
        node: i32,
        (host, port): (&str, u16),
        client_id: &str,
        (timeout, max_response_bytes): (Duration, usize),
        security: &ChannelSecurity,
    ) -> Result<Self, ChannelError> {
        let stream = Self::tcp(node, (host, port), timeout)?;
        let stream = ChannelStream::open(stream, host, security.tls.as_ref())
            .map_err(|e| ChannelError::Authentication(format!("TLS: {e}"), node))?;
        let mut channel = Self {
            node,
            stream,
            correlation: 0,
            client_id: StrBytes::from_string(client_id.to_string()),
            max_response_bytes,
            sasl: security.sasl.as_ref().map(|login| (Arc::clone(login), None)),
        };
        if channel.sasl.is_some() {
            channel.authenticate()?;
        }
        Ok(channel)
    }

    /// A TCP connection to `host:port`, its reads and writes bounded by `timeout`.
    fn tcp(
        node: i32,
        (host, port): (&str, u16),
        timeout: Duration,
    ) -> Result<TcpStream, ChannelError> {
        let address = format!("{host}:{port}");
        let connect_error =
            |source| ChannelError::Connect { node, address: address.clone(), source };
        let addrs =
            std::net::ToSocketAddrs::to_socket_addrs(&(host, port)).map_err(connect_error)?;
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(stream) => {
                    let io = |source| ChannelError::Io { node, source };
                    stream.set_read_timeout(Some(timeout)).map_err(io)?;
                    stream.set_write_timeout(Some(timeout)).map_err(io)?;
                    stream.set_nodelay(true).map_err(io)?;
                    return Ok(stream);
                }
                Err(e) => last = Some(e),
            }
        }
        let e = last.unwrap_or_else(|| std::io::Error::other("the name resolved to no address"));
        Err(connect_error(e))
    }

    /// Send `request` at `version` and wait for its answer.
    ///
    /// # Errors
    /// I/O errors and timeouts; an answer too large, out of step or that
    /// does not decode.
    pub fn call<R: Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> Result<R::Response, ChannelError> {
        let renew =
            self.sasl.as_ref().and_then(|(_, at)| *at).is_some_and(|at| Instant::now() >= at);
        if renew {
            self.authenticate()?;
        }
        self.send(version, request)
    }

    /// The SASL exchange of the channel's login: SaslHandshake v1 naming
    /// the mechanism, then SaslAuthenticate v2 until the mechanism is done.
    /// A session the server bounds is renewed at 85% of its lifetime, as
    /// Kafka's clients do at the earliest.
    fn authenticate(&mut self) -> Result<(), ChannelError> {
        let Some((login, _)) = self.sasl.clone() else { return Ok(()) };
        let node = self.node;
        let refused = |what: String| ChannelError::Authentication(what, node);
        let mechanism = StrBytes::from_string(login.mechanism().to_string());
        let handshake = self.send(1, &SaslHandshakeRequest::default().with_mechanism(mechanism))?;
        if handshake.error_code != 0 {
            let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(refused(format!(
                "the broker refused {} (error {}; it offers {offered:?})",
                login.mechanism(),
                handshake.error_code
            )));
        }
        let mut exchange = login.start();
        let mut message = exchange.first();
        let lifetime = loop {
            let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message));
            let answer = self.send(2, &request)?;
            if answer.error_code != 0 {
                let why = answer.error_message.as_ref().map_or("", |m| m.as_str());
                return Err(refused(format!("error {}: {why}", answer.error_code)));
            }
            match exchange.step(&answer.auth_bytes).map_err(refused)? {
                Some(next) => message = next,
                None => break answer.session_lifetime_ms,
            }
        };
        let renew_at = (lifetime > 0)
            .then(|| Instant::now() + Duration::from_millis(lifetime as u64 * 85 / 100));
        self.sasl = Some((login, renew_at));
        Ok(())
    }

    fn send<R: Request>(&mut self, version: i16, request: &R) -> Result<R::Response, ChannelError> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| self.protocol(format!("unknown api key {}", R::KEY)))?;
        self.correlation = self.correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(self.client_id.clone()));
        let mut frame = BytesMut::from(&[0u8; 4][..]);
        header
            .encode(&mut frame, key.request_header_version(version))
            .map_err(|e| self.protocol(format!("encoding the header: {e}")))?;
        request
            .encode(&mut frame, version)
            .map_err(|e| self.protocol(format!("encoding the request: {e}")))?;
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        let node = self.node;
        self.stream.write_all(&frame).map_err(|source| ChannelError::Io { node, source })?;
        let mut body = self.read_frame()?;
        let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
            .map_err(|e| self.protocol(format!("decoding the response header: {e}")))?;
        if header.correlation_id != self.correlation {
            return Err(self.protocol(format!(
                "answer to request {} where {} was sent",
                header.correlation_id, self.correlation
            )));
        }
        let response = R::Response::decode(&mut body, version)
            .map_err(|e| self.protocol(format!("decoding the response: {e}")))?;
        if body.has_remaining() {
            return Err(self.protocol(format!("{} bytes after the response", body.remaining())));
        }
        Ok(response)
    }

    /// One response frame, its size bounded before it is allocated.
    fn read_frame(&mut self) -> Result<Bytes, ChannelError> {
        let node = self.node;
        let io = |source| ChannelError::Io { node, source };
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).map_err(io)?;
        let size = i32::from_be_bytes(size);
        if size < 4 || size as usize > self.max_response_bytes {
            return Err(self.protocol(format!(
                "a response frame of {size} bytes (at most {} accepted)",
                self.max_response_bytes
            )));
        }
        let mut buf = vec![0u8; size as usize];
        self.stream.read_exact(&mut buf).map_err(io)?;
        Ok(Bytes::from(buf))
    }

    fn protocol(&self, what: String) -> ChannelError {
        ChannelError::Protocol(what, self.node)
    }
}

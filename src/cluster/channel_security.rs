//! `ChannelSecurity`: how this broker's channels to the others prove who
//! they are, as Kafka's inter-broker clients do over
//! `inter.broker.listener.name`: TLS when that listener's protocol is SSL or
//! SASL_SSL, then a SASL exchange (SaslHandshake v1, SaslAuthenticate v2)
//! when it is SASL_PLAINTEXT or SASL_SSL.
//!
//! The composition root builds it from the listener's keys (the TLS client
//! config from its trust and key stores, the SASL login from its JAAS
//! config); this layer only drives it, through [`SaslLogin`], so the
//! mechanisms (`security::sasl`) stay above the cluster layer.
//!
//! Invariants:
//! * A channel is usable only after every step passed: the TLS handshake
//!   verified the peer's certificate (and its name, unless
//!   `ssl.endpoint.identification.algorithm` is empty), and the server
//!   accepted the SASL exchange (for SCRAM, its final signature checked).
//!   Any failure drops the connection; the caller backs off and reconnects.
//! * Every size the peer sends during authentication is bounded like a
//!   response (the channel's frame bound).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls::pki_types::ServerName;

/// One SASL exchange of a connection, driven by the channel: the client's
/// first message, then one message per server challenge until done.
pub trait SaslExchange: Send {
    /// The client's first message.
    fn first(&mut self) -> Vec<u8>;

    /// The answer to the server's `challenge`: `Ok(Some)` to send it,
    /// `Ok(None)` once the exchange is complete (the server proved itself
    /// where the mechanism has it do so).
    ///
    /// # Errors
    /// The challenge is malformed or the server's proof is wrong.
    fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String>;
}

/// A mechanism with this broker's credentials, which starts one exchange
/// per connection.
pub trait SaslLogin: Send + Sync {
    /// The mechanism's name as SaslHandshake carries it (`PLAIN`, `SCRAM-SHA-512`).
    fn mechanism(&self) -> &str;

    fn start(&self) -> Box<dyn SaslExchange>;
}

/// The inter-broker listener's security, as a client of the other brokers.
#[derive(Clone)]
pub struct ChannelSecurity {
    /// The listener's name (the one this broker registers as its
    /// inter-broker listener).
    pub listener: String,
    /// TLS client settings (SSL, SASL_SSL).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The SASL login (SASL_PLAINTEXT, SASL_SSL).
    pub sasl: Option<Arc<dyn SaslLogin>>,
}

impl std::fmt::Debug for ChannelSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelSecurity")
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl.as_ref().map(|s| s.mechanism().to_string()))
            .finish()
    }
}

/// A channel's byte stream: the TCP socket, or TLS over it.
pub enum ChannelStream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl ChannelStream {
    /// `tcp`, wrapped in TLS to `host` when `tls` is set; the handshake is
    /// completed here, so a refused certificate fails the connect.
    ///
    /// # Errors
    /// The host is not a valid server name, or the handshake failed.
    pub fn open(
        tcp: TcpStream,
        host: &str,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> std::io::Result<Self> {
        let Some(config) = tls else { return Ok(Self::Plain(tcp)) };
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("server name {host}: {e}"),
            )
        })?;
        let connection = rustls::ClientConnection::new(Arc::clone(config), name)
            .map_err(std::io::Error::other)?;
        let mut stream = rustls::StreamOwned::new(connection, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(Self::Tls(Box::new(stream)))
    }
}

impl Read for ChannelStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl Write for ChannelStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(s) => s.flush(),
        }
    }
}

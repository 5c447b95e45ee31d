//! Who is on the other end of a connection, and over what.
//!
//! Every connection has a [`Session`], built by `server` when it accepts the
//! connection and handed to every request through `api::RequestContext`:
//! the listener it came in on (Metadata, DescribeCluster and FindCoordinator
//! answer with that listener's advertised endpoint, as Kafka does), the
//! listener's security protocol, the peer's address and the principal.
//!
//! Invariants:
//! * A session is built once per connection and never shared between
//!   connections; requests on one connection run one at a time, so it needs
//!   no lock.
//! * The principal is `User:ANONYMOUS` (Kafka's principal for an
//!   unauthenticated connection) on PLAINTEXT and on SSL without a client
//!   certificate, and `User:<subject DN, RFC 2253>` for a verified client
//!   certificate (`principal`), Kafka's DEFAULT `ssl.principal.mapping.rules`.
//!   On SASL_PLAINTEXT and SASL_SSL it is `User:<authorization id>` of the
//!   SASL exchange (`sasl`; a client certificate on SASL_SSL does not name
//!   the principal, as on Kafka), set once authentication completes and
//!   before the first request is dispatched.
//! * A listener name is upper case (Kafka's `ListenerName.normalised`); the
//!   `listener.name.<name>.` key prefix uses its lower-case form.

pub mod acl;
pub mod acl_cache;
pub mod acl_store;
pub mod authorizer;
pub mod credentials;
pub mod principal;
pub mod principal_mapper;
pub mod sasl;
pub mod ssl_configs;
pub mod store;
pub mod tls;
pub mod tls_client;
pub mod tls_identity;

use std::fmt;
use std::net::IpAddr;

/// Kafka's `SecurityProtocol`, the right-hand side of
/// `listener.security.protocol.map`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [SecurityProtocol; 4] =
        [Self::Plaintext, Self::Ssl, Self::SaslPlaintext, Self::SaslSsl];

    /// Kafka's name of the protocol.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol of a name, which Kafka compares case-insensitively.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Kafka's `KafkaPrincipal`: a type and a name, written `Type:name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KafkaPrincipal {
    pub principal_type: String,
    pub name: String,
}

impl KafkaPrincipal {
    /// `User:ANONYMOUS`, the principal of an unauthenticated connection.
    pub fn anonymous() -> Self {
        Self { principal_type: "User".into(), name: "ANONYMOUS".into() }
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// One connection's security state.
#[derive(Debug, Clone)]
pub struct Session {
    /// The listener's name, upper case ("PLAINTEXT", "INTERNAL").
    pub listener: String,
    pub protocol: SecurityProtocol,
    /// The peer's address, an IPv4-mapped IPv6 address taken as IPv4.
    pub peer: IpAddr,
    pub principal: KafkaPrincipal,
}

impl Session {
    /// A session on a PLAINTEXT listener.
    pub fn plaintext(listener: impl Into<String>, peer: IpAddr) -> Self {
        let peer = match peer {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        Self {
            listener: listener.into(),
            protocol: SecurityProtocol::Plaintext,
            peer,
            principal: KafkaPrincipal::anonymous(),
        }
    }

    /// A session on an SSL listener; `subject` is the verified client
    /// certificate's subject, if the client sent one.
    pub fn ssl(listener: impl Into<String>, peer: IpAddr, subject: Option<String>) -> Self {
        let mut s = Self::plaintext(listener, peer);
        s.protocol = SecurityProtocol::Ssl;
        if let Some(dn) = subject {
            s.principal = KafkaPrincipal { principal_type: "User".into(), name: dn };
        }
        s
    }

    /// The peer as Kafka writes a member's `client_host` ("/127.0.0.1").
    pub fn client_host(&self) -> String {
        format!("/{}", self.peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names_and_mapped_peers() {
        for p in SecurityProtocol::ALL {
            assert_eq!(SecurityProtocol::from_name(&p.name().to_lowercase()), Some(p));
        }
        assert_eq!(SecurityProtocol::from_name("TLS"), None);
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        let s = Session::plaintext("PLAINTEXT", mapped);
        assert_eq!(s.client_host(), "/10.1.2.3");
        assert_eq!(s.principal.to_string(), "User:ANONYMOUS");
        let v6: IpAddr = "::1".parse().unwrap();
        assert_eq!(Session::plaintext("X", v6).client_host(), "/::1");
    }
}

//! SASL mechanisms on the server side (Kafka's `SaslServer` implementations)
//! and what one SASL listener offers.
//!
//! A [`SaslServer`] is one exchange: the authenticator (`server::authenticator`)
//! feeds it the client's tokens in order and gets back either a challenge to
//! send, the end of the exchange with an [`Authenticated`] identity, or an
//! error that fails authentication.
//!
//! Invariants:
//! * [`Authenticated`] has a private field and no public constructor: only a
//!   mechanism, in the branch where the client proved its credentials, can
//!   build one. "The exchange ended" can therefore never be mistaken for "the
//!   client is who it says".
//! * A mechanism is offered on a listener only when it is in that listener's
//!   `sasl.enabled.mechanisms` and has what it needs (PLAIN: at least one
//!   `user_` entry in `listener.name.<l>.plain.sasl.jaas.config`); `config`
//!   refuses a SASL listener otherwise, so nothing here is half set up.
//! * Error messages go to the client: they never say whether a user exists
//!   (PLAIN answers "Invalid username or password" for both, as Kafka).

pub mod client;
pub mod jaas;
pub mod plain;
#[cfg(test)]
mod rfc7677;
pub mod scram;
pub mod scram_credential;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::KafkaPrincipal;

pub use plain::PlainUsers;
pub use scram_credential::{CredentialLookup, ScramMechanism};

/// The mechanism names sediment serves.
pub const PLAIN: &str = "PLAIN";

/// What one client token led to.
#[derive(Debug)]
pub enum SaslStep {
    /// Send these bytes and wait for the next token.
    Challenge(Vec<u8>),
    /// The client proved its identity; send `last` (possibly empty).
    Complete { last: Vec<u8>, id: Authenticated },
}

/// The authorization id of a client that authenticated. Only the mechanisms
/// of this module build one (the field is private).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    authorization_id: String,
}

impl Authenticated {
    fn new(authorization_id: String) -> Self {
        Self { authorization_id }
    }

    pub fn authorization_id(&self) -> &str {
        &self.authorization_id
    }

    /// Kafka's `DefaultKafkaPrincipalBuilder` on a SASL listener:
    /// `User:<authorization id>`.
    pub fn principal(&self) -> KafkaPrincipal {
        KafkaPrincipal { principal_type: "User".into(), name: self.authorization_id.clone() }
    }
}

/// Authentication failed; the message is what the client is told (Kafka's
/// `SaslAuthenticationException` message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SaslError(pub String);

/// One server side of an exchange of one mechanism.
pub trait SaslServer: Send {
    /// The mechanism's name ("PLAIN").
    fn mechanism(&self) -> &'static str;

    /// One client token in.
    ///
    /// # Errors
    /// Authentication failed: the caller answers SASL_AUTHENTICATION_FAILED
    /// with the message (or closes, in raw-token mode) and ends the connection.
    fn evaluate_response(&mut self, token: &[u8]) -> Result<SaslStep, SaslError>;
}

/// What a SASL listener offers, resolved from its keys by `config`.
#[derive(Clone)]
pub struct SaslListener {
    /// `sasl.enabled.mechanisms` of the listener, in its order (sent in every
    /// SaslHandshake answer).
    pub mechanisms: Vec<String>,
    /// PLAIN's users, when PLAIN is enabled.
    pub plain: Option<Arc<PlainUsers>>,
    /// The SCRAM credential store, set by the broker once it is loaded; a
    /// SCRAM mechanism is served only when it is set and enabled.
    pub scram: Option<Arc<dyn CredentialLookup>>,
    /// `sasl.server.max.receive.size`: the largest frame read before
    /// authentication completes.
    pub max_receive_size: usize,
    /// `connection.failed.authentication.delay.ms`: how long a failed
    /// connection waits before it is answered and closed.
    pub failed_authentication_delay: Duration,
    /// `connections.max.reauth.ms` per mechanism, where it is above 0: how
    /// long a session of that mechanism lasts before the client must
    /// re-authenticate (KIP-368). A mechanism not listed never expires.
    pub max_reauth: HashMap<String, Duration>,
}

impl std::fmt::Debug for SaslListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslListener")
            .field("mechanisms", &self.mechanisms)
            .field("plain", &self.plain)
            .field("scram", &self.scram.is_some())
            .field("max_receive_size", &self.max_receive_size)
            .field("failed_authentication_delay", &self.failed_authentication_delay)
            .field("max_reauth", &self.max_reauth)
            .finish()
    }
}

impl SaslListener {
    /// A new exchange of `mechanism`, if the listener offers it (the name is
    /// compared exactly, as Kafka does).
    pub fn server(&self, mechanism: &str) -> Option<Box<dyn SaslServer>> {
        if !self.mechanisms.iter().any(|m| m == mechanism) {
            return None;
        }
        match mechanism {
            PLAIN => {
                let users = Arc::clone(self.plain.as_ref()?);
                Some(Box::new(plain::PlainSaslServer::new(users)))
            }
            name => {
                let mechanism = ScramMechanism::from_name(name)?;
                let credentials = Arc::clone(self.scram.as_ref()?);
                let server = scram::ScramSaslServer::new(mechanism, credentials).ok()?;
                Some(Box::new(server))
            }
        }
    }
}

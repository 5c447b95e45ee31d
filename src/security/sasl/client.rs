//! SASL on the client side, for this broker's own channels to the other
//! brokers (`sasl.mechanism.inter.broker.protocol`): PLAIN (RFC 4616) and
//! SCRAM-SHA-256/512 (RFC 5802, as Kafka's `ScramSaslClient`), with the
//! `username` and `password` of the inter-broker listener's JAAS config.
//!
//! Invariants:
//! * A SCRAM exchange completes only once the server proved it knows the
//!   credential: its final message carries the expected ServerSignature
//!   (compared in constant time); a server nonce that does not extend ours,
//!   iterations outside Kafka's bounds or an `e=` answer fail it.
//! * The password is kept only inside the login; `Debug` never prints it.

use std::num::NonZeroU32;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use subtle::ConstantTimeEq;

use super::scram_credential::{ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::cluster::channel_security::{SaslExchange, SaslLogin};

/// A username and password from a JAAS config (a secret).
#[derive(Clone)]
pub struct ClientCredentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials").field("username", &self.username).finish()
    }
}

/// The login of `mechanism` (PLAIN or a SCRAM mechanism) with `credentials`.
pub fn login(mechanism: &str, credentials: ClientCredentials) -> Option<Arc<dyn SaslLogin>> {
    if mechanism == super::PLAIN {
        return Some(Arc::new(PlainLogin(credentials)));
    }
    let scram = ScramMechanism::from_name(mechanism)?;
    Some(Arc::new(ScramLogin { mechanism: scram, credentials }))
}

struct PlainLogin(ClientCredentials);

impl SaslLogin for PlainLogin {
    fn mechanism(&self) -> &str {
        super::PLAIN
    }

    fn start(&self) -> Box<dyn SaslExchange> {
        Box::new(PlainExchange(self.0.clone()))
    }
}

struct PlainExchange(ClientCredentials);

impl SaslExchange for PlainExchange {
    fn first(&mut self) -> Vec<u8> {
        // No authorization id: the broker authorizes the username.
        format!("\0{}\0{}", self.0.username, self.0.password).into_bytes()
    }

    fn step(&mut self, _challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        // The server's answer to PLAIN is empty; its error code said the rest.
        Ok(None)
    }
}

struct ScramLogin {
    mechanism: ScramMechanism,
    credentials: ClientCredentials,
}

impl SaslLogin for ScramLogin {
    fn mechanism(&self) -> &str {
        self.mechanism.name()
    }

    fn start(&self) -> Box<dyn SaslExchange> {
        let mut bytes = [0u8; 24];
        // The system generator does not fail on Linux; an all-zero nonce
        // would still be refused by no server, so nothing unsafe follows.
        let _ = SystemRandom::new().fill(&mut bytes);
        Box::new(ScramExchange::new(self.mechanism, self.credentials.clone(), B64.encode(bytes)))
    }
}

/// Where one SCRAM exchange stands.
enum ScramState {
    /// The client-first message is to be sent.
    Start,
    /// Sent client-first; waiting for server-first.
    SentFirst,
    /// Sent client-final; the server must prove itself with this signature.
    SentFinal {
        server_signature: Vec<u8>,
    },
    Done,
}

pub struct ScramExchange {
    mechanism: ScramMechanism,
    credentials: ClientCredentials,
    client_nonce: String,
    state: ScramState,
}

/// RFC 5802's saslname: `,` and `=` escaped.
fn sasl_name(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

impl ScramExchange {
    pub fn new(mechanism: ScramMechanism, credentials: ClientCredentials, nonce: String) -> Self {
        Self { mechanism, credentials, client_nonce: nonce, state: ScramState::Start }
    }

    fn client_first_bare(&self) -> String {
        format!("n={},r={}", sasl_name(&self.credentials.username), self.client_nonce)
    }

    /// server-first (`r=..,s=..,i=..`) → client-final, and the signature
    /// the server must answer with.
    fn client_final(&self, server_first: &str) -> Result<(String, Vec<u8>), String> {
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for field in server_first.split(',') {
            match field.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(B64.decode(v).map_err(|e| format!("salt: {e}"))?),
                Some(("i", v)) => iterations = v.parse::<u32>().ok(),
                Some(("e", v)) => return Err(format!("the broker refused: {v}")),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err("a server-first message without r, s and i".into());
        };
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err("the server nonce does not extend the client's".into());
        }
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(format!(
                "{iterations} iterations (Kafka's bounds are {MIN_ITERATIONS}..={MAX_ITERATIONS})"
            ));
        }
        let m = self.mechanism;
        let i = NonZeroU32::new(iterations).ok_or("zero iterations")?;
        let salted = m.salted_password(self.credentials.password.as_bytes(), &salt, i);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c={},r={nonce}", B64.encode("n,,"));
        let auth = format!("{},{server_first},{without_proof}", self.client_first_bare());
        let signature = m.hmac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let server_key = m.hmac(&salted, b"Server Key");
        let server_signature = m.hmac(&server_key, auth.as_bytes());
        Ok((format!("{without_proof},p={}", B64.encode(proof)), server_signature))
    }
}

impl SaslExchange for ScramExchange {
    fn first(&mut self) -> Vec<u8> {
        self.state = ScramState::SentFirst;
        format!("n,,{}", self.client_first_bare()).into_bytes()
    }

    fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let text = std::str::from_utf8(challenge).map_err(|_| "a message that is not UTF-8")?;
        match std::mem::replace(&mut self.state, ScramState::Done) {
            ScramState::SentFirst => {
                let (message, server_signature) = self.client_final(text)?;
                self.state = ScramState::SentFinal { server_signature };
                Ok(Some(message.into_bytes()))
            }
            ScramState::SentFinal { server_signature } => {
                if let Some(e) = text.strip_prefix("e=") {
                    return Err(format!("the broker refused: {e}"));
                }
                let v = text.strip_prefix("v=").ok_or("a server-final message without v")?;
                let v = B64.decode(v).map_err(|e| format!("server signature: {e}"))?;
                if !bool::from(v.ct_eq(&server_signature)) {
                    return Err(
                        "the broker's signature is wrong: it does not hold this user's credential"
                            .into(),
                    );
                }
                Ok(None)
            }
            ScramState::Start | ScramState::Done => Err("a challenge out of turn".into()),
        }
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;

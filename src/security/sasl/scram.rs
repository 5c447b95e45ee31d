//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the server side (RFC 5802,
//! RFC 7677) with Kafka's grammar (`ScramSaslServer`, `ScramMessages`).
//!
//! The exchange is two client tokens:
//! 1. client-first `n,[a=<authzid>],[m=..,]n=<saslname>,r=<nonce>[,<ext>=<v>]*`
//!    (7-bit; no channel binding). The user is looked up here: an unknown user
//!    or a credential under the minimum iterations fails at once (Kafka fakes
//!    no salt). Answer: `r=<client nonce><server nonce>,s=<salt>,i=<iterations>`.
//! 2. client-final `c=<base64 gs2 header>,r=<nonce>,p=<base64 proof>`. Answer
//!    on success: `v=<base64 ServerSignature>`.
//!
//! Invariants:
//! * [`Authenticated`] is built in exactly one place: after the StoredKey
//!   recomputed from the proof equals the stored one (constant-time compare,
//!   `subtle`). Every other path is an error, which fails authentication.
//! * Stricter than Kafka where no real client is affected: `c=` must decode
//!   to the client-first gs2 header byte for byte, and a proof of the wrong
//!   length fails like a wrong proof. The final nonce must end with the
//!   server-first nonce (client nonce + server nonce), Kafka's rule: librdkafka
//!   sends its client nonce in front of that again, so equality would refuse it.
//! * The server nonce is fresh per exchange (24 random bytes, base64), so a
//!   client-final replayed on another connection cannot match.
//! * Failure messages never say whether the user exists.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use subtle::ConstantTimeEq;

use super::scram_credential::{CredentialLookup, ScramCredential, ScramMechanism, MIN_ITERATIONS};
use super::{Authenticated, SaslError, SaslServer, SaslStep};

/// What the state of an exchange waits for next.
enum State {
    ClientFirst,
    ClientFinal(Box<FirstDone>),
    /// Finished or failed: any further token fails.
    Over,
}

/// What the first round fixed.
struct FirstDone {
    user: String,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
}

/// One SCRAM exchange.
pub struct ScramSaslServer {
    mechanism: ScramMechanism,
    credentials: Arc<dyn CredentialLookup>,
    server_nonce: String,
    state: State,
}

fn fail(mechanism: ScramMechanism) -> SaslError {
    // Kafka's SaslServerAuthenticator message for every mechanism failure.
    SaslError(format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
        mechanism.name()
    ))
}

impl ScramSaslServer {
    /// A new exchange with a fresh server nonce.
    ///
    /// # Errors
    /// The system random source failed.
    pub fn new(
        mechanism: ScramMechanism,
        credentials: Arc<dyn CredentialLookup>,
    ) -> Result<Self, SaslError> {
        let mut bytes = [0u8; 24];
        SystemRandom::new().fill(&mut bytes).map_err(|_| fail(mechanism))?;
        Ok(Self::with_server_nonce(mechanism, credentials, B64.encode(bytes)))
    }

    /// An exchange with a given server nonce (the RFC's test vector).
    pub(crate) fn with_server_nonce(
        mechanism: ScramMechanism,
        credentials: Arc<dyn CredentialLookup>,
        server_nonce: String,
    ) -> Self {
        Self { mechanism, credentials, server_nonce, state: State::ClientFirst }
    }

    fn client_first(&mut self, token: &[u8]) -> Result<SaslStep, SaslError> {
        let m = self.mechanism;
        let first = ClientFirst::parse(token).ok_or_else(|| fail(m))?;
        if first.authzid.as_deref().is_some_and(|a| a != first.user) {
            return Err(fail(m));
        }
        if first.token_auth {
            // Delegation tokens do not exist here.
            return Err(fail(m));
        }
        let credential = self.credentials.lookup(&first.user, m).ok_or_else(|| fail(m))?;
        if credential.iterations < MIN_ITERATIONS || credential.mechanism != m {
            return Err(fail(m));
        }
        let nonce = format!("{}{}", first.nonce, self.server_nonce);
        let server_first =
            format!("r={nonce},s={},i={}", B64.encode(&credential.salt), credential.iterations);
        let reply = server_first.clone().into_bytes();
        self.state = State::ClientFinal(Box::new(FirstDone {
            user: first.user,
            gs2_header: first.gs2_header,
            client_first_bare: first.bare,
            server_first,
            nonce,
            credential,
        }));
        Ok(SaslStep::Challenge(reply))
    }

    fn client_final(&self, done: &FirstDone, token: &[u8]) -> Result<SaslStep, SaslError> {
        let m = self.mechanism;
        let fin = ClientFinal::parse(token).ok_or_else(|| fail(m))?;
        // Kafka's rule: the final nonce ends with the server-first nonce.
        // librdkafka sends client nonce + the whole server-first nonce (which
        // already starts with the client nonce); the fresh server part is
        // what makes a replay fail.
        if fin.channel_binding != done.gs2_header.as_bytes() || !fin.nonce.ends_with(&done.nonce) {
            return Err(fail(m));
        }
        let auth_message =
            format!("{},{},{}", done.client_first_bare, done.server_first, fin.without_proof);
        let cred = &done.credential;
        let client_signature = m.hmac(&cred.stored_key, auth_message.as_bytes());
        if fin.proof.len() != client_signature.len() {
            return Err(fail(m));
        }
        let client_key: Vec<u8> =
            client_signature.iter().zip(&fin.proof).map(|(s, p)| s ^ p).collect();
        let computed = m.hash(&client_key);
        if !bool::from(computed.ct_eq(&cred.stored_key)) {
            return Err(fail(m));
        }
        // The one place an identity is granted: the proof matched StoredKey.
        let server_signature = m.hmac(&cred.server_key, auth_message.as_bytes());
        let last = format!("v={}", B64.encode(server_signature)).into_bytes();
        Ok(SaslStep::Complete { last, id: Authenticated::new(done.user.clone()) })
    }
}

impl SaslServer for ScramSaslServer {
    fn mechanism(&self) -> &'static str {
        self.mechanism.name()
    }

    fn evaluate_response(&mut self, token: &[u8]) -> Result<SaslStep, SaslError> {
        match std::mem::replace(&mut self.state, State::Over) {
            State::ClientFirst => self.client_first(token),
            State::ClientFinal(done) => self.client_final(&done, token),
            State::Over => Err(fail(self.mechanism)),
        }
    }
}

/// RFC 5802 `saslname`, Kafka's 7-bit form: `[\x01-\x7F]` without `=` and
/// `,`, with `=2C` and `=3D` for them. `None` when it does not match.
fn decode_saslname(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("=2C") {
            out.push(',');
            rest = r;
        } else if let Some(r) = rest.strip_prefix("=3D") {
            out.push('=');
            rest = r;
        } else if ('\x01'..='\x7f').contains(&c) && c != '=' && c != ',' {
            out.push(c);
            rest = &rest[1..];
        } else {
            return None;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Printable ASCII without `,` (RFC 5802 `printable`), at least one.
fn is_printable(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

struct ClientFirst {
    gs2_header: String,
    authzid: Option<String>,
    bare: String,
    user: String,
    nonce: String,
    token_auth: bool,
}

impl ClientFirst {
    fn parse(token: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(token).ok()?;
        if !text.is_ascii() {
            return None;
        }
        let after_n = text.strip_prefix("n,")?;
        let (authzid, bare) = match after_n.strip_prefix("a=") {
            Some(r) => {
                let (a, bare) = r.split_once(',')?;
                (Some(decode_saslname(a)?), bare)
            }
            None => (None, after_n.strip_prefix(',')?),
        };
        let gs2_header = text[..text.len() - bare.len()].to_string();
        let mut parts = bare.split(',').peekable();
        if parts.peek().is_some_and(|p| p.starts_with("m=")) {
            parts.next();
        }
        let user = decode_saslname(parts.next()?.strip_prefix("n=")?)?;
        let nonce = parts.next()?.strip_prefix("r=")?;
        if !is_printable(nonce) {
            return None;
        }
        let mut token_auth = false;
        for ext in parts {
            let (k, v) = ext.split_once('=')?;
            if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphabetic()) || v.is_empty() {
                return None;
            }
            if k == "tokenauth" && v.eq_ignore_ascii_case("true") {
                token_auth = true;
            }
        }
        Some(Self {
            gs2_header,
            authzid,
            bare: bare.to_string(),
            user,
            nonce: nonce.to_string(),
            token_auth,
        })
    }
}

struct ClientFinal {
    channel_binding: Vec<u8>,
    nonce: String,
    proof: Vec<u8>,
    /// `c=..,r=..` (and any extensions): the message without `,p=...`.
    without_proof: String,
}

impl ClientFinal {
    fn parse(token: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(token).ok()?;
        if !text.is_ascii() {
            return None;
        }
        let (without_proof, proof) = text.rsplit_once(",p=")?;
        let mut parts = without_proof.split(',');
        let channel_binding = B64.decode(parts.next()?.strip_prefix("c=")?).ok()?;
        let nonce = parts.next()?.strip_prefix("r=")?;
        if !is_printable(nonce) {
            return None;
        }
        for ext in parts {
            let (k, _) = ext.split_once('=')?;
            if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphabetic()) {
                return None;
            }
        }
        Some(Self {
            channel_binding,
            nonce: nonce.to_string(),
            proof: B64.decode(proof).ok()?,
            without_proof: without_proof.to_string(),
        })
    }
}

/// A client computing its final message the RFC way (tests of this module
/// and of the authenticator).
#[cfg(test)]
pub(crate) fn client_final(
    m: ScramMechanism,
    password: &str,
    client_first_bare: &str,
    server_first: &str,
    gs2: &str,
) -> String {
    let mut fields = server_first.split(',');
    let nonce = &fields.next().expect("r")[2..];
    let salt = B64.decode(&fields.next().expect("s")[2..]).expect("salt");
    let i: u32 = fields.next().expect("i")[2..].parse().expect("i");
    let i = std::num::NonZeroU32::new(i).expect("iterations");
    let salted = m.salted_password(password.as_bytes(), &salt, i);
    let client_key = m.hmac(&salted, b"Client Key");
    let stored_key = m.hash(&client_key);
    let without_proof = format!("c={},r={nonce}", B64.encode(gs2));
    let auth = format!("{client_first_bare},{server_first},{without_proof}");
    let sig = m.hmac(&stored_key, auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
    format!("{without_proof},p={}", B64.encode(proof))
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;

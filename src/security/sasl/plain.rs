//! SASL/PLAIN (RFC 4616) with Kafka's rules (`PlainSaslServer`,
//! `PlainServerCallbackHandler`).
//!
//! * The one client token is `authzid NUL authcid NUL password`, read as
//!   UTF-8 (invalid bytes become U+FFFD, as Java's decoder does); exactly three
//!   parts, else "Invalid SASL/PLAIN response: expected 3 tokens, got N".
//! * An empty user name or password fails with its own message.
//! * The password must equal the listener's `user_<name>` option of its
//!   `PlainLoginModule` entry; an unknown user and a wrong password fail with
//!   the same message, so the answer does not tell whether a user exists.
//! * An authorization id other than empty or the user name fails.
//! * The authorization id of the session is the user name.
//!
//! Passwords are kept only as SHA-256 digests and compared digest to digest
//! in constant time (`subtle`): the comparison takes the same time whatever
//! the offered password's length or how much of it matches.

use std::collections::BTreeMap;
use std::sync::Arc;

use ring::digest::{digest, SHA256};
use subtle::ConstantTimeEq;

use super::jaas::JaasEntry;
use super::{Authenticated, SaslError, SaslServer, SaslStep, PLAIN};

/// Kafka's login module class for PLAIN.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// The option prefix of a PLAIN user's password.
const USER_PREFIX: &str = "user_";

type Digest = [u8; 32];

fn sha256(bytes: &[u8]) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, bytes).as_ref());
    out
}

/// PLAIN's users of one listener: name → SHA-256 of the password.
pub struct PlainUsers {
    users: BTreeMap<String, Digest>,
}

impl std::fmt::Debug for PlainUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PlainUsers({} users)", self.users.len())
    }
}

impl PlainUsers {
    /// The users of the JAAS entries for PLAIN: the `user_<name>` options of
    /// the `PlainLoginModule` entry.
    ///
    /// # Errors
    /// Not exactly one entry (Kafka's rule for a listener's JAAS config), an
    /// entry of another login module, or no `user_` option.
    pub fn from_jaas(entries: &[JaasEntry]) -> Result<Self, String> {
        let [entry] = entries else {
            return Err(format!("{} login modules; exactly one is needed", entries.len()));
        };
        if entry.login_module != PLAIN_LOGIN_MODULE {
            return Err(format!(
                "the login module is {}; PLAIN needs {PLAIN_LOGIN_MODULE}",
                entry.login_module
            ));
        }
        let users: BTreeMap<String, Digest> = entry
            .options
            .iter()
            .filter_map(|(k, v)| {
                Some((k.strip_prefix(USER_PREFIX)?.to_string(), sha256(v.as_bytes())))
            })
            .filter(|(name, _)| !name.is_empty())
            .collect();
        if users.is_empty() {
            return Err("no user_<name>=\"<password>\" option: nobody could log in".into());
        }
        Ok(Self { users })
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Whether `password` is `user`'s. Runs in the same time for an unknown
    /// user (compared against a digest no password has, in practice).
    fn check(&self, user: &str, password: &str) -> bool {
        let offered = sha256(password.as_bytes());
        let (expected, known) = match self.users.get(user) {
            Some(d) => (*d, true),
            None => ([0u8; 32], false),
        };
        bool::from(offered.ct_eq(&expected)) && known
    }
}

/// One PLAIN exchange.
pub struct PlainSaslServer {
    users: Arc<PlainUsers>,
    complete: bool,
}

impl PlainSaslServer {
    pub fn new(users: Arc<PlainUsers>) -> Self {
        Self { users, complete: false }
    }
}

fn fail(message: &str) -> SaslError {
    SaslError(message.to_string())
}

impl SaslServer for PlainSaslServer {
    fn mechanism(&self) -> &'static str {
        PLAIN
    }

    fn evaluate_response(&mut self, token: &[u8]) -> Result<SaslStep, SaslError> {
        if self.complete {
            return Err(fail("Authentication exchange has completed"));
        }
        let text = String::from_utf8_lossy(token);
        // At most four parts are split off, as Kafka's extractTokens does, so
        // "expected 3 tokens, got 4" is the largest count reported.
        let parts: Vec<&str> = text.splitn(4, '\0').collect();
        let [authzid, user, password] = parts[..] else {
            return Err(SaslError(format!(
                "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
                parts.len()
            )));
        };
        if user.is_empty() {
            return Err(fail("Authentication failed: username not specified"));
        }
        if password.is_empty() {
            return Err(fail("Authentication failed: password not specified"));
        }
        if !self.users.check(user, password) {
            return Err(fail("Authentication failed: Invalid username or password"));
        }
        if !authzid.is_empty() && authzid != user {
            return Err(fail(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
        self.complete = true;
        Ok(SaslStep::Complete { last: Vec::new(), id: Authenticated::new(user.to_string()) })
    }
}

#[cfg(test)]
mod tests {
    use super::super::jaas;
    use super::*;

    fn users() -> Arc<PlainUsers> {
        let text = format!(
            "{PLAIN_LOGIN_MODULE} required username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\" user_alice=\"wonder land\";"
        );
        Arc::new(PlainUsers::from_jaas(&jaas::parse(&text).unwrap()).unwrap())
    }

    fn run(token: &[u8]) -> Result<String, String> {
        let mut s = PlainSaslServer::new(users());
        match s.evaluate_response(token) {
            Ok(SaslStep::Complete { last, id }) => {
                assert!(last.is_empty());
                Ok(id.principal().to_string())
            }
            Ok(SaslStep::Challenge(_)) => panic!("PLAIN has no challenge"),
            Err(e) => Err(e.0),
        }
    }

    #[test]
    fn good_credentials_authenticate_the_user() {
        assert_eq!(run(b"\0alice\0wonder land").unwrap(), "User:alice");
        assert_eq!(run(b"admin\0admin\0admin-secret").unwrap(), "User:admin");
        // The inter-broker client's username/password are not users.
        assert_eq!(users().len(), 2);
    }

    #[test]
    fn every_bad_token_fails_with_kafkas_message() {
        let invalid = "Authentication failed: Invalid username or password";
        for (token, message) in [
            (&b"\0alice\0wonder lanD"[..], invalid),
            (b"\0alice\0wonder land ", invalid),
            (b"\0alice\0wonder", invalid),
            (b"\0mallory\0wonder land", invalid),
            (b"\0ALICE\0wonder land", invalid),
            (b"\0\0pw", "Authentication failed: username not specified"),
            (b"\0alice\0", "Authentication failed: password not specified"),
            (b"alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
            (b"\0alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
            (b"\0alice\0wonder land\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
            (b"\0a\0b\0c\0d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
            (
                b"admin\0alice\0wonder land",
                "Authentication failed: Client requested an authorization id that is different from username",
            ),
            (b"\0alice\0wonder land\xff", invalid),
        ] {
            assert_eq!(run(token), Err(message.to_string()), "{token:?}");
        }
    }

    #[test]
    fn a_completed_exchange_takes_no_more_tokens() {
        let mut s = PlainSaslServer::new(users());
        assert!(s.evaluate_response(b"\0alice\0wonder land").is_ok());
        assert!(s.evaluate_response(b"\0alice\0wonder land").is_err());
    }

    #[test]
    fn the_jaas_entry_must_be_plains_and_name_users() {
        for text in [
            "org.example.Other required user_a=\"b\";".to_string(),
            format!("{PLAIN_LOGIN_MODULE} required username=\"a\" password=\"b\";"),
            format!("{PLAIN_LOGIN_MODULE} required user_=\"b\";"),
            format!("{PLAIN_LOGIN_MODULE} required user_a=\"b\"; {PLAIN_LOGIN_MODULE} required;"),
        ] {
            let entries = jaas::parse(&text).unwrap();
            assert!(PlainUsers::from_jaas(&entries).is_err(), "{text}");
        }
        let u = users();
        assert!(!format!("{u:?}").contains("secret"));
    }
}

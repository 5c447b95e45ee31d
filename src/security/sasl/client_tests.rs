use std::collections::BTreeMap;

use super::*;
use crate::security::sasl::scram::ScramSaslServer;
use crate::security::sasl::scram_credential::{CredentialLookup, ScramCredential};
use crate::security::sasl::{SaslServer, SaslStep};

/// RFC 7677 section 3: user "user", password "pencil", SCRAM-SHA-256.
use crate::security::sasl::rfc7677::{
    CLIENT_FINAL as RFC_CLIENT_FINAL, CLIENT_FIRST as RFC_CLIENT_FIRST,
    CLIENT_NONCE as RFC_CLIENT_NONCE, SERVER_FINAL as RFC_SERVER_FINAL,
    SERVER_FIRST as RFC_SERVER_FIRST,
};

fn credentials(username: &str, password: &str) -> ClientCredentials {
    ClientCredentials { username: username.into(), password: password.into() }
}

fn rfc_exchange() -> ScramExchange {
    let c = credentials("user", "pencil");
    ScramExchange::new(ScramMechanism::Sha256, c, RFC_CLIENT_NONCE.into())
}

#[test]
fn rfc7677_client_side_byte_for_byte() {
    let mut x = rfc_exchange();
    assert_eq!(x.first(), RFC_CLIENT_FIRST.as_bytes());
    let last = x.step(RFC_SERVER_FIRST.as_bytes()).expect("server-first").expect("client-final");
    assert_eq!(String::from_utf8(last).unwrap(), RFC_CLIENT_FINAL);
    assert_eq!(x.step(RFC_SERVER_FINAL.as_bytes()), Ok(None), "the server proved itself");
    assert!(x.step(RFC_SERVER_FINAL.as_bytes()).is_err(), "nothing after the end");
}

#[test]
fn a_server_that_cannot_prove_the_credential_is_refused() {
    let mut x = rfc_exchange();
    x.first();
    x.step(RFC_SERVER_FIRST.as_bytes()).unwrap();
    let forged = format!("v={}", B64.encode([7u8; 32]));
    assert!(x.step(forged.as_bytes()).unwrap_err().contains("signature is wrong"));

    let mut x = rfc_exchange();
    x.first();
    x.step(RFC_SERVER_FIRST.as_bytes()).unwrap();
    let e = x.step(b"e=invalid-proof").unwrap_err();
    assert!(e.contains("invalid-proof"), "{e}");
}

#[test]
fn bad_server_first_messages_are_refused() {
    let cases = [
        ("r=someoneelse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        ("r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        ("r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1", "iterations"),
        ("r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4000000000", "iterations"),
        ("r=rOprNGfwEbeRWgbNEkqOxyz,i=4096", "without"),
        ("r=rOprNGfwEbeRWgbNEkqOxyz,s=!!,i=4096", "salt"),
        ("e=unknown-user", "refused"),
    ];
    for (server_first, why) in cases {
        let mut x = rfc_exchange();
        x.first();
        let e = x.step(server_first.as_bytes()).expect_err(server_first);
        assert!(e.contains(why), "{server_first}: {e}");
    }
    let mut x = rfc_exchange();
    assert!(x.step(RFC_SERVER_FIRST.as_bytes()).is_err(), "a challenge before the first message");
}

/// A fixed table of credentials.
struct Table(BTreeMap<String, ScramCredential>);

impl CredentialLookup for Table {
    fn lookup(&self, user: &str, _m: ScramMechanism) -> Option<ScramCredential> {
        self.0.get(user).cloned()
    }
}

/// The client against sediment's own server, each mechanism, with a name
/// that needs escaping; a wrong password fails at the server.
#[test]
fn scram_logins_authenticate_to_the_server_side() {
    for m in ScramMechanism::ALL {
        let iterations = std::num::NonZeroU32::new(4096).unwrap();
        let c = ScramCredential::from_password(m, "s3cret", b"salt-salt".to_vec(), iterations);
        let lookup: Arc<dyn CredentialLookup> =
            Arc::new(Table(BTreeMap::from([("broker,one=1".to_string(), c)])));
        for (password, ok) in [("s3cret", true), ("wrong", false)] {
            let mut server = ScramSaslServer::new(m, Arc::clone(&lookup)).expect("rng");
            let login = login(m.name(), credentials("broker,one=1", password)).expect("a login");
            assert_eq!(login.mechanism(), m.name());
            let mut x = login.start();
            let Ok(SaslStep::Challenge(first)) = server.evaluate_response(&x.first()) else {
                panic!("server-first")
            };
            let last = x.step(&first).unwrap().expect("client-final");
            match server.evaluate_response(&last) {
                Ok(SaslStep::Complete { last, id }) => {
                    assert!(ok, "a wrong password was accepted");
                    assert_eq!(id.authorization_id(), "broker,one=1");
                    assert_eq!(x.step(&last), Ok(None));
                }
                Ok(other) => panic!("{other:?}"),
                Err(_) => assert!(!ok, "{} refused the right password", m.name()),
            }
        }
    }
}

#[test]
fn plain_login_sends_username_and_password() {
    let login = login("PLAIN", credentials("broker", "pw")).expect("PLAIN");
    let mut x = login.start();
    assert_eq!(x.first(), b"\0broker\0pw");
    assert_eq!(x.step(b""), Ok(None));
    assert!(super::login("GSSAPI", credentials("a", "b")).is_none());
    let shown = format!("{:?}", credentials("broker", "very-secret"));
    assert!(!shown.contains("very-secret"), "{shown}");
}

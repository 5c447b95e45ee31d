use std::collections::BTreeMap;
use std::num::NonZeroU32;

use super::*;

/// A fixed table of credentials.
struct Table(BTreeMap<(String, ScramMechanism), ScramCredential>);

impl CredentialLookup for Table {
    fn lookup(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.0.get(&(user.to_string(), mechanism)).cloned()
    }
}

fn iters(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("non-zero")
}

/// RFC 7677 section 3: user "user", password "pencil".
use crate::security::sasl::rfc7677::{
    CLIENT_FINAL as RFC_CLIENT_FINAL, CLIENT_FIRST as RFC_CLIENT_FIRST, SALT as RFC_SALT,
    SERVER_FINAL as RFC_SERVER_FINAL, SERVER_FIRST as RFC_SERVER_FIRST,
    SERVER_NONCE as RFC_SERVER_NONCE,
};

fn table(entries: &[(&str, ScramMechanism, &str)]) -> Arc<dyn CredentialLookup> {
    let salt = B64.decode(RFC_SALT).expect("salt");
    let map = entries
        .iter()
        .map(|(user, m, password)| {
            let c = ScramCredential::from_password(*m, password, salt.clone(), iters(4096));
            ((user.to_string(), *m), c)
        })
        .collect();
    Arc::new(Table(map))
}

fn rfc_server() -> ScramSaslServer {
    let creds = table(&[("user", ScramMechanism::Sha256, "pencil")]);
    ScramSaslServer::with_server_nonce(ScramMechanism::Sha256, creds, RFC_SERVER_NONCE.into())
}

fn challenge(step: Result<SaslStep, SaslError>) -> String {
    match step {
        Ok(SaslStep::Challenge(b)) => String::from_utf8(b).expect("ascii"),
        other => panic!("expected a challenge, got {other:?}"),
    }
}

#[test]
fn rfc7677_exchange_byte_for_byte() {
    let mut s = rfc_server();
    assert_eq!(challenge(s.evaluate_response(RFC_CLIENT_FIRST.as_bytes())), RFC_SERVER_FIRST);
    match s.evaluate_response(RFC_CLIENT_FINAL.as_bytes()) {
        Ok(SaslStep::Complete { last, id }) => {
            assert_eq!(last, RFC_SERVER_FINAL.as_bytes());
            assert_eq!(id.authorization_id(), "user");
            assert_eq!(id.principal().to_string(), "User:user");
        }
        other => panic!("expected completion, got {other:?}"),
    }
    // Nothing more after the end.
    assert!(s.evaluate_response(RFC_CLIENT_FINAL.as_bytes()).is_err());
}

#[test]
fn sha512_round_trip_and_server_signature() {
    let m = ScramMechanism::Sha512;
    let creds = table(&[("alice", m, "alice-secret")]);
    let mut s = ScramSaslServer::new(m, creds).expect("rng");
    let bare = "n=alice,r=abcdefgh";
    let sf = challenge(s.evaluate_response(format!("n,,{bare}").as_bytes()));
    assert!(sf.starts_with("r=abcdefgh") && sf.len() > "r=abcdefgh".len() + 30, "{sf}");
    let cf = client_final(m, "alice-secret", bare, &sf, "n,,");
    match s.evaluate_response(cf.as_bytes()) {
        Ok(SaslStep::Complete { last, id }) => {
            assert_eq!(id.authorization_id(), "alice");
            assert_eq!(B64.decode(&last[2..]).expect("v").len(), 64);
        }
        other => panic!("expected completion, got {other:?}"),
    }
}

#[test]
fn librdkafkas_final_nonce_with_the_client_nonce_in_front_is_accepted() {
    // librdkafka sends r=<client nonce><server-first nonce>; the proof covers
    // the message as sent, so it is a valid proof of that message.
    let m = ScramMechanism::Sha256;
    let mut s = rfc_server();
    let bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
    let sf = challenge(s.evaluate_response(RFC_CLIENT_FIRST.as_bytes()));
    let doubled = sf.replacen("r=", "r=rOprNGfwEbeRWgbNEkqO", 1);
    let fin = client_final(m, "pencil", bare, &sf, "n,,");
    let fin = fin.replacen("r=", "r=rOprNGfwEbeRWgbNEkqO", 1);
    assert!(doubled.starts_with("r=rOprNGfwEbeRWgbNEkqOrOprNGfwEbeRWgbNEkqO%"));
    // The proof must be over the doubled message: recompute it so.
    let (without_proof, _) = fin.rsplit_once(",p=").expect("p");
    let auth = format!("{bare},{sf},{without_proof}");
    let salt = B64.decode(RFC_SALT).expect("salt");
    let salted = m.salted_password(b"pencil", &salt, iters(4096));
    let client_key = m.hmac(&salted, b"Client Key");
    let sig = m.hmac(&m.hash(&client_key), auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
    let fin = format!("{without_proof},p={}", B64.encode(proof));
    assert!(matches!(s.evaluate_response(fin.as_bytes()), Ok(SaslStep::Complete { .. })));
}

#[test]
fn authzid_equal_to_the_user_and_escaped_names_are_accepted() {
    let m = ScramMechanism::Sha256;
    let creds = table(&[("a,b=c", m, "pw")]);
    let mut s = ScramSaslServer::new(m, creds).expect("rng");
    let gs2 = "n,a=a=2Cb=3Dc,";
    let bare = "n=a=2Cb=3Dc,r=xyz";
    let sf = challenge(s.evaluate_response(format!("{gs2}{bare}").as_bytes()));
    let cf = client_final(m, "pw", bare, &sf, gs2);
    match s.evaluate_response(cf.as_bytes()) {
        Ok(SaslStep::Complete { id, .. }) => assert_eq!(id.authorization_id(), "a,b=c"),
        other => panic!("expected completion, got {other:?}"),
    }
}

/// Runs the RFC exchange with the client-final replaced; it must fail.
fn rfc_final_fails(client_final: &str) {
    let mut s = rfc_server();
    assert_eq!(challenge(s.evaluate_response(RFC_CLIENT_FIRST.as_bytes())), RFC_SERVER_FIRST);
    let r = s.evaluate_response(client_final.as_bytes());
    assert!(
        matches!(&r, Err(SaslError(msg)) if msg.contains("SCRAM-SHA-256")),
        "{client_final:?} gave {r:?}"
    );
}

fn with_proof(proof: &[u8]) -> String {
    let (head, _) = RFC_CLIENT_FINAL.rsplit_once(",p=").expect("p");
    format!("{head},p={}", B64.encode(proof))
}

#[test]
fn bad_client_finals_fail_and_never_authenticate() {
    let (head, p) = RFC_CLIENT_FINAL.rsplit_once(",p=").expect("p");
    let proof = B64.decode(p).expect("proof");
    for bit in [0, 7, 100, 255] {
        let mut flipped = proof.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        rfc_final_fails(&with_proof(&flipped));
    }
    rfc_final_fails(&with_proof(&proof[..31]));
    rfc_final_fails(&with_proof(&[proof.clone(), proof.clone()].concat())); // SHA-512 length
    rfc_final_fails(&with_proof(&[]));
    // A nonce that is not ours: changed server part, missing server part.
    rfc_final_fails(&RFC_CLIENT_FINAL.replace("$k0,", "$k1,"));
    rfc_final_fails(&RFC_CLIENT_FINAL.replace("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", ""));
    // c= other than the gs2 header "n,,": "y,," and "n,a=user,".
    rfc_final_fails(&RFC_CLIENT_FINAL.replace("c=biws", "c=eSws"));
    rfc_final_fails(&RFC_CLIENT_FINAL.replace("c=biws", &format!("c={}", B64.encode("n,a=user,"))));
    // Not the grammar.
    for bad in ["", "garbage", head, "c=biws,p=abc", "c=!!!,r=x,p=AAAA"] {
        rfc_final_fails(bad);
    }
}

#[test]
fn a_client_final_replayed_on_a_new_exchange_fails() {
    // The same client-first and client-final against a fresh server nonce.
    let creds = table(&[("user", ScramMechanism::Sha256, "pencil")]);
    let mut s = ScramSaslServer::new(ScramMechanism::Sha256, creds).expect("rng");
    let sf = challenge(s.evaluate_response(RFC_CLIENT_FIRST.as_bytes()));
    assert_ne!(sf, RFC_SERVER_FIRST);
    assert!(s.evaluate_response(RFC_CLIENT_FINAL.as_bytes()).is_err());
}

#[test]
fn bad_client_firsts_fail() {
    let m = ScramMechanism::Sha256;
    let salt = B64.decode(RFC_SALT).expect("salt");
    let mut map = BTreeMap::new();
    let weak = ScramCredential::from_password(m, "pw", salt.clone(), iters(4095));
    map.insert(("weak".to_string(), m), weak);
    let other_mech =
        ScramCredential::from_password(ScramMechanism::Sha512, "pw", salt, iters(4096));
    map.insert(("only512".to_string(), ScramMechanism::Sha512), other_mech);
    let user =
        ScramCredential::from_password(m, "pencil", B64.decode(RFC_SALT).expect("s"), iters(4096));
    map.insert(("user".to_string(), m), user);
    let creds: Arc<dyn CredentialLookup> = Arc::new(Table(map));
    for bad in [
        "n,,n=nobody,r=abc",      // unknown user
        "n,,n=weak,r=abc",        // below the minimum iterations
        "n,,n=only512,r=abc",     // no credential for this mechanism
        "n,a=other,n=user,r=abc", // authzid is not the user
        "y,,n=user,r=abc",        // channel binding flags other than n
        "p=tls-unique,,n=user,r=abc",
        "n,,n=user,r=",     // empty nonce
        "n,,n=user,r=a b",  // nonce not printable
        "n,,n=us=er,r=abc", // = not escaped
        "n,,n=,r=abc",      // empty name
        "n,,n=user",        // no nonce
        "n,,n=user,r=abc,tokenauth=true",
        "n,,n=user,r=abc,1x=y",       // extension name not alphabetic
        "n,,n=\u{e9}l\u{e8}ve,r=abc", // not 7-bit
        "",
    ] {
        let mut s = ScramSaslServer::new(m, Arc::clone(&creds)).expect("rng");
        let r = s.evaluate_response(bad.as_bytes());
        assert!(r.is_err(), "{bad:?} gave {r:?}");
        assert!(s.evaluate_response(b"c=biws,r=abc,p=AAAA").is_err());
    }
    // The reserved m= part and a harmless extension are accepted, as by Kafka.
    for good in ["n,,m=x,n=user,r=abc", "n,,n=user,r=abc,foo=bar"] {
        let mut s = ScramSaslServer::new(m, Arc::clone(&creds)).expect("rng");
        challenge(s.evaluate_response(good.as_bytes()));
    }
}

#[test]
fn unknown_user_and_wrong_proof_get_the_same_message() {
    let mut unknown = rfc_server();
    let e1 = unknown.evaluate_response(b"n,,n=nobody,r=abc").expect_err("unknown");
    let mut wrong = rfc_server();
    challenge(wrong.evaluate_response(RFC_CLIENT_FIRST.as_bytes()));
    let e2 = wrong.evaluate_response(with_proof(&[0u8; 32]).as_bytes()).expect_err("wrong");
    assert_eq!(e1, e2);
    assert!(!e1.0.contains("nobody"));
}

#[test]
fn credential_debug_shows_no_key_material() {
    let c =
        ScramCredential::from_password(ScramMechanism::Sha256, "pencil", vec![1, 2], iters(4096));
    let text = format!("{c:?}");
    assert_eq!(text, "ScramCredential(SCRAM-SHA-256, iterations=4096)");
    assert!(ScramCredential::from_keys(
        ScramMechanism::Sha512,
        vec![],
        c.stored_key.clone(),
        c.server_key.clone(),
        4096
    )
    .is_err());
}

/// Computed with Apache Kafka 4.1.2's `ScramFormatter` (kafka-clients jar):
/// password "pencil", salt "sediment-salt", 4096 iterations.
#[test]
fn keys_and_a_sha512_exchange_match_kafkas_scram_formatter() {
    let salt = b"sediment-salt".to_vec();
    for (m, stored, server) in [
        (
            ScramMechanism::Sha512,
            "KqXhQxbltadpCAE9MKR0fvTHMHPbv6JSk3MAsUC3Q4ENQyMmDbEGgAn6vpLI2fcA8tFEAzXCDF1BYejvynh4Sg==",
            "v535H9W+Ck+kbTUAEHfuIYmAMCTzFvkvyqjgf5DEZN+HrTTS8YyNS7lHO/ebNXe2UqZD1mBVp5Z9qsNdJxIa3w==",
        ),
        (
            ScramMechanism::Sha256,
            "pvtdyqSkntxOr3QpKGnatY8KX3ZzgtSPme9ss/M3Jrk=",
            "JxMooxEYprCABp0/XQMzu5/tkDof9TKb2wof2jcSLAA=",
        ),
    ] {
        let c = ScramCredential::from_password(m, "pencil", salt.clone(), iters(4096));
        assert_eq!((B64.encode(&c.stored_key), B64.encode(&c.server_key)), (stored.into(), server.into()));
    }
    let m = ScramMechanism::Sha512;
    let c = ScramCredential::from_password(m, "pencil", salt, iters(4096));
    let creds: Arc<dyn CredentialLookup> =
        Arc::new(Table([(("user".to_string(), m), c)].into_iter().collect()));
    let mut s = ScramSaslServer::with_server_nonce(m, creds, "servernonce".into());
    let sf = challenge(s.evaluate_response(b"n,,n=user,r=clientnonce"));
    assert_eq!(sf, "r=clientnonceservernonce,s=c2VkaW1lbnQtc2FsdA==,i=4096");
    let fin = "c=biws,r=clientnonceservernonce,p=SrBaaTY5zxxQm5c+A3LDv8BtRHp2ZwrP6z9y+KXsAIIwB8fA48qDcc0gedFRPF7YtY1YDEz0qSstoFPT3Vg68g==";
    match s.evaluate_response(fin.as_bytes()) {
        Ok(SaslStep::Complete { last, id }) => {
            assert_eq!(
                String::from_utf8(last).expect("ascii"),
                "v=tNb1MCna2h5LeUT2b55OpcD8fphuefGcTqRf0mGT0n0EGD1qWLO4LPKSIPKSSKoHlosi6R1ZR69M+t84B7LGDQ=="
            );
            assert_eq!(id.authorization_id(), "user");
        }
        other => panic!("expected completion, got {other:?}"),
    }
}

//! Any client-first and client-final bytes into a SCRAM-SHA-256 exchange
//! for a user that exists: refused or challenged, never a panic, and never
//! authenticated (a valid proof needs the password, which no input has).
#![no_main]

use std::num::NonZeroU32;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use sediment::security::sasl::scram::ScramSaslServer;
use sediment::security::sasl::scram_credential::{CredentialLookup, ScramCredential};
use sediment::security::sasl::{SaslServer, SaslStep, ScramMechanism};

struct One(ScramCredential);

impl CredentialLookup for One {
    fn lookup(&self, _user: &str, _m: ScramMechanism) -> Option<ScramCredential> {
        Some(self.0.clone())
    }
}

/// The user's credential, derived once (4096 PBKDF2 iterations per input
/// were most of the target's time).
fn credential() -> &'static Arc<One> {
    static ONE: OnceLock<Arc<One>> = OnceLock::new();
    ONE.get_or_init(|| {
        let n = NonZeroU32::new(4096).expect("non-zero");
        let m = ScramMechanism::Sha256;
        Arc::new(One(ScramCredential::from_password(
            m,
            "not-in-any-input-4f7c",
            b"salt".to_vec(),
            n,
        )))
    })
}

fuzz_target!(|tokens: (Vec<u8>, Vec<u8>)| {
    let m = ScramMechanism::Sha256;
    let mut s = ScramSaslServer::new(m, Arc::clone(credential()) as _).expect("rng");
    if let Ok(SaslStep::Challenge(_)) = s.evaluate_response(&tokens.0) {
        let step = s.evaluate_response(&tokens.1);
        assert!(
            !matches!(step, Ok(SaslStep::Complete { .. })),
            "authenticated without the password"
        );
    }
});

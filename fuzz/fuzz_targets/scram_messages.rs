//! Any client-first and client-final bytes into a SCRAM-SHA-256 exchange
//! for a user that exists: refused or challenged, never a panic, and never
//! authenticated (a valid proof needs the password, which no input has).
#![no_main]

use std::num::NonZeroU32;
use std::sync::Arc;

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

fuzz_target!(|tokens: (Vec<u8>, Vec<u8>)| {
    let m = ScramMechanism::Sha256;
    let n = NonZeroU32::new(4096).expect("non-zero");
    let c = ScramCredential::from_password(m, "not-in-any-input-4f7c", b"salt".to_vec(), n);
    let mut s = ScramSaslServer::new(m, Arc::new(One(c))).expect("rng");
    if let Ok(SaslStep::Challenge(_)) = s.evaluate_response(&tokens.0) {
        let step = s.evaluate_response(&tokens.1);
        assert!(
            !matches!(step, Ok(SaslStep::Complete { .. })),
            "authenticated without the password"
        );
    }
});

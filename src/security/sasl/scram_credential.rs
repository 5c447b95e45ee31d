//! SCRAM credentials as Kafka stores them (`ScramCredential`,
//! `UserScramCredentialRecord`): salt, StoredKey, ServerKey, iterations.
//!
//! Invariants:
//! * The password and the SaltedPassword are never kept: a credential is
//!   built from a SaltedPassword (what AlterUserScramCredentials carries) and
//!   only the two derived keys survive. `Debug` prints no key material.
//! * `stored_key` and `server_key` are exactly the mechanism's hash length;
//!   constructors refuse anything else, so the proof check never compares
//!   slices of different lengths.

use std::num::NonZeroU32;

use ring::{digest, hmac, pbkdf2};

/// The two SCRAM mechanisms, with Kafka's type numbers
/// (`ScramMechanism`: SCRAM-SHA-256 is 1, SCRAM-SHA-512 is 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

/// Kafka's minimum iterations for both mechanisms.
pub const MIN_ITERATIONS: u32 = 4096;
/// The most iterations AlterUserScramCredentials accepts (Kafka's
/// `ScramControlManager`).
pub const MAX_ITERATIONS: u32 = 16384;

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's wire number (`mechanism` in the SCRAM admin APIs).
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_kafka_type(t: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.kafka_type() == t)
    }

    /// Length of the hash, of StoredKey, ServerKey, proofs and signatures.
    pub fn key_len(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }

    fn hmac_alg(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac_alg(), key), data).as_ref().to_vec()
    }

    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        let alg = match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        };
        digest::digest(alg, data).as_ref().to_vec()
    }

    /// Hi(password, salt, i) of RFC 5802: PBKDF2 with this HMAC. The broker
    /// never calls it on a client's behalf; it serves tests and bootstrap.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: NonZeroU32) -> Vec<u8> {
        let alg = match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        };
        let mut out = vec![0u8; self.key_len()];
        pbkdf2::derive(alg, iterations, salt, password, &mut out);
        out
    }
}

/// One user's credential for one mechanism.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub mechanism: ScramMechanism,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScramCredential({}, iterations={})", self.mechanism.name(), self.iterations)
    }
}

impl ScramCredential {
    /// StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
    /// HMAC(SaltedPassword, "Server Key"). The caller drops the salted password.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: u32,
    ) -> Self {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        Self {
            mechanism,
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// From a stored form (the credential file); keys of the wrong length
    /// are refused.
    ///
    /// # Errors
    /// A key whose length is not the mechanism's hash length.
    pub fn from_keys(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
        iterations: u32,
    ) -> Result<Self, String> {
        let n = mechanism.key_len();
        if stored_key.len() != n || server_key.len() != n {
            return Err(format!("{} keys must be {n} bytes", mechanism.name()));
        }
        Ok(Self { mechanism, salt, stored_key, server_key, iterations })
    }

    /// From a password (tests and the bootstrap tool only).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: Vec<u8>,
        iterations: NonZeroU32,
    ) -> Self {
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        Self::from_salted_password(mechanism, salt, &salted, iterations.get())
    }
}

/// Where an exchange looks its user up (the credential store).
pub trait CredentialLookup: Send + Sync {
    fn lookup(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
}

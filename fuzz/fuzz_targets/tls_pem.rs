//! Any text as an SSL listener's PEM key store (`ssl.keystore.key`, a
//! PKCS#8 key, plain or encrypted with `ssl.key.password`, and
//! `ssl.keystore.certificate.chain`) and trust store
//! (`ssl.truststore.certificates`), loaded by the code a start and a
//! reload run (`tls::load`): a config or an error naming a key, never a
//! panic, and never an allocation the key's bytes do not bound (an
//! encrypted key's KDF parameters are bounded before it is decrypted). The
//! identity a reload reads from the leaf (or from any bytes as a DER
//! certificate) is an error or names the subject a client certificate's
//! principal is mapped from.
//!
//! Input: a flags byte (a key password; `ssl.client.auth=required`; one
//! cipher suite), then parts: the key, the chain, the trust store, the
//! password.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sediment::security::principal::subject_of;
use sediment::security::tls::{load, TlsSettings};
use sediment::security::tls_identity::identity;

/// The identity a reload compares, and the subject a client certificate
/// maps from, agree.
fn check_identity(der: &[u8]) {
    if let Ok(id) = identity(der) {
        assert_eq!(subject_of(der), Some(id.subject));
    }
}

fuzz_target!(|data: &[u8]| {
    let mut f = common::Fields(data);
    let flags = f.u8();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let key = text(f.part(1 << 14));
    let chain = text(f.part(1 << 14));
    let trust = text(f.part(1 << 14));
    let password = text(f.rest());
    let settings = TlsSettings {
        keystore_type: "PEM".into(),
        truststore_type: "PEM".into(),
        keystore_key: Some(key),
        keystore_certificate_chain: Some(chain.clone()),
        truststore_certificates: (!trust.is_empty()).then_some(trust),
        key_password: (flags & 1 != 0).then_some(password),
        client_auth: if flags & 2 != 0 { "required".into() } else { "none".into() },
        enabled_protocols: vec!["TLSv1.2".into(), "TLSv1.3".into()],
        cipher_suites: if flags & 4 != 0 { vec!["TLS_AES_128_GCM_SHA256".into()] } else { vec![] },
        ..TlsSettings::default()
    };
    if let Ok(loaded) = load(&settings) {
        check_identity(&loaded.leaf);
    }
    check_identity(chain.as_bytes());
});

//! An SSL listener's keys, with Kafka's PEM rules, turned into a rustls
//! `ServerConfig` (ring provider).
//!
//! Kafka's rules (`DefaultSslEngineFactory`), all checked before anything binds:
//! * `ssl.keystore.type` must be PEM here (Kafka's default JKS and PKCS12 are
//!   refused with the command that converts them). The key store is either
//!   `ssl.keystore.location`, one file holding the private key and the
//!   certificate chain, or the inline `ssl.keystore.key` with
//!   `ssl.keystore.certificate.chain`; never both, never a key without a
//!   chain. `ssl.keystore.password` must not be set with PEM.
//! * Exactly one private key, PKCS#8 (`BEGIN PRIVATE KEY`); PKCS#1 and SEC1
//!   keys do not work in Kafka either, and the error says how to convert.
//!   With `ssl.key.password` the key must be an encrypted PKCS#8 (`BEGIN
//!   ENCRYPTED PRIVATE KEY`, PBES2: what `openssl pkcs8 -topk8 -v2` writes)
//!   and is decrypted with it; without, it must not be encrypted. The key
//!   must match the leaf certificate.
//! * The trust store (`ssl.truststore.location` or the inline
//!   `ssl.truststore.certificates`, PEM, at least one certificate) is needed
//!   when `ssl.client.auth` is `requested` or `required`; given with `none`
//!   it is still loaded, so its errors show.
//! * Only TLSv1.2 and TLSv1.3 (`ssl.enabled.protocols`).
//!
//! A change of the key or trust store file is picked up by the listener's
//! reloader (`server::tls_reloader`), which builds the new config with
//! [`load`], the same code as at start, and installs it in the listener's
//! [`LiveTlsConfig`] only if it passes every rule here and the identity rule
//! of `tls_identity`.
//!
//! `ssl.client.auth`: `none` asks for no certificate; `requested` asks and
//! accepts a client without one (a certificate that is sent must verify);
//! `required` refuses a client without a valid certificate.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::ssl_configs::{
    SSL_CIPHER_SUITES, SSL_ENABLED_PROTOCOLS, SSL_KEYSTORE_CERTIFICATE_CHAIN, SSL_KEYSTORE_KEY,
    SSL_KEYSTORE_LOCATION, SSL_KEYSTORE_PASSWORD, SSL_KEYSTORE_TYPE, SSL_KEY_PASSWORD,
    SSL_TRUSTSTORE_CERTIFICATES, SSL_TRUSTSTORE_LOCATION, SSL_TRUSTSTORE_PASSWORD,
    SSL_TRUSTSTORE_TYPE,
};

/// A listener's TLS key, named as the operator wrote it.
#[derive(Debug, thiserror::Error)]
#[error("invalid config {key}: {reason}")]
pub struct TlsError {
    pub key: String,
    pub reason: String,
}

/// The SSL keys of one listener, each resolved (per-listener value first).
/// Holds secrets: deliberately not `Debug`.
#[derive(Default, Clone)]
pub struct TlsSettings {
    /// `listener.name.<l>.` when a key was given per listener, to name it in errors.
    pub prefix: String,
    /// The keys that were given with the prefix.
    pub prefixed: Vec<&'static str>,
    pub keystore_type: String,
    pub keystore_location: Option<String>,
    pub keystore_key: Option<String>,
    pub keystore_certificate_chain: Option<String>,
    pub keystore_password_set: bool,
    /// `ssl.key.password`: the key is an encrypted PKCS#8 (a secret).
    pub key_password: Option<String>,
    pub truststore_type: String,
    pub truststore_location: Option<String>,
    pub truststore_certificates: Option<String>,
    pub truststore_password_set: bool,
    pub client_auth: String,
    pub enabled_protocols: Vec<String>,
    /// `ssl.cipher.suites`: IANA names; empty means the provider's defaults.
    pub cipher_suites: Vec<String>,
}

impl TlsSettings {
    pub(super) fn error(&self, key: &'static str, reason: impl Into<String>) -> TlsError {
        let key = if self.prefixed.contains(&key) {
            format!("{}{key}", self.prefix)
        } else {
            key.to_string()
        };
        TlsError { key, reason: reason.into() }
    }
}

fn convert_hint(kind: &str) -> String {
    format!(
        "sediment reads PEM only (ssl.keystore.type=PEM, ssl.truststore.type=PEM); convert a {kind} \
         store with `openssl pkcs12 -in store.p12 -nodes -out store.pem` (a JKS store first with \
         `keytool -importkeystore -srckeystore store.jks -destkeystore store.p12 -deststoretype PKCS12`)"
    )
}

fn read_pem(
    s: &TlsSettings,
    location_key: &'static str,
    location: Option<&String>,
    inline: Option<&String>,
) -> Result<Option<Vec<u8>>, TlsError> {
    match (location, inline) {
        (Some(path), _) => std::fs::read(path)
            .map(Some)
            .map_err(|e| s.error(location_key, format!("cannot read {path}: {e}"))),
        (None, Some(text)) => Ok(Some(text.as_bytes().to_vec())),
        (None, None) => Ok(None),
    }
}

fn certificates(
    s: &TlsSettings,
    key: &'static str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
    let certs = certs.map_err(|e| s.error(key, format!("bad PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(s.error(key, "no certificate (BEGIN CERTIFICATE) found"));
    }
    Ok(certs)
}

/// The key store: the chain and its one PKCS#8 key.
pub(super) fn key_store(
    s: &TlsSettings,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    if s.keystore_type != "PEM" {
        return Err(s.error(SSL_KEYSTORE_TYPE.name, convert_hint(&s.keystore_type)));
    }
    if s.keystore_password_set {
        return Err(s.error(SSL_KEYSTORE_PASSWORD.name, "must not be set with a PEM key store"));
    }
    let loc = s.keystore_location.as_ref();
    let (key_text, chain_text) = (s.keystore_key.as_ref(), s.keystore_certificate_chain.as_ref());
    if loc.is_some() && (key_text.is_some() || chain_text.is_some()) {
        return Err(s.error(
            SSL_KEYSTORE_LOCATION.name,
            "set either a location or ssl.keystore.key and ssl.keystore.certificate.chain, not both",
        ));
    }
    let (key_pem, chain_pem, key_name, chain_name) =
        match (loc, key_text, chain_text) {
            (Some(path), _, _) => {
                let pem =
                    read_pem(s, SSL_KEYSTORE_LOCATION.name, Some(path), None)?.unwrap_or_default();
                (pem.clone(), pem, SSL_KEYSTORE_LOCATION.name, SSL_KEYSTORE_LOCATION.name)
            }
            (None, Some(k), Some(c)) => (
                k.as_bytes().to_vec(),
                c.as_bytes().to_vec(),
                SSL_KEYSTORE_KEY.name,
                SSL_KEYSTORE_CERTIFICATE_CHAIN.name,
            ),
            (None, Some(_), None) => {
                return Err(s.error(SSL_KEYSTORE_KEY.name, "needs ssl.keystore.certificate.chain"))
            }
            (None, None, Some(_)) => {
                return Err(s.error(SSL_KEYSTORE_CERTIFICATE_CHAIN.name, "needs ssl.keystore.key"))
            }
            (None, None, None) => return Err(s.error(
                SSL_KEYSTORE_LOCATION.name,
                "an SSL listener needs a key store: ssl.keystore.location, or ssl.keystore.key \
                 and ssl.keystore.certificate.chain",
            )),
        };
    let text = String::from_utf8_lossy(&key_pem);
    for other in ["RSA PRIVATE KEY", "EC PRIVATE KEY", "DSA PRIVATE KEY"] {
        if text.contains(&format!("-----BEGIN {other}-----")) {
            return Err(s.error(
                key_name,
                format!(
                    "a {other} (not PKCS#8) key: Kafka reads PKCS#8 only; convert with \
                     `openssl pkcs8 -topk8 -nocrypt -in key.pem -out key-pkcs8.pem`"
                ),
            ));
        }
    }
    let key = private_key(s, key_name, &key_pem)?;
    let chain = certificates(s, chain_name, &chain_pem)?;
    Ok((chain, PrivateKeyDer::Pkcs8(key)))
}

const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// The one PKCS#8 key of `pem`: plain (`BEGIN PRIVATE KEY`) without
/// `ssl.key.password`, encrypted (`BEGIN ENCRYPTED PRIVATE KEY`, PBES2) and
/// decrypted with it otherwise, as Kafka's `PemStore` reads it.
fn private_key(
    s: &TlsSettings,
    key_name: &'static str,
    pem: &[u8],
) -> Result<PrivatePkcs8KeyDer<'static>, TlsError> {
    let text = String::from_utf8_lossy(pem);
    let encrypted: Vec<&str> = text
        .split(ENCRYPTED_BEGIN)
        .skip(1)
        .map(|rest| rest.split(ENCRYPTED_END).next().unwrap_or_default())
        .collect();
    let plain: Result<Vec<_>, _> = PrivatePkcs8KeyDer::pem_slice_iter(pem).collect();
    let plain = plain.map_err(|e| s.error(key_name, format!("bad PEM private key: {e}")))?;
    let found = plain.len() + encrypted.len();
    if found != 1 {
        return Err(s.error(
            key_name,
            format!("exactly one private key (BEGIN PRIVATE KEY or BEGIN ENCRYPTED PRIVATE KEY) is needed, found {found}"),
        ));
    }
    match (s.key_password.as_deref(), plain.into_iter().next(), encrypted.first()) {
        (None, Some(key), _) => Ok(key),
        (None, None, _) => Err(s.error(key_name, "the private key is encrypted: set ssl.key.password")),
        (Some(_), Some(_), _) => Err(s.error(
            SSL_KEY_PASSWORD.name,
            "is set but the private key is not encrypted (BEGIN PRIVATE KEY); Kafka reads such a key only without a password",
        )),
        (Some(password), None, Some(body)) => decrypt(s, key_name, body, password),
        (Some(_), None, None) => Err(s.error(key_name, "no private key found")),
    }
}

/// Decrypt the base64 body of an `ENCRYPTED PRIVATE KEY` block.
fn decrypt(
    s: &TlsSettings,
    key_name: &'static str,
    body: &str,
    password: &str,
) -> Result<PrivatePkcs8KeyDer<'static>, TlsError> {
    use base64::Engine;
    let b64: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| s.error(key_name, format!("bad PEM encrypted private key: {e}")))?;
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
        .map_err(|e| s.error(key_name, format!("bad encrypted private key: {e}")))?;
    kdf_within_bounds(&info.encryption_algorithm)
        .map_err(|reason| s.error(key_name, format!("bad encrypted private key: {reason}")))?;
    // A wrong password and a damaged key are one error: PBES2 cannot tell.
    let document = info.decrypt(password.as_bytes()).map_err(|e| {
        s.error(SSL_KEY_PASSWORD.name, format!("could not decrypt the private key ({e}); PBES2 keys (openssl pkcs8 -topk8 -v2 aes-256-cbc) are read"))
    })?;
    Ok(PrivatePkcs8KeyDer::from(document.as_bytes().to_vec()))
}

/// Most PBKDF2 iterations an encrypted key may ask for: openssl writes
/// 2048 and Java 10,000 (about a second of work here at this bound).
const MAX_PBKDF2_ITERATIONS: u32 = 1 << 20;
/// Most memory scrypt may take to decrypt a key (128 * r * N bytes; openssl
/// writes N = 16384, r = 8: 16 MiB), and the most passes (p) over it.
const MAX_SCRYPT_MEMORY: u64 = 256 << 20;
const MAX_SCRYPT_PARALLELIZATION: u16 = 16;

/// Refuse key derivation parameters that would take more time or memory
/// than a key file can justify, before anything is derived: the key's
/// bytes alone choose them (an scrypt N of 2^40 asked for a petabyte, and
/// an N of 0 panicked the pkcs5 crate's parameter check).
fn kdf_within_bounds(scheme: &pkcs8::pkcs5::EncryptionScheme<'_>) -> Result<(), String> {
    use pkcs8::pkcs5::pbes2::Kdf;
    let pkcs8::pkcs5::EncryptionScheme::Pbes2(params) = scheme else {
        return Ok(());
    };
    match &params.kdf {
        Kdf::Pbkdf2(p) if p.iteration_count > MAX_PBKDF2_ITERATIONS => Err(format!(
            "PBKDF2 with {} iterations (at most {MAX_PBKDF2_ITERATIONS} are read)",
            p.iteration_count
        )),
        Kdf::Scrypt(p) => {
            let n = p.cost_parameter;
            let memory = 128u64.saturating_mul(u64::from(p.block_size)).saturating_mul(n);
            if n < 2 || !n.is_power_of_two() || p.block_size == 0 || p.parallelization == 0 {
                Err(format!("scrypt with N={n}, r={}, p={}", p.block_size, p.parallelization))
            } else if memory > MAX_SCRYPT_MEMORY || p.parallelization > MAX_SCRYPT_PARALLELIZATION {
                Err(format!(
                    "scrypt with N={n}, r={}, p={} needs more than {} MiB or {MAX_SCRYPT_PARALLELIZATION} passes",
                    p.block_size,
                    p.parallelization,
                    MAX_SCRYPT_MEMORY >> 20
                ))
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

/// The trust store, if one is configured.
pub(super) fn trust_store(s: &TlsSettings) -> Result<Option<RootCertStore>, TlsError> {
    let loc = s.truststore_location.as_ref();
    let inline = s.truststore_certificates.as_ref();
    if loc.is_none() && inline.is_none() {
        return Ok(None);
    }
    if s.truststore_type != "PEM" {
        return Err(s.error(SSL_TRUSTSTORE_TYPE.name, convert_hint(&s.truststore_type)));
    }
    if s.truststore_password_set {
        return Err(s.error(SSL_TRUSTSTORE_PASSWORD.name, "must not be set with a PEM trust store"));
    }
    if loc.is_some() && inline.is_some() {
        return Err(s.error(
            SSL_TRUSTSTORE_LOCATION.name,
            "set either a location or ssl.truststore.certificates, not both",
        ));
    }
    let key =
        if loc.is_some() { SSL_TRUSTSTORE_LOCATION.name } else { SSL_TRUSTSTORE_CERTIFICATES.name };
    let pem = read_pem(s, SSL_TRUSTSTORE_LOCATION.name, loc, inline)?.unwrap_or_default();
    let mut roots = RootCertStore::empty();
    for cert in certificates(s, key, &pem)? {
        roots.add(cert).map_err(|e| s.error(key, format!("unusable CA certificate: {e}")))?;
    }
    Ok(Some(roots))
}

pub(super) fn versions(
    s: &TlsSettings,
) -> Result<Vec<&'static SupportedProtocolVersion>, TlsError> {
    let mut out = Vec::new();
    for p in &s.enabled_protocols {
        out.push(match p.as_str() {
            "TLSv1.2" => &rustls::version::TLS12,
            "TLSv1.3" => &rustls::version::TLS13,
            other => {
                return Err(s.error(SSL_ENABLED_PROTOCOLS.name, format!("{other} is not supported")))
            }
        });
    }
    if out.is_empty() {
        return Err(s.error(SSL_ENABLED_PROTOCOLS.name, "no TLS version enabled"));
    }
    Ok(out)
}

/// The IANA name of a suite (Kafka's, from Java): rustls writes the TLS 1.3
/// suites `TLS13_...` where IANA writes `TLS_...`.
fn iana_name(suite: rustls::SupportedCipherSuite) -> String {
    let name =
        suite.suite().as_str().map_or_else(|| format!("{:?}", suite.suite()), str::to_string);
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

/// The ring provider, its suites limited to `ssl.cipher.suites` when set.
pub(super) fn provider(s: &TlsSettings) -> Result<CryptoProvider, TlsError> {
    let mut provider = rustls::crypto::ring::default_provider();
    if s.cipher_suites.is_empty() {
        return Ok(provider);
    }
    let known = provider.cipher_suites.clone();
    let mut chosen = Vec::new();
    for name in &s.cipher_suites {
        let suite = known.iter().copied().find(|k| iana_name(*k) == *name).ok_or_else(|| {
            let names: Vec<String> = known.iter().map(|k| iana_name(*k)).collect();
            s.error(SSL_CIPHER_SUITES.name, format!("{name} is not one of {}", names.join(", ")))
        })?;
        chosen.push(suite);
    }
    provider.cipher_suites = chosen;
    Ok(provider)
}

/// A listener's `ServerConfig` and the leaf certificate it serves (what a
/// reload compares the new one with).
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Arc<ServerConfig>,
    pub leaf: CertificateDer<'static>,
}

/// The TLS config a listener serves now. The reloader replaces it whole;
/// each handshake takes the one current at its accept, so a connection keeps
/// the config it started with and a replacement never touches open sessions.
#[derive(Debug)]
pub struct LiveTlsConfig(parking_lot::RwLock<Loaded>);

impl LiveTlsConfig {
    pub fn new(loaded: Loaded) -> Self {
        Self(parking_lot::RwLock::new(loaded))
    }

    /// The config for a new connection.
    pub fn current(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.0.read().config)
    }

    pub fn loaded(&self) -> Loaded {
        self.0.read().clone()
    }

    pub fn replace(&self, loaded: Loaded) {
        *self.0.write() = loaded;
    }
}

/// Build the listener's `ServerConfig` (the rules of the module doc).
///
/// # Errors
/// The first rule broken, naming its key.
pub fn server_config(s: &TlsSettings) -> Result<Arc<ServerConfig>, TlsError> {
    load(s).map(|l| l.config)
}

/// [`server_config`] with the leaf certificate it serves.
///
/// # Errors
/// The first rule broken, naming its key.
pub fn load(s: &TlsSettings) -> Result<Loaded, TlsError> {
    let provider = Arc::new(provider(s)?);
    let (chain, key) = key_store(s)?;
    let leaf = chain[0].clone();
    let roots = trust_store(s)?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions(s)?)
        .map_err(|e| s.error(SSL_ENABLED_PROTOCOLS.name, e.to_string()))?;
    let builder = match (s.client_auth.as_str(), roots) {
        ("none", _) => builder.with_no_client_auth(),
        (_, None) => {
            return Err(s.error(
                SSL_TRUSTSTORE_LOCATION.name,
                format!("ssl.client.auth={} needs a trust store", s.client_auth),
            ))
        }
        (mode, Some(roots)) => {
            let verifier = client_verifier(roots, provider, mode == "requested")
                .map_err(|e| s.error(SSL_TRUSTSTORE_LOCATION.name, e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        let key = if s.keystore_location.is_some() {
            SSL_KEYSTORE_LOCATION.name
        } else {
            SSL_KEYSTORE_KEY.name
        };
        s.error(key, format!("the key and the certificate chain do not work together: {e}"))
    })?;
    Ok(Loaded { config: Arc::new(config), leaf })
}

fn client_verifier(
    roots: RootCertStore,
    provider: Arc<CryptoProvider>,
    optional: bool,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, rustls::server::VerifierBuilderError>
{
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    if optional {
        builder.allow_unauthenticated().build()
    } else {
        builder.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An encrypted PKCS#8 key (AES-256-CBC, zeros for data) whose KDF is
    /// `kdf`: made by hand, as only a damaged or hostile file has these.
    fn key_with(kdf: &str) -> String {
        let body = match kdf {
            "scrypt N=0" => "MIGCME4GCSqGSIb3DQEFDTBBMCAGCSsGAQQB2kcECzATBAhzYWx0c2FsdAIBAAIBCAIBATAdBglghkgBZQMEASoEEAEBAQEBAQEBAQEBAQEBAQEEMAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
            "scrypt N=2^40" => "MIGHMFMGCSqGSIb3DQEFDTBGMCUGCSsGAQQB2kcECzAYBAhzYWx0c2FsdAIGAQAAAAAAAgEIAgEBMB0GCWCGSAFlAwQBKgQQAQEBAQEBAQEBAQEBAQEBAQQwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "pbkdf2 4e9" => "MIGOMFoGCSqGSIb3DQEFDTBNMCwGCSqGSIb3DQEFDDAfBAhzYWx0c2FsdAIFAO5rKAAwDAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEAEBAQEBAQEBAQEBAQEBAQEEMAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
            "scrypt N=1024" => "MIGDME8GCSqGSIb3DQEFDTBCMCEGCSsGAQQB2kcECzAUBAhzYWx0c2FsdAICBAACAQgCAQEwHQYJYIZIAWUDBAEqBBABAQEBAQEBAQEBAQEBAQEBBDAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            "pbkdf2 2048" => "MIGLMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAhzYWx0c2FsdAICCAAwDAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEAEBAQEBAQEBAQEBAQEBAQEEMAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
            other => panic!("{other}"),
        };
        format!("{ENCRYPTED_BEGIN}\n{body}\n{ENCRYPTED_END}\n")
    }

    fn load_key(kdf: &str) -> TlsError {
        let s = TlsSettings {
            keystore_type: "PEM".into(),
            keystore_key: Some(key_with(kdf)),
            keystore_certificate_chain: Some("not read: the key fails first".into()),
            key_password: Some("pw".into()),
            client_auth: "none".into(),
            enabled_protocols: vec!["TLSv1.3".into()],
            ..TlsSettings::default()
        };
        load(&s).expect_err("a key of zeros does not load")
    }

    /// Found by the tls_pem fuzz target's properties on inputs made by hand:
    /// an scrypt N of 0 panicked in the pkcs5 crate, one of 2^40 aborted on
    /// a petabyte allocation, 4e9 PBKDF2 iterations took hours.
    #[test]
    fn kdf_parameters_past_the_bounds_are_refused_before_deriving() {
        for (kdf, reason) in [
            ("scrypt N=0", "scrypt with N=0"),
            ("scrypt N=2^40", "scrypt with N=1099511627776, r=8, p=1 needs more than 256 MiB"),
            ("pbkdf2 4e9", "PBKDF2 with 4000000000 iterations"),
        ] {
            let e = load_key(kdf);
            assert_eq!(e.key, SSL_KEYSTORE_KEY.name, "{kdf}: {e}");
            assert!(e.reason.contains(reason), "{kdf}: {e}");
        }
        // Within the bounds, the key is derived and the data (zeros) fails to decrypt.
        for kdf in ["scrypt N=1024", "pbkdf2 2048"] {
            let e = load_key(kdf);
            assert_eq!(e.key, SSL_KEY_PASSWORD.name, "{kdf}: {e}");
        }
    }
}

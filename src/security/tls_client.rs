//! The TLS client side of the inter-broker listener: what this broker
//! presents and checks when it connects to another broker's SSL or SASL_SSL
//! listener (`cluster::channel_security`), from the same keys as the
//! listener it serves, with Kafka's rules:
//! * the other broker's certificate chain must verify against the
//!   listener's trust store (required here: sediment carries no system
//!   roots), and its name must match the host it was reached at unless
//!   `ssl.endpoint.identification.algorithm` is empty (Kafka's default,
//!   `https`, checks it);
//! * the listener's key store, when it has one, is offered as the client
//!   certificate, for peers with `ssl.client.auth=required`;
//! * `ssl.enabled.protocols` and `ssl.cipher.suites` bound the handshake as
//!   they bound the server's.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};

use super::ssl_configs::{SSL_ENABLED_PROTOCOLS, SSL_KEYSTORE_LOCATION, SSL_TRUSTSTORE_LOCATION};
use super::tls::{key_store, provider, trust_store, versions, TlsError, TlsSettings};

/// The client config of a listener whose keys are `s`; `verify_hostname`
/// is `ssl.endpoint.identification.algorithm=https`.
///
/// # Errors
/// No trust store, or a key or store that does not load (named).
pub fn client_config(
    s: &TlsSettings,
    verify_hostname: bool,
) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = Arc::new(provider(s)?);
    let roots = trust_store(s)?.ok_or_else(|| {
        s.error(
            SSL_TRUSTSTORE_LOCATION.name,
            "the inter-broker listener checks the other brokers' certificates against a trust \
             store: set ssl.truststore.location or ssl.truststore.certificates",
        )
    })?;
    let verifier =
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
            .build()
            .map_err(|e| s.error(SSL_TRUSTSTORE_LOCATION.name, e.to_string()))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(s)?)
        .map_err(|e| s.error(SSL_ENABLED_PROTOCOLS.name, e.to_string()))?;
    let builder = if verify_hostname {
        builder.with_webpki_verifier(verifier)
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyHostName(verifier)))
    };
    let has_key_store = s.keystore_location.is_some() || s.keystore_key.is_some();
    let config = if has_key_store {
        let (chain, key) = key_store(s)?;
        builder.with_client_auth_cert(chain, key).map_err(|e| {
            s.error(SSL_KEYSTORE_LOCATION.name, format!("unusable as a client certificate: {e}"))
        })?
    } else {
        builder.with_no_client_auth()
    };
    Ok(Arc::new(config))
}

/// The web PKI checks without the name check
/// (`ssl.endpoint.identification.algorithm=`): the chain must still verify
/// against the trust store; only a certificate valid for another name passes.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let checked =
            self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match checked {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

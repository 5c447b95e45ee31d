//! The keys of SSL listeners (Kafka's `SslConfigs`), each also settable for
//! one listener as `listener.name.<listener>.<key>`; `config::listeners`
//! resolves them per listener into [`super::tls::TlsSettings`], and
//! [`super::tls`] names them in its errors.

use crate::config_def::{broker_key, ConfigDef, ConfigTable};

pub const SSL_KEYSTORE_TYPE: ConfigDef = broker_key!("ssl.keystore.type", String, "JKS", None, &["JKS", "PKCS12", "PEM"],
    "format of an SSL listener's key store; sediment reads PEM only (JKS and PKCS12 are refused with the command that converts them)");
pub const SSL_KEYSTORE_LOCATION: ConfigDef = broker_key!(
    "ssl.keystore.location",
    String,
    "",
    None,
    "PEM file holding an SSL listener's private key (PKCS#8) and certificate chain"
);
pub const SSL_KEYSTORE_KEY: ConfigDef = broker_key!(
    "ssl.keystore.key",
    Password,
    "",
    None,
    "the private key in PEM, given inline instead of ssl.keystore.location (secret)"
);
pub const SSL_KEYSTORE_CERTIFICATE_CHAIN: ConfigDef = broker_key!(
    "ssl.keystore.certificate.chain",
    Password,
    "",
    None,
    "the certificate chain in PEM, given inline with ssl.keystore.key"
);
pub const SSL_KEYSTORE_PASSWORD: ConfigDef = broker_key!(
    "ssl.keystore.password",
    Password,
    "",
    None,
    "password of a JKS or PKCS12 key store; must not be set with PEM (secret)"
);
pub const SSL_KEY_PASSWORD: ConfigDef = broker_key!("ssl.key.password", Password, "", None, "password of the key store's encrypted PKCS#8 private key (BEGIN ENCRYPTED PRIVATE KEY) (secret)");
pub const SSL_TRUSTSTORE_TYPE: ConfigDef = broker_key!(
    "ssl.truststore.type",
    String,
    "JKS",
    None,
    &["JKS", "PKCS12", "PEM"],
    "format of the trust store that checks client certificates; sediment reads PEM only"
);
pub const SSL_TRUSTSTORE_LOCATION: ConfigDef = broker_key!(
    "ssl.truststore.location",
    String,
    "",
    None,
    "PEM file of the CA certificates that client certificates must chain to"
);
pub const SSL_TRUSTSTORE_CERTIFICATES: ConfigDef = broker_key!(
    "ssl.truststore.certificates",
    Password,
    "",
    None,
    "the trusted CA certificates in PEM, given inline instead of ssl.truststore.location"
);
pub const SSL_TRUSTSTORE_PASSWORD: ConfigDef = broker_key!(
    "ssl.truststore.password",
    Password,
    "",
    None,
    "password of a JKS or PKCS12 trust store; must not be set with PEM (secret)"
);
pub const SSL_CLIENT_AUTH: ConfigDef = broker_key!(
    "ssl.client.auth",
    String,
    "none",
    None,
    &["required", "requested", "none"],
    "whether an SSL listener asks clients for a certificate"
);
pub const SSL_ENABLED_PROTOCOLS: ConfigDef = broker_key!(
    "ssl.enabled.protocols",
    List,
    "TLSv1.2,TLSv1.3",
    None,
    &["TLSv1.2", "TLSv1.3"],
    "TLS versions an SSL listener accepts"
);
pub const SSL_CIPHER_SUITES: ConfigDef = broker_key!("ssl.cipher.suites", List, "", None,
    "TLS cipher suites an SSL listener offers, by IANA name (TLS_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, ...); empty: rustls's defaults");
pub const SSL_PROTOCOL: ConfigDef = broker_key!(
    "ssl.protocol",
    String,
    "TLSv1.3",
    None,
    &["TLS", "TLSv1.2", "TLSv1.3"],
    "accepted for compatibility with Kafka: the highest of ssl.enabled.protocols is negotiated"
);
pub const SSL_HANDSHAKE_TIMEOUT_MS: ConfigDef = broker_key!(
    "ssl.handshake.timeout.ms",
    Long,
    "10000",
    Some(1.0),
    "sediment: how long an SSL listener waits for a client to finish the TLS handshake"
);
pub const SSL_ALLOW_DN_CHANGES: ConfigDef = broker_key!(
    "ssl.allow.dn.changes",
    Boolean,
    "false",
    None,
    "whether a reloaded key store may serve a certificate with another subject DN"
);
pub const SSL_ALLOW_SAN_CHANGES: ConfigDef = broker_key!(
    "ssl.allow.san.changes",
    Boolean,
    "false",
    None,
    "whether a reloaded key store may serve a certificate with other subject alternative names"
);
pub const SSL_RELOAD_INTERVAL_MS: ConfigDef = broker_key!("ssl.reload.interval.ms", Long, "5000", Some(0.0),
    "sediment: how often an SSL listener's key and trust store files are checked for changes (0: never)");
pub const SSL_PRINCIPAL_MAPPING_RULES: ConfigDef = broker_key!("ssl.principal.mapping.rules", String, "DEFAULT", None,
    "how a client certificate's subject becomes the principal: DEFAULT (the RFC 2253 subject) and RULE:<pattern>/<replacement>/[LU] rules, comma separated, first that applies wins");
pub const SSL_ENDPOINT_IDENTIFICATION_ALGORITHM: ConfigDef =
    broker_key!("ssl.endpoint.identification.algorithm", String, "https", None,
    "accepted for compatibility with Kafka: a client-side host name check, no effect on a broker");

pub const SSL_CONFIGS: ConfigTable = ConfigTable {
    title: "SSL",
    note: "Keys of SSL listeners; each may also be set for one listener as\n# listener.name.<lower-case listener name>.<key>. Secrets are never printed.",
    keys: &[&SSL_KEYSTORE_TYPE, &SSL_KEYSTORE_LOCATION, &SSL_KEYSTORE_KEY, &SSL_KEYSTORE_CERTIFICATE_CHAIN, &SSL_KEYSTORE_PASSWORD, &SSL_KEY_PASSWORD, &SSL_TRUSTSTORE_TYPE, &SSL_TRUSTSTORE_LOCATION, &SSL_TRUSTSTORE_CERTIFICATES, &SSL_TRUSTSTORE_PASSWORD, &SSL_CLIENT_AUTH, &SSL_ENABLED_PROTOCOLS, &SSL_CIPHER_SUITES, &SSL_PROTOCOL, &SSL_HANDSHAKE_TIMEOUT_MS, &SSL_ALLOW_DN_CHANGES, &SSL_ALLOW_SAN_CHANGES, &SSL_RELOAD_INTERVAL_MS, &SSL_PRINCIPAL_MAPPING_RULES, &SSL_ENDPOINT_IDENTIFICATION_ALGORITHM],
};

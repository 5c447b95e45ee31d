//! Kafka's listener keys: `listeners`, `advertised.listeners`,
//! `listener.security.protocol.map` and the per-listener family
//! `listener.name.<name>.<key>`.
//!
//! Rules (Kafka's, checked across keys by [`resolve`] once every key is set):
//! * `listeners` is a comma-separated list of `NAME://host:port`; names are
//!   unique after upper-casing (Kafka's `ListenerName.normalised`); an empty
//!   host binds every interface; port 0 takes any free port.
//! * Every name maps to a protocol through `listener.security.protocol.map`,
//!   whose default maps PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL to
//!   themselves.
//! * `advertised.listeners` names a subset of `listeners`; a listener missing
//!   from it advertises its own host (`localhost` when it binds every
//!   interface) and the port it bound.
//! * Two listeners may not bind the same non-zero port.
//! * `listener.name.<lower-case name>.<key>` overrides `<key>` for one
//!   listener; the key must be one that Kafka allows per listener, and the
//!   name must be a configured listener's.
//!
//! sediment adds one rule of its own: a listener name is letters, digits,
//! `_` and `-` (a dot would make `listener.name.` keys ambiguous). All four
//! protocols are served. An SSL or SASL_SSL listener's keys are resolved per
//! listener ([`tls_settings`]) and its TLS config is built by
//! `BrokerConfig::check`, as are a SASL listener's mechanisms
//! (`config::sasl`), so a bad key file or mechanism fails `check-config` and
//! the start alike.

use std::collections::BTreeMap;

use super::broker_defs::{ADVERTISED_LISTENERS, LISTENERS, LISTENER_SECURITY_PROTOCOL_MAP};
use super::{invalid, BrokerConfig, ConfigError, Listener};
use crate::config_def::ConfigValues;
use crate::security::ssl_configs::{
    SSL_ALLOW_DN_CHANGES, SSL_ALLOW_SAN_CHANGES, SSL_CIPHER_SUITES, SSL_CLIENT_AUTH,
    SSL_ENABLED_PROTOCOLS, SSL_HANDSHAKE_TIMEOUT_MS, SSL_KEYSTORE_CERTIFICATE_CHAIN,
    SSL_KEYSTORE_KEY, SSL_KEYSTORE_LOCATION, SSL_KEYSTORE_PASSWORD, SSL_KEYSTORE_TYPE,
    SSL_KEY_PASSWORD, SSL_PRINCIPAL_MAPPING_RULES, SSL_RELOAD_INTERVAL_MS,
    SSL_TRUSTSTORE_CERTIFICATES, SSL_TRUSTSTORE_LOCATION, SSL_TRUSTSTORE_PASSWORD,
    SSL_TRUSTSTORE_TYPE,
};
use crate::security::tls::TlsSettings;
use crate::security::SecurityProtocol;

/// Kafka's default `listener.security.protocol.map`.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// The prefix of the per-listener keys.
pub const LISTENER_PREFIX: &str = "listener.name.";

/// One listener to bind, with its protocol resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    /// Upper case.
    pub name: String,
    pub protocol: SecurityProtocol,
    /// Empty: every interface.
    pub host: String,
    pub port: u16,
}

/// One `NAME://host:port` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointEntry {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// Parse a listener list (`listeners` or `advertised.listeners`).
///
/// # Errors
/// An entry without `://` or a port, a bad port, a bad or repeated name,
/// naming `key`.
pub fn parse_endpoints(key: &str, value: &str) -> Result<Vec<EndpointEntry>, ConfigError> {
    let mut out: Vec<EndpointEntry> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, rest) = entry
            .split_once("://")
            .ok_or_else(|| invalid(key, format!("{entry:?} is not NAME://host:port")))?;
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(invalid(
                key,
                format!("{entry:?}: a listener name is letters, digits, '_' and '-'"),
            ));
        }
        let name = name.to_ascii_uppercase();
        let (host, port) =
            rest.rsplit_once(':').ok_or_else(|| invalid(key, format!("{entry:?} has no port")))?;
        let port = port.parse::<u16>().map_err(|_| invalid(key, format!("{entry:?}: bad port")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        if out.iter().any(|e| e.name == name) {
            return Err(invalid(key, format!("listener name {name} appears twice")));
        }
        out.push(EndpointEntry { name, host, port });
    }
    Ok(out)
}

/// Parse `listener.security.protocol.map` (`NAME:PROTOCOL,...`).
///
/// # Errors
/// An entry without `:`, an unknown protocol, a repeated name.
pub fn parse_protocol_map(
    key: &str,
    value: &str,
) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let mut out = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, protocol) = entry
            .split_once(':')
            .ok_or_else(|| invalid(key, format!("{entry:?} is not NAME:PROTOCOL")))?;
        let protocol = SecurityProtocol::from_name(protocol.trim()).ok_or_else(|| {
            invalid(
                key,
                format!(
                    "{entry:?}: unknown security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
                ),
            )
        })?;
        let name = name.trim().to_ascii_uppercase();
        if out.insert(name.clone(), protocol).is_some() {
            return Err(invalid(key, format!("listener name {name} is mapped twice")));
        }
    }
    Ok(out)
}

/// Split `listener.name.<name>.<key>` into the lower-case name and the key.
pub fn split_listener_key(key: &str) -> Option<(&str, &str)> {
    key.strip_prefix(LISTENER_PREFIX)?.split_once('.')
}

/// The listeners of `config`, checked across keys (the rules of the module doc).
///
/// # Errors
/// The first rule broken, naming the key.
pub fn resolve(config: &BrokerConfig) -> Result<Vec<ListenerConfig>, ConfigError> {
    let value = config.value(&LISTENERS).to_string();
    let entries = parse_endpoints(LISTENERS.name, &value)?;
    if entries.is_empty() {
        return Err(invalid(LISTENERS.name, "at least one listener is needed"));
    }
    let controllers = config.controller_listener_names();
    if entries.iter().all(|e| controllers.contains(&e.name)) {
        return Err(invalid(LISTENERS.name, "every listener is a controller listener (controller.listener.names); at least one broker listener is needed"));
    }
    let map_value = config.value(&LISTENER_SECURITY_PROTOCOL_MAP).to_string();
    let map = parse_protocol_map(LISTENER_SECURITY_PROTOCOL_MAP.name, &map_value)?;
    // KRaft controller listeners are not opened: sediment is its own controller.
    let mut out: Vec<ListenerConfig> = Vec::new();
    for e in entries.into_iter().filter(|e| !controllers.contains(&e.name)) {
        let protocol = *map.get(&e.name).ok_or_else(|| {
            invalid(
                LISTENER_SECURITY_PROTOCOL_MAP.name,
                format!("listener {} has no security protocol; add {}:PLAINTEXT", e.name, e.name),
            )
        })?;
        if e.port != 0 {
            if let Some(other) = out.iter().find(|o| o.port == e.port) {
                return Err(invalid(
                    LISTENERS.name,
                    format!("listeners {} and {} both use port {}", other.name, e.name, e.port),
                ));
            }
        }
        out.push(ListenerConfig { name: e.name, protocol, host: e.host, port: e.port });
    }
    if let Some(adv) = config.explicit_value(&ADVERTISED_LISTENERS) {
        for a in parse_endpoints(ADVERTISED_LISTENERS.name, adv)? {
            if !out.iter().any(|l| l.name == a.name) && !controllers.contains(&a.name) {
                return Err(invalid(
                    ADVERTISED_LISTENERS.name,
                    format!("{} is not a listener of `listeners`", a.name),
                ));
            }
        }
    }
    for key in config.explicit_keys().keys() {
        if let Some((name, _)) = split_listener_key(key) {
            let controller = controllers.iter().any(|c| c.to_lowercase() == name);
            if !controller && !out.iter().any(|l| l.name.to_lowercase() == name) {
                return Err(invalid(
                    key,
                    format!(
                        "no listener named {} (the name is written in lower case)",
                        name.to_uppercase()
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// The value of `key` for one listener: `listener.name.<lower-case name>.<key>`
/// when set, else the broker-wide value (or its default); and whether it was
/// the per-listener one.
pub fn listener_value(config: &BrokerConfig, listener: &str, key: &str) -> (Option<String>, bool) {
    let prefixed = format!("{LISTENER_PREFIX}{}.{key}", listener.to_lowercase());
    match config.explicit(&prefixed) {
        Some(v) => (Some(v.to_string()), true),
        None => (config.get(key), false),
    }
}

/// The SSL keys of `listener`, each resolved per listener.
pub fn tls_settings(config: &BrokerConfig, listener: &str) -> TlsSettings {
    let mut s = TlsSettings {
        prefix: format!("{LISTENER_PREFIX}{}.", listener.to_lowercase()),
        ..TlsSettings::default()
    };
    let mut get = |key: &'static str| {
        let (v, prefixed) = listener_value(config, listener, key);
        if prefixed {
            s.prefixed.push(key);
        }
        v.filter(|v| !v.trim().is_empty())
    };
    let keystore_type = get(SSL_KEYSTORE_TYPE.name).unwrap_or_default();
    let keystore_location = get(SSL_KEYSTORE_LOCATION.name);
    let keystore_key = get(SSL_KEYSTORE_KEY.name);
    let keystore_certificate_chain = get(SSL_KEYSTORE_CERTIFICATE_CHAIN.name);
    let keystore_password_set = get(SSL_KEYSTORE_PASSWORD.name).is_some();
    let key_password = get(SSL_KEY_PASSWORD.name);
    let truststore_type = get(SSL_TRUSTSTORE_TYPE.name).unwrap_or_default();
    let truststore_location = get(SSL_TRUSTSTORE_LOCATION.name);
    let truststore_certificates = get(SSL_TRUSTSTORE_CERTIFICATES.name);
    let truststore_password_set = get(SSL_TRUSTSTORE_PASSWORD.name).is_some();
    let client_auth = get(SSL_CLIENT_AUTH.name).unwrap_or_else(|| "none".into());
    let list = |v: Option<String>| -> Vec<String> {
        v.unwrap_or_default()
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect()
    };
    let enabled_protocols = list(get(SSL_ENABLED_PROTOCOLS.name));
    let cipher_suites = list(get(SSL_CIPHER_SUITES.name));
    TlsSettings {
        keystore_type,
        keystore_location,
        keystore_key,
        keystore_certificate_chain,
        keystore_password_set,
        key_password,
        truststore_type,
        truststore_location,
        truststore_certificates,
        truststore_password_set,
        client_auth,
        enabled_protocols,
        cipher_suites,
        ..s
    }
}

impl BrokerConfig {
    /// The TLS config of SSL listener `listener` (`security::tls`), and the
    /// settings it was built from (what its reloader rebuilds it with).
    ///
    /// # Errors
    /// A key store, trust store or TLS key that does not work, naming the key.
    pub fn tls_config(
        &self,
        listener: &str,
    ) -> Result<(crate::security::tls::Loaded, TlsSettings), ConfigError> {
        let mut settings = tls_settings(self, listener);
        // Kafka applies ssl.client.auth on SASL_SSL only when set per listener
        // (the principal comes from SASL there); the broker-wide value is ignored.
        let sasl_ssl = self.listeners()?.iter().any(|l| {
            l.name == listener && l.protocol == crate::security::SecurityProtocol::SaslSsl
        });
        if sasl_ssl && !settings.prefixed.contains(&SSL_CLIENT_AUTH.name) {
            if settings.client_auth != "none" {
                tracing::warn!(listener, "ssl.client.auth is ignored on a SASL_SSL listener unless set as listener.name.<listener>.ssl.client.auth");
            }
            settings.client_auth = "none".into();
        }
        let loaded = crate::security::tls::load(&settings)
            .map_err(|e| ConfigError::Invalid { key: e.key, reason: e.reason })?;
        Ok((loaded, settings))
    }

    /// `ssl.handshake.timeout.ms` of `listener`.
    pub fn ssl_handshake_timeout(&self, listener: &str) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.listener_long(listener, SSL_HANDSHAKE_TIMEOUT_MS.name),
        )
    }

    /// `listener`'s `ssl.principal.mapping.rules` (validated on set).
    pub fn principal_mapper(
        &self,
        listener: &str,
    ) -> crate::security::principal_mapper::SslPrincipalMapper {
        let rules = listener_value(self, listener, SSL_PRINCIPAL_MAPPING_RULES.name).0;
        rules
            .and_then(|r| {
                crate::security::principal_mapper::SslPrincipalMapper::from_rules(&r).ok()
            })
            .unwrap_or_default()
    }

    /// `listener`'s `ssl.reload.interval.ms` (0: no reload),
    /// `ssl.allow.dn.changes` and `ssl.allow.san.changes`.
    pub fn ssl_reload(&self, listener: &str) -> (std::time::Duration, bool, bool) {
        let flag = |k| listener_value(self, listener, k).0.is_some_and(|v| v == "true");
        let interval = self.listener_long(listener, SSL_RELOAD_INTERVAL_MS.name);
        let interval = std::time::Duration::from_millis(interval);
        (interval, flag(SSL_ALLOW_DN_CHANGES.name), flag(SSL_ALLOW_SAN_CHANGES.name))
    }

    fn listener_long(&self, listener: &str, key: &str) -> u64 {
        let (v, _) = listener_value(self, listener, key);
        v.and_then(|v| v.parse().ok()).unwrap_or(0)
    }
}

/// The endpoint clients are told to use for `listener`, given the port it
/// bound (which replaces a port of 0).
///
/// # Errors
/// A malformed `advertised.listeners`.
pub fn advertised(
    config: &BrokerConfig,
    listener: &ListenerConfig,
    bound_port: u16,
) -> Result<Listener, ConfigError> {
    let adv = config.explicit_value(&ADVERTISED_LISTENERS).unwrap_or("");
    if let Some(a) = parse_endpoints(ADVERTISED_LISTENERS.name, adv)?
        .into_iter()
        .find(|a| a.name == listener.name)
    {
        let port = if a.port == 0 { bound_port } else { a.port };
        return Ok(Listener { host: a.host, port });
    }
    let host = match listener.host.as_str() {
        "" | "0.0.0.0" | "::" => "localhost".to_string(),
        h => h.to_string(),
    };
    Ok(Listener { host, port: bound_port })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::checked as config;

    fn error_key(pairs: &[&str]) -> String {
        match config(pairs) {
            Err(ConfigError::Invalid { key, .. }) => key,
            other => panic!("{pairs:?}: {other:?}"),
        }
    }

    #[test]
    fn several_named_listeners_with_their_own_advertised_endpoints() {
        let c = config(&[
            "listeners=PLAINTEXT://127.0.0.1:0,internal://:9093",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "advertised.listeners=INTERNAL://broker.internal:0",
        ])
        .unwrap();
        let ls = c.listeners().unwrap();
        let names: Vec<&str> = ls.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["PLAINTEXT", "INTERNAL"]);
        assert!(ls.iter().all(|l| l.protocol == crate::security::SecurityProtocol::Plaintext));
        // Named in advertised.listeners: its host, the bound port for port 0.
        let internal = c.advertised(&ls[1], 4321).unwrap();
        assert_eq!(internal, Listener { host: "broker.internal".into(), port: 4321 });
        // Not named: its own host and bound port.
        let plain = c.advertised(&ls[0], 1234).unwrap();
        assert_eq!(plain, Listener { host: "127.0.0.1".into(), port: 1234 });
        assert_eq!(c.advertised(&ls[1], 9093).unwrap().host, "broker.internal");
        // IPv6 hosts in brackets.
        let c = config(&["listeners=PLAINTEXT://[::1]:9092"]).unwrap();
        assert_eq!(c.listeners().unwrap()[0].host, "::1");
    }

    #[test]
    fn each_listener_rule_names_its_key() {
        for (pairs, key) in [
            (&["listeners="][..], "listeners"),
            (&["listeners=PLAINTEXT:9092"], "listeners"),
            (&["listeners=PLAINTEXT://:http"], "listeners"),
            (&["listeners=PLAIN.TEXT://:1"], "listeners"),
            (&["listeners=PLAINTEXT://:1,plaintext://:2"], "listeners"),
            (
                &[
                    "listeners=PLAINTEXT://:1,B://:1",
                    "listener.security.protocol.map=B:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                ],
                "listeners",
            ),
            (&["listeners=INTERNAL://:1"], "listener.security.protocol.map"),
            (&["listener.security.protocol.map=A:TLS"], "listener.security.protocol.map"),
            (&["listener.security.protocol.map=A"], "listener.security.protocol.map"),
            (
                &["listener.security.protocol.map=A:SSL,a:PLAINTEXT"],
                "listener.security.protocol.map",
            ),
            (&["advertised.listeners=OTHER://h:1"], "advertised.listeners"),
            (&["advertised.listeners=h:1"], "advertised.listeners"),
            (&["listener.name.other.ssl.client.auth=none"], "listener.name.other.ssl.client.auth"),
            (
                &["listener.name.PLAINTEXT.ssl.client.auth=none"],
                "listener.name.PLAINTEXT.ssl.client.auth",
            ),
            (
                &["listener.name.plaintext.ssl.client.auth=always"],
                "listener.name.plaintext.ssl.client.auth",
            ),
            (
                &["listener.name.plaintext.num.partitions=3"],
                "listener.name.plaintext.num.partitions",
            ),
            (&["listener.name.plaintext=x"], "listener.name.plaintext"),
            (&["ssl.client.auth=maybe"], "ssl.client.auth"),
            (&["ssl.enabled.protocols=TLSv1.2,TLSv1.1"], "ssl.enabled.protocols"),
            (&["ssl.keystore.type=JCEKS"], "ssl.keystore.type"),
            (&["ssl.handshake.timeout.ms=0"], "ssl.handshake.timeout.ms"),
        ] {
            assert_eq!(error_key(pairs), key, "{pairs:?}");
        }
    }

    #[test]
    fn sasl_listeners_need_their_mechanisms_and_ssl_its_keys() {
        for (pairs, key) in [
            (&["listeners=SASL_PLAINTEXT://:9093"][..], "sasl.enabled.mechanisms"),
            (&["listeners=SASL_SSL://:9093", "sasl.enabled.mechanisms=PLAIN"], "ssl.keystore.type"),
            (
                &[
                    "listeners=PLAINTEXT://:9092,EXT://:9093",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXT:SASL_PLAINTEXT",
                    "listener.name.ext.sasl.enabled.mechanisms=GSSAPI",
                ],
                "listener.name.ext.sasl.enabled.mechanisms",
            ),
        ] {
            assert_eq!(error_key(pairs), key, "{pairs:?}");
        }
        // A name may map to PLAINTEXT whatever it is called.
        config(&["listeners=SSL://:9093", "listener.security.protocol.map=SSL:PLAINTEXT"]).unwrap();
        // SSL: Kafka's default JKS is refused with the conversion, then the
        // missing key store; a per-listener key is named as written.
        let ssl = "listeners=SSL://:9093";
        let pem = "ssl.keystore.type=PEM";
        for (pairs, key) in [
            (&[ssl][..], "ssl.keystore.type"),
            (&[ssl, pem], "ssl.keystore.location"),
            (
                &[ssl, pem, "listener.name.ssl.ssl.keystore.location=/nonexistent/ks.pem"],
                "listener.name.ssl.ssl.keystore.location",
            ),
            (&[ssl, pem, "ssl.keystore.key=x"], "ssl.keystore.key"),
            (
                &[ssl, pem, "ssl.keystore.location=/k", "ssl.keystore.password=p"],
                "ssl.keystore.password",
            ),
        ] {
            assert_eq!(error_key(pairs), key, "{pairs:?}");
        }
    }
}

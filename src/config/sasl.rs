//! The SASL keys of SASL_PLAINTEXT and SASL_SSL listeners.
//!
//! Rules (Kafka's, with sediment's mechanisms):
//! * `sasl.enabled.mechanisms` (also per listener) must name, on every SASL
//!   listener, only mechanisms sediment serves: PLAIN, SCRAM-SHA-256 and
//!   SCRAM-SHA-512 (whose users live in the credential store, managed with
//!   AlterUserScramCredentials; a JAAS config for them is parsed and
//!   otherwise unused on one node); GSSAPI (Kafka's default) and
//!   OAUTHBEARER are not supported at all.
//! * The server's JAAS config is read only from
//!   `listener.name.<listener>.<mechanism>.sasl.jaas.config` (Kafka's
//!   `JaasContext.loadServerContext`); a broker-wide `sasl.jaas.config` or
//!   `<mechanism>.sasl.jaas.config` is refused with the key to use. The text
//!   must parse whatever the mechanism; for PLAIN it must hold one
//!   `PlainLoginModule` entry with at least one `user_<name>` option.
//! * JAAS configs are Password keys: never printed, null in DescribeConfigs.
//! * `sasl.server.max.receive.size` and
//!   `connection.failed.authentication.delay.ms` are broker-wide.

use std::sync::Arc;
use std::time::Duration;

use super::broker_defs::{
    CONNECTIONS_MAX_REAUTH_MS, CONNECTION_FAILED_AUTHENTICATION_DELAY_MS, SASL_ENABLED_MECHANISMS,
    SASL_JAAS_CONFIG, SASL_SERVER_MAX_RECEIVE_SIZE,
};
use super::listeners::{listener_value, LISTENER_PREFIX};
use super::{invalid, BrokerConfig, ConfigError};
use crate::config_def::ConfigValues;
use crate::security::sasl::{jaas, PlainUsers, SaslListener, PLAIN};

/// The mechanisms whose `<mechanism>.sasl.jaas.config` keys are known.
const JAAS_MECHANISMS: &[&str] = &["plain", "scram-sha-256", "scram-sha-512"];

/// The JAAS key's suffix.
pub const JAAS_CONFIG: &str = SASL_JAAS_CONFIG.name;

/// Whether `key` (without a listener prefix) is a JAAS config key:
/// `sasl.jaas.config` or `<mechanism>.sasl.jaas.config`.
pub fn is_jaas_key(key: &str) -> bool {
    key == JAAS_CONFIG
        || key
            .strip_suffix(JAAS_CONFIG)
            .and_then(|m| m.strip_suffix('.'))
            .is_some_and(|m| JAAS_MECHANISMS.contains(&m))
}

/// `connections.max.reauth.ms`, broker-wide or per listener.
pub const REAUTH_MS: &str = CONNECTIONS_MAX_REAUTH_MS.name;

/// Whether `key` (without a listener prefix) is `connections.max.reauth.ms`
/// or `<mechanism>.connections.max.reauth.ms` (Kafka's per-mechanism form,
/// meaningful only under a listener prefix).
pub fn is_reauth_key(key: &str) -> bool {
    key == REAUTH_MS
        || key
            .strip_suffix(REAUTH_MS)
            .and_then(|m| m.strip_suffix('.'))
            .is_some_and(|m| JAAS_MECHANISMS.contains(&m))
}

/// The session lifetime of `mechanism` on `listener`, as Kafka's
/// `SaslChannelBuilder` picks it: the listener and mechanism key, else the
/// listener key, else the broker key; 0 means sessions never expire.
fn reauth_ms(config: &BrokerConfig, listener: &str, mechanism: &str) -> u64 {
    let per_mechanism = format!(
        "{LISTENER_PREFIX}{}.{}.{REAUTH_MS}",
        listener.to_lowercase(),
        mechanism.to_lowercase()
    );
    let value = match config.explicit(&per_mechanism) {
        Some(v) => Some(v.to_string()),
        None => listener_value(config, listener, REAUTH_MS).0,
    };
    // Validated on set: a non-negative integer.
    value.and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// Validate a JAAS key as set: per listener and mechanism, a text that parses.
///
/// # Errors
/// A broker-wide key, a per-listener key without a mechanism, text that does
/// not parse (the message never quotes it).
pub fn validate_jaas(
    key: &str,
    base: &str,
    per_listener: bool,
    value: &str,
) -> Result<(), ConfigError> {
    if value.trim().is_empty() {
        return Ok(());
    }
    if !per_listener || base == JAAS_CONFIG {
        return Err(invalid(
            key,
            "a broker reads JAAS configs per listener and mechanism: set listener.name.<listener>.<mechanism>.sasl.jaas.config (e.g. listener.name.sasl_ssl.plain.sasl.jaas.config)",
        ));
    }
    jaas::parse(value).map(|_| ()).map_err(|e| invalid(key, e))
}

/// The SASL settings of SASL listener `listener`, checked.
///
/// # Errors
/// The first rule of the module doc broken, naming the key.
pub fn sasl_listener(config: &BrokerConfig, listener: &str) -> Result<SaslListener, ConfigError> {
    let lower = listener.to_lowercase();
    let (value, prefixed) = listener_value(config, listener, SASL_ENABLED_MECHANISMS.name);
    let key = if prefixed {
        format!("{LISTENER_PREFIX}{lower}.sasl.enabled.mechanisms")
    } else {
        SASL_ENABLED_MECHANISMS.name.to_string()
    };
    let mechanisms: Vec<String> = value
        .unwrap_or_default()
        .split(',')
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    if mechanisms.is_empty() {
        return Err(invalid(&key, format!("SASL listener {listener} has no mechanism; set PLAIN")));
    }
    let mut plain = None;
    for m in &mechanisms {
        match m.as_str() {
            PLAIN => {
                let jaas_key = format!("{LISTENER_PREFIX}{lower}.plain.{JAAS_CONFIG}");
                let text = config.password(&jaas_key).ok_or_else(|| {
                    invalid(
                        &jaas_key,
                        format!("PLAIN is enabled on listener {listener} but it has no users: set {jaas_key}=\"org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>=\\\"<password>\\\";\""),
                    )
                })?;
                let entries = jaas::parse(text.expose()).map_err(|e| invalid(&jaas_key, e))?;
                let users = PlainUsers::from_jaas(&entries).map_err(|e| invalid(&jaas_key, e))?;
                plain = Some(Arc::new(users));
            }
            // Users come from the credential store once the broker loads it.
            "SCRAM-SHA-256" | "SCRAM-SHA-512" => {}
            "GSSAPI" | "OAUTHBEARER" => {
                return Err(invalid(
                    &key,
                    format!("{m} is not supported by sediment (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are; GSSAPI is Kafka's default, so set the key)"),
                ));
            }
            other => {
                return Err(invalid(
                    &key,
                    format!("unknown SASL mechanism {other:?} (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are served)"),
                ))
            }
        }
    }
    let max_receive_size = config.int(&SASL_SERVER_MAX_RECEIVE_SIZE).max(1) as usize;
    let delay = config.int(&CONNECTION_FAILED_AUTHENTICATION_DELAY_MS).max(0) as u64;
    let max_reauth = mechanisms
        .iter()
        .map(|m| (m.clone(), Duration::from_millis(reauth_ms(config, listener, m))))
        .filter(|(_, d)| !d.is_zero())
        .collect();
    Ok(SaslListener {
        max_reauth,
        mechanisms,
        plain,
        scram: None,
        max_receive_size,
        failed_authentication_delay: Duration::from_millis(delay),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HIDDEN;

    const USERS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-pw\" user_bob=\"bob-pw\";";

    fn config(pairs: &[&str]) -> Result<BrokerConfig, ConfigError> {
        let mut c = BrokerConfig::default();
        c.apply_overrides(pairs.iter().copied())?;
        c.check()?;
        Ok(c)
    }

    fn error(pairs: &[&str]) -> (String, String) {
        match config(pairs) {
            Err(ConfigError::Invalid { key, reason }) => (key, reason),
            other => panic!("{pairs:?}: {other:?}"),
        }
    }

    #[test]
    fn a_plain_listener_gets_its_users_and_hides_them() {
        let jaas = format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={USERS}");
        let c = config(&[
            "listeners=PLAINTEXT://:0,SASL_PLAINTEXT://:0",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
            &jaas,
            "sasl.server.max.receive.size=1000",
        ])
        .unwrap();
        let l = sasl_listener(&c, "SASL_PLAINTEXT").unwrap();
        assert_eq!(l.mechanisms, ["PLAIN"]);
        assert_eq!(l.plain.unwrap().len(), 2);
        assert_eq!(l.max_receive_size, 1000);
        assert_eq!(l.failed_authentication_delay, Duration::from_millis(100));
        assert!(!format!("{c:?}").contains("alice-pw"));
        let described = c.describe();
        let row = described.iter().find(|d| d.0.ends_with("plain.sasl.jaas.config")).unwrap();
        assert_eq!(row.1, HIDDEN);
        assert!(crate::config::is_sensitive("listener.name.sasl_plaintext.plain.sasl.jaas.config"));
        // The broker-wide mechanism list serves too.
        let c = config(&[
            "listeners=SASL_SSL://:0",
            "ssl.keystore.type=PEM",
            "sasl.enabled.mechanisms=PLAIN",
        ]);
        assert!(
            matches!(c, Err(ConfigError::Invalid { ref key, .. }) if key == "ssl.keystore.location"),
            "{c:?}"
        );
    }

    #[test]
    fn each_sasl_rule_names_its_key() {
        let jaas = format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={USERS}");
        let l = "listeners=SASL_PLAINTEXT://:0";
        for (pairs, key, says) in [
            (&[l][..], "sasl.enabled.mechanisms", "GSSAPI is not supported"),
            (
                &[l, "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,OAUTHBEARER", &jaas],
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
                "OAUTHBEARER is not supported",
            ),
            (&[l, "sasl.enabled.mechanisms=DIGEST-MD5"], "sasl.enabled.mechanisms", "unknown"),
            (&[l, "sasl.enabled.mechanisms="], "sasl.enabled.mechanisms", "no mechanism"),
            (
                &[l, "sasl.enabled.mechanisms=PLAIN"],
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "no users",
            ),
            (
                &[l, "sasl.enabled.mechanisms=PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config=x.Y required username=\"a\";"],
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "PlainLoginModule",
            ),
            (
                &[l, "listener.name.sasl_plaintext.plain.sasl.jaas.config=x.Y required user_a=\"secret\""],
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "';'",
            ),
            (&[l, "plain.sasl.jaas.config=x.Y required;"], "plain.sasl.jaas.config", "per listener"),
            (&[l, "sasl.jaas.config=x.Y required;"], "sasl.jaas.config", "per listener"),
            (
                &[l, "listener.name.sasl_plaintext.sasl.jaas.config=x.Y required;"],
                "listener.name.sasl_plaintext.sasl.jaas.config",
                "per listener and mechanism",
            ),
            (&[l, "listener.name.sasl_plaintext.gssapi.sasl.jaas.config=x.Y required;"], "listener.name.sasl_plaintext.gssapi.sasl.jaas.config", "cannot be set per listener"),
        ] {
            let (k, reason) = error(pairs);
            assert_eq!(k, key, "{pairs:?}: {reason}");
            assert!(reason.contains(says), "{pairs:?}: {reason}");
            assert!(!reason.contains("secret") && !reason.contains("alice-pw"), "{reason}");
        }
        // On SASL_SSL the broker-wide ssl.client.auth is ignored (Kafka's rule):
        // `required` without a trust store passes; set per listener, it applies.
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let pem = dir.path().join("server.pem");
        std::fs::write(&pem, format!("{}{}", key.serialize_pem(), cert.pem())).unwrap();
        let ks = format!("ssl.keystore.location={}", pem.display());
        let base = [
            "listeners=SASL_SSL://:0",
            "ssl.keystore.type=PEM",
            &ks,
            "sasl.enabled.mechanisms=PLAIN",
        ];
        let jaas = format!("listener.name.sasl_ssl.plain.sasl.jaas.config={USERS}");
        let with = |extra: &str| {
            let mut pairs = base.to_vec();
            pairs.extend([jaas.as_str(), extra]);
            config(&pairs)
        };
        with("ssl.client.auth=required").unwrap();
        let refused = with("listener.name.sasl_ssl.ssl.client.auth=required");
        assert!(
            matches!(refused, Err(ConfigError::Invalid { ref key, .. }) if key == "ssl.truststore.location"),
            "{refused:?}"
        );
        // Mechanism keys are ignored on listeners that are not SASL.
        config(&["listeners=PLAINTEXT://:0", "sasl.enabled.mechanisms=GSSAPI"]).unwrap();
    }

    #[test]
    fn session_lifetimes_resolve_per_mechanism_then_listener_then_broker() {
        let jaas = format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={USERS}");
        let base = [
            "listeners=SASL_PLAINTEXT://:0,INTERNAL://:0",
            "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
            &jaas,
            "listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_x=\"y\";",
        ];
        let lifetimes = |extra: &[&str], listener: &str| {
            let pairs: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
            let l = sasl_listener(&config(&pairs).unwrap(), listener).unwrap();
            let ms = |m: &str| l.max_reauth.get(m).map(|d| d.as_millis());
            (ms("PLAIN"), ms("SCRAM-SHA-256"))
        };
        assert_eq!(lifetimes(&[], "SASL_PLAINTEXT"), (None, None));
        let set = [
            "connections.max.reauth.ms=60000",
            "listener.name.sasl_plaintext.connections.max.reauth.ms=30000",
            "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms=5000",
        ];
        assert_eq!(lifetimes(&set, "SASL_PLAINTEXT"), (Some(30000), Some(5000)));
        assert_eq!(lifetimes(&set, "INTERNAL"), (Some(60000), Some(60000)));
        let (key, reason) = error(&["plain.connections.max.reauth.ms=1000"]);
        assert_eq!(key, "plain.connections.max.reauth.ms");
        assert!(reason.contains("listener.name."), "{reason}");
        let (key, _) = error(&["listener.name.sasl_plaintext.connections.max.reauth.ms=-1"]);
        assert_eq!(key, "listener.name.sasl_plaintext.connections.max.reauth.ms");
    }
}

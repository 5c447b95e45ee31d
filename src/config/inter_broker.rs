//! The inter-broker listener of a cluster member (Kafka's keys and rules):
//! the listener other brokers reach this one at, whose endpoint goes into
//! its registration, and whose protocol and keys its own channels to them
//! use (`cluster::channel_security`).
//!
//! Rules (Kafka's `KafkaConfig` validation, with sediment's mechanisms):
//! * `inter.broker.listener.name` names the listener; without it, the
//!   listener named as `security.inter.broker.protocol` (PLAINTEXT by
//!   default) is. Setting both is refused.
//! * The listener must be one of `listeners`.
//! * SSL and SASL_SSL: the listener's trust store checks the other brokers
//!   (`security::tls_client`); its key store is offered to them.
//! * SASL_PLAINTEXT and SASL_SSL: `sasl.mechanism.inter.broker.protocol`
//!   (Kafka's default GSSAPI is refused, as on the listeners) must be enabled
//!   on the listener, and the listener's JAAS config for it must carry this
//!   broker's own `username` and `password`.
//!
//! Only a cluster member reads these; a single node has no other broker.

use std::sync::Arc;

use super::listeners::{listener_value, tls_settings, LISTENER_PREFIX};
use super::sasl::JAAS_CONFIG;
use super::{invalid, BrokerConfig, ConfigError};
use crate::cluster::channel_security::ChannelSecurity;
use crate::cluster::config::{
    INTER_BROKER_LISTENER_NAME, SASL_MECHANISM_INTER_BROKER_PROTOCOL,
    SECURITY_INTER_BROKER_PROTOCOL,
};
use crate::security::sasl::client::{login, ClientCredentials};
use crate::security::sasl::jaas;
use crate::security::ssl_configs::SSL_ENDPOINT_IDENTIFICATION_ALGORITHM;
use crate::security::SecurityProtocol;

impl BrokerConfig {
    /// The inter-broker listener's name (upper case) and protocol.
    ///
    /// # Errors
    /// Both keys set, or a listener that is not bound.
    pub fn inter_broker_listener(&self) -> Result<(String, SecurityProtocol), ConfigError> {
        let named = self.explicit(INTER_BROKER_LISTENER_NAME.name).filter(|n| !n.trim().is_empty());
        let by_protocol = self.explicit(SECURITY_INTER_BROKER_PROTOCOL.name);
        if named.is_some() && by_protocol.is_some() {
            return Err(invalid(
                INTER_BROKER_LISTENER_NAME.name,
                "set only one of inter.broker.listener.name and security.inter.broker.protocol",
            ));
        }
        let (key, name) = match named {
            Some(n) => (INTER_BROKER_LISTENER_NAME.name, n.trim().to_uppercase()),
            None => {
                let p = by_protocol.unwrap_or(SECURITY_INTER_BROKER_PROTOCOL.default);
                (SECURITY_INTER_BROKER_PROTOCOL.name, p.trim().to_uppercase())
            }
        };
        let listeners = self.listeners()?;
        match listeners.iter().find(|l| l.name == name) {
            Some(l) => Ok((l.name.clone(), l.protocol)),
            None => {
                let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
                Err(invalid(
                    key,
                    format!(
                        "the inter-broker listener {name} is not one of the listeners ({}); set \
                         inter.broker.listener.name to the listener the other brokers reach this one at",
                        names.join(", ")
                    ),
                ))
            }
        }
    }

    /// How this broker's channels to the others authenticate (module doc).
    ///
    /// # Errors
    /// The first rule broken, naming its key.
    pub fn channel_security(&self) -> Result<Arc<ChannelSecurity>, ConfigError> {
        let (listener, protocol) = self.inter_broker_listener()?;
        let tls = match protocol {
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
                let settings = tls_settings(self, &listener);
                let algorithm =
                    listener_value(self, &listener, SSL_ENDPOINT_IDENTIFICATION_ALGORITHM.name).0;
                let verify = algorithm.is_none_or(|a| !a.trim().is_empty());
                let config = crate::security::tls_client::client_config(&settings, verify)
                    .map_err(|e| ConfigError::Invalid { key: e.key, reason: e.reason })?;
                Some(config)
            }
            _ => None,
        };
        let sasl = match protocol {
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => {
                Some(self.inter_broker_login(&listener)?)
            }
            _ => None,
        };
        Ok(Arc::new(ChannelSecurity { listener, tls, sasl }))
    }

    fn inter_broker_login(
        &self,
        listener: &str,
    ) -> Result<Arc<dyn crate::cluster::channel_security::SaslLogin>, ConfigError> {
        let key = SASL_MECHANISM_INTER_BROKER_PROTOCOL.name;
        let mechanism = self.get(key).unwrap_or_default().trim().to_string();
        let enabled = self.sasl_listener(listener)?.mechanisms;
        if !enabled.contains(&mechanism) {
            return Err(invalid(
                key,
                format!(
                    "{mechanism} is not enabled on the inter-broker listener {listener} (it has {}); \
                     set sasl.mechanism.inter.broker.protocol to one of them (GSSAPI, Kafka's \
                     default, is not served)",
                    enabled.join(", ")
                ),
            ));
        }
        let lower = format!("{}.{}", listener.to_lowercase(), mechanism.to_lowercase());
        let jaas_key = format!("{LISTENER_PREFIX}{lower}.{JAAS_CONFIG}");
        let needs = || {
            invalid(
                &jaas_key,
                format!(
                    "the inter-broker listener authenticates with {mechanism}: its JAAS config \
                     must carry this broker's own username=\"..\" password=\"..\" options"
                ),
            )
        };
        let text = self.password(&jaas_key).ok_or_else(needs)?;
        let entries = jaas::parse(text.expose()).map_err(|e| invalid(&jaas_key, e))?;
        let options = entries.first().map(|e| &e.options).ok_or_else(needs)?;
        let (Some(username), Some(password)) = (options.get("username"), options.get("password"))
        else {
            return Err(needs());
        };
        let credentials =
            ClientCredentials { username: username.clone(), password: password.clone() };
        login(&mechanism, credentials)
            .ok_or_else(|| invalid(key, format!("{mechanism} has no client")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
        username=\"broker\" password=\"broker-pw\" user_broker=\"broker-pw\";";

    fn config(pairs: &[&str]) -> BrokerConfig {
        let mut c = BrokerConfig::default();
        c.apply_overrides(pairs.iter().copied()).expect("each key alone is valid");
        c
    }

    fn refused(c: &BrokerConfig) -> (String, String) {
        match c.channel_security() {
            Err(ConfigError::Invalid { key, reason }) => (key, reason),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_listener_is_named_or_found_by_protocol() {
        let c = config(&[
            "listeners=PLAINTEXT://:0,BROKER://:0",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT",
        ]);
        assert_eq!(c.inter_broker_listener().unwrap().0, "PLAINTEXT");
        let c = config(&[
            "listeners=CLIENT://:0,broker://:0",
            "listener.security.protocol.map=CLIENT:PLAINTEXT,BROKER:PLAINTEXT",
            "inter.broker.listener.name=broker",
        ]);
        let security = c.channel_security().unwrap();
        assert_eq!(security.listener, "BROKER");
        assert!(security.tls.is_none() && security.sasl.is_none());
    }

    #[test]
    fn both_keys_or_a_missing_listener_are_refused() {
        let c = config(&[
            "listeners=PLAINTEXT://:0",
            "inter.broker.listener.name=PLAINTEXT",
            "security.inter.broker.protocol=PLAINTEXT",
        ]);
        assert_eq!(refused(&c).0, "inter.broker.listener.name");
        let c =
            config(&["listeners=CLIENT://:0", "listener.security.protocol.map=CLIENT:PLAINTEXT"]);
        let (key, reason) = refused(&c);
        assert_eq!(key, "security.inter.broker.protocol");
        assert!(reason.contains("CLIENT"), "{reason}");
    }

    #[test]
    fn a_sasl_listener_needs_a_served_mechanism_and_the_brokers_credentials() {
        let jaas = format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}");
        let base = ["listeners=SASL_PLAINTEXT://:0", "sasl.enabled.mechanisms=PLAIN", &jaas];
        let (key, reason) = refused(&config(
            &[&base[..], &["security.inter.broker.protocol=SASL_PLAINTEXT"]].concat(),
        ));
        assert_eq!(key, "sasl.mechanism.inter.broker.protocol");
        assert!(reason.contains("GSSAPI"), "{reason}");
        let ok = [
            &base[..],
            &[
                "security.inter.broker.protocol=SASL_PLAINTEXT",
                "sasl.mechanism.inter.broker.protocol=PLAIN",
            ],
        ]
        .concat();
        let security = config(&ok).channel_security().unwrap();
        assert_eq!(
            security.sasl.as_ref().map(|s| s.mechanism().to_string()).as_deref(),
            Some("PLAIN")
        );
        assert!(security.tls.is_none());
        let no_user = "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_broker=\"pw\";";
        let c = config(&[
            "listeners=SASL_PLAINTEXT://:0",
            "sasl.enabled.mechanisms=PLAIN",
            no_user,
            "security.inter.broker.protocol=SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
        ]);
        let (key, reason) = refused(&c);
        assert_eq!(key, "listener.name.sasl_plaintext.plain.sasl.jaas.config");
        assert!(reason.contains("username"), "{reason}");
        assert!(!reason.contains("pw"), "the JAAS text is never quoted: {reason}");
    }

    #[test]
    fn an_ssl_listener_needs_a_trust_store_in_a_cluster_only() {
        let dir = tempfile::tempdir().unwrap();
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let store = dir.path().join("broker.pem");
        std::fs::write(&store, format!("{}{}", cert.signing_key.serialize_pem(), cert.cert.pem()))
            .unwrap();
        let keystore = format!("ssl.keystore.location={}", store.display());
        let base = ["listeners=SSL://127.0.0.1:0", "ssl.keystore.type=PEM", &keystore];
        let alone = config(&[&base[..], &["security.inter.broker.protocol=SSL"]].concat());
        alone.check().expect("a single node has no inter-broker listener to check");
        let (key, _) = refused(&alone);
        assert_eq!(key, "ssl.truststore.location");
        let member = [
            &base[..],
            &[
                "security.inter.broker.protocol=SSL",
                "sediment.cluster.etcd.endpoints=http://127.0.0.1:2379",
                "node.id=1",
            ],
        ]
        .concat();
        assert!(config(&member).check().is_err(), "a cluster member checks it");
        let truststore = format!("ssl.truststore.location={}", store.display());
        let trusted = [&member[..], &["ssl.truststore.type=PEM", &truststore]].concat();
        let c = config(&trusted);
        c.check().unwrap();
        let security = c.channel_security().unwrap();
        assert!(security.tls.is_some() && security.sasl.is_none());
    }
}

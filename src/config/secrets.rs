//! Secret config values (`ConfigType::Password`): kept as given, never shown.
//!
//! A secret is a key typed Password, also when set per listener
//! (`listener.name.<l>.<key>`). `Debug` of the config, `describe()` and so
//! `check-config` print [`HIDDEN`] in its place; DescribeConfigs answers a
//! null value marked sensitive (`api::describe_configs`). The value leaves the
//! config only through [`BrokerConfig::password`], as a [`Password`].

use super::{lookup, split_listener_key, BrokerConfig};
use crate::config_def::ConfigType;

/// A secret config value: `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// The secret itself, for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[hidden]")
    }
}

impl std::fmt::Display for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[hidden]")
    }
}

/// What `describe` and `check-config` print in place of a secret.
pub const HIDDEN: &str = "[hidden]";

/// Whether a key's value is a secret: a Password key, also when given per listener.
pub fn is_sensitive(key: &str) -> bool {
    let base = split_listener_key(key).map_or(key, |(_, k)| k);
    lookup(base).is_some_and(|(d, _)| d.kind == ConfigType::Password)
}

impl BrokerConfig {
    /// A secret key's value, unset when empty.
    pub fn password(&self, key: &str) -> Option<Password> {
        self.explicit(key).filter(|v| !v.is_empty()).map(|v| Password(v.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::checked as config;

    #[test]
    fn passwords_are_never_shown() {
        let c = config(&[
            "ssl.keystore.password=s3cret-ks",
            "listener.name.plaintext.ssl.key.password=s3cret-key",
            "listener.name.plaintext.ssl.client.auth=requested",
            "ssl.truststore.password=",
        ])
        .unwrap();
        let debug = format!("{c:?}");
        assert!(!debug.contains("s3cret"), "{debug}");
        assert!(debug.contains("requested"), "{debug}");
        let described = c.describe();
        let find = |k: &str| described.iter().find(|d| d.0 == k).unwrap().clone();
        assert_eq!(find("ssl.keystore.password").1, HIDDEN);
        assert_eq!(find("ssl.keystore.password").4, ConfigType::Password);
        assert_eq!(find("listener.name.plaintext.ssl.key.password").1, HIDDEN);
        assert_eq!(find("listener.name.plaintext.ssl.client.auth").1, "requested");
        assert_eq!(find("ssl.truststore.password").1, "");
        assert!(!format!("{described:?}").contains("s3cret"));
        assert!(is_sensitive("listener.name.plaintext.ssl.key.password"));
        assert!(!is_sensitive("ssl.client.auth"));
        let p = c.password("ssl.keystore.password").unwrap();
        assert_eq!((p.expose(), format!("{p} {p:?}").as_str()), ("s3cret-ks", "[hidden] [hidden]"));
        assert_eq!(c.password("ssl.truststore.password"), None);
    }
}

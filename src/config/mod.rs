//! Broker configuration: a TOML file, or Kafka's own `server.properties`
//! (`config::properties_file`, chosen by the `.properties` extension), plus
//! `--override key=value` pairs, with Kafka's key names.
//!
//! Kafka keys with no meaning on one node (`config::ignored`) are kept aside,
//! reported in one warning and otherwise ignored; any other unknown key is an
//! error that suggests the nearest known key (`config::suggest`).
//!
//! Keys are written as in Kafka's `server.properties`. In TOML the dots make
//! nested tables (`log.dirs = "/data"` is `{log = {dirs = "/data"}}`); we flatten
//! them back to dotted names, so both `log.dirs = ...` and `[log] dirs = ...`
//! work. Every key must be known: an unknown key, a value of the wrong type or
//! out of range is an error that names the key. Values are kept as strings in
//! Kafka's syntax, which is also how DescribeConfigs reports them.
//!
//! Two families of keys exist:
//! - broker keys, each declared by the module that reads it and gathered in
//!   [`TABLES`] (listeners, log.dirs, num.partitions, ...);
//! - topic defaults (`log.segment.bytes`, `log.cleanup.policy`, ...), which are
//!   the `broker_key` of an entry in `log::config::LOG_CONFIGS` and are
//!   validated by the topic key's rules.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::cleaner::config::LOG_CLEANER_IO_BUFFER_LOAD_FACTOR;
use crate::cleaner::config::{LogCleanerConfig, CLEANER_CONFIGS};
use crate::cluster::config::CLUSTER_CONFIGS;
use crate::config_def::{ConfigDef, ConfigTable, ConfigType, ConfigValues, InvalidValue};
use crate::group::config::{GroupConfig, GROUP_CONFIGS};
use crate::log::config as log_config;
use crate::log::manager_config::{self, LogManagerConfig, STORAGE_CONFIGS};
use crate::log::manager_config::{LOG_DIRS, NUM_PARTITIONS};
use crate::remote::config::{REMOTE_LOG_STORAGE_SYSTEM_ENABLE, REMOTE_STORAGE_CONFIGS};
use crate::replica::config::REPLICATION_CONFIGS;
use crate::security::ssl_configs::{SSL_CONFIGS, SSL_PRINCIPAL_MAPPING_RULES};
use crate::txn::config::{
    TransactionConfig, TRANSACTION_PARTITION_VERIFICATION_ENABLE, TXN_CONFIGS,
};
use broker_defs::*;

mod authorization;
pub mod broker_defs;
pub mod dynamic;
mod ignored;
mod inter_broker;
mod listeners;
mod properties_file;
mod sasl;
mod secrets;
mod suggest;
mod template;
mod toml_file;

pub use ignored::{dynamic_ignored, ignored_reason, parses_as, DynamicScope, IGNORED_KEYS};
pub use listeners::{
    parse_endpoints, parse_protocol_map, split_listener_key, EndpointEntry, ListenerConfig,
    DEFAULT_PROTOCOL_MAP, LISTENER_PREFIX,
};
pub use secrets::{is_sensitive, Password, HIDDEN};
pub use suggest::nearest_key;
pub use template::{config_reference_markdown, config_template};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid config {key}: {reason}")]
    Invalid { key: String, reason: String },
    #[error("unknown config key {key}{}", suggestion.map(|s| format!("; did you mean {s}?")).unwrap_or_default())]
    Unknown { key: String, suggestion: Option<&'static str> },
}

impl ConfigError {
    /// The key the error is about, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Invalid { key, .. } | Self::Unknown { key, .. } => Some(key),
            Self::Read { .. } | Self::Parse { .. } => None,
        }
    }
}

fn unknown(key: &str) -> ConfigError {
    ConfigError::Unknown { key: key.to_string(), suggestion: nearest_key(key) }
}

fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.to_string(), reason: reason.into() }
}

/// Every module's broker keys, in the order the template and the reference
/// show them (the topic defaults, `LOG_CONFIGS`, come after).
pub const TABLES: &[&ConfigTable] = &[
    &BROKER_CONFIGS,
    &SSL_CONFIGS,
    &SASL_CONFIGS,
    &AUTHORIZATION_CONFIGS,
    &METRICS_CONFIGS,
    &REMOTE_STORAGE_CONFIGS,
    &CLUSTER_CONFIGS,
    &REPLICATION_CONFIGS,
    &TOPIC_CREATION_CONFIGS,
    &STORAGE_CONFIGS,
    &CLEANER_CONFIGS,
    &GROUP_CONFIGS,
    &TXN_CONFIGS,
];

/// Every broker key of [`TABLES`].
pub fn broker_keys() -> impl Iterator<Item = &'static ConfigDef> {
    TABLES.iter().flat_map(|t| t.keys.iter().copied())
}

impl From<InvalidValue> for ConfigError {
    fn from(e: InvalidValue) -> Self {
        ConfigError::Invalid { key: e.key.to_string(), reason: e.reason }
    }
}

impl ConfigValues for BrokerConfig {
    fn explicit_value(&self, def: &ConfigDef) -> Option<&str> {
        self.explicit.get(def.broker_key).map(String::as_str)
    }
}

/// The keys Kafka allows per listener, as `listener.name.<name>.<key>`.
pub fn is_listener_key(key: &str) -> bool {
    let listener_family = key.starts_with("ssl.")
        || key == SASL_ENABLED_MECHANISMS.name
        || sasl::is_jaas_key(key)
        || sasl::is_reauth_key(key);
    listener_family && lookup(key).is_some_and(|(_, topic)| topic.is_none())
}

/// The resolved broker configuration.
#[derive(Clone, Default)]
pub struct BrokerConfig {
    /// Every key set explicitly (file or override), validated, in Kafka syntax.
    explicit: BTreeMap<String, String>,
    /// Kafka keys with no meaning here (`config::ignored`), as given.
    ignored: BTreeMap<String, String>,
}

impl std::fmt::Debug for BrokerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: BTreeMap<&str, &str> = self
            .explicit
            .iter()
            .map(|(k, v)| (k.as_str(), if is_sensitive(k) { HIDDEN } else { v.as_str() }))
            .collect();
        f.debug_struct("BrokerConfig")
            .field("explicit", &shown)
            .field("ignored", &self.ignored.keys())
            .finish()
    }
}

/// A host and port clients are told to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub host: String,
    pub port: u16,
}

fn lookup(key: &str) -> Option<(&'static ConfigDef, Option<&'static str>)> {
    // `<mechanism>.sasl.jaas.config` is typed as `sasl.jaas.config` (Password),
    // `<mechanism>.connections.max.reauth.ms` as `connections.max.reauth.ms`.
    let key = if sasl::is_jaas_key(key) {
        sasl::JAAS_CONFIG
    } else if sasl::is_reauth_key(key) {
        sasl::REAUTH_MS
    } else {
        key
    };
    if let Some(def) = broker_keys().find(|d| d.name == key) {
        return Some((def, None));
    }
    log_config::broker_defaulted().find(|d| d.broker_key == key).map(|d| (d, Some(d.name)))
}

/// Validate `listener.name.<listener>.<key>` (`rest`: after the prefix).
fn validate_listener_key(key: &str, rest: &str, value: &str) -> Result<(), ConfigError> {
    let (_, base) = split_listener_key(key)
        .ok_or_else(|| invalid(key, format!("{rest:?} is not <listener name>.<key>")))?;
    if !is_listener_key(base) {
        return Err(invalid(key, format!("{base} cannot be set per listener")));
    }
    if sasl::is_jaas_key(base) {
        return sasl::validate_jaas(key, base, true, value);
    }
    // `<mechanism>.connections.max.reauth.ms` is typed as the broker key.
    let base = if sasl::is_reauth_key(base) { sasl::REAUTH_MS } else { base };
    validate(base, value).map_err(|e| match e {
        ConfigError::Invalid { reason, .. } => invalid(key, reason),
        other => other,
    })
}

/// Validate one broker key's value.
///
/// # Errors
/// Unknown key, wrong type, out of range — naming the key.
pub fn validate(key: &str, value: &str) -> Result<(), ConfigError> {
    if let Some(rest) = key.strip_prefix(LISTENER_PREFIX) {
        return validate_listener_key(key, rest, value);
    }
    if sasl::is_jaas_key(key) {
        return sasl::validate_jaas(key, key, false, value);
    }
    if sasl::is_reauth_key(key) && key != sasl::REAUTH_MS {
        return Err(invalid(
            key,
            "set per listener: listener.name.<listener>.<mechanism>.connections.max.reauth.ms",
        ));
    }
    let (def, topic_key) = lookup(key).ok_or_else(|| unknown(key))?;
    if let Some(topic_key) = topic_key {
        return log_config::validate_value(topic_key, value)
            .map_err(|e| invalid(key, e.to_string()));
    }
    let v = value.trim();
    authorization::validate(key, v)?;
    if key == SSL_PRINCIPAL_MAPPING_RULES.name {
        crate::security::principal_mapper::SslPrincipalMapper::from_rules(v)
            .map_err(|e| invalid(key, e))?;
    }
    match def.kind {
        ConfigType::Boolean => {
            v.parse::<bool>().map_err(|_| invalid(key, format!("{v:?} is not true or false")))?;
        }
        ConfigType::Int | ConfigType::Long => {
            let n = if def.kind == ConfigType::Int {
                v.parse::<i32>().map(i64::from).ok()
            } else {
                v.parse::<i64>().ok()
            };
            let n = n.ok_or_else(|| {
                invalid(key, format!("{v:?} is not an integer of the key's size"))
            })?;
            if let Some(min) = def.min {
                if (n as f64) < min {
                    return Err(invalid(key, format!("{n} is below the minimum {min}")));
                }
            }
        }
        ConfigType::Double => {
            let n = v.parse::<f64>().map_err(|_| invalid(key, format!("{v:?} is not a number")))?;
            if n.is_nan() || def.min.is_some_and(|min| n < min) {
                return Err(invalid(
                    key,
                    format!("{v} is below the minimum {}", def.min.unwrap_or(0.0)),
                ));
            }
            if key == LOG_CLEANER_IO_BUFFER_LOAD_FACTOR.name && !(n > 0.0 && n <= 1.0) {
                return Err(invalid(key, format!("{v} must be above 0 and at most 1")));
            }
        }
        ConfigType::Password => {}
        ConfigType::String | ConfigType::List => {
            let items: Vec<&str> = if def.kind == ConfigType::List {
                v.split(',').map(str::trim).filter(|s| !s.is_empty()).collect()
            } else {
                vec![v]
            };
            if let Some(bad) =
                items.iter().find(|i| !def.one_of.is_empty() && !def.one_of.contains(i))
            {
                return Err(invalid(
                    key,
                    format!("{bad:?} is not one of {}", def.one_of.join(", ")),
                ));
            }
            if key == LISTENERS.name && parse_endpoints(key, v)?.is_empty() {
                return Err(invalid(key, "at least one listener is needed"));
            }
            if key == ADVERTISED_LISTENERS.name {
                parse_endpoints(key, v)?;
            }
            if key == LISTENER_SECURITY_PROTOCOL_MAP.name {
                parse_protocol_map(key, v)?;
            }
            if key == METRICS_LISTEN.name && !v.is_empty() {
                use std::net::ToSocketAddrs;
                if v.to_socket_addrs().map_or(true, |mut a| a.next().is_none()) {
                    return Err(invalid(
                        key,
                        format!("{v:?} is not host:port (empty disables the endpoint)"),
                    ));
                }
            }
            if key == LOG_DIRS.name && v.split(',').all(|d| d.trim().is_empty()) {
                return Err(invalid(key, "at least one directory is needed"));
            }
        }
    }
    Ok(())
}

impl BrokerConfig {
    /// Parse TOML text.
    ///
    /// # Errors
    /// TOML syntax errors and invalid keys or values.
    pub fn from_toml(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let mut explicit = BTreeMap::new();
        toml_file::flatten("", &table, &mut explicit)?;
        let mut config = Self::default();
        for (k, v) in explicit {
            config.set(&k, &v)?;
        }
        Ok(config)
    }

    /// Parse a Java properties file's bytes (Kafka's `server.properties`).
    ///
    /// # Errors
    /// A malformed line, and invalid keys or values.
    pub fn from_properties(bytes: &[u8], path: &Path) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        for (k, v) in properties_file::parse(bytes, path)? {
            config.set(&k, &v)?;
        }
        Ok(config)
    }

    /// Read a config file: Java properties when its name ends in
    /// `.properties`, TOML otherwise.
    ///
    /// # Errors
    /// As `from_toml` or `from_properties`, plus I/O errors.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let read = |source| ConfigError::Read { path: path.to_path_buf(), source };
        if path.extension().is_some_and(|e| e == "properties") {
            return Self::from_properties(&std::fs::read(path).map_err(read)?, path);
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        Self::from_toml(&text, path).map_err(|e| match e {
            ConfigError::Parse { path, message } => ConfigError::Parse {
                path,
                message: format!(
                    "not a TOML file (read as TOML; a name ending in .properties is read as Java properties): {message}"
                ),
            },
            other => other,
        })
    }

    /// Set one key (an `--override`).
    ///
    /// # Errors
    /// Invalid key or value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if ignored_reason(key).is_some() {
            self.ignored.insert(key.to_string(), value.trim().to_string());
            return Ok(());
        }
        validate(key, value)?;
        self.explicit.insert(key.to_string(), value.trim().to_string());
        Ok(())
    }

    /// Apply `key=value` overrides in order.
    ///
    /// # Errors
    /// A pair without `=`, or an invalid key or value.
    pub fn apply_overrides<'a>(
        &mut self,
        pairs: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), ConfigError> {
        for pair in pairs {
            let (k, v) =
                pair.split_once('=').ok_or_else(|| invalid(pair, "an override is key=value"))?;
            self.set(k.trim(), v)?;
        }
        Ok(())
    }

    /// The value of a key set explicitly.
    pub fn explicit(&self, key: &str) -> Option<&str> {
        self.explicit.get(key).map(String::as_str)
    }

    /// Every explicitly set key.
    pub fn explicit_keys(&self) -> &BTreeMap<String, String> {
        &self.explicit
    }

    /// The Kafka keys given that have no meaning here, with their values.
    pub fn ignored_keys(&self) -> &BTreeMap<String, String> {
        &self.ignored
    }

    /// The listener names of `controller.listener.names`: KRaft controller
    /// listeners, which are not opened.
    pub fn controller_listener_names(&self) -> Vec<String> {
        self.ignored
            .get("controller.listener.names")
            .map(|v| {
                v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
            })
            .unwrap_or_default()
    }

    /// The one start-up warning about ignored keys (`None`: none given).
    pub fn ignored_warning(&self) -> Option<String> {
        if self.ignored.is_empty() {
            return None;
        }
        let keys: Vec<String> = self
            .ignored
            .keys()
            .map(|k| format!("{k} ({})", ignored_reason(k).unwrap_or("ignored")))
            .collect();
        let mut text = format!(
            "ignoring {} Kafka config key(s) with no meaning on a single-node sediment: {}",
            keys.len(),
            keys.join(", ")
        );
        let controllers = self.controller_listener_names();
        if !controllers.is_empty() {
            text.push_str(&format!(
                "; controller listener(s) {} not opened",
                controllers.join(", ")
            ));
        }
        Some(text)
    }

    /// The effective value of a broker key (explicit, else default).
    pub fn get(&self, key: &str) -> Option<String> {
        if let Some(v) = self.explicit.get(key) {
            return Some(v.clone());
        }
        let (def, _) = lookup(key)?;
        Some(def.default.to_string())
    }

    /// `transaction.partition.verification.enable`: whether transactional
    /// Produce and TxnOffsetCommit ask the coordinator before opening a
    /// transaction on a partition.
    pub fn transaction_partition_verification_enable(&self) -> bool {
        self.boolean(&TRANSACTION_PARTITION_VERIFICATION_ENABLE)
    }

    pub fn node_id(&self) -> i32 {
        self.int(&NODE_ID) as i32
    }

    pub fn num_partitions(&self) -> i32 {
        self.int(&NUM_PARTITIONS) as i32
    }

    /// The factor of auto-created topics and of CreateTopics asking for -1.
    pub fn default_replication_factor(&self) -> i32 {
        self.int(&DEFAULT_REPLICATION_FACTOR) as i32
    }

    pub fn auto_create_topics(&self) -> bool {
        self.boolean(&AUTO_CREATE_TOPICS_ENABLE)
    }

    pub fn delete_topic_enable(&self) -> bool {
        self.boolean(&DELETE_TOPIC_ENABLE)
    }

    pub fn socket_request_max_bytes(&self) -> usize {
        self.int(&SOCKET_REQUEST_MAX_BYTES) as usize
    }

    /// `num.io.threads`: how many requests inflate records at once.
    pub fn num_io_threads(&self) -> usize {
        self.int(&NUM_IO_THREADS) as usize
    }

    /// `connections.max.idle.ms`: how long a connection may wait between
    /// requests (and an authentication may take) before it is closed.
    pub fn connections_max_idle(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.int(&CONNECTIONS_MAX_IDLE_MS).max(1) as u64)
    }

    /// `fetch.max.bytes`: most record bytes one Fetch answers with (Kafka
    /// caps a request's `max_bytes` by it).
    pub fn fetch_max_bytes(&self) -> usize {
        self.int(&FETCH_MAX_BYTES).max(0) as usize
    }

    /// `max.request.partition.size.limit`: most partitions one
    /// DescribeTopicPartitions answer holds (at least 1).
    pub fn max_request_partition_size_limit(&self) -> usize {
        self.int(&MAX_REQUEST_PARTITION_SIZE_LIMIT).max(1) as usize
    }

    /// `max.incremental.fetch.session.cache.slots`: most fetch sessions kept (0: none).
    pub fn max_incremental_fetch_session_cache_slots(&self) -> usize {
        self.int(&MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS).max(0) as usize
    }

    /// The listeners to bind, checked across keys (`config::listeners`).
    ///
    /// # Errors
    /// The first listener rule broken, naming the key.
    pub fn listeners(&self) -> Result<Vec<ListenerConfig>, ConfigError> {
        listeners::resolve(self)
    }

    /// Every rule that spans several keys; `set` checks each key alone.
    ///
    /// # Errors
    /// The first rule broken, naming the key.
    pub fn check(&self) -> Result<(), ConfigError> {
        use crate::security::SecurityProtocol as P;
        GroupConfig::check(self)?;
        self.metrics_endpoint()?;
        if crate::cluster::ClusterConfig::from_values(self)?.is_some() {
            self.channel_security()?;
        }
        for l in self.listeners()? {
            if matches!(l.protocol, P::Ssl | P::SaslSsl) {
                self.tls_config(&l.name)?;
            }
            if matches!(l.protocol, P::SaslPlaintext | P::SaslSsl) {
                self.sasl_listener(&l.name)?;
            }
        }
        Ok(())
    }

    /// The SASL settings of SASL listener `listener` (`config::sasl`).
    ///
    /// # Errors
    /// A mechanism not served, PLAIN without users, naming the key.
    pub fn sasl_listener(
        &self,
        listener: &str,
    ) -> Result<crate::security::sasl::SaslListener, ConfigError> {
        sasl::sasl_listener(self, listener)
    }

    /// The address to bind for `l`.
    ///
    /// # Errors
    /// An unresolvable host.
    pub fn bind_addr(&self, l: &ListenerConfig) -> Result<SocketAddr, ConfigError> {
        let host = if l.host.is_empty() { "0.0.0.0".to_string() } else { l.host.clone() };
        let text = if host.contains(':') {
            format!("[{host}]:{}", l.port)
        } else {
            format!("{host}:{}", l.port)
        };
        use std::net::ToSocketAddrs;
        text.to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| invalid(LISTENERS.name, format!("cannot resolve {text}")))
    }

    /// Host and port clients of listener `l` are told to use; `bound_port`
    /// replaces a port of 0.
    ///
    /// # Errors
    /// A malformed `advertised.listeners`.
    pub fn advertised(&self, l: &ListenerConfig, bound_port: u16) -> Result<Listener, ConfigError> {
        listeners::advertised(self, l, bound_port)
    }

    pub fn log_dirs(&self) -> Vec<PathBuf> {
        manager_config::log_dirs(self)
    }

    /// The topic-level defaults this broker sets, keyed by topic key.
    pub fn topic_defaults(&self) -> BTreeMap<String, String> {
        manager_config::topic_defaults(self)
    }

    /// The cleaner threads' settings (`log.cleaner.*`).
    pub fn cleaner_config(&self) -> LogCleanerConfig {
        // The topic defaults were checked as they were set.
        let max_message_size =
            log_config::LogConfig::resolve(&self.topic_defaults(), BTreeMap::new())
                .map_or(1_048_588, |c| c.max_message_bytes);
        LogCleanerConfig::from_values(self, max_message_size, self.tiered_storage_enabled())
    }

    /// `remote.log.storage.system.enable`.
    pub fn tiered_storage_enabled(&self) -> bool {
        self.boolean(&REMOTE_LOG_STORAGE_SYSTEM_ENABLE)
    }

    /// Where the metrics endpoint listens; `None` when disabled.
    pub fn metrics_listen(&self) -> Option<String> {
        Some(self.value(&METRICS_LISTEN).trim().to_string()).filter(|v| !v.is_empty())
    }

    /// The metrics endpoint's limits and principal (the authorizer is the
    /// broker's to add).
    ///
    /// # Errors
    /// A principal that is not `Type:name`.
    pub fn metrics_endpoint(&self) -> Result<crate::metrics::access::EndpointAccess, ConfigError> {
        let principal = self.value(&SEDIMENT_METRICS_AUTH_PRINCIPAL).trim().to_string();
        crate::security::acl::parse_principal(&principal)
            .map_err(|e| invalid(SEDIMENT_METRICS_AUTH_PRINCIPAL.name, e.to_string()))?;
        let token =
            Some(self.value(&SEDIMENT_METRICS_AUTH_TOKEN).to_string()).filter(|t| !t.is_empty());
        Ok(crate::metrics::access::EndpointAccess {
            token,
            principal,
            max_connections: self.int(&SEDIMENT_METRICS_MAX_CONNECTIONS).max(1) as usize,
            request_timeout: std::time::Duration::from_millis(
                self.int(&SEDIMENT_METRICS_REQUEST_TIMEOUT_MS).max(1) as u64,
            ),
            max_concurrent_audits: self.int(&SEDIMENT_KEY_AUDIT_MAX_CONCURRENT).max(1) as usize,
            authorizer: None,
        })
    }

    /// The log layer's settings.
    pub fn log_manager_config(&self) -> LogManagerConfig {
        LogManagerConfig::from_values(self, self.tiered_storage_enabled())
    }

    /// The group coordinator's settings.
    pub fn group_config(&self) -> GroupConfig {
        GroupConfig::from_values(self)
    }

    /// The transaction coordinator's settings.
    pub fn transaction_config(&self) -> TransactionConfig {
        TransactionConfig::from_values(self)
    }

    /// Every key this broker knows with its effective value, for DescribeConfigs
    /// on the broker resource and `check-config`: (key, value, explicitly set, doc).
    pub fn describe(&self) -> Vec<(String, String, bool, &'static str, ConfigType)> {
        let mut out = Vec::new();
        for def in broker_keys().chain(log_config::broker_defaulted()) {
            let key = def.broker_key;
            if out.iter().any(|(k, ..): &(String, String, bool, &str, ConfigType)| k == key) {
                continue;
            }
            let explicit = self.explicit.get(key);
            let value = explicit.cloned().unwrap_or_else(|| def.default.to_string());
            let value = if def.kind == ConfigType::Password && !value.is_empty() {
                HIDDEN.to_string()
            } else {
                value
            };
            out.push((key.to_string(), value, explicit.is_some(), def.doc, def.kind));
        }
        for (key, value) in &self.explicit {
            if let Some((def, _)) = split_listener_key(key).and_then(|(_, base)| lookup(base)) {
                let value = if is_sensitive(key) { HIDDEN.to_string() } else { value.clone() };
                out.push((key.clone(), value, true, def.doc, def.kind));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// A configuration from `key=value` pairs, checked as at start (tests).
#[cfg(test)]
pub(crate) fn checked(pairs: &[&str]) -> Result<BrokerConfig, ConfigError> {
    let mut c = BrokerConfig::default();
    c.apply_overrides(pairs.iter().copied())?;
    c.check()?;
    Ok(c)
}

#[cfg(test)]
mod tests;

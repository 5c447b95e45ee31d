//! Broker configuration: a TOML file plus `--override key=value` pairs, with
//! Kafka's key names.
//!
//! Keys are written as in Kafka's `server.properties`. In TOML the dots make
//! nested tables (`log.dirs = "/data"` is `{log = {dirs = "/data"}}`); we flatten
//! them back to dotted names, so both `log.dirs = ...` and `[log] dirs = ...`
//! work. Every key must be known: an unknown key, a value of the wrong type or
//! out of range is an error that names the key. Values are kept as strings in
//! Kafka's syntax, which is also how DescribeConfigs reports them.
//!
//! Two families of keys exist:
//! - broker keys (`BROKER_CONFIGS`: listeners, log.dirs, num.partitions, ...);
//! - topic defaults (`log.segment.bytes`, `log.cleanup.policy`, ...), which are
//!   the `broker_key` of an entry in `log::config::LOG_CONFIGS` and are
//!   validated by the topic key's rules.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::log::config::{self as log_config, ConfigDef, ConfigType, LOG_CONFIGS};
use crate::log::LogManagerConfig;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid config {key}: {reason}")]
    Invalid { key: String, reason: String },
}

fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.to_string(), reason: reason.into() }
}

macro_rules! broker_def {
    ($name:literal, $kind:ident, $default:expr, $min:expr, $doc:literal) => {
        ConfigDef {
            name: $name,
            broker_key: $name,
            kind: ConfigType::$kind,
            default: $default,
            min: $min,
            max: None,
            one_of: &[],
            doc: $doc,
        }
    };
}

/// Broker-only keys (topic defaults live in `LOG_CONFIGS`).
pub const BROKER_CONFIGS: &[ConfigDef] = &[
    broker_def!("node.id", Int, "1", Some(0.0), "this broker's id, reported in Metadata and DescribeCluster"),
    broker_def!("listeners", String, "PLAINTEXT://:9092", None,
        "where the broker listens: PLAINTEXT://host:port (empty host: all interfaces)"),
    broker_def!("advertised.listeners", String, "", None,
        "the address clients are told to connect to; empty: the listener's (localhost when it binds all interfaces)"),
    broker_def!("log.dirs", String, "data", None, "comma-separated directories that hold the partitions"),
    broker_def!("num.partitions", Int, "1", Some(1.0), "partitions of an auto-created topic or a CreateTopics without a count"),
    broker_def!("default.replication.factor", Int, "1", Some(1.0), "replication factor of auto-created topics (only 1 is possible on one node)"),
    broker_def!("auto.create.topics.enable", Boolean, "true", None, "create a topic when Metadata asks for an unknown one"),
    broker_def!("delete.topic.enable", Boolean, "true", None, "allow DeleteTopics"),
    broker_def!("socket.request.max.bytes", Int, "104857600", Some(1.0), "largest request frame accepted; bigger frames close the connection"),
    broker_def!("log.flush.before.ack", Boolean, "false", None,
        "sediment: fsync each append before acknowledging it (survives power loss, costs latency)"),
    broker_def!("log.retention.check.interval.ms", Long, "300000", Some(1.0), "how often retention runs"),
    broker_def!("log.flush.scheduler.interval.ms", Long, "9223372036854775807", Some(1.0),
        "accepted for compatibility with Kafka and not used: sediment checks flush.ms every second"),
    broker_def!("producer.id.expiration.ms", Int, "86400000", Some(1.0),
        "how long a producer's state (epoch, last sequences) is kept after its last write when it has no open transaction"),
    broker_def!("producer.id.expiration.check.interval.ms", Int, "600000", Some(1.0),
        "how often producer state past producer.id.expiration.ms is removed"),
    broker_def!("log.flush.offset.checkpoint.interval.ms", Int, "60000", Some(0.0), "how often the recovery point is checkpointed"),
    broker_def!("log.flush.start.offset.checkpoint.interval.ms", Int, "60000", Some(0.0), "how often log start offsets are checkpointed"),
    broker_def!("log.retention.hours", Int, "168", None, "retention.ms default in hours, when log.retention.ms and .minutes are unset"),
    broker_def!("log.retention.minutes", Int, "", None, "retention.ms default in minutes, when log.retention.ms is unset"),
    broker_def!("log.roll.hours", Int, "168", Some(1.0), "segment.ms default in hours, when log.roll.ms is unset"),
    broker_def!("log.cleaner.enable", Boolean, "true", None, "run the log cleaner threads (compacted topics are only compacted when true)"),
    broker_def!("log.cleaner.threads", Int, "1", Some(0.0), "cleaner threads; they share the dedupe buffer and the I/O limit"),
    broker_def!("log.cleaner.dedupe.buffer.size", Long, "134217728", Some(0.0),
        "bytes of offset map (24 per key) for all cleaner threads together, split evenly among them"),
    broker_def!("log.cleaner.io.buffer.size", Int, "524288", Some(0.0),
        "bytes of read plus write buffer for all cleaner threads together (each thread starts with its share, halved per buffer)"),
    broker_def!("log.cleaner.io.buffer.load.factor", Double, "0.9", Some(0.0), "share of the offset map's slots that may be filled (above 0, at most 1)"),
    broker_def!("log.cleaner.io.max.bytes.per.second", Double, "1.7976931348623157E308", Some(0.0),
        "read plus write bytes per second all cleaner threads together may use"),
    broker_def!("log.cleaner.backoff.ms", Long, "15000", Some(0.0), "how long a cleaner thread sleeps when no log is eligible"),
    broker_def!("log.cleaner.uncleanable.retry.backoff.ms", Long, "300000", Some(0.0),
        "sediment: how long a partition that failed to clean stays uncleanable before it is tried again (Kafka: until restart)"),
    broker_def!("metrics.listen", String, "127.0.0.1:9404", None,
        "sediment: host:port of the HTTP endpoint serving /metrics (Prometheus) and /cleaner-status (JSON); empty disables it"),
    broker_def!("offsets.topic.num.partitions", Int, "50", Some(1.0), "partitions of __consumer_offsets (fixed once the topic exists)"),
    broker_def!("offsets.topic.segment.bytes", Int, "104857600", Some(1.0), "segment.bytes of __consumer_offsets"),
    broker_def!("offsets.topic.replication.factor", Int, "1", Some(1.0), "replication factor of __consumer_offsets (only 1 is possible on one node)"),
    broker_def!("offsets.retention.minutes", Int, "10080", Some(1.0), "how long an empty group's committed offsets are kept"),
    broker_def!("offsets.retention.check.interval.ms", Long, "600000", Some(1.0), "how often expired offsets are looked for"),
    broker_def!("offset.metadata.max.bytes", Int, "4096", Some(0.0), "largest metadata string of a committed offset"),
    broker_def!("group.initial.rebalance.delay.ms", Int, "3000", Some(0.0), "how long a new group waits for more members before its first rebalance"),
    broker_def!("group.min.session.timeout.ms", Int, "6000", Some(0.0), "smallest session.timeout.ms a member may ask for"),
    broker_def!("group.max.session.timeout.ms", Int, "1800000", Some(0.0), "largest session.timeout.ms a member may ask for"),
    broker_def!("group.max.size", Int, "2147483647", Some(1.0), "largest number of members in a group"),
    broker_def!("transaction.state.log.num.partitions", Int, "50", Some(1.0), "partitions of __transaction_state (fixed once the topic exists)"),
    broker_def!("transaction.state.log.segment.bytes", Int, "104857600", Some(1.0), "segment.bytes of __transaction_state"),
    broker_def!("transaction.state.log.replication.factor", Int, "1", Some(1.0), "replication factor of __transaction_state (only 1 is possible on one node)"),
    broker_def!("transaction.state.log.min.isr", Int, "1", Some(1.0), "min.insync.replicas of __transaction_state (accepted; one node is always in sync)"),
    broker_def!("transaction.max.timeout.ms", Int, "900000", Some(1.0), "largest transaction.timeout.ms a producer may ask for"),
    broker_def!("transactional.id.expiration.ms", Int, "604800000", Some(1.0), "how long a transactional id with no transaction is kept after its last update"),
    broker_def!("transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, "10000", Some(1.0), "how often transactions past their timeout are looked for and aborted"),
    broker_def!("transaction.remove.expired.transaction.cleanup.interval.ms", Int, "3600000", Some(1.0), "how often expired transactional ids are looked for and removed"),
    broker_def!("transaction.partition.verification.enable", Boolean, "true", None,
        "check with the transaction coordinator that a partition is in the transaction before a transactional Produce or TxnOffsetCommit opens one there"),
];

/// The resolved broker configuration.
#[derive(Debug, Clone, Default)]
pub struct BrokerConfig {
    /// Every key set explicitly (file or override), validated, in Kafka syntax.
    explicit: BTreeMap<String, String>,
}

/// A PLAINTEXT listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub host: String,
    pub port: u16,
}

impl Listener {
    /// Parse `PLAINTEXT://host:port` (the first entry of a list).
    ///
    /// # Errors
    /// A protocol other than PLAINTEXT or a bad port, naming `key`.
    pub fn parse(key: &str, value: &str) -> Result<Self, ConfigError> {
        let first = value.split(',').next().unwrap_or("").trim();
        let rest = first.strip_prefix("PLAINTEXT://").ok_or_else(|| {
            invalid(key, format!("{first:?}: only PLAINTEXT://host:port listeners are supported"))
        })?;
        let (host, port) =
            rest.rsplit_once(':').ok_or_else(|| invalid(key, format!("{first:?} has no port")))?;
        let port = port.parse::<u16>().map_err(|_| invalid(key, format!("{first:?}: bad port")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        Ok(Self { host, port })
    }
}

fn lookup(key: &str) -> Option<(&'static ConfigDef, Option<&'static str>)> {
    if let Some(def) = BROKER_CONFIGS.iter().find(|d| d.name == key) {
        return Some((def, None));
    }
    LOG_CONFIGS.iter().find(|d| d.broker_key == key).map(|d| (d, Some(d.name)))
}

/// Validate one broker key's value.
///
/// # Errors
/// Unknown key, wrong type, out of range — naming the key.
pub fn validate(key: &str, value: &str) -> Result<(), ConfigError> {
    let (def, topic_key) = lookup(key).ok_or_else(|| invalid(key, "unknown config key"))?;
    if let Some(topic_key) = topic_key {
        return log_config::validate_value(topic_key, value)
            .map_err(|e| invalid(key, e.to_string()));
    }
    let v = value.trim();
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
            if key == "log.cleaner.io.buffer.load.factor" && !(n > 0.0 && n <= 1.0) {
                return Err(invalid(key, format!("{v} must be above 0 and at most 1")));
            }
        }
        ConfigType::String | ConfigType::List => {
            if key == "listeners" || (key == "advertised.listeners" && !v.is_empty()) {
                Listener::parse(key, v)?;
            }
            if key == "metrics.listen" && !v.is_empty() {
                use std::net::ToSocketAddrs;
                if v.to_socket_addrs().map_or(true, |mut a| a.next().is_none()) {
                    return Err(invalid(
                        key,
                        format!("{v:?} is not host:port (empty disables the endpoint)"),
                    ));
                }
            }
            if key == "log.dirs" && v.split(',').all(|d| d.trim().is_empty()) {
                return Err(invalid(key, "at least one directory is needed"));
            }
        }
    }
    Ok(())
}

fn toml_scalar(key: &str, value: &toml::Value) -> Result<String, ConfigError> {
    Ok(match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(items) => {
            let parts: Result<Vec<_>, _> = items.iter().map(|v| toml_scalar(key, v)).collect();
            parts?.join(",")
        }
        toml::Value::Datetime(_) | toml::Value::Table(_) => {
            return Err(invalid(key, "expected a string, number, boolean or list"))
        }
    })
}

fn flatten(
    prefix: &str,
    table: &toml::Table,
    out: &mut BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    for (k, v) in table {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out)?,
            other => {
                out.insert(key.clone(), toml_scalar(&key, other)?);
            }
        }
    }
    Ok(())
}

/// A key's default as a TOML value (strings quoted, numbers and booleans bare).
fn toml_literal(kind: ConfigType, value: &str) -> String {
    match kind {
        ConfigType::Boolean | ConfigType::Int | ConfigType::Long | ConfigType::Double => {
            value.to_string()
        }
        ConfigType::String | ConfigType::List => toml::Value::String(value.to_string()).to_string(),
    }
}

fn kind_name(kind: ConfigType) -> &'static str {
    match kind {
        ConfigType::Boolean => "boolean",
        ConfigType::Int => "int",
        ConfigType::Long => "long",
        ConfigType::Double => "double",
        ConfigType::String => "string",
        ConfigType::List => "list",
    }
}

/// A section of [`config_template`]: a title, a note, and which broker keys
/// belong there (the first section that claims a key gets it).
type TemplateSection = (&'static str, &'static str, fn(&str) -> bool);

const TEMPLATE_SECTIONS: &[TemplateSection] = &[
    ("Broker and network", "", |k| matches!(k, "node.id" | "listeners" | "advertised.listeners" | "socket.request.max.bytes")),
    ("Metrics", "", |k| k == "metrics.listen"),
    ("Topics", "", |k| matches!(k, "num.partitions" | "default.replication.factor" | "auto.create.topics.enable" | "delete.topic.enable")),
    ("Storage", "", |k| k == "log.dirs" || (k.starts_with("log.") && !k.starts_with("log.cleaner."))),
    (
        "Log cleaner",
        "The cleaner threads. The per-topic knobs of compaction (min.cleanable.dirty.ratio,\n# min/max.compaction.lag.ms, delete.retention.ms) are topic defaults, below.",
        |k| k.starts_with("log.cleaner."),
    ),
    ("Consumer groups", "", |k| k.starts_with("offsets.") || k.starts_with("offset.") || k.starts_with("group.")),
    ("Transactions", "", |k| k.starts_with("transaction.") || k.starts_with("transactional.")),
    ("Other broker keys", "", |_| true),
];

/// A TOML file listing every key the broker knows (`BROKER_CONFIGS` and the
/// `log.*` defaults of every topic key in `LOG_CONFIGS`), each with its doc,
/// type, default and, commented out, a line setting it to the default: as it
/// is, the file runs the broker on the defaults. `config/server.toml` is this
/// text (`sediment config-template`).
pub fn config_template() -> String {
    use std::fmt::Write;
    let mut out = String::new();
    out.push_str(
        "# sediment: every broker key, with its Kafka name, default and meaning.\n\
         #\n\
         # Generated by `sediment config-template > config/server.toml`; a test\n\
         # (tests/ops_files.rs) fails when this file and the broker's keys differ.\n\
         # Every key is commented out, so as it is this file runs the broker on the\n\
         # defaults; uncomment a line to change a key. Keys have Kafka's names (as in\n\
         # server.properties). In TOML the dots nest tables, so `log.dirs = \"/data\"`\n\
         # and `[log]` + `dirs = \"/data\"` are the same key. Strings and lists are\n\
         # quoted (\"compact,delete\"); numbers and booleans are bare.\n\
         #\n\
         #   sediment check-config config/server.toml    # validate, print the effective config\n\
         #   sediment serve --config config/server.toml [--override key=value]...\n\
         #\n\
         # $SEDIMENT_CONFIG names the file when --config is absent; $SEDIMENT_OVERRIDES\n\
         # (whitespace-separated key=value) applies after the file, --override last.\n\
         # An unknown key, a wrong type or a value out of range is an error naming the key.\n",
    );
    let entry = |out: &mut String, def: &ConfigDef, key: &str, topic_key: Option<&str>| {
        let _ = writeln!(out);
        let _ = write!(out, "# {}", def.doc);
        if let Some(t) = topic_key {
            let _ = write!(out, " [topic key: {t}]");
        }
        let _ = writeln!(out);
        let mut facts = vec![kind_name(def.kind).to_string()];
        if def.default.is_empty() {
            facts.push("unset by default".to_string());
        } else {
            facts.push(format!("default {}", def.default));
        }
        match (def.min, def.max) {
            (Some(min), Some(max)) => facts.push(format!("from {min} to {max}")),
            (Some(min), None) => facts.push(format!("at least {min}")),
            (None, Some(max)) => facts.push(format!("at most {max}")),
            (None, None) => {}
        }
        if !def.one_of.is_empty() {
            facts.push(format!("one of {}", def.one_of.join(", ")));
        }
        let _ = writeln!(out, "# {}", facts.join("; "));
        if def.default.is_empty() && !matches!(def.kind, ConfigType::String | ConfigType::List) {
            let _ = writeln!(out, "#{key} = <{}>", kind_name(def.kind));
        } else {
            let _ = writeln!(out, "#{key} = {}", toml_literal(def.kind, def.default));
        }
    };
    let rule = |out: &mut String, title: &str, note: &str| {
        let _ = writeln!(out, "\n# {}\n# {title}\n# {}", "=".repeat(76), "=".repeat(76));
        if !note.is_empty() {
            let _ = writeln!(out, "# {note}");
        }
    };
    let mut placed: Vec<&str> = Vec::new();
    for (title, note, belongs) in TEMPLATE_SECTIONS {
        let defs: Vec<&ConfigDef> = BROKER_CONFIGS
            .iter()
            .filter(|d| !placed.contains(&d.name) && belongs(d.name))
            .collect();
        if defs.is_empty() {
            continue;
        }
        rule(&mut out, title, note);
        for def in defs {
            placed.push(def.name);
            entry(&mut out, def, def.name, None);
        }
    }
    rule(
        &mut out,
        "Topic defaults",
        "The broker's default for a topic-level key (in brackets); a topic's own config\n\
         # (kafka-topics --create --config, kafka-configs --alter) overrides it.",
    );
    for def in LOG_CONFIGS {
        if placed.contains(&def.broker_key) {
            continue;
        }
        placed.push(def.broker_key);
        entry(&mut out, def, def.broker_key, Some(def.name));
    }
    out
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
        flatten("", &table, &mut explicit)?;
        let mut config = Self::default();
        for (k, v) in explicit {
            config.set(&k, &v)?;
        }
        Ok(config)
    }

    /// Read a TOML file.
    ///
    /// # Errors
    /// As `from_toml`, plus I/O errors.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::from_toml(&text, path)
    }

    /// Set one key (an `--override`).
    ///
    /// # Errors
    /// Invalid key or value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
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

    /// The effective value of a broker key (explicit, else default).
    pub fn get(&self, key: &str) -> Option<String> {
        if let Some(v) = self.explicit.get(key) {
            return Some(v.clone());
        }
        let (def, _) = lookup(key)?;
        Some(def.default.to_string())
    }

    fn int(&self, key: &str) -> i64 {
        // Validated on set; defaults are valid by construction.
        self.get(key).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    fn boolean(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| v == "true")
    }

    /// `transaction.partition.verification.enable`: whether transactional
    /// Produce and TxnOffsetCommit ask the coordinator before opening a
    /// transaction on a partition.
    pub fn transaction_partition_verification_enable(&self) -> bool {
        self.boolean("transaction.partition.verification.enable")
    }

    pub fn node_id(&self) -> i32 {
        self.int("node.id") as i32
    }

    pub fn num_partitions(&self) -> i32 {
        self.int("num.partitions") as i32
    }

    pub fn auto_create_topics(&self) -> bool {
        self.boolean("auto.create.topics.enable")
    }

    pub fn delete_topic_enable(&self) -> bool {
        self.boolean("delete.topic.enable")
    }

    pub fn socket_request_max_bytes(&self) -> usize {
        self.int("socket.request.max.bytes") as usize
    }

    /// The listener to bind.
    ///
    /// # Errors
    /// A malformed `listeners` value.
    pub fn listener(&self) -> Result<Listener, ConfigError> {
        Listener::parse("listeners", &self.get("listeners").unwrap_or_default())
    }

    /// The address to bind.
    ///
    /// # Errors
    /// A malformed listener or an unresolvable host.
    pub fn bind_addr(&self) -> Result<SocketAddr, ConfigError> {
        let l = self.listener()?;
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
            .ok_or_else(|| invalid("listeners", format!("cannot resolve {text}")))
    }

    /// Host and port clients are told to use; `bound_port` replaces a port of 0.
    ///
    /// # Errors
    /// A malformed listener.
    pub fn advertised(&self, bound_port: u16) -> Result<Listener, ConfigError> {
        if let Some(a) = self.explicit("advertised.listeners").filter(|v| !v.is_empty()) {
            let mut l = Listener::parse("advertised.listeners", a)?;
            if l.port == 0 {
                l.port = bound_port;
            }
            return Ok(l);
        }
        let mut l = self.listener()?;
        if l.host.is_empty() || l.host == "0.0.0.0" || l.host == "::" {
            l.host = "localhost".to_string();
        }
        l.port = bound_port;
        Ok(l)
    }

    pub fn log_dirs(&self) -> Vec<PathBuf> {
        self.get("log.dirs")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect()
    }

    /// The topic-level defaults this broker sets, keyed by topic key.
    pub fn topic_defaults(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        // Kafka's coarser synonyms first, so the exact *.ms keys win.
        if let Some(h) = self.explicit("log.retention.hours") {
            if let Ok(h) = h.parse::<i64>() {
                out.insert(
                    "retention.ms".to_string(),
                    if h < 0 { "-1".to_string() } else { (h * 3_600_000).to_string() },
                );
            }
        }
        if let Some(m) = self.explicit("log.retention.minutes") {
            if let Ok(m) = m.parse::<i64>() {
                out.insert(
                    "retention.ms".to_string(),
                    if m < 0 { "-1".to_string() } else { (m * 60_000).to_string() },
                );
            }
        }
        if let Some(h) = self.explicit("log.roll.hours") {
            if let Ok(h) = h.parse::<i64>() {
                out.insert("segment.ms".to_string(), (h * 3_600_000).to_string());
            }
        }
        for def in LOG_CONFIGS {
            if let Some(v) = self.explicit.get(def.broker_key) {
                out.insert(def.name.to_string(), v.clone());
            }
        }
        out
    }

    /// The cleaner threads' settings (`log.cleaner.*`).
    pub fn cleaner_config(&self) -> crate::cleaner::LogCleanerConfig {
        let double = |key: &str| self.get(key).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        crate::cleaner::LogCleanerConfig {
            enable: self.boolean("log.cleaner.enable"),
            num_threads: self.int("log.cleaner.threads").max(0) as usize,
            dedupe_buffer_size: self.int("log.cleaner.dedupe.buffer.size").max(0) as u64,
            io_buffer_size: self.int("log.cleaner.io.buffer.size").max(0) as usize,
            io_buffer_load_factor: double("log.cleaner.io.buffer.load.factor"),
            max_io_bytes_per_second: double("log.cleaner.io.max.bytes.per.second"),
            backoff_ms: self.int("log.cleaner.backoff.ms").max(0),
            uncleanable_retry_backoff_ms: self
                .int("log.cleaner.uncleanable.retry.backoff.ms")
                .max(0),
            max_message_size: self
                .topic_defaults()
                .get("max.message.bytes")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1_048_588),
        }
    }

    /// Where the metrics endpoint listens; `None` when disabled.
    pub fn metrics_listen(&self) -> Option<String> {
        self.get("metrics.listen").filter(|v| !v.trim().is_empty())
    }

    /// The log layer's settings.
    pub fn log_manager_config(&self) -> LogManagerConfig {
        let dirs = self.log_dirs();
        let mut c =
            LogManagerConfig::new(dirs.first().cloned().unwrap_or_else(|| PathBuf::from("data")));
        c.log_dirs = dirs;
        c.topic_defaults = self.topic_defaults();
        c.flush_before_ack = self.boolean("log.flush.before.ack");
        c.retention_check_interval_ms = self.int("log.retention.check.interval.ms");
        c.flush_scheduler_interval_ms = self.int("log.flush.scheduler.interval.ms");
        c.flush_offset_checkpoint_interval_ms = self.int("log.flush.offset.checkpoint.interval.ms");
        c.flush_start_offset_checkpoint_interval_ms =
            self.int("log.flush.start.offset.checkpoint.interval.ms");
        c.producer_id_expiration_ms = self.int("producer.id.expiration.ms");
        c.producer_id_expiration_check_interval_ms =
            self.int("producer.id.expiration.check.interval.ms");
        c
    }

    /// The group coordinator's settings.
    pub fn group_config(&self) -> crate::group::GroupConfig {
        crate::group::GroupConfig {
            offsets_topic_partitions: self.int("offsets.topic.num.partitions") as i32,
            offsets_topic_segment_bytes: self.int("offsets.topic.segment.bytes"),
            offsets_retention_ms: self.int("offsets.retention.minutes") * 60_000,
            offsets_retention_check_interval_ms: self.int("offsets.retention.check.interval.ms"),
            initial_rebalance_delay_ms: self.int("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms: self.int("group.min.session.timeout.ms") as i32,
            max_session_timeout_ms: self.int("group.max.session.timeout.ms") as i32,
            max_size: self.int("group.max.size") as usize,
            offset_metadata_max_bytes: self.int("offset.metadata.max.bytes") as usize,
        }
    }

    /// The transaction coordinator's settings.
    pub fn transaction_config(&self) -> crate::txn::TransactionConfig {
        crate::txn::TransactionConfig {
            transaction_log_num_partitions: self.int("transaction.state.log.num.partitions") as i32,
            transaction_log_segment_bytes: self.int("transaction.state.log.segment.bytes"),
            transaction_max_timeout_ms: self.int("transaction.max.timeout.ms") as i32,
            transactional_id_expiration_ms: self.int("transactional.id.expiration.ms"),
            abort_timed_out_transactions_interval_ms: self
                .int("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_expired_transactional_ids_interval_ms: self
                .int("transaction.remove.expired.transaction.cleanup.interval.ms"),
        }
    }

    /// Every key this broker knows with its effective value, for DescribeConfigs
    /// on the broker resource and `check-config`: (key, value, explicitly set, doc).
    pub fn describe(&self) -> Vec<(String, String, bool, &'static str, ConfigType)> {
        let mut out = Vec::new();
        for def in BROKER_CONFIGS.iter().chain(LOG_CONFIGS.iter()) {
            let key = def.broker_key;
            if out.iter().any(|(k, ..): &(String, String, bool, &str, ConfigType)| k == key) {
                continue;
            }
            let explicit = self.explicit.get(key);
            let value = explicit.cloned().unwrap_or_else(|| def.default.to_string());
            out.push((key.to_string(), value, explicit.is_some(), def.doc, def.kind));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_keys_flatten_and_validate() {
        let text = "listeners = \"PLAINTEXT://127.0.0.1:0\"\nlog.dirs = \"/tmp/x\"\nnum.partitions = 3\nlog.cleanup.policy = \"compact\"\n[log.segment]\nbytes = 2048\n";
        let c = BrokerConfig::from_toml(text, Path::new("t.toml")).unwrap();
        assert_eq!(c.num_partitions(), 3);
        assert_eq!(c.log_dirs(), vec![PathBuf::from("/tmp/x")]);
        let d = c.topic_defaults();
        assert_eq!(d["cleanup.policy"], "compact");
        assert_eq!(d["segment.bytes"], "2048");
        assert_eq!(c.listener().unwrap(), Listener { host: "127.0.0.1".into(), port: 0 });
    }

    #[test]
    fn errors_name_the_key() {
        for (text, key) in [
            ("no.such.key = 1", "no.such.key"),
            ("num.partitions = \"many\"", "num.partitions"),
            ("num.partitions = 0", "num.partitions"),
            ("log.cleanup.policy = \"shred\"", "log.cleanup.policy"),
            ("listeners = \"SSL://:9093\"", "listeners"),
            ("log.segment.bytes = 3", "log.segment.bytes"),
        ] {
            match BrokerConfig::from_toml(text, Path::new("t.toml")) {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn cleaner_keys_have_kafkas_defaults() {
        let c = BrokerConfig::default().cleaner_config();
        assert!(c.enable);
        assert_eq!(
            (c.num_threads, c.dedupe_buffer_size, c.io_buffer_size, c.backoff_ms),
            (1, 134_217_728, 524_288, 15_000)
        );
        assert_eq!(c.io_buffer_load_factor, 0.9);
        assert_eq!(c.max_io_bytes_per_second, f64::MAX);
        assert_eq!(BrokerConfig::default().metrics_listen().as_deref(), Some("127.0.0.1:9404"));
        let mut b = BrokerConfig::default();
        b.apply_overrides(["metrics.listen=", "log.cleaner.threads=2"]).unwrap();
        assert_eq!(b.metrics_listen(), None);
        assert_eq!(b.cleaner_config().num_threads, 2);
        for bad in [
            "log.cleaner.io.buffer.load.factor=0",
            "log.cleaner.io.buffer.load.factor=1.5",
            "log.cleaner.threads=-1",
            "log.cleaner.io.max.bytes.per.second=-5",
            "metrics.listen=nowhere",
        ] {
            match b.apply_overrides([bad]) {
                Err(ConfigError::Invalid { key, .. }) => {
                    assert_eq!(key, bad.split('=').next().unwrap())
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn defaults_and_overrides() {
        let mut c = BrokerConfig::default();
        assert_eq!(c.listener().unwrap().port, 9092);
        assert_eq!(c.socket_request_max_bytes(), 104_857_600);
        c.apply_overrides(["log.retention.hours=1", "auto.create.topics.enable=false"]).unwrap();
        assert_eq!(c.topic_defaults()["retention.ms"], "3600000");
        assert!(!c.auto_create_topics());
        assert!(c.apply_overrides(["novalue"]).is_err());
        assert_eq!(c.advertised(1234).unwrap(), Listener { host: "localhost".into(), port: 1234 });
    }
}

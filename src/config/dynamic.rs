//! Broker dynamic configs (Kafka's `DynamicBrokerConfig`): the keys Kafka
//! lets operators change on a running broker with `kafka-configs
//! --entity-type brokers (--entity-default | --entity-name <node.id>)
//! --alter`, kept in `sediment-dynamic-broker-configs.json` in the first log
//! dir and layered as Kafka does, most specific first: per-broker dynamic >
//! cluster-wide dynamic default > the config file (and overrides) > Kafka's
//! default.
//!
//! Which keys are dynamic: the cleaner's pool settings
//! (`cleaner::config::RECONFIGURABLE`, Kafka's `LogCleaner.ReconfigurableConfigs`),
//! the replication throttles' rates (`leader/follower.replication.throttled.rate`)
//! and every topic default (`log.segment.bytes`, `log.retention.ms`,
//! `log.cleaner.min.cleanable.ratio`, ... Kafka's `DynamicLogConfig`: the
//! primary broker key of each topic key, so not `log.retention.hours`). Any
//! other known key is refused with Kafka's "Cannot update these configs
//! dynamically".
//!
//! Invariants:
//! * A change is validated whole against the layers it would produce (types
//!   and bounds per key, the cleaner's thread bounds, every topic's config
//!   under the new defaults, the cleaner's per-thread budget) before
//!   anything is written; then the file is replaced atomically
//!   (`security::store`) and only then the layers in memory, so a crash
//!   leaves the old or the new set, and a restart applies what was answered.
//! * One change at a time (the layers' lock is held from validation to the
//!   file write).
//! * An entry of the file that no longer validates (a key made static, a
//!   value out of new bounds) is dropped at start with a warning, as Kafka
//!   drops invalid dynamic props, instead of stopping the broker.
//!
//! In a cluster ([`DynamicBrokerConfig::use_cluster`]) etcd holds the
//! layers instead of the file: `config/brokers/<default>` for the cluster
//! default and `config/brokers/<id>` per broker (ZooKeeper-mode Kafka's
//! names), each a JSON object of keys and values. A change is validated
//! here as above, then written by compare-and-swap on the key's revision
//! in the image the layers came from (a change another broker made
//! meanwhile fails it; the client may try again), and answered once this
//! broker's image applied it. Every broker applies the layers of each new
//! image through the hook it registered (topic defaults, the cleaner), so
//! a cluster default takes effect on all of them; entries that no longer
//! validate are dropped from what is applied, with a warning.

use std::collections::BTreeMap;
use std::path::PathBuf;

use parking_lot::Mutex;

use std::sync::{Arc, OnceLock};

use super::{
    dynamic_ignored, ignored_reason, lookup, parses_as, BrokerConfig, ConfigError, DynamicScope,
};
use crate::cleaner::config::{LOG_CLEANER_THREADS, RECONFIGURABLE};
use crate::cluster::image::{MetadataImage, StoredKeys};
use crate::cluster::security_store::{ClusterSecurityStore, Written};
use crate::log::config::{broker_defaulted, LogConfig};
use crate::log::manager_config::synonyms;
use crate::replica::replication_quota::RECONFIGURABLE_RATES;
use crate::security::store::{self, StoreError};

/// The file, in the first log dir.
pub const DYNAMIC_CONFIG_FILE: &str = "sediment-dynamic-broker-configs.json";

/// Whether `key` may be changed on a running broker: the cleaner's
/// reconfigurable keys, the replication throttles' rates and the topic
/// defaults.
pub fn is_dynamic(key: &str) -> bool {
    RECONFIGURABLE.iter().any(|d| d.broker_key == key)
        || RECONFIGURABLE_RATES.iter().any(|d| d.name == key)
        || broker_defaulted().any(|d| d.broker_key == key)
}

/// Which dynamic layer a change is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynamicLevel {
    /// `--entity-default`: every broker of the cluster.
    ClusterDefault,
    /// `--entity-name <node.id>`: this broker only.
    PerBroker,
}

/// The two dynamic layers, as stored.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DynamicLayers {
    #[serde(default)]
    pub cluster_default: BTreeMap<String, String>,
    #[serde(default)]
    pub per_broker: BTreeMap<String, String>,
}

impl DynamicLayers {
    pub fn level(&self, level: DynamicLevel) -> &BTreeMap<String, String> {
        match level {
            DynamicLevel::ClusterDefault => &self.cluster_default,
            DynamicLevel::PerBroker => &self.per_broker,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DynamicConfigError {
    /// A key no broker knows.
    #[error("Unknown config name: {0}")]
    Unknown(String),
    /// Known keys that only the config file may set.
    #[error("Cannot update these configs dynamically: Set({})", .0.join(", "))]
    NotDynamic(Vec<String>),
    /// Keys Kafka changes per broker only, asked of the cluster default.
    #[error(
        "Cannot update these configs at default cluster level, broker id must be specified: [{}]",
        .0.join(", ")
    )]
    PerBrokerOnly(Vec<String>),
    /// A value out of its key's rules, or a change the cleaner refuses.
    #[error("{0}")]
    Invalid(String),
    #[error("the dynamic broker config file: {0}")]
    Store(#[from] StoreError),
}

/// The static config with the dynamic layers over it.
#[derive(Debug)]
pub struct DynamicBrokerConfig {
    static_config: BrokerConfig,
    path: PathBuf,
    layers: Mutex<DynamicLayers>,
    /// In a cluster: where the layers are kept instead of the file.
    cluster: OnceLock<ClusterLayers>,
}

/// How a broker applies new effective configs (topic defaults, cleaner).
pub type ApplyHook = Box<dyn Fn(&BrokerConfig) -> Result<(), DynamicConfigError> + Send + Sync>;

/// The layers in etcd (module doc).
struct ClusterLayers {
    store: Arc<ClusterSecurityStore>,
    node_id: i32,
    apply: ApplyHook,
    /// The image revision and keys the layers in force came from.
    installed: Mutex<(i64, Arc<StoredKeys>)>,
}

impl std::fmt::Debug for ClusterLayers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterLayers").field("node_id", &self.node_id).finish_non_exhaustive()
    }
}

/// `static_config` with `layers` applied: the effective configuration.
///
/// # Errors
/// A layered value that does not validate (naming the key).
fn layered(
    static_config: &BrokerConfig,
    layers: &DynamicLayers,
) -> Result<BrokerConfig, ConfigError> {
    let mut config = static_config.clone();
    for (k, v) in layers.cluster_default.iter().chain(&layers.per_broker) {
        config.set(k, v)?;
    }
    Ok(config)
}

impl DynamicBrokerConfig {
    /// Read the layers stored in the first log dir of `static_config`.
    ///
    /// # Errors
    /// The file cannot be read or is not the expected JSON.
    pub fn open(static_config: BrokerConfig) -> Result<Self, DynamicConfigError> {
        let dir =
            static_config.log_dirs().first().cloned().unwrap_or_else(|| PathBuf::from("data"));
        let path = dir.join(DYNAMIC_CONFIG_FILE);
        let stored: DynamicLayers = match store::read_bounded(&path)? {
            None => DynamicLayers::default(),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| StoreError::Damaged { path: path.clone(), reason: e.to_string() })?,
        };
        let layers = validated(&static_config, &stored, &path.display().to_string());
        Ok(Self { static_config, path, layers: Mutex::new(layers), cluster: OnceLock::new() })
    }

    /// Keep the layers in etcd from now on (module doc): the file is no
    /// longer read or written, and `apply` is called with the effective
    /// config of every image whose layers differ from those in force.
    pub fn use_cluster(
        self: &Arc<Self>,
        store: Arc<ClusterSecurityStore>,
        node_id: i32,
        apply: ApplyHook,
    ) {
        let local = self.layers();
        if local != DynamicLayers::default() {
            tracing::warn!(
                path = %self.path.display(),
                "the dynamic broker config file is not used in a cluster: etcd holds the cluster's"
            );
        }
        let installed = Mutex::new((-1, Arc::new(StoredKeys::new())));
        let image = store.image();
        let follow = Arc::clone(&store);
        if self.cluster.set(ClusterLayers { store, node_id, apply, installed }).is_err() {
            return;
        }
        // The logs and the cleaner started with the file's layers: etcd's
        // replace them, applied when they differ.
        self.install(&image);
        follow.follow(self, |me, _, image| me.install(image));
    }

    /// Make `image`'s layers the ones in force, unless a newer image's are,
    /// and apply them if they changed.
    fn install(&self, image: &MetadataImage) {
        let Some(c) = self.cluster.get() else { return };
        let mut installed = c.installed.lock();
        if installed.0 >= image.revision || Arc::ptr_eq(&installed.1, &image.broker_configs) {
            return;
        }
        *installed = (image.revision, Arc::clone(&image.broker_configs));
        let keys = c.store.keys();
        let read = |node: Option<i32>| {
            let key = keys.broker_config(node);
            let stored = image.broker_configs.get(&key)?;
            match serde_json::from_slice::<BTreeMap<String, String>>(&stored.value) {
                Ok(entries) => Some(entries),
                Err(e) => {
                    tracing::warn!(key, "a dynamic broker config key does not parse; ignored: {e}");
                    None
                }
            }
        };
        let stored = DynamicLayers {
            cluster_default: read(None).unwrap_or_default(),
            per_broker: read(Some(c.node_id)).unwrap_or_default(),
        };
        let layers = validated(&self.static_config, &stored, "etcd");
        let new = {
            let mut current = self.layers.lock();
            if *current == layers {
                return;
            }
            *current = layers;
            layered(&self.static_config, &current).unwrap_or_else(|_| self.static_config.clone())
        };
        match (c.apply)(&new) {
            Ok(()) => tracing::info!(
                revision = image.revision,
                "dynamic broker configs applied from the cluster"
            ),
            Err(e) => tracing::warn!("dynamic broker configs from the cluster not applied: {e}"),
        }
    }

    /// In a cluster: the level's entries written to etcd, compared on the
    /// key's revision in the image the layers in force came from.
    fn write_to_cluster(
        &self,
        c: &ClusterLayers,
        level: DynamicLevel,
        entries: &BTreeMap<String, String>,
    ) -> Result<(), DynamicConfigError> {
        let node = (level == DynamicLevel::PerBroker).then_some(c.node_id);
        let key = c.store.keys().broker_config(node);
        let value = if entries.is_empty() {
            None
        } else {
            Some(
                serde_json::to_vec(entries)
                    .map_err(|e| DynamicConfigError::Invalid(e.to_string()))?,
            )
        };
        let base = Arc::clone(&c.installed.lock().1);
        let unavailable = |why: String| DynamicConfigError::Store(StoreError::Unavailable(why));
        match c.store.write_blocking(&base, vec![(key, value)]) {
            Ok(Written::Applied(image)) => {
                self.install(&image);
                Ok(())
            }
            Ok(Written::Raced) => Err(unavailable(
                "another broker changed the broker configs at the same time; try again".into(),
            )),
            Err(e) => Err(unavailable(e.to_string())),
        }
    }

    /// The config file's configuration (without the dynamic layers).
    pub fn static_config(&self) -> &BrokerConfig {
        &self.static_config
    }

    /// The dynamic layers in force.
    pub fn layers(&self) -> DynamicLayers {
        self.layers.lock().clone()
    }

    /// The effective configuration.
    pub fn current(&self) -> BrokerConfig {
        // The layers validated when they were set.
        layered(&self.static_config, &self.layers.lock())
            .unwrap_or_else(|_| self.static_config.clone())
    }

    /// Replace the entries of `level` with `entries`, after validating the
    /// result; alone, `apply` then gets the new effective configuration
    /// once the file is written. In a cluster the change goes to etcd and
    /// the hook of [`Self::use_cluster`] applies it instead (on every
    /// broker, this one included), so `apply` is not called. With
    /// `validate_only` nothing is written or applied.
    ///
    /// # Errors
    /// Unknown or static keys, invalid values, what `check` or `apply`
    /// refuse, and a failed write (the old layers then stay).
    pub fn alter(
        &self,
        level: DynamicLevel,
        entries: BTreeMap<String, String>,
        validate_only: bool,
        check: impl FnOnce(&BrokerConfig, &BrokerConfig) -> Result<(), DynamicConfigError>,
        apply: impl FnOnce(&BrokerConfig) -> Result<(), DynamicConfigError>,
    ) -> Result<(), DynamicConfigError> {
        let mut layers = self.layers.lock();
        check_keys(&entries, level)?;
        let mut candidate = layers.clone();
        *level_mut(&mut candidate, level) = entries;
        let old = layered(&self.static_config, &layers)
            .map_err(|e| DynamicConfigError::Invalid(e.to_string()))?;
        let new = layered(&self.static_config, &candidate)
            .map_err(|e| DynamicConfigError::Invalid(e.to_string()))?;
        validate_cleaner_threads(&old, &new)?;
        LogConfig::resolve(&new.topic_defaults(), BTreeMap::new())
            .map_err(|e| DynamicConfigError::Invalid(e.to_string()))?;
        check(&old, &new)?;
        if validate_only {
            return Ok(());
        }
        // Logged once per change: the keys whose value this change sets.
        let before = layers.level(level);
        let changed = candidate.level(level).iter().filter(|(k, v)| before.get(*k) != Some(*v));
        for (key, _) in changed.filter(|(k, _)| dynamic_ignored(k).is_some()) {
            let reason = ignored_reason(key).unwrap_or("ignored");
            tracing::warn!(
                key,
                reason,
                "accepted as Kafka accepts it; it has no effect on sediment"
            );
        }
        if let Some(c) = self.cluster.get() {
            // `install` takes the lock again, and applies what it stored.
            drop(layers);
            return self.write_to_cluster(c, level, &candidate.level(level).clone());
        }
        let json = serde_json::to_vec_pretty(&candidate)
            .map_err(|e| DynamicConfigError::Invalid(e.to_string()))?;
        store::write_atomically(&self.path, &json, 0o644)?;
        *layers = candidate;
        apply(&new)
    }
}

/// The entries of `stored` that validate over `static_config`, in order;
/// the others are dropped with a warning naming `source`.
fn validated(static_config: &BrokerConfig, stored: &DynamicLayers, source: &str) -> DynamicLayers {
    let mut layers = DynamicLayers::default();
    for (level, entries) in [
        (DynamicLevel::ClusterDefault, &stored.cluster_default),
        (DynamicLevel::PerBroker, &stored.per_broker),
    ] {
        for (k, v) in entries {
            let mut candidate = layers.clone();
            level_mut(&mut candidate, level).insert(k.clone(), v.clone());
            let entry = BTreeMap::from([(k.clone(), v.clone())]);
            match check_keys(&entry, level).and_then(|()| {
                let config = layered(static_config, &candidate)
                    .map_err(|e| DynamicConfigError::Invalid(e.to_string()))?;
                check_at_start(k, &config)
            }) {
                Ok(_) => layers = candidate,
                Err(e) => tracing::warn!(source, "dropping the dynamic config {k}={v}: {e}"),
            }
        }
    }
    layers
}

/// Where a broker value comes from (Kafka's `ConfigSource`, broker kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerConfigSource {
    DynamicBroker,
    DynamicDefault,
    Static,
    Default,
}

/// A broker key as DescribeConfigs reports it.
#[derive(Debug, Clone)]
pub struct BrokerEntry {
    pub name: String,
    pub value: String,
    pub source: BrokerConfigSource,
    pub read_only: bool,
    pub kind: crate::config_def::ConfigType,
    pub doc: &'static str,
    /// (key, value, source) in Kafka's order: by source, most specific
    /// first, and within a source by [`synonyms`] order.
    pub synonyms: Vec<(String, String, BrokerConfigSource)>,
}

impl DynamicBrokerConfig {
    /// The synonyms of broker key `key` that are set, in Kafka's order;
    /// `per_broker` false leaves the per-broker layer out (describing the
    /// cluster default).
    pub fn synonyms_of(
        &self,
        key: &str,
        per_broker: bool,
    ) -> Vec<(String, String, BrokerConfigSource)> {
        use BrokerConfigSource as S;
        let names: &[&str] = match synonyms(key) {
            [] => &[key][..],
            names => names,
        };
        let layers = self.layers();
        let empty = BTreeMap::new();
        let per_broker_layer = if per_broker { &layers.per_broker } else { &empty };
        let mut out = Vec::new();
        for (layer, source) in [
            (per_broker_layer, S::DynamicBroker),
            (&layers.cluster_default, S::DynamicDefault),
            (self.static_config.explicit_keys(), S::Static),
        ] {
            for n in names {
                if let Some(v) = layer.get(*n) {
                    out.push((n.to_string(), v.clone(), source));
                }
            }
        }
        // Kafka's default of a key with coarser synonyms is on the coarsest
        // (log.retention.hours=168; log.retention.ms has none).
        let default_names = if names.len() > 1 { &names[names.len() - 1..] } else { names };
        for n in default_names {
            if let Some((def, _)) = lookup(n).filter(|(d, _)| !d.default.is_empty()) {
                out.push((n.to_string(), def.default.to_string(), S::Default));
            }
        }
        out
    }

    /// Every broker key (`level` per broker) or the cluster-wide dynamic
    /// defaults only (`level` cluster default), as Kafka describes them.
    pub fn describe(&self, level: DynamicLevel) -> Vec<BrokerEntry> {
        let per_broker = level == DynamicLevel::PerBroker;
        let defaults = self.layers().cluster_default;
        let current = self.current();
        // A topic default set through a coarser synonym (log.retention.hours)
        // is reported in the key's own unit, as Kafka does.
        let topic_defaults = current.topic_defaults();
        let converted = |name: &str| {
            broker_defaulted()
                .find(|d| d.broker_key == name)
                .and_then(|d| topic_defaults.get(d.name).cloned())
        };
        current
            .describe()
            .into_iter()
            .filter(|(k, ..)| per_broker || defaults.contains_key(k))
            .map(|(name, value, _, doc, kind)| {
                let synonyms = self.synonyms_of(&name, per_broker);
                let (value, source) = match synonyms.first() {
                    Some((n, v, source)) if *n == name => (v.clone(), *source),
                    Some((_, _, source)) => (converted(&name).unwrap_or(value), *source),
                    None => (value, BrokerConfigSource::Default),
                };
                let read_only = !is_dynamic(&name);
                BrokerEntry { name, value, source, read_only, kind, doc, synonyms }
            })
            .chain(self.describe_ignored(&current, per_broker))
            .collect()
    }

    /// The Kafka keys set here that sediment ignores (`config::ignored`),
    /// described as set, with a documentation saying they have no effect.
    fn describe_ignored(&self, current: &BrokerConfig, per_broker: bool) -> Vec<BrokerEntry> {
        let defaults = self.layers().cluster_default;
        current
            .ignored_keys()
            .iter()
            .filter(|(k, _)| per_broker || defaults.contains_key(*k))
            .map(|(name, value)| {
                let mut synonyms = self.synonyms_of(name, per_broker);
                if synonyms.is_empty() {
                    // Set in the config file (the layers hold the rest).
                    synonyms.push((name.clone(), value.clone(), BrokerConfigSource::Static));
                }
                let dynamic = dynamic_ignored(name);
                BrokerEntry {
                    name: name.clone(),
                    value: synonyms[0].1.clone(),
                    source: synonyms[0].2,
                    read_only: dynamic.is_none(),
                    kind: dynamic.map_or(crate::config_def::ConfigType::String, |(kind, _)| kind),
                    doc: IGNORED_DOC,
                    synonyms,
                }
            })
            .collect()
    }
}

/// What DescribeConfigs documents an ignored key as.
const IGNORED_DOC: &str = "A Kafka key sediment accepts for compatibility: it has no effect here \
     (the broker's start-up warning and check-config give the reason)";

fn level_mut(layers: &mut DynamicLayers, level: DynamicLevel) -> &mut BTreeMap<String, String> {
    match level {
        DynamicLevel::ClusterDefault => &mut layers.cluster_default,
        DynamicLevel::PerBroker => &mut layers.per_broker,
    }
}

/// The type of a broker key (`None`: unknown). An ignored key is known:
/// of its Kafka type when Kafka changes it on a running broker, else a
/// string (the change is then refused as static, as Kafka refuses it).
pub fn key_kind(key: &str) -> Option<crate::config_def::ConfigType> {
    lookup(key).map(|(def, _)| def.kind).or_else(|| {
        let ignored = ignored_reason(key).map(|_| crate::config_def::ConfigType::String);
        dynamic_ignored(key).map(|(kind, _)| kind).or(ignored)
    })
}

/// Every key known, and all dynamic at `level`: served dynamic keys, and
/// the ignored keys Kafka changes on a running broker (their values of
/// their type; the SASL ones per broker only). Any other ignored key is
/// known and static.
fn check_keys(
    entries: &BTreeMap<String, String>,
    level: DynamicLevel,
) -> Result<(), DynamicConfigError> {
    let known = |k: &str| lookup(k).is_some() || ignored_reason(k).is_some();
    if let Some(unknown) = entries.keys().find(|k| !known(k)) {
        return Err(DynamicConfigError::Unknown(unknown.clone()));
    }
    let fixed: Vec<String> = entries
        .keys()
        .filter(|k| !is_dynamic(k) && dynamic_ignored(k).is_none())
        .cloned()
        .collect();
    if !fixed.is_empty() {
        return Err(DynamicConfigError::NotDynamic(fixed));
    }
    let per_broker: Vec<String> = entries
        .keys()
        .filter(|k| dynamic_ignored(k).is_some_and(|(_, scope)| scope == DynamicScope::BrokerOnly))
        .cloned()
        .collect();
    if level == DynamicLevel::ClusterDefault && !per_broker.is_empty() {
        return Err(DynamicConfigError::PerBrokerOnly(per_broker));
    }
    for (k, v) in entries {
        if let Some((kind, _)) = dynamic_ignored(k).filter(|(kind, _)| !parses_as(*kind, v)) {
            let kind = format!("{kind:?}").to_uppercase();
            return Err(DynamicConfigError::Invalid(format!(
                "Invalid value {v} for configuration {k}: Not a number of type {kind}"
            )));
        }
    }
    Ok(())
}

/// What `alter` refuses of the entry `key` whatever the layers before it:
/// no cleaner threads, topic defaults a topic cannot resolve. (The rest of
/// the thread rule compares with the count before the change, which a start
/// does not have.) An entry that breaks it is dropped at start, as one that
/// no longer validates.
fn check_at_start(key: &str, config: &BrokerConfig) -> Result<(), DynamicConfigError> {
    if key == LOG_CLEANER_THREADS.name && config.cleaner_config().num_threads < 1 {
        return Err(DynamicConfigError::Invalid("Log cleaner threads should be at least 1".into()));
    }
    LogConfig::resolve(&config.topic_defaults(), BTreeMap::new())
        .map(|_| ())
        .map_err(|e| DynamicConfigError::Invalid(e.to_string()))
}

/// Kafka's `LogCleaner.validateReconfiguration`: at least one thread, and at
/// most double or at least half the current count in one change.
fn validate_cleaner_threads(
    old: &BrokerConfig,
    new: &BrokerConfig,
) -> Result<(), DynamicConfigError> {
    let (current, wanted) = (old.cleaner_config().num_threads, new.cleaner_config().num_threads);
    let refuse = |m: String| Err(DynamicConfigError::Invalid(m));
    if wanted < 1 {
        return refuse("Log cleaner threads should be at least 1".into());
    }
    if wanted < current / 2 {
        return refuse(format!(
            "Log cleaner threads cannot be reduced to less than half the current value {current}"
        ));
    }
    if wanted > current * 2 {
        return refuse(format!(
            "Log cleaner threads cannot be increased to more than double the current value {current}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(dir: &std::path::Path, pairs: &[&str]) -> DynamicBrokerConfig {
        let mut c = BrokerConfig::default();
        c.set("log.dirs", &dir.display().to_string()).unwrap();
        c.apply_overrides(pairs.iter().copied()).unwrap();
        DynamicBrokerConfig::open(c).unwrap()
    }

    fn set(
        d: &DynamicBrokerConfig,
        level: DynamicLevel,
        pairs: &[(&str, &str)],
    ) -> Result<(), DynamicConfigError> {
        let entries = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        d.alter(level, entries, false, |_, _| Ok(()), |_| Ok(()))
    }

    #[test]
    fn layers_apply_most_specific_first_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let d = opened(dir.path(), &["log.cleaner.threads=2", "log.segment.bytes=4096"]);
        set(
            &d,
            DynamicLevel::ClusterDefault,
            &[("log.cleaner.threads", "4"), ("log.segment.bytes", "8192")],
        )
        .unwrap();
        set(&d, DynamicLevel::PerBroker, &[("log.segment.bytes", "16384")]).unwrap();
        let c = d.current();
        assert_eq!(c.cleaner_config().num_threads, 4);
        assert_eq!(c.topic_defaults()["segment.bytes"], "16384");
        let again = opened(dir.path(), &["log.cleaner.threads=2"]);
        assert_eq!(again.layers(), d.layers());
        assert_eq!(again.current().cleaner_config().num_threads, 4);
        // Deleting the per-broker value uncovers the default's.
        set(&again, DynamicLevel::PerBroker, &[]).unwrap();
        assert_eq!(again.current().topic_defaults()["segment.bytes"], "8192");
    }

    #[test]
    fn refusals_follow_kafka() {
        let dir = tempfile::tempdir().unwrap();
        let d = opened(dir.path(), &[]);
        let e = |pairs: &[(&str, &str)]| {
            set(&d, DynamicLevel::ClusterDefault, pairs).unwrap_err().to_string()
        };
        assert_eq!(
            e(&[("num.partitions", "3"), ("listeners", "PLAINTEXT://:1")]),
            "Cannot update these configs dynamically: Set(listeners, num.partitions)"
        );
        assert_eq!(e(&[("log.cleaner.thredas", "2")]), "Unknown config name: log.cleaner.thredas");
        assert_eq!(
            e(&[("log.cleaner.threads", "3")]),
            "Log cleaner threads cannot be increased to more than double the current value 1"
        );
        assert_eq!(e(&[("log.cleaner.threads", "0")]), "Log cleaner threads should be at least 1");
        assert!(e(&[("log.segment.bytes", "1")]).contains("log.segment.bytes"));
        assert_eq!(d.layers(), DynamicLayers::default(), "nothing was kept");
        assert!(!dir.path().join(DYNAMIC_CONFIG_FILE).exists(), "nothing was written");
    }

    #[test]
    fn described_with_kafkas_sources_and_synonym_order() {
        let dir = tempfile::tempdir().unwrap();
        let d = opened(dir.path(), &["log.retention.hours=2", "log.cleaner.threads=2"]);
        set(
            &d,
            DynamicLevel::ClusterDefault,
            &[("log.retention.ms", "1000"), ("log.cleaner.threads", "3")],
        )
        .unwrap();
        set(&d, DynamicLevel::PerBroker, &[("log.cleaner.threads", "4")]).unwrap();
        let all = d.describe(DynamicLevel::PerBroker);
        let get = |k: &str| all.iter().find(|e| e.name == k).unwrap().clone();
        use BrokerConfigSource as S;
        let threads = get("log.cleaner.threads");
        assert_eq!(
            (threads.value.as_str(), threads.source, threads.read_only),
            ("4", S::DynamicBroker, false)
        );
        let sources: Vec<_> = threads.synonyms.iter().map(|(_, v, s)| (v.as_str(), *s)).collect();
        assert_eq!(
            sources,
            [
                ("4", S::DynamicBroker),
                ("3", S::DynamicDefault),
                ("2", S::Static),
                ("1", S::Default)
            ]
        );
        let retention = get("log.retention.ms");
        let names: Vec<_> = retention.synonyms.iter().map(|(n, _, s)| (n.as_str(), *s)).collect();
        assert_eq!(
            names,
            [
                ("log.retention.ms", S::DynamicDefault),
                ("log.retention.hours", S::Static),
                ("log.retention.hours", S::Default)
            ]
        );
        assert!(get("listeners").read_only);
        let d2 = opened(tempfile::tempdir().unwrap().path(), &["log.retention.hours=2"]);
        let retention = d2
            .describe(DynamicLevel::PerBroker)
            .into_iter()
            .find(|e| e.name == "log.retention.ms")
            .unwrap();
        assert_eq!((retention.value.as_str(), retention.source), ("7200000", S::Static));
        assert_eq!(get("num.partitions").source, S::Default);
        let defaults = d.describe(DynamicLevel::ClusterDefault);
        let names: Vec<_> =
            defaults.iter().map(|e| (e.name.as_str(), e.value.as_str(), e.source)).collect();
        assert_eq!(
            names,
            [
                ("log.cleaner.threads", "3", S::DynamicDefault),
                ("log.retention.ms", "1000", S::DynamicDefault)
            ]
        );
    }

    #[test]
    fn an_entry_that_no_longer_validates_is_dropped_at_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(DYNAMIC_CONFIG_FILE),
            r#"{"cluster_default":{"num.partitions":"3","log.cleaner.backoff.ms":"10"}}"#,
        )
        .unwrap();
        let d = opened(dir.path(), &[]);
        assert_eq!(
            d.layers().cluster_default,
            BTreeMap::from([("log.cleaner.backoff.ms".to_string(), "10".to_string())])
        );
    }

    /// Found by the security_stores fuzz target: a stored
    /// `log.cleaner.threads=0` loaded, though `alter` refuses it, so the
    /// layers in force could not be written back.
    #[test]
    fn an_entry_alter_refuses_whatever_came_before_is_dropped_at_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(DYNAMIC_CONFIG_FILE),
            r#"{"cluster_default":{"log.cleaner.threads":"0","log.retention.ms":"5000"}}"#,
        )
        .unwrap();
        let d = opened(dir.path(), &[]);
        let kept = BTreeMap::from([("log.retention.ms".to_string(), "5000".to_string())]);
        assert_eq!(d.layers().cluster_default, kept);
        d.alter(DynamicLevel::ClusterDefault, kept, false, |_, _| Ok(()), |_| Ok(())).unwrap();
    }
}

//! Per-group dynamic configs (KIP-848; Kafka's `GroupConfig` and
//! `GroupConfigManager`): `kafka-configs --entity-type groups --entity-name
//! G --alter --add-config consumer.session.timeout.ms=...` gives one
//! consumer group its own session timeout or heartbeat interval, taken by
//! the coordinator on the group's next heartbeat or session check.
//!
//! * Keys honoured: `consumer.session.timeout.ms` and
//!   `consumer.heartbeat.interval.ms`, each within the broker's
//!   `group.consumer.min/max.*` bounds, the interval below the session
//!   timeout (either may come from the broker default). An unset key
//!   follows the broker's `group.consumer.*` value. The other keys Kafka
//!   4.4 knows for groups configure share and streams groups (and the
//!   assignment offload of 4.4), which sediment does not run: they are
//!   refused with INVALID_CONFIG saying so, never stored without effect.
//! * A change is validated whole before it is stored; then stored, and only
//!   then in force. A group's configs outlive the group (as in Kafka they
//!   are independent of its existence) until deleted.
//! * Single node: `sediment-group-configs.json` in the first log dir,
//!   replaced atomically. In a cluster ([`GroupConfigManager::use_cluster`]):
//!   etcd's `config/groups/<group>`, a JSON object per group, written by
//!   compare-and-swap on its revision in this broker's image and read by
//!   every broker from its image, so the group's coordinator, whichever
//!   broker it is after a failover, sees the same configs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::config::{
    GroupConfig, GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS, GROUP_CONSUMER_SESSION_TIMEOUT_MS,
};
use crate::cluster::image::StoredKeys;
use crate::cluster::security_store::{ClusterSecurityStore, Written};
use crate::config_def::ConfigDef;
use crate::security::store::{self, StoreError};

/// The single node's file, in the first log dir.
pub const GROUP_CONFIG_FILE: &str = "sediment-group-configs.json";

pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";

/// The group keys sediment honours: the broker key each defaults to (its
/// synonym), and the documentation.
pub const GROUP_KEYS: [(&str, &ConfigDef, &str); 2] = [
    (
        CONSUMER_SESSION_TIMEOUT_MS,
        &GROUP_CONSUMER_SESSION_TIMEOUT_MS,
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    (
        CONSUMER_HEARTBEAT_INTERVAL_MS,
        &GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
        "The heartbeat interval given to the members.",
    ),
];

/// Keys Kafka 4.4 knows for groups that configure what sediment does not
/// run, by prefix or name, with the reason given.
const NOT_RUN: [(&str, &str); 5] = [
    ("share.", "share groups (KIP-932) are not supported by sediment"),
    ("streams.", "streams groups (KIP-1071) are not supported by sediment"),
    ("errors.deadletterqueue.", "share groups (KIP-932) are not supported by sediment"),
    ("consumer.assignment.interval.ms", "sediment computes assignments on the heartbeat"),
    ("consumer.assignor.offload.enable", "sediment computes assignments on the heartbeat"),
];

/// One key as DescribeConfigs shows it for a group.
#[derive(Debug, Clone)]
pub struct DescribedGroupConfig {
    pub key: &'static str,
    /// Set for the group.
    pub own: Option<String>,
    /// The broker's value (its synonym's).
    pub broker_value: String,
    pub synonym: &'static ConfigDef,
    pub doc: &'static str,
}

impl DescribedGroupConfig {
    pub fn value(&self) -> &str {
        self.own.as_deref().unwrap_or(&self.broker_value)
    }
}

/// Why a group config change was refused.
#[derive(Debug, thiserror::Error)]
pub enum GroupConfigError {
    /// INVALID_CONFIG.
    #[error("{0}")]
    Invalid(String),
    /// The store did not take it (nothing changed).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The groups' configs (module doc).
#[derive(Debug)]
pub struct GroupConfigManager {
    path: PathBuf,
    defaults: GroupConfig,
    /// The single node's configs by group (unused in a cluster). Held only
    /// to read or swap, never across a write to disk.
    local: Mutex<BTreeMap<String, BTreeMap<String, String>>>,
    /// Held by a change from reading the configs it builds on to storing
    /// the result, so two changes at once cannot lose one another.
    writer: Mutex<()>,
    cluster: OnceLock<Arc<ClusterSecurityStore>>,
}

impl GroupConfigManager {
    /// The configs stored in `dir` (the first log dir), checked against
    /// `defaults`' bounds; entries that no longer validate are dropped with
    /// a warning.
    ///
    /// # Errors
    /// The file cannot be read or is not the expected JSON.
    pub fn open(dir: &Path, defaults: GroupConfig) -> Result<Self, StoreError> {
        let path = dir.join(GROUP_CONFIG_FILE);
        let stored: BTreeMap<String, BTreeMap<String, String>> = match store::read_bounded(&path)? {
            None => BTreeMap::new(),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| StoreError::Damaged { path: path.clone(), reason: e.to_string() })?,
        };
        let me = Self {
            path,
            defaults,
            local: Mutex::new(BTreeMap::new()),
            writer: Mutex::new(()),
            cluster: OnceLock::new(),
        };
        let valid = stored.into_iter().filter(|(group, configs)| match me.validate(configs) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(%group, "stored group configs dropped: {e}");
                false
            }
        });
        *me.local.lock() = valid.collect();
        Ok(me)
    }

    /// Keep the configs in etcd from now on (module doc).
    pub fn use_cluster(&self, store: Arc<ClusterSecurityStore>) {
        if !self.local.lock().is_empty() {
            tracing::warn!(path = %self.path.display(),
                "the group config file is not used in a cluster: etcd holds the cluster's");
        }
        let _ = self.cluster.set(store);
    }

    /// The configs set for `group` (only those set).
    pub fn overrides(&self, group: &str) -> BTreeMap<String, String> {
        match self.cluster.get() {
            Some(store) => self.stored(store, &store.image().group_configs, group),
            None => self.local.lock().get(group).cloned().unwrap_or_default(),
        }
    }

    /// `group`'s configs as `keys` (an image's) hold them.
    fn stored(
        &self,
        store: &ClusterSecurityStore,
        keys: &StoredKeys,
        group: &str,
    ) -> BTreeMap<String, String> {
        let key = store.keys().group_config(group);
        let Some(stored) = keys.get(&key) else { return BTreeMap::new() };
        match serde_json::from_slice::<BTreeMap<String, String>>(&stored.value) {
            Ok(configs) if self.validate(&configs).is_ok() => configs,
            _ => {
                tracing::warn!(key, "a group config key does not parse or validate; ignored");
                BTreeMap::new()
            }
        }
    }

    /// The groups that have configs of their own.
    pub fn groups(&self) -> Vec<String> {
        let Some(store) = self.cluster.get() else {
            return self.local.lock().keys().cloned().collect();
        };
        let prefix = store.keys().group_configs();
        let image = store.image();
        image
            .group_configs
            .keys()
            .filter_map(|k| k.strip_prefix(prefix.as_str()))
            .map(|encoded| {
                form_urlencoded::parse(format!("g={encoded}").as_bytes())
                    .next()
                    .map_or_else(|| encoded.to_string(), |(_, g)| g.into_owned())
            })
            .collect()
    }

    /// `group`'s `consumer.session.timeout.ms`.
    pub fn consumer_session_timeout_ms(&self, group: &str) -> i32 {
        let own =
            self.overrides(group).get(CONSUMER_SESSION_TIMEOUT_MS).and_then(|v| v.parse().ok());
        own.unwrap_or(self.defaults.consumer_session_timeout_ms)
    }

    /// `group`'s `consumer.heartbeat.interval.ms`.
    pub fn consumer_heartbeat_interval_ms(&self, group: &str) -> i32 {
        let own =
            self.overrides(group).get(CONSUMER_HEARTBEAT_INTERVAL_MS).and_then(|v| v.parse().ok());
        own.unwrap_or(self.defaults.consumer_heartbeat_interval_ms)
    }

    /// Every key for `group`, with its value if set for the group.
    pub fn describe(&self, group: &str) -> Vec<DescribedGroupConfig> {
        let own = self.overrides(group);
        GROUP_KEYS
            .iter()
            .map(|(key, synonym, doc)| DescribedGroupConfig {
                key,
                own: own.get(*key).cloned(),
                broker_value: self.default_of(key).to_string(),
                synonym,
                doc,
            })
            .collect()
    }

    fn default_of(&self, key: &str) -> i32 {
        if key == CONSUMER_SESSION_TIMEOUT_MS {
            self.defaults.consumer_session_timeout_ms
        } else {
            self.defaults.consumer_heartbeat_interval_ms
        }
    }

    /// Whether `key` is a group config sediment takes.
    pub fn is_group_key(key: &str) -> bool {
        GROUP_KEYS.iter().any(|(k, ..)| *k == key)
    }

    /// Why a key is refused: not one sediment takes (Kafka's message for
    /// a key it does not know either).
    pub fn refusal(key: &str) -> String {
        match NOT_RUN.iter().find(|(p, _)| key.starts_with(p)) {
            Some((_, why)) => format!("Group config {key} is not supported: {why}."),
            None => format!("Unknown group config name: {key}"),
        }
    }

    /// Check a group's whole set of configs (module doc's rules), in Kafka's
    /// order: names, then every value's type, then the ranges (the interval
    /// first), then the interval against the session.
    ///
    /// # Errors
    /// The first rule broken, as Kafka's message.
    pub fn validate(&self, configs: &BTreeMap<String, String>) -> Result<(), String> {
        if let Some(key) = configs.keys().find(|k| !Self::is_group_key(k)) {
            return Err(Self::refusal(key));
        }
        let mut parsed = BTreeMap::new();
        for (key, _, _) in GROUP_KEYS {
            let Some(v) = configs.get(key) else { continue };
            let invalid = |why: &str| format!("Invalid value {v} for configuration {key}: {why}");
            let n: i32 = v.trim().parse().map_err(|_| invalid("Not a number of type INT"))?;
            if n < 1 {
                return Err(invalid("Value must be at least 1"));
            }
            parsed.insert(key, n);
        }
        let value = |key: &'static str, (lo, hi): (i32, i32)| -> Result<i32, String> {
            let Some(n) = parsed.get(key).copied() else { return Ok(self.default_of(key)) };
            if n < lo || n > hi {
                return Err(format!("{key} must be in the range {lo} to {hi} inclusive."));
            }
            Ok(n)
        };
        let interval = value(
            CONSUMER_HEARTBEAT_INTERVAL_MS,
            self.defaults.consumer_heartbeat_interval_bounds,
        )?;
        let session =
            value(CONSUMER_SESSION_TIMEOUT_MS, self.defaults.consumer_session_timeout_bounds)?;
        if interval >= session {
            return Err(format!(
                "{CONSUMER_SESSION_TIMEOUT_MS} must be greater than {CONSUMER_HEARTBEAT_INTERVAL_MS}"
            ));
        }
        Ok(())
    }

    /// Change `group`'s configs: `build` makes the new set (empty: none)
    /// from the current one; it is validated whole and stored
    /// (`validate_only`: only validated). One change at a time, so two at
    /// once cannot lose one another; in a cluster the write is compared on
    /// the revision of the image the current set was read from.
    ///
    /// # Errors
    /// What `build` refused, INVALID_CONFIG, or the store failed (nothing
    /// changed), each through `error`.
    pub fn alter<E>(
        &self,
        group: &str,
        validate_only: bool,
        build: impl FnOnce(BTreeMap<String, String>) -> Result<BTreeMap<String, String>, E>,
        error: impl Fn(GroupConfigError) -> E,
    ) -> Result<(), E> {
        let _writer = self.writer.lock();
        let cluster =
            self.cluster.get().map(|store| (store, Arc::clone(&store.image().group_configs)));
        let current = match &cluster {
            Some((store, base)) => self.stored(store, base, group),
            None => self.local.lock().get(group).cloned().unwrap_or_default(),
        };
        let configs = build(current)?;
        self.validate(&configs).map_err(|m| error(GroupConfigError::Invalid(m)))?;
        if validate_only {
            return Ok(());
        }
        // Stored as parsed, so what is read back is what was validated.
        let configs: BTreeMap<String, String> =
            configs.into_iter().map(|(k, v)| (k, v.trim().to_string())).collect();
        match cluster {
            Some((store, base)) => write_to_cluster(store, &base, group, &configs).map_err(error),
            None => self.write_local(group, configs).map_err(error),
        }
    }

    /// The single node's file replaced, then the configs in memory.
    fn write_local(
        &self,
        group: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), GroupConfigError> {
        let mut next = self.local.lock().clone();
        if configs.is_empty() {
            next.remove(group);
        } else {
            next.insert(group.to_string(), configs);
        }
        let json = serde_json::to_vec_pretty(&next)
            .map_err(|e| GroupConfigError::Invalid(e.to_string()))?;
        store::write_atomically(&self.path, &json, 0o644)?;
        *self.local.lock() = next;
        tracing::info!(%group, "group configs altered");
        Ok(())
    }
}

/// One group's configs to etcd, compared on the key's revision in this
/// broker's image; answered once the image applied it.
fn write_to_cluster(
    store: &ClusterSecurityStore,
    base: &StoredKeys,
    group: &str,
    configs: &BTreeMap<String, String>,
) -> Result<(), GroupConfigError> {
    let key = store.keys().group_config(group);
    let value = if configs.is_empty() {
        None
    } else {
        Some(serde_json::to_vec(configs).map_err(|e| GroupConfigError::Invalid(e.to_string()))?)
    };
    match store.write_blocking(base, vec![(key, value)]) {
        Ok(Written::Applied(_)) => {
            tracing::info!(%group, "group configs altered in the cluster");
            Ok(())
        }
        Ok(Written::Raced) => Err(StoreError::Unavailable(
            "another broker changed the group's configs at the same time; try again".into(),
        )
        .into()),
        Err(e) => Err(StoreError::Unavailable(e.to_string()).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager(dir: &Path) -> GroupConfigManager {
        GroupConfigManager::open(dir, GroupConfig::default()).expect("open")
    }

    /// Replace `group`'s configs by `configs`.
    fn set(
        m: &GroupConfigManager,
        group: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), GroupConfigError> {
        m.alter(group, validate_only, |_| Ok(configs), |e| e)
    }

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_groups_configs_are_validated_stored_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path());
        assert_eq!(m.consumer_session_timeout_ms("g"), 45_000);
        set(&m, "g", configs(&[(CONSUMER_SESSION_TIMEOUT_MS, "50000")]), false).unwrap();
        set(&m, "h", configs(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "7000")]), true).unwrap();
        assert_eq!(m.consumer_heartbeat_interval_ms("h"), 5000, "validate_only stores nothing");
        let m = manager(dir.path());
        assert_eq!(
            (m.consumer_session_timeout_ms("g"), m.consumer_session_timeout_ms("x")),
            (50_000, 45_000)
        );
        let described = m.describe("g");
        assert_eq!(
            (described[0].key, described[0].own.as_deref()),
            (CONSUMER_SESSION_TIMEOUT_MS, Some("50000"))
        );
        assert_eq!((described[1].value(), described[1].own.is_none()), ("5000", true));
        set(&m, "g", BTreeMap::new(), false).unwrap();
        assert_eq!(manager(dir.path()).consumer_session_timeout_ms("g"), 45_000);
    }

    #[test]
    fn bad_values_and_keys_are_refused_and_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path());
        for (bad, why) in [
            (configs(&[(CONSUMER_SESSION_TIMEOUT_MS, "1000")]), "range 45000 to 60000 inclusive"),
            (configs(&[(CONSUMER_SESSION_TIMEOUT_MS, "x")]), "Not a number"),
            (configs(&[(CONSUMER_SESSION_TIMEOUT_MS, "0")]), "Value must be at least 1"),
            // Kafka's order: every value's type first, then the interval's range.
            (
                configs(&[
                    (CONSUMER_SESSION_TIMEOUT_MS, "1000"),
                    (CONSUMER_HEARTBEAT_INTERVAL_MS, "x"),
                ]),
                "Invalid value x for configuration consumer.heartbeat.interval.ms",
            ),
            (
                configs(&[
                    (CONSUMER_SESSION_TIMEOUT_MS, "1000"),
                    (CONSUMER_HEARTBEAT_INTERVAL_MS, "50000"),
                ]),
                "consumer.heartbeat.interval.ms must be in the range 5000 to 15000",
            ),
            (configs(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "16000")]), "range 5000 to 15000"),
            (configs(&[("share.record.lock.duration.ms", "1000")]), "share groups"),
            (configs(&[("streams.num.standby.replicas", "1")]), "streams groups"),
            (configs(&[("foo.bar", "1")]), "Unknown group config name: foo.bar"),
        ] {
            match set(&m, "g", bad.clone(), false) {
                Err(GroupConfigError::Invalid(m)) => assert!(m.contains(why), "{bad:?}: {m}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert!(m.overrides("g").is_empty());
        assert!(!dir.path().join(GROUP_CONFIG_FILE).exists());
        // With bounds that overlap, the session must stay above the interval,
        // counting the broker's value for the key not set.
        let overlapping = GroupConfig {
            consumer_session_timeout_ms: 30_000,
            consumer_session_timeout_bounds: (10_000, 60_000),
            consumer_heartbeat_interval_bounds: (5000, 20_000),
            ..GroupConfig::default()
        };
        let m = GroupConfigManager::open(dir.path(), overlapping).unwrap();
        set(&m, "g", configs(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "20000")]), false).unwrap();
        let both = configs(&[
            (CONSUMER_HEARTBEAT_INTERVAL_MS, "20000"),
            (CONSUMER_SESSION_TIMEOUT_MS, "20000"),
        ]);
        match set(&m, "g", both, false) {
            Err(GroupConfigError::Invalid(e)) => assert!(e.contains("must be greater than"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(m.consumer_heartbeat_interval_ms("g"), 20_000);
    }

    #[test]
    fn changes_build_on_each_other_and_values_are_stored_as_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path());
        let add = |key: &'static str, v: &'static str| {
            m.alter(
                "g",
                false,
                |mut current| {
                    current.insert(key.to_string(), v.to_string());
                    Ok::<_, GroupConfigError>(current)
                },
                |e| e,
            )
        };
        add(CONSUMER_SESSION_TIMEOUT_MS, " 50000 ").unwrap();
        add(CONSUMER_HEARTBEAT_INTERVAL_MS, "6000").unwrap();
        let m = manager(dir.path());
        assert_eq!(
            (m.consumer_session_timeout_ms("g"), m.consumer_heartbeat_interval_ms("g")),
            (50_000, 6000)
        );
        assert_eq!(m.overrides("g")[CONSUMER_SESSION_TIMEOUT_MS], "50000");
    }
}

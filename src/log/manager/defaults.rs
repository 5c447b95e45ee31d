//! The broker's topic defaults changed while running (Kafka's
//! `DynamicLogConfig`: `log.segment.bytes`, `log.retention.ms`, ... altered
//! with kafka-configs on the broker). A topic's own overrides still win; every
//! other key of every topic takes the new default from its next append or
//! check, as an AlterConfigs on the topic does. Nothing is written to the
//! partitions: their `topic.properties` hold overrides only.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{LogManager, TopicInfo, TopicPartition};
use crate::log::config::LogConfig;
use crate::log::error::Result;

/// Every topic's config under `defaults`.
fn resolve_all(
    topics: &BTreeMap<String, TopicInfo>,
    defaults: &BTreeMap<String, String>,
) -> Result<Vec<(String, Arc<LogConfig>)>> {
    LogConfig::resolve(defaults, BTreeMap::new())?;
    topics
        .iter()
        .map(|(name, info)| {
            Ok((
                name.clone(),
                Arc::new(LogConfig::resolve(defaults, info.config.overrides.clone())?),
            ))
        })
        .collect()
}

impl LogManager {
    /// Resolve a topic config from overrides (validating them) without creating anything.
    ///
    /// # Errors
    /// `InvalidConfig` naming the key (a `local.retention.*` above its
    /// `retention.*` included); also `remote.storage.enable=true` while
    /// the broker's `remote.log.storage.system.enable` is off (as Kafka refuses it).
    pub fn resolve_config(&self, overrides: BTreeMap<String, String>) -> Result<LogConfig> {
        let config = LogConfig::resolve(&self.topic_defaults.read(), overrides)?;
        config.check_local_retention()?;
        if config.remote_storage_enable {
            let on = [("remote.storage.enable".to_string(), "true".to_string())].into();
            self.check_remote_default(&on)?;
        }
        Ok(config)
    }

    /// Whether `defaults` would be accepted by [`LogManager::set_topic_defaults`].
    ///
    /// # Errors
    /// As `set_topic_defaults`.
    pub fn check_topic_defaults(&self, defaults: &BTreeMap<String, String>) -> Result<()> {
        self.check_remote_default(defaults)?;
        resolve_all(&self.topics.read(), defaults).map(|_| ())
    }

    /// With tiered storage on, the broker's `log.local.retention.*` must fit
    /// its `log.retention.*` as a remote-enabled topic's would (Kafka's
    /// `validateBrokerLogConfigValues`).
    pub(super) fn check_local_retention_defaults(
        &self,
        defaults: &BTreeMap<String, String>,
    ) -> Result<()> {
        if !self.config.remote_log_storage_system_enable {
            return Ok(());
        }
        let on = BTreeMap::from([("remote.storage.enable".to_string(), "true".to_string())]);
        LogConfig::resolve(defaults, on)?.check_local_retention()
    }

    /// `remote.storage.enable` may turn off only with
    /// `remote.log.delete.on.disable=true` (Kafka's rule: the store's copy is
    /// then deleted, so the operator must say so), and never while a
    /// partition of the topic has offsets only in the store: the log start
    /// would fall back to the first local segment and those offsets be lost.
    pub(super) fn check_store_only_kept(&self, info: &TopicInfo, config: &LogConfig) -> Result<()> {
        if config.remote_storage_enable {
            return Ok(());
        }
        if info.config.remote_storage_enable && !config.remote_log_delete_on_disable {
            return Err(crate::log::error::LogError::InvalidConfig {
                key: "remote.storage.enable".into(),
                reason: "turning remote storage off deletes the topic's copy in the store: set remote.log.delete.on.disable=true with it to do so".into(),
            });
        }
        for p in 0..info.partitions {
            let Some(log) = self.get_log(&TopicPartition::new(&info.name, p)) else { continue };
            let log = log.read();
            let (start, local) = (log.log_start_offset(), log.local_log_start_offset());
            if local > start {
                return Err(crate::log::error::LogError::InvalidConfig {
                    key: "remote.storage.enable".into(),
                    reason: format!("partition {p} holds offsets {start} to {} only in the remote store; remote storage cannot be turned off while it does", local - 1),
                });
            }
        }
        Ok(())
    }

    /// A default of `remote.storage.enable=true` needs the broker's system
    /// key; the local retention defaults must fit the total ones.
    fn check_remote_default(&self, defaults: &BTreeMap<String, String>) -> Result<()> {
        self.check_local_retention_defaults(defaults)?;
        let on = defaults.get("remote.storage.enable").is_some_and(|v| v.trim() == "true");
        if on && !self.config.remote_log_storage_system_enable {
            return Err(crate::log::error::LogError::InvalidConfig {
                key: "remote.storage.enable".into(),
                reason: "tiered storage is disabled on this broker (remote.log.storage.system.enable=false)".into(),
            });
        }
        Ok(())
    }

    /// The broker's topic defaults in force, keyed by topic key.
    pub fn topic_defaults(&self) -> BTreeMap<String, String> {
        self.topic_defaults.read().clone()
    }

    /// Replace the broker's topic defaults and re-resolve every topic.
    ///
    /// # Errors
    /// `InvalidConfig` naming the key, when a default or a topic's config
    /// with it is invalid; nothing is changed then.
    pub fn set_topic_defaults(&self, defaults: BTreeMap<String, String>) -> Result<()> {
        self.check_remote_default(&defaults)?;
        let mut topics = self.topics.write();
        let resolved = resolve_all(&topics, &defaults)?;
        for (name, config) in &resolved {
            if let Some(info) = topics.get(name) {
                self.check_store_only_kept(info, config)?;
            }
        }
        *self.topic_defaults.write() = defaults;
        for (name, config) in resolved {
            let Some(info) = topics.get_mut(&name) else { continue };
            for p in 0..info.partitions {
                if let Some(log) = self.get_log(&TopicPartition::new(&name, p)) {
                    log.write().update_config(Arc::clone(&config));
                }
            }
            info.config = config;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::LogManagerConfig;

    #[test]
    fn new_defaults_reach_topics_without_their_own_value() {
        let dir = tempfile::tempdir().unwrap();
        let logs =
            LogManager::open(LogManagerConfig::new(dir.path()), crate::clock::system()).unwrap();
        logs.create_topic("plain", 2, BTreeMap::new()).unwrap();
        let own = BTreeMap::from([("segment.bytes".to_string(), "4096".to_string())]);
        logs.create_topic("own", 1, own).unwrap();
        let defaults = BTreeMap::from([("segment.bytes".to_string(), "2048".to_string())]);
        logs.set_topic_defaults(defaults).unwrap();
        assert_eq!(logs.topic_defaults()["segment.bytes"], "2048");
        let segment_bytes =
            |tp: &TopicPartition| logs.get_log(tp).unwrap().read().config().segment_bytes;
        assert_eq!(segment_bytes(&TopicPartition::new("plain", 1)), 2048);
        assert_eq!(segment_bytes(&TopicPartition::new("own", 0)), 4096);
        assert_eq!(logs.topic("plain").unwrap().config.segment_bytes, 2048);
        let bad = BTreeMap::from([("segment.bytes".to_string(), "1".to_string())]);
        assert!(logs.set_topic_defaults(bad).is_err());
        assert_eq!(logs.topic_defaults()["segment.bytes"], "2048");
    }
}

#[cfg(test)]
mod remote_tests {
    use super::*;
    use crate::log::error::LogError;
    use crate::log::LogManagerConfig;

    #[test]
    fn remote_storage_needs_the_system_key() {
        let on = || BTreeMap::from([("remote.storage.enable".to_string(), "true".to_string())]);
        let dir = tempfile::tempdir().unwrap();
        let off =
            LogManager::open(LogManagerConfig::new(dir.path()), crate::clock::system()).unwrap();
        for result in [
            off.create_topic("t", 1, on()).map(|_| ()),
            off.set_topic_defaults(on()),
            off.check_topic_defaults(&on()),
        ] {
            match result {
                Err(LogError::InvalidConfig { key, reason }) => {
                    assert_eq!(key, "remote.storage.enable");
                    assert!(reason.contains("remote.log.storage.system.enable"), "{reason}");
                }
                other => panic!("{other:?}"),
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let mut config = LogManagerConfig::new(dir.path());
        config.remote_log_storage_system_enable = true;
        let enabled = LogManager::open(config.clone(), crate::clock::system()).unwrap();
        assert!(enabled.create_topic("t", 1, on()).unwrap().config.remote_storage_enable);
        // Local retention defaults above the total ones: refused live and at start.
        let too_long = BTreeMap::from([
            ("retention.ms".to_string(), "1000".to_string()),
            ("local.retention.ms".to_string(), "2000".to_string()),
        ]);
        match enabled.check_topic_defaults(&too_long) {
            Err(LogError::InvalidConfig { key, .. }) => assert_eq!(key, "local.retention.ms"),
            other => panic!("{other:?}"),
        }
        // Off only with remote.log.delete.on.disable (Kafka's rule).
        let off = BTreeMap::from([("remote.storage.enable".to_string(), "false".to_string())]);
        match enabled.alter_topic_config("t", off) {
            Err(LogError::InvalidConfig { key, reason }) => {
                assert_eq!(key, "remote.storage.enable");
                assert!(reason.contains("remote.log.delete.on.disable"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // Offsets only in the store: remote storage stays on.
        let tp = TopicPartition::new("t", 0);
        let log = enabled.get_log(&tp).unwrap();
        for _ in 0..2 {
            let mut b = crate::log::record_batch::BatchBuilder::new(
                crate::log::compression::Compression::None,
                0,
            );
            b.append(0, Some(b"k"), Some(b"v"));
            let mut log = log.write();
            log.append_as_leader(&mut b.build()).unwrap();
            log.roll_if_not_empty().unwrap();
        }
        let local_zero = BTreeMap::from([
            ("remote.storage.enable".to_string(), "true".to_string()),
            ("local.retention.bytes".to_string(), "0".to_string()),
            ("retention.ms".to_string(), "-1".to_string()),
        ]);
        enabled.alter_topic_config("t", local_zero).unwrap();
        log.write().set_highest_offset_in_remote_storage(0);
        assert_eq!(log.write().delete_old_segments().unwrap(), 1);
        let off = BTreeMap::from([
            ("remote.storage.enable".to_string(), "false".to_string()),
            ("remote.log.delete.on.disable".to_string(), "true".to_string()),
        ]);
        match enabled.alter_topic_config("t", off) {
            Err(LogError::InvalidConfig { key, reason }) => {
                assert_eq!(key, "remote.storage.enable");
                assert!(reason.contains("only in the remote store"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(log.read().config().remote_storage_enable);
        let mut bad_start = config.clone();
        bad_start.topic_defaults = too_long;
        assert!(LogManager::open(bad_start, crate::clock::system()).is_err());
        enabled.set_topic_defaults(on()).unwrap();
    }
}

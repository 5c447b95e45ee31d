//! Retiring the store's copy of a partition that is gone: its topic deleted
//! (possibly created again under the name) or its `remote.storage.enable`
//! turned off. Without it the manifests would stay, `sediment restore` would
//! bring the topic back, and the objects would never be deleted.
//!
//! Retiring writes one more manifest, create-only under the next number,
//! with `retired: true` and no segment (`manifest`): readers skip the
//! partition, and the sweep, which only ever keeps what live manifests list,
//! deletes the objects and older manifests after the delete delay, then the
//! retired manifest itself (the rule is in `sweep`). A topic created again
//! under the name writes the number after the retired one, from scratch.
//!
//! What is retired, and only that:
//! * a partition the uploader saw enabled in this process (its log object
//!   and `partition.metadata` remembered) whose log is gone, disabled with
//!   `remote.log.delete.on.disable=true`, or
//!   replaced by another log (a topic deleted and created again between two
//!   rounds), when the store's latest manifest is that log's (same
//!   `partition.metadata`). A replaced log's partition is held out of the
//!   round, so its uploader state (the old topic's manifest) is dropped and
//!   the new topic starts after the retired manifest instead of being refused
//!   as a regression;
//! * on a periodic scan of the store (the first round, then every quarter of
//!   the delay): a partition whose local log exists with remote storage
//!   disabled and `remote.log.delete.on.disable=true`, and the same
//!   `partition.metadata` as the latest manifest.
//!
//! A log turned off without `remote.log.delete.on.disable` keeps its copy:
//! AlterConfigs refuses that change (Kafka's rule), so it only happens when a
//! broker default changes across a restart, and the operator did not ask for
//! the copy to be deleted.
//!
//! A partition in the store with no local log at all is left alone: a
//! missing log dir must not turn into deleted objects. (A topic deleted just
//! before a crash, before the round that retires it, stays in the store.)
//! A retirement that fails (store errors) is retried each round; until it
//! succeeds a replaced log's partition is not uploaded.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::config::RemoteStorageConfig;
use super::manifest::{self, Manifest};
use super::status::RemoteStats;
use super::store::RemoteStore;
use super::{blocking, now_ms, sweep, RemoteError};
use crate::log::manager::{SharedLog, PARTITION_METADATA_FILE};
use crate::log::{LogManager, TopicPartition};

/// A log the uploader saw enabled, and its topic's identity.
#[derive(Debug)]
struct Seen {
    log: Weak<parking_lot::RwLock<crate::log::Log>>,
    metadata: String,
}

#[derive(Debug, Default)]
struct State {
    seen: HashMap<TopicPartition, Seen>,
    /// Retirements to write (the `partition.metadata` of the log gone).
    pending: HashMap<TopicPartition, String>,
    last_scan_ms: Option<i64>,
}

/// The uploader's memory of the logs it saw, and its retirements.
#[derive(Debug, Default)]
pub struct Retirer {
    state: Mutex<State>,
}

impl Retirer {
    /// Once per upload round, before the partitions are synced: retire what
    /// went away since the last round, and remove from `enabled` the
    /// partitions whose log was replaced (their uploader state must go).
    pub async fn round(
        &self,
        store: &RemoteStore,
        stats: &RemoteStats,
        logs: &LogManager,
        enabled: &mut Vec<(TopicPartition, SharedLog)>,
        config: &RemoteStorageConfig,
    ) {
        let held = self.note(logs, enabled).await;
        let pending: Vec<(TopicPartition, String)> =
            self.state.lock().pending.iter().map(|(tp, m)| (tp.clone(), m.clone())).collect();
        for (tp, metadata) in pending {
            match retire(store, &tp, &metadata).await {
                Ok(()) => {
                    self.state.lock().pending.remove(&tp);
                }
                Err(e) => {
                    stats.error(e.kind());
                    tracing::warn!(partition = %tp, "tiered storage: retiring: {e}; retrying");
                }
            }
        }
        enabled.retain(|(tp, _)| !held.contains(tp));
        let every = (config.delete_delay_ms / 4).max(config.upload_interval_ms as i64);
        let due = self.state.lock().last_scan_ms.is_none_or(|last| now_ms() - last >= every);
        if due {
            let names: HashSet<TopicPartition> = enabled.iter().map(|(tp, _)| tp.clone()).collect();
            match scan(store, stats, logs, &names, config.delete_delay_ms).await {
                Ok(()) => self.state.lock().last_scan_ms = Some(now_ms()),
                Err(e) => {
                    stats.error(e.kind());
                    tracing::warn!(
                        "tiered storage: scanning the store for retired partitions: {e}"
                    );
                }
            }
        }
    }

    /// Compare `enabled` with the logs seen last round: those gone or
    /// replaced become pending retirements. Returns the replaced ones.
    async fn note(
        &self,
        logs: &LogManager,
        enabled: &[(TopicPartition, SharedLog)],
    ) -> HashSet<TopicPartition> {
        let mut held = HashSet::new();
        let mut fresh = Vec::new();
        {
            let mut state = self.state.lock();
            let names: HashSet<&TopicPartition> = enabled.iter().map(|(tp, _)| tp).collect();
            let gone: Vec<TopicPartition> =
                state.seen.keys().filter(|tp| !names.contains(tp)).cloned().collect();
            for tp in gone {
                let Some(seen) = state.seen.remove(&tp) else { continue };
                if kept_on_disable(logs, &tp, &seen) {
                    tracing::info!(partition = %tp, "tiered storage turned off without remote.log.delete.on.disable: the store's copy is kept");
                } else {
                    state.pending.insert(tp, seen.metadata);
                }
            }
            for (tp, log) in enabled {
                let same = state.seen.get(tp).map(|seen| seen.log.as_ptr() == Arc::as_ptr(log));
                if same == Some(true) {
                    continue;
                }
                if let Some(seen) = state.seen.remove(tp) {
                    tracing::info!(partition = %tp, "tiered storage: the log was replaced (the topic created again); retiring the old topic's manifests first");
                    state.pending.insert(tp.clone(), seen.metadata);
                    held.insert(tp.clone());
                }
                fresh.push((tp.clone(), Arc::clone(log)));
            }
            held.extend(state.pending.keys().filter(|tp| names.contains(tp)).cloned());
        }
        for (tp, log) in fresh {
            let path = log.read().dir().join(PARTITION_METADATA_FILE);
            let read =
                blocking(move || std::fs::read_to_string(&path).map_err(RemoteError::io(path)));
            // Not readable yet (a topic being created): seen next round.
            if let Ok(metadata) = read.await {
                let seen = Seen { log: Arc::downgrade(&log), metadata };
                self.state.lock().seen.insert(tp, seen);
            }
        }
        held
    }
}

/// Whether `tp`'s log is still the one seen, with remote storage off but
/// without `remote.log.delete.on.disable`: its copy in the store stays (a
/// broker default changed across a restart turns a topic off this way; the
/// operator did not ask for the copy to go).
fn kept_on_disable(logs: &LogManager, tp: &TopicPartition, seen: &Seen) -> bool {
    let Some(log) = logs.get_log(tp) else { return false };
    if seen.log.as_ptr() != Arc::as_ptr(&log) {
        return false;
    }
    let config = log.read().config().clone();
    !config.remote_storage_enable && !config.remote_log_delete_on_disable
}

/// Write the retired manifest of `tp` if the store's latest is the manifest
/// of the log whose `partition.metadata` is `metadata`.
async fn retire(
    store: &RemoteStore,
    tp: &TopicPartition,
    metadata: &str,
) -> Result<(), RemoteError> {
    let Some((seq, latest)) = manifest::latest(store, tp).await? else { return Ok(()) };
    if latest.retired || latest.partition_metadata != metadata {
        return Ok(());
    }
    manifest::write(store, tp, seq + 1, &retired(latest)).await?;
    tracing::info!(partition = %tp, seq = seq + 1, "tiered storage: partition retired in the store");
    Ok(())
}

/// The retired successor of `latest`.
pub fn retired(latest: Manifest) -> Manifest {
    Manifest {
        log_start_offset: latest.end_offset,
        clean_offset: None,
        store_clean_offset: None,
        local_log_start_offset: None,
        segments: Vec::new(),
        written_at_ms: now_ms(),
        retired: true,
        ..latest
    }
}

/// Sweep the retired partitions not enabled here, and retire those whose
/// local log has remote storage disabled.
async fn scan(
    store: &RemoteStore,
    stats: &RemoteStats,
    logs: &LogManager,
    enabled: &HashSet<TopicPartition>,
    delay_ms: i64,
) -> Result<(), RemoteError> {
    let (_, names) = store.list("topics").await?;
    for tp in names.iter().filter_map(|n| TopicPartition::from_dir_name(n)) {
        if enabled.contains(&tp) {
            continue;
        }
        let result = match manifest::latest(store, &tp).await {
            Ok(Some((seq, m))) if m.retired => {
                sweep::sweep(store, &tp, seq, &m, delay_ms).await.map(|n| stats.deleted(n))
            }
            Ok(Some((_, m))) => match logs.get_log(&tp) {
                Some(log) if log.read().config().remote_log_delete_on_disable => {
                    let path = log.read().dir().join(PARTITION_METADATA_FILE);
                    let local = blocking(move || {
                        std::fs::read_to_string(&path).map_err(RemoteError::io(path))
                    })
                    .await;
                    match local {
                        Ok(local) if local == m.partition_metadata => {
                            retire(store, &tp, &local).await
                        }
                        Ok(_) => Ok(()),
                        Err(e) => Err(e),
                    }
                }
                // Gone, or off without remote.log.delete.on.disable: kept.
                _ => Ok(()),
            },
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            stats.error(e.kind());
            tracing::warn!(partition = %tp, "tiered storage: retired partition: {e}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::log::LogManagerConfig;

    fn on() -> BTreeMap<String, String> {
        BTreeMap::from([("remote.storage.enable".to_string(), "true".to_string())])
    }

    /// Turned off without remote.log.delete.on.disable the copy stays; with
    /// the key, or for a log deleted, it is retired.
    #[test]
    fn only_an_operator_asking_for_it_retires_a_log_turned_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = LogManagerConfig::new(dir.path());
        config.remote_log_storage_system_enable = true;
        let logs = LogManager::open(config, crate::clock::system()).unwrap();
        logs.set_topic_defaults(on()).unwrap();
        logs.create_topic("t", 1, BTreeMap::new()).unwrap();
        let tp = TopicPartition::new("t", 0);
        let log = logs.get_log(&tp).unwrap();
        let seen = Seen { log: Arc::downgrade(&log), metadata: String::new() };
        assert!(!kept_on_disable(&logs, &tp, &seen), "still on: not a disable");

        // Live, a default cannot turn it off without the key (the refusal is
        // LogManager's); a log whose config says off without it keeps its copy.
        assert!(logs.set_topic_defaults(BTreeMap::new()).is_err());
        let off = crate::log::LogConfig::resolve(&BTreeMap::new(), BTreeMap::new()).unwrap();
        log.write().update_config(Arc::new(off));
        assert!(kept_on_disable(&logs, &tp, &seen), "off without the key: kept");

        let delete =
            BTreeMap::from([("remote.log.delete.on.disable".to_string(), "true".to_string())]);
        logs.alter_topic_config("t", delete).unwrap();
        assert!(!kept_on_disable(&logs, &tp, &seen), "the operator asked for deletion");

        logs.delete_topic("t", None).unwrap();
        assert!(!kept_on_disable(&logs, &tp, &seen), "deleted: retired");
    }
}

//! `LogCleanerManager::status`: the [`ManagerStatus`] that `sediment
//! cleaner-status`, the `/cleaner-status` endpoint and the cleaner gauges
//! read, built fresh from the logs and the manager's state (the types and
//! their invariants are in `status.rs`).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use super::manager::LogCleanerManager;
use super::manager_state::log_dir_of;
use super::status::{Ineligible, LogDirCleaningStatus, ManagerStatus, PartitionCleaningStatus};
use super::tiered_store::{StoreCleanState, StoreCleaning};
use crate::log::manager::SharedLog;
use crate::log::TopicPartition;

impl LogCleanerManager {
    /// The gauges and every compacted partition's status, read fresh.
    pub fn status(&self) -> ManagerStatus {
        let now = self.clock.now_ms();
        let all = self.logs.all_logs();
        let committed = self.committed_offsets();
        let store_states = self.store_clean_states(&all);
        let mut inner = self.lock();
        let mut partitions = Vec::new();
        let mut dirs: BTreeMap<PathBuf, LogDirCleaningStatus> = BTreeMap::new();
        for dir in &self.logs.config().log_dirs {
            dirs.insert(dir.clone(), LogDirCleaningStatus::new(dir));
        }
        for (tp, shared) in all {
            let log = shared.read();
            if !log.config().compact {
                continue;
            }
            let dir = log_dir_of(&log);
            let to_clean = inner.measure(&log, now);
            let ineligible =
                inner.eligibility(&log, &to_clean, now, self.uncleanable_retry_backoff_ms).err();
            let uncleanable = inner.uncleanable.get(&tp).cloned();
            let dir_status =
                dirs.entry(dir.clone()).or_insert_with(|| LogDirCleaningStatus::new(&dir));
            if uncleanable.is_some() {
                dir_status.uncleanable_partitions += 1;
                dir_status.uncleanable_bytes += to_clean.cleanable_bytes;
            }
            partitions.push(PartitionCleaningStatus {
                uncleanable_cause: uncleanable.map(|u| u.cause),
                latest_delete_horizon_ms: inner.delete_horizons.get(&tp).copied(),
                stale_deadline_ms: inner.stale_deadlines.get(&tp).copied().flatten(),
                tombstones_at_risk: match (inner.kept_tombstones.get(&tp), committed.get(&tp)) {
                    (Some(kept), Some(c)) => kept.at_risk(c, log.log_start_offset()),
                    _ => Vec::new(),
                },
                last_clean: inner.history.get(&tp).and_then(|h| h.back()).cloned(),
                history: inner
                    .history
                    .get(&tp)
                    .map(|h| h.iter().cloned().collect())
                    .unwrap_or_default(),
                store: StoreCleaning::of(
                    &log,
                    store_states.get(&tp).cloned(),
                    (to_clean.clean_bytes, to_clean.cleanable_bytes),
                ),
                ..PartitionCleaningStatus::new(&log, &dir, &to_clean, ineligible)
            });
        }
        for (dir, cause) in &inner.offline_dirs {
            if let Some(d) = dirs.get_mut(dir) {
                d.offline_cause = Some(cause.clone());
            }
        }
        let store_dirtiest = partitions
            .iter()
            .filter_map(|p| p.store.as_ref()?.cleaning.as_ref())
            // A store with nothing to rewrite is not behind, however dirty.
            .filter(|c| c.rewritable)
            .map(|c| c.dirty_ratio)
            .fold(0.0, f64::max);
        let status = ManagerStatus {
            now_ms: now,
            max_dirty_percent: (100.0 * inner.dirtiest_ratio.max(store_dirtiest)) as i64,
            time_since_last_run_ms: (now - inner.time_of_last_run_ms).max(0),
            max_compaction_delay_ms: inner.max_compaction_delay_ms,
            log_dirs: dirs.into_values().collect(),
            partitions,
        };
        drop(inner);
        self.name_open_transactions(status)
    }

    /// The store cleaner's measure of every tiered partition among `all`
    /// that it measured, asked before any lock of the manager is taken.
    fn store_clean_states(
        &self,
        all: &[(TopicPartition, SharedLog)],
    ) -> HashMap<TopicPartition, StoreCleanState> {
        let Some(store) = self.tiered_store() else { return HashMap::new() };
        all.iter().filter_map(|(tp, _)| Some((tp.clone(), store.store_clean_state(tp)?))).collect()
    }

    /// The groups' committed offsets on every partition that has some,
    /// asked once per status before any lock of the manager is taken.
    fn committed_offsets(&self) -> HashMap<TopicPartition, Vec<(String, i64)>> {
        self.consumer_offsets().map(|o| o.committed_by_partition()).unwrap_or_default()
    }

    /// `status` with the transactional id of every open transaction it shows,
    /// from the resolver, asked with no lock held (it takes the coordinator's).
    fn name_open_transactions(&self, mut status: ManagerStatus) -> ManagerStatus {
        let Some(resolver) = self.producer_id_resolver() else { return status };
        for p in &mut status.partitions {
            let Some(open) = &mut p.open_transaction else { continue };
            open.transactional_id = resolver.transactional_id(open.producer_id);
            if let Some(Ineligible::OpenTransaction(t)) = &mut p.ineligible {
                t.transactional_id.clone_from(&open.transactional_id);
                p.reason = p.ineligible.as_ref().map(ToString::to_string);
            }
        }
        status
    }
}

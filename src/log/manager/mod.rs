//! `LogManager`: every partition log of this broker across its `log.dirs`.
//!
//! On disk, per log dir:
//! ```text
//! <log.dir>/recovery-point-offset-checkpoint   flushed offsets (recovery starts there)
//! <log.dir>/log-start-offset-checkpoint        DeleteRecords/retention log starts
//! <log.dir>/.kafka_cleanshutdown               present only after a clean shutdown
//! <log.dir>/<topic>-<partition>/partition.metadata   Kafka's file: version and topic id
//! <log.dir>/<topic>-<partition>/topic.properties     the topic's config overrides
//! <log.dir>/<topic>-<partition>/000…000.log/.index/.timeindex
//! ```
//! Each partition directory describes itself (topic id and overrides), so a
//! restart rebuilds the topic table from the directories alone.
//!
//! Creating a topic (or partitions) survives a crash: each partition's files
//! are written in `<topic>-<partition>.creating` and the directory renamed
//! into place only once complete, from the highest partition down. A start
//! deletes `.creating` leftovers and creates every partition missing below a
//! topic's highest one, which is what a crash in the middle leaves; so the
//! topic ends with all its partitions, never a prefix of them. Deleting
//! goes from the highest partition down too, so a deletion a crash cut
//! leaves a prefix, never mistaken for a cut creation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;

use super::checkpoint::{
    self, OffsetCheckpointFile, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use super::config::LogConfig;
use super::dir_failure::{self, LogDirFailureChannel};
use super::error::{LogError, Result};
use super::log_loader::LoadParams;
use super::manager_config::{LogManagerConfig, NUM_PARTITIONS};
use super::topic_partition::TopicPartition;
use super::unified_log::Log;
use crate::clock::SharedClock;

pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";
pub const TOPIC_CONFIG_FILE: &str = "topic.properties";
/// Suffix of a partition directory being created.
const CREATING_SUFFIX: &str = ".creating";

mod defaults;
mod offline;
mod replicas;
mod scheduler;

pub use replicas::REPLICATION_OFFSET_CHECKPOINT;

/// A topic's identity and configuration.
#[derive(Debug, Clone)]
pub struct TopicInfo {
    pub name: String,
    pub id: [u8; 16],
    pub partitions: i32,
    pub config: Arc<LogConfig>,
}

pub type SharedLog = Arc<RwLock<Log>>;

/// The fail point at the start of each partition's creation (scope: the
/// topic), where a test holds a creation to watch the broker meanwhile.
pub const CREATE_PARTITION_FAILPOINT: &str = "log-create-partition";

/// A name reserved by [`LogManager::reserve`], released when dropped.
struct Reservation<'a> {
    manager: &'a LogManager,
    name: String,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.manager.changing.lock().remove(&self.name);
    }
}

/// How the log layer tells the cleaner (which it does not know) to keep away
/// from a partition. Implemented by `cleaner::LogCleanerManager`; the log
/// layer calls it around the operations that must not race a clean.
pub trait CleaningControl: Send + Sync + std::fmt::Debug {
    /// Abort a clean of `tp` in progress, wait until it has stopped, and keep
    /// new cleans off it until the matching [`CleaningControl::resume_cleaning`].
    /// Pauses nest.
    fn abort_and_pause_cleaning(&self, tp: &TopicPartition);
    /// Undo one [`CleaningControl::abort_and_pause_cleaning`].
    fn resume_cleaning(&self, tp: &TopicPartition);
    /// `tp` is being deleted: abort any clean and forget its cleaning state
    /// and its cleaner checkpoint entry in `log_dir`.
    fn abort_cleaning_and_forget(&self, tp: &TopicPartition, log_dir: &Path);
    /// `log_dir` failed (`dir_failure`): stop cleaning there, aborting the
    /// cleans of `partitions`, its partitions, until a restart.
    fn handle_log_dir_failure(&self, log_dir: &Path, cause: &str, partitions: &[TopicPartition]);
    /// `tp`'s log was cut back to end at `offset`: a cleaner checkpoint
    /// past it is lowered to it (Kafka's `maybeTruncateCheckpoint`), so the
    /// records appended there next count as dirty.
    fn maybe_truncate_checkpoint(&self, log_dir: &Path, tp: &TopicPartition, offset: i64);
}

#[derive(Debug, Default)]
struct SchedulerState {
    stop: bool,
}

#[derive(Debug)]
pub struct LogManager {
    config: LogManagerConfig,
    clock: SharedClock,
    logs: RwLock<BTreeMap<TopicPartition, SharedLog>>,
    topics: RwLock<BTreeMap<String, TopicInfo>>,
    /// In a cluster, the high watermarks of the last checkpoint (`replicas`).
    hw_checkpoint: RwLock<BTreeMap<TopicPartition, i64>>,
    /// Topics whose partitions are being created (their directories made
    /// without the topics lock held).
    changing: Mutex<BTreeSet<String>>,
    /// Partitions that could not be loaded, or whose log dir failed, with
    /// the reason.
    offline: RwLock<BTreeMap<TopicPartition, String>>,
    /// Where every log reports a failure of its dir's disk.
    dir_failures: Arc<LogDirFailureChannel>,
    scheduler: (Mutex<SchedulerState>, Condvar),
    scheduler_thread: Mutex<Option<JoinHandle<()>>>,
    /// Takes each failed dir's partitions offline (`dir_failure`).
    failure_handler: Mutex<Option<JoinHandle<()>>>,
    /// One checkpoint file written at a time: the scheduler and a
    /// truncation (a follower's, DeleteRecords) both write them, through
    /// the same `<file>.tmp`, and a rename that lost the race found no file
    /// (ENOENT, which took the dir offline).
    checkpoint_writes: Mutex<()>,
    /// The broker's topic defaults in force: `config.topic_defaults` at
    /// start, replaced by [`LogManager::set_topic_defaults`].
    topic_defaults: RwLock<BTreeMap<String, String>>,
}

impl LogManager {
    /// Load every partition found in the log dirs.
    ///
    /// # Errors
    /// I/O errors on the log dirs themselves. A partition that fails to load is
    /// recorded as offline (and logged) instead of failing the broker.
    pub fn open(config: LogManagerConfig, clock: SharedClock) -> Result<Self> {
        // Validate the broker defaults once, so every topic can rely on them.
        LogConfig::resolve(&config.topic_defaults, BTreeMap::new())?;
        let manager = Self {
            topic_defaults: RwLock::new(config.topic_defaults.clone()),
            config,
            clock,
            logs: RwLock::new(BTreeMap::new()),
            topics: RwLock::new(BTreeMap::new()),
            hw_checkpoint: RwLock::new(BTreeMap::new()),
            changing: Mutex::new(BTreeSet::new()),
            offline: RwLock::new(BTreeMap::new()),
            dir_failures: Arc::default(),
            scheduler: (Mutex::new(SchedulerState::default()), Condvar::new()),
            scheduler_thread: Mutex::new(None),
            failure_handler: Mutex::new(None),
            checkpoint_writes: Mutex::new(()),
        };
        manager.check_local_retention_defaults(&manager.config.topic_defaults)?;
        for dir in manager.config.log_dirs.clone() {
            manager.load_dir(&dir)?;
        }
        manager.complete_interrupted_creations()?;
        if manager.config.partitions_placed_by_cluster {
            manager.read_high_watermarks();
        }
        Ok(manager)
    }

    /// Create the partitions missing below each topic's highest one: the
    /// creation a crash interrupted (see the module doc).
    fn complete_interrupted_creations(&self) -> Result<()> {
        let topics: Vec<TopicInfo> = self.topics.read().values().cloned().collect();
        let placed = self.config.partitions_placed_by_cluster;
        for info in topics.into_iter().filter(|_| !placed) {
            for p in (0..info.partitions).rev() {
                let tp = TopicPartition::new(&info.name, p);
                if self.get_log(&tp).is_none() && !self.offline.read().contains_key(&tp) {
                    tracing::warn!(partition = %tp, "creating a partition missing below the topic's highest: its creation was interrupted");
                    self.create_partition(&info, p)?;
                }
            }
        }
        Ok(())
    }

    fn load_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(LogError::io(dir))?;
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean_shutdown = marker.exists();
        let recovery_points = read_checkpoint_or_empty(dir, RECOVERY_POINT_CHECKPOINT);
        let log_starts = read_checkpoint_or_empty(dir, LOG_START_OFFSET_CHECKPOINT);
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(LogError::io(dir))?
            .collect::<std::io::Result<_>>()
            .map_err(LogError::io(dir))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with("-delete") || name.ends_with(CREATING_SUFFIX) {
                // A topic deleted while the broker was down mid-way: finish
                // the job; a partition whose creation was cut: start again.
                let _ = std::fs::remove_dir_all(&path);
                continue;
            }
            let Some(tp) = TopicPartition::from_dir_name(&name) else { continue };
            if let Err(e) =
                self.load_partition(&path, &tp, clean_shutdown, &recovery_points, &log_starts)
            {
                tracing::error!(partition = %tp, dir = %path.display(), error = %e, "partition is offline");
                self.offline.write().insert(tp, e.to_string());
            }
        }
        // From here on a crash is an unclean shutdown.
        if clean_shutdown {
            std::fs::remove_file(&marker).map_err(LogError::io(&marker))?;
            checkpoint::fsync_dir(dir)?;
        }
        Ok(())
    }

    fn load_partition(
        &self,
        path: &Path,
        tp: &TopicPartition,
        clean_shutdown: bool,
        recovery_points: &BTreeMap<TopicPartition, i64>,
        log_starts: &BTreeMap<TopicPartition, i64>,
    ) -> Result<()> {
        let id = read_partition_metadata(path)?;
        let overrides = match std::fs::read_to_string(path.join(TOPIC_CONFIG_FILE)) {
            Ok(text) => LogConfig::parse_properties(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(LogError::io(path.join(TOPIC_CONFIG_FILE))(e)),
        };
        let config = Arc::new(LogConfig::resolve(&self.topic_defaults.read(), overrides)?);
        let load = LoadParams {
            recovery_point: recovery_points.get(tp).copied().unwrap_or(0),
            log_start_offset: log_starts.get(tp).copied().unwrap_or(0),
            clean_shutdown,
        };
        let log = Log::open(
            path,
            tp.clone(),
            Arc::clone(&config),
            load,
            self.config.flush_before_ack,
            Arc::clone(&self.clock),
        )?
        .reporting_failures_to(Arc::clone(&self.dir_failures));
        let mut topics = self.topics.write();
        let info = topics.entry(tp.topic.clone()).or_insert_with(|| TopicInfo {
            name: tp.topic.clone(),
            id,
            partitions: 0,
            config,
        });
        if info.id != id {
            tracing::warn!(partition = %tp, "partition.metadata names a different topic id than its sibling partitions");
        }
        info.partitions = info.partitions.max(tp.partition + 1);
        self.logs.write().insert(tp.clone(), Arc::new(RwLock::new(log)));
        Ok(())
    }

    /// Run `f` on `tp`'s log with `cleaning`'s cleans of it aborted and
    /// paused around it (DeleteRecords).
    pub fn with_cleaning_paused<T>(
        &self,
        tp: &TopicPartition,
        cleaning: Option<&dyn CleaningControl>,
        f: impl FnOnce() -> T,
    ) -> T {
        if let Some(c) = cleaning {
            c.abort_and_pause_cleaning(tp);
        }
        let out = f();
        if let Some(c) = cleaning {
            c.resume_cleaning(tp);
        }
        out
    }

    /// Cut `tp`'s log back to `offset` (`Log::truncate_to`) with its
    /// cleaning paused, then lower its cleaner checkpoint and write its
    /// dir's recovery-point checkpoint, before anything is appended past
    /// the cut (the steps in `unified_log/truncate.rs`). Returns whether
    /// anything was removed.
    ///
    /// # Errors
    /// `UnknownTopicOrPartition`, and the truncation's errors.
    pub fn truncate_to(
        &self,
        tp: &TopicPartition,
        offset: i64,
        cleaning: Option<&dyn CleaningControl>,
    ) -> Result<bool> {
        let log =
            self.get_log(tp).ok_or_else(|| LogError::UnknownTopicOrPartition(tp.to_string()))?;
        self.with_cleaning_paused(tp, cleaning, || {
            let (truncated, end, log_dir) = {
                let mut log = log.write();
                let truncated = log.truncate_to(offset)?;
                (truncated, log.log_end_offset(), dir_failure::log_dir_of(log.dir()).to_path_buf())
            };
            if truncated {
                if let Some(c) = cleaning {
                    c.maybe_truncate_checkpoint(&log_dir, tp, end);
                }
                self.checkpoint(|log| log.recovery_point(), RECOVERY_POINT_CHECKPOINT)?;
            }
            Ok(truncated)
        })
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }
    pub fn config(&self) -> &LogManagerConfig {
        &self.config
    }

    pub fn get_log(&self, tp: &TopicPartition) -> Option<SharedLog> {
        self.logs.read().get(tp).cloned()
    }

    /// All loaded logs.
    pub fn all_logs(&self) -> Vec<(TopicPartition, SharedLog)> {
        self.logs.read().iter().map(|(tp, l)| (tp.clone(), Arc::clone(l))).collect()
    }

    pub fn topic(&self, name: &str) -> Option<TopicInfo> {
        self.topics.read().get(name).cloned()
    }

    /// Whether `topic` exists and has a partition `partition` (Kafka's
    /// `MetadataCache.contains`).
    pub fn contains_partition(&self, topic: &str, partition: i32) -> bool {
        self.topics.read().get(topic).is_some_and(|t| (0..t.partitions).contains(&partition))
    }

    /// The name of the topic with this id (Produce v13+, Fetch v13+ and
    /// DeleteTopics address topics by id). Clones only the name.
    pub fn topic_name_by_id(&self, id: &[u8; 16]) -> Option<String> {
        self.topics.read().values().find(|t| t.id == *id).map(|t| t.name.clone())
    }

    pub fn topics(&self) -> Vec<TopicInfo> {
        self.topics.read().values().cloned().collect()
    }

    /// Partitions that failed to load or whose dir failed, with the reason.
    pub fn offline_partitions(&self) -> BTreeMap<TopicPartition, String> {
        self.offline.read().clone()
    }

    /// The error of a partition not among the logs served:
    /// KAFKA_STORAGE_ERROR's `Offline` when it is offline, else unknown.
    pub fn absent_partition_error(&self, tp: &TopicPartition) -> LogError {
        match self.offline.read().get(tp) {
            Some(reason) => LogError::Offline { partition: tp.to_string(), reason: reason.clone() },
            None => LogError::UnknownTopicOrPartition(tp.to_string()),
        }
    }

    /// Check a topic name by Kafka's rules.
    ///
    /// # Errors
    /// `InvalidTopic` with the reason.
    pub fn validate_topic_name(name: &str) -> Result<()> {
        let bad =
            |reason: &str| Err(LogError::InvalidTopic { name: name.into(), reason: reason.into() });
        if name.is_empty() {
            return bad("the name is empty");
        }
        if name == "." || name == ".." {
            return bad("'.' and '..' are not allowed");
        }
        if name.len() > 249 {
            return bad("longer than 249 characters");
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-') {
            return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
        }
        Ok(())
    }

    /// Create a topic with `partitions` partitions and these config overrides.
    ///
    /// # Errors
    /// `InvalidTopic`, `TopicExists`, `InvalidConfig`, I/O errors.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: BTreeMap<String, String>,
    ) -> Result<TopicInfo> {
        Self::validate_topic_name(name)?;
        if partitions <= 0 {
            return Err(LogError::InvalidConfig {
                key: NUM_PARTITIONS.name.into(),
                reason: format!("{partitions} partitions"),
            });
        }
        let config = Arc::new(self.resolve_config(overrides)?);
        let info = TopicInfo { name: name.into(), id: random_topic_id(), partitions, config };
        // The name is reserved under the topics lock, the directories made
        // and synced without it (every Metadata and produce reads it).
        let exists = || LogError::TopicExists(name.into());
        let _reserved = self.reserve(name, exists(), |topics| {
            if topics.contains_key(name) {
                Err(exists())
            } else {
                Ok(())
            }
        })?;
        for p in (0..partitions).rev() {
            self.create_partition(&info, p)?;
        }
        self.topics.write().insert(name.into(), info.clone());
        Ok(info)
    }

    /// Reserve `name` for a change of its partitions, after `check` passed
    /// under the topics lock; the lock is released on return, the name when
    /// the reservation drops. A second change of the same name meanwhile is
    /// refused with `busy`, as Kafka's controller takes one change of a
    /// topic at a time.
    fn reserve(
        &self,
        name: &str,
        busy: LogError,
        check: impl FnOnce(&BTreeMap<String, TopicInfo>) -> Result<()>,
    ) -> Result<Reservation<'_>> {
        let topics = self.topics.read();
        let mut changing = self.changing.lock();
        if changing.contains(name) {
            return Err(busy);
        }
        check(&topics)?;
        changing.insert(name.to_string());
        Ok(Reservation { manager: self, name: name.to_string() })
    }

    /// Add partitions to a topic (CreatePartitions).
    ///
    /// # Errors
    /// `UnknownTopicOrPartition`, `InvalidConfig` when not growing, I/O errors.
    pub fn create_partitions(&self, name: &str, new_total: i32) -> Result<()> {
        let mut snapshot = None;
        let busy = LogError::InvalidConfig {
            key: "partitions".into(),
            reason: format!("the partitions of {name} are being created"),
        };
        let _reserved = self.reserve(name, busy, |topics| {
            let info =
                topics.get(name).ok_or_else(|| LogError::UnknownTopicOrPartition(name.into()))?;
            if new_total <= info.partitions {
                return Err(LogError::InvalidConfig {
                    key: "partitions".into(),
                    reason: format!(
                        "topic has {} partitions; the new count {new_total} must be larger",
                        info.partitions
                    ),
                });
            }
            snapshot = Some(info.clone());
            Ok(())
        })?;
        let snapshot = snapshot.expect("checked");
        for p in (snapshot.partitions..new_total).rev() {
            self.create_partition(&snapshot, p)?;
        }
        if let Some(info) = self.topics.write().get_mut(name) {
            info.partitions = new_total;
        }
        Ok(())
    }

    fn create_partition(&self, info: &TopicInfo, partition: i32) -> Result<()> {
        crate::failpoint::hold_here(CREATE_PARTITION_FAILPOINT, &info.name);
        let tp = TopicPartition::new(&info.name, partition);
        let parent = self.pick_log_dir()?;
        let (dir, staged) =
            (parent.join(tp.to_string()), parent.join(format!("{tp}{CREATING_SUFFIX}")));
        if staged.exists() {
            std::fs::remove_dir_all(&staged).map_err(LogError::io(&staged))?;
        }
        std::fs::create_dir_all(&staged).map_err(LogError::io(&staged))?;
        write_partition_metadata(&staged, &info.id)?;
        checkpoint::write_atomically(
            &staged.join(TOPIC_CONFIG_FILE),
            info.config.overrides_to_properties().as_bytes(),
        )?;
        std::fs::rename(&staged, &dir).map_err(LogError::io(&dir))?;
        let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
        let log = Log::open(
            &dir,
            tp.clone(),
            Arc::clone(&info.config),
            load,
            self.config.flush_before_ack,
            Arc::clone(&self.clock),
        )?
        .reporting_failures_to(Arc::clone(&self.dir_failures));
        if let Some(parent) = dir.parent() {
            checkpoint::fsync_dir(parent)?;
        }
        self.logs.write().insert(tp, Arc::new(RwLock::new(log)));
        Ok(())
    }

    /// The online log dir holding the fewest partitions.
    ///
    /// # Errors
    /// `Offline` when every log dir is.
    fn pick_log_dir(&self) -> Result<PathBuf> {
        let logs = self.logs.read();
        self.config
            .log_dirs
            .iter()
            .filter(|d| !self.dir_failures.is_offline(d))
            .min_by_key(|d| {
                logs.values().filter(|l| l.read().dir().parent() == Some(d.as_path())).count()
            })
            .cloned()
            .ok_or_else(|| LogError::Offline {
                partition: "any new partition".into(),
                reason: "every log dir is offline".into(),
            })
    }

    /// Delete a topic and its data.
    ///
    /// # Errors
    /// `UnknownTopicOrPartition`, I/O errors.
    pub fn delete_topic(&self, name: &str, cleaning: Option<&dyn CleaningControl>) -> Result<()> {
        let info = self
            .topics
            .write()
            .remove(name)
            .ok_or_else(|| LogError::UnknownTopicOrPartition(name.into()))?;
        // Highest first, so a crash in the middle leaves a prefix, which no
        // start mistakes for a cut creation (module doc).
        for p in (0..info.partitions).rev() {
            self.remove_partition_log(&TopicPartition::new(name, p), cleaning)?;
        }
        Ok(())
    }

    /// Replace a topic's config overrides (AlterConfigs), persisting them.
    ///
    /// # Errors
    /// `UnknownTopicOrPartition`, `InvalidConfig` naming the key, I/O errors.
    pub fn alter_topic_config(
        &self,
        name: &str,
        overrides: BTreeMap<String, String>,
    ) -> Result<Arc<LogConfig>> {
        let config = Arc::new(self.resolve_config(overrides)?);
        let mut topics = self.topics.write();
        let info =
            topics.get_mut(name).ok_or_else(|| LogError::UnknownTopicOrPartition(name.into()))?;
        self.check_store_only_kept(info, &config)?;
        if info.config.compaction_strategy != config.compaction_strategy {
            tracing::info!(
                "topic {name}: compaction strategy {} -> {}; it takes effect at each partition's next clean (copies cleaned before stay as they were)",
                info.config.compaction_strategy,
                config.compaction_strategy
            );
        }
        for p in 0..info.partitions {
            if let Some(log) = self.get_log(&TopicPartition::new(name, p)) {
                let mut log = log.write();
                checkpoint::write_atomically(
                    &log.dir().join(TOPIC_CONFIG_FILE),
                    config.overrides_to_properties().as_bytes(),
                )?;
                log.update_config(Arc::clone(&config));
            }
        }
        info.config = Arc::clone(&config);
        Ok(config)
    }

    /// Write the offset checkpoints of every log dir (in a cluster, the
    /// high watermarks too).
    ///
    /// # Errors
    /// I/O errors.
    pub fn checkpoint_all(&self) -> Result<()> {
        self.checkpoint(|log| log.recovery_point(), RECOVERY_POINT_CHECKPOINT)?;
        self.checkpoint(|log| log.log_start_offset(), LOG_START_OFFSET_CHECKPOINT)?;
        if self.config.partitions_placed_by_cluster {
            self.checkpoint_high_watermarks()?;
        }
        Ok(())
    }

    fn checkpoint(&self, value: impl Fn(&Log) -> i64, file: &str) -> Result<()> {
        // Held while the values are read too, so the last write is the newest.
        let _one_writer = self.checkpoint_writes.lock();
        for dir in self.online_dirs() {
            let mut entries = BTreeMap::new();
            for (tp, log) in self.all_logs() {
                let log = log.read();
                if log.dir().parent() == Some(dir.as_path()) {
                    entries.insert(tp, value(&log));
                }
            }
            let written = OffsetCheckpointFile::new(&dir, file).write(&entries);
            if let Err(e) = &written {
                if dir_failure::is_dir_failure(e) {
                    self.dir_failures.report(&dir, &e.to_string());
                }
            }
            written?;
        }
        Ok(())
    }

    /// The log dirs not offline.
    fn online_dirs(&self) -> Vec<PathBuf> {
        let offline = self.dir_failures.offline_dirs();
        self.config.log_dirs.iter().filter(|d| !offline.contains_key(*d)).cloned().collect()
    }

    /// Clean shutdown: stop the scheduler, flush every log, write the
    /// checkpoints, and leave the clean-shutdown marker in each log dir.
    ///
    /// # Errors
    /// I/O errors; without the marker the next start recovers the tails.
    pub fn shutdown(&self) -> Result<()> {
        self.scheduler.0.lock().stop = true;
        self.scheduler.1.notify_all();
        if let Some(handle) = self.scheduler_thread.lock().take() {
            let _ = handle.join();
        }
        self.dir_failures.stop();
        if let Some(handle) = self.failure_handler.lock().take() {
            let _ = handle.join();
        }
        // A failed dir gets no marker: the next start recovers its logs.
        let online = self.online_dirs();
        for (_, log) in self.all_logs() {
            let mut log = log.write();
            if log.failure().is_none() && online.iter().any(|d| log.dir().starts_with(d)) {
                log.close()?;
            }
        }
        self.checkpoint_all()?;
        for dir in self.online_dirs() {
            checkpoint::write_atomically(&dir.join(CLEAN_SHUTDOWN_FILE), b"")?;
        }
        Ok(())
    }
}

fn read_checkpoint_or_empty(dir: &Path, name: &str) -> BTreeMap<TopicPartition, i64> {
    OffsetCheckpointFile::new(dir, name).read().unwrap_or_else(|e| {
        // A damaged checkpoint only costs a longer recovery: recover from 0.
        tracing::warn!(error = %e, "ignoring unreadable checkpoint; recovering from the start");
        BTreeMap::new()
    })
}

/// A random topic id (Kafka's `Uuid.randomUuid`: a version 4 UUID from the
/// operating system's random source).
pub fn random_topic_id() -> [u8; 16] {
    uuid::Uuid::new_v4().into_bytes()
}

/// Kafka's text form of a `Uuid`: URL-safe base64 without padding, 22 characters.
const TOPIC_ID_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        // NOTE: the last character carries two bits past the 128th; they are
        // ignored rather than refusing a partition whose metadata another tool wrote.
        .with_decode_allow_trailing_bits(true),
);

/// Kafka prints Uuids as URL-safe base64 without padding.
pub fn topic_id_to_string(id: &[u8; 16]) -> String {
    TOPIC_ID_BASE64.encode(id)
}

/// Inverse of [`topic_id_to_string`]; `None` unless `s` is 22 characters of
/// the URL-safe alphabet.
pub fn topic_id_from_string(s: &str) -> Option<[u8; 16]> {
    if s.len() != 22 {
        return None;
    }
    TOPIC_ID_BASE64.decode(s).ok()?.try_into().ok()
}

fn write_partition_metadata(dir: &Path, id: &[u8; 16]) -> Result<()> {
    let text = format!("version: 0\ntopic_id: {}\n", topic_id_to_string(id));
    checkpoint::write_atomically(&dir.join(PARTITION_METADATA_FILE), text.as_bytes())
}

fn read_partition_metadata(dir: &Path) -> Result<[u8; 16]> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let text = std::fs::read_to_string(&path).map_err(LogError::io(&path))?;
    text.lines()
        .find_map(|l| l.strip_prefix("topic_id:").map(str::trim))
        .and_then(topic_id_from_string)
        .ok_or_else(|| LogError::Corrupt {
            path,
            position: 0,
            reason: "no valid topic_id line".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_ids_print_like_kafka() {
        for _ in 0..20 {
            let id = random_topic_id();
            let s = topic_id_to_string(&id);
            assert_eq!(s.len(), 22);
            assert_eq!(topic_id_from_string(&s), Some(id));
        }
        assert_eq!(topic_id_to_string(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
    }

    #[test]
    fn topic_id_strings_are_pinned() {
        // Kafka's metadata topic id, `new Uuid(0, 1)`, as Kafka prints it.
        let mut metadata_topic = [0u8; 16];
        metadata_topic[15] = 1;
        let cases: [([u8; 16], &str); 4] = [
            (metadata_topic, "AAAAAAAAAAAAAAAAAAAAAQ"),
            (std::array::from_fn(|i| i as u8), "AAECAwQFBgcICQoLDA0ODw"),
            ([0xff; 16], "_____________________w"),
            (
                std::array::from_fn(|i| if i == 15 { 0xfe } else { [0xfb, 0xff, 0xbf][i % 3] }),
                "-_-_-_-_-_-_-_-_-_-__g",
            ),
        ];
        for (id, text) in cases {
            assert_eq!(topic_id_to_string(&id), text);
            assert_eq!(topic_id_from_string(text), Some(id));
        }
        let padded = "AAAAAAAAAAAAAAAAAAAAAA==";
        for bad in [
            "",
            "AAAAAAAAAAAAAAAAAAAAA",
            "AAAAAAAAAAAAAAAAAAAAAAA",
            "AAAAAAAAAAAAAAAAAAAA+A",
            padded,
        ] {
            assert_eq!(topic_id_from_string(bad), None, "{bad}");
        }
    }

    #[test]
    fn random_topic_ids_are_version_4() {
        let id = random_topic_id();
        assert_eq!(id[6] >> 4, 4);
        assert_eq!(id[8] >> 6, 0b10);
        assert_ne!(random_topic_id(), id);
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(LogManager::validate_topic_name("orders.v1_x-y").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            assert!(LogManager::validate_topic_name(bad).is_err(), "{bad}");
        }
    }
}

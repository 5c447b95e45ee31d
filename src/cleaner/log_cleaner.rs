//! `LogCleaner`: the pool of cleaner threads (Kafka's `LogCleaner` and its
//! `CleanerThread`s). The loop only: the [`LogCleanerManager`] chooses, the
//! [`Cleaner`] cleans.
//!
//! Invariants:
//! * `log.cleaner.threads` named std threads (`log-cleaner-<n>`), each with its
//!   own [`Cleaner`] holding `dedupe.buffer.size / threads` bytes of offset
//!   map and `io.buffer.size / threads / 2` per I/O buffer; all share one
//!   [`Throttler`] (`log.cleaner.io.max.bytes.per.second` is for all of them).
//! * A thread with nothing eligible sleeps `log.cleaner.backoff.ms` on a
//!   condition variable that shutdown signals, so shutdown never waits out a
//!   backoff; a clean in progress is cancelled (it stops at its next I/O chunk
//!   and deletes its `.cleaned` output). [`LogCleaner::shutdown`] joins all.
//! * Errors are isolated per partition (see the manager). A thread that
//!   panics is logged and counted in `DeadThreadCount`; the partition it held
//!   is marked uncleanable and released, so pausers waiting on it go on.
//! * Each clean's summary goes to the `log_cleaner` tracing target (route it
//!   to its own file, as Kafka's `log-cleaner.log`).
//! * [`LogCleanerHandle::reconfigure`] applies new settings without a
//!   restart (broker dynamic configs). The I/O limit and the backoff apply at
//!   once. A change of thread count or of a per-thread budget (dedupe buffer,
//!   I/O buffer, load factor, largest batch) replaces the pool, as Kafka's
//!   `LogCleaner.reconfigure` does: the running threads are retired (a new
//!   generation is published, sleepers are woken, cleans in progress are
//!   cancelled and stop at their next I/O chunk, deleting their `.cleaned`
//!   output, so no swap is ever left half done), joined, and only then the
//!   new threads start with their new shares, so the memory budget holds
//!   throughout. This runs on a `log-cleaner-reconfigure` thread under the
//!   pool lock, which shutdown also takes, so the two never interleave.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

use super::cleaner::{Cleaner, CleanerError};
use super::collaborators::CleanerCollaborators;
use super::config::LogCleanerConfig;
use super::manager::{GrabbedLog, LogCleanerManager};
use super::stats::CleanerStats;
use super::status::ManagerStatus;
use super::throttler::{thread_sleeper, Throttler, DEFAULT_CHECK_INTERVAL_MS};
use crate::clock::SharedClock;
use crate::log::{dir_failure, LogError, LogManager, TopicPartition};

/// What the metrics read from the threads: Kafka's `LogCleaner` gauges.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CleanerThreadsStatus {
    pub threads: usize,
    pub dead_thread_count: usize,
    /// `max-buffer-utilization-percent` over the threads' last cleans.
    pub max_buffer_utilization_percent: i64,
    /// `cleaner-recopy-percent`: written / gone through over the threads' last
    /// cleans ([`CleanerStats::recopy_percent`]).
    pub cleaner_recopy_percent: i64,
    /// `max-clean-time-secs` over the threads' last cleans.
    pub max_clean_time_secs: i64,
    /// Read plus write bytes of every clean so far.
    pub io_bytes_total: u64,
    pub throttle_sleep_ms_total: i64,
    /// The I/O limit (`None`: unlimited).
    pub io_limit_bytes_per_second: Option<f64>,
    pub cleans_total: u64,
}

/// What a thread checks to know it must end.
#[derive(Debug, Default)]
struct PoolState {
    stop: bool,
    /// Bumped when the pool is replaced; a thread of an older one retires.
    generation: u64,
}

/// What the threads and the metrics share.
#[derive(Debug)]
pub struct LogCleanerHandle {
    manager: Arc<LogCleanerManager>,
    throttler: Arc<Throttler>,
    config: RwLock<LogCleanerConfig>,
    clock: SharedClock,
    state: Mutex<PoolState>,
    wake: Condvar,
    /// The running threads; held while the pool changes.
    pool: Mutex<Vec<JoinHandle<()>>>,
    dead_threads: AtomicUsize,
    last_stats: Mutex<Vec<Option<CleanerStats>>>,
    cleans: std::sync::atomic::AtomicU64,
}

impl LogCleanerHandle {
    pub fn manager(&self) -> &Arc<LogCleanerManager> {
        &self.manager
    }

    /// The settings in force.
    pub fn config(&self) -> LogCleanerConfig {
        self.config.read().clone()
    }

    /// The I/O throttle the cleaner threads share (key audits read under it too).
    pub fn throttler(&self) -> &Arc<Throttler> {
        &self.throttler
    }

    /// Whether a thread of `generation` must end (shutdown or a new pool).
    fn retired(&self, generation: u64) -> bool {
        let s = self.state.lock();
        s.stop || s.generation != generation
    }

    /// Sleep `ms` unless shutdown or a new pool comes first.
    fn backoff(&self, ms: i64, generation: u64) {
        let mut state = self.state.lock();
        let _ = self.wake.wait_while_for(
            &mut state,
            |s| !s.stop && s.generation == generation,
            Duration::from_millis(ms.max(0) as u64),
        );
    }

    /// Apply new settings while running (see the module doc).
    ///
    /// # Errors
    /// A per-thread dedupe share too small for one entry, or a bad load
    /// factor; nothing is changed then.
    pub fn reconfigure(self: &Arc<Self>, new: LogCleanerConfig) -> Result<(), LogCleanerError> {
        new.validate()?;
        let old = std::mem::replace(&mut *self.config.write(), new.clone());
        if old.max_io_bytes_per_second != new.max_io_bytes_per_second {
            self.throttler.set_desired_per_sec(new.max_io_bytes_per_second);
        }
        // Sleepers re-read the backoff.
        self.wake.notify_all();
        if old.reshapes_pool(&new) {
            let me = Arc::clone(self);
            std::thread::Builder::new()
                .name("log-cleaner-reconfigure".into())
                .spawn(move || me.replace_pool())
                .map_err(|source| LogCleanerError::Spawn { id: new.num_threads, source })?;
        }
        tracing::info!(target: "log_cleaner", threads = new.num_threads, io_max_bytes_per_second = new.max_io_bytes_per_second, "log cleaner reconfigured");
        Ok(())
    }

    /// Retire every thread, then start the pool the settings in force ask for.
    fn replace_pool(self: Arc<Self>) {
        let mut pool = self.pool.lock();
        let generation = {
            let mut s = self.state.lock();
            if s.stop {
                return;
            }
            s.generation += 1;
            s.generation
        };
        self.wake.notify_all();
        self.manager.cancel_all();
        for t in pool.drain(..) {
            // A panicked thread was already counted and logged by its DeathWatch.
            let _ = t.join();
        }
        // The latest settings, also when several changes queued up here.
        let config = self.config();
        if let Err(e) = self.spawn_threads(&mut pool, &config, generation) {
            tracing::error!(target: "log_cleaner", "cannot start the reconfigured cleaner threads: {e}");
        }
    }

    /// Start `config`'s threads of `generation` into `pool` (none when the
    /// cleaner is disabled or shutting down).
    fn spawn_threads(
        self: &Arc<Self>,
        pool: &mut Vec<JoinHandle<()>>,
        config: &LogCleanerConfig,
        generation: u64,
    ) -> Result<(), LogCleanerError> {
        let wanted = if config.enable { config.num_threads } else { 0 };
        // Build every cleaner first: a bad config fails before any thread runs.
        let cleaners = (0..wanted)
            .map(|id| {
                Cleaner::new(
                    id,
                    config.per_thread(),
                    Arc::clone(&self.throttler),
                    Arc::clone(&self.clock),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        *self.last_stats.lock() = vec![None; wanted];
        for (id, cleaner) in cleaners.into_iter().enumerate() {
            if self.retired(generation) {
                break;
            }
            let h = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name(format!("log-cleaner-{id}"))
                .spawn(move || run_thread(h, id, cleaner, generation));
            pool.push(spawned.map_err(|source| LogCleanerError::Spawn { id, source })?);
        }
        Ok(())
    }

    /// The thread gauges, from each thread's last clean.
    pub fn threads_status(&self) -> CleanerThreadsStatus {
        let stats = self.last_stats.lock();
        let last: Vec<&CleanerStats> = stats.iter().flatten().collect();
        let read: u64 = last.iter().map(|s| s.recopy_bytes()).sum();
        let written: u64 = last.iter().map(|s| s.bytes_written).sum();
        CleanerThreadsStatus {
            threads: stats.len(),
            dead_thread_count: self.dead_threads.load(Ordering::Relaxed),
            max_buffer_utilization_percent: last
                .iter()
                .map(|s| (100.0 * s.buffer_utilization) as i64)
                .max()
                .unwrap_or(0),
            cleaner_recopy_percent: (100 * written / read.max(1)) as i64,
            max_clean_time_secs: last.iter().map(|s| s.elapsed_ms() / 1000).max().unwrap_or(0),
            io_bytes_total: self.throttler.total_bytes(),
            throttle_sleep_ms_total: self.throttler.total_sleep_ms(),
            io_limit_bytes_per_second: (!self.throttler.is_unlimited())
                .then(|| self.throttler.desired_per_sec()),
            cleans_total: self.cleans.load(Ordering::Relaxed),
        }
    }

    /// The manager's status (every compacted partition).
    pub fn manager_status(&self) -> ManagerStatus {
        self.manager.status()
    }

    /// One pass: clean the filthiest log if any. Returns whether one was chosen.
    fn clean_filthiest_log(&self, id: usize, cleaner: &mut Cleaner) -> bool {
        let now = self.clock.now_ms();
        let Some(grabbed) = self.manager.grab_filthiest_compacted_log(now) else {
            return false;
        };
        let tp = grabbed.to_clean.topic_partition.clone();
        let mut guard = PanicGuard { manager: &self.manager, tp: Some(tp.clone()) };
        let result = cleaner.clean(&grabbed.log, &grabbed.to_clean, now, &grabbed.cancel);
        self.finish(id, &grabbed, result);
        guard.tp = None;
        true
    }

    fn finish(
        &self,
        id: usize,
        grabbed: &GrabbedLog,
        result: Result<super::CleanResult, CleanerError>,
    ) {
        let tp = &grabbed.to_clean.topic_partition;
        let released = match result {
            Ok(result) => {
                tracing::info!(
                    target: "log_cleaner",
                    "{}",
                    result.stats.summary(id, &tp.to_string(), grabbed.to_clean.first_dirty_offset, result.end_offset)
                );
                self.cleans.fetch_add(1, Ordering::Relaxed);
                if let Some(slot) = self.last_stats.lock().get_mut(id) {
                    *slot = Some(result.stats.clone());
                }
                self.manager.done_cleaning(grabbed, &result)
            }
            Err(CleanerError::Aborted { .. }) => {
                tracing::info!(target: "log_cleaner", partition = %tp, "clean aborted");
                self.manager.release(tp)
            }
            // The log changed under the swap (retention, DeleteRecords) or its
            // policy changed: nothing is wrong; it is chosen again later.
            Err(
                e @ (CleanerError::Log(LogError::SwapConflict { .. })
                | CleanerError::NotCompacted { .. }),
            ) => {
                tracing::info!(target: "log_cleaner", partition = %tp, "clean abandoned: {e}");
                self.manager.release(tp)
            }
            // Descriptors ran out: nothing is wrong with the disk, and the
            // partition is chosen again later.
            Err(CleanerError::Log(e @ LogError::Io { .. })) if !dir_failure::is_dir_failure(&e) => {
                tracing::warn!(target: "log_cleaner", partition = %tp, "clean abandoned: {e}");
                self.manager.release(tp)
            }
            // Kafka's cleaner takes the whole dir offline on an I/O error.
            Err(CleanerError::Log(e @ LogError::Io { .. })) => {
                self.manager.mark_log_dir_offline(&grabbed.log_dir, e.to_string());
                self.manager.logs.report_log_dir_failure(&grabbed.log_dir, &e.to_string());
                self.manager.release(tp)
            }
            Err(e) => {
                self.manager.mark_uncleanable(tp, e.to_string());
                self.manager.release(tp)
            }
        };
        if let Err(e) = released {
            tracing::error!(target: "log_cleaner", "{e}");
        }
    }
}

/// Releases the partition a panicking thread held (as uncleanable).
struct PanicGuard<'a> {
    manager: &'a LogCleanerManager,
    tp: Option<TopicPartition>,
}

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if let Some(tp) = self.tp.take() {
            self.manager
                .mark_uncleanable(&tp, "the cleaner thread panicked while cleaning it".into());
            let _ = self.manager.release(&tp);
        }
    }
}

/// Counts a thread that dies by panic.
struct DeathWatch {
    handle: Arc<LogCleanerHandle>,
    id: usize,
}

impl Drop for DeathWatch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.handle.dead_threads.fetch_add(1, Ordering::Relaxed);
            tracing::error!(target: "log_cleaner", thread = self.id, "cleaner thread died (counted in DeadThreadCount)");
        }
    }
}

/// The cleaner: its threads live in the handle's pool.
#[derive(Debug)]
pub struct LogCleaner {
    handle: Arc<LogCleanerHandle>,
    stopped: bool,
}

/// Errors starting the cleaner.
#[derive(Debug, thiserror::Error)]
pub enum LogCleanerError {
    #[error("invalid cleaner config: {0}")]
    Config(#[from] CleanerError),
    #[error("cannot start cleaner thread {id}: {source}")]
    Spawn { id: usize, source: std::io::Error },
}

impl LogCleaner {
    /// Create the manager (naming open transactions by `resolver`, if
    /// given), register it with the log layer and, when enabled, start the
    /// threads.
    ///
    /// # Errors
    /// A dedupe share too small for one entry or a bad load factor; a thread
    /// that cannot be spawned.
    pub fn start(
        config: LogCleanerConfig,
        logs: Arc<LogManager>,
        clock: SharedClock,
        collaborators: CleanerCollaborators,
    ) -> Result<Self, LogCleanerError> {
        let throttler = Arc::new(Throttler::new(
            config.max_io_bytes_per_second,
            DEFAULT_CHECK_INTERVAL_MS,
            Arc::clone(&clock),
            thread_sleeper(),
        ));
        Self::start_with(config, logs, clock, throttler, collaborators)
    }

    /// [`LogCleaner::start`] with a given throttle (tests).
    ///
    /// # Errors
    /// As for `start`.
    pub fn start_with(
        config: LogCleanerConfig,
        logs: Arc<LogManager>,
        clock: SharedClock,
        throttler: Arc<Throttler>,
        collaborators: CleanerCollaborators,
    ) -> Result<Self, LogCleanerError> {
        let manager = LogCleanerManager::new(
            Arc::clone(&logs),
            Arc::clone(&clock),
            config.uncleanable_retry_backoff_ms,
        )
        .with_collaborators(collaborators);
        let manager = Arc::new(manager);
        let threads_wanted = if config.enable { config.num_threads } else { 0 };
        let handle = Arc::new(LogCleanerHandle {
            manager: Arc::clone(&manager),
            throttler,
            config: RwLock::new(config.clone()),
            clock,
            state: Mutex::new(PoolState::default()),
            wake: Condvar::new(),
            pool: Mutex::new(Vec::new()),
            dead_threads: AtomicUsize::new(0),
            last_stats: Mutex::new(Vec::new()),
            cleans: std::sync::atomic::AtomicU64::new(0),
        });
        let mut me = Self { handle, stopped: false };
        let spawned = {
            let mut pool = me.handle.pool.lock();
            me.handle.spawn_threads(&mut pool, &config, 0)
        };
        if let Err(e) = spawned {
            me.shutdown();
            return Err(e);
        }
        if config.enable {
            tracing::info!(target: "log_cleaner", threads = threads_wanted, "log cleaner started");
        } else {
            tracing::info!(target: "log_cleaner", "log.cleaner.enable=false: compacted topics are not cleaned");
        }
        Ok(me)
    }

    pub fn handle(&self) -> &Arc<LogCleanerHandle> {
        &self.handle
    }

    /// Stop the threads: wake the sleeping ones, cancel cleans in progress,
    /// and join them all.
    pub fn shutdown(&mut self) {
        self.stopped = true;
        self.handle.state.lock().stop = true;
        self.handle.wake.notify_all();
        self.handle.manager.cancel_all();
        // Waits for a pool replacement under way, which then starts nothing.
        let mut pool = self.handle.pool.lock();
        for t in pool.drain(..) {
            // A panicked thread was already counted and logged by its DeathWatch.
            let _ = t.join();
        }
        drop(pool);
        tracing::info!(target: "log_cleaner", "log cleaner stopped");
    }
}

impl Drop for LogCleaner {
    fn drop(&mut self) {
        if !self.stopped {
            self.shutdown();
        }
    }
}

fn run_thread(handle: Arc<LogCleanerHandle>, id: usize, mut cleaner: Cleaner, generation: u64) {
    let _watch = DeathWatch { handle: Arc::clone(&handle), id };
    while !handle.retired(generation) {
        let cleaned = handle.clean_filthiest_log(id, &mut cleaner);
        handle.manager.record_run(handle.clock.now_ms());
        if !cleaned {
            let backoff = handle.config.read().backoff_ms;
            handle.backoff(backoff, generation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool_size(handle: &LogCleanerHandle) -> usize {
        handle.pool.lock().len()
    }

    fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn reconfigure_replaces_the_pool_and_the_throttle_live() {
        let dir = tempfile::tempdir().unwrap();
        let clock = crate::clock::system();
        let logs = Arc::new(
            LogManager::open(crate::log::LogManagerConfig::new(dir.path()), Arc::clone(&clock))
                .unwrap(),
        );
        let config = LogCleanerConfig { dedupe_buffer_size: 1 << 20, ..Default::default() };
        let mut cleaner =
            LogCleaner::start(config.clone(), logs, clock, Default::default()).unwrap();
        let handle = Arc::clone(cleaner.handle());
        assert_eq!((pool_size(&handle), handle.threads_status().threads), (1, 1));
        handle
            .reconfigure(LogCleanerConfig {
                num_threads: 4,
                max_io_bytes_per_second: 5e6,
                ..config.clone()
            })
            .unwrap();
        // The throttle changes at once; the pool once the old thread is joined.
        assert_eq!(handle.threads_status().io_limit_bytes_per_second, Some(5e6));
        wait_for("four threads", || pool_size(&handle) == 4);
        assert_eq!(handle.threads_status().threads, 4);
        assert_eq!(handle.config().per_thread().dedupe_buffer_size, (1 << 20) / 4);
        // Only the backoff: the same threads keep running.
        handle
            .reconfigure(LogCleanerConfig {
                num_threads: 4,
                backoff_ms: 5,
                max_io_bytes_per_second: 5e6,
                ..config.clone()
            })
            .unwrap();
        assert_eq!(pool_size(&handle), 4);
        // Too small a share for one entry is refused and changes nothing.
        let tiny = LogCleanerConfig { num_threads: 4, dedupe_buffer_size: 40, ..config.clone() };
        assert!(handle.reconfigure(tiny).is_err());
        assert_eq!(handle.config().dedupe_buffer_size, 1 << 20);
        handle.reconfigure(LogCleanerConfig { num_threads: 2, ..config }).unwrap();
        wait_for("two threads", || pool_size(&handle) == 2);
        assert!(handle.threads_status().io_limit_bytes_per_second.is_none());
        cleaner.shutdown();
        assert_eq!(pool_size(&handle), 0);
    }

    #[test]
    fn the_budget_is_split_per_thread() {
        let c = LogCleanerConfig { num_threads: 4, ..Default::default() };
        let t = c.per_thread();
        assert_eq!(t.dedupe_buffer_size, 32 << 20);
        assert_eq!(t.io_buffer_size, 64 << 10);
        let huge =
            LogCleanerConfig { num_threads: 1, dedupe_buffer_size: 8 << 30, ..Default::default() };
        assert_eq!(huge.per_thread().dedupe_buffer_size, i32::MAX as usize);
        // With tiered storage the store cleaner takes a share of its own:
        // three threads and it, four shares in all.
        let tiered = LogCleanerConfig { num_threads: 3, store_share: true, ..Default::default() };
        assert_eq!(tiered.per_thread().dedupe_buffer_size, 32 << 20);
    }
}

//! [`ReplicaManager`]: appends as leader, wakes delayed fetches, and holds
//! the fetch sessions and the store's reader (the module doc has the rules).

use std::sync::Arc;

use super::delayed_fetch::{DelayedFetchPurgatory, FetchWaiter};
use super::fetch_session::FetchSessionCache;
use super::leadership::{Leadership, Leading};
use super::replication_quota::ReplicationQuotas;
use crate::blocking::{self, IoThreads};
use crate::log::manager::SharedLog;
use crate::log::producer_state::VerificationGuard;
use crate::log::record_batch::{any_batch_compressed, first_transactional_producer};
use crate::log::{Log, LogAppendInfo, LogError, LogManager, TopicPartition};
use crate::remote::reader::RemoteLogReader;

/// Kafka's `acks` of a Produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: no response (a failed partition closes the connection).
    None,
    /// `acks=1`: answered once the leader appended.
    Leader,
    /// `acks=-1` (`all`): answered once the in-sync replicas have it; with
    /// one replica, once the leader appended.
    All,
}

impl Acks {
    /// `None` for a value Kafka refuses (INVALID_REQUIRED_ACKS).
    pub fn from_request(acks: i16) -> Option<Self> {
        match acks {
            0 => Some(Acks::None),
            1 => Some(Acks::Leader),
            -1 => Some(Acks::All),
            _ => None,
        }
    }
}

/// Why a partition's records were not appended; `E` is the transaction
/// check's own error.
#[derive(Debug)]
pub enum AppendError<E> {
    /// No such partition here.
    UnknownTopicOrPartition,
    /// The cluster has the partition; this broker does not lead it.
    NotLeader,
    /// `acks=all` with an ISR below the effective `min.insync.replicas`.
    NotEnoughReplicas,
    /// The partition's log could not load (its dir is offline).
    Offline,
    /// The transaction check refused the transactional batch.
    Verification(E),
    /// The log refused or failed the append.
    Log(LogError),
}

/// How an `acks=all` wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicated {
    /// Every ISR member has it.
    Committed,
    /// This broker stopped leading the partition meanwhile.
    NotLeader,
    /// Not committed within the request's timeout.
    TimedOut,
}

/// The partitions as Produce and Fetch reach them.
#[derive(Debug)]
pub struct ReplicaManager {
    logs: Arc<LogManager>,
    /// The long-polling fetches, parked on their partitions.
    delayed_fetches: Arc<DelayedFetchPurgatory>,
    fetch_sessions: FetchSessionCache,
    remote_reader: Option<Arc<RemoteLogReader>>,
    /// Where appends that inflate records run (`num.io.threads` at once).
    io_threads: IoThreads,
    /// In a cluster, the partitions led here; `None`: one node leads all.
    leadership: Option<Arc<Leadership>>,
    /// The replication throttles (dynamic bounds).
    quotas: Arc<ReplicationQuotas>,
}

impl ReplicaManager {
    pub fn new(
        logs: Arc<LogManager>,
        fetch_sessions: FetchSessionCache,
        remote_reader: Option<Arc<RemoteLogReader>>,
        io_threads: usize,
    ) -> Self {
        let delayed_fetches = Arc::default();
        let io_threads = IoThreads::new(io_threads);
        let quotas = Arc::default();
        Self {
            logs,
            delayed_fetches,
            fetch_sessions,
            remote_reader,
            io_threads,
            leadership: None,
            quotas,
        }
    }

    /// The replication throttles, windows and bounds from `values`.
    pub fn with_quotas(mut self, values: &dyn crate::config_def::ConfigValues) -> Self {
        self.quotas = Arc::new(ReplicationQuotas::from_values(values));
        self
    }

    /// The leader's and the followers' replication throttles.
    pub fn quotas(&self) -> &Arc<ReplicationQuotas> {
        &self.quotas
    }

    /// In a cluster: serve only the partitions `leadership` says are led here.
    pub fn with_leadership(mut self, leadership: Option<Arc<Leadership>>) -> Self {
        self.leadership = leadership;
        self
    }

    /// In a cluster, the partitions led here and their followers' states.
    pub fn leadership(&self) -> Option<&Arc<Leadership>> {
        self.leadership.as_ref()
    }

    /// `acks=all` may append to `tp` (its ISR holds the effective min ISR).
    ///
    /// # Errors
    /// `NotEnoughReplicas`.
    pub fn check_min_isr<E>(&self, tp: &TopicPartition) -> Result<(), AppendError<E>> {
        match self.leadership.as_ref().and_then(|l| l.led(tp)) {
            Some(led) if led.isr.len() < led.min_isr => Err(AppendError::NotEnoughReplicas),
            _ => Ok(()),
        }
    }

    /// Raise `log`'s high watermark to what its ISR holds (a leader in a
    /// cluster), waking the fetches and produces parked on it if it moved.
    pub fn maybe_advance_high_watermark(&self, log: &mut Log) -> bool {
        let Some(leadership) = &self.leadership else { return false };
        let tp = log.topic_partition();
        let Some(hw) = leadership.high_watermark_candidate(tp, log.local_high_watermark()) else {
            return false;
        };
        let moved = log.raise_replicated_high_watermark(hw);
        if moved {
            self.delayed_fetches.complete(log.topic_partition());
        }
        moved
    }

    /// A replica's fetch of `tp` at `fetch_offset` (the leader's side of
    /// replication): its state recorded and the high watermark advanced.
    /// `false` when `replica` is not a follower of a partition led here.
    pub fn record_follower_fetch(
        &self,
        log: &SharedLog,
        replica: (i32, i64),
        fetch_offset: i64,
    ) -> bool {
        let Some(leadership) = &self.leadership else { return false };
        let now = self.logs.clock().now_ms();
        let mut log = blocking::write(log);
        let end = log.log_end_offset();
        if !leadership.record_fetch(log.topic_partition(), replica, fetch_offset, end, now) {
            return false;
        }
        self.maybe_advance_high_watermark(&mut log);
        true
    }

    /// Wait until each `(partition, end)` is committed (its high watermark
    /// reached `end`), the broker stopped leading it, or `timeout` passed:
    /// `acks=all`'s delayed produce, parked on its partitions like a fetch.
    pub async fn wait_for_replication(
        &self,
        pending: &[(TopicPartition, i64)],
        timeout: std::time::Duration,
    ) -> Vec<Replicated> {
        let mut outcome: Vec<Option<Replicated>> = vec![None; pending.len()];
        let waiter = self.watch_partitions(pending.iter().map(|(tp, _)| tp.clone()));
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            for (i, (tp, end)) in pending.iter().enumerate() {
                if outcome[i].is_none() {
                    outcome[i] = self.replicated(tp, *end);
                }
            }
            if outcome.iter().all(Option::is_some) {
                break;
            }
            if tokio::time::timeout_at(deadline, waiter.changed()).await.is_err() {
                break;
            }
        }
        outcome.into_iter().map(|o| o.unwrap_or(Replicated::TimedOut)).collect()
    }

    /// [`Self::wait_for_replication`] after appends made outside Produce
    /// (a coordinator's records, transaction markers): each partition's
    /// high watermark raised first (an ISR of this broker alone commits at
    /// once) and its followers' parked fetches woken. Blocks, off the
    /// async workers, on `runtime`.
    pub fn await_appended(
        &self,
        pending: &[(TopicPartition, i64)],
        timeout: std::time::Duration,
        runtime: &tokio::runtime::Handle,
    ) -> Vec<Replicated> {
        for (tp, _) in pending {
            if let Some(log) = self.logs.get_log(tp) {
                self.maybe_advance_high_watermark(&mut blocking::write(&log));
            }
            self.delayed_fetches.complete(tp);
        }
        let wait = self.wait_for_replication(pending, timeout);
        blocking::off_worker(|| runtime.block_on(wait))
    }

    fn replicated(&self, tp: &TopicPartition, end: i64) -> Option<Replicated> {
        if self.leads(tp) != Leading::Yes {
            return Some(Replicated::NotLeader);
        }
        let log = self.logs.get_log(tp)?;
        let hw = blocking::read(&log).high_watermark();
        (hw >= end).then_some(Replicated::Committed)
    }

    /// Whether this broker may serve `tp` as its leader (always, alone).
    pub fn leads(&self, tp: &TopicPartition) -> Leading {
        self.leadership.as_ref().map_or(Leading::Yes, |l| l.leads(tp))
    }

    pub fn logs(&self) -> &Arc<LogManager> {
        &self.logs
    }

    /// Incremental fetch sessions (KIP-227), shared by every connection.
    pub fn fetch_sessions(&self) -> &FetchSessionCache {
        &self.fetch_sessions
    }

    /// Reads below the local log from the tiered storage store, when it is on.
    pub fn remote_reader(&self) -> Option<&Arc<RemoteLogReader>> {
        self.remote_reader.as_ref()
    }

    /// A place among the `num.io.threads` requests that inflate records at
    /// once: a Produce with compressed batches takes one before its appends.
    pub async fn io_place(&self) -> tokio::sync::SemaphorePermit<'_> {
        self.io_threads.place().await
    }

    /// The parked fetches, for the replica fetchers to wake the consumers
    /// reading a followed partition when it grows (KIP-392).
    pub fn delayed_fetches(&self) -> Arc<DelayedFetchPurgatory> {
        Arc::clone(&self.delayed_fetches)
    }

    /// Wake every parked fetch (a topic deleted, the broker stopping).
    pub fn complete_all_delayed_fetches(&self) {
        self.delayed_fetches.complete_all();
    }

    /// Park a long-polling fetch on the partitions it reads, before its
    /// first read.
    pub fn watch_partitions(
        &self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Arc<FetchWaiter> {
        self.delayed_fetches.watch(partitions)
    }

    /// The wakeup the transaction markers' writer calls after each marker
    /// (a marker moves the last stable offset read_committed fetches wait on).
    pub fn append_hook(&self) -> Arc<dyn Fn(&TopicPartition) + Send + Sync> {
        let delayed = Arc::clone(&self.delayed_fetches);
        Arc::new(move |tp| delayed.complete(tp))
    }

    /// The log of `tp`.
    ///
    /// # Errors
    /// `Offline` when its dir could not load it, else `UnknownTopicOrPartition`.
    pub fn partition<E>(&self, tp: &TopicPartition) -> Result<SharedLog, AppendError<E>> {
        match self.leads(tp) {
            Leading::Yes => {}
            Leading::NotLeader => return Err(AppendError::NotLeader),
            Leading::Unknown => return Err(AppendError::UnknownTopicOrPartition),
        }
        self.logs.get_log(tp).ok_or_else(|| {
            if self.logs.offline_partitions().contains_key(tp) {
                AppendError::Offline
            } else {
                AppendError::UnknownTopicOrPartition
            }
        })
    }

    /// Append `records` to `log` (of [`Self::partition`]) as its leader. The
    /// caller looks the partition up first, so its absence is answered
    /// before anything about the records. A transactional batch of a
    /// producer with no open transaction on the partition (at its epoch) is
    /// first passed to `verify` (producer id, epoch) with no log lock held;
    /// the guard taken before asking is what the append checks. A successful append wakes
    /// the fetches parked on the partition (Kafka's ReplicaManager completes
    /// its delayed fetches after the append the same way).
    ///
    /// No async worker waits here on the log's lock or on the disk: a held
    /// lock is waited for, and an append that recompresses or may touch the
    /// disk beyond a write (a roll) runs, in `block_in_place`, and so does
    /// one that inflates records, whose request holds a place of
    /// [`Self::io_place`]; the
    /// fsyncs the flush policy or a roll calls for run after the lock is
    /// released (`FlushJob`), so appends and reads of the partition go on
    /// meanwhile, and the answer waits for them.
    ///
    /// # Errors
    /// The partition's absence, `verify`'s refusal or the log's.
    pub fn append_records<E>(
        &self,
        log: &SharedLog,
        records: &[u8],
        verify: Option<Verify<'_, E>>,
    ) -> Result<LogAppendInfo, AppendError<E>> {
        // With a check, the append is a verified one even when no batch
        // needed asking (the log then refuses a batch opening a transaction).
        let verified = match verify {
            Some(verify) => Some(verified_guard(log, records, verify)?),
            None => None,
        };
        // The batches are rewritten in place (offsets, LogAppendTime), so the
        // request's shared bytes are copied once into a buffer we own.
        let mut buf = records.to_vec();
        let append = |log: &mut Log, buf: &mut [u8]| {
            let appended = log.append_deferring_flush(buf, verified);
            if appended.is_ok() {
                // Under the log's lock: the purgatory's lock is never held
                // while a log's is taken, and the name need not be copied.
                self.delayed_fetches.complete(log.topic_partition());
                // An ISR of this broker alone commits at once.
                self.maybe_advance_high_watermark(log);
            }
            appended
        };
        let appended = if any_batch_compressed(&buf) {
            // Inflated to be validated: the request holds a place of
            // `io_place`, so at most `num.io.threads` of these run at once.
            blocking::off_worker(|| append(&mut log.write(), &mut buf))
        } else {
            let mut log = blocking::write(log);
            // A small uncompressed append is a copy into the page cache: done
            // here, as a handoff per request costs more than it.
            if log.append_is_heavy(&buf) {
                blocking::off_worker(|| append(&mut log, &mut buf))
            } else {
                append(&mut log, &mut buf)
            }
        };
        let (info, job) = appended.map_err(AppendError::Log)?;
        if let Some(job) = job {
            let synced = blocking::off_worker(|| job.run());
            let mut log = blocking::write(log);
            log.complete_flush_job(&job, synced).map_err(AppendError::Log)?;
            // With log.flush.before.ack the records became readable only now.
            self.delayed_fetches.complete(log.topic_partition());
            self.maybe_advance_high_watermark(&mut log);
        }
        Ok(info)
    }
}

/// How a transactional Produce is checked with the coordinator before its
/// batch may open a transaction on a partition.
pub struct Verify<'a, E> {
    /// Asks the coordinator (producer id, epoch).
    pub ask: &'a dyn Fn(i64, i16) -> Result<(), E>,
    /// The request speaks transactions v2: the asking adds the partition,
    /// and a guard taken now survives the previous transaction's marker.
    pub epoch_bump: bool,
}

/// The verification guard of `records`' first transactional batch, once
/// `verify` accepted it (`None`: no batch needs asking).
fn verified_guard<E>(
    log: &SharedLog,
    records: &[u8],
    verify: Verify<'_, E>,
) -> Result<Option<VerificationGuard>, AppendError<E>> {
    let Some((pid, epoch)) = first_transactional_producer(records) else {
        return Ok(None);
    };
    let started = blocking::write(log).maybe_start_verification(pid, epoch, verify.epoch_bump);
    let Some(guard) = started else {
        return Ok(None);
    };
    // The coordinator's answer may wait on the transaction's lock.
    blocking::off_worker(|| (verify.ask)(pid, epoch)).map_err(|e| {
        blocking::write(log).end_verification(pid, guard);
        AppendError::Verification(e)
    })?;
    Ok(Some(guard))
}

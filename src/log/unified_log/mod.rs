//! `Log` (Kafka's `UnifiedLog` over its `LocalLog`, one type here): one
//! partition's ordered segments, the offsets that describe it, its producer
//! state and transactions, and the rules that append to it and roll it. Each
//! other concept of `Log` is a child file of this directory: retention and
//! DeleteRecords in `retention` (the store's part in `store_retention`),
//! reads by isolation level in `read`, the cleaner's swap of segments in
//! `replace_segments`, fsyncs under the lock or after it (`FlushJob`) in
//! `flush`, leader epochs (stamping, becoming leader, OffsetForLeaderEpoch's
//! answers) in `epochs`, rolling the active segment in `roll`, a follower's appends of its leader's batches in `follower`,
//! cutting the log back to where a leader's log diverged in
//! `truncate`; opening and recovery are the loader's (`log_loader`).
//!
//! Invariants:
//! * `segments` is keyed by base offset, non-empty, and the last one is active:
//!   only it is appended to. Every other segment is closed and immutable except
//!   through the cleaner's swap.
//! * `log_start_offset <= recovery_point <= next_offset` (the log end offset,
//!   which is also the high watermark on a single node; with
//!   `log.flush.before.ack` the recovery point is),
//!   `log_start_offset <= local_log_start_offset() <= next_offset`, and
//!   `log_start_offset <= last stable offset <= next_offset`. The first
//!   segment's base is the log start only without `remote.storage.enable`:
//!   with it, the segments below the first local one may be only in the
//!   object store, and the log start is the earliest offset of the two.
//! * An append's producer checks pass as a whole before a byte is written; its
//!   producer state and the transactions its markers complete (with their
//!   `.txnindex` entries) are installed right after the bytes.
//! * Everything below `recovery_point` has been fsynced. After a crash only
//!   bytes at or past it may be truncated; damage below it takes the partition
//!   offline instead of silently dropping acknowledged data.
//! * Once a write fails on the disk (`dir_failure`), the log takes no more
//!   writes (what it holds in memory may then be ahead of its files) and
//!   its dir is reported offline; a restart recovers it from the files.
//!   Running out of descriptors fails the append that met it and changes
//!   nothing: a roll opens its new files before it touches the old segment.
//! * A segment leaves the readable set by being renamed `.deleted` and queued
//!   in `pending_deletes`; its files are unlinked only after
//!   `file.delete.delay.ms`, so a reader holding them is never cut short.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::LogConfig;
use super::control_record::EndTransactionMarker;
use super::dir_failure::{self, LogDirFailureChannel};
use super::error::{LogError, Result};
use super::leader_epoch_cache::LeaderEpochFileCache;
use super::log_loader::{self, LoadParams};
use super::producer_snapshot;
use super::producer_state::{
    AppendOrigin, BatchMetadata, ProducerAppendInfo, ProducerStateManager, VerificationGuard,
};
use super::record_batch::{self, TimestampType, NO_TIMESTAMP};
use super::segment::{self, LogSegment, RollParams, SegmentConfig};
use super::topic_partition::TopicPartition;
use super::transaction_index::AbortedTxn;
use super::validator::{self, ValidatedBatch, ValidationContext};
use crate::clock::SharedClock;
pub use read::{
    FetchDataInfo, FetchIsolation, FetchRegionInfo, EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP,
};

mod epochs;
mod flush;
mod follower;
mod producer_check;
pub mod read;
pub mod replace_segments;
mod retention;
mod roll;
mod store_retention;
mod truncate;

pub use flush::FlushJob;
use flush::FlushMode;
use producer_check::{check_producers, ProducerCheck, TxnCheck};
pub use store_retention::{store_listing_digest, StoreSegment};
pub use truncate::TRUNCATE_CRASH_POINT;

/// What a partition's decompression buffer may keep between operations;
/// a larger one, left by a large compressed batch, is let go.
pub const SCRATCH_KEEP_BYTES: usize = 1 << 20;

/// What an append did, for the Produce response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// The broker's time when the topic uses LogAppendTime, else -1.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    pub records_count: i64,
    pub max_timestamp: i64,
    pub valid_bytes: usize,
}

#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    tp: TopicPartition,
    config: Arc<LogConfig>,
    segments: BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    next_offset: i64,
    recovery_point: i64,
    unflushed_messages: i64,
    last_flush_ms: i64,
    /// fsync before an append returns (the broker's `log.flush.before.ack`).
    flush_before_ack: bool,
    clock: SharedClock,
    /// Segments renamed to `.deleted`, with the time their files may be unlinked.
    pending_deletes: Vec<(i64, LogSegment)>,
    scratch: Vec<u8>,
    validated: Vec<ValidatedBatch>,
    /// Producers' last batches and open transactions, rebuilt from the log on open.
    producers: ProducerStateManager,
    /// The last offset the object store holds (`retention`); -1 until known.
    highest_offset_in_remote_storage: i64,
    /// The segments the store lists, as numbers (`store_retention`).
    store_segments: Vec<StoreSegment>,
    /// The offset the fsyncs deferred by appends must reach (`flush`).
    pending_flush: Option<i64>,
    /// Files of segments closed by a deferred roll, for the next job (their
    /// last index entries were written at the roll).
    pending_closed: Vec<(PathBuf, Arc<std::fs::File>)>,
    /// The first fsync failure of any flush of this log: fsyncs of one file
    /// report a writeback error once, so every later one must see it here.
    flush_failure: Arc<parking_lot::Mutex<Option<String>>>,
    /// Why the log takes no more writes: its disk failed (module doc).
    failed: Option<String>,
    /// Where that failure is reported (the `LogManager`'s channel).
    failures: Option<Arc<LogDirFailureChannel>>,
    /// Where each leader epoch began (`leader-epoch-checkpoint`).
    leader_epochs: LeaderEpochFileCache,
    /// The epoch this log stamps on what it appends as leader: the latest
    /// it holds (0 for a new log) until the replica layer sets another.
    leader_epoch: i32,
    /// How many times the log was cut back (`truncate`), so a flush job
    /// taken before a cut moves nothing (`flush`).
    truncations: u64,
    /// Set by replication (`replica`): on a leader the least log end of its
    /// other in-sync replicas, on a follower its leader's high watermark.
    /// `None` on a single node, whose high watermark is its own log end.
    replicated_hw: Option<i64>,
}

impl Log {
    pub(super) fn segment_config(config: &LogConfig) -> SegmentConfig {
        SegmentConfig {
            index_interval_bytes: config.index_interval_bytes,
            max_index_size: config.segment_index_bytes,
            // Batches on disk may be larger than today's limit if it was lowered;
            // scanning accepts anything up to the largest value Kafka allows.
            max_batch_size: config.max_message_bytes.max(i32::MAX as usize / 2),
        }
    }

    /// Open (or create) the log in `dir`; the loader completes interrupted
    /// swaps and recovers the unflushed tail first.
    ///
    /// # Errors
    /// I/O errors, and `Offline` when data below the recovery point is damaged.
    pub fn open(
        dir: &Path,
        tp: TopicPartition,
        config: Arc<LogConfig>,
        load: LoadParams,
        flush_before_ack: bool,
        clock: SharedClock,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(LogError::io(dir))?;
        let seg_config = Self::segment_config(&config);
        let remote = config.remote_storage_enable;
        let loaded = log_loader::load(dir, &tp, seg_config, load, remote, &clock)?;
        let mut log = Self {
            dir: dir.into(),
            tp,
            config,
            segments: loaded.segments,
            log_start_offset: loaded.log_start_offset,
            next_offset: loaded.next_offset,
            recovery_point: loaded.recovery_point,
            unflushed_messages: 0,
            last_flush_ms: clock.now_ms(),
            flush_before_ack,
            clock,
            pending_deletes: Vec::new(),
            scratch: Vec::new(),
            validated: Vec::new(),
            producers: loaded.producers,
            leader_epoch: loaded.leader_epochs.latest_epoch().unwrap_or(0),
            replicated_hw: None,
            leader_epochs: loaded.leader_epochs,
            truncations: 0,
            highest_offset_in_remote_storage: -1,
            store_segments: Vec::new(),
            pending_flush: None,
            pending_closed: Vec::new(),
            flush_failure: Arc::default(),
            failed: None,
            failures: None,
        };
        if flush_before_ack && log.recovery_point < log.next_offset {
            // What recovery kept is readable (high watermark) once durable.
            log.flush()?;
        }
        Ok(log)
    }

    /// Report a failure of this log's disk to `channel` (the `LogManager`
    /// does, for every log it opens).
    #[must_use]
    pub fn reporting_failures_to(mut self, channel: Arc<LogDirFailureChannel>) -> Self {
        self.failures = Some(channel);
        self
    }

    /// Why the log takes no more writes, if its disk failed.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    fn check_writable(&self) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(reason) => {
                Err(LogError::Offline { partition: self.tp.to_string(), reason: reason.clone() })
            }
        }
    }

    /// Pass on the outcome of a write; a failure of the disk stops the log
    /// taking writes and reports its dir (module doc).
    fn note_write<T>(&mut self, outcome: Result<T>) -> Result<T> {
        match &outcome {
            Err(e) if dir_failure::is_dir_failure(e) => self.fail(e),
            Err(e @ LogError::Io { .. }) => {
                tracing::warn!(partition = %self.tp, "write refused, the log is unchanged: {e}");
            }
            _ => {}
        }
        outcome
    }

    /// Take no more writes and report the dir (or, for an error that is no
    /// disk failure, the partition alone): after `e`, memory and disk may
    /// disagree.
    fn fail(&mut self, e: &LogError) {
        if self.failed.is_some() {
            return;
        }
        let cause = e.to_string();
        tracing::error!(partition = %self.tp, "write failed, the log takes no more writes: {cause}");
        if let Some(channel) = &self.failures {
            if dir_failure::is_dir_failure(e) {
                channel.report(dir_failure::log_dir_of(&self.dir), &cause);
            } else {
                channel.report_log(&self.tp, &cause);
            }
        }
        self.failed = Some(cause);
    }
    /// The idempotent-producer state (for tests and the producer id allocator).
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producers
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }
    pub fn config(&self) -> &Arc<LogConfig> {
        &self.config
    }
    /// Replace the config (AlterConfigs); takes effect on the next append or check.
    /// Turning remote storage off or on forgets what the store held: its
    /// copy may be retired and swept meanwhile, so nothing may leave local
    /// disk on its account until the uploader has read the store again.
    pub fn update_config(&mut self, config: Arc<LogConfig>) {
        if config.remote_storage_enable != self.config.remote_storage_enable {
            self.highest_offset_in_remote_storage = -1;
            self.store_segments.clear();
        }
        self.config = config;
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    /// The log end offset: the offset the next record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.next_offset
    }
    /// On a single node every appended record is committed; with
    /// `log.flush.before.ack`, once it is durable (the recovery point), so
    /// no reader sees a record a crash could still take back.
    /// The offset below which records are committed: this log's own end
    /// (its recovery point under `log.flush.before.ack`, so only what is on
    /// disk counts), bounded by what replication says the other replicas
    /// hold (`replicated_high_watermark`).
    pub fn high_watermark(&self) -> i64 {
        let local = self.local_high_watermark();
        self.replicated_hw.map_or(local, |hw| hw.min(local))
    }

    /// What this replica itself holds committed: its log end, or its
    /// recovery point under `log.flush.before.ack`.
    pub fn local_high_watermark(&self) -> i64 {
        if self.flush_before_ack {
            self.recovery_point
        } else {
            self.next_offset
        }
    }

    /// The bound replication set (`None`: a single node's log).
    pub fn replicated_high_watermark(&self) -> Option<i64> {
        self.replicated_hw
    }

    /// Set the bound (a follower: its leader's high watermark; a new
    /// leader or follower: its checkpointed one), never past the log end
    /// nor below its start.
    pub fn set_replicated_high_watermark(&mut self, hw: i64) {
        self.replicated_hw = Some(hw.clamp(self.log_start_offset, self.next_offset));
    }

    /// Raise the bound to `hw` (a leader: the least log end over its
    /// in-sync replicas, its own included); it never goes down but by
    /// truncation. Whether the high watermark moved.
    pub fn raise_replicated_high_watermark(&mut self, hw: i64) -> bool {
        let before = self.high_watermark();
        if self.replicated_hw.is_none_or(|old| hw > old) {
            self.replicated_hw = Some(hw);
        }
        self.high_watermark() > before
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &LogSegment> + ExactSizeIterator {
        self.segments.values()
    }
    pub fn active_segment(&self) -> &LogSegment {
        self.segments.values().next_back().expect("a log always has a segment")
    }
    /// Bytes of all segments.
    pub fn size(&self) -> u64 {
        self.segments.values().map(LogSegment::size).sum()
    }

    /// The segments by base offset, for the swap's checks and the reads.
    pub(super) fn segment_map(&self) -> &BTreeMap<i64, LogSegment> {
        &self.segments
    }

    /// Bytes the partition's decompression buffer holds now (at most
    /// [`SCRATCH_KEEP_BYTES`] between operations).
    pub fn scratch_capacity(&self) -> usize {
        self.scratch.capacity()
    }

    /// Let go of the decompression buffer once an operation inflated more
    /// than [`SCRATCH_KEEP_BYTES`] into it, so one large compressed batch
    /// does not pin its inflated size for the partition's lifetime.
    pub(super) fn shrink_scratch(&mut self) {
        if self.scratch.capacity() > SCRATCH_KEEP_BYTES {
            self.scratch = Vec::new();
        }
    }

    /// The segments and the reusable scratch buffer, for reads that inflate records.
    pub(super) fn segments_and_scratch(&mut self) -> (&BTreeMap<i64, LogSegment>, &mut Vec<u8>) {
        (&self.segments, &mut self.scratch)
    }

    /// When a segment removed now may have its files unlinked.
    pub(super) fn file_delete_due_ms(&self) -> i64 {
        self.clock.now_ms().saturating_add(self.config.file_delete_delay_ms)
    }

    /// Take the closed segment at `base` out of the readable set: rename it
    /// `.deleted` and queue its files for unlinking at `due`. The caller keeps
    /// the invariants (never the active segment; its offsets are retained away
    /// or covered by a segment the caller installs).
    ///
    /// # Errors
    /// I/O errors renaming the files; the segment is out of the set anyway.
    pub(super) fn retire_segment(&mut self, base: i64, due: i64) -> Result<()> {
        let mut seg = self.segments.remove(&base).expect("the caller listed a present segment");
        seg.change_file_suffix(segment::DELETED_SUFFIX)?;
        self.pending_deletes.push((due, seg));
        Ok(())
    }

    /// Put a closed segment into the readable set (the swap's new segments).
    pub(super) fn install_segment(&mut self, seg: LogSegment) {
        self.segments.insert(seg.base_offset(), seg);
    }

    /// Whether appending `records` is more than a copy into the page cache:
    /// a batch to inflate (compressed) or to recompress (`compression.type`
    /// other than `producer`), a large one (CRCs over many bytes), or one
    /// that may touch the disk ([`Log::append_may_sync`]). A hint, as that
    /// one is, for moving the append off an async worker.
    pub fn append_is_heavy(&self, records: &[u8]) -> bool {
        const LARGE: usize = 256 << 10;
        records.len() > LARGE
            || self.config.target_compression().is_some()
            || record_batch::any_batch_compressed(records)
            || self.append_may_sync(records.len())
    }

    /// Whether appending `bytes` of records now may fsync (a roll flushes the
    /// closed segment; `flush.messages` and `log.flush.before.ack` flush the
    /// log), so the caller can move the append off an async worker only then.
    /// A hint: it errs towards `true`, and a wrong `false` costs latency, not
    /// correctness.
    pub fn append_may_sync(&self, bytes: usize) -> bool {
        if self.flush_before_ack || self.config.flush_messages < i64::MAX {
            return true;
        }
        let now = self.clock.now_ms();
        let params = RollParams {
            max_timestamp_in_messages: now,
            // Every record takes more than one byte: an upper bound on the offsets used.
            max_offset_in_messages: self.next_offset.saturating_add(bytes as i64),
            messages_size: bytes,
            now_ms: now,
        };
        self.active_segment().should_roll(
            &params,
            self.config.segment_bytes,
            self.roll_ms(),
            self.roll_jitter_ms(),
        )
    }

    /// Validate a producer's batches, assign offsets in place, and append
    /// (origin `Client`: what Produce appends).
    ///
    /// # Errors
    /// `Batch` errors for invalid records and `Producer` errors for a fenced,
    /// out-of-sequence or out-of-transaction batch (nothing is appended), I/O
    /// errors.
    pub fn append_as_leader(&mut self, records: &mut [u8]) -> Result<LogAppendInfo> {
        self.append_with_origin(records, AppendOrigin::Client)
    }

    /// [`Log::append_as_leader`] for a Produce whose transactional batches
    /// were verified with the coordinator under `guard` (from
    /// [`Log::maybe_start_verification`]): a batch that opens a transaction
    /// is refused unless the guard still holds.
    ///
    /// # Errors
    /// As [`Log::append_as_leader`]; `UnverifiedTransaction` when a marker
    /// for the producer came since the guard was taken.
    pub fn append_as_leader_verified(
        &mut self,
        records: &mut [u8],
        guard: Option<VerificationGuard>,
    ) -> Result<LogAppendInfo> {
        let check = TxnCheck::Verified(guard);
        self.append_checked(records, AppendOrigin::Client, check, FlushMode::Inline)
    }

    /// [`Log::append_as_leader`] (or, with `verified`, its verified form)
    /// leaving the fsyncs its flush policy or a roll calls for to the
    /// caller: it runs the returned job after releasing the lock, then
    /// hands its outcome to [`Log::complete_flush`] before acknowledging.
    ///
    /// # Errors
    /// As [`Log::append_as_leader_verified`].
    pub fn append_deferring_flush(
        &mut self,
        records: &mut [u8],
        verified: Option<Option<VerificationGuard>>,
    ) -> Result<(LogAppendInfo, Option<FlushJob>)> {
        let check = verified.map_or(TxnCheck::Unverified, TxnCheck::Verified);
        let info =
            self.append_checked(records, AppendOrigin::Client, check, FlushMode::Deferred)?;
        let job = self.take_flush_job();
        Ok((info, self.note_write(job)?))
    }

    /// Forget the producers with no open transaction whose last write is at
    /// least `expiration_ms` before `now_ms`; returns how many.
    pub fn remove_expired_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producers.remove_expired(now_ms, expiration_ms)
    }

    /// Start verifying a transactional batch of `producer_id` at `epoch`
    /// (see `producer_state`); `None` when its transaction is already open
    /// here at that epoch.
    pub fn maybe_start_verification(
        &mut self,
        producer_id: i64,
        epoch: i16,
        epoch_bump: bool,
    ) -> Option<VerificationGuard> {
        self.producers.maybe_start_verification(producer_id, epoch, epoch_bump)
    }

    /// The coordinator refused the batch verified under `guard`.
    pub fn end_verification(&mut self, producer_id: i64, guard: VerificationGuard) {
        self.producers.end_verification(producer_id, guard);
    }

    /// Append a COMMIT or ABORT marker of `producer_id` at `producer_epoch`,
    /// timestamped now (origin `Coordinator`). A marker completing a
    /// transaction of the producer moves the LSO; an ABORT also adds the
    /// transaction to the active segment's `.txnindex`.
    ///
    /// # Errors
    /// `Producer` errors for a fenced producer or coordinator epoch, I/O errors.
    pub fn append_end_txn_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTransactionMarker,
    ) -> Result<LogAppendInfo> {
        let mut batch = marker.build_batch(producer_id, producer_epoch, self.clock.now_ms());
        let appended = self.append_with_origin(&mut batch, AppendOrigin::Coordinator)?;
        // Whatever was verified against the transaction this marker ends
        // may no longer open one.
        self.producers.end_verification_at_marker(producer_id, producer_epoch);
        Ok(appended)
    }

    /// Validate batches, check them against the producer state, assign
    /// offsets in place, and append; `origin` decides the checks (see
    /// `producer_append_info`). Transactional data batches open transactions;
    /// markers complete them.
    ///
    /// # Errors
    /// As [`Log::append_as_leader`].
    ///
    /// # Panics
    /// For origin `Recovery`: only the loader replays, it never appends.
    pub fn append_with_origin(
        &mut self,
        records: &mut [u8],
        origin: AppendOrigin,
    ) -> Result<LogAppendInfo> {
        self.append_checked(records, origin, TxnCheck::Unverified, FlushMode::Inline)
    }

    fn append_checked(
        &mut self,
        records: &mut [u8],
        origin: AppendOrigin,
        txn_check: TxnCheck,
        flush: FlushMode,
    ) -> Result<LogAppendInfo> {
        self.check_writable()?;
        let appended = self.append_checked_once(records, origin, txn_check, flush);
        // Validation and recompression inflate into it: not kept past the append.
        self.shrink_scratch();
        self.note_write(appended)
    }

    fn append_checked_once(
        &mut self,
        records: &mut [u8],
        origin: AppendOrigin,
        txn_check: TxnCheck,
        flush: FlushMode,
    ) -> Result<LogAppendInfo> {
        assert!(!origin.is_unchecked(), "recovery replays and followers append as followers");
        let now = self.clock.now_ms();
        let ctx = self.validation_context(now, origin);
        let mut validated = std::mem::take(&mut self.validated);
        let result = validator::validate_records(records, &ctx, &mut self.scratch, &mut validated);
        if let Err(e) = result {
            self.validated = validated;
            return Err(e.into());
        }
        // compression.type other than `producer`: what is appended is the
        // batches rebuilt in the topic's codec (and validated again).
        let target = self.config.target_compression();
        let mut rebuilt;
        let records: &mut [u8] = match validator::apply_compression(
            records,
            &mut validated,
            target,
            &ctx,
            &mut self.scratch,
        ) {
            Ok(None) => records,
            Ok(Some(bytes)) => {
                rebuilt = bytes;
                &mut rebuilt
            }
            Err(e) => {
                self.validated = validated;
                return Err(e.into());
            }
        };
        // A retried batch is answered with its original offsets; a gap, a fenced
        // epoch or a batch outside its transaction refuses the whole request
        // before anything is written.
        let first_offset = self.next_offset;
        let mut producer_append =
            match check_producers(&self.producers, &validated, first_offset, origin) {
                Ok(ProducerCheck::Append(info)) => {
                    match txn_check.refusal(&self.producers, &info) {
                        None => info,
                        Some(e) => {
                            self.validated = validated;
                            return Err(e.into());
                        }
                    }
                }
                Ok(ProducerCheck::Duplicate(meta)) => {
                    self.validated = validated;
                    return self.answer_duplicate(&meta, flush);
                }
                Err(e) => {
                    self.validated = validated;
                    return Err(e.into());
                }
            };
        let log_append_time =
            if ctx.timestamp_type == TimestampType::LogAppendTime { now } else { NO_TIMESTAMP };
        let epoch = self.leader_epoch;
        let (max_timestamp, count) =
            assign_offsets(records, &validated, first_offset, epoch, &ctx, log_append_time);
        self.validated = validated;
        let last_offset = first_offset + count - 1;
        let valid_bytes = records.len();
        self.maybe_roll(
            RollParams {
                max_timestamp_in_messages: max_timestamp,
                max_offset_in_messages: last_offset,
                messages_size: valid_bytes,
                now_ms: now,
            },
            first_offset,
            flush,
        )?;
        self.maybe_assign_epoch(epoch, first_offset)?;
        self.segments.values_mut().next_back().expect("active").append(records)?;
        self.next_offset = last_offset + 1;
        self.unflushed_messages += count;
        producer_append.set_append_time(now);
        if let Err(e) = self.complete_transactions(producer_append) {
            // The records are in the file, their transactions' index entry
            // may not be: whatever the cause, memory is ahead of the disk.
            self.fail(&e);
            return Err(e);
        }
        if self.flush_before_ack || self.unflushed_messages >= self.config.flush_messages {
            match flush {
                FlushMode::Inline => self.flush()?,
                FlushMode::Deferred => self.defer_flush(self.next_offset),
            }
        }
        Ok(LogAppendInfo {
            first_offset,
            last_offset,
            log_append_time,
            log_start_offset: self.log_start_offset,
            records_count: count,
            max_timestamp,
            valid_bytes,
        })
    }

    /// A single batch retried: answered with its original offsets, once
    /// the original is durable where `log.flush.before.ack` promises it
    /// (its fsync may still be running, deferred).
    fn answer_duplicate(
        &mut self,
        meta: &BatchMetadata,
        flush: FlushMode,
    ) -> Result<LogAppendInfo> {
        tracing::debug!(partition = %self.tp, first_seq = meta.first_seq, "duplicate batch; answering with its original offsets");
        if self.flush_before_ack && meta.last_offset >= self.recovery_point {
            match flush {
                FlushMode::Inline => self.flush()?,
                FlushMode::Deferred => self.defer_flush(meta.last_offset + 1),
            }
        }
        Ok(LogAppendInfo {
            first_offset: meta.first_offset,
            last_offset: meta.last_offset,
            log_append_time: NO_TIMESTAMP,
            log_start_offset: self.log_start_offset,
            records_count: 0,
            max_timestamp: meta.max_timestamp,
            valid_bytes: 0,
        })
    }

    fn validation_context(&self, now_ms: i64, origin: AppendOrigin) -> ValidationContext {
        ValidationContext {
            now_ms,
            compact: self.config.compact,
            max_message_bytes: self.config.max_message_bytes,
            timestamp_type: self.config.message_timestamp_type,
            timestamp_before_max_ms: self.config.message_timestamp_before_max_ms,
            timestamp_after_max_ms: self.config.message_timestamp_after_max_ms,
            origin,
        }
    }

    /// Install an appended batch set's producer state, then complete the
    /// transactions its markers end, in offset order: an aborted one goes into
    /// the active segment's `.txnindex` with the LSO right after its marker
    /// (Kafka writes the index before completing, so the entry's LSO still
    /// sees the other open transactions).
    fn complete_transactions(&mut self, info: ProducerAppendInfo) -> Result<()> {
        for done in self.producers.update(info) {
            if done.is_aborted {
                let txn = AbortedTxn {
                    producer_id: done.producer_id,
                    first_offset: done.first_offset,
                    last_offset: done.last_offset,
                    last_stable_offset: self.producers.last_stable_offset(&done),
                };
                let active = self.segments.values_mut().next_back().expect("active");
                active.txn_index_mut().append(&txn)?;
            }
            self.producers.complete_txn(&done);
        }
        Ok(())
    }

    /// The first offset of the earliest open transaction, never below the
    /// log start (Kafka's `firstUnstableOffset`).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producers.first_undecided_offset().map(|o| o.max(self.log_start_offset))
    }

    /// The last stable offset: the first unstable offset, or the high
    /// watermark when no transaction is open. A read_committed reader sees
    /// only offsets below it.
    pub fn last_stable_offset(&self) -> i64 {
        match self.first_unstable_offset() {
            Some(o) if o < self.high_watermark() => o,
            _ => self.high_watermark(),
        }
    }

    /// Remove the whole log from disk (DeleteTopics).
    ///
    /// # Errors
    /// I/O errors.
    pub fn delete(mut self) -> Result<()> {
        self.delete_expired_files(0, true)?;
        for seg in self.segments.values() {
            seg.delete_files()?;
        }
        std::fs::remove_dir_all(&self.dir)
            .or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
            .map_err(LogError::io(&self.dir))
    }

    /// Flush and write the final time index entry (clean shutdown).
    ///
    /// # Errors
    /// I/O errors.
    pub fn close(&mut self) -> Result<()> {
        self.flush()?;
        // Lets the next start skip the replay (Kafka's snapshot at close).
        producer_snapshot::write(&self.dir, self.next_offset, &self.producers.snapshot_entries())?;
        self.delete_expired_files(0, true)?;
        Ok(())
    }
}

/// Give the validated batches their offsets from `first_offset`, the leader
/// epoch `epoch` and (with LogAppendTime) the broker's time; returns the
/// largest max timestamp and the record count.
fn assign_offsets(
    records: &mut [u8],
    validated: &[ValidatedBatch],
    first_offset: i64,
    epoch: i32,
    ctx: &ValidationContext,
    log_append_time: i64,
) -> (i64, i64) {
    let mut offset = first_offset;
    let mut max_timestamp = NO_TIMESTAMP;
    for v in validated {
        let batch = &mut records[v.position..v.position + v.header.size_in_bytes()];
        record_batch::set_base_offset(batch, offset);
        record_batch::set_partition_leader_epoch(batch, epoch);
        let batch_max = if log_append_time >= 0 { log_append_time } else { v.max_timestamp };
        record_batch::set_max_timestamp(batch, ctx.timestamp_type, batch_max);
        max_timestamp = max_timestamp.max(batch_max);
        offset += v.header.records_count as i64;
    }
    (max_timestamp, offset - first_offset)
}

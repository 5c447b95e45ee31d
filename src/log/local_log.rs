//! `Log`: one partition's ordered segments, the offsets that describe it, and
//! the rules that append to it, read from it, roll it and retain it. Opening
//! and recovery are the loader's (`log_loader`); the cleaner's swap of
//! segments is in `replace_segments`.
//!
//! Invariants:
//! * `segments` is keyed by base offset, non-empty, and the last one is active:
//!   only it is appended to. Every other segment is closed and immutable except
//!   through the cleaner's swap.
//! * `log_start_offset <= recovery_point <= next_offset` (the log end offset,
//!   which is also the high watermark on a single node).
//! * Everything below `recovery_point` has been fsynced. After a crash only
//!   bytes at or past it may be truncated; damage below it takes the partition
//!   offline instead of silently dropping acknowledged data.
//! * A segment leaves the readable set by being renamed `.deleted` and queued
//!   in `pending_deletes`; its files are unlinked only after
//!   `file.delete.delay.ms`, so a reader holding them is never cut short.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::config::LogConfig;
use super::error::{LogError, Result};
use super::log_loader::{self, LoadParams};
use super::producer_state::{BatchMetadata, ProducerError, ProducerStateManager, SequenceCheck};
use super::record_batch::{self, TimestampType, NO_TIMESTAMP};
use super::segment::{self, FileRegion, LogSegment, RollParams, SegmentConfig};
use super::topic_partition::TopicPartition;
use super::validator::{self, ValidatedBatch, ValidationContext};
use crate::clock::SharedClock;

/// Special timestamps of ListOffsets.
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const LATEST_TIMESTAMP: i64 = -1;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;

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

/// Bytes read for a Fetch.
#[derive(Debug, Clone)]
pub struct FetchDataInfo {
    /// Whole batches, as on disk.
    pub records: Bytes,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

/// Where a Fetch's bytes are, for sending them without a copy.
#[derive(Debug, Clone)]
pub struct FetchRegionInfo {
    /// Whole batches, as on disk; `None` when there is nothing to send.
    pub records: Option<FileRegion>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
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
    /// Idempotent producers' last batches, rebuilt from the log on open.
    producers: ProducerStateManager,
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
        let loaded = log_loader::load(dir, &tp, Self::segment_config(&config), load, &clock)?;
        Ok(Self {
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
        })
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
    pub fn update_config(&mut self, config: Arc<LogConfig>) {
        self.config = config;
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    /// The log end offset: the offset the next record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.next_offset
    }
    /// On a single node every appended record is committed.
    pub fn high_watermark(&self) -> i64 {
        self.next_offset
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

    /// The segments by base offset, for the swap's checks.
    pub(super) fn segment_map(&self) -> &BTreeMap<i64, LogSegment> {
        &self.segments
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

    /// Validate a producer's batches, assign offsets in place, and append.
    ///
    /// # Errors
    /// `Batch` errors for invalid records (nothing is appended), I/O errors.
    pub fn append_as_leader(&mut self, records: &mut [u8]) -> Result<LogAppendInfo> {
        let now = self.clock.now_ms();
        let ctx = ValidationContext {
            now_ms: now,
            compact: self.config.compact,
            max_message_bytes: self.config.max_message_bytes,
            timestamp_type: self.config.message_timestamp_type,
            timestamp_before_max_ms: self.config.message_timestamp_before_max_ms,
            timestamp_after_max_ms: self.config.message_timestamp_after_max_ms,
        };
        let mut validated = std::mem::take(&mut self.validated);
        let result = validator::validate_records(records, &ctx, &mut self.scratch, &mut validated);
        if let Err(e) = result {
            self.validated = validated;
            return Err(e.into());
        }
        // Idempotence: a retried batch is answered with its original offsets; a gap
        // or a fenced epoch refuses the whole request before anything is written.
        match check_sequences(&self.producers, &validated) {
            Ok(None) => {}
            Ok(Some(meta)) => {
                self.validated = validated;
                tracing::debug!(partition = %self.tp, first_seq = meta.first_seq, "duplicate batch; answering with its original offsets");
                return Ok(LogAppendInfo {
                    first_offset: meta.first_offset,
                    last_offset: meta.last_offset,
                    log_append_time: NO_TIMESTAMP,
                    log_start_offset: self.log_start_offset,
                    records_count: 0,
                    max_timestamp: meta.max_timestamp,
                    valid_bytes: 0,
                });
            }
            Err(e) => {
                self.validated = validated;
                return Err(e.into());
            }
        }
        let first_offset = self.next_offset;
        let mut offset = first_offset;
        let mut max_timestamp = NO_TIMESTAMP;
        let mut count = 0i64;
        let log_append_time =
            if ctx.timestamp_type == TimestampType::LogAppendTime { now } else { NO_TIMESTAMP };
        for v in &validated {
            let batch = &mut records[v.position..v.position + v.header.size_in_bytes()];
            record_batch::set_base_offset(batch, offset);
            record_batch::set_partition_leader_epoch(batch, 0);
            let batch_max = if log_append_time >= 0 { now } else { v.max_timestamp };
            record_batch::set_max_timestamp(batch, ctx.timestamp_type, batch_max);
            max_timestamp = max_timestamp.max(batch_max);
            offset += v.header.records_count as i64;
            count += v.header.records_count as i64;
        }
        self.validated = validated;
        let last_offset = offset - 1;
        let valid_bytes = records.len();
        self.maybe_roll(
            RollParams {
                max_timestamp_in_messages: max_timestamp,
                max_offset_in_messages: last_offset,
                messages_size: valid_bytes,
                now_ms: now,
            },
            first_offset,
        )?;
        self.segments.values_mut().next_back().expect("active").append(records)?;
        let mut base = first_offset;
        for v in &self.validated {
            if v.header.producer_id >= 0 {
                self.producers.update(&record_batch::BatchHeader { base_offset: base, ..v.header });
            }
            base += v.header.records_count as i64;
        }
        self.next_offset = last_offset + 1;
        self.unflushed_messages += count;
        if self.flush_before_ack || self.unflushed_messages >= self.config.flush_messages {
            self.flush()?;
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

    fn maybe_roll(&mut self, params: RollParams, next_base: i64) -> Result<()> {
        let jitter = self.roll_jitter_ms();
        let config = Arc::clone(&self.config);
        let active = self.active_segment();
        if active.should_roll(&params, config.segment_bytes, self.roll_ms(), jitter) {
            tracing::debug!(partition = %self.tp, size = active.size(), base_offset = active.base_offset(), "rolling segment");
            self.roll(next_base)?;
        }
        Ok(())
    }

    /// Active-segment age limit. For compacted topics the cleaner's max lag also
    /// bounds it, since the active segment is never cleaned.
    pub fn roll_ms(&self) -> i64 {
        if self.config.compact {
            self.config.segment_ms.min(self.config.max_compaction_lag_ms)
        } else {
            self.config.segment_ms
        }
    }

    fn roll_jitter_ms(&self) -> i64 {
        if self.config.segment_jitter_ms <= 0 {
            return 0;
        }
        // Kafka draws the jitter at random per segment; a hash of the partition and
        // segment spreads rolls the same way and keeps them reproducible.
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.tp, self.active_segment().base_offset()).hash(&mut h);
        (h.finish() % self.config.segment_jitter_ms as u64) as i64
    }

    /// Start a new active segment at `base` (the next offset), closing the current one.
    ///
    /// # Errors
    /// I/O errors.
    pub fn roll(&mut self, base: i64) -> Result<()> {
        let now = self.clock.now_ms();
        let seg_config = Self::segment_config(&self.config);
        let active_base = self.active_segment().base_offset();
        if active_base == base {
            // The active segment is empty at this offset already (Kafka replaces it).
            if self.active_segment().size() == 0 {
                return Ok(());
            }
            return Err(LogError::Corrupt {
                path: self.dir.clone(),
                position: 0,
                reason: format!("cannot roll to {base}: segment exists"),
            });
        }
        let old = self.segments.values_mut().next_back().expect("active");
        old.on_become_inactive()?;
        // Kafka flushes the closed segment asynchronously; this keeps it simple and
        // moves the recovery point so restart only scans the new active segment.
        old.flush()?;
        self.recovery_point = self.recovery_point.max(base);
        self.segments.insert(base, LogSegment::create(&self.dir, base, seg_config, "", now)?);
        Ok(())
    }

    /// Roll if the active segment holds anything (retention and tests use it).
    ///
    /// # Errors
    /// I/O errors.
    pub fn roll_if_not_empty(&mut self) -> Result<()> {
        if self.active_segment().size() > 0 {
            self.roll(self.next_offset)?;
        }
        Ok(())
    }

    /// Whole batches from the one holding `offset` (or the next offset present),
    /// up to `max_bytes`; at least one batch when `min_one_batch`.
    ///
    /// # Errors
    /// `OffsetOutOfRange` outside [log start, log end]; I/O errors.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo> {
        let info = self.read_region(offset, max_bytes, min_one_batch)?;
        let records = match &info.records {
            Some(region) => region.read_to_bytes().map_err(LogError::io(&self.dir))?,
            None => Bytes::new(),
        };
        Ok(FetchDataInfo {
            records,
            high_watermark: info.high_watermark,
            log_start_offset: info.log_start_offset,
        })
    }

    /// What [`Log::read`] would return, as a region of a segment file that is
    /// not read here (a fetch sends it to the socket with `sendfile`). `None`
    /// when there is nothing to return.
    ///
    /// # Errors
    /// `OffsetOutOfRange` outside [log start, log end]; I/O errors.
    pub fn read_region(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchRegionInfo> {
        let empty = || FetchRegionInfo {
            records: None,
            high_watermark: self.next_offset,
            log_start_offset: self.log_start_offset,
        };
        if offset == self.next_offset {
            return Ok(empty());
        }
        if offset < self.log_start_offset || offset > self.next_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end: self.next_offset,
            });
        }
        let first = self.segments.range(..=offset).next_back().map_or(i64::MIN, |(b, _)| *b);
        for seg in self.segments.range(first..).map(|(_, s)| s) {
            if let Some((_, region)) = seg.read_region(offset, max_bytes, min_one_batch)? {
                return Ok(FetchRegionInfo {
                    records: (!region.is_empty()).then_some(region),
                    ..empty()
                });
            }
        }
        Ok(empty())
    }

    /// ListOffsets: the (timestamp, offset) for a target timestamp or one of the
    /// special values. `None` when no record has a timestamp >= the target.
    ///
    /// # Errors
    /// I/O errors and corrupt batches.
    pub fn fetch_offset_by_timestamp(&mut self, target: i64) -> Result<Option<(i64, i64)>> {
        match target {
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => {
                return Ok(Some((NO_TIMESTAMP, self.log_start_offset)))
            }
            LATEST_TIMESTAMP => return Ok(Some((NO_TIMESTAMP, self.next_offset))),
            MAX_TIMESTAMP => return self.max_timestamp_and_offset(),
            t if t < 0 => return Ok(None),
            _ => {}
        }
        let start = self.log_start_offset;
        for seg in self.segments.values() {
            if seg.next_offset() <= start || seg.size() == 0 || seg.max_timestamp() < target {
                continue;
            }
            if let Some(found) = seg.find_offset_by_timestamp(target, start, &mut self.scratch)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The newest timestamp among records at or after the log start offset, and
    /// the first record carrying it. The segments' running maxima answer the
    /// common case; when the maximum lies below the log start (after
    /// DeleteRecords) the remaining records are scanned.
    fn max_timestamp_and_offset(&mut self) -> Result<Option<(i64, i64)>> {
        let start = self.log_start_offset;
        let best = self
            .segments
            .values()
            .filter(|s| s.size() > 0 && s.max_timestamp() >= 0)
            .max_by_key(|s| s.max_timestamp());
        let Some(seg) = best else { return Ok(Some((NO_TIMESTAMP, -1))) };
        if let Some((ts, offset)) =
            seg.find_offset_by_timestamp(seg.max_timestamp(), i64::MIN, &mut self.scratch)?
        {
            if offset >= start {
                return Ok(Some((ts, offset)));
            }
        }
        let mut best: Option<(i64, i64)> = None;
        for seg in self.segments.values().filter(|s| s.next_offset() > start) {
            let mut buf = Vec::new();
            let mut reader = seg.batches(0..seg.size(), &mut buf);
            while let Some((_, batch)) = reader.next_batch()? {
                let header = record_batch::BatchHeader::parse(batch)?;
                if header.last_offset() < start
                    || best.is_some_and(|(ts, _)| header.max_timestamp <= ts)
                {
                    continue;
                }
                let payload =
                    record_batch::records_bytes(&header, batch, &mut self.scratch, 1 << 30)?;
                for rec in record_batch::RecordIter::new(payload, header.records_count) {
                    let rec = rec?;
                    let offset = header.base_offset + rec.offset_delta as i64;
                    let ts = match header.timestamp_type() {
                        TimestampType::LogAppendTime => header.max_timestamp,
                        TimestampType::CreateTime => header.timestamp_base() + rec.timestamp_delta,
                    };
                    if offset >= start && best.is_none_or(|(b, _)| ts > b) {
                        best = Some((ts, offset));
                    }
                }
            }
        }
        Ok(Some(best.unwrap_or((NO_TIMESTAMP, -1))))
    }

    /// DeleteRecords: move the log start offset forward (never back).
    ///
    /// # Errors
    /// `OffsetOutOfRange` past the high watermark.
    pub fn maybe_increment_log_start_offset(&mut self, new_start: i64) -> Result<i64> {
        if new_start > self.next_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: new_start,
                log_start: self.log_start_offset,
                log_end: self.next_offset,
            });
        }
        if new_start > self.log_start_offset {
            self.log_start_offset = new_start;
            self.recovery_point = self.recovery_point.max(new_start);
        }
        Ok(self.log_start_offset)
    }

    /// Fsync everything up to the log end and advance the recovery point.
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&mut self) -> Result<()> {
        let rp = self.recovery_point;
        for seg in self
            .segments
            .values_mut()
            .filter(|s| s.next_offset() > rp || s.size() > 0 && s.base_offset() >= rp)
        {
            seg.flush()?;
        }
        self.recovery_point = self.next_offset;
        self.unflushed_messages = 0;
        self.last_flush_ms = self.clock.now_ms();
        Ok(())
    }

    /// Time-based flush (`flush.ms`), called by the scheduler.
    ///
    /// # Errors
    /// I/O errors.
    pub fn maybe_flush_by_time(&mut self, now: i64) -> Result<bool> {
        if self.unflushed_messages > 0
            && now.saturating_sub(self.last_flush_ms) >= self.config.flush_ms
        {
            self.flush()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Retention (Kafka's `deleteOldSegments`): segments wholly below the log start
    /// offset always go; with `delete` in the policy also segments past
    /// `retention.ms` and the oldest segments while over `retention.bytes`.
    /// Returns the number of segments removed.
    ///
    /// # Errors
    /// I/O errors renaming files.
    pub fn delete_old_segments(&mut self) -> Result<usize> {
        let now = self.clock.now_ms();
        let mut deleted = self.delete_segments_while(|_, next_base, log| {
            next_base.is_some_and(|n| n <= log.log_start_offset)
        })?;
        if self.config.delete {
            let retention_ms = self.config.retention_ms;
            if retention_ms >= 0 {
                deleted += self.delete_segments_while(|seg, _, _| {
                    now - seg.largest_timestamp() > retention_ms
                })?;
            }
            let retention_bytes = self.config.retention_bytes;
            if retention_bytes >= 0 {
                let mut diff = self.size() as i64 - retention_bytes;
                deleted += self.delete_segments_while(|seg, _, _| {
                    if diff - seg.size() as i64 >= 0 {
                        diff -= seg.size() as i64;
                        true
                    } else {
                        false
                    }
                })?;
            }
        }
        Ok(deleted)
    }

    /// Delete segments from the oldest while `pred(segment, next segment's base, log)` holds.
    fn delete_segments_while(
        &mut self,
        mut pred: impl FnMut(&LogSegment, Option<i64>, &Self) -> bool,
    ) -> Result<usize> {
        let mut doomed = Vec::new();
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        for (i, base) in bases.iter().enumerate() {
            let seg = &self.segments[base];
            let next = bases.get(i + 1).copied();
            let last_and_empty = next.is_none() && seg.size() == 0;
            if last_and_empty || !pred(seg, next, self) {
                break;
            }
            doomed.push(*base);
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        if doomed.len() == self.segments.len() {
            // Never leave a log without an active segment.
            self.roll(self.next_offset)?;
        }
        let due = self.file_delete_due_ms();
        for &base in &doomed {
            let size = self.segments[&base].size();
            tracing::info!(partition = %self.tp, base_offset = base, size, "deleting segment (retention)");
            self.retire_segment(base, due)?;
        }
        let first = *self.segments.keys().next().expect("non-empty");
        self.log_start_offset = self.log_start_offset.max(first);
        self.recovery_point = self.recovery_point.max(self.log_start_offset);
        Ok(doomed.len())
    }

    /// Unlink `.deleted` files whose `file.delete.delay.ms` has passed (all of them with `force`).
    ///
    /// # Errors
    /// I/O errors.
    pub fn delete_expired_files(&mut self, now: i64, force: bool) -> Result<usize> {
        let mut n = 0;
        let mut i = 0;
        while i < self.pending_deletes.len() {
            if force || self.pending_deletes[i].0 <= now {
                let (_, seg) = self.pending_deletes.swap_remove(i);
                seg.delete_files()?;
                n += 1;
            } else {
                i += 1;
            }
        }
        Ok(n)
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
        self.delete_expired_files(0, true)?;
        Ok(())
    }
}

/// The idempotence check of an append: `Some` with the original offsets when
/// the request is a single retried batch, `None` when every batch may be
/// appended.
fn check_sequences(
    producers: &ProducerStateManager,
    validated: &[ValidatedBatch],
) -> Result<Option<BatchMetadata>, ProducerError> {
    for v in validated {
        let h = &v.header;
        match producers.check(h)? {
            SequenceCheck::Append => {}
            SequenceCheck::Duplicate(meta) if validated.len() == 1 => return Ok(Some(meta)),
            // A retry mixed with new batches cannot be answered with one offset range.
            SequenceCheck::Duplicate(meta) => {
                return Err(ProducerError::OutOfOrderSequence {
                    producer_id: h.producer_id,
                    epoch: h.producer_epoch,
                    first_seq: meta.first_seq,
                    expected: -1,
                })
            }
        }
    }
    Ok(None)
}

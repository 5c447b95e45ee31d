//! `Log`: one partition's ordered segments, the offsets that describe it, and
//! the rules that append to it, read from it, roll it, retain it and recover it.
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::config::LogConfig;
use super::error::{LogError, Result};
use super::producer_state::{BatchMetadata, ProducerError, ProducerStateManager, SequenceCheck};
use super::record_batch::{self, TimestampType, NO_TIMESTAMP};
use super::segment::{self, FileRegion, LogSegment, RollParams, SegmentConfig};
use super::validator::{self, ValidatedBatch, ValidationContext};
use crate::clock::SharedClock;

/// A topic name and partition number; the directory is `<topic>-<partition>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self { topic: topic.into(), partition }
    }

    /// Parse a partition directory name (`my-topic-3`).
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        let partition: i32 = partition.parse().ok()?;
        (!topic.is_empty() && partition >= 0 && partition.to_string() == name[topic.len() + 1..])
            .then(|| Self::new(topic, partition))
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

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

/// How the log was opened, for recovery decisions.
#[derive(Debug, Clone, Copy)]
pub struct LoadParams {
    pub recovery_point: i64,
    pub log_start_offset: i64,
    /// The log dir was shut down cleanly (its marker file was present).
    pub clean_shutdown: bool,
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
    fn segment_config(config: &LogConfig) -> SegmentConfig {
        SegmentConfig {
            index_interval_bytes: config.index_interval_bytes,
            max_index_size: config.segment_index_bytes,
            // Batches on disk may be larger than today's limit if it was lowered;
            // scanning accepts anything up to the largest value Kafka allows.
            max_batch_size: config.max_message_bytes.max(i32::MAX as usize / 2),
        }
    }

    /// Open (or create) the log in `dir`, completing interrupted swaps and
    /// recovering the unflushed tail.
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
        let bases = complete_interrupted_swaps(dir, seg_config)?;
        let now = clock.now_ms();
        let mut segments = BTreeMap::new();
        let offline = |reason: String| LogError::Offline { partition: tp.to_string(), reason };
        let recovery_point = load.recovery_point;
        let mut truncated_at: Option<i64> = None;
        let count = bases.len();
        let next_bases = bases.clone();
        for (i, base) in bases.into_iter().enumerate() {
            if truncated_at.is_some() {
                // Everything after a truncated segment followed a hole: drop it
                // (it is at or past the recovery point, so nothing flushed is lost).
                let seg = LogSegment::open(dir, base, seg_config, "")?;
                tracing::warn!(partition = %tp, base_offset = base, "deleting segment after a truncated one");
                seg.delete_files()?;
                continue;
            }
            let is_last = i + 1 == count;
            let mut seg = LogSegment::open(dir, base, seg_config, "")?;
            // The unflushed tail: the last segment, and any segment reaching past the
            // recovery point (or whose offsets are unknown because it must be rebuilt).
            let next_base = next_bases.get(i + 1).copied().unwrap_or(i64::MAX);
            let in_unflushed_tail = is_last || next_base > recovery_point;
            if in_unflushed_tail && (!load.clean_shutdown || seg.needs_recovery()) {
                let truncated =
                    seg.recover_from(recovery_point).map_err(|e| offline(e.to_string()))?;
                if truncated > 0 {
                    tracing::warn!(partition = %tp, base_offset = base, bytes = truncated, next_offset = seg.next_offset(), "recovered segment by truncating its torn tail");
                    truncated_at = Some(seg.next_offset());
                }
                if !is_last && truncated == 0 {
                    // A closed segment ends its time index with its largest timestamp.
                    seg.on_become_inactive()?;
                }
            } else if seg.needs_recovery() {
                // Below the recovery point nothing may be cut: rebuild the indexes if the
                // data is whole, else take the partition offline.
                seg.recover_from(i64::MAX).map_err(|e| offline(e.to_string()))?;
                seg.on_become_inactive()?;
            }
            segments.insert(base, seg);
        }
        let start = load.log_start_offset.max(0);
        if segments.is_empty() {
            segments.insert(start, LogSegment::create(dir, start, seg_config, "", now)?);
        }
        let next_offset = segments.values().next_back().map_or(start, LogSegment::next_offset);
        let first_base = *segments.keys().next().expect("non-empty");
        let log_start_offset = start.max(first_base).min(next_offset);
        Self {
            dir: dir.into(),
            tp,
            config,
            segments,
            log_start_offset,
            next_offset,
            recovery_point: recovery_point
                .clamp(log_start_offset, next_offset)
                .max(truncated_at.unwrap_or(0).min(next_offset)),
            unflushed_messages: 0,
            last_flush_ms: now,
            flush_before_ack,
            clock,
            pending_deletes: Vec::new(),
            scratch: Vec::new(),
            validated: Vec::new(),
            producers: ProducerStateManager::new(),
        }
        .with_rebuilt_producer_state()
    }

    /// Rebuild the idempotent-producer state by reading every batch header.
    /// Headers only: one small read per batch, no record is decoded.
    fn with_rebuilt_producer_state(mut self) -> Result<Self> {
        let mut producers = ProducerStateManager::new();
        for seg in self.segments.values() {
            let mut pos = 0u64;
            while let Some(h) = seg.read_header_at(pos)? {
                if h.producer_id >= 0 && !h.is_control() {
                    producers.update(&h);
                }
                pos += h.size_in_bytes() as u64;
            }
        }
        producers.truncate_below(self.log_start_offset);
        self.producers = producers;
        Ok(self)
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
        let mut outcome: Result<Option<BatchMetadata>, ProducerError> = Ok(None);
        for v in &validated {
            let h = &v.header;
            match self.producers.check(h) {
                Ok(SequenceCheck::Append) => continue,
                Ok(SequenceCheck::Duplicate(meta)) if validated.len() == 1 => {
                    outcome = Ok(Some(meta))
                }
                // A retry mixed with new batches cannot be answered with one offset range.
                Ok(SequenceCheck::Duplicate(meta)) => {
                    outcome = Err(ProducerError::OutOfOrderSequence {
                        producer_id: h.producer_id,
                        epoch: h.producer_epoch,
                        first_seq: meta.first_seq,
                        expected: -1,
                    })
                }
                Err(e) => outcome = Err(e),
            }
            break;
        }
        match outcome {
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
            let mut reader =
                super::batch_reader::BatchReader::segment(seg, 0..seg.size(), &mut buf);
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
        let now = self.clock.now_ms();
        let due = now.saturating_add(self.config.file_delete_delay_ms);
        for base in &doomed {
            let mut seg = self.segments.remove(base).expect("listed");
            tracing::info!(partition = %self.tp, base_offset = base, size = seg.size(), "deleting segment (retention)");
            seg.change_file_suffix(segment::DELETED_SUFFIX)?;
            self.pending_deletes.push((due, seg));
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

// ---------------------------------------------------------------------------
// The cleaner's side of `Log` (issue 4): how cleaned segments replace old ones.
// Kept apart from the append/read paths above; nothing above calls it.
// ---------------------------------------------------------------------------

/// Points of the swap protocol where a test may stop it, leaving the files as
/// a crash right there would. The numbers are the steps of
/// [`Log::replace_segments`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SwapStep {
    /// After step 3: every new segment is `.swap` and the directory is fsynced.
    SwapRenamed,
    /// During step 4: the first replaced segment is `.deleted`, the others are not.
    FirstDeletedRenamed,
    /// After step 4: every replaced segment is `.deleted`.
    DeletedRenamed,
    /// After step 5, before the directory fsync of step 6.
    SwapStripped,
}

/// How [`Log::replace_segments`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapOutcome {
    Replaced,
    /// Stopped on request at this step; the in-memory log no longer matches
    /// the directory and must be dropped and reopened (tests only).
    StoppedAt(SwapStep),
}

/// A segment the cleaner read, as it was when read: the swap refuses to
/// replace a segment that has changed since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSnapshot {
    pub base_offset: i64,
    pub size: u64,
}

impl Log {
    /// The segment settings the cleaner's `.cleaned` segments are created with.
    pub fn segment_config_for_cleaning(&self) -> SegmentConfig {
        Self::segment_config(&self.config)
    }

    /// Replace the closed segments `old` with `new_segments` (written by the
    /// cleaner as `.cleaned`, fsynced, covering the same offsets), crash-safely.
    /// Kafka's `LocalLog.replaceSegments`. Each step says what `Log::open`
    /// (`complete_interrupted_swaps`) does if the process dies right there:
    ///
    /// 1. (the cleaner, before calling) Write `<base>.log.cleaned` and its
    ///    indexes, fsync them. Crash: `.cleaned` files are deleted; the old
    ///    segments are intact and the next clean redoes the work.
    /// 2. Rename each new segment `.cleaned` → `.swap`, in descending offset
    ///    order, log file first. Crash midway: a `.log.cleaned` still exists,
    ///    so every `.swap` at or above the smallest `.cleaned` offset (all the
    ///    renamed ones, thanks to the descending order) is deleted with it; the
    ///    old segments are intact. A `.log.swap` whose index is still
    ///    `.cleaned` is complete: its index is deleted and rebuilt.
    /// 3. Fsync the directory, so no old segment can lose its name below
    ///    while a `.swap` rename is still volatile. Crash: as after step 2 —
    ///    every `.swap` is complete; recovery deletes the old segments whose
    ///    offsets a `.swap` covers and strips the suffix (the clean commits).
    /// 4. Rename each old segment to `.deleted`, ascending. Crash midway or
    ///    after: `.deleted` files are deleted; the `.swap` commits as above,
    ///    deleting whichever old segments still have their name.
    /// 5. Strip `.swap` from each new segment, log file first. Crash midway: a
    ///    `.log.swap` still commits; an index `.swap` without its log is
    ///    deleted and rebuilt from the log.
    /// 6. Fsync the directory. Crash before it completes: the directory shows
    ///    one of the states above, each of which recovers.
    /// 7. Later, after `file.delete.delay.ms`, unlink the `.deleted` files
    ///    ([`Log::delete_expired_files`]); readers holding the old files keep
    ///    reading them until then. Crash: recovery deletes them.
    ///
    /// Recovery decides which old segments a `.swap` replaces from the offsets
    /// the `.swap` holds (`[base, next offset)`), so the cleaner keeps at least
    /// an empty batch from the last segment of every group (its offset fence).
    ///
    /// `stop_at` (tests) returns right after that step, files left as they are.
    ///
    /// # Errors
    /// `SwapConflict` before anything is renamed when `old` no longer matches
    /// the log (a segment was deleted or changed, or is the active one) or a
    /// new segment is not a `.cleaned` segment inside the replaced range. I/O
    /// errors at any step; the files are then in one of the states above.
    pub fn replace_segments(
        &mut self,
        mut new_segments: Vec<LogSegment>,
        old: &[SegmentSnapshot],
        stop_at: Option<SwapStep>,
    ) -> Result<SwapOutcome> {
        let conflict =
            |reason: String| LogError::SwapConflict { partition: self.tp.to_string(), reason };
        let (Some(first), Some(last)) = (old.first(), old.last()) else {
            return Err(conflict("no segments to replace".into()));
        };
        let active_base = self.active_segment().base_offset();
        for snap in old {
            match self.segments.get(&snap.base_offset) {
                None => return Err(conflict(format!("segment {} is gone", snap.base_offset))),
                Some(_) if snap.base_offset == active_base => {
                    return Err(conflict(format!(
                        "segment {} is the active segment",
                        snap.base_offset
                    )))
                }
                Some(seg) if seg.size() != snap.size => {
                    return Err(conflict(format!(
                        "segment {} changed size from {} to {}",
                        snap.base_offset,
                        snap.size,
                        seg.size()
                    )))
                }
                Some(_) => {}
            }
        }
        let end = self.segments.range(last.base_offset + 1..).next().map_or(i64::MAX, |(b, _)| *b);
        for seg in &new_segments {
            let ok = seg.log_path().to_string_lossy().ends_with(segment::CLEANED_SUFFIX)
                && seg.base_offset() >= first.base_offset
                && seg.next_offset() <= end;
            if !ok {
                return Err(conflict(format!(
                    "{} does not fit in [{}, {end})",
                    seg.log_path().display(),
                    first.base_offset
                )));
            }
        }
        let dir_sync = |dir: &Path| {
            std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(LogError::io(dir))
        };

        // Step 2: `.cleaned` → `.swap`, highest base first.
        new_segments.sort_by_key(|s| std::cmp::Reverse(s.base_offset()));
        for seg in &mut new_segments {
            seg.change_file_suffix(segment::SWAP_SUFFIX)?;
        }
        // Step 3: make the `.swap` names durable before any old name goes.
        dir_sync(&self.dir)?;
        if stop_at == Some(SwapStep::SwapRenamed) {
            return Ok(SwapOutcome::StoppedAt(SwapStep::SwapRenamed));
        }

        // Step 4: old segments → `.deleted`, lowest first, out of the readable set.
        let due = self.clock.now_ms().saturating_add(self.config.file_delete_delay_ms);
        for (i, snap) in old.iter().enumerate() {
            let mut seg = self.segments.remove(&snap.base_offset).expect("checked above");
            seg.change_file_suffix(segment::DELETED_SUFFIX)?;
            self.pending_deletes.push((due, seg));
            if i == 0 && stop_at == Some(SwapStep::FirstDeletedRenamed) {
                return Ok(SwapOutcome::StoppedAt(SwapStep::FirstDeletedRenamed));
            }
        }
        if stop_at == Some(SwapStep::DeletedRenamed) {
            return Ok(SwapOutcome::StoppedAt(SwapStep::DeletedRenamed));
        }

        // Step 5: strip `.swap`; the new segments become the readable ones.
        new_segments.reverse();
        for mut seg in new_segments {
            seg.change_file_suffix("")?;
            self.segments.insert(seg.base_offset(), seg);
        }
        if stop_at == Some(SwapStep::SwapStripped) {
            return Ok(SwapOutcome::StoppedAt(SwapStep::SwapStripped));
        }

        // Step 6: make the final names durable. Step 7 is `delete_expired_files`.
        dir_sync(&self.dir)?;
        Ok(SwapOutcome::Replaced)
    }
}

/// Sort out the files left in `dir` by a crash, by Kafka's rules, and return
/// the base offsets of the segments to open:
/// 1. `.deleted` files: the segment was already replaced or retained away; delete.
/// 2. `.cleaned` files: a clean that never reached the swap; delete.
/// 3. `.swap` files at or above the smallest `.cleaned` offset: that clean had
///    not renamed its whole group to `.swap`; delete them (the originals are intact).
/// 4. Other `.swap` files: the clean had committed; delete the segments they
///    replace (those whose offsets they cover) and strip the suffix.
/// 5. Index files with no `.log`: orphans; delete.
fn complete_interrupted_swaps(dir: &Path, seg_config: SegmentConfig) -> Result<Vec<i64>> {
    let mut logs = Vec::new();
    let mut swaps = Vec::new();
    let mut cleaned = Vec::new();
    let mut indexes = Vec::new();
    let mut doomed = Vec::new();
    let mut swap_indexes = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(LogError::io(dir))? {
        let entry = entry.map_err(LogError::io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let Some((stem, rest)) = name.split_once('.') else { continue };
        let Ok(base) = stem.parse::<i64>() else { continue };
        if stem.len() != 20 {
            continue;
        }
        match rest {
            "log" => logs.push(base),
            "index" | "timeindex" => indexes.push((base, path)),
            r if r.ends_with("deleted") => doomed.push(path),
            r if r.ends_with("cleaned") => {
                if r == "log.cleaned" {
                    cleaned.push(base);
                }
                doomed.push(path);
            }
            "log.swap" => swaps.push(base),
            "index.swap" | "timeindex.swap" => swap_indexes.push((base, path)),
            _ => {}
        }
    }
    for path in doomed {
        tracing::info!(file = %path.display(), "deleting leftover file");
        remove_if_exists(&path)?;
    }
    let min_cleaned = cleaned.iter().copied().min().unwrap_or(i64::MAX);
    swaps.sort_unstable();
    // An index `.swap` whose `.log.swap` is gone: the crash came while the swap's
    // suffixes were being stripped (the log file goes first), so the segment is
    // already in place; its missing index is rebuilt from the log when it opens.
    for (base, path) in swap_indexes {
        if swaps.binary_search(&base).is_err() {
            tracing::info!(file = %path.display(), "deleting index of a swap whose log was already renamed");
            remove_if_exists(&path)?;
        }
    }
    for base in swaps {
        if base >= min_cleaned {
            tracing::info!(
                base_offset = base,
                "deleting .swap of a clean that did not finish its swap"
            );
            for p in [
                segment::log_file(dir, base, ".swap"),
                segment::index_file(dir, base, ".swap"),
                segment::time_index_file(dir, base, ".swap"),
            ] {
                remove_if_exists(&p)?;
            }
            continue;
        }
        // Learn the offsets the swap segment covers, then replace what it overlaps.
        let mut swap = LogSegment::open(dir, base, seg_config, ".swap")?;
        if swap.needs_recovery() {
            swap.recover_from(i64::MIN)?;
        }
        let next = swap.next_offset();
        drop(swap);
        for old in logs.iter().copied().filter(|&b| b >= base && b < next.max(base + 1)) {
            tracing::info!(
                base_offset = old,
                replaced_by = base,
                "completing interrupted swap: removing replaced segment"
            );
            for p in [
                segment::log_file(dir, old, ""),
                segment::index_file(dir, old, ""),
                segment::time_index_file(dir, old, ""),
            ] {
                remove_if_exists(&p)?;
            }
        }
        logs.retain(|&b| !(b >= base && b < next.max(base + 1)));
        for (from, to) in [
            (segment::log_file(dir, base, ".swap"), segment::log_file(dir, base, "")),
            (segment::index_file(dir, base, ".swap"), segment::index_file(dir, base, "")),
            (segment::time_index_file(dir, base, ".swap"), segment::time_index_file(dir, base, "")),
        ] {
            if from.exists() {
                std::fs::rename(&from, &to).map_err(LogError::io(&from))?;
            }
        }
        logs.push(base);
    }
    for (base, path) in indexes {
        if !logs.contains(&base) {
            remove_if_exists(&path)?;
        }
    }
    logs.sort_unstable();
    logs.dedup();
    Ok(logs)
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io(path)(e)),
    }
}

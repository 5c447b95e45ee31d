//! `Cleaner`: one clean of one partition (Kafka's `Cleaner.clean`/`doClean`).
//! The algorithm and its invariants are in the module doc of `cleaner/`; this
//! file is the mechanism: snapshot, map, recopy by group, swap.
//!
//! Locking: the log's lock is taken briefly three times — a read lock to
//! snapshot the segments (each segment's file descriptor is duplicated, so
//! reads need no lock and survive renames), and the write lock for each
//! group's swap. Appends, fetches and retention run in between; the swap
//! refuses (and the clean aborts) if a segment it read has changed.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use super::batch_writer::{self, WriterScratch};
use super::offset_map::{hash_key, KeyHash, OffsetMap, OffsetMapError};
use super::stats::CleanerStats;
use super::throttler::Throttler;
use super::transactions::{control_record_type, AbortedTxn, CleanedTransactionMetadata};
use crate::clock::SharedClock;
use crate::log::batch_reader::{BatchReadError, BatchReader, ChunkHook};
use crate::log::error::{BatchError, LogError};
use crate::log::record_batch::{self, BatchHeader, RecordIter, RECORD_BATCH_OVERHEAD};
use crate::log::segment::{LogSegment, CLEANED_SUFFIX};
use crate::log::{Log, SegmentSnapshot, SwapOutcome, SwapStep, TopicPartition};

/// Errors of a clean. The partition and the file position are in each.
#[derive(Debug, thiserror::Error)]
pub enum CleanerError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("{path} at position {position}: {source}")]
    Batch { path: PathBuf, position: u64, source: BatchError },
    #[error("{path} at position {position}: batch of {size} bytes is larger than the largest allowed ({limit} bytes)")]
    BatchTooLarge { path: PathBuf, position: u64, size: usize, limit: usize },
    #[error(
        "{partition}: the batch at offset {offset} has {keys} keys but an empty offset map holds only {capacity}; \
         raise log.cleaner.dedupe.buffer.size"
    )]
    MapTooSmall { partition: String, offset: i64, keys: usize, capacity: usize },
    #[error("{0}")]
    OffsetMap(#[from] OffsetMapError),
    #[error("{partition} is not compacted (cleanup.policy has no compact)")]
    NotCompacted { partition: String },
    #[error("cleaning {partition} was aborted")]
    Aborted { partition: String },
    #[error("the lock of {partition} is poisoned")]
    Poisoned { partition: String },
    #[error("injected crash at {0:?}")]
    InjectedCrash(CrashPoint),
}

/// Where a test may stop a clean as if the process had died there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Swap step 1 done: the first group's `.cleaned` files are written and fsynced.
    CleanedWritten,
    /// A step of [`Log::replace_segments`] for the first group.
    Swap(SwapStep),
}

/// Settings of one cleaner (Kafka's `log.cleaner.*`, already divided among threads).
#[derive(Debug, Clone)]
pub struct CleanerConfig {
    /// This cleaner's share of `log.cleaner.dedupe.buffer.size`.
    pub dedupe_buffer_size: usize,
    /// `log.cleaner.io.buffer.load.factor`.
    pub load_factor: f64,
    /// Starting size of each of the read and write buffers (Kafka: the
    /// thread's share of `log.cleaner.io.buffer.size`, halved).
    pub io_buffer_size: usize,
    /// The buffers grow up to this for a single large batch (`message.max.bytes`);
    /// the log's own `max.message.bytes` is allowed too if larger.
    pub max_message_size: usize,
}

impl Default for CleanerConfig {
    /// Kafka's defaults for one thread: 128 MiB map, 0.9, 512 KiB of I/O buffers.
    fn default() -> Self {
        Self {
            dedupe_buffer_size: 128 << 20,
            load_factor: 0.9,
            io_buffer_size: 256 << 10,
            max_message_size: 1_048_588,
        }
    }
}

/// A cooperative stop flag, checked before every I/O chunk.
#[derive(Debug, Clone, Default)]
pub struct CancellationToken(Arc<AtomicBool>);

impl CancellationToken {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A partition chosen for cleaning and its regions (Kafka's `LogToClean`).
#[derive(Debug, Clone)]
pub struct LogToClean {
    pub topic_partition: TopicPartition,
    /// Start of the dirty region: the cleaner checkpoint.
    pub first_dirty_offset: i64,
    /// End of the cleanable region: nothing at or past it is mapped or rewritten.
    pub first_uncleanable_offset: i64,
    /// Bytes of segments wholly before the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of segments from the first dirty one up to the uncleanable offset.
    pub cleanable_bytes: u64,
    pub total_bytes: u64,
    /// Aborted transactions in the cleanable range (none until transactions exist).
    pub aborted_transactions: Vec<AbortedTxn>,
}

impl LogToClean {
    pub fn new(log: &Log, first_dirty_offset: i64, first_uncleanable_offset: i64) -> Self {
        let mut clean_bytes = 0;
        let mut cleanable_bytes = 0;
        let segs: Vec<&LogSegment> = log.segments().collect();
        for (i, seg) in segs.iter().enumerate() {
            let next_base = segs.get(i + 1).map_or(i64::MAX, |s| s.base_offset());
            if next_base <= first_dirty_offset {
                clean_bytes += seg.size();
            } else if seg.base_offset() < first_uncleanable_offset {
                cleanable_bytes += seg.size();
            }
        }
        Self {
            topic_partition: log.topic_partition().clone(),
            first_dirty_offset,
            first_uncleanable_offset,
            clean_bytes,
            cleanable_bytes,
            total_bytes: log.size(),
            aborted_transactions: Vec::new(),
        }
    }

    /// Dirty share of the cleanable log, what the manager ranks by.
    pub fn cleanable_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.cleanable_bytes;
        if total == 0 {
            0.0
        } else {
            self.cleanable_bytes as f64 / total as f64
        }
    }
}

/// Kafka's `cleanableOffsets`: the first dirty offset (the checkpoint, reset
/// to the log start when it is missing or outside the log) and the first
/// uncleanable offset: the smallest of the active segment's base, the first
/// unstable offset (open transactions) and the base of the first segment
/// holding a record younger than `min.compaction.lag.ms`.
pub fn cleanable_offsets(
    log: &Log,
    checkpoint: Option<i64>,
    first_unstable_offset: Option<i64>,
    now_ms: i64,
) -> (i64, i64) {
    let start = log.log_start_offset();
    let first_dirty = match checkpoint {
        Some(c) if c >= start && c <= log.log_end_offset() => c,
        Some(c) => {
            tracing::warn!(partition = %log.topic_partition(), checkpoint = c, log_start = start, "cleaner checkpoint outside the log; cleaning from the log start");
            start
        }
        None => start,
    };
    let mut uncleanable = log.active_segment().base_offset();
    if let Some(u) = first_unstable_offset {
        uncleanable = uncleanable.min(u);
    }
    let lag = log.config().min_compaction_lag_ms;
    if lag > 0 {
        for seg in log.segments() {
            if seg.base_offset() >= uncleanable {
                break;
            }
            if seg.next_offset() > first_dirty
                && seg.largest_timestamp() > now_ms.saturating_sub(lag)
            {
                uncleanable = seg.base_offset();
                break;
            }
        }
    }
    (first_dirty, uncleanable.max(first_dirty))
}

/// What a clean did.
#[derive(Debug, Clone)]
pub struct CleanResult {
    /// The first offset not mapped: the new cleaner checkpoint.
    pub end_offset: i64,
    pub stats: CleanerStats,
}

/// One segment as the clean sees it, read through its own descriptor.
#[derive(Debug)]
struct SourceSegment {
    snapshot: SegmentSnapshot,
    next_offset: i64,
    file: File,
    path: PathBuf,
    offset_index_bytes: usize,
    time_index_bytes: usize,
    modified: Option<std::time::SystemTime>,
    /// Where the first dirty offset's batch starts, for the segment holding it.
    dirty_position: Option<u64>,
}

/// Reusable memory of a cleaner.
#[derive(Debug, Default)]
struct Buffers {
    read: Vec<u8>,
    write: Vec<u8>,
    inflated: Vec<u8>,
    writer: WriterScratch,
    retained: Vec<Range<usize>>,
    hashes: Vec<(KeyHash, i64)>,
}

/// Executes cleans, one at a time, with its own map and buffers.
#[derive(Debug)]
pub struct Cleaner {
    id: usize,
    config: CleanerConfig,
    map: OffsetMap,
    throttler: Arc<Throttler>,
    clock: SharedClock,
    bufs: Buffers,
    crash_point: Option<CrashPoint>,
}

/// What every I/O needs: the shared throttle and the stop flag.
struct IoContext<'a> {
    throttler: &'a Throttler,
    cancel: &'a CancellationToken,
    partition: &'a TopicPartition,
}

/// Every chunk the cleaner reads is throttled, and a cancelled clean stops
/// before its next read.
impl ChunkHook for &IoContext<'_> {
    type Error = CleanerError;

    fn before_chunk(&mut self, len: usize) -> Result<(), CleanerError> {
        if self.cancel.is_cancelled() {
            return Err(CleanerError::Aborted { partition: self.partition.to_string() });
        }
        self.throttler.maybe_throttle(len as u64);
        Ok(())
    }
}

impl From<BatchReadError> for CleanerError {
    fn from(e: BatchReadError) -> Self {
        match e {
            BatchReadError::TooLarge { path, position, size, limit } => {
                CleanerError::BatchTooLarge { path, position, size, limit }
            }
            BatchReadError::Invalid { path, position, source } => {
                CleanerError::Batch { path, position, source }
            }
            other => CleanerError::Log(other.into()),
        }
    }
}

/// Per-group output: the `.cleaned` segment and the write buffer in front of it.
struct GroupWriter<'a> {
    segment: LogSegment,
    flush_at: usize,
    ctx: &'a IoContext<'a>,
}

impl GroupWriter<'_> {
    fn maybe_flush(
        &mut self,
        buf: &mut Vec<u8>,
        stats: &mut CleanerStats,
        force: bool,
    ) -> Result<(), CleanerError> {
        if buf.is_empty() || (!force && buf.len() < self.flush_at) {
            return Ok(());
        }
        if self.ctx.cancel.is_cancelled() {
            return Err(CleanerError::Aborted { partition: self.ctx.partition.to_string() });
        }
        self.segment.append(buf)?;
        stats.bytes_written += buf.len() as u64;
        self.ctx.throttler.maybe_throttle(buf.len() as u64);
        buf.clear();
        Ok(())
    }
}

/// Group adjacent segments so that each group's total size stays within
/// `max_size` (`segment.bytes`), its index sizes within `max_index_size`
/// (`segment.index.bytes`) and its offsets within a 32-bit relative range.
/// Kafka's `groupSegmentsBySize`; the sizes are the originals', an upper bound
/// of the cleaned output.
fn group_segments(
    segs: &[SourceSegment],
    max_size: u64,
    max_index_size: usize,
) -> Vec<Range<usize>> {
    let mut groups = Vec::new();
    let mut i = 0;
    while i < segs.len() {
        let first = &segs[i];
        let (mut size, mut index, mut time_index) =
            (first.snapshot.size, first.offset_index_bytes, first.time_index_bytes);
        let mut j = i + 1;
        while j < segs.len() {
            let s = &segs[j];
            let last_offset = (s.next_offset - 1).max(s.snapshot.base_offset);
            let fits = size + s.snapshot.size <= max_size
                && index + s.offset_index_bytes <= max_index_size
                && time_index + s.time_index_bytes <= max_index_size
                && last_offset - first.snapshot.base_offset <= i32::MAX as i64;
            if !fits {
                break;
            }
            size += s.snapshot.size;
            index += s.offset_index_bytes;
            time_index += s.time_index_bytes;
            j += 1;
        }
        groups.push(i..j);
        i = j;
    }
    groups
}

impl Cleaner {
    /// A cleaner with its own offset map of `config.dedupe_buffer_size` bytes.
    ///
    /// # Errors
    /// A dedupe budget too small for one entry, or a bad load factor.
    pub fn new(
        id: usize,
        config: CleanerConfig,
        throttler: Arc<Throttler>,
        clock: SharedClock,
    ) -> Result<Self, CleanerError> {
        let map = OffsetMap::new(config.dedupe_buffer_size, config.load_factor)?;
        Ok(Self { id, config, map, throttler, clock, bufs: Buffers::default(), crash_point: None })
    }

    pub fn id(&self) -> usize {
        self.id
    }
    pub fn config(&self) -> &CleanerConfig {
        &self.config
    }
    /// The map as the last clean left it (for utilization metrics).
    pub fn offset_map(&self) -> &OffsetMap {
        &self.map
    }

    /// Stop the next clean at `point` as if the process died there, leaving
    /// the files; the log must then be dropped and reopened. Tests only.
    #[doc(hidden)]
    pub fn set_crash_point(&mut self, point: Option<CrashPoint>) {
        self.crash_point = point;
    }

    /// Clean `log` once: map the dirty range `[first dirty, first uncleanable)`
    /// (as much as the map holds), then recopy every segment from the log
    /// start through the end of the mapped range, swapping each group in.
    /// `now_ms` decides delete horizons (stamped ones that passed, new ones to
    /// stamp).
    ///
    /// # Errors
    /// I/O and corruption errors (with path and position), a map too small
    /// for one batch, a log that changed under the swap, and cancellation. A
    /// group that fails before its swap deletes its `.cleaned` files; groups
    /// already swapped stay (they are complete cleans of their range), and the
    /// caller should not advance the checkpoint.
    pub fn clean(
        &mut self,
        log: &RwLock<Log>,
        to_clean: &LogToClean,
        now_ms: i64,
        cancel: &CancellationToken,
    ) -> Result<CleanResult, CleanerError> {
        let tp = to_clean.topic_partition.clone();
        let poisoned = || CleanerError::Poisoned { partition: tp.to_string() };
        let mut stats = CleanerStats { start_ms: self.clock.now_ms(), ..Default::default() };

        // Snapshot the segments under the read lock.
        let (dir, log_config, seg_config, segments, upper) = {
            let log = log.read().map_err(|_| poisoned())?;
            if !log.config().compact {
                return Err(CleanerError::NotCompacted { partition: tp.to_string() });
            }
            let active_base = log.active_segment().base_offset();
            let upper = to_clean.first_uncleanable_offset.min(active_base);
            let mut segments = Vec::with_capacity(log.segments().len());
            for seg in log.segments() {
                let file = seg.file().try_clone().map_err(LogError::io(seg.log_path()))?;
                let dirty_position = if seg.base_offset() <= to_clean.first_dirty_offset
                    && seg.next_offset() > to_clean.first_dirty_offset
                {
                    seg.translate_offset(to_clean.first_dirty_offset)?.map(|p| p.position)
                } else {
                    None
                };
                segments.push(SourceSegment {
                    snapshot: SegmentSnapshot { base_offset: seg.base_offset(), size: seg.size() },
                    next_offset: seg.next_offset(),
                    modified: file.metadata().ok().and_then(|m| m.modified().ok()),
                    file,
                    path: seg.log_path(),
                    offset_index_bytes: seg.offset_index().size_in_bytes(),
                    time_index_bytes: seg.time_index().size_in_bytes(),
                    dirty_position,
                });
            }
            (
                log.dir().to_path_buf(),
                Arc::clone(log.config()),
                log.segment_config_for_cleaning(),
                segments,
                upper,
            )
        };
        let grow_limit = self
            .config
            .max_message_size
            .max(log_config.max_message_bytes)
            .max(self.config.io_buffer_size);
        let throttler = Arc::clone(&self.throttler);
        let ctx = IoContext { throttler: &throttler, cancel, partition: &tp };

        // Phase 1: the offset map over the dirty range.
        let mut producer_last: HashMap<i64, i64> = HashMap::new();
        let end = self.build_offset_map(
            &segments,
            to_clean,
            upper,
            grow_limit,
            &ctx,
            &mut stats,
            &mut producer_last,
        )?;
        stats.map_complete_ms = self.clock.now_ms();
        stats.map_entries = self.map.len() as u64;
        stats.map_max_entries = self.map.max_entries() as u64;
        stats.buffer_utilization = self.map.utilization();
        // With nothing new to map the clean region is still recopied: tombstones
        // and markers whose delete horizon has passed leave that way (the manager
        // schedules such cleans when a horizon expires).
        let end = end.max(to_clean.first_dirty_offset);
        if segments.first().is_none_or(|s| s.snapshot.base_offset >= end) {
            stats.end_ms = self.clock.now_ms();
            return Ok(CleanResult { end_offset: end, stats });
        }

        // Producers' last batches outside the mapped range (headers only).
        for seg in &segments {
            scan_producer_headers(seg, to_clean.first_dirty_offset, end, &mut producer_last)?;
        }

        // Phase 2: recopy from the log start through the end of the mapped range.
        let to_copy = segments.iter().take_while(|s| s.snapshot.base_offset < end).count();
        let groups = group_segments(
            &segments[..to_copy],
            log_config.segment_bytes as u64,
            log_config.segment_index_bytes,
        );
        let mut txn = CleanedTransactionMetadata::new(to_clean.aborted_transactions.clone());
        let horizon_to_stamp = now_ms.saturating_add(log_config.delete_retention_ms);
        for (gi, group) in groups.into_iter().enumerate() {
            let group = &segments[group];
            let base = group[0].snapshot.base_offset;
            let cleaned =
                LogSegment::create(&dir, base, seg_config, CLEANED_SUFFIX, self.clock.now_ms())?;
            let mut writer =
                GroupWriter { segment: cleaned, flush_at: self.config.io_buffer_size, ctx: &ctx };
            let copied = self.clean_group(
                group,
                &mut writer,
                end,
                now_ms,
                horizon_to_stamp,
                grow_limit,
                &producer_last,
                &mut txn,
                &mut stats,
            );
            let mut cleaned = writer.segment;
            let finished = copied.and_then(|()| {
                // Step 1 of the swap: the cleaned segment is complete and durable.
                cleaned.on_become_inactive()?;
                cleaned.flush()?;
                if let Some(modified) = group.last().and_then(|s| s.modified) {
                    // Time-based retention reads segments without timestamps by mtime.
                    let _ = cleaned.file().set_modified(modified);
                }
                Ok(())
            });
            if let Err(e) = finished {
                if let Err(d) = cleaned.delete_files() {
                    tracing::warn!(partition = %tp, error = %d, "could not delete the .cleaned files of an aborted clean");
                }
                return Err(e);
            }
            stats.end_size += cleaned.size();
            if gi == 0 && self.crash_point == Some(CrashPoint::CleanedWritten) {
                return Err(CleanerError::InjectedCrash(CrashPoint::CleanedWritten));
            }
            let stop = match self.crash_point {
                Some(CrashPoint::Swap(step)) if gi == 0 => Some(step),
                _ => None,
            };
            let old: Vec<SegmentSnapshot> = group.iter().map(|s| s.snapshot).collect();
            let cleaned_path = cleaned.log_path();
            let swapped = {
                let mut log = log.write().map_err(|_| poisoned())?;
                log.replace_segments(vec![cleaned], &old, stop)
            };
            match swapped {
                Ok(SwapOutcome::Replaced) => {
                    stats.segments_replaced += old.len() as u64;
                    stats.segments_written += 1;
                }
                Ok(SwapOutcome::StoppedAt(step)) => {
                    return Err(CleanerError::InjectedCrash(CrashPoint::Swap(step)))
                }
                Err(e @ LogError::SwapConflict { .. }) => {
                    // Nothing was renamed: the `.cleaned` files are ours to remove.
                    for suffix_path in cleaned_files(&cleaned_path) {
                        let _ = std::fs::remove_file(suffix_path);
                    }
                    return Err(e.into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.restore_buffers();
        stats.end_messages = stats.messages_written;
        stats.end_ms = self.clock.now_ms();
        // The summary line is the caller's to log (the thread loop logs it on
        // the `log_cleaner` target); here it is only a debug trace.
        tracing::debug!(
            "{}",
            stats.summary(self.id, &tp.to_string(), to_clean.first_dirty_offset, end)
        );
        Ok(CleanResult { end_offset: end, stats })
    }

    /// Shrink buffers that grew for a large batch back to their configured size.
    fn restore_buffers(&mut self) {
        let size = self.config.io_buffer_size;
        for buf in [&mut self.bufs.read, &mut self.bufs.write, &mut self.bufs.inflated] {
            if buf.capacity() > size {
                buf.truncate(size);
                buf.shrink_to(size);
            }
        }
        self.bufs.writer.shrink_to(size);
    }

    fn take_read_buffer(&mut self) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.bufs.read);
        if buf.len() < self.config.io_buffer_size {
            buf.resize(self.config.io_buffer_size, 0);
        }
        buf
    }

    /// Map the dirty range batch by batch until the map is full or the range
    /// ends; returns the end of the mapped range (a batch boundary).
    #[allow(clippy::too_many_arguments)]
    fn build_offset_map(
        &mut self,
        segments: &[SourceSegment],
        to_clean: &LogToClean,
        upper: i64,
        grow_limit: usize,
        ctx: &IoContext<'_>,
        stats: &mut CleanerStats,
        producer_last: &mut HashMap<i64, i64>,
    ) -> Result<i64, CleanerError> {
        self.map.clear();
        let start = to_clean.first_dirty_offset;
        let mut end = start;
        let mut txn = CleanedTransactionMetadata::new(to_clean.aborted_transactions.clone());
        let decompress_limit = grow_limit.saturating_mul(64).min(1 << 30);
        'segments: for seg in segments {
            if seg.next_offset <= start || seg.snapshot.base_offset >= upper {
                continue;
            }
            let from = seg.dirty_position.unwrap_or(0);
            let mut buf = self.take_read_buffer();
            let mut reader = BatchReader::new(
                &seg.file,
                &seg.path,
                from..seg.snapshot.size,
                grow_limit,
                &mut buf,
            )
            .with_hook(ctx);
            let result = (|| -> Result<bool, CleanerError> {
                while let Some((position, batch)) = reader.next_batch()? {
                    let header = BatchHeader::parse(batch).map_err(|source| {
                        CleanerError::Batch { path: seg.path.clone(), position, source }
                    })?;
                    if header.last_offset() < start {
                        continue;
                    }
                    if header.last_offset() >= upper {
                        return Ok(true);
                    }
                    let aborted = !header.is_control() && txn.on_batch_read(&header);
                    if header.is_control() {
                        txn.on_control_batch_read(&header, None);
                    }
                    self.bufs.hashes.clear();
                    if !header.is_control() && !aborted {
                        let payload = record_batch::records_bytes(
                            &header,
                            batch,
                            &mut self.bufs.inflated,
                            decompress_limit,
                        )
                        .map_err(|source| CleanerError::Batch {
                            path: seg.path.clone(),
                            position,
                            source,
                        })?;
                        for rec in RecordIter::new(payload, header.records_count) {
                            let rec = rec.map_err(|source| CleanerError::Batch {
                                path: seg.path.clone(),
                                position,
                                source,
                            })?;
                            let offset = header.base_offset + rec.offset_delta as i64;
                            if let (Some(key), true) = (rec.key, offset >= start) {
                                self.bufs.hashes.push((hash_key(key), offset));
                            }
                        }
                    }
                    // Stop before a batch whose new keys may not fit: the mapped
                    // range must end at a batch boundary. Counting is only needed
                    // when the batch could overflow the map.
                    if self.bufs.hashes.len() > self.map.remaining() {
                        let new_keys = self
                            .bufs
                            .hashes
                            .iter()
                            .filter(|(h, _)| !self.map.contains_hash(h))
                            .count();
                        if new_keys > self.map.remaining() {
                            if end == start {
                                return Err(CleanerError::MapTooSmall {
                                    partition: ctx.partition.to_string(),
                                    offset: header.base_offset,
                                    keys: new_keys,
                                    capacity: self.map.max_entries(),
                                });
                            }
                            return Ok(true);
                        }
                    }
                    for (hash, offset) in &self.bufs.hashes {
                        self.map.put_hash(hash, *offset)?;
                    }
                    if header.has_producer_id() {
                        producer_last.insert(header.producer_id, header.base_offset);
                    }
                    stats.map_messages_read += header.records_count.max(0) as u64;
                    end = header.next_offset();
                }
                Ok(false)
            })();
            stats.map_bytes_read += reader.bytes_read();
            if reader.grew() {
                stats.buffer_grows += 1;
            }
            self.bufs.read = buf;
            if result? {
                break 'segments;
            }
            // A whole segment mapped: the next dirty offset is where the next segment's data starts.
            end = end.max(seg.next_offset.min(upper));
        }
        Ok(end)
    }

    /// Recopy one group of segments into `writer`.
    #[allow(clippy::too_many_arguments)]
    fn clean_group(
        &mut self,
        group: &[SourceSegment],
        writer: &mut GroupWriter<'_>,
        end: i64,
        now_ms: i64,
        horizon_to_stamp: i64,
        grow_limit: usize,
        producer_last: &HashMap<i64, i64>,
        txn: &mut CleanedTransactionMetadata,
        stats: &mut CleanerStats,
    ) -> Result<(), CleanerError> {
        let decompress_limit = grow_limit.saturating_mul(64).min(1 << 30);
        let mut out = std::mem::take(&mut self.bufs.write);
        out.clear();
        let result = (|| -> Result<(), CleanerError> {
            for (si, seg) in group.iter().enumerate() {
                let is_last_segment = si + 1 == group.len();
                stats.start_size += seg.snapshot.size;
                let mut buf = self.take_read_buffer();
                let mut reader = BatchReader::new(
                    &seg.file,
                    &seg.path,
                    0..seg.snapshot.size,
                    grow_limit,
                    &mut buf,
                )
                .with_hook(writer.ctx);
                let mut wrote_any = false;
                let mut last_header = None;
                let seg_result = (|| -> Result<(), CleanerError> {
                    while let Some((position, batch)) = reader.next_batch()? {
                        let err = |source| CleanerError::Batch {
                            path: seg.path.clone(),
                            position,
                            source,
                        };
                        let header = BatchHeader::parse(batch).map_err(err)?;
                        last_header = Some(header);
                        let count = header.records_count.max(0) as usize;
                        stats.messages_read += count as u64;
                        stats.start_messages += count as u64;
                        let last_of_producer = header.has_producer_id()
                            && producer_last.get(&header.producer_id) == Some(&header.base_offset);
                        let written_before = out.len();

                        if header.is_control() {
                            let payload = record_batch::records_bytes(
                                &header,
                                batch,
                                &mut self.bufs.inflated,
                                decompress_limit,
                            )
                            .map_err(err)?;
                            let control_type = match RecordIter::new(payload, header.records_count)
                                .next()
                            {
                                Some(rec) => rec.map_err(err)?.key.and_then(control_record_type),
                                None => None,
                            };
                            let not_needed = txn.on_control_batch_read(&header, control_type);
                            let expired = header.delete_horizon_ms().is_some_and(|h| h <= now_ms);
                            if (not_needed && expired) || count == 0 {
                                if last_of_producer {
                                    batch_writer::write_empty_batch(&mut out, &header, true);
                                    stats.empty_batches_retained += 1;
                                }
                            } else if header.has_delete_horizon() {
                                stats.note_delete_horizon(header.delete_horizon_ms());
                                out.extend_from_slice(batch);
                                stats.batches_copied += 1;
                                stats.messages_written += count as u64;
                            } else {
                                // A marker's first clean: stamp its horizon like a tombstone's.
                                self.bufs.retained.clear();
                                let mut at = 0;
                                for rec in RecordIter::new(payload, header.records_count) {
                                    let rec = rec.map_err(err)?;
                                    self.bufs.retained.push(at..at + rec.raw.len());
                                    at += rec.raw.len();
                                }
                                batch_writer::write_retained_batch(
                                    &mut out,
                                    &header,
                                    payload,
                                    &self.bufs.retained,
                                    Some(horizon_to_stamp),
                                    &mut self.bufs.writer,
                                )
                                .map_err(err)?;
                                stats.note_delete_horizon(Some(horizon_to_stamp));
                                stats.batches_rewritten += 1;
                                stats.messages_written += count as u64;
                            }
                        } else {
                            let discard_all = txn.on_batch_read(&header);
                            let payload = record_batch::records_bytes(
                                &header,
                                batch,
                                &mut self.bufs.inflated,
                                decompress_limit,
                            )
                            .map_err(err)?;
                            self.bufs.retained.clear();
                            let mut retained_tombstone = false;
                            let mut at = 0usize;
                            for rec in RecordIter::new(payload, header.records_count) {
                                let rec = rec.map_err(err)?;
                                let range = at..at + rec.raw.len();
                                at += rec.raw.len();
                                let offset = header.base_offset + rec.offset_delta as i64;
                                let keep = if discard_all {
                                    false
                                } else if offset >= end {
                                    // Past the mapped range: nothing newer is known.
                                    true
                                } else if let Some(key) = rec.key {
                                    let newest = self
                                        .map
                                        .get_hash(&hash_key(key))
                                        .is_none_or(|m| offset >= m);
                                    if !newest {
                                        false
                                    } else if rec.value.is_none() {
                                        let expired =
                                            header.delete_horizon_ms().is_some_and(|h| h <= now_ms);
                                        if expired {
                                            stats.tombstones_removed += 1;
                                        }
                                        !expired
                                    } else {
                                        true
                                    }
                                } else {
                                    stats.invalid_messages_read += 1;
                                    false
                                };
                                if keep {
                                    retained_tombstone |= rec.value.is_none() && rec.key.is_some();
                                    self.bufs.retained.push(range);
                                }
                            }
                            let kept = self.bufs.retained.len();
                            let needs_horizon = retained_tombstone && !header.has_delete_horizon();
                            if retained_tombstone {
                                stats.note_delete_horizon(if needs_horizon {
                                    Some(horizon_to_stamp)
                                } else {
                                    header.delete_horizon_ms()
                                });
                            }
                            if kept == count && !needs_horizon {
                                out.extend_from_slice(batch);
                                stats.batches_copied += 1;
                            } else if kept > 0 {
                                let horizon = needs_horizon.then_some(horizon_to_stamp);
                                batch_writer::write_retained_batch(
                                    &mut out,
                                    &header,
                                    payload,
                                    &self.bufs.retained,
                                    horizon,
                                    &mut self.bufs.writer,
                                )
                                .map_err(err)?;
                                stats.batches_rewritten += 1;
                            } else if last_of_producer {
                                // Keep the producer's sequence state: an empty batch in its place.
                                batch_writer::write_empty_batch(&mut out, &header, true);
                                stats.empty_batches_retained += 1;
                            }
                            stats.messages_written += kept as u64;
                        }
                        if out.len() > written_before {
                            wrote_any = true;
                        }
                        writer.maybe_flush(&mut out, stats, false)?;
                    }
                    // The offset fence: the group's output must reach into its last
                    // segment, so that recovery from a `.swap` (which replaces the old
                    // segments within the swap's offsets) also replaces that segment.
                    // A group of one segment needs none: recovery always replaces the
                    // segment at the swap's own base offset.
                    if is_last_segment && group.len() > 1 && !wrote_any {
                        if let Some(h) = last_header {
                            batch_writer::write_empty_batch(&mut out, &h, false);
                            stats.empty_batches_retained += 1;
                        }
                    }
                    Ok(())
                })();
                if reader.grew() {
                    stats.buffer_grows += 1;
                }
                stats.bytes_read += reader.bytes_read();
                self.bufs.read = buf;
                seg_result?;
            }
            writer.maybe_flush(&mut out, stats, true)
        })();
        out.clear();
        self.bufs.write = out;
        self.restore_buffers();
        result
    }
}

/// The three files of a `.cleaned` segment, from its log file's path.
fn cleaned_files(log_path: &Path) -> Vec<PathBuf> {
    let name = log_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default().to_string();
    let dir = log_path.parent().map(Path::to_path_buf).unwrap_or_default();
    ["log", "index", "timeindex"]
        .iter()
        .map(|ext| dir.join(format!("{stem}.{ext}{CLEANED_SUFFIX}")))
        .collect()
}

/// Note the last batch of every producer in `seg` outside `[map_start, map_end)`
/// (inside it the map phase saw them), reading only batch headers.
fn scan_producer_headers(
    seg: &SourceSegment,
    map_start: i64,
    map_end: i64,
    producer_last: &mut HashMap<i64, i64>,
) -> Result<(), CleanerError> {
    if seg.snapshot.base_offset >= map_start && seg.next_offset <= map_end {
        return Ok(());
    }
    let mut pos = 0u64;
    let mut header = [0u8; RECORD_BATCH_OVERHEAD];
    while pos + RECORD_BATCH_OVERHEAD as u64 <= seg.snapshot.size {
        seg.file.read_exact_at(&mut header, pos).map_err(LogError::io(&seg.path))?;
        let h = BatchHeader::parse(&header).map_err(|source| CleanerError::Batch {
            path: seg.path.clone(),
            position: pos,
            source,
        })?;
        let inside = h.base_offset >= map_start && h.last_offset() < map_end;
        if !inside && h.has_producer_id() {
            let e = producer_last.entry(h.producer_id).or_insert(h.base_offset);
            *e = (*e).max(h.base_offset);
        }
        pos += h.size_in_bytes() as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: i64, next: i64, size: u64, index: usize) -> SourceSegment {
        SourceSegment {
            snapshot: SegmentSnapshot { base_offset: base, size },
            next_offset: next,
            file: File::open("/dev/null").unwrap(),
            path: PathBuf::from("/dev/null"),
            offset_index_bytes: index,
            time_index_bytes: index,
            modified: None,
            dirty_position: None,
        }
    }

    #[test]
    fn groups_respect_size_index_and_offset_limits() {
        let segs = vec![
            seg(0, 10, 400, 8),
            seg(10, 20, 400, 8),
            seg(20, 30, 400, 8),
            seg(30, 40, 100, 93),
            seg(40, 50, 10, 5),
        ];
        let groups = group_segments(&segs, 1000, 100);
        assert_eq!(groups, vec![0..2, 2..3, 3..5]);
        let far = vec![seg(0, 10, 1, 0), seg(i32::MAX as i64 - 5, i32::MAX as i64 + 5, 1, 0)];
        assert_eq!(group_segments(&far, 1000, 100), vec![0..1, 1..2]);
        assert_eq!(
            cleaned_files(Path::new("/d/00000000000000000005.log.cleaned"))[1],
            PathBuf::from("/d/00000000000000000005.index.cleaned")
        );
    }
}

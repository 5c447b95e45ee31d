//! `LogSegment`: one `.log` file of record batches, its two sparse indexes
//! and its transaction index, named by the segment's base offset in 20 digits.
//!
//! Invariants:
//! * `size` is the number of valid bytes; the file holds whole, CRC-valid
//!   batches up to `size` (recovery truncates anything after).
//! * Every batch in the segment has offsets >= `base_offset`, and relative
//!   offsets fit in 32 bits (the segment rolls before they would not).
//! * Index entries point at batch starts within `size`, and the time index
//!   entry timestamps are the running maximum of batch max timestamps.
//! * The `.txnindex` lists the aborted transactions whose marker is in this
//!   segment. Unlike the other two it cannot be rebuilt from the segment
//!   alone (a transaction starts in an earlier one), so [`LogSegment::recover_from`]
//!   leaves it to the loader, which replays the whole log.

mod recover;

use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::batch_reader::BatchReader;
use super::error::{LogError, Result};
pub use super::file_region::FileRegion;
use super::index::{OffsetIndex, TimeIndex, TimestampOffset};
use super::record_batch::{self, BatchHeader, RecordIter, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD};
use super::transaction_index::TransactionIndex;

pub use super::log_file_utils::{
    filename_prefix, index_file, log_file, time_index_file, txn_index_file, CLEANED_SUFFIX,
    DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};

/// Sizes a segment needs from the topic config.
#[derive(Debug, Clone, Copy)]
pub struct SegmentConfig {
    pub index_interval_bytes: usize,
    pub max_index_size: usize,
    /// Largest batch to accept when scanning the file (bounds every allocation).
    pub max_batch_size: usize,
}

/// Where a read starts: the batch holding (or following) the requested offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPosition {
    pub position: u64,
    pub header: BatchHeader,
}

/// What is about to be appended, for the roll decision.
#[derive(Debug, Clone, Copy)]
pub struct RollParams {
    pub max_timestamp_in_messages: i64,
    pub max_offset_in_messages: i64,
    pub messages_size: usize,
    pub now_ms: i64,
}

#[derive(Debug)]
pub struct LogSegment {
    base_offset: i64,
    dir: PathBuf,
    /// Suffix after `.log` (empty, or `.cleaned`/`.swap` while the cleaner owns it).
    suffix: String,
    /// Shared with the [`FileRegion`]s of fetches in flight, which keep reading
    /// the file after the segment is replaced or deleted.
    log: Arc<File>,
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TransactionIndex,
    config: SegmentConfig,
    bytes_since_last_index_entry: usize,
    max_timestamp_so_far: i64,
    /// Last offset of the batch holding `max_timestamp_so_far`.
    offset_of_max_timestamp_so_far: i64,
    /// Max timestamp of the first batch: what `segment.ms` is measured from.
    rolling_based_timestamp: Option<i64>,
    created_ms: i64,
    next_offset: i64,
    needs_recovery: bool,
}

/// The fail point that makes every fsync of a partition's segments wait
/// [`SLOW_FSYNC_MS`] first (scope: the partition directory's name, e.g.
/// `orders-0`), as a slow disk does: tests watch what else the broker
/// serves meanwhile.
pub const SLOW_FSYNC_FAILPOINT: &str = "log-slow-fsync";
/// How long [`SLOW_FSYNC_FAILPOINT`] holds each fsync.
pub const SLOW_FSYNC_MS: u64 = 3000;

/// Where [`SLOW_FSYNC_FAILPOINT`] holds an fsync of `partition_dir`'s files
/// (a partition's flushes call it before their fsyncs).
pub fn slow_fsync_point(partition_dir: &Path) {
    let name = partition_dir.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    if crate::failpoint::fires_in(SLOW_FSYNC_FAILPOINT, &name) {
        tracing::warn!("{SLOW_FSYNC_FAILPOINT}: holding an fsync of {name} for {SLOW_FSYNC_MS} ms");
        std::thread::sleep(std::time::Duration::from_millis(SLOW_FSYNC_MS));
    }
}

impl LogSegment {
    /// Create an empty segment (files truncated).
    ///
    /// # Errors
    /// I/O errors creating the files; the files it had made by then are
    /// removed again (descriptors running out is the usual cause).
    pub fn create(
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        suffix: &str,
        now_ms: i64,
    ) -> Result<Self> {
        let created = Self::create_files(dir, base_offset, config, suffix, now_ms);
        if created.is_err() {
            for path in [
                log_file(dir, base_offset, suffix),
                index_file(dir, base_offset, suffix),
                time_index_file(dir, base_offset, suffix),
            ] {
                let _ = std::fs::remove_file(path);
            }
        }
        created
    }

    fn create_files(
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        suffix: &str,
        now_ms: i64,
    ) -> Result<Self> {
        let log_path = log_file(dir, base_offset, suffix);
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&log_path)
            .map_err(LogError::io(&log_path))?;
        let log = Arc::new(log);
        Ok(Self {
            base_offset,
            dir: dir.into(),
            suffix: suffix.into(),
            log,
            size: 0,
            offset_index: OffsetIndex::open(
                &index_file(dir, base_offset, suffix),
                base_offset,
                config.max_index_size,
                true,
            )?,
            time_index: TimeIndex::open(
                &time_index_file(dir, base_offset, suffix),
                base_offset,
                config.max_index_size,
                true,
            )?,
            txn_index: TransactionIndex::create(
                &txn_index_file(dir, base_offset, suffix),
                base_offset,
            )?,
            config,
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: NO_TIMESTAMP,
            offset_of_max_timestamp_so_far: base_offset,
            rolling_based_timestamp: None,
            created_ms: now_ms,
            next_offset: base_offset,
            needs_recovery: false,
        })
    }

    /// Open an existing segment, trusting its indexes after a sanity check and a
    /// walk over the batch headers after the last index entry. A missing or
    /// inconsistent index, or a tail that does not parse, sets
    /// [`LogSegment::needs_recovery`]; the caller then decides with
    /// [`LogSegment::recover_from`] whether the damage may be cut off.
    ///
    /// # Errors
    /// I/O errors only.
    pub fn open(dir: &Path, base_offset: i64, config: SegmentConfig, suffix: &str) -> Result<Self> {
        let log_path = log_file(dir, base_offset, suffix);
        let log = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(&log_path)
                .map_err(LogError::io(&log_path))?,
        );
        let meta = log.metadata().map_err(LogError::io(&log_path))?;
        let created_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        let idx_path = index_file(dir, base_offset, suffix);
        let tidx_path = time_index_file(dir, base_offset, suffix);
        let indexes_present = idx_path.exists() && tidx_path.exists();
        let txn_path = txn_index_file(dir, base_offset, suffix);
        let (txn_index, txn_index_ok) = match TransactionIndex::open(&txn_path, base_offset) {
            Ok(index) => (index, true),
            Err(LogError::CorruptIndex { reason, .. }) => {
                tracing::warn!(index = %txn_path.display(), reason, "transaction index fails its check; it will be rebuilt from the log");
                (TransactionIndex::create(&txn_path, base_offset)?, false)
            }
            Err(e) => return Err(e),
        };
        let mut seg = Self {
            base_offset,
            dir: dir.into(),
            suffix: suffix.into(),
            log,
            size: meta.len(),
            offset_index: OffsetIndex::open(&idx_path, base_offset, config.max_index_size, false)?,
            time_index: TimeIndex::open(&tidx_path, base_offset, config.max_index_size, false)?,
            txn_index,
            config,
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: NO_TIMESTAMP,
            offset_of_max_timestamp_so_far: base_offset,
            rolling_based_timestamp: None,
            created_ms,
            next_offset: base_offset,
            needs_recovery: false,
        };
        if !indexes_present || !txn_index_ok {
            tracing::info!(segment = %seg.log_path().display(), "index missing; it will be rebuilt from the log");
            seg.needs_recovery = true;
        } else if let Err(e) = seg.load_from_indexes() {
            tracing::warn!(segment = %seg.log_path().display(), error = %e, "segment fails its consistency check; it will be rebuilt from the log");
            seg.needs_recovery = true;
        }
        Ok(seg)
    }

    /// Trust the indexes (after a sanity check) and read only the tail of the log
    /// after the last index entry to learn the next offset and timestamps.
    fn load_from_indexes(&mut self) -> Result<()> {
        self.offset_index.sanity_check(self.size)?;
        let last = self.offset_index.lookup(i64::MAX);
        let mut pos = last.position as u64;
        self.next_offset = self.base_offset;
        let mut bytes_since = 0usize;
        while pos < self.size {
            let header = self.read_header_at(pos)?.ok_or_else(|| LogError::Corrupt {
                path: self.log_path(),
                position: pos,
                reason: "partial batch header".into(),
            })?;
            self.next_offset = header.next_offset();
            self.note_timestamp(&header);
            if self.rolling_based_timestamp.is_none() && pos == 0 {
                self.rolling_based_timestamp = Some(header.max_timestamp);
            }
            bytes_since += header.size_in_bytes();
            pos += header.size_in_bytes() as u64;
        }
        if pos != self.size {
            return Err(LogError::Corrupt {
                path: self.log_path(),
                position: pos,
                reason: "last batch runs past the end".into(),
            });
        }
        self.bytes_since_last_index_entry = bytes_since;
        if self.rolling_based_timestamp.is_none() && self.size > 0 {
            self.rolling_based_timestamp =
                self.read_header_at(0).ok().flatten().map(|h| h.max_timestamp);
        }
        if let Some(TimestampOffset { timestamp, offset }) = self.time_index.last_entry() {
            if timestamp > self.max_timestamp_so_far {
                self.max_timestamp_so_far = timestamp;
                self.offset_of_max_timestamp_so_far = offset;
            }
        }
        self.time_index.sanity_check(self.next_offset)?;
        Ok(())
    }

    fn note_timestamp(&mut self, header: &BatchHeader) {
        if header.max_timestamp > self.max_timestamp_so_far {
            self.max_timestamp_so_far = header.max_timestamp;
            self.offset_of_max_timestamp_so_far = header.last_offset();
        }
    }

    /// Account one batch already in the file at `position` (indexes, timestamps, next offset).
    fn index_batch(&mut self, header: &BatchHeader, position: u64) -> Result<()> {
        self.note_timestamp(header);
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes {
            self.offset_index.append(header.last_offset(), position as u32)?;
            self.time_index.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
                false,
            )?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += header.size_in_bytes();
        self.next_offset = header.next_offset();
        Ok(())
    }

    /// Append validated batches (offsets already assigned) at the end of the file.
    ///
    /// # Errors
    /// I/O errors; a failed write leaves `size` unchanged so the bytes are overwritten next time.
    pub fn append(&mut self, batches: &[u8]) -> Result<()> {
        let start = self.size;
        let log_dir = super::dir_failure::log_dir_of(&self.dir).to_string_lossy();
        if crate::failpoint::fires_in(super::dir_failure::WRITE_FAILPOINT, &log_dir) {
            let injected = std::io::Error::from_raw_os_error(libc::EIO);
            return Err(LogError::io(self.log_path())(injected));
        }
        self.log.write_all_at(batches, start).map_err(LogError::io(self.log_path()))?;
        let mut pos = 0usize;
        while pos < batches.len() {
            let header = BatchHeader::parse(&batches[pos..])?;
            if self.size == 0 && pos == 0 {
                self.rolling_based_timestamp = Some(header.max_timestamp);
            }
            self.index_batch(&header, start + pos as u64)?;
            pos += header.size_in_bytes();
        }
        self.size += batches.len() as u64;
        Ok(())
    }

    /// Kafka's roll rule for the next append.
    pub fn should_roll(
        &self,
        p: &RollParams,
        segment_bytes: usize,
        roll_ms: i64,
        jitter_ms: i64,
    ) -> bool {
        let waited = match self.rolling_based_timestamp {
            Some(t) if t >= 0 => p.max_timestamp_in_messages - t,
            _ => p.now_ms - self.created_ms,
        };
        let reached_roll_ms = waited > roll_ms - jitter_ms;
        self.size > (segment_bytes as u64).saturating_sub(p.messages_size as u64)
            || (self.size > 0 && reached_roll_ms)
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || p.max_offset_in_messages - self.base_offset > u32::MAX as i64
    }

    /// Called when a newer segment becomes active: write the final time index entry.
    ///
    /// # Errors
    /// I/O errors.
    pub fn on_become_inactive(&mut self) -> Result<()> {
        if self.max_timestamp_so_far >= 0 {
            self.time_index.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
                true,
            )?;
        }
        self.offset_index.write_out()?;
        self.time_index.write_out()
    }

    /// Read the header of the batch at `position`, or `None` if the file ends first.
    ///
    /// # Errors
    /// I/O errors and a malformed header.
    pub fn read_header_at(&self, position: u64) -> Result<Option<BatchHeader>> {
        if position + RECORD_BATCH_OVERHEAD as u64 > self.size {
            return Ok(None);
        }
        let mut buf = [0u8; RECORD_BATCH_OVERHEAD];
        match self.log.read_exact_at(&mut buf, position) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(LogError::io(self.log_path())(e)),
        }
        BatchHeader::parse(&buf).map(Some).map_err(|e| LogError::Corrupt {
            path: self.log_path(),
            position,
            reason: e.to_string(),
        })
    }

    /// The first batch whose last offset is >= `offset`, searching from the index.
    ///
    /// # Errors
    /// I/O errors and malformed headers.
    pub fn translate_offset(&self, offset: i64) -> Result<Option<BatchPosition>> {
        let mut pos = self.offset_index.lookup(offset).position as u64;
        while pos < self.size {
            let Some(header) = self.read_header_at(pos)? else { return Ok(None) };
            if header.last_offset() >= offset {
                return Ok(Some(BatchPosition { position: pos, header }));
            }
            pos += header.size_in_bytes() as u64;
        }
        Ok(None)
    }

    /// Whole batches from the batch holding `offset` (or the next one), up to
    /// `max_bytes`; with `min_one_batch` the first batch is returned even if larger.
    ///
    /// # Errors
    /// I/O errors and malformed headers.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<Option<(i64, Bytes)>> {
        let Some((base, region)) = self.read_region(offset, max_bytes, min_one_batch)? else {
            return Ok(None);
        };
        let bytes = region.read_to_bytes().map_err(LogError::io(self.log_path()))?;
        Ok(Some((base, bytes)))
    }

    /// Where [`LogSegment::read`]'s bytes are in the file, without reading
    /// them: a fetch sends the region straight from the page cache to the
    /// socket. Only batch headers are read, to find the start and, when no
    /// index entry marks a batch start inside the limit, the end.
    ///
    /// # Errors
    /// I/O errors and malformed headers.
    pub fn read_region(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<Option<(i64, FileRegion)>> {
        self.read_region_to(offset, max_bytes, min_one_batch, self.size)
    }

    /// [`LogSegment::read_region`] of the bytes before `max_position` only,
    /// a batch start (a read_committed fetch stops at the batch holding the
    /// LSO); an empty region when the batch holding `offset` starts there or later.
    ///
    /// # Errors
    /// I/O errors and malformed headers.
    pub fn read_region_to(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        max_position: u64,
    ) -> Result<Option<(i64, FileRegion)>> {
        let Some(start) = self.translate_offset(offset)? else { return Ok(None) };
        let size = self.size.min(max_position);
        if start.position >= size {
            let empty = FileRegion::new(Arc::clone(&self.log), start.position, 0);
            return Ok(Some((start.header.base_offset, empty)));
        }
        let available = size - start.position;
        let first = start.header.size_in_bytes() as u64;
        let mut end = size;
        if available > max_bytes as u64 {
            let limit = start.position + max_bytes as u64;
            // End at a batch start the index knows, so the next fetch starts where
            // this one ended: reads stay strictly sequential and readahead works.
            end = match self.offset_index.floor_position(limit.min(u32::MAX as u64) as u32) {
                Some(e) if e as u64 > start.position => e as u64,
                _ => self.whole_batches_end(start.position, limit)?,
            };
        }
        if end - start.position < first {
            if !min_one_batch {
                return Ok(Some((
                    start.header.base_offset,
                    FileRegion::new(Arc::clone(&self.log), start.position, 0),
                )));
            }
            end = start.position + first.min(available);
        }
        Ok(Some((
            start.header.base_offset,
            FileRegion::new(Arc::clone(&self.log), start.position, (end - start.position) as usize),
        )))
    }

    /// The end of the last whole batch from `position` that ends at or before `limit`.
    fn whole_batches_end(&self, mut position: u64, limit: u64) -> Result<u64> {
        while let Some(header) = self.read_header_at(position)? {
            let size = header.size_in_bytes() as u64;
            if position + size > limit {
                break;
            }
            position += size;
        }
        Ok(position)
    }

    /// The first record with timestamp >= `timestamp` at or after `starting_offset`:
    /// (its timestamp, its offset).
    ///
    /// # Errors
    /// I/O errors and corrupt batches.
    pub fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        starting_offset: i64,
        scratch: &mut Vec<u8>,
    ) -> Result<Option<(i64, i64)>> {
        // The time index entry (T, O) says every record before the batch ending at O
        // is older than T <= target, so the scan may start at O's position; records
        // are still filtered by the log start offset only.
        let ts_entry = self.time_index.lookup(timestamp);
        let from = starting_offset;
        let mut pos =
            self.offset_index.lookup(ts_entry.offset.max(starting_offset)).position as u64;
        let mut buf = Vec::new();
        let mut reader = self.batches(pos..self.size, &mut buf);
        while let Some((p, batch)) = reader.next_batch()? {
            pos = p;
            let header = BatchHeader::parse(batch)?;
            if header.max_timestamp < timestamp || header.last_offset() < from {
                continue;
            }
            let payload = record_batch::records_bytes(
                &header,
                batch,
                scratch,
                super::validator::decompression_limit(self.config.max_batch_size),
            )
            .map_err(|e| LogError::Corrupt {
                path: self.log_path(),
                position: pos,
                reason: e.to_string(),
            })?;
            for rec in RecordIter::new(payload, header.records_count) {
                let rec = rec.map_err(|e| LogError::Corrupt {
                    path: self.log_path(),
                    position: pos,
                    reason: e.to_string(),
                })?;
                let offset = header.base_offset + rec.offset_delta as i64;
                let ts = match header.timestamp_type() {
                    record_batch::TimestampType::LogAppendTime => header.max_timestamp,
                    record_batch::TimestampType::CreateTime => {
                        header.timestamp_base() + rec.timestamp_delta
                    }
                };
                if ts >= timestamp && offset >= from {
                    return Ok(Some((ts, offset)));
                }
            }
        }
        Ok(None)
    }

    /// Fsync the log and its indexes.
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&mut self) -> Result<()> {
        self.log.sync_data().map_err(LogError::io(self.log_path()))?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()
    }

    /// The segment's files with every pending index entry written out, to
    /// be fsynced later without the partition's lock (`FlushJob`).
    ///
    /// # Errors
    /// I/O errors writing the index entries.
    pub fn sync_handles(&mut self) -> Result<Vec<(PathBuf, Arc<File>)>> {
        let mut files = vec![(self.log_path(), Arc::clone(&self.log))];
        files.push(self.offset_index.sync_handle()?);
        files.push(self.time_index.sync_handle()?);
        files.extend(self.txn_index.sync_handle());
        Ok(files)
    }

    /// Rename the segment's files from suffix `self.suffix` to `new_suffix`
    /// (e.g. to `.deleted`). The `.log` names the segment for the loader, so
    /// it is renamed last into `.swap` (a `.log.swap` then always has every
    /// index beside it, including the `.txnindex` that recovery could not
    /// rebuild from the segment alone) and first otherwise (indexes left
    /// under the old name by a crash are the segment's, or orphans).
    ///
    /// # Errors
    /// I/O errors; files renamed before the failure keep their new name.
    pub fn change_file_suffix(&mut self, new_suffix: &str) -> Result<()> {
        let (dir, base) = (self.dir.clone(), self.base_offset);
        let old_log = log_file(&dir, base, &self.suffix);
        let new_log = log_file(&dir, base, new_suffix);
        let rename_log = || std::fs::rename(&old_log, &new_log).map_err(LogError::io(&old_log));
        let log_last = new_suffix == SWAP_SUFFIX;
        if !log_last {
            rename_log()?;
        }
        self.offset_index.rename(&index_file(&dir, base, new_suffix))?;
        self.time_index.rename(&time_index_file(&dir, base, new_suffix))?;
        self.txn_index.rename(&txn_index_file(&dir, base, new_suffix))?;
        if log_last {
            rename_log()?;
        }
        self.suffix = new_suffix.into();
        Ok(())
    }

    /// Unlink the segment's files.
    ///
    /// # Errors
    /// I/O errors other than a file already gone.
    pub fn delete_files(&self) -> Result<()> {
        for path in [
            self.log_path(),
            self.offset_index.path().into(),
            self.time_index.path().into(),
            self.txn_index.path().into(),
        ] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::io(path)(e)),
            }
        }
        Ok(())
    }

    /// The indexes or the tail failed their check on open.
    pub fn needs_recovery(&self) -> bool {
        self.needs_recovery
    }
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    /// The offset after the last batch (the base offset when empty).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn log_path(&self) -> PathBuf {
        log_file(&self.dir, self.base_offset, &self.suffix)
    }
    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }
    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }
    /// The aborted transactions whose marker is in this segment.
    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }
    pub fn txn_index_mut(&mut self) -> &mut TransactionIndex {
        &mut self.txn_index
    }
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp_so_far
    }
    pub fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp_so_far
    }
    /// What retention compares with `retention.ms`: the newest timestamp, or the
    /// file's modification time when the segment has no timestamps.
    pub fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp_so_far >= 0 {
            return self.max_timestamp_so_far;
        }
        self.log
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64)
    }
    pub fn file(&self) -> &File {
        &self.log
    }
    pub fn max_batch_size(&self) -> usize {
        self.config.max_batch_size
    }

    /// The batches of this segment's log file in `range` (positions), read
    /// into `buf` and bounded by the segment's largest batch size.
    pub fn batches<'a>(&'a self, range: Range<u64>, buf: &'a mut Vec<u8>) -> BatchReader<'a> {
        BatchReader::new(self.file(), self.log_path(), range, self.max_batch_size(), buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::compression::Compression;
    use crate::log::record_batch::BatchBuilder;

    /// A segment of batches of different sizes; returns it and the batch start positions (plus the end).
    fn segment(dir: &Path, index_interval_bytes: usize) -> (LogSegment, Vec<u64>) {
        let config = SegmentConfig {
            index_interval_bytes,
            max_index_size: 1 << 20,
            max_batch_size: 1 << 20,
        };
        let mut seg = LogSegment::create(dir, 0, config, "", 0).unwrap();
        let mut starts = vec![0u64];
        for i in 0..40i64 {
            let mut b = BatchBuilder::new(Compression::None, 1_000);
            let value = vec![b'v'; 10 + (i as usize * 37) % 300];
            for _ in 0..1 + i % 3 {
                b.append(1_000, Some(b"k"), Some(&value));
            }
            let mut batch = b.build();
            record_batch::set_base_offset(&mut batch, seg.next_offset());
            seg.append(&batch).unwrap();
            starts.push(seg.size());
        }
        (seg, starts)
    }

    #[test]
    fn regions_are_whole_batches_within_the_limit_and_read_as_the_file() {
        for interval in [0, 700, 1 << 20] {
            let dir = tempfile::tempdir().unwrap();
            let (seg, starts) = segment(dir.path(), interval);
            let file = std::fs::read(seg.log_path()).unwrap();
            for offset in [0, 5, 17] {
                let start = seg.translate_offset(offset).unwrap().unwrap().position;
                for max in [0usize, 1, 100, 333, 1_000, 2_500, 10_000, 1 << 20] {
                    for min_one in [true, false] {
                        let (_, region) = seg.read_region(offset, max, min_one).unwrap().unwrap();
                        let end = start + region.len() as u64;
                        assert_eq!(region.position(), start);
                        assert!(
                            starts.contains(&end),
                            "interval {interval} max {max}: ends inside a batch at {end}"
                        );
                        let first = starts.iter().find(|&&s| s > start).copied().unwrap();
                        if region.len() > max {
                            assert!(
                                min_one && end == first,
                                "only a first batch may exceed the limit"
                            );
                        }
                        if min_one {
                            assert!(end >= first, "at least one batch");
                        }
                        if interval == 1 << 20 {
                            // No index entry inside: the largest whole-batch prefix that fits.
                            let best = starts
                                .iter()
                                .copied()
                                .filter(|&s| s > start && s - start <= max as u64)
                                .max();
                            assert_eq!(
                                end,
                                best.unwrap_or(if min_one { first } else { start }),
                                "max {max}"
                            );
                        }
                        let bytes = seg.read(offset, max, min_one).unwrap().unwrap().1;
                        assert_eq!(&bytes[..], &file[start as usize..end as usize]);
                        assert_eq!(&region.read_to_bytes().unwrap()[..], &bytes[..]);
                    }
                }
            }
        }
    }
}

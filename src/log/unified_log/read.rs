//! Reads of a `Log` (Kafka's `LocalLog.read` and `fetchOffsetByTimestamp`):
//! Fetch returns whole batches as they are on disk, ListOffsets finds
//! offsets, each by isolation level (Kafka's `FetchIsolation`).
//!
//! * read_uncommitted reads up to the high watermark, which on one node is
//!   the log end offset (with `log.flush.before.ack`, the recovery point:
//!   nothing is read before it is durable); a follower's fetch
//!   (`FetchIsolation::LogEnd`) reads to the log end.
//! * read_committed reads only below the last stable offset (LSO): the read
//!   stops at the start of the batch holding the LSO (the first batch of the
//!   earliest open transaction, so a batch boundary; the zero-copy region
//!   stays whole batches). It also names the aborted transactions that
//!   overlap what it returns, from the `.txnindex` of the segment read and
//!   the segments after it: an entry overlaps when its marker is at or after
//!   the fetch offset and its data starts before the offset after the last
//!   batch returned; the search stops at the first entry whose LSO reaches
//!   that bound, since no later abort can overlap (Kafka's
//!   `collectAbortedTransactions`). A consumer drops those producers'
//!   transactional batches from those first offsets to their ABORT markers.
//!   A read that returns nothing names none.
//! * Every read reports the LSO, whatever its isolation.
//! * ListOffsets EARLIEST answers the log start offset, EARLIEST_LOCAL the
//!   local one (they differ once segments are only in the object store);
//!   Fetch reads from the local start on.
//! * ListOffsets LATEST answers the last offset a reader of the isolation may
//!   fetch (the LSO or the high watermark); a timestamp or max-timestamp
//!   lookup whose offset is at or past it answers nothing (Kafka's
//!   `Partition.fetchOffsetForTimestamp`).
//!
//! With no transaction in the log the LSO is the high watermark, so both
//! isolation levels read exactly the same bytes.

use bytes::Bytes;

use super::Log;
use crate::log::error::{LogError, Result};
use crate::log::record_batch::{self, TimestampType, NO_TIMESTAMP};
use crate::log::segment::{FileRegion, LogSegment};
use crate::log::transaction_index::AbortedTxn;

/// Special timestamps of ListOffsets.
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const LATEST_TIMESTAMP: i64 = -1;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// ListOffsets' earliest offset not yet in the remote store (KIP-1023).
pub const EARLIEST_PENDING_UPLOAD_TIMESTAMP: i64 = -6;

/// How far a reader may read (Fetch and ListOffsets `isolation_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FetchIsolation {
    /// read_uncommitted (0): up to the high watermark.
    #[default]
    HighWatermark,
    /// read_committed (1): below the last stable offset.
    TxnCommitted,
    /// A follower's fetch (Kafka's `FetchIsolation.LOG_END`): up to the log
    /// end, past the high watermark, which the follower's own copies move.
    LogEnd,
}

impl FetchIsolation {
    /// The isolation of a request's `isolation_level`: 1 is read_committed,
    /// anything else reads uncommitted, the field's default (Kafka's
    /// `IsolationLevel.forId` fails the request on a value other than 0 or 1;
    /// the protocol crate decodes any byte).
    pub fn from_isolation_level(level: i8) -> Self {
        if level == 1 {
            Self::TxnCommitted
        } else {
            Self::HighWatermark
        }
    }
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
    pub last_stable_offset: i64,
    /// read_committed only: the aborted transactions overlapping `records`.
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}

impl Log {
    /// The first offset on local disk (Kafka's `localLogStartOffset`). For a
    /// topic whose oldest segments live only in the remote store it is above
    /// `log_start_offset`, and reads below it are served from the store;
    /// otherwise the two are equal.
    pub fn local_log_start_offset(&self) -> i64 {
        let first = self.segment_map().keys().next().copied();
        first.unwrap_or(self.log_start_offset()).max(self.log_start_offset())
    }

    /// Whole batches from the one holding `offset` (or the next offset present),
    /// up to `max_bytes`; at least one batch when `min_one_batch`.
    ///
    /// # Errors
    /// `OffsetOutOfRange` outside [local log start, log end]; I/O errors.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo> {
        let info = self.read_region(offset, max_bytes, min_one_batch)?;
        let records = match &info.records {
            Some(region) => region.read_to_bytes().map_err(LogError::io(self.dir()))?,
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
    /// `OffsetOutOfRange` outside [local log start, log end]; I/O errors.
    pub fn read_region(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchRegionInfo> {
        self.read_region_with_isolation(
            offset,
            max_bytes,
            min_one_batch,
            FetchIsolation::HighWatermark,
        )
    }

    /// [`Log::read_region`] for a reader of `isolation` (the module doc).
    ///
    /// # Errors
    /// `OffsetOutOfRange` outside [local log start, log end]; I/O errors.
    pub fn read_region_with_isolation(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        isolation: FetchIsolation,
    ) -> Result<FetchRegionInfo> {
        let committed = isolation == FetchIsolation::TxnCommitted;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        let empty = || FetchRegionInfo {
            records: None,
            high_watermark: self.high_watermark(),
            log_start_offset: start,
            last_stable_offset: self.last_stable_offset(),
            aborted_transactions: committed.then(Vec::new),
        };
        if offset == end {
            return Ok(empty());
        }
        // Below the local start the offsets are only in the object store:
        // not readable here (the segments' lookup would skip to the first
        // local batch).
        let local_start = self.local_log_start_offset();
        if offset < local_start || offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: local_start,
                log_end: end,
            });
        }
        let max_offset = match isolation {
            FetchIsolation::HighWatermark => self.high_watermark(),
            FetchIsolation::TxnCommitted => self.last_stable_offset(),
            FetchIsolation::LogEnd => end,
        };
        if offset >= max_offset {
            return Ok(empty());
        }
        // Where the read must stop: the start of the batch holding `max_offset`.
        let bound = if max_offset < end { self.batch_start(max_offset)? } else { None };
        let segments = self.segment_map();
        let first = segments.range(..=offset).next_back().map_or(i64::MIN, |(b, _)| *b);
        for seg in segments.range(first..).map(|(_, s)| s) {
            let max_position = match bound {
                Some((base, _)) if seg.base_offset() > base => break,
                Some((base, position)) if seg.base_offset() == base => position,
                _ => seg.size(),
            };
            let Some((_, region)) =
                seg.read_region_to(offset, max_bytes, min_one_batch, max_position)?
            else {
                continue;
            };
            if region.is_empty() {
                return Ok(empty());
            }
            let aborted_transactions = if committed {
                let upper = offset_after(seg, &region)?;
                Some(self.collect_aborted_from(seg.base_offset(), offset, upper)?)
            } else {
                None
            };
            return Ok(FetchRegionInfo { records: Some(region), aborted_transactions, ..empty() });
        }
        Ok(empty())
    }

    /// The aborted transactions overlapping `[from, upper)`: marker at or
    /// after `from`, data starting before `upper` (Kafka's
    /// `collectAbortedTransactions`), in marker order.
    ///
    /// # Errors
    /// I/O errors reading a `.txnindex`.
    pub fn collect_aborted_transactions(&self, from: i64, upper: i64) -> Result<Vec<AbortedTxn>> {
        let segments = self.segment_map();
        let first = segments.range(..=from).next_back().map_or(i64::MIN, |(b, _)| *b);
        self.collect_aborted_from(first, from, upper)
    }

    fn collect_aborted_from(
        &self,
        first_segment: i64,
        from: i64,
        upper: i64,
    ) -> Result<Vec<AbortedTxn>> {
        let mut aborted = Vec::new();
        for seg in self.segment_map().range(first_segment..).map(|(_, s)| s) {
            let found = seg.txn_index().collect_aborted_txns(from, upper)?;
            aborted.extend(found.aborted);
            if found.complete {
                break;
            }
        }
        Ok(aborted)
    }

    /// The segment and position of the batch holding `offset` (or the next
    /// batch after it).
    fn batch_start(&self, offset: i64) -> Result<Option<(i64, u64)>> {
        let segments = self.segment_map();
        let first = segments.range(..=offset).next_back().map_or(i64::MIN, |(b, _)| *b);
        for seg in segments.range(first..).map(|(_, s)| s) {
            if let Some(p) = seg.translate_offset(offset)? {
                return Ok(Some((seg.base_offset(), p.position)));
            }
        }
        Ok(None)
    }

    /// ListOffsets for a reader of `isolation` (the module doc).
    ///
    /// # Errors
    /// I/O errors and corrupt batches.
    pub fn fetch_offset_for_isolation(
        &mut self,
        target: i64,
        isolation: FetchIsolation,
    ) -> Result<Option<(i64, i64)>> {
        let last_fetchable = match isolation {
            FetchIsolation::HighWatermark => self.high_watermark(),
            FetchIsolation::TxnCommitted => self.last_stable_offset(),
            FetchIsolation::LogEnd => self.log_end_offset(),
        };
        match target {
            LATEST_TIMESTAMP => Ok(Some((NO_TIMESTAMP, last_fetchable))),
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP | EARLIEST_PENDING_UPLOAD_TIMESTAMP => {
                self.fetch_offset_by_timestamp(target)
            }
            _ => Ok(self.fetch_offset_by_timestamp(target)?.filter(|&(_, o)| o < last_fetchable)),
        }
    }

    /// ListOffsets: the (timestamp, offset) for a target timestamp or one of the
    /// special values. `None` when no record has a timestamp >= the target.
    ///
    /// # Errors
    /// I/O errors and corrupt batches.
    pub fn fetch_offset_by_timestamp(&mut self, target: i64) -> Result<Option<(i64, i64)>> {
        let found = self.offset_by_timestamp(target);
        // A scan may have inflated a large batch: its buffer is not kept.
        self.shrink_scratch();
        found
    }

    fn offset_by_timestamp(&mut self, target: i64) -> Result<Option<(i64, i64)>> {
        let start = self.log_start_offset();
        match target {
            EARLIEST_TIMESTAMP => return Ok(Some((NO_TIMESTAMP, start))),
            EARLIEST_LOCAL_TIMESTAMP => {
                return Ok(Some((NO_TIMESTAMP, self.local_log_start_offset())))
            }
            LATEST_TIMESTAMP => return Ok(Some((NO_TIMESTAMP, self.log_end_offset()))),
            MAX_TIMESTAMP => return self.max_timestamp_and_offset(),
            EARLIEST_PENDING_UPLOAD_TIMESTAMP => {
                return Ok(Some((NO_TIMESTAMP, self.earliest_pending_upload_offset())))
            }
            t if t < 0 => return Ok(None),
            _ => {}
        }
        let (segments, scratch) = self.segments_and_scratch();
        for seg in segments.values() {
            if seg.next_offset() <= start || seg.size() == 0 || seg.max_timestamp() < target {
                continue;
            }
            if let Some(found) = seg.find_offset_by_timestamp(target, start, scratch)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The first offset the remote store does not hold yet, as Kafka 4.4
    /// answers it: -1 without remote storage, or while nothing was uploaded
    /// and local segments were already deleted (offsets are missing); the
    /// log start while nothing was uploaded and all is local; else the
    /// offset after the store's highest, never below the log start.
    fn earliest_pending_upload_offset(&self) -> i64 {
        if !self.config().remote_storage_enable {
            return -1;
        }
        match self.highest_offset_in_remote_storage() {
            -1 if self.local_log_start_offset() == self.log_start_offset() => {
                self.log_start_offset()
            }
            -1 => -1,
            highest => (highest + 1).max(self.log_start_offset()),
        }
    }

    /// The newest timestamp among records at or after the log start offset, and
    /// the first record carrying it. The segments' running maxima answer the
    /// common case; when the maximum lies below the log start (after
    /// DeleteRecords) the remaining records are scanned.
    fn max_timestamp_and_offset(&mut self) -> Result<Option<(i64, i64)>> {
        let start = self.log_start_offset();
        let max_message_bytes = self.config().max_message_bytes;
        let (segments, scratch) = self.segments_and_scratch();
        let best = segments
            .values()
            .filter(|s| s.size() > 0 && s.max_timestamp() >= 0)
            .max_by_key(|s| s.max_timestamp());
        let Some(seg) = best else { return Ok(Some((NO_TIMESTAMP, -1))) };
        if let Some((ts, offset)) =
            seg.find_offset_by_timestamp(seg.max_timestamp(), i64::MIN, scratch)?
        {
            if offset >= start {
                return Ok(Some((ts, offset)));
            }
        }
        let mut best: Option<(i64, i64)> = None;
        for seg in segments.values().filter(|s| s.next_offset() > start) {
            let mut buf = Vec::new();
            let mut reader = seg.batches(0..seg.size(), &mut buf);
            while let Some((_, batch)) = reader.next_batch()? {
                let header = record_batch::BatchHeader::parse(batch)?;
                if header.last_offset() < start
                    || best.is_some_and(|(ts, _)| header.max_timestamp <= ts)
                {
                    continue;
                }
                let limit = crate::log::validator::decompression_limit(max_message_bytes);
                let payload = record_batch::records_bytes(&header, batch, scratch, limit)?;
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
}

/// The offset after the batches of `region` in `seg`: the base offset of the
/// next batch (across a compaction gap, more than the last offset read + 1,
/// which only widens the search by offsets holding nothing), or the
/// segment's next offset.
fn offset_after(seg: &LogSegment, region: &FileRegion) -> Result<i64> {
    let end = region.position() + region.len() as u64;
    Ok(seg.read_header_at(end)?.map_or(seg.next_offset(), |h| h.base_offset))
}

//! A follower's appends (Kafka's `appendAsFollower`): the leader's batches,
//! fetched as they are on its disk, go into this log unchanged, so offset
//! `o` is the same record on every replica.
//!
//! Nothing of the leader's checks is made again: each batch is checked for
//! its framing, size and CRC only (a cleaned batch's record count, a
//! delete horizon and control batches are the leader's to have made), and
//! the producer state is built with origin `Replication` (no refusal, the
//! same bookkeeping). What a follower does check, as Kafka does:
//! * offsets: the first batch starts at or past the log end, and each
//!   batch past the one before it (compaction leaves gaps, never overlaps);
//! * leader epochs: a batch's epoch at or above the latest this log holds;
//!   a higher one begins a new epoch in `leader-epoch-checkpoint` before
//!   the batch is written.
//!
//! Markers complete transactions here as on the leader, with their
//! `.txnindex` entries, so each replica's last stable offset follows from
//! its own log.

use super::flush::FlushMode;
use super::{Log, LogAppendInfo, LogError, Result};
use crate::log::control_record;
use crate::log::error::BatchError;
use crate::log::producer_append_info::{AppendOrigin, ProducerAppendInfo, ProducerBatch};
use crate::log::record_batch::{self, BatchHeader, NO_TIMESTAMP};
use crate::log::segment::RollParams;

impl Log {
    /// Append the leader's `records` (whole batches with their offsets and
    /// epochs) as they are.
    ///
    /// # Errors
    /// `Batch` errors for a damaged batch or offsets that do not follow the
    /// log end, `StaleLeaderEpoch` for an epoch below the latest; nothing is
    /// then appended. I/O errors.
    pub fn append_as_follower(&mut self, records: &[u8]) -> Result<LogAppendInfo> {
        self.check_writable()?;
        let appended = self.append_as_follower_once(records);
        self.shrink_scratch();
        self.note_write(appended)
    }

    fn append_as_follower_once(&mut self, records: &[u8]) -> Result<LogAppendInfo> {
        let batches = self.check_follower_batches(records)?;
        let (Some(first), Some(last)) = (batches.first(), batches.last()) else {
            return Err(BatchError::InvalidBatch("no record batch".into()).into());
        };
        let (first_offset, last_offset) = (first.header.base_offset, last.header.last_offset());
        let mut info = ProducerAppendInfo::new(AppendOrigin::Replication);
        let mut max_timestamp = NO_TIMESTAMP;
        for batch in &batches {
            self.producers.append_batch(&mut info, batch)?;
            max_timestamp = max_timestamp.max(batch.header.max_timestamp);
        }
        let now = self.clock.now_ms();
        self.maybe_roll(
            RollParams {
                max_timestamp_in_messages: max_timestamp,
                max_offset_in_messages: last_offset,
                messages_size: records.len(),
                now_ms: now,
            },
            first_offset,
            FlushMode::Inline,
        )?;
        for batch in &batches {
            self.maybe_assign_epoch(batch.header.partition_leader_epoch, batch.header.base_offset)?;
        }
        self.segments.values_mut().next_back().expect("active").append(records)?;
        self.next_offset = last_offset + 1;
        let count: i64 = batches.iter().map(|b| b.header.records_count as i64).sum();
        self.unflushed_messages += count;
        info.set_append_time(now);
        if let Err(e) = self.complete_transactions(info) {
            self.fail(&e);
            return Err(e);
        }
        if self.flush_before_ack || self.unflushed_messages >= self.config.flush_messages {
            self.flush()?;
        }
        Ok(LogAppendInfo {
            first_offset,
            last_offset,
            log_append_time: NO_TIMESTAMP,
            log_start_offset: self.log_start_offset,
            records_count: count,
            max_timestamp,
            valid_bytes: records.len(),
        })
    }

    /// The batches of `records` with their markers, checked as the module
    /// doc says.
    fn check_follower_batches(&mut self, records: &[u8]) -> Result<Vec<ProducerBatch>> {
        let max_size = Self::segment_config(&self.config).max_batch_size;
        let limit = crate::log::validator::decompression_limit(self.config.max_message_bytes);
        let mut latest_epoch = self.leader_epochs.latest_epoch().unwrap_or(-1);
        let mut next = self.next_offset;
        let mut out = Vec::new();
        let mut position = 0;
        while position < records.len() {
            let rest = &records[position..];
            let header = record_batch::check_batch(rest, max_size)?;
            let batch = &rest[..header.size_in_bytes()];
            check_follows(&header, next)?;
            if header.partition_leader_epoch >= 0 {
                if header.partition_leader_epoch < latest_epoch {
                    return Err(LogError::StaleLeaderEpoch {
                        epoch: header.partition_leader_epoch,
                        latest: latest_epoch,
                    });
                }
                latest_epoch = header.partition_leader_epoch;
            }
            let control = if header.is_control() {
                Some(control_record::read_control_batch(&header, batch, &mut self.scratch, limit)?)
            } else {
                None
            };
            out.push(ProducerBatch { header, control });
            next = header.next_offset();
            position += header.size_in_bytes();
        }
        Ok(out)
    }
}

/// A batch must start at or past `next` (the offset after what is before it).
fn check_follows(header: &BatchHeader, next: i64) -> Result<(), BatchError> {
    if header.base_offset < next || header.last_offset_delta < 0 {
        return Err(BatchError::InvalidBatch(format!(
            "batch offsets {}..={} do not follow offset {next}",
            header.base_offset,
            header.last_offset()
        )));
    }
    Ok(())
}

//! Recovering and cutting a segment (Kafka's `LogSegment.recover` and
//! `truncateTo`): both rebuild the indexes and the running timestamps by
//! scanning the file, checking every batch's framing and CRC.

use std::sync::Arc;

use super::LogSegment;
use crate::log::batch_reader::BatchReader;
use crate::log::error::{LogError, Result};
use crate::log::record_batch::{BatchHeader, NO_TIMESTAMP};

impl LogSegment {
    /// Rebuild both sparse indexes and the in-memory state by scanning the
    /// whole file, checking every batch's framing and CRC (the transaction
    /// index is the loader's to rebuild). Invalid bytes are truncated only
    /// when the valid prefix still reaches `min_next_offset` (the recovery point:
    /// what was flushed must survive); otherwise nothing is cut and the damage is
    /// an error. Returns the number of bytes truncated.
    ///
    /// # Errors
    /// I/O errors, and `Corrupt` (with file and position) for damage that may not be cut.
    pub fn recover_from(&mut self, min_next_offset: i64) -> Result<u64> {
        self.offset_index.truncate_to(i64::MIN)?;
        self.time_index.truncate_to(i64::MIN)?;
        self.max_timestamp_so_far = NO_TIMESTAMP;
        self.offset_of_max_timestamp_so_far = self.base_offset;
        self.bytes_since_last_index_entry = 0;
        self.next_offset = self.base_offset;
        self.rolling_based_timestamp = None;
        let file_size = self.log.metadata().map_err(LogError::io(self.log_path()))?.len();
        // The reader keeps its own handle: indexing below needs `self` mutably.
        let file = Arc::clone(&self.log);
        let mut buf = Vec::new();
        let mut reader = BatchReader::new(
            &file,
            self.log_path(),
            0..file_size,
            self.config.max_batch_size,
            &mut buf,
        );
        let mut valid_end = 0u64;
        let mut problem = None;
        loop {
            match reader.next_batch() {
                Ok(Some((pos, batch))) => {
                    let header = BatchHeader::parse(batch)?;
                    if header.base_offset < self.base_offset.max(self.next_offset)
                        || header.last_offset_delta < 0
                    {
                        problem = Some(format!(
                            "batch offsets {}..={} do not follow offset {}",
                            header.base_offset,
                            header.last_offset(),
                            self.next_offset.max(self.base_offset)
                        ));
                        break;
                    }
                    valid_end = pos + batch.len() as u64;
                    self.index_batch(&header, pos)?;
                }
                Ok(None) => break,
                Err(e) => {
                    problem = Some(LogError::from(e).to_string());
                    break;
                }
            }
        }
        let truncated = file_size - valid_end;
        if truncated > 0 && self.next_offset < min_next_offset {
            return Err(LogError::Corrupt {
                path: self.log_path(),
                position: valid_end,
                reason: format!(
                    "{} (valid data ends at offset {}, below the recovery point {min_next_offset})",
                    problem.as_deref().unwrap_or("incomplete batch"),
                    self.next_offset
                ),
            });
        }
        if truncated > 0 {
            tracing::warn!(
                segment = %self.log_path().display(),
                position = valid_end,
                bytes = truncated,
                reason = problem.as_deref().unwrap_or("incomplete batch"),
                "truncating invalid bytes at the end of the segment"
            );
            self.log.set_len(valid_end).map_err(LogError::io(self.log_path()))?;
        }
        self.size = valid_end;
        self.needs_recovery = false;
        if self.size > 0 {
            self.rolling_based_timestamp = self.read_header_at(0)?.map(|h| h.max_timestamp);
        }
        Ok(truncated)
    }

    /// Cut the segment before its first batch ending at or past `offset`
    /// (Kafka's `LogSegment.truncateTo`): the file, its three indexes and
    /// the running timestamps. Returns the base offset of the first batch
    /// removed, `None` when every batch ends below `offset`. The indexes
    /// and timestamps are rebuilt by scanning what remains (truncation is
    /// rare: a replica that diverged from its leader).
    ///
    /// # Errors
    /// I/O errors; `Corrupt` if what remains does not read back whole.
    pub fn truncate_to(&mut self, offset: i64) -> Result<Option<i64>> {
        let Some(cut) = self.translate_offset(offset)? else { return Ok(None) };
        self.txn_index.truncate_to(offset)?;
        self.log.set_len(cut.position).map_err(LogError::io(self.log_path()))?;
        self.size = cut.position;
        self.recover_from(i64::MIN)?;
        Ok(Some(cut.header.base_offset))
    }
}

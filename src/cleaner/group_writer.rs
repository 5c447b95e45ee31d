//! The output of one group of the recopy: its `.cleaned` segment, created
//! only once the group changes.
//!
//! While every batch read from the group so far is forwarded byte for byte,
//! nothing is written: the output would equal the input. At the first batch
//! that is dropped or rewritten into different bytes, the `.cleaned` segment
//! is created and the unchanged prefix (the batches forwarded so far) is
//! copied into it from the source files, in large reads of whole batches;
//! the recopy then continues as before. A group that never changes costs one
//! read and no write, and keeps its files (see "Kept groups" in the module
//! doc of `cleaner/`).
//!
//! Invariants:
//! * Output is written in order: the prefix copy comes before anything the
//!   filter produced, because the filter's output is held in the write
//!   buffer until the prefix is in the segment.
//! * The prefix is bytes this clean has just read and checked (framing and
//!   CRC, through the `BatchReader`) from closed segments read through the
//!   clean's own descriptors; they are copied by batch framing only, and the
//!   segment's `append` parses every header again to build its indexes.
//! * Every read and write is checked for cancellation and throttled.
//! * Writeback starts behind the writes: every [`WRITE_BEHIND`] bytes
//!   appended, the kernel is asked to start writing them to disk without
//!   waiting for the writes to complete (`sync_file_range(
//!   SYNC_FILE_RANGE_WRITE)`; the call itself may block briefly while the
//!   device's queue is full), so the group's one
//!   fsync at the end waits for the tail only, not for the whole segment
//!   while the clean stands still. It is a hint for speed: durability still
//!   comes from that fsync alone, before the swap.

use std::path::Path;

use super::error::CleanerError;
use super::io_context::IoContext;
use super::source_segment::SourceSegment;
use super::stats::CleanerStats;
use crate::log::error::{BatchError, LogError};
use crate::log::record_batch::{framed_batch_size as batch_size, LOG_OVERHEAD};
use crate::log::segment::{LogSegment, SegmentConfig, CLEANED_SUFFIX};

/// Bytes appended to a `.cleaned` segment between two requests to start
/// their writeback: large enough for big sequential writes, small enough
/// that the disk works while the clean reads on.
const WRITE_BEHIND: u64 = 8 << 20;

/// Per-group output: the `.cleaned` segment once the group changes, and the
/// write buffer in front of it.
pub(super) struct GroupWriter<'a> {
    pub(super) dir: &'a Path,
    pub(super) base_offset: i64,
    pub(super) config: SegmentConfig,
    pub(super) now_ms: i64,
    pub(super) flush_at: usize,
    pub(super) io: &'a IoContext<'a>,
    /// `None` while everything read from the group was forwarded unchanged.
    pub(super) segment: Option<LogSegment>,
    /// Where in the segment writeback was last asked to start up to.
    pub(super) written_back: u64,
}

impl GroupWriter<'_> {
    /// Whether the group has changed (its `.cleaned` segment exists).
    pub(super) fn started(&self) -> bool {
        self.segment.is_some()
    }

    /// Write `buf` to the segment when it reached `flush_at` (or `force`).
    ///
    /// # Errors
    /// Cancellation, I/O errors.
    pub(super) fn maybe_flush(
        &mut self,
        buf: &mut Vec<u8>,
        stats: &mut CleanerStats,
        force: bool,
    ) -> Result<(), CleanerError> {
        if buf.is_empty() || (!force && buf.len() < self.flush_at) {
            return Ok(());
        }
        let Some(segment) = self.segment.as_mut() else {
            // Unreachable by construction: nothing is buffered before the
            // group starts. Refuse rather than lose the bytes.
            return Err(CleanerError::Log(LogError::Corrupt {
                path: self.dir.to_path_buf(),
                position: 0,
                reason: "cleaned output buffered before its segment exists".into(),
            }));
        };
        self.io.before_io(buf.len())?;
        segment.append(buf)?;
        stats.bytes_written += buf.len() as u64;
        buf.clear();
        self.write_behind();
        Ok(())
    }

    /// Ask the kernel to start writing back what was appended since the
    /// last request, once that is [`WRITE_BEHIND`] bytes or more.
    fn write_behind(&mut self) {
        let Some(segment) = &self.segment else { return };
        let size = segment.size();
        if size - self.written_back < WRITE_BEHIND {
            return;
        }
        #[cfg(target_os = "linux")]
        if let (Ok(offset), Ok(len)) = (
            libc::off_t::try_from(self.written_back),
            libc::off_t::try_from(size - self.written_back),
        ) {
            use std::os::unix::io::AsRawFd;
            // SAFETY: sync_file_range reads no memory of ours; the descriptor
            // is the open segment's. A hint only: a failure changes nothing
            // but speed (the fsync before the swap reports any I/O error).
            let _ = unsafe {
                libc::sync_file_range(
                    segment.file().as_raw_fd(),
                    offset,
                    len,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
        }
        self.written_back = size;
    }

    /// Create the `.cleaned` segment and copy into it the unchanged prefix:
    /// every segment of `group` before `upto.0` whole, and segment `upto.0`
    /// up to position `upto.1`. `scratch` is a free buffer to read through.
    ///
    /// # Errors
    /// Cancellation, I/O errors, bytes that no longer frame batches.
    pub(super) fn start(
        &mut self,
        group: &[SourceSegment],
        upto: (usize, u64),
        scratch: &mut Vec<u8>,
        stats: &mut CleanerStats,
    ) -> Result<(), CleanerError> {
        if self.segment.is_some() {
            return Ok(());
        }
        let suffix = CLEANED_SUFFIX;
        let seg = LogSegment::create(self.dir, self.base_offset, self.config, suffix, self.now_ms)?;
        self.segment = Some(seg);
        for (i, source) in group.iter().enumerate().take(upto.0 + 1) {
            let end = if i == upto.0 { upto.1 } else { source.snapshot.size };
            self.copy_unchanged(source, end, scratch, stats)?;
        }
        Ok(())
    }

    /// Append bytes `[0, end)` of `source` (whole batches) to the segment.
    fn copy_unchanged(
        &mut self,
        source: &SourceSegment,
        end: u64,
        buf: &mut Vec<u8>,
        stats: &mut CleanerStats,
    ) -> Result<(), CleanerError> {
        use std::os::unix::fs::FileExt;
        if buf.len() < self.flush_at {
            buf.resize(self.flush_at, 0);
        }
        let file = source.file()?;
        let mut pos = 0u64;
        while pos < end {
            let want = usize::try_from(end - pos).unwrap_or(usize::MAX).min(buf.len());
            self.io.before_io(want)?;
            file.read_exact_at(&mut buf[..want], pos).map_err(LogError::io(&source.path))?;
            let corrupt = |e: BatchError| CleanerError::Batch {
                path: source.path.clone(),
                position: pos,
                source: e,
            };
            let whole = match whole_batches(&buf[..want]) {
                Ok(0) => {
                    // One batch larger than the buffer: grow to it (bounded).
                    let size = batch_size(&buf[..want]).map_err(corrupt)?;
                    let rest = usize::try_from(end - pos).unwrap_or(usize::MAX);
                    if size > self.io.grow_limit || size > rest {
                        let limit = self.io.grow_limit.min(rest);
                        return Err(corrupt(BatchError::TooLarge { size, limit }));
                    }
                    buf.resize(size, 0);
                    stats.buffer_grows += 1;
                    continue;
                }
                Ok(n) => n,
                Err(e) => return Err(corrupt(e)),
            };
            let segment = self.segment.as_mut().ok_or_else(|| {
                CleanerError::Log(LogError::Corrupt {
                    path: source.path.clone(),
                    position: pos,
                    reason: "no cleaned segment to copy into".into(),
                })
            })?;
            segment.append(&buf[..whole])?;
            self.io.before_io(whole)?;
            stats.bytes_written += whole as u64;
            stats.unchanged_bytes_copied += whole as u64;
            pos += whole as u64;
            self.write_behind();
        }
        Ok(())
    }
}

/// How many leading bytes of `bytes` are whole batches (0 when the first is cut off).
fn whole_batches(bytes: &[u8]) -> Result<usize, BatchError> {
    let mut at = 0;
    while bytes.len() - at >= LOG_OVERHEAD {
        let size = batch_size(&bytes[at..])?;
        if size > bytes.len() - at {
            break;
        }
        at += size;
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_batches_stops_at_the_first_cut_batch() {
        let mut bytes = Vec::new();
        for size in [61usize, 100, 70] {
            let mut b = vec![0u8; size];
            b[8..12].copy_from_slice(&((size - LOG_OVERHEAD) as i32).to_be_bytes());
            bytes.extend_from_slice(&b);
        }
        assert_eq!(whole_batches(&bytes).unwrap(), 231);
        assert_eq!(whole_batches(&bytes[..200]).unwrap(), 161);
        assert_eq!(whole_batches(&bytes[..60]).unwrap(), 0);
        assert_eq!(batch_size(&bytes[61..]).unwrap(), 100);
        let mut bad = bytes.clone();
        bad[8..12].copy_from_slice(&3i32.to_be_bytes());
        assert!(matches!(whole_batches(&bad), Err(BatchError::InvalidLength(3))));
    }
}

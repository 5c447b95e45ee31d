//! The segments one clean reads, as they were when it started: taken under
//! the log's read lock, each with its own duplicated file descriptor, so the
//! clean reads without the lock and keeps reading if a segment is renamed or
//! deleted meanwhile. Also how they are grouped for the recopy (Kafka's
//! `groupSegmentsBySize`).
//!
//! Invariants:
//! * Each [`SourceSegment`] remembers the size and base offset it was read at
//!   ([`SegmentSnapshot`]); the swap refuses a segment that has changed since.
//! * Groups are adjacent, cover the segments given in order, and each stays
//!   within `segment.bytes`, `segment.index.bytes` and a 32-bit relative
//!   offset range, so its cleaned output is a valid segment.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use super::error::CleanerError;
use super::log_to_clean::LogToClean;
use super::store_segment_source::{FetchedSegment, StoreSegmentSource};
use crate::log::compaction_strategy::CompactionStrategy;
use crate::log::error::LogError;
use crate::log::producer_state::LastRecord;
use crate::log::segment::{LogSegment, SegmentConfig};
use crate::log::topic_partition::is_coordinator_topic;
use crate::log::transaction_index::AbortedTxn;
use crate::log::{Log, LogConfig, SegmentSnapshot};

/// One segment as the clean sees it, read through its own descriptor.
#[derive(Debug)]
pub(super) struct SourceSegment {
    pub(super) snapshot: SegmentSnapshot,
    pub(super) next_offset: i64,
    pub(super) bytes: SegmentBytes,
    /// The file's path (a store segment: its object's key, for errors).
    pub(super) path: PathBuf,
    pub(super) offset_index_bytes: usize,
    pub(super) time_index_bytes: usize,
    pub(super) modified: Option<std::time::SystemTime>,
    /// Where the first dirty offset's batch starts, for the segment holding it.
    pub(super) dirty_position: Option<u64>,
    /// The entries of its `.txnindex` (a closed segment's never change).
    pub(super) aborted_txns: Vec<AbortedTxn>,
}

/// Where a segment's bytes are read from.
#[derive(Debug)]
pub(super) enum SegmentBytes {
    /// A local segment: a descriptor duplicated under the log's read lock.
    Local(File),
    /// A segment only in the object store, fetched when the clean reads it
    /// and let go once read ([`SourceSegment::release`]), so a clean holds
    /// one group of them at a time (`store_segments.rs`).
    Store {
        source: Arc<dyn StoreSegmentSource>,
        index: usize,
        /// Shared with the reads in progress: a copy of an unchanged
        /// prefix reads the segment while its recopy still holds it.
        fetched: Mutex<Option<Arc<FetchedSegment>>>,
    },
}

/// A segment's file for reading: the local descriptor, or a fetched one.
pub(super) enum SegmentFile<'a> {
    Local(&'a File),
    Store(Arc<FetchedSegment>),
}

impl std::ops::Deref for SegmentFile<'_> {
    type Target = File;

    fn deref(&self) -> &File {
        match self {
            Self::Local(f) => f,
            Self::Store(f) => &f.file,
        }
    }
}

/// A log as one clean found it.
#[derive(Debug)]
pub(super) struct LogSnapshot {
    pub(super) dir: PathBuf,
    pub(super) config: Arc<LogConfig>,
    /// What the `.cleaned` segments are created with.
    pub(super) segment_config: SegmentConfig,
    pub(super) segments: Vec<SourceSegment>,
    /// Nothing at or past this offset is mapped or changed: the first
    /// uncleanable offset, never past the active segment's base nor the
    /// first unstable offset.
    pub(super) upper: i64,
    /// What each producer with state needs kept (its last data batch, else
    /// its current epoch's marker), from the producer state at the snapshot.
    pub(super) last_records: HashMap<i64, LastRecord>,
    /// Segments below the local start are only in the object store, where
    /// no clean reaches: older copies of a key may live there, so no
    /// tombstone or marker may go (its delete horizon never passes).
    pub(super) older_segments_in_store: bool,
    /// Which copy of a key this clean keeps: the topic's
    /// `sediment.compaction.strategy`, except that coordinator topics are
    /// always ranked by offset (their coordinators replay them in order).
    pub(super) strategy: CompactionStrategy,
    /// The log start offset: records below it are still in the first
    /// segment's bytes but no reader sees them, and under a version
    /// strategy they never outrank a visible copy.
    pub(super) log_start_offset: i64,
}

impl SourceSegment {
    /// `seg` through a descriptor of its own, with where `first_dirty`'s
    /// batch starts when `seg` holds it.
    ///
    /// # Errors
    /// I/O errors duplicating the descriptor or finding the batch.
    pub(super) fn of(seg: &LogSegment, first_dirty: i64) -> Result<Self, CleanerError> {
        let file = seg.file().try_clone().map_err(LogError::io(seg.log_path()))?;
        advise_sequential(&file);
        let dirty_position = if seg.base_offset() <= first_dirty && seg.next_offset() > first_dirty
        {
            seg.translate_offset(first_dirty)?.map(|p| p.position)
        } else {
            None
        };
        Ok(Self {
            snapshot: SegmentSnapshot { base_offset: seg.base_offset(), size: seg.size() },
            next_offset: seg.next_offset(),
            modified: file.metadata().ok().and_then(|m| m.modified().ok()),
            bytes: SegmentBytes::Local(file),
            path: seg.log_path(),
            offset_index_bytes: seg.offset_index().size_in_bytes(),
            time_index_bytes: seg.time_index().size_in_bytes(),
            dirty_position,
            aborted_txns: seg.txn_index().all_aborted_txns()?,
        })
    }

    /// Segment `index` of `source`, only in the object store: known by its
    /// manifest entry, fetched when first read. Its aborted transactions are
    /// read now (a fetch, only when its `.txnindex` has entries).
    ///
    /// # Errors
    /// The store's error reading the `.txnindex`.
    pub(super) fn in_store(
        source: &Arc<dyn StoreSegmentSource>,
        index: usize,
    ) -> Result<Self, CleanerError> {
        let meta = &source.segments()[index];
        Ok(Self {
            snapshot: SegmentSnapshot { base_offset: meta.base_offset, size: meta.size },
            next_offset: meta.next_offset,
            aborted_txns: source.aborted_txns(index).map_err(CleanerError::Store)?,
            bytes: SegmentBytes::Store {
                source: Arc::clone(source),
                index,
                fetched: Mutex::new(None),
            },
            path: PathBuf::from(&meta.name),
            offset_index_bytes: meta.offset_index_bytes,
            time_index_bytes: meta.time_index_bytes,
            modified: None,
            // The map skips batches below the first dirty offset anyway.
            dirty_position: None,
        })
    }

    /// The file to read, fetched first when the segment is in the store.
    ///
    /// # Errors
    /// The store's error fetching it.
    pub(super) fn file(&self) -> Result<SegmentFile<'_>, CleanerError> {
        match &self.bytes {
            SegmentBytes::Local(f) => Ok(SegmentFile::Local(f)),
            SegmentBytes::Store { source, index, fetched } => {
                let mut fetched = fetched.lock();
                let segment = match &*fetched {
                    Some(segment) => Arc::clone(segment),
                    None => {
                        let segment = source.fetch(*index).map_err(CleanerError::Store)?;
                        advise_sequential(&segment.file);
                        Arc::clone(fetched.insert(Arc::new(segment)))
                    }
                };
                Ok(SegmentFile::Store(segment))
            }
        }
    }

    /// Let a fetched store segment go (a later read fetches it again), so
    /// the read cache may evict it; nothing for a local segment.
    pub(super) fn release(&self) {
        if let SegmentBytes::Store { fetched, .. } = &self.bytes {
            fetched.lock().take();
        }
    }
}

impl LogSnapshot {
    /// Snapshot `log` (under its read lock) for cleaning `to_clean`.
    ///
    /// # Errors
    /// `NotCompacted` if the log's policy no longer compacts; I/O errors
    /// duplicating a descriptor or finding the first dirty batch.
    pub(super) fn take(log: &Log, to_clean: &LogToClean) -> Result<Self, CleanerError> {
        if !log.config().compact {
            let partition = to_clean.topic_partition.to_string();
            return Err(CleanerError::NotCompacted { partition });
        }
        let active_base = log.active_segment().base_offset();
        // The first unstable offset again, under this lock: nothing of an open
        // transaction is judged, whatever the caller measured.
        let fuo = log.first_unstable_offset().unwrap_or(i64::MAX);
        let upper = to_clean.first_uncleanable_offset.min(active_base).min(fuo);
        let first_dirty = to_clean.first_dirty_offset;
        let mut segments = Vec::with_capacity(log.segments().len());
        for seg in log.segments() {
            segments.push(SourceSegment::of(seg, first_dirty)?);
        }
        Ok(Self {
            dir: log.dir().to_path_buf(),
            config: Arc::clone(log.config()),
            segment_config: log.segment_config_for_cleaning(),
            segments,
            upper,
            last_records: log.producer_state().last_records_of_active_producers(),
            older_segments_in_store: log.local_log_start_offset() > log.log_start_offset(),
            strategy: strategy_for(&to_clean.topic_partition.topic, log.config()),
            log_start_offset: log.log_start_offset(),
        })
    }

    /// The aborted transactions a clean walks with: every `.txnindex` entry
    /// of the snapshot (the walk reaches only those whose data starts in the
    /// range it reads, as Kafka's `collectAbortedTransactions` over the
    /// cleaned range finds them) and those the caller adds.
    pub(super) fn aborted_transactions(&self, to_clean: &LogToClean) -> Vec<AbortedTxn> {
        let from_index = self.segments.iter().flat_map(|s| s.aborted_txns.iter().copied());
        from_index.chain(to_clean.aborted_transactions.iter().copied()).collect()
    }
}

/// The strategy a clean of `topic` follows.
pub(super) fn strategy_for(topic: &str, config: &LogConfig) -> CompactionStrategy {
    if is_coordinator_topic(topic) {
        CompactionStrategy::Offset
    } else {
        config.compaction_strategy.clone()
    }
}

/// Tell the kernel the clean reads `file` front to back (a larger
/// readahead window; the pages read are the first to go). Advice only: a
/// failure changes nothing but speed, so it is ignored.
fn advise_sequential(file: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: posix_fadvise reads no memory of ours; the descriptor is open
    // for the duration of the call, and the advice only affects caching.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
}

/// Group adjacent segments so that each group's total size stays within
/// `max_size` (`segment.bytes`), its index sizes within `max_index_size`
/// (`segment.index.bytes`) and its offsets within a 32-bit relative range.
/// Kafka's `groupSegmentsBySize`; the sizes are the originals', an upper bound
/// of the cleaned output.
pub(super) fn group_segments(
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::cleaner::cleaned_files;
    use super::*;

    fn seg(base: i64, next: i64, size: u64, index: usize) -> SourceSegment {
        SourceSegment {
            snapshot: SegmentSnapshot { base_offset: base, size },
            next_offset: next,
            bytes: SegmentBytes::Local(File::open("/dev/null").unwrap()),
            path: PathBuf::from("/dev/null"),
            offset_index_bytes: index,
            time_index_bytes: index,
            modified: None,
            dirty_position: None,
            aborted_txns: Vec::new(),
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
        let files = cleaned_files(Path::new("/d/00000000000000000005.log.cleaned"));
        assert_eq!(files[1], PathBuf::from("/d/00000000000000000005.index.cleaned"));
        assert_eq!(files[3], PathBuf::from("/d/00000000000000000005.txnindex.cleaned"));
    }
}

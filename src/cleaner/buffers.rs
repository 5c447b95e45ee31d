//! The cleaner's buffers (Kafka's dedupe buffer and I/O buffers): the
//! [`OffsetMap`] and what the recopy derives from it, and the read, write and
//! inflate buffers, all reused from clean to clean. The map pass
//! (`build_offset_map.rs`) and the recopy (`clean_into.rs`) work on them;
//! the `Cleaner` lends them out for each clean and nothing here knows it.
//!
//! Memory stays bounded: the map and the recopy's bits share the thread's
//! `dedupe_buffer_size`, and buffers that grew for one large batch shrink
//! back to `io_buffer_size` after each group.

use std::ops::Range;

use super::batch_writer::WriterScratch;
use super::mapped_batches::MappedBatches;
use super::newest_offsets::NewestOffsets;
use super::offset_map::{KeyHash, KeyHasher, OffsetMap, OffsetMapError};

/// The most records of one batch whose map lookups the recopy batches
/// (`MapLookup`): a batch with more, which only a compressed batch of many
/// tiny records can be, is looked up record by record, so the per-record
/// buffers stay small whatever a batch inflates to.
pub(super) const MAX_BATCHED_LOOKUPS: usize = 4096;

/// Reusable I/O memory of a cleaner.
#[derive(Debug, Default)]
pub(super) struct Buffers {
    pub(super) read: Vec<u8>,
    pub(super) write: Vec<u8>,
    pub(super) inflated: Vec<u8>,
    pub(super) writer: WriterScratch,
    pub(super) retained: Vec<Range<usize>>,
    pub(super) hashes: Vec<(KeyHash, i64)>,
    /// The versions of `hashes`' records, in the same order, when the
    /// compaction strategy ranks by version.
    pub(super) versions: Vec<i64>,
    /// The recopy's map answers for one batch: per record, whether it is its
    /// key's newest, and which records were looked up.
    pub(super) newest_by_map: Vec<bool>,
    pub(super) looked_up: Vec<usize>,
}

/// The dedupe state and buffers of one cleaner.
#[derive(Debug)]
pub(super) struct CleanerBuffers {
    pub(super) map: OffsetMap,
    /// Which mapped dirty offsets are their key's newest (from the map).
    pub(super) newest: NewestOffsets,
    /// Where the map pass found each plain batch, so the recopy can drop
    /// superseded ones unread.
    pub(super) mapped: MappedBatches,
    /// The map pass's fingerprints, many keys at a time.
    pub(super) key_hasher: KeyHasher,
    pub(super) bufs: Buffers,
    /// The budget of the map and the recopy's bits together.
    pub(super) dedupe_buffer_size: usize,
    /// The size each of the read and write buffers starts at and shrinks to.
    pub(super) io_buffer_size: usize,
}

impl CleanerBuffers {
    /// An offset map of `dedupe_buffer_size` bytes at `load_factor`, and
    /// empty buffers.
    ///
    /// # Errors
    /// A dedupe budget too small for one entry, or a bad load factor.
    pub(super) fn new(
        dedupe_buffer_size: usize,
        load_factor: f64,
        io_buffer_size: usize,
    ) -> Result<Self, OffsetMapError> {
        Ok(Self {
            map: OffsetMap::new(dedupe_buffer_size, load_factor)?,
            newest: NewestOffsets::default(),
            mapped: MappedBatches::default(),
            key_hasher: KeyHasher::default(),
            bufs: Buffers::default(),
            dedupe_buffer_size,
            io_buffer_size,
        })
    }

    /// Build what the recopy reads a mapped record's fate from: one bit per
    /// mapped offset set from the map, in what the budget leaves beside the
    /// map's table, so the recopy hashes no mapped key again. The map pass's
    /// record of the batches is kept only beside the bits, within the
    /// budget: with it the recopy drops runs of superseded batches unread.
    pub(super) fn prepare_recopy(&mut self, first_dirty: i64, end: i64) {
        let spare = self.dedupe_buffer_size.saturating_sub(self.map.memory_bytes());
        let built = self.newest.build(&self.map, first_dirty, end, spare);
        if !built || self.newest.memory_bytes() + self.mapped.memory_bytes() > spare {
            self.mapped.give_up();
        }
    }

    /// Give back what [`CleanerBuffers::prepare_recopy`] and the map pass built.
    pub(super) fn finish_recopy(&mut self) {
        self.newest.clear();
        self.mapped.clear();
    }

    /// Shrink buffers that grew for a large batch back to their configured size.
    pub(super) fn restore_buffers(&mut self) {
        let size = self.io_buffer_size;
        for buf in [&mut self.bufs.read, &mut self.bufs.write, &mut self.bufs.inflated] {
            if buf.capacity() > size {
                buf.truncate(size);
                buf.shrink_to(size);
            }
        }
        self.bufs.writer.shrink_to(size);
        // Per-record buffers: one batch of many small records grew them.
        let records = MAX_BATCHED_LOOKUPS;
        self.bufs.retained.shrink_to(records);
        self.bufs.hashes.shrink_to(records);
        self.bufs.versions.shrink_to(records);
        self.bufs.newest_by_map.shrink_to(records);
        self.bufs.looked_up.shrink_to(records);
    }

    /// The read buffer, at least `io_buffer_size` long; the caller puts it back.
    pub(super) fn take_read_buffer(&mut self) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.bufs.read);
        if buf.len() < self.io_buffer_size {
            buf.resize(self.io_buffer_size, 0);
        }
        buf
    }
}

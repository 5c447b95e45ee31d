//! Step 1 of a clean, the map (Kafka's `buildOffsetMap`): walk the dirty
//! region batch by batch and record, for each key, the offset of its newest
//! record in the [`OffsetMap`] — under a versioned compaction strategy, the
//! offset and version of its highest-ranked record (version, then offset).
//!
//! Invariants:
//! * The mapped range `[first dirty, end)` ends at a batch boundary: the walk
//!   stops before the first batch whose new keys would overfill the map, so
//!   every key of a mapped batch is in the map. Its end is the new checkpoint.
//! * A map too small for even the first batch is an error
//!   ([`CleanerError::MapTooSmall`]), never an empty range that loops.
//! * Control batches and aborted transactions' records are not mapped (an
//!   aborted value must not shadow an older committed one).
//! * Nothing at or past the snapshot's upper bound is read.
//!
//! [`OffsetMap`]: super::OffsetMap

use super::buffers::CleanerBuffers;
use super::error::CleanerError;
use super::io_context::{IoContext, READAHEAD};
use super::log_to_clean::LogToClean;
use super::newest_offsets::NewestOffsets;
use super::offset_map::KeyLanes;
use super::source_segment::{LogSnapshot, SourceSegment};
use super::stats::CleanerStats;
use super::transactions::{marker_type, CleanedTransactionMetadata};
use crate::log::batch_reader::BatchReader;
use crate::log::compaction_strategy::CompactionStrategy;
use crate::log::error::BatchError;
use crate::log::record_batch::{self, BatchHeader, RecordIter};

/// Where the walk of the dirty range is.
struct MapProgress<'a> {
    io: &'a IoContext<'a>,
    /// The first dirty offset.
    start: i64,
    /// End of the mapped range so far (a batch boundary).
    end: i64,
    upper: i64,
    txn: CleanedTransactionMetadata,
    stats: &'a mut CleanerStats,
    /// How copies of a key rank (`Offset`: no versions are read).
    strategy: &'a CompactionStrategy,
}

impl CleanerBuffers {
    /// Map the dirty range batch by batch until the map is full or the range
    /// ends; returns the end of the mapped range (a batch boundary).
    ///
    /// # Errors
    /// I/O and corruption errors, a map too small for one batch, cancellation.
    pub(super) fn build_offset_map(
        &mut self,
        snapshot: &LogSnapshot,
        to_clean: &LogToClean,
        io: &IoContext<'_>,
        stats: &mut CleanerStats,
    ) -> Result<i64, CleanerError> {
        self.map.set_versioned(snapshot.strategy.is_versioned())?;
        self.map.clear();
        self.mapped.clear();
        let start = to_clean.first_dirty_offset;
        // The walk starts at the first dirty offset: an aborted transaction
        // whose marker is before it is over (Kafka's `collectAbortedTransactions`
        // from there), and would otherwise stay open for its producer.
        let mut aborted = snapshot.aborted_transactions(to_clean);
        aborted.retain(|t| t.last_offset >= start);
        let mut progress = MapProgress {
            io,
            start,
            end: start,
            upper: snapshot.upper,
            txn: CleanedTransactionMetadata::new(aborted),
            stats,
            strategy: &snapshot.strategy,
        };
        for seg in &snapshot.segments {
            if seg.next_offset <= start || seg.snapshot.base_offset >= snapshot.upper {
                continue;
            }
            let stop = self.map_segment(&mut progress, seg);
            self.mapped.end_run();
            // A store segment is fetched again by the recopy, if it needs it.
            seg.release();
            if stop? {
                break;
            }
            // A whole segment mapped: the next dirty offset is where the next
            // segment's data starts.
            progress.end = progress.end.max(seg.next_offset.min(snapshot.upper));
        }
        Ok(progress.end)
    }

    /// Map the batches of one segment from the dirty position; `true` when
    /// the walk must stop here (the map is full or the range ends).
    fn map_segment(
        &mut self,
        progress: &mut MapProgress<'_>,
        seg: &SourceSegment,
    ) -> Result<bool, CleanerError> {
        let from = seg.dirty_position.unwrap_or(0);
        let io = progress.io;
        let file = seg.file()?;
        let mut buf = self.take_read_buffer();
        let mut reader =
            BatchReader::new(&file, &seg.path, from..seg.snapshot.size, io.grow_limit, &mut buf)
                .with_hook(io)
                .with_readahead(READAHEAD);
        let result =
            (|| -> Result<bool, CleanerError> {
                while let Some((position, batch)) = reader.next_batch()? {
                    let header = BatchHeader::parse(batch).map_err(|source| {
                        CleanerError::Batch { path: seg.path.clone(), position, source }
                    })?;
                    if header.last_offset() < progress.start {
                        continue;
                    }
                    if header.last_offset() >= progress.upper {
                        return Ok(true);
                    }
                    let hashed = self.collect_key_hashes(progress, &header, batch);
                    hashed.map_err(|source| CleanerError::Batch {
                        path: seg.path.clone(),
                        position,
                        source,
                    })?;
                    if !self.put_batch(progress, &header)? {
                        return Ok(true);
                    }
                    self.note_mapped_batch(progress, seg, (position, batch.len()), &header);
                }
                Ok(false)
            })();
        progress.stats.map_bytes_read += reader.bytes_read();
        if reader.grew() {
            progress.stats.buffer_grows += 1;
        }
        self.bufs.read = buf;
        result
    }

    /// Record where a mapped batch is (`mapped_batches.rs`) if it is plain
    /// data whose records were all mapped, while the record fits in the budget beside the map and the
    /// bits the recopy will need; otherwise end the run, or give up.
    fn note_mapped_batch(
        &mut self,
        progress: &MapProgress<'_>,
        seg: &SourceSegment,
        (position, size): (u64, usize),
        header: &BatchHeader,
    ) {
        // Only a batch the read path would drop whole when none of its
        // records is newest: keyed records only (a key-less one is counted
        // when read), all in the range, and at least one (an empty batch is
        // forwarded as it is).
        let keyed = self.bufs.hashes.len();
        let plain = !header.is_control() && !header.is_transactional();
        if !plain || keyed == 0 || i32::try_from(keyed).ok() != Some(header.records_count) {
            self.mapped.end_run();
            return;
        }
        if !self.mapped.is_recording() {
            return;
        }
        let bits = NewestOffsets::bytes_for(progress.end - progress.start);
        let needed = self.mapped.memory_bytes_after_push() + self.map.memory_bytes() + bits;
        if needed > self.dedupe_buffer_size {
            self.mapped.give_up();
            return;
        }
        let offsets = (header.base_offset, header.last_offset());
        let records = u32::try_from(header.records_count).unwrap_or(0);
        self.mapped.push_plain(seg.snapshot.base_offset, position, size, offsets, records);
    }

    /// The key hashes of a batch's records in the dirty range, with their
    /// offsets, into the hash buffer, and under a versioned strategy their
    /// versions, in the same order, into the version buffer (none for
    /// control and aborted batches).
    fn collect_key_hashes(
        &mut self,
        progress: &mut MapProgress<'_>,
        header: &BatchHeader,
        batch: &[u8],
    ) -> Result<(), BatchError> {
        self.bufs.hashes.clear();
        self.bufs.versions.clear();
        let limit = progress.io.decompress_limit();
        if header.is_control() {
            // The marker ends its transaction for this walk: the producer's
            // later batches belong to another one.
            let marker = marker_type(header, batch, &mut self.bufs.inflated, limit)?;
            progress.txn.on_control_batch_read(header, marker);
            return Ok(());
        }
        if progress.txn.on_batch_read(header) {
            return Ok(());
        }
        let payload = record_batch::records_bytes(header, batch, &mut self.bufs.inflated, limit)?;
        // Keys are fingerprinted HASH_LANES at a time (SIMD lanes).
        let mut lanes = KeyLanes::new(self.key_hasher);
        let versioned = progress.strategy.is_versioned();
        for rec in RecordIter::new(payload, header.records_count) {
            let rec = rec?;
            let offset = header.base_offset + rec.offset_delta as i64;
            if let (Some(key), true) = (rec.key, offset >= progress.start) {
                lanes.push(key, offset, &mut self.bufs.hashes);
                if versioned {
                    self.bufs.versions.push(progress.strategy.version(header, &rec));
                }
            }
        }
        lanes.finish(&mut self.bufs.hashes);
        Ok(())
    }

    /// Put the collected hashes of a batch in the map, unless its new keys
    /// would overfill it (`false`: the mapped range ends before this batch).
    fn put_batch(
        &mut self,
        progress: &mut MapProgress<'_>,
        header: &BatchHeader,
    ) -> Result<bool, CleanerError> {
        // Counting is only needed when the batch could overflow the map.
        if self.bufs.hashes.len() > self.map.remaining() {
            let new_keys =
                self.bufs.hashes.iter().filter(|(h, _)| !self.map.contains_hash(h)).count();
            if new_keys > self.map.remaining() {
                if progress.end == progress.start {
                    return Err(CleanerError::MapTooSmall {
                        partition: progress.io.partition.to_string(),
                        offset: header.base_offset,
                        keys: new_keys,
                        capacity: self.map.max_entries(),
                    });
                }
                return Ok(false);
            }
        }
        // The batch's slots are fetched from memory together, not one by one.
        for (hash, _) in &self.bufs.hashes {
            self.map.prefetch(hash);
        }
        if self.map.is_versioned() {
            let versions = &self.bufs.versions;
            for ((hash, offset), version) in self.bufs.hashes.iter().zip(versions) {
                self.map.put_versioned(hash, *offset, *version)?;
            }
        } else {
            for (hash, offset) in &self.bufs.hashes {
                self.map.put_hash(hash, *offset)?;
            }
        }
        progress.stats.map_messages_read += header.records_count.max(0) as u64;
        progress.end = header.next_offset();
        Ok(true)
    }
}

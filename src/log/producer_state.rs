//! Idempotent-producer state of one partition (Kafka's `ProducerStateManager`).
//!
//! For every producer id the partition keeps the producer's epoch and the
//! metadata of its last five batches (first/last sequence and offset). A batch
//! is checked before it is appended:
//! * an older epoch than the one recorded is fenced (`InvalidProducerEpoch`);
//! * a batch whose sequences equal one of the cached five is a retry of an
//!   acknowledged append: it is not written again and the producer gets the
//!   original offsets back;
//! * otherwise its first sequence must follow the last one (wrapping at
//!   i32::MAX), or be 0 with a new epoch; anything else is
//!   `OutOfOrderSequence`. A producer the partition has never seen may start at
//!   any sequence, as in Kafka (its state may have been removed by retention).
//!
//! The state is derived from the log itself: after a restart the loader
//! rebuilds it by reading the batch headers (on `Log::open`), so it survives
//! crashes without a snapshot file of its own.

use std::collections::{HashMap, VecDeque};

pub use super::error::ProducerError;
use super::record_batch::BatchHeader;

/// Batches remembered per producer, as in Kafka (`max.in.flight` ≤ 5).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

#[derive(Debug, Clone, Default)]
struct ProducerStateEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
}

/// The outcome of checking a batch's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Not idempotent, or the next batch in order: append it.
    Append,
    /// A retry of a batch already in the log.
    Duplicate(BatchMetadata),
}

#[derive(Debug, Default, Clone)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerStateEntry>,
}

fn last_sequence(header: &BatchHeader) -> i32 {
    // Sequences wrap at i32::MAX back to 0, as Kafka's DefaultRecordBatch does.
    let last = header.base_sequence as i64 + header.last_offset_delta as i64;
    if last > i32::MAX as i64 {
        (last - i32::MAX as i64 - 1) as i32
    } else {
        last as i32
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Producers with state.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The highest producer id seen, to keep newly issued ids above it.
    pub fn max_producer_id(&self) -> Option<i64> {
        self.producers.keys().copied().max()
    }

    /// Check a batch a producer sent before appending it.
    ///
    /// # Errors
    /// A fenced epoch or a sequence gap.
    pub fn check(&self, header: &BatchHeader) -> Result<SequenceCheck, ProducerError> {
        if header.producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        let pid = header.producer_id;
        if header.base_sequence < 0 {
            return Err(ProducerError::InvalidSequence {
                producer_id: pid,
                first_seq: header.base_sequence,
            });
        }
        let Some(entry) = self.producers.get(&pid) else {
            return Ok(SequenceCheck::Append);
        };
        if header.producer_epoch < entry.epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id: pid,
                epoch: header.producer_epoch,
                current: entry.epoch,
            });
        }
        let first_seq = header.base_sequence;
        let last_seq = last_sequence(header);
        if header.producer_epoch == entry.epoch {
            if let Some(dup) =
                entry.batches.iter().find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
            {
                return Ok(SequenceCheck::Duplicate(*dup));
            }
            if let Some(last) = entry.batches.back() {
                if !in_sequence(last.last_seq, first_seq) {
                    return Err(ProducerError::OutOfOrderSequence {
                        producer_id: pid,
                        epoch: header.producer_epoch,
                        first_seq,
                        expected: last.last_seq as i64 + 1,
                    });
                }
            }
        } else if first_seq != 0 {
            // A bumped epoch starts its sequences again at 0.
            return Err(ProducerError::OutOfOrderSequence {
                producer_id: pid,
                epoch: header.producer_epoch,
                first_seq,
                expected: 0,
            });
        }
        Ok(SequenceCheck::Append)
    }

    /// Record a batch that is now in the log (appended, or read back on load).
    /// `header.base_offset` must be its final offset.
    pub fn update(&mut self, header: &BatchHeader) {
        if header.producer_id < 0 || header.base_sequence < 0 {
            return;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == NUM_BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMetadata {
            first_seq: header.base_sequence,
            last_seq: last_sequence(header),
            first_offset: header.base_offset,
            last_offset: header.base_offset + header.last_offset_delta as i64,
            max_timestamp: header.max_timestamp,
        });
    }

    /// Forget every batch below `offset` (after truncation or log-start moves
    /// past them); a producer whose batches are all gone keeps its epoch.
    pub fn truncate_below(&mut self, offset: i64) {
        for entry in self.producers.values_mut() {
            entry.batches.retain(|b| b.last_offset >= offset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, count: i32, base_offset: i64) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: count,
        }
    }

    #[test]
    fn duplicates_gaps_and_fencing() {
        let mut s = ProducerStateManager::new();
        // An unknown producer may start anywhere.
        assert_eq!(s.check(&header(7, 0, 10, 2, 0)), Ok(SequenceCheck::Append));
        s.update(&header(7, 0, 10, 2, 0));
        assert_eq!(s.check(&header(7, 0, 12, 3, 2)), Ok(SequenceCheck::Append));
        s.update(&header(7, 0, 12, 3, 2));
        match s.check(&header(7, 0, 10, 2, 99)) {
            Ok(SequenceCheck::Duplicate(m)) => assert_eq!((m.first_offset, m.last_offset), (0, 1)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            s.check(&header(7, 0, 16, 1, 5)),
            Err(ProducerError::OutOfOrderSequence { expected: 15, .. })
        ));
        // A new epoch restarts at 0; the old epoch is fenced afterwards.
        assert!(matches!(
            s.check(&header(7, 1, 3, 1, 5)),
            Err(ProducerError::OutOfOrderSequence { expected: 0, .. })
        ));
        s.update(&header(7, 1, 0, 1, 5));
        assert!(matches!(
            s.check(&header(7, 0, 15, 1, 6)),
            Err(ProducerError::InvalidProducerEpoch { .. })
        ));
        // Only five batches are remembered.
        for i in 1..=5 {
            s.update(&header(7, 1, i, 1, 5 + i as i64));
        }
        assert!(matches!(
            s.check(&header(7, 1, 0, 1, 0)),
            Err(ProducerError::OutOfOrderSequence { .. })
        ));
    }

    #[test]
    fn sequence_wraps() {
        let mut s = ProducerStateManager::new();
        s.update(&header(1, 0, i32::MAX - 1, 2, 0));
        assert_eq!(s.check(&header(1, 0, 0, 1, 2)), Ok(SequenceCheck::Append));
    }
}

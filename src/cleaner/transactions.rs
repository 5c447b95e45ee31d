//! Transactions in a clean (Kafka's `CleanedTransactionMetadata`).
//!
//! A clean walks its batches in offset order, once in the map phase and once
//! in the recopy, each walk with its own state, fed with the aborted
//! transactions the `.txnindex` files list (their entries overlapping the
//! range cleaned):
//! * a data batch of an aborted transaction is not mapped and loses all its
//!   records whatever their keys (an aborted value must never shadow a
//!   committed one, nor survive); committed transactional data is
//!   deduplicated like plain data;
//! * a COMMIT marker is needed while a batch of its transaction was seen
//!   earlier in this walk; an ABORT marker likewise (a batch of it was seen,
//!   and dropped). A marker with no record (emptied before) is never needed.
//!   A marker no longer needed gets its delete horizon in the clean in which
//!   that is first true, and goes in a clean at or past it;
//! * an ABORT marker kept because its batches were seen keeps its
//!   `.txnindex` entry, unchanged, in the cleaned segment
//!   ([`CleanedTransactionMetadata::take_kept_aborted`]); every other entry
//!   of the cleaned segments goes with the data it described;
//! * the clean never passes the first unstable offset: the policy folds it
//!   into `first_uncleanable_offset` (see `cleanable_offsets`).
//!
//! Batches must be shown in offset order, once per walk.

use std::collections::{BTreeSet, HashMap};

use crate::log::control_record::ControlRecordType;
use crate::log::error::BatchError;
use crate::log::record_batch::{self, BatchHeader, RecordIter};

pub use crate::log::transaction_index::AbortedTxn;

/// Control record types (the second i16 of a control record's key).
pub const CONTROL_TYPE_ABORT: i16 = ControlRecordType::Abort.id();
pub const CONTROL_TYPE_COMMIT: i16 = ControlRecordType::Commit.id();

/// Type of the marker a control batch holds (`None`: no record, or a key
/// that does not parse). Markers are never compressed, but a batch that
/// claims a codec is inflated within `limit` like any other.
///
/// # Errors
/// A batch whose records cannot be read.
pub fn marker_type(
    header: &BatchHeader,
    batch: &[u8],
    inflated: &mut Vec<u8>,
    limit: usize,
) -> Result<Option<i16>, BatchError> {
    let payload = record_batch::records_bytes(header, batch, inflated, limit)?;
    match RecordIter::new(payload, header.records_count).next() {
        Some(rec) => Ok(rec?.key.and_then(control_record_type)),
        None => Ok(None),
    }
}

/// Type of the control record whose key is `key`, if it parses (the log
/// layer's reading of control records, `control_record`).
pub fn control_record_type(key: &[u8]) -> Option<i16> {
    ControlRecordType::parse_key(Some(key)).ok().map(ControlRecordType::id)
}

#[derive(Debug, Clone, Copy)]
struct OngoingAbort {
    txn: AbortedTxn,
    /// A batch of this aborted transaction was seen in this clean.
    batch_seen: bool,
}

/// State of the transactions a clean walks through.
#[derive(Debug, Default)]
pub struct CleanedTransactionMetadata {
    /// Aborted transactions not yet reached, by first offset.
    pending: Vec<AbortedTxn>,
    next: usize,
    ongoing_aborted: HashMap<i64, OngoingAbort>,
    ongoing_committed: BTreeSet<i64>,
    /// Entries of the ABORT markers kept because their batches were seen,
    /// not yet written to a cleaned `.txnindex`.
    kept_aborted: Vec<AbortedTxn>,
}

impl CleanedTransactionMetadata {
    /// The walk over `aborted` (any order; an entry listed twice counts once).
    pub fn new(mut aborted: Vec<AbortedTxn>) -> Self {
        aborted.sort_by_key(|t| (t.first_offset, t.last_offset, t.producer_id));
        aborted.dedup_by_key(|t| (t.first_offset, t.last_offset, t.producer_id));
        Self { pending: aborted, ..Self::default() }
    }

    /// The `.txnindex` entries of the ABORT markers kept since the last call,
    /// in marker order: what the cleaned segment's index receives.
    pub fn take_kept_aborted(&mut self) -> Vec<AbortedTxn> {
        std::mem::take(&mut self.kept_aborted)
    }

    fn consume_aborted_up_to(&mut self, offset: i64) {
        while let Some(t) = self.pending.get(self.next) {
            if t.first_offset > offset {
                break;
            }
            let t = *t;
            self.ongoing_aborted
                .entry(t.producer_id)
                .or_insert(OngoingAbort { txn: t, batch_seen: false });
            self.next += 1;
        }
    }

    /// A data batch: returns true when its records belong to an aborted
    /// transaction and must all be dropped.
    pub fn on_batch_read(&mut self, batch: &BatchHeader) -> bool {
        self.consume_aborted_up_to(batch.last_offset());
        if !batch.is_transactional() {
            return false;
        }
        match self.ongoing_aborted.get_mut(&batch.producer_id) {
            Some(abort) => {
                abort.batch_seen = true;
                true
            }
            None => {
                self.ongoing_committed.insert(batch.producer_id);
                false
            }
        }
    }

    /// A control batch with the type of its marker (`None`: no record, it was
    /// emptied by an earlier clean). Returns true when the marker is no longer
    /// needed by any batch, so it may go once its delete horizon has passed.
    pub fn on_control_batch_read(
        &mut self,
        batch: &BatchHeader,
        control_type: Option<i16>,
    ) -> bool {
        self.consume_aborted_up_to(batch.last_offset());
        match control_type {
            None => true,
            Some(CONTROL_TYPE_ABORT) => match self.ongoing_aborted.remove(&batch.producer_id) {
                Some(OngoingAbort { txn, batch_seen: true }) => {
                    self.kept_aborted.push(txn);
                    false
                }
                _ => true,
            },
            Some(CONTROL_TYPE_COMMIT) => !self.ongoing_committed.remove(&batch.producer_id),
            Some(_) => false,
        }
    }

    /// A control batch at or past the first uncleanable offset, which the
    /// recopy keeps as it is: the walk moves past it, and an ABORT marker
    /// keeps its index entry.
    pub fn on_control_batch_kept(&mut self, batch: &BatchHeader, control_type: Option<i16>) {
        self.consume_aborted_up_to(batch.last_offset());
        match control_type {
            Some(CONTROL_TYPE_ABORT) => {
                if let Some(abort) = self.ongoing_aborted.remove(&batch.producer_id) {
                    self.kept_aborted.push(abort.txn);
                }
            }
            Some(CONTROL_TYPE_COMMIT) => {
                self.ongoing_committed.remove(&batch.producer_id);
            }
            _ => {}
        }
    }

    /// Whether any record of `batch` may be an aborted transaction's (for the map phase).
    pub fn is_aborted(&self, batch: &BatchHeader) -> bool {
        batch.is_transactional() && self.ongoing_aborted.contains_key(&batch.producer_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::compression::Compression;
    use crate::log::record_batch::{set_base_offset, BatchBuilder};

    fn header(pid: i64, base: i64, n: usize, transactional: bool) -> BatchHeader {
        let mut b = BatchBuilder::new(Compression::None, 0).producer(pid, 0, 0);
        b.transactional = transactional;
        for _ in 0..n {
            b.append(0, Some(b"k"), Some(b"v"));
        }
        let mut bytes = b.build();
        set_base_offset(&mut bytes, base);
        BatchHeader::parse(&bytes).unwrap()
    }

    #[test]
    fn no_transactions_means_nothing_is_dropped() {
        let mut t = CleanedTransactionMetadata::new(Vec::new());
        assert!(!t.on_batch_read(&header(1, 0, 2, false)));
        assert!(!t.on_batch_read(&header(1, 2, 2, true)));
        // The commit marker is needed: a batch of its transaction was seen.
        assert!(!t.on_control_batch_read(&header(1, 4, 1, true), Some(CONTROL_TYPE_COMMIT)));
        // A later commit with no data seen this clean may go after its horizon.
        assert!(t.on_control_batch_read(&header(1, 5, 1, true), Some(CONTROL_TYPE_COMMIT)));
    }

    #[test]
    fn aborted_transaction_records_are_dropped_and_marker_kept_while_needed() {
        let mut t = CleanedTransactionMetadata::new(vec![AbortedTxn {
            producer_id: 7,
            first_offset: 10,
            last_offset: 14,
            last_stable_offset: 15,
        }]);
        assert!(!t.on_batch_read(&header(7, 0, 2, true)), "before the aborted range");
        assert!(!t.on_control_batch_read(&header(7, 2, 1, true), Some(CONTROL_TYPE_COMMIT)));
        assert!(t.on_batch_read(&header(7, 10, 2, true)));
        assert!(t.is_aborted(&header(7, 12, 1, true)));
        assert!(!t.on_batch_read(&header(8, 12, 2, true)), "another producer's transaction");
        // The abort marker stays while its transaction's batches were in this
        // clean, and so does its index entry.
        assert!(!t.on_control_batch_read(&header(7, 14, 1, true), Some(CONTROL_TYPE_ABORT)));
        let kept = t.take_kept_aborted();
        assert_eq!(
            kept.iter().map(|a| (a.first_offset, a.last_stable_offset)).collect::<Vec<_>>(),
            vec![(10, 15)]
        );
        assert!(t.take_kept_aborted().is_empty(), "taken once");
        assert!(!t.is_aborted(&header(7, 20, 1, true)));
        // An empty (already cleaned) marker may go.
        assert!(t.on_control_batch_read(&header(7, 30, 1, true), None));
        assert_eq!(control_record_type(&[0, 0, 0, 1]), Some(CONTROL_TYPE_COMMIT));
        assert_eq!(control_record_type(&[0]), None);
    }

    fn aborted(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last + 1,
        }
    }

    #[test]
    fn abort_marker_whose_data_is_gone_may_go_and_loses_its_entry() {
        // The data of the aborted transaction was removed by an earlier clean:
        // its marker is seen with no batch before it.
        let mut t = CleanedTransactionMetadata::new(vec![aborted(3, 0, 5)]);
        assert!(t.on_control_batch_read(&header(3, 5, 1, true), Some(CONTROL_TYPE_ABORT)));
        assert!(t.take_kept_aborted().is_empty());
        // The producer's next transaction commits: not aborted.
        assert!(!t.on_batch_read(&header(3, 6, 2, true)));
        assert!(!t.on_control_batch_read(&header(3, 8, 1, true), Some(CONTROL_TYPE_COMMIT)));
    }

    #[test]
    fn an_entry_listed_twice_counts_once_and_a_marker_ends_the_abort() {
        let list = vec![aborted(4, 2, 6), aborted(4, 2, 6), aborted(4, 10, 12)];
        let mut t = CleanedTransactionMetadata::new(list);
        assert!(t.on_batch_read(&header(4, 2, 2, true)));
        // The duplicate must not reset "a batch was seen".
        assert!(!t.on_batch_read(&header(5, 4, 1, false)));
        assert!(!t.on_control_batch_read(&header(4, 6, 1, true), Some(CONTROL_TYPE_ABORT)));
        assert_eq!(t.take_kept_aborted(), vec![aborted(4, 2, 6)]);
        // Between the two aborted transactions the producer commits one.
        assert!(!t.on_batch_read(&header(4, 7, 2, true)));
        assert!(!t.on_control_batch_read(&header(4, 9, 1, true), Some(CONTROL_TYPE_COMMIT)));
        assert!(t.on_batch_read(&header(4, 10, 2, true)));
        // Plain data of a producer is never aborted.
        assert!(!t.on_batch_read(&header(6, 11, 1, false)));
    }
}

//! Transaction hooks of the clean (Kafka's `CleanedTransactionMetadata`).
//!
//! The log has transactions (markers, producer state, `.txnindex`), but the
//! clean does not use them yet: [`LogToClean`](super::LogToClean) carries an
//! empty list of aborted transactions and every batch passes through
//! untouched. The hooks are here so that, once transactions exist and
//! a transaction index lists the aborted ones:
//! * records of aborted transactions are dropped from the recopy and are
//!   never put in the offset map (an aborted value must not shadow an older
//!   committed one);
//! * a transaction marker (control batch) stays while any batch of its
//!   transaction is still in the log, then until its delete horizon, stamped
//!   like a tombstone's;
//! * the clean never passes the first unstable offset: the caller folds it
//!   into `first_uncleanable_offset` (see `cleanable_offsets`).
//!
//! Batches must be shown in offset order, once per clean.
//!
//! Meanwhile a clean carries each source segment's `.txnindex` entries,
//! unchanged, into the cleaned segment's `.txnindex.cleaned` (written and
//! fsynced with it, renamed with it through the swap): no entry is lost while
//! its aborted data is still in the log, and none is yet removed with a
//! marker the recopy drops past its horizon.

use std::collections::{BTreeSet, HashMap};

use crate::log::control_record::ControlRecordType;
use crate::log::record_batch::BatchHeader;

/// An aborted transaction as the transaction index records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

/// Control record types (the second i16 of a control record's key).
pub const CONTROL_TYPE_ABORT: i16 = ControlRecordType::Abort.id();
pub const CONTROL_TYPE_COMMIT: i16 = ControlRecordType::Commit.id();

/// Type of the control record whose key is `key`, if it parses (the log
/// layer's reading of control records, `control_record`).
pub fn control_record_type(key: &[u8]) -> Option<i16> {
    ControlRecordType::parse_key(Some(key)).ok().map(ControlRecordType::id)
}

#[derive(Debug, Clone, Copy)]
struct OngoingAbort {
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
}

impl CleanedTransactionMetadata {
    pub fn new(mut aborted: Vec<AbortedTxn>) -> Self {
        aborted.sort_by_key(|t| t.first_offset);
        Self { pending: aborted, ..Self::default() }
    }

    fn consume_aborted_up_to(&mut self, offset: i64) {
        while let Some(t) = self.pending.get(self.next) {
            if t.first_offset > offset {
                break;
            }
            self.ongoing_aborted.insert(t.producer_id, OngoingAbort { batch_seen: false });
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
            Some(CONTROL_TYPE_ABORT) => !matches!(
                self.ongoing_aborted.remove(&batch.producer_id),
                Some(OngoingAbort { batch_seen: true })
            ),
            Some(CONTROL_TYPE_COMMIT) => !self.ongoing_committed.remove(&batch.producer_id),
            Some(_) => false,
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
        }]);
        assert!(!t.on_batch_read(&header(7, 0, 2, true)), "before the aborted range");
        assert!(!t.on_control_batch_read(&header(7, 2, 1, true), Some(CONTROL_TYPE_COMMIT)));
        assert!(t.on_batch_read(&header(7, 10, 2, true)));
        assert!(t.is_aborted(&header(7, 12, 1, true)));
        assert!(!t.on_batch_read(&header(8, 12, 2, true)), "another producer's transaction");
        // The abort marker stays while its transaction's batches were in this clean.
        assert!(!t.on_control_batch_read(&header(7, 14, 1, true), Some(CONTROL_TYPE_ABORT)));
        assert!(!t.is_aborted(&header(7, 20, 1, true)));
        // An empty (already cleaned) marker may go.
        assert!(t.on_control_batch_read(&header(7, 30, 1, true), None));
        assert_eq!(control_record_type(&[0, 0, 0, 1]), Some(CONTROL_TYPE_COMMIT));
        assert_eq!(control_record_type(&[0]), None);
    }
}

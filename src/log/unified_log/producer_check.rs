//! An append's check against the producer state, before a byte is written:
//! sequences, epochs and transactions of every batch at the offsets it will
//! get (`producer_append_info`), a single retried batch answered as a
//! duplicate, and the verification a transactional batch must show.

use crate::log::producer_state::{
    AppendOrigin, BatchMetadata, ProducerAppendInfo, ProducerBatch, ProducerError,
    ProducerStateManager, VerificationGuard,
};
use crate::log::record_batch::BatchHeader;
use crate::log::validator::ValidatedBatch;

/// What the producer state says of an append.
pub(super) enum ProducerCheck {
    Append(ProducerAppendInfo),
    /// A single batch retried: answer with its original offsets.
    Duplicate(BatchMetadata),
}

/// Check every batch against the producer state, with the offsets they will
/// get from `first_offset` on.
/// Whether batches that open a transaction must show a verification.
pub(super) enum TxnCheck {
    /// Not asked (the coordinator's own appends, or verification disabled).
    Unverified,
    /// Verified with the coordinator under this guard (`None`: no guard was
    /// taken because the producer's transaction was open then).
    Verified(Option<VerificationGuard>),
}

impl TxnCheck {
    pub(super) fn refusal(
        &self,
        producers: &ProducerStateManager,
        info: &ProducerAppendInfo,
    ) -> Option<ProducerError> {
        let TxnCheck::Verified(guard) = *self else { return None };
        info.started
            .iter()
            .map(|txn| txn.producer_id)
            .find(|&pid| !producers.verification_holds(pid, guard))
            .map(|producer_id| ProducerError::UnverifiedTransaction { producer_id })
    }
}

pub(super) fn check_producers(
    producers: &ProducerStateManager,
    validated: &[ValidatedBatch],
    first_offset: i64,
    origin: AppendOrigin,
) -> Result<ProducerCheck, ProducerError> {
    let mut info = ProducerAppendInfo::new(origin);
    let mut base = first_offset;
    for v in validated {
        let h = &v.header;
        let batch =
            ProducerBatch { header: BatchHeader { base_offset: base, ..*h }, control: v.control };
        match producers.append_batch(&mut info, &batch)? {
            None => {}
            Some(meta) if validated.len() == 1 => return Ok(ProducerCheck::Duplicate(meta)),
            // A retry mixed with new batches cannot be answered with one offset range.
            Some(meta) => {
                return Err(ProducerError::OutOfOrderSequence {
                    producer_id: h.producer_id,
                    epoch: h.producer_epoch,
                    first_seq: meta.first_seq,
                    expected: -1,
                })
            }
        }
        base += h.records_count as i64;
    }
    Ok(ProducerCheck::Append(info))
}

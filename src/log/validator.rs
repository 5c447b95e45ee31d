//! Validation of the records a producer sends (Kafka's `LogValidator`), before
//! offsets are assigned. Runs over the request bytes in place: an uncompressed
//! batch is checked without any allocation; a compressed one is inflated once
//! into the caller's scratch buffer.
//!
//! Control batches are refused from clients. From the broker itself (origin
//! `Coordinator`) a control batch must be exactly one well-formed COMMIT or
//! ABORT marker of a transactional producer.

use super::control_record::{self, ControlBatch};
use super::error::BatchError;
use super::producer_append_info::AppendOrigin;
use super::record_batch::{self, BatchHeader, RecordIter, TimestampType};

/// What the topic and the moment impose on appended records.
#[derive(Debug, Clone, Copy)]
pub struct ValidationContext {
    pub now_ms: i64,
    /// `cleanup.policy` includes compact: every record needs a key.
    pub compact: bool,
    pub max_message_bytes: usize,
    pub timestamp_type: TimestampType,
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    /// Who appends: only the broker itself may write control batches.
    pub origin: AppendOrigin,
}

impl ValidationContext {
    /// Most bytes a compressed batch may inflate to (a bound, not an expectation).
    pub fn decompression_limit(&self) -> usize {
        self.max_message_bytes.saturating_mul(64).clamp(16 << 20, 512 << 20)
    }
}

/// One checked batch of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidatedBatch {
    /// Position of the batch in the request's records.
    pub position: usize,
    pub header: BatchHeader,
    /// Max record timestamp actually present (CreateTime).
    pub max_timestamp: i64,
    /// What a control batch holds (`None` for a data batch).
    pub control: Option<ControlBatch>,
}

/// Validate every batch in `records`.
///
/// # Errors
/// The first problem found: framing, CRC, size, record count, a key-less
/// record on a compacted topic (`InvalidRecord` with its index), a control
/// batch from a client, or a timestamp out of bounds.
pub fn validate_records(
    records: &[u8],
    ctx: &ValidationContext,
    scratch: &mut Vec<u8>,
    out: &mut Vec<ValidatedBatch>,
) -> Result<(), BatchError> {
    out.clear();
    if records.is_empty() {
        return Err(BatchError::InvalidBatch("no record batch in the request".into()));
    }
    let mut position = 0;
    while position < records.len() {
        let rest = &records[position..];
        let header = record_batch::check_batch(rest, ctx.max_message_bytes)?;
        let batch = &rest[..header.size_in_bytes()];
        let (max_timestamp, control) = if header.is_control() {
            (header.max_timestamp, Some(validate_marker(&header, batch, ctx, scratch)?))
        } else {
            (validate_batch(&header, batch, ctx, scratch)?, None)
        };
        out.push(ValidatedBatch { position, header, max_timestamp, control });
        position += header.size_in_bytes();
    }
    Ok(())
}

/// A control batch: refused unless the broker writes one marker.
fn validate_marker(
    header: &BatchHeader,
    batch: &[u8],
    ctx: &ValidationContext,
    scratch: &mut Vec<u8>,
) -> Result<ControlBatch, BatchError> {
    if ctx.origin != AppendOrigin::Coordinator {
        return Err(BatchError::InvalidBatch("clients may not send control batches".into()));
    }
    let invalid = |reason: &str| Err(BatchError::InvalidBatch(format!("control batch: {reason}")));
    if header.records_count != 1 || header.last_offset_delta != 0 {
        return invalid("a marker batch holds exactly one record");
    }
    if !header.is_transactional() || !header.has_producer_id() {
        return invalid("a marker belongs to a transactional producer");
    }
    if header.has_delete_horizon() {
        return invalid("a delete horizon is the cleaner's");
    }
    let limit = ctx.decompression_limit();
    match control_record::read_control_batch(header, batch, scratch, limit)? {
        marker @ ControlBatch::Marker(_) => Ok(marker),
        _ => invalid("only COMMIT and ABORT markers are appended"),
    }
}

fn validate_batch(
    header: &BatchHeader,
    batch: &[u8],
    ctx: &ValidationContext,
    scratch: &mut Vec<u8>,
) -> Result<i64, BatchError> {
    if header.records_count <= 0 {
        return Err(BatchError::InvalidBatch(format!(
            "record count {} must be positive",
            header.records_count
        )));
    }
    if header.last_offset_delta != header.records_count - 1 {
        return Err(BatchError::InvalidBatch(format!(
            "last offset delta {} does not match record count {}",
            header.last_offset_delta, header.records_count
        )));
    }
    if header.has_delete_horizon() {
        return Err(BatchError::InvalidBatch("clients may not set a delete horizon".into()));
    }
    let payload = record_batch::records_bytes(header, batch, scratch, ctx.decompression_limit())?;
    let mut records = RecordIter::new(payload, header.records_count);
    let mut max_timestamp = record_batch::NO_TIMESTAMP;
    for (index, record) in records.by_ref().enumerate() {
        let record = record?;
        if record.offset_delta != index as i32 {
            return Err(BatchError::InvalidRecord {
                index,
                reason: format!("offset delta {} where {index} was expected", record.offset_delta),
            });
        }
        if ctx.compact && record.key.is_none() {
            return Err(BatchError::InvalidRecord {
                index,
                reason: "compacted topic cannot accept message without key".into(),
            });
        }
        let timestamp = header.base_timestamp.wrapping_add(record.timestamp_delta);
        if ctx.timestamp_type == TimestampType::CreateTime {
            if timestamp < ctx.now_ms.saturating_sub(ctx.timestamp_before_max_ms) {
                return Err(BatchError::InvalidTimestamp {
                    timestamp,
                    reason: format!(
                        "more than {} ms before the broker's time",
                        ctx.timestamp_before_max_ms
                    ),
                });
            }
            if timestamp > ctx.now_ms.saturating_add(ctx.timestamp_after_max_ms) {
                return Err(BatchError::InvalidTimestamp {
                    timestamp,
                    reason: format!(
                        "more than {} ms after the broker's time",
                        ctx.timestamp_after_max_ms
                    ),
                });
            }
        }
        max_timestamp = max_timestamp.max(timestamp);
    }
    records.finish()?;
    Ok(max_timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::compression::Compression;
    use crate::log::record_batch::BatchBuilder;

    fn ctx(compact: bool) -> ValidationContext {
        ValidationContext {
            now_ms: 10_000,
            compact,
            max_message_bytes: 1 << 20,
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: 3_600_000,
            origin: AppendOrigin::Client,
        }
    }

    #[test]
    fn keyless_record_on_compacted_topic_is_rejected_with_its_index() {
        for codec in [Compression::None, Compression::Zstd] {
            let mut b = BatchBuilder::new(codec, 10_000);
            b.append(10_000, Some(b"k"), Some(b"v"));
            b.append(10_000, None, Some(b"v"));
            let batch = b.build();
            let (mut scratch, mut out) = (Vec::new(), Vec::new());
            validate_records(&batch, &ctx(false), &mut scratch, &mut out).unwrap();
            assert_eq!(out.len(), 1);
            match validate_records(&batch, &ctx(true), &mut scratch, &mut out) {
                Err(BatchError::InvalidRecord { index: 1, .. }) => {}
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn future_timestamps_are_refused() {
        let mut b = BatchBuilder::new(Compression::None, 10_000 + 3_600_001);
        b.append(10_000 + 3_600_001, Some(b"k"), Some(b"v"));
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        assert!(matches!(
            validate_records(&b.build(), &ctx(false), &mut scratch, &mut out),
            Err(BatchError::InvalidTimestamp { .. })
        ));
    }

    #[test]
    fn control_batches_only_from_the_broker_and_only_markers() {
        use crate::log::control_record::EndTransactionMarker;
        let marker = EndTransactionMarker::commit(2).build_batch(7, 1, 10_000);
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        let coordinator = ValidationContext { origin: AppendOrigin::Coordinator, ..ctx(true) };
        assert!(matches!(
            validate_records(&marker, &ctx(false), &mut scratch, &mut out),
            Err(BatchError::InvalidBatch(_))
        ));
        validate_records(&marker, &coordinator, &mut scratch, &mut out).unwrap();
        assert_eq!(out[0].control, Some(ControlBatch::Marker(EndTransactionMarker::commit(2))));
        // Two records, an unknown type, no producer: refused.
        let mut two = BatchBuilder::new(Compression::None, 10_000);
        two.producer_id = 7;
        two.transactional = true;
        two.control = true;
        let other = two.clone();
        two.append(10_000, Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 0]));
        two.append(10_000, Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 0]));
        let mut unknown = other.clone();
        unknown.append(10_000, Some(&[0, 0, 0, 3]), Some(&[0, 0, 0, 0, 0, 0]));
        let no_pid = EndTransactionMarker::abort(0).build_batch(-1, 0, 10_000);
        for bad in [two.build(), unknown.build(), no_pid] {
            assert!(validate_records(&bad, &coordinator, &mut scratch, &mut out).is_err());
        }
    }

    #[test]
    fn empty_and_trailing_garbage() {
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        assert!(validate_records(&[], &ctx(false), &mut scratch, &mut out).is_err());
        let mut b = BatchBuilder::new(Compression::None, 10_000);
        b.append(10_000, Some(b"k"), Some(b"v"));
        let mut two = b.build();
        two.extend_from_slice(&[1, 2, 3]);
        assert!(validate_records(&two, &ctx(false), &mut scratch, &mut out).is_err());
    }
}

//! Validation of the records a producer sends (Kafka's `LogValidator`), before
//! offsets are assigned. Runs over the request bytes in place: an uncompressed
//! batch is checked without any allocation; a compressed one is inflated once
//! into the caller's scratch buffer.
//!
//! Recompression (`compression.type` other than `producer`, [`recompress`]):
//! after validation, every data batch whose codec is not the topic's is
//! rebuilt with the topic's codec and level: same header (offsets, timestamps,
//! producer id, epoch, base sequence, transactional bit), same records, new
//! payload, length and CRC; the result is validated again, so a batch that
//! grew past `max.message.bytes` is refused as on Kafka. Control batches are
//! never recompressed (Kafka leaves an uncompressed marker uncompressed).
//! Unlike Kafka, which folds a request's batches into one when it
//! recompresses, each batch is rebuilt on its own: producers send one batch
//! per partition, and every batch keeps its own producer fields.
//!
//! Control batches are refused from clients. From the broker itself (origin
//! `Coordinator`) a control batch must be exactly one well-formed COMMIT or
//! ABORT marker of a transactional producer.

use super::compression::{self, Compression};
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
        decompression_limit(self.max_message_bytes)
    }
}

/// Most bytes a compressed batch of at most `max_message_bytes` may inflate
/// to, wherever it is inflated (appends, timestamp scans): 64 times the batch,
/// within 16 MiB and 512 MiB.
pub fn decompression_limit(max_message_bytes: usize) -> usize {
    max_message_bytes.saturating_mul(64).clamp(16 << 20, 512 << 20)
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

/// The batches of `records` (checked: `validated` is their validation)
/// with every data batch in `target`'s codec at its level; `None` when none
/// needs it, so the request's bytes are appended as they are.
///
/// # Errors
/// A payload that does not inflate within `limit`, an encoder failure.
pub fn recompress(
    records: &[u8],
    validated: &[ValidatedBatch],
    target: (Compression, i32),
    limit: usize,
    scratch: &mut Vec<u8>,
) -> Result<Option<Vec<u8>>, BatchError> {
    let (codec, level) = target;
    let differs = |b: &ValidatedBatch| {
        b.control.is_none() && b.header.compression().is_ok_and(|c| c != codec)
    };
    if !validated.iter().any(differs) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(records.len());
    for b in validated {
        let batch = &records[b.position..b.position + b.header.size_in_bytes()];
        if !differs(b) {
            out.extend_from_slice(batch);
            continue;
        }
        let payload = record_batch::records_bytes(&b.header, batch, scratch, limit)?;
        let start = out.len();
        out.extend_from_slice(&batch[..record_batch::RECORD_BATCH_OVERHEAD]);
        compression::compress_at(codec, level, payload, &mut out).map_err(|e| {
            BatchError::Decompression(format!("recompressing with {}: {e}", codec.name()))
        })?;
        let rebuilt = &mut out[start..];
        let attributes = (b.header.attributes & !0x07) | codec as i16;
        let at = record_batch::ATTRIBUTES_OFFSET;
        rebuilt[at..at + 2].copy_from_slice(&attributes.to_be_bytes());
        let length = (rebuilt.len() - record_batch::LOG_OVERHEAD) as i32;
        let at = record_batch::LENGTH_OFFSET;
        rebuilt[at..at + 4].copy_from_slice(&length.to_be_bytes());
        record_batch::update_crc(rebuilt);
    }
    Ok(Some(out))
}

/// [`recompress`] to the topic's `target` (`None`: `producer`, nothing to
/// do), with `validated` then describing the rebuilt batches.
///
/// # Errors
/// As [`recompress`], and a rebuilt batch over `max.message.bytes`.
pub fn apply_compression(
    records: &[u8],
    validated: &mut Vec<ValidatedBatch>,
    target: Option<(Compression, i32)>,
    ctx: &ValidationContext,
    scratch: &mut Vec<u8>,
) -> Result<Option<Vec<u8>>, BatchError> {
    let Some(target) = target else { return Ok(None) };
    let rebuilt = recompress(records, validated, target, ctx.decompression_limit(), scratch)?;
    if let Some(rebuilt) = &rebuilt {
        validate_records(rebuilt, ctx, scratch, validated)?;
    }
    Ok(rebuilt)
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

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn idempotent_batch(codec: Compression) -> Vec<u8> {
        let mut b = BatchBuilder::new(codec, 10_000).producer(42, 3, 17);
        b.transactional = true;
        for i in 0..50u8 {
            b.append(10_000 + i as i64, Some(&[b'k', i]), Some(&[i; 100]));
        }
        b.build()
    }

    /// (timestamp delta, key, value) of each record.
    type Contents = Vec<(i64, Option<Vec<u8>>, Option<Vec<u8>>)>;

    fn contents(records: &[u8]) -> Contents {
        let header = record_batch::check_batch(records, 1 << 20).unwrap();
        let mut scratch = Vec::new();
        let payload = record_batch::records_bytes(&header, records, &mut scratch, 1 << 20).unwrap();
        RecordIter::new(payload, header.records_count)
            .map(|r| {
                let r = r.unwrap();
                (r.timestamp_delta, r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec))
            })
            .collect()
    }

    #[test]
    fn every_codec_recompresses_to_every_other_keeping_the_producer_fields() {
        for from in CODECS {
            let original = idempotent_batch(from);
            let (mut scratch, mut out) = (Vec::new(), Vec::new());
            validate_records(&original, &ctx(false), &mut scratch, &mut out).unwrap();
            for to in CODECS {
                let target = (to, compression::default_level(to));
                let again = recompress(&original, &out, target, 1 << 20, &mut scratch).unwrap();
                let Some(rebuilt) = again else {
                    assert_eq!(from, to, "only a batch already in the target codec is kept");
                    continue;
                };
                let mut checked = Vec::new();
                validate_records(&rebuilt, &ctx(false), &mut scratch, &mut checked).unwrap();
                let (old, new) = (out[0].header, checked[0].header);
                assert_eq!(new.compression().unwrap(), to);
                assert_eq!(
                    (
                        new.producer_id,
                        new.producer_epoch,
                        new.base_sequence,
                        new.is_transactional()
                    ),
                    (42, 3, 17, true)
                );
                assert_eq!(
                    (
                        new.records_count,
                        new.last_offset_delta,
                        new.base_timestamp,
                        new.max_timestamp
                    ),
                    (
                        old.records_count,
                        old.last_offset_delta,
                        old.base_timestamp,
                        old.max_timestamp
                    )
                );
                assert_eq!(contents(&rebuilt), contents(&original), "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn markers_are_not_recompressed_and_growth_past_the_limit_is_seen() {
        use crate::log::control_record::EndTransactionMarker;
        let marker = EndTransactionMarker::commit(2).build_batch(7, 1, 10_000);
        let coordinator = ValidationContext { origin: AppendOrigin::Coordinator, ..ctx(false) };
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        validate_records(&marker, &coordinator, &mut scratch, &mut out).unwrap();
        let target = (Compression::Zstd, 3);
        assert_eq!(recompress(&marker, &out, target, 1 << 20, &mut scratch).unwrap(), None);
        // A well-compressed batch inflated back grows: validation sees the new size.
        let packed = idempotent_batch(Compression::Zstd);
        validate_records(&packed, &ctx(false), &mut scratch, &mut out).unwrap();
        let none = (Compression::None, 0);
        let inflated = recompress(&packed, &out, none, 1 << 20, &mut scratch).unwrap().unwrap();
        assert!(inflated.len() > packed.len());
        let small = ValidationContext { max_message_bytes: packed.len(), ..ctx(false) };
        assert!(matches!(
            validate_records(&inflated, &small, &mut scratch, &mut out),
            Err(BatchError::TooLarge { .. })
        ));
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

//! Writing the batches a clean keeps.
//!
//! A batch whose records all survive (and that needs no new delete horizon)
//! is copied byte for byte by the caller. Otherwise the survivors go into a new
//! batch written here, which keeps everything that makes the batch the same
//! batch to readers and to producer-state recovery:
//! * base offset and last offset delta (so the batch still spans the same
//!   offsets, and `nextOffset` after it is unchanged),
//! * partition leader epoch, producer id, producer epoch, base sequence,
//! * the attributes (codec, timestamp type, transactional, control),
//! * the max timestamp (what the time index and retention saw),
//! * each kept record's encoding, copied from the original: offset delta, key,
//!   value and headers are untouched, so duplicate header keys, empty values
//!   and every other detail survive exactly.
//!
//! When the batch gets a delete horizon (KIP-534: attribute bit 0x40, horizon
//! in the base timestamp field) each record's timestamp delta is re-encoded
//! relative to the new base, so every record keeps its original timestamp.
//! Compressed batches are recompressed with their own codec. The CRC is
//! computed last, over the final bytes.
//!
//! The kafka-protocol crate's encoder cannot do this (it renumbers offsets,
//! cannot write an empty batch and merges duplicate header keys).

use std::ops::Range;

use crate::log::compression::{self, Compression};
use crate::log::error::BatchError;
use crate::log::record_batch::{
    read_varint, read_varlong, update_crc, write_varint, write_varlong, BatchHeader, CURRENT_MAGIC,
    DELETE_HORIZON_FLAG_MASK, LOG_OVERHEAD, NO_PRODUCER_ID, NO_SEQUENCE, RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
};

/// Header fields of a batch about to be written.
#[derive(Debug, Clone, Copy)]
struct HeaderFields {
    base_offset: i64,
    partition_leader_epoch: i32,
    attributes: i16,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records_count: i32,
}

fn put_header(out: &mut [u8], h: &HeaderFields) {
    out[0..8].copy_from_slice(&h.base_offset.to_be_bytes());
    let length = (out.len() - LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    out[12..16].copy_from_slice(&h.partition_leader_epoch.to_be_bytes());
    out[16] = CURRENT_MAGIC as u8;
    out[17..21].copy_from_slice(&[0; 4]);
    out[21..23].copy_from_slice(&h.attributes.to_be_bytes());
    out[23..27].copy_from_slice(&h.last_offset_delta.to_be_bytes());
    out[27..35].copy_from_slice(&h.base_timestamp.to_be_bytes());
    out[35..43].copy_from_slice(&h.max_timestamp.to_be_bytes());
    out[43..51].copy_from_slice(&h.producer_id.to_be_bytes());
    out[51..53].copy_from_slice(&h.producer_epoch.to_be_bytes());
    out[53..57].copy_from_slice(&h.base_sequence.to_be_bytes());
    out[57..61].copy_from_slice(&h.records_count.to_be_bytes());
    update_crc(out);
}

/// Append to `dst` one record from `raw` (its full encoding, length prefix
/// included) with its timestamp delta moved from base `old_base` to `new_base`.
fn append_restamped(
    dst: &mut Vec<u8>,
    raw: &[u8],
    old_base: i64,
    new_base: i64,
) -> Result<(), BatchError> {
    let (_, len_size) = read_varint(raw)?;
    let body = &raw[len_size..];
    let (&attributes, rest) =
        body.split_first().ok_or_else(|| BatchError::CorruptRecord("empty record".into()))?;
    let (delta, delta_size) = read_varlong(rest)?;
    let tail = &rest[delta_size..];
    let timestamp = old_base.wrapping_add(delta);
    let mut encoded_delta = Vec::with_capacity(10);
    write_varlong(&mut encoded_delta, timestamp.wrapping_sub(new_base));
    let new_len = 1 + encoded_delta.len() + tail.len();
    write_varint(
        dst,
        i32::try_from(new_len)
            .map_err(|_| BatchError::CorruptRecord(format!("record of {new_len} bytes")))?,
    );
    dst.push(attributes);
    dst.extend_from_slice(&encoded_delta);
    dst.extend_from_slice(tail);
    Ok(())
}

/// Reusable scratch space of the batch writer (grown on demand, shrunk by the cleaner).
#[derive(Debug, Default)]
pub struct WriterScratch {
    records: Vec<u8>,
}

impl WriterScratch {
    pub fn shrink_to(&mut self, bytes: usize) {
        self.records.clear();
        self.records.shrink_to(bytes);
    }
}

/// Append to `out` a batch holding the records of `payload` (the original
/// batch's records, inflated if it was compressed) at `retained` byte ranges.
///
/// `delete_horizon`: `Some(h)` stamps horizon `h` on a batch that has none
/// (rewriting every kept record's timestamp delta); a batch that already has a
/// horizon keeps it whatever is passed.
///
/// # Errors
/// Malformed records and compression failures.
pub fn write_retained_batch(
    out: &mut Vec<u8>,
    original: &BatchHeader,
    payload: &[u8],
    retained: &[Range<usize>],
    delete_horizon: Option<i64>,
    scratch: &mut WriterScratch,
) -> Result<(), BatchError> {
    let codec = original.compression()?;
    let mut attributes = original.attributes;
    let mut base_timestamp = original.base_timestamp;
    let restamp = match delete_horizon {
        Some(h) if !original.has_delete_horizon() => {
            attributes |= DELETE_HORIZON_FLAG_MASK;
            base_timestamp = h;
            true
        }
        _ => false,
    };
    let records = &mut scratch.records;
    records.clear();
    for range in retained {
        let raw = &payload[range.clone()];
        if restamp {
            append_restamped(records, raw, original.base_timestamp, base_timestamp)?;
        } else {
            records.extend_from_slice(raw);
        }
    }
    let start = out.len();
    out.resize(start + RECORD_BATCH_OVERHEAD, 0);
    match codec {
        Compression::None => out.extend_from_slice(records),
        codec => {
            if let Err(e) = compression::compress(codec, records, out) {
                out.truncate(start);
                return Err(BatchError::Decompression(format!(
                    "recompressing with {}: {e}",
                    codec.name()
                )));
            }
        }
    }
    let fields = HeaderFields {
        base_offset: original.base_offset,
        partition_leader_epoch: original.partition_leader_epoch,
        attributes,
        last_offset_delta: original.last_offset_delta,
        base_timestamp,
        max_timestamp: original.max_timestamp,
        producer_id: original.producer_id,
        producer_epoch: original.producer_epoch,
        base_sequence: original.base_sequence,
        records_count: retained.len() as i32,
    };
    put_header(&mut out[start..], &fields);
    Ok(())
}

/// Append to `out` a batch with no records spanning the same offsets as `original`.
///
/// With `keep_producer` it is Kafka's retained producer batch: producer id,
/// epoch, base sequence and the transactional/control bits stay, so producer
/// state rebuilt from the log still finds the producer's last sequence.
/// Without, it is an offset fence: a plain, non-transactional batch that only
/// keeps the segment's offset range visible (see the swap protocol in
/// `cleaner.rs`).
pub fn write_empty_batch(out: &mut Vec<u8>, original: &BatchHeader, keep_producer: bool) {
    // Codec bits cleared: there is no payload to inflate.
    let kept_bits = if keep_producer {
        original.attributes & !0x07
    } else {
        original.attributes & TIMESTAMP_TYPE_MASK
    };
    let fields = HeaderFields {
        base_offset: original.base_offset,
        partition_leader_epoch: original.partition_leader_epoch,
        attributes: kept_bits,
        last_offset_delta: original.last_offset_delta,
        base_timestamp: if original.has_delete_horizon() && keep_producer {
            original.base_timestamp
        } else {
            original.max_timestamp
        },
        max_timestamp: original.max_timestamp,
        producer_id: if keep_producer { original.producer_id } else { NO_PRODUCER_ID },
        producer_epoch: if keep_producer { original.producer_epoch } else { -1 },
        base_sequence: if keep_producer { original.base_sequence } else { NO_SEQUENCE },
        records_count: 0,
    };
    let start = out.len();
    out.resize(start + RECORD_BATCH_OVERHEAD, 0);
    put_header(&mut out[start..], &fields);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::record_batch::{
        check_batch, records_bytes, set_base_offset, BatchBuilder, RecordIter,
    };

    /// (offset, timestamp, key, value, header count) of a record.
    type Decoded = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>, usize);

    fn decode(batch: &[u8]) -> (BatchHeader, Vec<Decoded>) {
        let h = check_batch(batch, 1 << 20).expect("valid batch");
        let mut scratch = Vec::new();
        let payload = records_bytes(&h, batch, &mut scratch, 1 << 20).unwrap();
        let recs = RecordIter::new(payload, h.records_count)
            .map(|r| {
                let r = r.unwrap();
                (
                    h.base_offset + r.offset_delta as i64,
                    h.base_timestamp + r.timestamp_delta,
                    r.key.map(<[u8]>::to_vec),
                    r.value.map(<[u8]>::to_vec),
                    r.headers_count,
                )
            })
            .collect();
        (h, recs)
    }

    fn ranges(batch: &[u8], scratch: &mut Vec<u8>, keep: &[usize]) -> (Vec<u8>, Vec<Range<usize>>) {
        let h = BatchHeader::parse(batch).unwrap();
        let payload = records_bytes(&h, batch, scratch, 1 << 20).unwrap().to_vec();
        let mut out = Vec::new();
        let mut pos = 0;
        for (i, r) in RecordIter::new(&payload, h.records_count).enumerate() {
            let r = r.unwrap();
            if keep.contains(&i) {
                out.push(pos..pos + r.raw.len());
            }
            pos += r.raw.len();
        }
        (payload, out)
    }

    #[test]
    fn rewrite_keeps_offsets_producer_and_timestamps_for_every_codec() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut b = BatchBuilder::new(codec, 5_000).producer(77, 3, 100);
            b.append(5_000, Some(b"a"), Some(b"1"));
            b.append_with_headers(
                5_007,
                Some(b"b"),
                Some(b""),
                &[(b"h", Some(b"x")), (b"h", None)],
            );
            b.append(4_990, Some(b"c"), None);
            b.append(5_020, Some(b"d"), Some(b"4"));
            let mut batch = b.build();
            set_base_offset(&mut batch, 1000);
            let (_, orig) = decode(&batch);
            let h = BatchHeader::parse(&batch).unwrap();
            let mut scratch = Vec::new();
            let (payload, keep) = ranges(&batch, &mut scratch, &[1, 2]);
            let mut out = Vec::new();
            let mut ws = WriterScratch::default();
            write_retained_batch(&mut out, &h, &payload, &keep, Some(90_000), &mut ws).unwrap();
            let (nh, recs) = decode(&out);
            assert_eq!(nh.base_offset, 1000);
            assert_eq!(nh.last_offset_delta, 3, "last offset delta kept although record 3 is gone");
            assert_eq!((nh.producer_id, nh.producer_epoch, nh.base_sequence), (77, 3, 100));
            assert_eq!(nh.compression().unwrap(), codec);
            assert_eq!(nh.delete_horizon_ms(), Some(90_000));
            assert_eq!(nh.max_timestamp, h.max_timestamp, "max timestamp unchanged");
            assert_eq!(
                recs,
                orig[1..3].to_vec(),
                "offsets, original timestamps, keys, values, headers kept"
            );

            // Rewriting again keeps the horizon and the timestamps.
            let (payload2, keep2) = ranges(&out, &mut scratch, &[1]);
            let mut out2 = Vec::new();
            write_retained_batch(&mut out2, &nh, &payload2, &keep2, Some(1), &mut ws).unwrap();
            let (nh2, recs2) = decode(&out2);
            assert_eq!(nh2.delete_horizon_ms(), Some(90_000));
            assert_eq!(recs2, orig[2..3].to_vec());
        }
    }

    #[test]
    fn empty_batches() {
        let mut b = BatchBuilder::new(Compression::Zstd, 10).producer(5, 1, 40);
        b.transactional = true;
        b.append(12, Some(b"k"), Some(b"v"));
        b.append(15, Some(b"k"), Some(b"v"));
        let mut batch = b.build();
        set_base_offset(&mut batch, 50);
        let h = BatchHeader::parse(&batch).unwrap();
        let mut out = Vec::new();
        write_empty_batch(&mut out, &h, true);
        let (e, recs) = decode(&out);
        assert!(recs.is_empty());
        assert_eq!(out.len(), RECORD_BATCH_OVERHEAD);
        assert_eq!(
            (e.base_offset, e.last_offset(), e.producer_id, e.producer_epoch, e.base_sequence),
            (50, 51, 5, 1, 40)
        );
        assert!(e.is_transactional());
        assert_eq!(e.compression().unwrap(), Compression::None);
        assert_eq!(e.last_sequence(), 41);
        let mut fence = Vec::new();
        write_empty_batch(&mut fence, &h, false);
        let (f, _) = decode(&fence);
        assert_eq!((f.base_offset, f.last_offset(), f.producer_id), (50, 51, NO_PRODUCER_ID));
        assert!(!f.is_transactional());
    }
}

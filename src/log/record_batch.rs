//! RecordBatch v2, the unit Kafka stores, sends and fetches.
//!
//! ```text
//! offset  field                 covered by CRC
//!      0  baseOffset      i64   no   (rewritten by the broker on append)
//!      8  batchLength     i32   no   (bytes after this field)
//!     12  partitionLeaderEpoch  no   (rewritten by the broker on append)
//!     16  magic           i8    no
//!     17  crc             u32   -    (CRC32C of bytes 21..end)
//!     21  attributes      i16   yes  (codec 0..2, timestampType 3, transactional 4,
//!                                     control 5, hasDeleteHorizonMs 6)
//!     23  lastOffsetDelta i32   yes
//!     27  baseTimestamp   i64   yes  (the delete horizon when bit 6 is set, KIP-534)
//!     35  maxTimestamp    i64   yes
//!     43  producerId      i64   yes
//!     51  producerEpoch   i16   yes
//!     53  baseSequence    i32   yes
//!     57  recordsCount    i32   yes
//!     61  records (compressed as a whole when the codec is not none)
//! ```
//!
//! Records are parsed in place from a byte slice: no allocation per record. A
//! compressed batch is inflated once into a caller-owned scratch buffer.

mod builder;

pub use builder::BatchBuilder;

use super::compression::{self, Compression};
use super::error::BatchError;

pub const BASE_OFFSET_OFFSET: usize = 0;
pub const LENGTH_OFFSET: usize = 8;
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub const MAGIC_OFFSET: usize = 16;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
pub const PRODUCER_ID_OFFSET: usize = 43;
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
pub const BASE_SEQUENCE_OFFSET: usize = 53;
pub const RECORDS_COUNT_OFFSET: usize = 57;
/// Size of the batch header, and so the size of an empty batch.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// `baseOffset` + `batchLength`: what must be read to learn a batch's size.
pub const LOG_OVERHEAD: usize = 12;

pub const TIMESTAMP_TYPE_MASK: i16 = 0x08;
pub const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
pub const CONTROL_FLAG_MASK: i16 = 0x20;
pub const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;

pub const NO_TIMESTAMP: i64 = -1;
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_SEQUENCE: i32 = -1;

pub const CURRENT_MAGIC: i8 = 2;

/// `message.timestamp.type`: who sets the record timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The fixed 61-byte header of a v2 batch, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Decode the header at the start of `buf`. Only checks that the bytes are
    /// there and that the magic is 2; see [`check_batch`] for a full check.
    ///
    /// # Errors
    /// `Truncated` when fewer than 61 bytes are given, `UnsupportedMagic` for
    /// magic 0 or 1, `InvalidLength` for a batch length below the header size,
    /// `InvalidBatch` for offsets past `i64::MAX` (base offset plus last
    /// offset delta, and the next offset after it: what [`Self::last_offset`]
    /// and [`Self::next_offset`] compute). The CRC does not cover the base
    /// offset, so only this check keeps a damaged one from overflowing them.
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < RECORD_BATCH_OVERHEAD {
            // A v0/v1 message set is shorter than our header: report its magic if we can see it.
            if buf.len() > MAGIC_OFFSET && buf[MAGIC_OFFSET] as i8 != CURRENT_MAGIC {
                return Err(BatchError::UnsupportedMagic(buf[MAGIC_OFFSET] as i8));
            }
            return Err(BatchError::Truncated {
                needed: RECORD_BATCH_OVERHEAD,
                available: buf.len(),
            });
        }
        let magic = buf[MAGIC_OFFSET] as i8;
        if magic != CURRENT_MAGIC {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        let batch_length = be_i32(buf, LENGTH_OFFSET);
        if (batch_length as i64) < (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i64 {
            return Err(BatchError::InvalidLength(batch_length as i64));
        }
        let base_offset = be_i64(buf, BASE_OFFSET_OFFSET);
        let last_offset_delta = be_i32(buf, LAST_OFFSET_DELTA_OFFSET);
        let next =
            base_offset.checked_add(i64::from(last_offset_delta)).and_then(|l| l.checked_add(1));
        if next.is_none() {
            return Err(BatchError::InvalidBatch(format!(
                "base offset {base_offset} and last offset delta {last_offset_delta} run past the last offset"
            )));
        }
        Ok(Self {
            base_offset,
            batch_length,
            partition_leader_epoch: be_i32(buf, PARTITION_LEADER_EPOCH_OFFSET),
            magic,
            crc: be_i32(buf, CRC_OFFSET) as u32,
            attributes: be_i16(buf, ATTRIBUTES_OFFSET),
            last_offset_delta,
            base_timestamp: be_i64(buf, BASE_TIMESTAMP_OFFSET),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_OFFSET),
            producer_id: be_i64(buf, PRODUCER_ID_OFFSET),
            producer_epoch: be_i16(buf, PRODUCER_EPOCH_OFFSET),
            base_sequence: be_i32(buf, BASE_SEQUENCE_OFFSET),
            records_count: be_i32(buf, RECORDS_COUNT_OFFSET),
        })
    }

    /// Total bytes of the batch, header included.
    pub fn size_in_bytes(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    /// The offset after this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    /// # Errors
    /// For the unused codec numbers 5..=7.
    pub fn compression(&self) -> Result<Compression, BatchError> {
        Compression::from_attributes(self.attributes)
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG_MASK != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG_MASK != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & DELETE_HORIZON_FLAG_MASK != 0
    }
    /// The delete horizon the cleaner stamped (KIP-534), stored in the base timestamp field.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        self.has_delete_horizon().then_some(self.base_timestamp)
    }
    /// The timestamp records are relative to. With a delete horizon stamped the
    /// base timestamp field holds the horizon and record deltas are relative to it.
    pub fn timestamp_base(&self) -> i64 {
        self.base_timestamp
    }
    pub fn has_producer_id(&self) -> bool {
        self.producer_id > NO_PRODUCER_ID
    }
    /// Sequence number of the last record, wrapping as Kafka's sequences do.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            increment_sequence(self.base_sequence, self.last_offset_delta)
        }
    }
}

/// Kafka's sequence arithmetic: sequences wrap from i32::MAX to 0.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// CRC32C of a whole batch as the `crc` field should hold it.
/// The size (length field plus [`LOG_OVERHEAD`]) of the batch whose framing
/// starts `head`: what a reader must have before it can look at the batch.
///
/// # Errors
/// `Truncated` below [`LOG_OVERHEAD`] bytes; `InvalidLength` for a length
/// below the batch header's.
pub fn framed_batch_size(head: &[u8]) -> Result<usize, BatchError> {
    let Some(field) = head.get(LENGTH_OFFSET..LOG_OVERHEAD) else {
        return Err(BatchError::Truncated { needed: LOG_OVERHEAD, available: head.len() });
    };
    let length = i64::from(i32::from_be_bytes([field[0], field[1], field[2], field[3]]));
    if length < (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i64 {
        return Err(BatchError::InvalidLength(length));
    }
    Ok(length as usize + LOG_OVERHEAD)
}

pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..])
}

/// Write `crc` for the batch after any change to a CRC-covered field.
pub fn update_crc(batch: &mut [u8]) {
    let crc = compute_crc(batch);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Set the max timestamp and timestamp type bit, and fix the CRC if anything changed.
pub fn set_max_timestamp(batch: &mut [u8], timestamp_type: TimestampType, max_timestamp: i64) {
    let header_attrs = be_i16(batch, ATTRIBUTES_OFFSET);
    let attrs = match timestamp_type {
        TimestampType::CreateTime => header_attrs & !TIMESTAMP_TYPE_MASK,
        TimestampType::LogAppendTime => header_attrs | TIMESTAMP_TYPE_MASK,
    };
    if attrs == header_attrs && be_i64(batch, MAX_TIMESTAMP_OFFSET) == max_timestamp {
        return;
    }
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attrs.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&max_timestamp.to_be_bytes());
    update_crc(batch);
}

/// Check the framing of the batch at the start of `buf`: header, length within
/// `buf` and within `max_size`, and CRC. Returns the header; the batch is
/// `buf[..header.size_in_bytes()]`.
///
/// # Errors
/// Any `BatchError` describing the first problem found.
pub fn check_batch(buf: &[u8], max_size: usize) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let size = header.size_in_bytes();
    if size > max_size {
        return Err(BatchError::TooLarge { size, limit: max_size });
    }
    if size > buf.len() {
        return Err(BatchError::Truncated { needed: size, available: buf.len() });
    }
    let computed = compute_crc(&buf[..size]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch { stored: header.crc, computed });
    }
    Ok(header)
}

/// The record bytes of a batch, inflated into `scratch` when compressed.
///
/// # Errors
/// Decompression failures and payloads over `limit`.
pub fn records_bytes<'a>(
    header: &BatchHeader,
    batch: &'a [u8],
    scratch: &'a mut Vec<u8>,
    limit: usize,
) -> Result<&'a [u8], BatchError> {
    let payload = &batch[RECORD_BATCH_OVERHEAD..header.size_in_bytes()];
    match header.compression()? {
        Compression::None => Ok(payload),
        codec => {
            compression::decompress(codec, payload, scratch, limit)?;
            Ok(&scratch[..])
        }
    }
}

/// One record, borrowed from the batch (or its inflated payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers_count: usize,
    /// The headers section as encoded (after the count).
    pub headers: &'a [u8],
    /// The whole record as encoded, length prefix included: what the cleaner copies.
    pub raw: &'a [u8],
}

impl Record<'_> {
    /// A key with a null value: the deletion marker compaction understands.
    pub fn is_tombstone(&self) -> bool {
        self.value.is_none()
    }
}

/// Zigzag varint (i32) at the start of `buf`; returns the value and its length.
pub fn read_varint(buf: &[u8]) -> Result<(i32, usize), BatchError> {
    let (raw, len) = read_unsigned_varint(buf, 5)?;
    let raw = raw as u32;
    Ok((((raw >> 1) as i32) ^ -((raw & 1) as i32), len))
}

/// Zigzag varlong (i64) at the start of `buf`.
pub fn read_varlong(buf: &[u8]) -> Result<(i64, usize), BatchError> {
    let (raw, len) = read_unsigned_varint(buf, 10)?;
    Ok((((raw >> 1) as i64) ^ -((raw & 1) as i64), len))
}

fn read_unsigned_varint(buf: &[u8], max_len: usize) -> Result<(u64, usize), BatchError> {
    let mut value = 0u64;
    for (i, &b) in buf.iter().take(max_len).enumerate() {
        value |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    if buf.len() < max_len {
        Err(BatchError::CorruptRecord("varint runs past the end of the data".into()))
    } else {
        Err(BatchError::CorruptRecord("varint is too long".into()))
    }
}

/// Append a zigzag varint.
pub fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned_varint(out, ((value << 1) ^ (value >> 31)) as u32 as u64);
}

/// Append a zigzag varlong.
pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned_varint(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn write_unsigned_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes of a zigzag varint.
pub fn varint_size(value: i32) -> usize {
    let mut v = ((value << 1) ^ (value >> 31)) as u32;
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Iterates the records of a batch payload, validating each record's framing.
/// After `count` records any bytes left over are an error.
pub struct RecordIter<'a> {
    buf: &'a [u8],
    remaining: usize,
    index: usize,
}

impl<'a> RecordIter<'a> {
    pub fn new(payload: &'a [u8], count: i32) -> Self {
        Self { buf: payload, remaining: count.max(0) as usize, index: 0 }
    }

    /// Bytes left after the records read so far.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    fn corrupt(&self, what: &str) -> BatchError {
        BatchError::CorruptRecord(format!("record {}: {what}", self.index))
    }

    fn parse_one(&mut self) -> Result<Record<'a>, BatchError> {
        let (len, n) = read_varint(self.buf)?;
        if len < 0 || n + len as usize > self.buf.len() {
            return Err(self
                .corrupt(&format!("length {len} exceeds the {} bytes left", self.buf.len() - n)));
        }
        let raw = &self.buf[..n + len as usize];
        let mut body = &raw[n..];
        let take = |body: &mut &'a [u8], k: usize| -> Option<&'a [u8]> {
            if k > body.len() {
                return None;
            }
            let (head, tail) = body.split_at(k);
            *body = tail;
            Some(head)
        };
        let attributes =
            *take(&mut body, 1).ok_or_else(|| self.corrupt("empty record"))?.first().unwrap_or(&0)
                as i8;
        let (timestamp_delta, k) = read_varlong(body)?;
        body = &body[k..];
        let (offset_delta, k) = read_varint(body)?;
        body = &body[k..];
        let (key_len, k) = read_varint(body)?;
        body = &body[k..];
        let key = match key_len {
            -1 => None,
            l if l >= 0 => Some(
                take(&mut body, l as usize)
                    .ok_or_else(|| self.corrupt("key runs past the record"))?,
            ),
            l => return Err(self.corrupt(&format!("key length {l}"))),
        };
        let (value_len, k) = read_varint(body)?;
        body = &body[k..];
        let value = match value_len {
            -1 => None,
            l if l >= 0 => Some(
                take(&mut body, l as usize)
                    .ok_or_else(|| self.corrupt("value runs past the record"))?,
            ),
            l => return Err(self.corrupt(&format!("value length {l}"))),
        };
        let (headers_count, k) = read_varint(body)?;
        body = &body[k..];
        if headers_count < 0 {
            return Err(self.corrupt(&format!("header count {headers_count}")));
        }
        let headers = body;
        for _ in 0..headers_count {
            let (hk, k) = read_varint(body)?;
            body = &body[k..];
            if hk < 0 {
                return Err(self.corrupt("null header key"));
            }
            take(&mut body, hk as usize)
                .ok_or_else(|| self.corrupt("header key runs past the record"))?;
            let (hv, k) = read_varint(body)?;
            body = &body[k..];
            if hv >= 0 {
                take(&mut body, hv as usize)
                    .ok_or_else(|| self.corrupt("header value runs past the record"))?;
            } else if hv != -1 {
                return Err(self.corrupt(&format!("header value length {hv}")));
            }
        }
        if !body.is_empty() {
            return Err(self.corrupt(&format!("{} bytes left over inside the record", body.len())));
        }
        self.buf = &self.buf[raw.len()..];
        Ok(Record {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers_count: headers_count as usize,
            headers,
            raw,
        })
    }

    /// Check that the payload held exactly the records counted.
    ///
    /// # Errors
    /// `CorruptRecord` when bytes are left over.
    pub fn finish(&self) -> Result<(), BatchError> {
        if self.remaining == 0 && !self.buf.is_empty() {
            return Err(BatchError::CorruptRecord(format!(
                "{} bytes after the last of the counted records",
                self.buf.len()
            )));
        }
        Ok(())
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        if self.buf.is_empty() {
            let index = self.index;
            self.remaining = 0;
            return Some(Err(BatchError::CorruptRecord(format!(
                "record count says more records than present (ran out at record {index})"
            ))));
        }
        let result = self.parse_one();
        self.index += 1;
        self.remaining = if result.is_ok() { self.remaining - 1 } else { 0 };
        Some(result)
    }
}

/// Walk `records` by batch framing alone: the start and attributes of each
/// batch, stopping at the first whose header is cut short or whose length is
/// not positive. Nothing else is read or checked: a request handler looks at
/// batches this way before the validator reads them, and leaves anything
/// malformed to it.
pub fn framed_batches(records: &[u8]) -> impl Iterator<Item = (usize, i16)> + '_ {
    let mut next = Some(0usize);
    std::iter::from_fn(move || {
        let at = next.take()?;
        let header = records.get(at..at + ATTRIBUTES_OFFSET + 2)?;
        let attributes =
            i16::from_be_bytes([header[ATTRIBUTES_OFFSET], header[ATTRIBUTES_OFFSET + 1]]);
        let length = i32::from_be_bytes(header[LENGTH_OFFSET..LENGTH_OFFSET + 4].try_into().ok()?);
        next = usize::try_from(length).ok().filter(|&l| l > 0).map(|l| at + LOG_OVERHEAD + l);
        Some((at, attributes))
    })
}

/// The producer id and epoch of the first transactional batch of `records`,
/// if any (`None` too when that batch is cut short before its producer
/// epoch: the validator refuses it).
pub fn first_transactional_producer(records: &[u8]) -> Option<(i64, i16)> {
    let (at, _) = framed_batches(records).find(|(_, a)| a & TRANSACTIONAL_FLAG_MASK != 0)?;
    let p = records.get(at..at + PRODUCER_EPOCH_OFFSET + 2)?;
    let pid = i64::from_be_bytes(p[PRODUCER_ID_OFFSET..PRODUCER_ID_OFFSET + 8].try_into().ok()?);
    let epoch = i16::from_be_bytes([p[PRODUCER_EPOCH_OFFSET], p[PRODUCER_EPOCH_OFFSET + 1]]);
    Some((pid, epoch))
}

/// Whether any batch of `records` is compressed.
pub fn any_batch_compressed(records: &[u8]) -> bool {
    framed_batches(records).any(|(_, a)| Compression::from_attributes(a) != Ok(Compression::None))
}

/// Whether any batch of `records` is compressed with `codec`.
pub fn any_batch_compressed_with(records: &[u8], codec: Compression) -> bool {
    framed_batches(records).any(|(_, a)| Compression::from_attributes(a) == Ok(codec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, -1, 63, -64, 64, 300, i32::MAX, i32::MIN] {
            let mut buf = Vec::new();
            write_varint(&mut buf, v);
            assert_eq!(buf.len(), varint_size(v));
            assert_eq!(read_varint(&buf).unwrap(), (v, buf.len()));
        }
        for v in [0i64, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut buf = Vec::new();
            write_varlong(&mut buf, v);
            assert_eq!(read_varlong(&buf).unwrap(), (v, buf.len()));
        }
        assert!(read_varint(&[0x80, 0x80]).is_err());
        assert!(read_varint(&[0xff; 6]).is_err());
    }

    #[test]
    fn built_batch_parses_and_checks() {
        let mut b = BatchBuilder::new(Compression::None, 1000);
        b.append(1000, Some(b"k1"), Some(b"v1"));
        b.append(1005, Some(b"k2"), None);
        b.append_with_headers(1002, None, Some(b""), &[(b"h", Some(b"x")), (b"h", None)]);
        let batch = b.build();
        let h = check_batch(&batch, 1 << 20).unwrap();
        assert_eq!(h.records_count, 3);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.max_timestamp, 1005);
        let mut scratch = Vec::new();
        let payload = records_bytes(&h, &batch, &mut scratch, 1 << 20).unwrap();
        let mut it = RecordIter::new(payload, h.records_count);
        let recs: Vec<_> = it.by_ref().collect::<Result<_, _>>().unwrap();
        it.finish().unwrap();
        assert_eq!(recs[0].key, Some(&b"k1"[..]));
        assert!(recs[1].is_tombstone());
        assert!(!recs[2].is_tombstone());
        assert_eq!(recs[2].value, Some(&b""[..]));
        assert_eq!(recs[2].headers_count, 2);
        assert_eq!(recs[1].timestamp_delta, 5);
    }

    /// Found by the segment_recovery fuzz target (a batch made by hand in a
    /// segment being recovered): a base offset the CRC does not cover, near
    /// `i64::MAX`, overflowed the batch's last offset.
    #[test]
    fn offsets_past_the_last_offset_are_refused() {
        let mut b = BatchBuilder::new(Compression::None, 0);
        b.append(0, Some(b"k"), Some(b"v"));
        b.append(0, Some(b"k"), Some(b"v"));
        let mut batch = b.build();
        set_base_offset(&mut batch, i64::MAX - 2);
        let h = check_batch(&batch, 1 << 20).unwrap();
        assert_eq!((h.last_offset(), h.next_offset()), (i64::MAX - 1, i64::MAX));
        set_base_offset(&mut batch, i64::MAX - 1);
        assert!(matches!(BatchHeader::parse(&batch), Err(BatchError::InvalidBatch(_))));
        set_base_offset(&mut batch, i64::MIN);
        batch[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4]
            .copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(BatchHeader::parse(&batch), Err(BatchError::InvalidBatch(_))));
    }

    #[test]
    fn corruptions_are_detected() {
        let mut b = BatchBuilder::new(Compression::None, 0);
        b.append(0, Some(b"key"), Some(b"value"));
        let batch = b.build();
        let mut bad = batch.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(matches!(check_batch(&bad, 1 << 20), Err(BatchError::CrcMismatch { .. })));
        assert!(matches!(
            check_batch(&batch[..batch.len() - 1], 1 << 20),
            Err(BatchError::Truncated { .. })
        ));
        assert!(matches!(check_batch(&batch, 10), Err(BatchError::TooLarge { .. })));
        let mut v1 = batch.clone();
        v1[MAGIC_OFFSET] = 1;
        assert_eq!(check_batch(&v1, 1 << 20), Err(BatchError::UnsupportedMagic(1)));
        // count says 2, one record present
        let mut miscount = batch.clone();
        miscount[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4]
            .copy_from_slice(&2i32.to_be_bytes());
        let h = BatchHeader::parse(&miscount).unwrap();
        let mut it = RecordIter::new(&miscount[RECORD_BATCH_OVERHEAD..], h.records_count);
        assert!(it.next().unwrap().is_ok());
        assert!(it.next().unwrap().is_err());
    }

    #[test]
    fn sequences_wrap() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    }

    #[test]
    fn framing_walk_finds_transactional_and_zstd_batches() {
        let plain = {
            let mut b = BatchBuilder::new(Compression::None, 0);
            b.append(0, Some(b"k"), Some(b"v"));
            b.build()
        };
        let txn = {
            let mut b = BatchBuilder::new(Compression::None, 0);
            b.transactional = true;
            b = b.producer(42, 7, 0);
            b.append(0, Some(b"k"), Some(b"v"));
            b.build()
        };
        let zstd = {
            let mut b = BatchBuilder::new(Compression::Zstd, 0);
            b.append(0, Some(b"k"), Some(b"v"));
            b.build()
        };
        let both: Vec<u8> = [plain.as_slice(), txn.as_slice(), zstd.as_slice()].concat();
        assert_eq!(framed_batches(&both).count(), 3);
        assert_eq!(first_transactional_producer(&both), Some((42, 7)));
        assert_eq!(first_transactional_producer(&plain), None);
        assert!(any_batch_compressed_with(&both, Compression::Zstd));
        assert!(!any_batch_compressed_with(
            &[plain.as_slice(), txn.as_slice()].concat(),
            Compression::Zstd
        ));
        // Cut inside the transactional batch's producer fields: left to the validator.
        let cut = &both[..plain.len() + PRODUCER_EPOCH_OFFSET];
        assert_eq!(first_transactional_producer(cut), None);
        // A non-positive length ends the walk after that batch.
        let mut bad = plain.clone();
        bad[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&0i32.to_be_bytes());
        bad.extend_from_slice(&txn);
        assert_eq!(framed_batches(&bad).count(), 1);
        assert_eq!(first_transactional_producer(&bad), None);
        assert_eq!(framed_batches(&[]).count(), 0);
    }
}

//! Control records: the transaction markers a transaction coordinator writes
//! into the partitions of a transaction (Kafka's `ControlRecordType` and
//! `EndTransactionMarker`).
//!
//! A marker is a control batch (attributes: transactional | control) of the
//! transaction's producer id and epoch holding exactly one record:
//!
//! ```text
//! key   (4 bytes)  version i16 = 0, type i16 (0 = ABORT, 1 = COMMIT)
//! value (6 bytes)  version i16 = 0, coordinator epoch i32
//! ```
//!
//! so the whole batch is 78 bytes: the 61-byte header (`baseSequence` -1,
//! `recordsCount` 1, `lastOffsetDelta` 0, uncompressed, CreateTime) and a
//! 17-byte record. Types 2 to 6 are KRaft's and never appear in a data
//! partition; a reader treats any type it does not know as a marker with no
//! effect, as Kafka's consumers do.
//!
//! Reading follows Kafka's checks: a key shorter than 4 bytes or with a
//! negative version, and a value shorter than 6 bytes or with a negative
//! version, are invalid records; a newer version is read as version 0.

use super::compression::Compression;
use super::error::BatchError;
use super::record_batch::{self, BatchBuilder, BatchHeader, RecordIter};

/// Version of the key this broker writes.
pub const CONTROL_RECORD_KEY_VERSION: i16 = 0;
/// Version of the end-transaction marker value this broker writes.
pub const END_TXN_MARKER_VERSION: i16 = 0;
/// Size of a control record key.
pub const CONTROL_RECORD_KEY_SIZE: usize = 4;
/// Size of an end-transaction marker value.
pub const END_TXN_MARKER_VALUE_SIZE: usize = 6;
/// Size of a control batch holding one marker.
pub const END_TXN_MARKER_BATCH_SIZE: usize = 78;
/// Most bytes the records of a control batch read back from disk may inflate
/// to (a marker record is 17 bytes).
pub const MAX_CONTROL_PAYLOAD: usize = 1 << 20;

/// The type of a control record (the second i16 of its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    Abort,
    Commit,
    /// Any other type id (KRaft's, or one from a newer version): no effect here.
    Unknown(i16),
}

impl ControlRecordType {
    pub fn from_id(id: i16) -> Self {
        match id {
            0 => Self::Abort,
            1 => Self::Commit,
            other => Self::Unknown(other),
        }
    }

    pub const fn id(self) -> i16 {
        match self {
            Self::Abort => 0,
            Self::Commit => 1,
            Self::Unknown(id) => id,
        }
    }

    /// The type a control record's key names (Kafka's `ControlRecordType.parse`).
    ///
    /// # Errors
    /// `InvalidRecord` for a null key, a key under 4 bytes or a negative version.
    pub fn parse_key(key: Option<&[u8]>) -> Result<Self, BatchError> {
        let invalid = |reason: String| BatchError::InvalidRecord { index: 0, reason };
        let key = key.ok_or_else(|| invalid("control record without a key".into()))?;
        if key.len() < CONTROL_RECORD_KEY_SIZE {
            return Err(invalid(format!(
                "control record key of {} bytes, at least {CONTROL_RECORD_KEY_SIZE} expected",
                key.len()
            )));
        }
        let version = i16::from_be_bytes([key[0], key[1]]);
        if version < 0 {
            return Err(invalid(format!("control record key version {version}")));
        }
        Ok(Self::from_id(i16::from_be_bytes([key[2], key[3]])))
    }

    /// The 4-byte key of a record of this type.
    pub fn key(self) -> [u8; CONTROL_RECORD_KEY_SIZE] {
        let mut key = [0u8; CONTROL_RECORD_KEY_SIZE];
        key[..2].copy_from_slice(&CONTROL_RECORD_KEY_VERSION.to_be_bytes());
        key[2..].copy_from_slice(&self.id().to_be_bytes());
        key
    }
}

/// A COMMIT or ABORT marker (Kafka's `EndTransactionMarker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndTransactionMarker {
    /// `Abort` or `Commit`, never `Unknown`.
    control_type: ControlRecordType,
    pub coordinator_epoch: i32,
}

impl EndTransactionMarker {
    pub fn commit(coordinator_epoch: i32) -> Self {
        Self { control_type: ControlRecordType::Commit, coordinator_epoch }
    }

    pub fn abort(coordinator_epoch: i32) -> Self {
        Self { control_type: ControlRecordType::Abort, coordinator_epoch }
    }

    pub fn control_type(&self) -> ControlRecordType {
        self.control_type
    }

    pub fn is_abort(&self) -> bool {
        self.control_type == ControlRecordType::Abort
    }

    /// The marker's value: version 0 and the coordinator epoch.
    pub fn value(&self) -> [u8; END_TXN_MARKER_VALUE_SIZE] {
        let mut value = [0u8; END_TXN_MARKER_VALUE_SIZE];
        value[..2].copy_from_slice(&END_TXN_MARKER_VERSION.to_be_bytes());
        value[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        value
    }

    /// Read a marker record. `Ok(None)` for a control record of another type.
    ///
    /// # Errors
    /// `InvalidRecord` when the key or (for a marker) the value is malformed.
    pub fn deserialize(
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<Option<Self>, BatchError> {
        let control_type = ControlRecordType::parse_key(key)?;
        if matches!(control_type, ControlRecordType::Unknown(_)) {
            return Ok(None);
        }
        let invalid = |reason: String| BatchError::InvalidRecord { index: 0, reason };
        let value = value.unwrap_or_default();
        if value.len() < END_TXN_MARKER_VALUE_SIZE {
            return Err(invalid(format!(
                "end transaction marker value of {} bytes, at least {END_TXN_MARKER_VALUE_SIZE} expected",
                value.len()
            )));
        }
        let version = i16::from_be_bytes([value[0], value[1]]);
        if version < 0 {
            return Err(invalid(format!("end transaction marker version {version}")));
        }
        let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
        Ok(Some(Self { control_type, coordinator_epoch }))
    }

    /// The 78-byte control batch carrying this marker for a producer, with
    /// base offset 0 (the log assigns the real one) and `timestamp` as base
    /// and max timestamp.
    pub fn build_batch(&self, producer_id: i64, producer_epoch: i16, timestamp: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None, timestamp);
        b.producer_id = producer_id;
        b.producer_epoch = producer_epoch;
        b.transactional = true;
        b.control = true;
        b.append(timestamp, Some(&self.control_type.key()), Some(&self.value()));
        b.build()
    }
}

/// What a control batch holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlBatch {
    /// No record: the cleaner emptied it (kept as a producer's last batch).
    Empty,
    Marker(EndTransactionMarker),
    /// A control record of a type this broker does not act on.
    Other(ControlRecordType),
}

/// Read the first record of the control batch `batch` (whole, header
/// included; `scratch` receives a compressed payload), as Kafka's producer
/// state does: only the first record counts.
///
/// # Errors
/// A payload that does not inflate within `limit`, a malformed record, or a
/// malformed marker.
pub fn read_control_batch(
    header: &BatchHeader,
    batch: &[u8],
    scratch: &mut Vec<u8>,
    limit: usize,
) -> Result<ControlBatch, BatchError> {
    let payload = record_batch::records_bytes(header, batch, scratch, limit)?;
    let Some(record) = RecordIter::new(payload, header.records_count).next() else {
        return Ok(ControlBatch::Empty);
    };
    let record = record?;
    match EndTransactionMarker::deserialize(record.key, record.value)? {
        Some(marker) => Ok(ControlBatch::Marker(marker)),
        None => Ok(ControlBatch::Other(ControlRecordType::parse_key(record.key)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ABORT marker of producer 1000, epoch 5, coordinator epoch 7, at
    /// 1_700_000_000_000 ms, laid out by hand from Kafka's format (the CRC is
    /// CRC32C of bytes 21..78, computed independently of this crate;
    /// Kafka's DumpLogSegments reads it, see tests/kafka_dump_log_format.rs).
    const GOLDEN_ABORT: &str = concat!(
        "0000000000000000", // base offset
        "00000042",         // batch length 66
        "00000000",         // partition leader epoch
        "02",               // magic
        "b4ebc2a1",         // crc
        "0030",             // attributes: transactional | control
        "00000000",         // last offset delta
        "0000018bcfe56800", // base timestamp
        "0000018bcfe56800", // max timestamp
        "00000000000003e8", // producer id 1000
        "0005",             // producer epoch
        "ffffffff",         // base sequence -1
        "00000001",         // records count
        "20",               // record length 16 (zigzag)
        "00",               // record attributes
        "00",               // timestamp delta 0
        "00",               // offset delta 0
        "08",               // key length 4
        "00000000",         // key: version 0, type 0 (ABORT)
        "0c",               // value length 6
        "000000000007",     // value: version 0, coordinator epoch 7
        "00",               // header count
    );

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn abort_marker_batch_is_kafkas_78_bytes() {
        let golden = hex(GOLDEN_ABORT);
        let built = EndTransactionMarker::abort(7).build_batch(1000, 5, 1_700_000_000_000);
        assert_eq!(built.len(), END_TXN_MARKER_BATCH_SIZE);
        assert_eq!(built, golden);
        let header = record_batch::check_batch(&built, 1 << 20).unwrap();
        assert!(header.is_control() && header.is_transactional());
        let mut scratch = Vec::new();
        assert_eq!(
            read_control_batch(&header, &built, &mut scratch, 1 << 20).unwrap(),
            ControlBatch::Marker(EndTransactionMarker::abort(7))
        );
    }

    #[test]
    fn commit_marker_differs_only_in_type_and_crc() {
        let abort = EndTransactionMarker::abort(7).build_batch(1000, 5, 1_700_000_000_000);
        let commit = EndTransactionMarker::commit(7).build_batch(1000, 5, 1_700_000_000_000);
        let differing: Vec<usize> = (0..78).filter(|&i| abort[i] != commit[i]).collect();
        assert!(differing.iter().all(|&i| (17..21).contains(&i) || i == 69), "{differing:?}");
        assert_eq!(commit[69], 1, "key type 1 = COMMIT");
    }

    #[test]
    fn malformed_keys_and_values_are_invalid_records() {
        assert!(ControlRecordType::parse_key(None).is_err());
        assert!(ControlRecordType::parse_key(Some(&[0, 0, 0])).is_err());
        assert!(
            ControlRecordType::parse_key(Some(&[0xff, 0xff, 0, 0])).is_err(),
            "negative version"
        );
        // A newer key version is read as version 0; unknown types are not markers.
        assert_eq!(
            ControlRecordType::parse_key(Some(&[0, 3, 0, 1, 9])).unwrap(),
            ControlRecordType::Commit
        );
        assert_eq!(EndTransactionMarker::deserialize(Some(&[0, 0, 0, 2]), None).unwrap(), None);
        assert!(EndTransactionMarker::deserialize(Some(&[0, 0, 0, 0]), Some(&[0, 0, 0])).is_err());
        assert!(EndTransactionMarker::deserialize(Some(&[0, 0, 0, 1]), None).is_err());
        assert!(EndTransactionMarker::deserialize(
            Some(&[0, 0, 0, 1]),
            Some(&[0x80, 0, 0, 0, 0, 1])
        )
        .is_err());
        assert_eq!(
            EndTransactionMarker::deserialize(Some(&[0, 0, 0, 1]), Some(&[0, 1, 0, 0, 1, 0, 7]))
                .unwrap(),
            Some(EndTransactionMarker::commit(256))
        );
    }

    #[test]
    fn an_emptied_control_batch_reads_as_empty() {
        let mut b = BatchBuilder::new(Compression::None, 0);
        b.producer_id = 3;
        b.transactional = true;
        b.control = true;
        let bytes = b.build();
        let header = record_batch::check_batch(&bytes, 1 << 20).unwrap();
        let mut scratch = Vec::new();
        assert_eq!(
            read_control_batch(&header, &bytes, &mut scratch, 1 << 20).unwrap(),
            ControlBatch::Empty
        );
    }
}

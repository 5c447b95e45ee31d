//! The records of `__transaction_state`, in Apache Kafka 4.1.2's own schemas
//! (`TransactionLogKey.json`, `TransactionLogValue.json` of the
//! transaction-coordinator module), so `kafka-dump-log
//! --transaction-log-decoder` reads what sediment writes and sediment reads
//! what Kafka wrote:
//!
//! ```text
//! TransactionLogKey v0 (not flexible):
//!     version i16 = 0 (in Kafka 4.x also the coordinator record type, 0 = transaction log)
//!     transactional_id string (i16 length, UTF-8)
//!
//! TransactionLogValue v0 (not flexible), v1 (flexible), after its version i16:
//!     producer_id i64
//!     producer_epoch i16
//!     transaction_timeout_ms i32
//!     transaction_status i8                       the state id
//!     transaction_partitions nullable array of
//!         topic string, partition_ids array of i32 [v1: + tagged fields]
//!     transaction_last_update_timestamp_ms i64
//!     transaction_start_timestamp_ms i64
//!     [v1: tagged fields, ascending tags:
//!         0 previous_producer_id i64 (default -1), 1 next_producer_id i64 (-1),
//!         2 client_transaction_version i16 (0), 3 next_producer_epoch i16 (-1)]
//! ```
//!
//! v0 lengths: string i16, array i32, -1 = null. v1 lengths: unsigned varints
//! of length + 1 (0 = null), and every struct (each partition entry and the
//! value itself) ends with its tagged fields: a count, then per field its tag,
//! its size and its bytes. A tagged field equal to its default is not written,
//! and v0 cannot carry one that is not (Kafka refuses the same).
//!
//! A null value is a tombstone: the transactional id expired. Decoding never
//! panics and never allocates more than the input can hold: every length and
//! count is checked against the bytes left before anything is allocated;
//! unknown tags are skipped by their size; anything that does not parse
//! exactly, trailing bytes included, is a [`SchemaError`].

use crate::readable::{ReadError, Readable};
use crate::writable::{Writable, WriteError};

/// The only key version (and Kafka 4.x's coordinator record type of the
/// transaction log).
pub const KEY_VERSION: i16 = 0;
/// The value version sediment writes: Kafka writes 1 once `transaction.version`
/// is at least 1.
pub const VALUE_VERSION: i16 = 1;
/// Defaults of the tagged fields of v1.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;

const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;
const TAG_NEXT_PRODUCER_EPOCH: u32 = 3;

/// Smallest encoding of one partition entry: v0 an empty topic and an empty
/// id array (2 + 4 bytes); v1 the same plus its tagged-field count (1 + 1 + 1).
const MIN_PARTITIONS_ENTRY_V0: usize = 6;
const MIN_PARTITIONS_ENTRY_V1: usize = 3;

/// The key of every `__transaction_state` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogKey {
    pub transactional_id: String,
}

/// The partitions of one topic in a transaction (Kafka's `PartitionsSchema`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionsSchema {
    pub topic: String,
    pub partition_ids: Vec<i32>,
}

/// The value of a `__transaction_state` record: one transactional id's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogValue {
    pub producer_id: i64,
    /// v1 tag 0, default -1.
    pub previous_producer_id: i64,
    /// v1 tag 1, default -1.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// v1 tag 3, default -1.
    pub next_producer_epoch: i16,
    pub transaction_timeout_ms: i32,
    /// The state id (`TransactionState::id`); not interpreted here.
    pub transaction_status: i8,
    /// Null for Empty; the partitions grouped by topic otherwise.
    pub transaction_partitions: Option<Vec<PartitionsSchema>>,
    pub transaction_last_update_timestamp_ms: i64,
    pub transaction_start_timestamp_ms: i64,
    /// v1 tag 2, default 0.
    pub client_transaction_version: i16,
}

/// A record that does not encode or decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed __transaction_state record: {0}")]
pub struct SchemaError(String);

impl From<ReadError> for SchemaError {
    fn from(e: ReadError) -> Self {
        SchemaError(e.0)
    }
}

impl From<WriteError> for SchemaError {
    fn from(e: WriteError) -> Self {
        SchemaError(e.0)
    }
}

fn err<T>(what: impl Into<String>) -> Result<T, SchemaError> {
    Err(SchemaError(what.into()))
}

impl TransactionLogKey {
    /// The key's bytes: version 0, then the id.
    ///
    /// # Errors
    /// An id longer than a Kafka string can be (32767 bytes).
    pub fn encode(&self) -> Result<Vec<u8>, SchemaError> {
        let mut out = Writable::with_capacity(4 + self.transactional_id.len());
        out.i16(KEY_VERSION);
        out.string(&self.transactional_id, false)?;
        Ok(out.into_vec())
    }

    /// # Errors
    /// Another version (record type), a truncated or null id, bytes after it,
    /// an id that is not UTF-8.
    pub fn decode(bytes: &[u8]) -> Result<Self, SchemaError> {
        let mut r = Readable::new(bytes);
        let version = r.i16()?;
        if version != KEY_VERSION {
            return err(format!("key version (record type) {version}, expected {KEY_VERSION}"));
        }
        let transactional_id = r.string(false)?;
        r.finish()?;
        Ok(Self { transactional_id })
    }
}

impl TransactionLogValue {
    /// The value's bytes at `version` (0 or 1), version prefix included.
    ///
    /// # Errors
    /// An unknown version; a tagged field that is not its default at v0; a
    /// topic longer than a Kafka string; more partitions than an array holds.
    pub fn encode(&self, version: i16) -> Result<Vec<u8>, SchemaError> {
        let flexible = match version {
            0 => false,
            1 => true,
            v => return err(format!("cannot write value version {v}")),
        };
        let tagged = self.tagged_fields();
        if !flexible {
            if let Some((tag, _)) = tagged.first() {
                return err(format!("tagged field {tag} is not its default at version 0"));
            }
        }
        let mut out = Writable::with_capacity(64);
        out.i16(version);
        out.i64(self.producer_id);
        out.i16(self.producer_epoch);
        out.i32(self.transaction_timeout_ms);
        out.i8(self.transaction_status);
        let entries = self.transaction_partitions.as_deref();
        out.array_len(entries.map(<[_]>::len), flexible)?;
        for e in entries.unwrap_or_default() {
            out.string(&e.topic, flexible)?;
            out.array_len(Some(e.partition_ids.len()), flexible)?;
            for p in &e.partition_ids {
                out.i32(*p);
            }
            if flexible {
                out.empty_tags();
            }
        }
        out.i64(self.transaction_last_update_timestamp_ms);
        out.i64(self.transaction_start_timestamp_ms);
        if flexible {
            out.uvarint(tagged.len() as u32);
            for (tag, bytes) in tagged {
                out.uvarint(tag);
                out.uvarint(bytes.len() as u32);
                out.raw(&bytes);
            }
        }
        Ok(out.into_vec())
    }

    /// The tagged fields that differ from their defaults, in ascending tag
    /// order, with their encoded bytes.
    fn tagged_fields(&self) -> Vec<(u32, Vec<u8>)> {
        let mut fields = Vec::new();
        if self.previous_producer_id != NO_PRODUCER_ID {
            fields.push((TAG_PREVIOUS_PRODUCER_ID, self.previous_producer_id.to_be_bytes().into()));
        }
        if self.next_producer_id != NO_PRODUCER_ID {
            fields.push((TAG_NEXT_PRODUCER_ID, self.next_producer_id.to_be_bytes().into()));
        }
        if self.client_transaction_version != 0 {
            let v = self.client_transaction_version.to_be_bytes().into();
            fields.push((TAG_CLIENT_TRANSACTION_VERSION, v));
        }
        if self.next_producer_epoch != NO_PRODUCER_EPOCH {
            fields.push((TAG_NEXT_PRODUCER_EPOCH, self.next_producer_epoch.to_be_bytes().into()));
        }
        fields
    }

    /// Decode a value of version 0 or 1 (version prefix included).
    ///
    /// # Errors
    /// Another version; truncated input; a length or count larger than the
    /// bytes left; a null where the schema has no null; a known tagged field
    /// of the wrong size; bytes after the value; strings that are not UTF-8.
    pub fn decode(bytes: &[u8]) -> Result<Self, SchemaError> {
        let mut r = Readable::new(bytes);
        let flexible = match r.i16()? {
            0 => false,
            1 => true,
            v => return err(format!("unknown value version {v}")),
        };
        let mut value = Self {
            producer_id: r.i64()?,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: r.i16()?,
            next_producer_epoch: NO_PRODUCER_EPOCH,
            transaction_timeout_ms: r.i32()?,
            transaction_status: r.i8()?,
            transaction_partitions: read_partitions(&mut r, flexible)?,
            transaction_last_update_timestamp_ms: r.i64()?,
            transaction_start_timestamp_ms: r.i64()?,
            client_transaction_version: 0,
        };
        if flexible {
            r.tagged_fields(|tag, data| value.read_tagged(tag, data))?;
        }
        r.finish()?;
        Ok(value)
    }

    /// Apply one top-level tagged field; unknown tags are skipped (a later
    /// Kafka may add some).
    fn read_tagged(&mut self, tag: u32, data: &[u8]) -> Result<(), SchemaError> {
        let mut r = Readable::new(data);
        match tag {
            TAG_PREVIOUS_PRODUCER_ID => self.previous_producer_id = r.i64()?,
            TAG_NEXT_PRODUCER_ID => self.next_producer_id = r.i64()?,
            TAG_CLIENT_TRANSACTION_VERSION => self.client_transaction_version = r.i16()?,
            TAG_NEXT_PRODUCER_EPOCH => self.next_producer_epoch = r.i16()?,
            _ => return Ok(()),
        }
        if r.remaining() != 0 {
            return err(format!("tagged field {tag} has {} bytes", data.len()));
        }
        Ok(())
    }
}

/// The partitions of a transaction, grouped by topic.
fn read_partitions(
    r: &mut Readable<'_>,
    flexible: bool,
) -> Result<Option<Vec<PartitionsSchema>>, SchemaError> {
    let min = if flexible { MIN_PARTITIONS_ENTRY_V1 } else { MIN_PARTITIONS_ENTRY_V0 };
    let Some(n) = r.count(flexible, min)? else {
        return Ok(None);
    };
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let topic = r.string(flexible)?;
        let Some(ids) = r.count(flexible, 4)? else {
            return err(format!("null partition ids of topic {topic}"));
        };
        let mut partition_ids = Vec::with_capacity(ids);
        for _ in 0..ids {
            partition_ids.push(r.i32()?);
        }
        if flexible {
            // No tagged field is defined for an entry: all are skipped.
            r.tagged_fields(|_, _| Ok::<(), SchemaError>(()))?;
        }
        entries.push(PartitionsSchema { topic, partition_ids });
    }
    Ok(Some(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes from hex, ignoring spaces and `|`.
    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|d| u8::from_str_radix(std::str::from_utf8(d).expect("ascii"), 16).expect("hex"))
            .collect()
    }

    /// The value of the golden table: producer 1000, epoch 5, timeout 60000,
    /// updated at 1700000001000 (0x18bcfe56be8), started at 1700000000000
    /// (0x18bcfe56800) unless Empty.
    fn value(status: i8) -> TransactionLogValue {
        let partitions = match status {
            0 => None,
            1..=3 => Some(vec![
                PartitionsSchema { topic: "a".into(), partition_ids: vec![0, 1] },
                PartitionsSchema { topic: "bc".into(), partition_ids: vec![7] },
            ]),
            _ => Some(vec![]),
        };
        TransactionLogValue {
            producer_id: 1000,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 5,
            next_producer_epoch: -1,
            transaction_timeout_ms: 60000,
            transaction_status: status,
            transaction_partitions: partitions,
            transaction_last_update_timestamp_ms: 1_700_000_001_000,
            transaction_start_timestamp_ms: if status == 0 { -1 } else { 1_700_000_000_000 },
            client_transaction_version: 0,
        }
    }

    /// Field by field from the schema; the same bytes as Apache Kafka 4.1.2's
    /// `MessageUtil.toVersionPrefixedBytes` writes for these values.
    const HEAD: &str = "00000000000003e8 | 0005 | 0000ea60";
    const TIMES: &str = "0000018bcfe56be8 | 0000018bcfe56800";
    const V0_PARTITIONS: &str =
        "00000002 | 0001 61 | 00000002 00000000 00000001 | 0002 6263 | 00000001 00000007";
    const V1_PARTITIONS: &str =
        "03 | 02 61 | 03 00000000 00000001 | 00 | 03 6263 | 02 00000007 | 00";

    fn golden(version: i16, status: i8) -> Vec<u8> {
        let text = match (version, status) {
            (0, 0) => format!("0000 | {HEAD} | 00 | ffffffff | 0000018bcfe56be8 ffffffffffffffff"),
            (0, 1..=3) => format!("0000 | {HEAD} | 0{status} | {V0_PARTITIONS} | {TIMES}"),
            (0, _) => format!("0000 | {HEAD} | 0{status} | 00000000 | {TIMES}"),
            (1, 0) => format!("0001 | {HEAD} | 00 | 00 | 0000018bcfe56be8 ffffffffffffffff | 00"),
            (1, 1..=3) => format!("0001 | {HEAD} | 0{status} | {V1_PARTITIONS} | {TIMES} | 00"),
            (1, _) => format!("0001 | {HEAD} | 0{status} | 01 | {TIMES} | 00"),
            _ => unreachable!(),
        };
        hex(&text)
    }

    #[test]
    fn golden_key() {
        let key = TransactionLogKey { transactional_id: "txn-1".into() };
        let bytes = hex("0000 | 0005 74786e2d31");
        assert_eq!(key.encode().unwrap(), bytes);
        assert_eq!(TransactionLogKey::decode(&bytes).unwrap(), key);
    }

    #[test]
    fn golden_values_per_state_and_version() {
        for version in [0, 1] {
            for status in 0..=5 {
                let (v, bytes) = (value(status), golden(version, status));
                assert_eq!(v.encode(version).unwrap(), bytes, "v{version} state {status}");
                assert_eq!(TransactionLogValue::decode(&bytes).unwrap(), v, "v{version} {status}");
            }
        }
        // The doc's example: v1 Ongoing, one topic, 47 bytes.
        let mut v = value(1);
        v.transaction_partitions =
            Some(vec![PartitionsSchema { topic: "a".into(), partition_ids: vec![0, 1] }]);
        assert_eq!(v.encode(1).unwrap().len(), 47);
    }

    #[test]
    fn golden_tagged_fields() {
        let v = TransactionLogValue {
            previous_producer_id: 999,
            next_producer_id: 1001,
            producer_epoch: 6,
            next_producer_epoch: 0,
            transaction_status: 3,
            transaction_partitions: Some(vec![]),
            transaction_last_update_timestamp_ms: 2,
            transaction_start_timestamp_ms: 1,
            client_transaction_version: 1,
            ..value(3)
        };
        let bytes = hex("0001 | 00000000000003e8 | 0006 | 0000ea60 | 03 | 01 | 0000000000000002 \
             0000000000000001 | 04 | 00 08 00000000000003e7 | 01 08 00000000000003e9 \
             | 02 02 0001 | 03 02 0000");
        assert_eq!(v.encode(1).unwrap(), bytes);
        assert_eq!(TransactionLogValue::decode(&bytes).unwrap(), v);
        // Only tag 2, as a client on transaction protocol 2 leaves it.
        let abort = TransactionLogValue { client_transaction_version: 1, ..value(5) };
        assert!(abort.encode(1).unwrap().ends_with(&hex("01 02 02 0001")));
        // v0 has no tagged fields: a non-default one cannot be written.
        for v in [v, abort] {
            assert!(v.encode(0).is_err());
        }
        assert!(value(0).encode(2).is_err());
    }

    #[test]
    fn round_trips() {
        let mut big = value(1);
        big.transaction_partitions = Some(
            (0..300)
                .map(|t| PartitionsSchema {
                    topic: format!("tópico-{t}"),
                    partition_ids: (0..t % 7).collect(),
                })
                .collect(),
        );
        big.producer_id = i64::MAX;
        big.producer_epoch = i16::MAX - 1;
        big.transaction_timeout_ms = i32::MAX;
        for v in [value(0), value(1), value(4), big] {
            for version in [0, 1] {
                let bytes = v.encode(version).unwrap();
                assert_eq!(TransactionLogValue::decode(&bytes).unwrap(), v, "v{version}");
            }
        }
        let key = TransactionLogKey { transactional_id: "x".repeat(i16::MAX as usize) };
        assert_eq!(TransactionLogKey::decode(&key.encode().unwrap()).unwrap(), key);
        let empty = TransactionLogKey { transactional_id: String::new() };
        assert_eq!(TransactionLogKey::decode(&empty.encode().unwrap()).unwrap(), empty);
    }

    #[test]
    fn truncated_input_is_refused() {
        let key = TransactionLogKey { transactional_id: "txn-1".into() }.encode().unwrap();
        for n in 0..key.len() {
            assert!(TransactionLogKey::decode(&key[..n]).is_err(), "key cut at {n}");
        }
        for version in [0, 1] {
            for status in 0..=5 {
                let bytes = golden(version, status);
                for n in 0..bytes.len() {
                    let cut = TransactionLogValue::decode(&bytes[..n]);
                    assert!(cut.is_err(), "v{version} state {status} cut at {n}");
                }
                let mut longer = bytes.clone();
                longer.push(0);
                assert!(TransactionLogValue::decode(&longer).is_err(), "trailing byte");
            }
        }
        let mut key = key;
        key.push(b'x');
        assert!(TransactionLogKey::decode(&key).is_err(), "trailing byte after the key");
    }

    #[test]
    fn hostile_lengths_are_refused_before_allocating() {
        let refused = |text: String| {
            let bytes = hex(&text);
            assert!(TransactionLogValue::decode(&bytes).is_err(), "{text}");
        };
        // v0: 2^31-1 partition entries, a 32767-byte topic, 2^31-1 ids, an id array of -1.
        refused(format!("0000 | {HEAD} | 01 | 7fffffff | {TIMES}"));
        refused(format!("0000 | {HEAD} | 01 | 00000001 | 7fff 61 | 00000000 | {TIMES}"));
        refused(format!("0000 | {HEAD} | 01 | 00000001 | 0001 61 | 7fffffff | {TIMES}"));
        refused(format!("0000 | {HEAD} | 01 | 00000001 | 0001 61 | ffffffff | {TIMES}"));
        // A null topic (v0 -1, v1 0).
        refused(format!("0000 | {HEAD} | 01 | 00000001 | ffff | 00000000 | {TIMES}"));
        refused(format!("0001 | {HEAD} | 01 | 02 | 00 | 01 | 00 | {TIMES} | 00"));
        // v1: a count of 2^32-2 entries; a varint of 6 bytes; one over 32 bits.
        refused(format!("0001 | {HEAD} | 01 | ffffffff0f | {TIMES} | 00"));
        refused(format!("0001 | {HEAD} | 01 | 8080808080 00 | {TIMES} | 00"));
        refused(format!("0001 | {HEAD} | 01 | ffffffff1f | {TIMES} | 00"));
        // v1 tagged fields: a size past the end; a known tag of the wrong size;
        // more fields than bytes.
        refused(format!("0001 | {HEAD} | 04 | 01 | {TIMES} | 01 | 05 ffffffff0f"));
        refused(format!("0001 | {HEAD} | 04 | 01 | {TIMES} | 01 | 02 01 01"));
        refused(format!("0001 | {HEAD} | 04 | 01 | {TIMES} | ffffffff0f | 05 00"));
        // Unknown versions; a topic that is not UTF-8.
        refused(format!("0002 | {HEAD} | 04 | 01 | {TIMES} | 00"));
        refused(format!("ffff | {HEAD} | 04 | 01 | {TIMES} | 00"));
        refused(format!("0000 | {HEAD} | 01 | 00000001 | 0001 ff | 00000000 | {TIMES}"));
        for key in ["0001 0001 61", "0000 ffff", "0000 0005 61", "0000 0001 ff", "00"] {
            assert!(TransactionLogKey::decode(&hex(key)).is_err(), "{key}");
        }

        // An unknown tag (here 9, 3 bytes) is skipped, as Kafka keeps it aside.
        let with_unknown = hex(&format!("0001 | {HEAD} | 04 | 01 | {TIMES} | 01 | 09 03 aabbcc"));
        assert_eq!(TransactionLogValue::decode(&with_unknown).unwrap(), value(4));
        // v0 reads any negative count as null, as Kafka's reader does.
        let null =
            hex(&format!("0000 | {HEAD} | 00 | 80000000 | 0000018bcfe56be8 ffffffffffffffff"));
        assert_eq!(TransactionLogValue::decode(&null).unwrap(), value(0));
    }

    proptest::proptest! {
        /// Golden values with random bytes changed, inserted or removed: decoding
        /// never panics, and whatever decodes writes back to the same value.
        #[test]
        fn mutated_values_never_panic(
            version in 0i16..=1,
            status in 0i8..=5,
            edits in proptest::collection::vec((0usize..80, proptest::num::u8::ANY, 0u8..3), 0..6),
        ) {
            let mut bytes = golden(version, status);
            for (at, byte, op) in edits {
                let at = at % (bytes.len() + 1);
                match op {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    _ if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    _ => {}
                }
            }
            let _ = TransactionLogKey::decode(&bytes);
            if let Ok(v) = TransactionLogValue::decode(&bytes) {
                let version = i16::from_be_bytes([bytes[0], bytes[1]]);
                if let Ok(again) = v.encode(version) {
                    proptest::prop_assert_eq!(TransactionLogValue::decode(&again), Ok(v));
                }
            }
        }
    }

    #[test]
    fn strings_longer_than_kafka_allows_are_not_written() {
        let key = TransactionLogKey { transactional_id: "x".repeat(i16::MAX as usize + 1) };
        assert!(key.encode().is_err());
        let mut v = value(1);
        v.transaction_partitions =
            Some(vec![PartitionsSchema { topic: "t".repeat(40_000), partition_ids: vec![] }]);
        assert!(v.encode(0).is_err());
        assert!(v.encode(1).is_err());
    }
}

//! The records of `__consumer_offsets`, in Apache Kafka's own schemas, so
//! `kafka-dump-log --offsets-decoder` reads them and the cleaner compacts them
//! by key like any other compacted topic:
//!
//! ```text
//! OffsetCommitKey   v1: version i16 = 1, group string, topic string, partition i32
//! OffsetCommitValue v3: version i16 = 3, offset i64, leader_epoch i32, metadata string, commit_timestamp i64
//! GroupMetadataKey  v2: version i16 = 2, group string
//! GroupMetadataValue v3: version i16 = 3, protocol_type string, generation i32,
//!     protocol string?, leader string?, current_state_timestamp i64,
//!     members [member_id string, group_instance_id string?, client_id string,
//!              client_host string, rebalance_timeout i32, session_timeout i32,
//!              subscription bytes, assignment bytes]
//! ```
//! A null value is a tombstone: the offset (or the group) was deleted. Key
//! versions 3 to 8 are the consumer group records (`consumer_group_records`).
//! Decoding checks every length against the bytes present and requires the
//! whole key and value to be read; encoding refuses a string or array too
//! long for its length field (`crate::writable`).

use bytes::Bytes;

use super::consumer_group_records::{ConsumerGroupKey, ConsumerGroupValue};
pub use super::error::SchemaError;
use crate::readable::Readable;
use crate::writable::Writable;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
    /// A record of a consumer group (the KIP-848 protocol).
    Consumer(ConsumerGroupKey),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// A value of `__consumer_offsets`, of the type its key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordValue {
    Offset(OffsetValue),
    Group(GroupValue),
    Consumer(ConsumerGroupValue),
}

impl RecordValue {
    /// # Errors
    /// A field too long for Kafka's schema.
    pub fn encode(&self) -> Result<Vec<u8>, SchemaError> {
        match self {
            RecordValue::Offset(v) => v.encode(),
            RecordValue::Group(v) => v.encode(),
            RecordValue::Consumer(v) => v.encode(),
        }
    }
}

/// A record for the offsets topic (`value` `None`: a tombstone), kept typed
/// until it is appended. Encoding, where a field too long for Kafka's schema
/// is refused, happens once, at the append, so such a record fails the
/// operation before anything is written or applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetsRecord {
    pub key: RecordKey,
    pub value: Option<RecordValue>,
}

impl OffsetsRecord {
    pub fn tombstone(key: RecordKey) -> Self {
        Self { key, value: None }
    }

    /// The key's and value's bytes.
    ///
    /// # Errors
    /// A field too long for Kafka's schema.
    pub fn encode(&self) -> Result<(Vec<u8>, Option<Vec<u8>>), SchemaError> {
        Ok((self.key.encode()?, self.value.as_ref().map(RecordValue::encode).transpose()?))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout: i32,
    pub session_timeout: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

impl RecordKey {
    /// # Errors
    /// A group or topic longer than a Kafka string (32,767 bytes).
    pub fn encode(&self) -> Result<Vec<u8>, SchemaError> {
        let mut out = Writable::with_capacity(32);
        match self {
            RecordKey::Offset { group, topic, partition } => {
                out.i16(1);
                out.string(group, false)?;
                out.string(topic, false)?;
                out.i32(*partition);
            }
            RecordKey::Group { group } => {
                out.i16(2);
                out.string(group, false)?;
            }
            RecordKey::Consumer(key) => return key.encode(),
        }
        Ok(out.into_vec())
    }

    /// # Errors
    /// Truncated or unknown-version keys, and bytes after the key (a key
    /// read from a prefix of its bytes would name another group's record).
    pub fn decode(bytes: &[u8]) -> Result<Self, SchemaError> {
        let mut r = Readable::new(bytes);
        let key = match r.i16()? {
            0 | 1 => RecordKey::Offset {
                group: r.string(false)?,
                topic: r.string(false)?,
                partition: r.i32()?,
            },
            2 => RecordKey::Group { group: r.string(false)? },
            v @ 3..=8 => RecordKey::Consumer(ConsumerGroupKey::decode(v, &mut r)?),
            v => return Err(SchemaError::new(format!("unknown key version {v}"))),
        };
        r.finish()?;
        Ok(key)
    }
}

impl OffsetValue {
    /// # Errors
    /// Metadata longer than a Kafka string (32,767 bytes).
    pub fn encode(&self) -> Result<Vec<u8>, SchemaError> {
        let mut out = Writable::with_capacity(32 + self.metadata.len());
        out.i16(3);
        out.i64(self.offset);
        out.i32(self.leader_epoch);
        out.string(&self.metadata, false)?;
        out.i64(self.commit_timestamp);
        Ok(out.into_vec())
    }

    /// # Errors
    /// Truncated values, versions other than 1 and 3, bytes after the value.
    pub fn decode(bytes: &[u8]) -> Result<Self, SchemaError> {
        let mut r = Readable::new(bytes);
        let value = match r.i16()? {
            // v1 also had an expire timestamp (read and dropped: Kafka 2.1+
            // expires by group state); v2 dropped it; v3 added the leader epoch.
            1 => {
                let offset = r.i64()?;
                let metadata = r.string(false)?;
                let commit_timestamp = r.i64()?;
                let _expire_timestamp = r.i64()?;
                Self { offset, leader_epoch: -1, metadata, commit_timestamp }
            }
            3 => Self {
                offset: r.i64()?,
                leader_epoch: r.i32()?,
                metadata: r.string(false)?,
                commit_timestamp: r.i64()?,
            },
            v => return Err(SchemaError::new(format!("unsupported offset value version {v}"))),
        };
        r.finish()?;
        Ok(value)
    }
}

impl GroupValue {
    /// # Errors
    /// A string longer than a Kafka string (32,767 bytes), or a member list
    /// or subscription longer than an i32 count.
    pub fn encode(&self) -> Result<Vec<u8>, SchemaError> {
        let mut out = Writable::with_capacity(64);
        out.i16(3);
        out.string(&self.protocol_type, false)?;
        out.i32(self.generation);
        out.nullable_string(self.protocol.as_deref(), false)?;
        out.nullable_string(self.leader.as_deref(), false)?;
        out.i64(self.current_state_timestamp);
        out.array_len(Some(self.members.len()), false)?;
        for m in &self.members {
            out.string(&m.member_id, false)?;
            out.nullable_string(m.group_instance_id.as_deref(), false)?;
            out.string(&m.client_id, false)?;
            out.string(&m.client_host, false)?;
            out.i32(m.rebalance_timeout);
            out.i32(m.session_timeout);
            out.bytes(&m.subscription)?;
            out.bytes(&m.assignment)?;
        }
        Ok(out.into_vec())
    }

    /// # Errors
    /// Truncated values, versions other than 3, bytes after the value.
    pub fn decode(bytes: &[u8]) -> Result<Self, SchemaError> {
        let mut r = Readable::new(bytes);
        let version = r.i16()?;
        if version != 3 {
            return Err(SchemaError::new(format!("unsupported group value version {version}")));
        }
        let protocol_type = r.string(false)?;
        let generation = r.i32()?;
        let protocol = r.nullable_string(false)?;
        let leader = r.nullable_string(false)?;
        let current_state_timestamp = r.i64()?;
        // Every member takes at least 24 bytes: the count is bounded by what is left.
        let count = r.count(false, 24)?.ok_or_else(|| SchemaError::new("null member array"))?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            members.push(MemberValue {
                member_id: r.string(false)?,
                group_instance_id: r.nullable_string(false)?,
                client_id: r.string(false)?,
                client_host: r.string(false)?,
                rebalance_timeout: r.i32()?,
                session_timeout: r.i32()?,
                subscription: Bytes::copy_from_slice(r.bytes()?),
                assignment: Bytes::copy_from_slice(r.bytes()?),
            });
        }
        r.finish()?;
        Ok(Self { protocol_type, generation, protocol, leader, current_state_timestamp, members })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let k = RecordKey::Offset { group: "g".into(), topic: "t".into(), partition: 3 };
        assert_eq!(RecordKey::decode(&k.encode().unwrap()).unwrap(), k);
        let k = RecordKey::Group { group: "g".into() };
        assert_eq!(RecordKey::decode(&k.encode().unwrap()).unwrap(), k);
        let v =
            OffsetValue { offset: 42, leader_epoch: -1, metadata: "m".into(), commit_timestamp: 7 };
        assert_eq!(OffsetValue::decode(&v.encode().unwrap()).unwrap(), v);
        let g = GroupValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp: 9,
            members: vec![MemberValue {
                member_id: "m1".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout: 300000,
                session_timeout: 45000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(GroupValue::decode(&g.encode().unwrap()).unwrap(), g);
    }

    #[test]
    fn truncated_and_hostile_input_is_an_error() {
        let g = GroupValue {
            protocol_type: "consumer".into(),
            generation: 1,
            protocol: None,
            leader: None,
            current_state_timestamp: 0,
            members: vec![],
        }
        .encode()
        .unwrap();
        for n in 0..g.len() - 1 {
            assert!(GroupValue::decode(&g[..n]).is_err(), "{n}");
        }
        let mut hostile = g.clone();
        let len = hostile.len();
        hostile[len - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(GroupValue::decode(&hostile).is_err());
        assert!(RecordKey::decode(&[0, 9]).is_err());
    }

    #[test]
    fn a_key_with_bytes_after_it_is_refused() {
        for k in [
            RecordKey::Offset { group: "victim".into(), topic: "t".into(), partition: 0 },
            RecordKey::Group { group: "victim".into() },
        ] {
            let mut bytes = k.encode().unwrap();
            bytes.push(0);
            assert!(RecordKey::decode(&bytes).is_err(), "{k:?}");
        }
        let v = OffsetValue {
            offset: 1,
            leader_epoch: 0,
            metadata: String::new(),
            commit_timestamp: 2,
        };
        let mut bytes = v.encode().unwrap();
        bytes.extend_from_slice(&[0; 8]);
        assert!(OffsetValue::decode(&bytes).is_err());
    }

    /// The forgery of issue 28: a 65,536 + 6 byte group id written with an
    /// i16 length read back as the group "victim".
    #[test]
    fn a_group_id_too_long_for_the_schema_is_not_written() {
        let forged = format!("{}victim", "x".repeat(65_536));
        let offset = RecordKey::Offset { group: forged.clone(), topic: "t".into(), partition: 0 };
        assert!(offset.encode().is_err());
        assert!(RecordKey::Group { group: forged.clone() }.encode().is_err());
        let member = ConsumerGroupKey::MemberMetadata { group: "g".into(), member: forged };
        assert!(RecordKey::Consumer(member).encode().is_err());
        let longest = "x".repeat(i16::MAX as usize);
        let k = RecordKey::Group { group: longest };
        assert_eq!(RecordKey::decode(&k.encode().unwrap()).unwrap(), k);
    }

    #[test]
    fn offset_value_v1_reads_its_expire_timestamp() {
        let mut v1 = vec![0, 1];
        v1.extend_from_slice(&42i64.to_be_bytes());
        v1.extend_from_slice(&[0, 1, b'm']);
        v1.extend_from_slice(&7i64.to_be_bytes());
        v1.extend_from_slice(&(-1i64).to_be_bytes());
        let v = OffsetValue::decode(&v1).unwrap();
        assert_eq!((v.offset, v.metadata.as_str(), v.commit_timestamp), (42, "m", 7));
    }
}

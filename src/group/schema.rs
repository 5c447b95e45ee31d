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
//! Decoding checks every length against the bytes present.

use bytes::{BufMut, Bytes};

use super::consumer_group_records::ConsumerGroupKey;
use crate::readable::{ReadError, Readable};

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

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed __consumer_offsets record: {0}")]
pub struct SchemaError(String);

impl SchemaError {
    pub(super) fn new(reason: impl Into<String>) -> Self {
        SchemaError(reason.into())
    }
}

impl From<ReadError> for SchemaError {
    fn from(e: ReadError) -> Self {
        SchemaError(e.0)
    }
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

fn put_nullable(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_string(out, s),
        None => out.put_i16(-1),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

impl RecordKey {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            RecordKey::Offset { group, topic, partition } => {
                out.put_i16(1);
                put_string(&mut out, group);
                put_string(&mut out, topic);
                out.put_i32(*partition);
            }
            RecordKey::Group { group } => {
                out.put_i16(2);
                put_string(&mut out, group);
            }
            RecordKey::Consumer(key) => return key.encode(),
        }
        out
    }

    /// # Errors
    /// Truncated or unknown-version keys.
    pub fn decode(bytes: &[u8]) -> Result<Self, SchemaError> {
        let mut r = Readable::new(bytes);
        match r.i16()? {
            0 | 1 => Ok(RecordKey::Offset {
                group: r.string(false)?,
                topic: r.string(false)?,
                partition: r.i32()?,
            }),
            2 => Ok(RecordKey::Group { group: r.string(false)? }),
            v @ 3..=8 => Ok(RecordKey::Consumer(ConsumerGroupKey::decode(v, &mut r)?)),
            v => Err(SchemaError(format!("unknown key version {v}"))),
        }
    }
}

impl OffsetValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(3);
        out.put_i64(self.offset);
        out.put_i32(self.leader_epoch);
        put_string(&mut out, &self.metadata);
        out.put_i64(self.commit_timestamp);
        out
    }

    /// # Errors
    /// Truncated values or versions other than 1 and 3.
    pub fn decode(bytes: &[u8]) -> Result<Self, SchemaError> {
        let mut r = Readable::new(bytes);
        match r.i16()? {
            // v1 also had an expire timestamp; v2 dropped it; v3 added the leader epoch.
            1 => {
                let offset = r.i64()?;
                let metadata = r.string(false)?;
                let commit_timestamp = r.i64()?;
                Ok(Self { offset, leader_epoch: -1, metadata, commit_timestamp })
            }
            3 => Ok(Self {
                offset: r.i64()?,
                leader_epoch: r.i32()?,
                metadata: r.string(false)?,
                commit_timestamp: r.i64()?,
            }),
            v => Err(SchemaError(format!("unsupported offset value version {v}"))),
        }
    }
}

impl GroupValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(3);
        put_string(&mut out, &self.protocol_type);
        out.put_i32(self.generation);
        put_nullable(&mut out, self.protocol.as_deref());
        put_nullable(&mut out, self.leader.as_deref());
        out.put_i64(self.current_state_timestamp);
        out.put_i32(self.members.len() as i32);
        for m in &self.members {
            put_string(&mut out, &m.member_id);
            put_nullable(&mut out, m.group_instance_id.as_deref());
            put_string(&mut out, &m.client_id);
            put_string(&mut out, &m.client_host);
            out.put_i32(m.rebalance_timeout);
            out.put_i32(m.session_timeout);
            put_bytes(&mut out, &m.subscription);
            put_bytes(&mut out, &m.assignment);
        }
        out
    }

    /// # Errors
    /// Truncated values or versions other than 3.
    pub fn decode(bytes: &[u8]) -> Result<Self, SchemaError> {
        let mut r = Readable::new(bytes);
        let version = r.i16()?;
        if version != 3 {
            return Err(SchemaError(format!("unsupported group value version {version}")));
        }
        let protocol_type = r.string(false)?;
        let generation = r.i32()?;
        let protocol = r.nullable_string(false)?;
        let leader = r.nullable_string(false)?;
        let current_state_timestamp = r.i64()?;
        // Every member takes at least 24 bytes: the count is bounded by what is left.
        let count = r.count(false, 24)?.ok_or_else(|| SchemaError("null member array".into()))?;
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
        Ok(Self { protocol_type, generation, protocol, leader, current_state_timestamp, members })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let k = RecordKey::Offset { group: "g".into(), topic: "t".into(), partition: 3 };
        assert_eq!(RecordKey::decode(&k.encode()).unwrap(), k);
        let k = RecordKey::Group { group: "g".into() };
        assert_eq!(RecordKey::decode(&k.encode()).unwrap(), k);
        let v =
            OffsetValue { offset: 42, leader_epoch: -1, metadata: "m".into(), commit_timestamp: 7 };
        assert_eq!(OffsetValue::decode(&v.encode()).unwrap(), v);
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
        assert_eq!(GroupValue::decode(&g.encode()).unwrap(), g);
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
        .encode();
        for n in 0..g.len() - 1 {
            assert!(GroupValue::decode(&g[..n]).is_err(), "{n}");
        }
        let mut hostile = g.clone();
        let len = hostile.len();
        hostile[len - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(GroupValue::decode(&hostile).is_err());
        assert!(RecordKey::decode(&[0, 9]).is_err());
    }
}

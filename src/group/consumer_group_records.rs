//! The `__consumer_offsets` records of consumer groups (the KIP-848
//! protocol), in Apache Kafka's schemas, so `kafka-dump-log
//! --offsets-decoder` reads them and the cleaner compacts them by key.
//!
//! Keys are classic (non-flexible): a version i16 that names the record type,
//! then strings with an i16 length. Values are version 0 of a flexible
//! schema: compact strings and arrays (unsigned varint of length + 1), 16-byte
//! uuids, and an empty tagged-field section after every struct.
//!
//! ```text
//! key 3 ConsumerGroupMetadata                (group)          value: epoch i32
//! key 4 ConsumerGroupPartitionMetadata       (group)          value: [topic id, name, partitions, []]
//! key 5 ConsumerGroupMemberMetadata          (group, member)  value: instance?, rack?, client id,
//!       client host, [subscribed topic], regex?, rebalance timeout i32, server assignor?
//! key 6 ConsumerGroupTargetAssignmentMetadata (group)         value: assignment epoch i32
//! key 7 ConsumerGroupTargetAssignmentMember  (group, member)  value: [topic id, [partition]]
//! key 8 ConsumerGroupCurrentMemberAssignment (group, member)  value: member epoch, previous
//!       member epoch, state i8, assigned [topic id, [partition]], pending revocation (same)
//! ```
//! A null value is a tombstone. Decoding checks every length against the
//! bytes present before allocating and requires the whole value to be read;
//! encoding refuses a field too long for its length (`crate::writable`).

use std::collections::{BTreeMap, BTreeSet};

use super::error::SchemaError;
use crate::readable::Readable;
use crate::writable::{Writable, WriteError};

/// A topic's id as the log layer keeps it.
pub type TopicId = [u8; 16];

/// Partitions by topic id, as assignments are kept and written.
pub type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// The key of a consumer group record (the key version names the type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerGroupKey {
    Metadata { group: String },
    PartitionMetadata { group: String },
    MemberMetadata { group: String, member: String },
    TargetAssignmentMetadata { group: String },
    TargetAssignmentMember { group: String, member: String },
    CurrentMemberAssignment { group: String, member: String },
}

impl ConsumerGroupKey {
    pub fn group(&self) -> &str {
        match self {
            ConsumerGroupKey::Metadata { group }
            | ConsumerGroupKey::PartitionMetadata { group }
            | ConsumerGroupKey::MemberMetadata { group, .. }
            | ConsumerGroupKey::TargetAssignmentMetadata { group }
            | ConsumerGroupKey::TargetAssignmentMember { group, .. }
            | ConsumerGroupKey::CurrentMemberAssignment { group, .. } => group,
        }
    }

    /// # Errors
    /// A group or member id longer than a Kafka string (32,767 bytes).
    pub fn encode(&self) -> Result<Vec<u8>, SchemaError> {
        let mut out = Writable::with_capacity(32);
        let (version, group, member) = match self {
            ConsumerGroupKey::Metadata { group } => (3, group, None),
            ConsumerGroupKey::PartitionMetadata { group } => (4, group, None),
            ConsumerGroupKey::MemberMetadata { group, member } => (5, group, Some(member)),
            ConsumerGroupKey::TargetAssignmentMetadata { group } => (6, group, None),
            ConsumerGroupKey::TargetAssignmentMember { group, member } => (7, group, Some(member)),
            ConsumerGroupKey::CurrentMemberAssignment { group, member } => (8, group, Some(member)),
        };
        out.i16(version);
        out.string(group, false)?;
        if let Some(member) = member {
            out.string(member, false)?;
        }
        Ok(out.into_vec())
    }

    /// The rest of a key whose version (3 to 8) was read already.
    ///
    /// # Errors
    /// Truncated keys or a version outside 3..=8.
    pub fn decode(version: i16, r: &mut Readable<'_>) -> Result<Self, SchemaError> {
        let group = r.string(false)?;
        Ok(match version {
            3 => ConsumerGroupKey::Metadata { group },
            4 => ConsumerGroupKey::PartitionMetadata { group },
            5 => ConsumerGroupKey::MemberMetadata { group, member: r.string(false)? },
            6 => ConsumerGroupKey::TargetAssignmentMetadata { group },
            7 => ConsumerGroupKey::TargetAssignmentMember { group, member: r.string(false)? },
            8 => ConsumerGroupKey::CurrentMemberAssignment { group, member: r.string(false)? },
            v => return Err(SchemaError::new(format!("unknown key version {v}"))),
        })
    }
}

/// ConsumerGroupMemberMetadataValue v0; `classic` is its tagged field 0,
/// present only for a member that speaks the classic protocol.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadataValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub classic: Option<ClassicMemberMetadata>,
}

/// ClassicMemberMetadata: how a member of a consumer group that speaks the
/// classic protocol (JoinGroup, SyncGroup, Heartbeat) joined.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    /// (protocol name, its metadata: a ConsumerProtocolSubscription).
    pub supported_protocols: Vec<(String, Vec<u8>)>,
}

/// The tag of `ClassicMemberMetadata` in ConsumerGroupMemberMetadataValue.
const CLASSIC_MEMBER_METADATA_TAG: u32 = 0;

/// One topic of ConsumerGroupPartitionMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    pub id: TopicId,
    pub name: String,
    pub partitions: i32,
}

/// ConsumerGroupCurrentMemberAssignmentValue v0.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CurrentAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: i8,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

/// A value-bearing consumer group record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerGroupValue {
    /// ConsumerGroupMetadataValue: the group epoch.
    Epoch(i32),
    PartitionMetadata(Vec<TopicMetadata>),
    MemberMetadata(MemberMetadataValue),
    /// ConsumerGroupTargetAssignmentMetadataValue: the assignment epoch.
    TargetAssignmentEpoch(i32),
    TargetAssignmentMember(Assignment),
    CurrentMemberAssignment(CurrentAssignmentValue),
}

impl ConsumerGroupValue {
    /// # Errors
    /// A string longer than a Kafka string (32,767 bytes), or an array
    /// longer than a count can name.
    pub fn encode(&self) -> Result<Vec<u8>, SchemaError> {
        let mut out = Writable::with_capacity(64);
        out.i16(0);
        match self {
            ConsumerGroupValue::Epoch(e) | ConsumerGroupValue::TargetAssignmentEpoch(e) => {
                out.i32(*e)
            }
            ConsumerGroupValue::PartitionMetadata(topics) => {
                out.array_len(Some(topics.len()), true)?;
                for t in topics {
                    out.raw(&t.id);
                    out.string(&t.name, true)?;
                    out.i32(t.partitions);
                    // PartitionMetadata (racks): unused since Kafka 4.0, empty.
                    out.array_len(Some(0), true)?;
                    out.empty_tags();
                }
            }
            ConsumerGroupValue::MemberMetadata(m) => {
                put_member(&mut out, m)?;
                // Its tag section carries the classic metadata.
                return Ok(out.into_vec());
            }
            ConsumerGroupValue::TargetAssignmentMember(a) => put_assignment(&mut out, a)?,
            ConsumerGroupValue::CurrentMemberAssignment(c) => {
                out.i32(c.member_epoch);
                out.i32(c.previous_member_epoch);
                out.i8(c.state);
                put_assignment(&mut out, &c.assigned)?;
                put_assignment(&mut out, &c.pending_revocation)?;
            }
        }
        out.empty_tags();
        Ok(out.into_vec())
    }

    /// The value of a record whose key is `key`.
    ///
    /// # Errors
    /// Truncated values, a version other than 0, lengths beyond the bytes.
    pub fn decode(key: &ConsumerGroupKey, bytes: &[u8]) -> Result<Self, SchemaError> {
        let mut r = Readable::new(bytes);
        let version = r.i16()?;
        if version != 0 {
            return Err(SchemaError::new(format!("unsupported value version {version}")));
        }
        let value = match key {
            ConsumerGroupKey::Metadata { .. } => ConsumerGroupValue::Epoch(r.i32()?),
            ConsumerGroupKey::TargetAssignmentMetadata { .. } => {
                ConsumerGroupValue::TargetAssignmentEpoch(r.i32()?)
            }
            ConsumerGroupKey::PartitionMetadata { .. } => {
                ConsumerGroupValue::PartitionMetadata(read_topics(&mut r)?)
            }
            ConsumerGroupKey::MemberMetadata { .. } => {
                let member = read_member(&mut r)?;
                r.finish()?;
                return Ok(ConsumerGroupValue::MemberMetadata(member));
            }
            ConsumerGroupKey::TargetAssignmentMember { .. } => {
                ConsumerGroupValue::TargetAssignmentMember(read_assignment(&mut r)?)
            }
            ConsumerGroupKey::CurrentMemberAssignment { .. } => {
                ConsumerGroupValue::CurrentMemberAssignment(CurrentAssignmentValue {
                    member_epoch: r.i32()?,
                    previous_member_epoch: r.i32()?,
                    state: r.i8()?,
                    assigned: read_assignment(&mut r)?,
                    pending_revocation: read_assignment(&mut r)?,
                })
            }
        };
        skip_tags(&mut r)?;
        r.finish()?;
        Ok(value)
    }
}

fn put_member(out: &mut Writable, m: &MemberMetadataValue) -> Result<(), WriteError> {
    out.nullable_string(m.instance_id.as_deref(), true)?;
    out.nullable_string(m.rack_id.as_deref(), true)?;
    out.string(&m.client_id, true)?;
    out.string(&m.client_host, true)?;
    out.array_len(Some(m.subscribed_topic_names.len()), true)?;
    for t in &m.subscribed_topic_names {
        out.string(t, true)?;
    }
    out.nullable_string(m.subscribed_topic_regex.as_deref(), true)?;
    out.i32(m.rebalance_timeout_ms);
    out.nullable_string(m.server_assignor.as_deref(), true)?;
    let Some(classic) = &m.classic else {
        out.empty_tags();
        return Ok(());
    };
    let mut field = Writable::with_capacity(64);
    field.i32(classic.session_timeout_ms);
    field.array_len(Some(classic.supported_protocols.len()), true)?;
    for (name, metadata) in &classic.supported_protocols {
        field.string(name, true)?;
        field.array_len(Some(metadata.len()), true)?;
        field.raw(metadata);
        field.empty_tags();
    }
    field.empty_tags();
    let field = field.into_vec();
    out.uvarint(1);
    out.uvarint(CLASSIC_MEMBER_METADATA_TAG);
    let size = u32::try_from(field.len())
        .map_err(|_| WriteError(format!("a classic member metadata of {} bytes", field.len())))?;
    out.uvarint(size);
    out.raw(&field);
    Ok(())
}

fn put_assignment(out: &mut Writable, a: &Assignment) -> Result<(), WriteError> {
    out.array_len(Some(a.len()), true)?;
    for (id, partitions) in a {
        out.raw(id);
        out.array_len(Some(partitions.len()), true)?;
        for p in partitions {
            out.i32(*p);
        }
        out.empty_tags();
    }
    Ok(())
}

fn skip_tags(r: &mut Readable<'_>) -> Result<(), SchemaError> {
    r.tagged_fields(|_, _| Ok::<(), SchemaError>(()))
}

fn read_uuid(r: &mut Readable<'_>) -> Result<TopicId, SchemaError> {
    let b = r.take(16)?;
    let mut id = [0u8; 16];
    id.copy_from_slice(b);
    Ok(id)
}

fn read_count(r: &mut Readable<'_>, min_size: usize) -> Result<usize, SchemaError> {
    r.count(true, min_size)?.ok_or_else(|| SchemaError::new("null array where the schema has none"))
}

fn read_assignment(r: &mut Readable<'_>) -> Result<Assignment, SchemaError> {
    let mut out = Assignment::new();
    // A topic takes at least its uuid, an array length and a tag section.
    for _ in 0..read_count(r, 18)? {
        let id = read_uuid(r)?;
        let mut partitions = BTreeSet::new();
        for _ in 0..read_count(r, 4)? {
            partitions.insert(r.i32()?);
        }
        skip_tags(r)?;
        out.entry(id).or_default().extend(partitions);
    }
    Ok(out)
}

fn read_topics(r: &mut Readable<'_>) -> Result<Vec<TopicMetadata>, SchemaError> {
    let n = read_count(r, 23)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let id = read_uuid(r)?;
        let name = r.string(true)?;
        let partitions = r.i32()?;
        for _ in 0..read_count(r, 6)? {
            r.i32()?;
            for _ in 0..read_count(r, 1)? {
                r.string(true)?;
            }
            skip_tags(r)?;
        }
        skip_tags(r)?;
        topics.push(TopicMetadata { id, name, partitions });
    }
    Ok(topics)
}

fn read_member(r: &mut Readable<'_>) -> Result<MemberMetadataValue, SchemaError> {
    let instance_id = r.nullable_string(true)?;
    let rack_id = r.nullable_string(true)?;
    let client_id = r.string(true)?;
    let client_host = r.string(true)?;
    let n = read_count(r, 1)?;
    let mut subscribed_topic_names = Vec::with_capacity(n);
    for _ in 0..n {
        subscribed_topic_names.push(r.string(true)?);
    }
    Ok(MemberMetadataValue {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex: r.nullable_string(true)?,
        rebalance_timeout_ms: r.i32()?,
        server_assignor: r.nullable_string(true)?,
        classic: read_member_tags(r)?,
    })
}

/// The member value's tag section: the classic metadata (tag 0), if any.
fn read_member_tags(r: &mut Readable<'_>) -> Result<Option<ClassicMemberMetadata>, SchemaError> {
    let mut classic = None;
    r.tagged_fields(|tag, data| {
        if tag == CLASSIC_MEMBER_METADATA_TAG {
            classic = Some(read_classic(data)?);
        }
        Ok::<(), SchemaError>(())
    })?;
    Ok(classic)
}

fn read_classic(data: &[u8]) -> Result<ClassicMemberMetadata, SchemaError> {
    let mut r = Readable::new(data);
    let session_timeout_ms = r.i32()?;
    // A protocol takes at least a name length, a metadata length and a tag section.
    let n = read_count(&mut r, 3)?;
    let mut supported_protocols = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string(true)?;
        let len = read_count(&mut r, 1)?;
        let metadata = r.take(len)?.to_vec();
        skip_tags(&mut r)?;
        supported_protocols.push((name, metadata));
    }
    skip_tags(&mut r)?;
    r.finish()?;
    Ok(ClassicMemberMetadata { session_timeout_ms, supported_protocols })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::schema::RecordKey;

    fn assignment() -> Assignment {
        [([1u8; 16], [0, 2, 4].into()), ([2u8; 16], [1].into())].into()
    }

    fn keys() -> Vec<ConsumerGroupKey> {
        let (group, member) = ("g".to_string(), "m".to_string());
        vec![
            ConsumerGroupKey::Metadata { group: group.clone() },
            ConsumerGroupKey::PartitionMetadata { group: group.clone() },
            ConsumerGroupKey::MemberMetadata { group: group.clone(), member: member.clone() },
            ConsumerGroupKey::TargetAssignmentMetadata { group: group.clone() },
            ConsumerGroupKey::TargetAssignmentMember {
                group: group.clone(),
                member: member.clone(),
            },
            ConsumerGroupKey::CurrentMemberAssignment { group, member },
        ]
    }

    fn values() -> Vec<ConsumerGroupValue> {
        vec![
            ConsumerGroupValue::Epoch(7),
            ConsumerGroupValue::PartitionMetadata(vec![TopicMetadata {
                id: [3; 16],
                name: "orders".into(),
                partitions: 6,
            }]),
            ConsumerGroupValue::MemberMetadata(MemberMetadataValue {
                instance_id: Some("i".into()),
                rack_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["orders".into(), "audit".into()],
                subscribed_topic_regex: None,
                rebalance_timeout_ms: 300_000,
                server_assignor: Some("uniform".into()),
                classic: Some(ClassicMemberMetadata {
                    session_timeout_ms: 45_000,
                    supported_protocols: vec![("range".into(), vec![0, 3, 0, 0, 0, 0])],
                }),
            }),
            ConsumerGroupValue::TargetAssignmentEpoch(7),
            ConsumerGroupValue::TargetAssignmentMember(assignment()),
            ConsumerGroupValue::CurrentMemberAssignment(CurrentAssignmentValue {
                member_epoch: 7,
                previous_member_epoch: 6,
                state: 1,
                assigned: assignment(),
                pending_revocation: [([2u8; 16], [3].into())].into(),
            }),
        ]
    }

    #[test]
    fn keys_and_values_round_trip() {
        for (key, value) in keys().into_iter().zip(values()) {
            match RecordKey::decode(&key.encode().unwrap()).expect("key") {
                RecordKey::Consumer(k) => assert_eq!(k, key),
                other => panic!("{other:?}"),
            }
            let bytes = value.encode().unwrap();
            assert_eq!(ConsumerGroupValue::decode(&key, &bytes).expect("value"), value);
            for n in 0..bytes.len() {
                assert!(ConsumerGroupValue::decode(&key, &bytes[..n]).is_err(), "{key:?} cut {n}");
            }
        }
    }

    #[test]
    fn the_epoch_record_has_kafkas_bytes() {
        // Key: version 3, group "g". Value: version 0, epoch 7, no tagged fields.
        let key = ConsumerGroupKey::Metadata { group: "g".into() }.encode().unwrap();
        assert_eq!(key, [0, 3, 0, 1, b'g']);
        assert_eq!(ConsumerGroupValue::Epoch(7).encode().unwrap(), [0, 0, 0, 0, 0, 7, 0]);
    }

    #[test]
    fn hostile_counts_are_refused_before_allocating() {
        let key =
            ConsumerGroupKey::TargetAssignmentMember { group: "g".into(), member: "m".into() };
        // Version 0, then a compact count of 2^28 topics in four bytes.
        let bytes = [0, 0, 0x80, 0x80, 0x80, 0x01];
        assert!(ConsumerGroupValue::decode(&key, &bytes).is_err());
    }

    #[test]
    fn bytes_after_a_value_are_refused() {
        for (key, value) in keys().into_iter().zip(values()) {
            let mut bytes = value.encode().unwrap();
            bytes.push(0);
            assert!(ConsumerGroupValue::decode(&key, &bytes).is_err(), "{key:?}");
        }
    }
}

//! The consumer protocol carried in the classic group protocol's opaque
//! bytes (Kafka's `ConsumerProtocol`): a JoinGroup's subscription and a
//! SyncGroup's assignment. The coordinator reads and writes them only when a
//! group changes kind or a classic member lives in a consumer group (KIP-848
//! online migration); a classic group's own members exchange them opaquely.
//!
//! Both start with an i16 version. A version above the newest this build
//! knows (3) is read as the newest, as Kafka's readers do: later versions
//! only add fields at the end. The decoders bound every count by the bytes
//! present (the vendored `kafka-protocol` patch).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::{
    ConsumerProtocolAssignment, TopicPartition as AssignedTopic,
};
use kafka_protocol::messages::consumer_protocol_subscription::ConsumerProtocolSubscription;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};

use super::error::SchemaError;

/// Partitions by topic name, as the consumer protocol names them.
pub(super) type NamedPartitions = Vec<(String, Vec<i32>)>;

/// A member's ConsumerProtocolSubscription.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Subscription {
    pub(super) version: i16,
    pub(super) topics: Vec<String>,
    /// The partitions the member still owns (v1+; eager clients send none).
    pub(super) owned: NamedPartitions,
    pub(super) rack_id: Option<String>,
}

/// The version an embedded message starts with, clamped to what `M` reads.
fn version_of<M: Message>(bytes: &mut &[u8]) -> Result<i16, SchemaError> {
    if bytes.remaining() < 2 {
        return Err(SchemaError::new("the embedded consumer protocol has no version"));
    }
    let version = bytes.get_i16();
    if version < M::VERSIONS.min {
        return Err(SchemaError::new(format!("consumer protocol version {version}")));
    }
    Ok(version.min(M::VERSIONS.max))
}

/// # Errors
/// Malformed or truncated bytes.
pub(super) fn decode_subscription(bytes: &[u8]) -> Result<Subscription, SchemaError> {
    let mut b = bytes;
    let version = version_of::<ConsumerProtocolSubscription>(&mut b)?;
    let s = ConsumerProtocolSubscription::decode(&mut b, version)
        .map_err(|e| SchemaError::new(format!("malformed consumer subscription: {e}")))?;
    Ok(Subscription {
        version,
        topics: s.topics.iter().map(|t| t.to_string()).collect(),
        owned: s
            .owned_partitions
            .into_iter()
            .map(|tp| (tp.topic.0.to_string(), tp.partitions))
            .collect(),
        rack_id: s.rack_id.map(|r| r.to_string()),
    })
}

/// A ConsumerProtocolAssignment's partitions. Empty bytes (a member that
/// never synced) are no partitions.
///
/// # Errors
/// Malformed bytes, or user data (a custom assignor's, which a consumer
/// group would lose).
pub(super) fn decode_assignment(bytes: &[u8]) -> Result<NamedPartitions, SchemaError> {
    if bytes.is_empty() {
        return Ok(vec![]);
    }
    let mut b = bytes;
    let version = version_of::<ConsumerProtocolAssignment>(&mut b)?;
    let a = ConsumerProtocolAssignment::decode(&mut b, version)
        .map_err(|e| SchemaError::new(format!("malformed consumer assignment: {e}")))?;
    if a.user_data.as_ref().is_some_and(|d| !d.is_empty()) {
        return Err(SchemaError::new("the assignment carries a custom assignor's user data"));
    }
    Ok(a.assigned_partitions
        .into_iter()
        .map(|tp| (tp.topic.0.to_string(), tp.partitions))
        .collect())
}

/// A ConsumerProtocolAssignment of `partitions` at `version` (the member's
/// subscription version, clamped to what this build writes).
pub(super) fn encode_assignment(version: i16, partitions: &NamedPartitions) -> Bytes {
    let version = version.clamp(0, ConsumerProtocolAssignment::VERSIONS.max);
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
        partitions
            .iter()
            .map(|(topic, ps)| {
                AssignedTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(ps.clone())
            })
            .collect(),
    );
    let mut out = BytesMut::new();
    out.put_i16(version);
    // Topic names come from the catalog (valid Kafka strings), so this
    // cannot fail; an empty assignment is the fallback all the same.
    if assignment.encode(&mut out, version).is_err() {
        out.truncate(2);
        let _ = ConsumerProtocolAssignment::default().encode(&mut out, version);
    }
    out.freeze()
}

/// The subscription version a member's protocol metadata starts with (0
/// when it has none).
pub(super) fn metadata_version(metadata: &[u8]) -> i16 {
    match metadata {
        [a, b, ..] => i16::from_be_bytes([*a, *b]),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;

    fn subscription_bytes(version: i16) -> Vec<u8> {
        let s = ConsumerProtocolSubscription::default()
            .with_topics(vec![StrBytes::from_static_str("orders")])
            .with_owned_partitions(vec![OwnedTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("orders")))
                .with_partitions(vec![1, 4])])
            .with_rack_id(Some(StrBytes::from_static_str("r1")));
        let mut out = BytesMut::new();
        out.put_i16(version);
        s.encode(&mut out, version.min(3)).unwrap();
        out.to_vec()
    }

    #[test]
    fn subscriptions_are_read_at_their_version_and_newer_ones_as_the_newest() {
        let s = decode_subscription(&subscription_bytes(3)).unwrap();
        assert_eq!(s.topics, ["orders"]);
        assert_eq!(s.owned, [("orders".to_string(), vec![1, 4])]);
        assert_eq!(s.rack_id.as_deref(), Some("r1"));
        let v0 = decode_subscription(&subscription_bytes(0)).unwrap();
        assert_eq!((v0.topics.len(), v0.owned.len(), v0.rack_id), (1, 0, None));
        assert_eq!(decode_subscription(&subscription_bytes(7)).unwrap().version, 3);
    }

    #[test]
    fn broken_bytes_are_refused_not_allocated() {
        let good = subscription_bytes(3);
        for n in 0..good.len() {
            assert!(decode_subscription(&good[..n]).is_err(), "cut at {n}");
        }
        // Version 0, then a count of 2^31 - 1 topics in four bytes.
        assert!(decode_subscription(&[0, 0, 0x7f, 0xff, 0xff, 0xff]).is_err());
        assert!(decode_subscription(&[0xff, 0xff]).is_err(), "negative version");
    }

    #[test]
    fn assignments_round_trip_and_user_data_is_refused() {
        let ps = vec![("orders".to_string(), vec![0, 2])];
        for v in [0, 1, 3, 9] {
            assert_eq!(decode_assignment(&encode_assignment(v, &ps)).unwrap(), ps, "v{v}");
        }
        assert_eq!(decode_assignment(&[]).unwrap(), vec![]);
        let mut with_data = BytesMut::new();
        with_data.put_i16(0);
        ConsumerProtocolAssignment::default()
            .with_user_data(Some(Bytes::from_static(b"sticky")))
            .encode(&mut with_data, 0)
            .unwrap();
        assert!(decode_assignment(&with_data).is_err());
    }
}

//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest local
//! (-4) and the first offset whose timestamp is at or after a given time.
//! With `isolation_level` read_committed (v2+) latest is the last stable
//! offset, and a lookup finding an offset at or past it finds nothing.
//!
//! Each topic needs DESCRIBE, checked before the partition's existence; a
//! denied topic's partitions are TOPIC_AUTHORIZATION_FAILED.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::error::error_code;
use super::RequestContext;
use crate::broker::Broker;
use crate::log::{FetchIsolation, TopicPartition};
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext<'_>,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let isolation = if version >= 2 {
        FetchIsolation::from_isolation_level(request.isolation_level)
    } else {
        FetchIsolation::HighWatermark
    };
    let describable = ctx.filter_authorized(
        AclOperation::Describe,
        ResourceType::Topic,
        request.topics.iter().map(|t| t.name.0.as_str()),
    );
    let denied: Vec<bool> =
        request.topics.iter().map(|t| describable.get(t.name.0.as_str()) != Some(&true)).collect();
    let mut topics = Vec::with_capacity(request.topics.len());
    for (topic, denied) in request.topics.into_iter().zip(denied) {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let r = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1)
                .with_leader_epoch(-1);
            if denied {
                partitions.push(r.with_error_code(ResponseError::TopicAuthorizationFailed.code()));
                continue;
            }
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            let r = match broker.logs.get_log(&tp) {
                None => r.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
                Some(log) => match log.write().fetch_offset_for_isolation(p.timestamp, isolation) {
                    // The leader epoch exists from v4; older encoders refuse a non-default value.
                    Ok(Some((ts, offset))) => r
                        .with_timestamp(ts)
                        .with_offset(offset)
                        .with_leader_epoch(if version >= 4 { 0 } else { -1 }),
                    Ok(None) => r,
                    Err(e) => r.with_error_code(error_code(&e).code()),
                },
            };
            partitions.push(r);
        }
        partitions.sort_by_key(|p| p.partition_index);
        topics.push(
            ListOffsetsTopicResponse::default().with_name(topic.name).with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

//! DescribeTopicPartitions (KIP-966, v0): the topics' partitions as Metadata
//! describes them, paged. Kafka 3.8+ `kafka-topics --describe` asks it
//! before Metadata.
//!
//! As Kafka's `DescribeTopicPartitionsRequestHandler`:
//! * No topic named: every topic this principal may DESCRIBE (the others
//!   left out silently); named topics: each, an unauthorized one answered
//!   TOPIC_AUTHORIZATION_FAILED with a nil id whether or not it exists, a
//!   missing one UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a
//!   name no topic could have).
//! * Topics in name order from the cursor's topic (its partitions from the
//!   cursor's index), at most `min(response_partition_limit,
//!   max.request.partition.size.limit)` partitions (at least 1); where the
//!   limit cuts, `next_cursor` names the next partition to describe.
//! * A cursor whose topic is not among the named ones, or whose partition
//!   is negative, fails the request with INVALID_REQUEST.
//! * A partition has no error code even without a leader (leader -1);
//!   eligible leader replicas (KIP-966's ELR) are empty: sediment elects
//!   from the ISR only.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse};

use super::metadata::Catalog;
use super::{topic_name, RequestContext};
use crate::api::KafkaApis;
use crate::log::LogManager;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let cursor = request.cursor.as_ref().map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let from = cursor.as_ref().map_or("", |(t, _)| t.as_str()).to_string();
    let all = request.topics.is_empty();
    let catalog = Catalog::of(broker);
    let mut names: Vec<String> = if all {
        catalog.names_and_ids(broker).into_iter().map(|(name, _)| name).collect()
    } else {
        request.topics.iter().map(|t| t.name.0.to_string()).collect()
    };
    names.retain(|n| *n >= from);
    names.sort();
    names.dedup();
    if let Some((topic, partition)) = &cursor {
        if (!all && !names.contains(topic)) || *partition < 0 {
            return refused(&request, ResponseError::InvalidRequest);
        }
    }
    let limit = usize::try_from(request.response_partition_limit)
        .unwrap_or(0)
        .min(broker.config.max_request_partition_size_limit())
        .max(1);
    let mut response = DescribeTopicPartitionsResponse::default();
    let mut denied = Vec::new();
    let mut remaining = limit;
    for name in names {
        if !ctx.authorize(AclOperation::Describe, ResourceType::Topic, &name) {
            if !all {
                denied.push(error_topic(&name, ResponseError::TopicAuthorizationFailed));
            }
            continue;
        }
        if remaining == 0 {
            response.next_cursor = Some(cursor_at(&name, 0));
            break;
        }
        let Some(described) = catalog.describe(broker, &name) else {
            if !all {
                let error = match LogManager::validate_topic_name(&name) {
                    Ok(()) => ResponseError::UnknownTopicOrPartition,
                    Err(_) => ResponseError::InvalidTopicException,
                };
                response.topics.push(error_topic(&name, error));
            }
            continue;
        };
        let start = match &cursor {
            Some((topic, partition)) if *topic == name => *partition,
            _ => 0,
        };
        let (topic, next) = page(ctx, described, start, remaining);
        remaining -= topic.partitions.len();
        response.topics.push(topic);
        if let Some(next) = next {
            response.next_cursor = Some(cursor_at(&name, next));
            break;
        }
    }
    response.topics.extend(denied);
    response
}

/// `described`'s partitions from index `start`, at most `max` of them, and
/// the index of the first one left out (if any).
fn page(
    ctx: &RequestContext<'_>,
    described: MetadataResponseTopic,
    start: i32,
    max: usize,
) -> (DescribeTopicPartitionsResponseTopic, Option<i32>) {
    let name = described.name.clone().map(|n| n.0.to_string()).unwrap_or_default();
    let from: Vec<_> =
        described.partitions.into_iter().filter(|p| p.partition_index >= start).collect();
    let next = from.get(max).map(|p| p.partition_index);
    let partitions = from
        .into_iter()
        .take(max)
        .map(|p| {
            DescribeTopicPartitionsResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_leader_id(p.leader_id)
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(p.replica_nodes)
                .with_isr_nodes(p.isr_nodes)
                .with_eligible_leader_replicas(Some(Vec::new()))
                .with_last_known_elr(Some(Vec::new()))
                .with_offline_replicas(p.offline_replicas)
        })
        .collect();
    let topic = DescribeTopicPartitionsResponseTopic::default()
        .with_name(described.name)
        .with_topic_id(described.topic_id)
        .with_is_internal(described.is_internal)
        .with_partitions(partitions)
        .with_topic_authorized_operations(ctx.authorized_operations(ResourceType::Topic, &name));
    (topic, next)
}

fn cursor_at(topic: &str, partition: i32) -> Cursor {
    Cursor::default().with_topic_name(topic_name(topic)).with_partition_index(partition)
}

fn error_topic(name: &str, error: ResponseError) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(error.code())
        .with_name(Some(topic_name(name)))
        .with_is_internal(name.starts_with("__"))
        .with_topic_authorized_operations(i32::MIN)
}

/// A failed request (Kafka's error response): each named topic with `error`.
fn refused(
    request: &DescribeTopicPartitionsRequest,
    error: ResponseError,
) -> DescribeTopicPartitionsResponse {
    let topics = request.topics.iter().map(|t| error_topic(t.name.0.as_str(), error)).collect();
    DescribeTopicPartitionsResponse::default().with_topics(topics)
}

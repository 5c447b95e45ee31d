//! OffsetsForLeaderEpoch (KIP-101, KIP-320): for each partition, the
//! largest leader epoch at or below the requested one and the offset after
//! its last record, from the partition's `leader-epoch-checkpoint`. A
//! consumer asks it after a leader change to find out whether the log it
//! read was truncated below its position; a follower asks it (or reads
//! Fetch's diverging epoch) to find where to truncate.
//!
//! Answers as Kafka's: the current epoch answers the log end; an epoch
//! below every known one answers itself with the first epoch's start; one
//! above every known one answers (-1, -1) with no error. A
//! `current_leader_epoch` older than the partition's is FENCED_LEADER_EPOCH,
//! a newer one UNKNOWN_LEADER_EPOCH (`leader_epoch_error`).
//!
//! CLUSTER_ACTION on the cluster covers every topic (a follower); without
//! it each topic needs DESCRIBE (a consumer, KIP-320), and a denied topic's
//! partitions are TOPIC_AUTHORIZATION_FAILED.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::error::{error_code, leader_epoch_error};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::log::leader_epoch_cache::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
use crate::log::TopicPartition;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    // Asked quietly: a consumer without it is checked per topic instead.
    let cluster_action = ctx.is_authorized(
        AclOperation::ClusterAction,
        ResourceType::Cluster,
        crate::security::acl::CLUSTER_NAME,
    );
    let describable = if cluster_action {
        Default::default()
    } else {
        ctx.filter_authorized(
            AclOperation::Describe,
            ResourceType::Topic,
            request.topics.iter().map(|t| t.topic.0.as_str()),
        )
    };
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.topic.0.as_str();
            let allowed = cluster_action || describable.get(name) == Some(&true);
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    if allowed {
                        end_offset(broker, &TopicPartition::new(name, p.partition), p)
                    } else {
                        refused(p.partition, ResponseError::TopicAuthorizationFailed)
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

fn end_offset(
    broker: &KafkaApis,
    tp: &TopicPartition,
    p: &OffsetForLeaderPartition,
) -> EpochEndOffset {
    if let Some(code) = broker.not_led(tp) {
        return refused(p.partition, code);
    }
    let Some(log) = broker.logs.get_log(tp) else {
        return refused(p.partition, error_code(&broker.logs.absent_partition_error(tp)));
    };
    let log = log.read();
    if let Some(code) = leader_epoch_error(p.current_leader_epoch, log.leader_epoch()) {
        return refused(p.partition, code);
    }
    let (epoch, offset) = log
        .end_offset_for_epoch(p.leader_epoch)
        .unwrap_or((UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET));
    EpochEndOffset::default()
        .with_partition(p.partition)
        .with_leader_epoch(epoch)
        .with_end_offset(offset)
}

fn refused(partition: i32, code: ResponseError) -> EpochEndOffset {
    EpochEndOffset::default()
        .with_partition(partition)
        .with_error_code(code.code())
        .with_leader_epoch(UNDEFINED_EPOCH)
        .with_end_offset(UNDEFINED_EPOCH_OFFSET)
}

//! DescribeProducers (v0): per partition, every producer the partition's
//! producer state holds (Kafka's `UnifiedLog.activeProducers`): producer id,
//! epoch, last sequence (-1 with no cached batch), last timestamp,
//! coordinator epoch of its last marker (-1 before any) and the first offset
//! of its open transaction (-1 if none). `kafka-transactions
//! describe-producers`, `find-hanging` and `abort` read it.
//!
//! A partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION, an offline
//! one KAFKA_STORAGE_ERROR (Kafka's `getPartitionOrError`). The state is read
//! under the log's read lock and copied out; producers are listed by id.
//! Each topic needs READ on it, checked before its existence:
//! TOPIC_AUTHORIZATION_FAILED for all its partitions otherwise (Kafka's
//! `handleDescribeProducersRequest`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::log::TopicPartition;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let readable =
                ctx.authorize(AclOperation::Read, ResourceType::Topic, topic.name.as_str());
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| {
                    let response = if readable {
                        describe(broker, &TopicPartition::new(topic.name.as_str(), index))
                    } else {
                        PartitionResponse::default()
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                            .with_error_message(Some(str_bytes("Topic authorization failed.")))
                    };
                    response.with_partition_index(index)
                })
                .collect();
            TopicResponse::default().with_name(topic.name.clone()).with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

fn describe(broker: &KafkaApis, tp: &TopicPartition) -> PartitionResponse {
    if let Some(code) = broker.not_led(tp) {
        return PartitionResponse::default()
            .with_partition_index(tp.partition)
            .with_error_code(code.code());
    }
    let Some(log) = broker.logs.get_log(tp) else {
        let error = if broker.logs.offline_partitions().contains_key(tp) {
            ResponseError::KafkaStorageError
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        return PartitionResponse::default().with_error_code(error.code());
    };
    let log = log.read();
    let mut producers: Vec<ProducerState> = log
        .producer_state()
        .active_producers()
        .map(|(pid, e)| {
            ProducerState::default()
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(i32::from(e.epoch()))
                .with_last_sequence(e.last_seq())
                .with_last_timestamp(e.last_timestamp())
                .with_coordinator_epoch(e.coordinator_epoch())
                .with_current_txn_start_offset(e.current_txn_first_offset().unwrap_or(-1))
        })
        .collect();
    drop(log);
    producers.sort_by_key(|p| p.producer_id.0);
    PartitionResponse::default().with_active_producers(producers)
}

//! DeleteRecords: move a partition's log start offset forward (offset -1 means
//! the high watermark); whole segments below it are removed by retention.
//! Each topic needs DELETE on it, checked before the partition's existence:
//! TOPIC_AUTHORIZATION_FAILED otherwise (Kafka's `handleDeleteRecordsRequest`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::error::error_code;
use super::RequestContext;
use crate::api::KafkaApis;
use crate::log::TopicPartition;
use crate::security::acl::{AclOperation, ResourceType};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let deletable: Vec<bool> = {
        let allowed = ctx.filter_authorized(
            AclOperation::Delete,
            ResourceType::Topic,
            request.topics.iter().map(|t| t.name.0.as_str()),
        );
        request.topics.iter().map(|t| allowed.get(t.name.0.as_str()) == Some(&true)).collect()
    };
    let topics = request
        .topics
        .into_iter()
        .zip(deletable)
        .map(|(t, deletable)| {
            let name = t.name.0.to_string();
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let r = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    if !deletable {
                        return r.with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let tp = TopicPartition::new(name.clone(), p.partition_index);
                    if let Some(code) = broker.not_led(&tp) {
                        return r.with_error_code(code.code());
                    }
                    let Some(log) = broker.logs.get_log(&tp) else {
                        let absent = broker.logs.absent_partition_error(&tp);
                        return r.with_error_code(error_code(&absent).code());
                    };
                    // A clean in progress read segments below the new start;
                    // abort it rather than swap them back in afterwards.
                    broker.logs.with_cleaning_paused(&tp, broker.cleaning(), || {
                        let mut log = log.write();
                        let target = if p.offset == -1 { log.high_watermark() } else { p.offset };
                        if target < 0 || target > log.high_watermark() {
                            return r
                                .with_error_code(ResponseError::OffsetOutOfRange.code())
                                .with_low_watermark(log.log_start_offset());
                        }
                        match log.maybe_increment_log_start_offset(target) {
                            Ok(start) => r.with_low_watermark(start),
                            Err(e) => r.with_error_code(error_code(&e).code()),
                        }
                    })
                })
                .collect();
            DeleteRecordsTopicResult::default().with_name(t.name).with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}

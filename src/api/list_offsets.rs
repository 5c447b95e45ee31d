//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest local
//! (-4), earliest pending upload (-6, v11) and the first offset whose
//! timestamp is at or after a given time.
//!
//! Tiered storage: earliest is the log start, earliest local the first offset
//! on local disk (above the log start once the oldest segments are in the
//! store only). A timestamp is looked for in the store's segments below the
//! local start first, then in the local log (Kafka's order); max timestamp
//! looks at the local segments only, as Kafka's does.
//! With `isolation_level` read_committed (v2+) latest is the last stable
//! offset, and a lookup finding an offset at or past it finds nothing.
//!
//! From v4 each partition carries the leader epoch of the offset found,
//! and a `current_leader_epoch` other than the partition's is refused as
//! Kafka refuses it (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH).
//!
//! Each topic needs DESCRIBE, checked before the partition's existence; a
//! denied topic's partitions are TOPIC_AUTHORIZATION_FAILED.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::error::{error_code, leader_epoch_error, remote_read_error_code};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::log::manager::SharedLog;
use crate::log::record_batch::NO_TIMESTAMP;
use crate::log::unified_log::read::{
    EARLIEST_LOCAL_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP, MAX_TIMESTAMP,
};
use crate::log::{FetchIsolation, TopicPartition};
use crate::security::acl::{AclOperation, ResourceType};

pub async fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let isolation = if version >= 2 {
        FetchIsolation::from_isolation_level(request.isolation_level)
    } else {
        FetchIsolation::HighWatermark
    };
    let describable = tokio::task::block_in_place(|| {
        ctx.filter_authorized(
            AclOperation::Describe,
            ResourceType::Topic,
            request.topics.iter().map(|t| t.name.0.as_str()),
        )
    });
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
            if let Some(code) = broker.not_led(&tp) {
                partitions.push(r.with_error_code(code.code()));
                continue;
            }
            let r = match broker.logs.get_log(&tp) {
                None => {
                    r.with_error_code(error_code(&broker.logs.absent_partition_error(&tp)).code())
                }
                Some(log) => {
                    // The field exists from v4; below it the decoder leaves -1.
                    let epoch_check =
                        leader_epoch_error(p.current_leader_epoch, log.read().leader_epoch());
                    match unsupported_target(p.timestamp, version).or(epoch_check) {
                        Some(code) => r.with_error_code(code.code()),
                        None => match lookup(broker, &tp, &log, p.timestamp, isolation).await {
                            // The leader epoch exists from v4; older encoders refuse a non-default value.
                            Ok(Some((ts, offset))) => r
                                .with_timestamp(ts)
                                .with_offset(offset)
                                .with_leader_epoch(if version >= 4 && offset >= 0 {
                                    log.read().epoch_at(offset)
                                } else {
                                    -1
                                }),
                            Ok(None) => r,
                            Err(code) => r.with_error_code(code.code()),
                        },
                    }
                }
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

/// A special timestamp newer than the request's version: max timestamp
/// came with v7, earliest local with v8, latest tiered (-5) with v9,
/// earliest pending upload (-6) with v11 (Kafka refuses them below, before
/// any other check of the partition).
fn unsupported_target(timestamp: i64, version: i16) -> Option<ResponseError> {
    let needs = match timestamp {
        MAX_TIMESTAMP => 7,
        EARLIEST_LOCAL_TIMESTAMP => 8,
        -5 => 9,
        EARLIEST_PENDING_UPLOAD_TIMESTAMP => 11,
        _ => return None,
    };
    (version < needs).then_some(ResponseError::UnsupportedVersion)
}

/// One partition's answer: the store's segments first for a timestamp
/// (Kafka's order: remote, then local), the local log otherwise.
async fn lookup(
    broker: &KafkaApis,
    tp: &TopicPartition,
    log: &SharedLog,
    target: i64,
    isolation: FetchIsolation,
) -> Result<Option<(i64, i64)>, ResponseError> {
    let (log_start, local_start, last_fetchable, config) = {
        let log = log.read();
        let last = match isolation {
            FetchIsolation::HighWatermark => log.high_watermark(),
            FetchIsolation::TxnCommitted => log.last_stable_offset(),
            FetchIsolation::LogEnd => log.log_end_offset(),
        };
        (
            log.log_start_offset(),
            log.local_log_start_offset(),
            last,
            log.segment_config_for_cleaning(),
        )
    };
    if target == EARLIEST_LOCAL_TIMESTAMP {
        return Ok(Some((NO_TIMESTAMP, local_start)));
    }
    let topic_id = broker.logs.topic(&tp.topic).map(|t| t.id);
    let reader = broker.replica.remote_reader().filter(|_| target >= 0 && log_start < local_start);
    if let (Some(reader), Some(id)) = (reader, topic_id) {
        let lookup =
            reader.find_offset_by_timestamp(tp, target, log_start, local_start, config, &id);
        // A store that does not answer holds this response (and the requests
        // after it on the connection) no longer than Kafka's timeout.
        match tokio::time::timeout(reader.list_offsets_timeout(), lookup).await {
            Ok(Ok(Some(found))) => return Ok(Some(found).filter(|&(_, o)| o < last_fetchable)),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                tracing::warn!(partition = %tp, target, "offset lookup in the store failed: {e}");
                return Err(remote_read_error_code(&e));
            }
            Err(_) => {
                tracing::warn!(partition = %tp, target, "offset lookup in the store timed out");
                return Err(ResponseError::RequestTimedOut);
            }
        }
    }
    tokio::task::block_in_place(|| log.write().fetch_offset_for_isolation(target, isolation))
        .map_err(|e| error_code(&e))
}

//! Fetch: whole batches from each requested partition, long-polling up to
//! `max_wait_ms` until `min_bytes` are available (woken by appends).
//!
//! Sizes follow KIP-74: `partition_max_bytes` bounds each partition and
//! `max_bytes` the response, except that the first batch of the first
//! partition with data is returned whole even when larger, so a consumer
//! always makes progress. Fetch sessions (KIP-227) are not kept: every
//! response carries session id 0, which tells the client to send full requests.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::{error_code, Broker};
use crate::log::TopicPartition;

/// Upper bound of a long poll, whatever the client asks.
const MAX_WAIT_CAP_MS: i32 = 5 * 60 * 1000;

pub async fn handle(broker: &Broker, request: FetchRequest, version: i16) -> FetchResponse {
    let wait = Duration::from_millis(request.max_wait_ms.clamp(0, MAX_WAIT_CAP_MS) as u64);
    let deadline = tokio::time::Instant::now() + wait;
    let mut appends = broker.subscribe_appends();
    loop {
        appends.borrow_and_update();
        let (response, bytes, errors) = tokio::task::block_in_place(|| read_once(broker, &request, version));
        let enough = bytes >= request.min_bytes.max(0) as usize || errors;
        if enough || tokio::time::Instant::now() >= deadline {
            return response;
        }
        match tokio::time::timeout_at(deadline, appends.changed()).await {
            Ok(Ok(())) => continue,
            // Timed out (or the broker is going away): answer with what there is.
            _ => return tokio::task::block_in_place(|| read_once(broker, &request, version)).0,
        }
    }
}

fn read_once(broker: &Broker, request: &FetchRequest, version: i16) -> (FetchResponse, usize, bool) {
    let mut remaining = request.max_bytes.max(0) as usize;
    let mut total = 0usize;
    let mut errors = false;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = if version >= 13 { broker.topic_name_by_id(&topic.topic_id) } else { Some(topic.topic.0.to_string()) };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let mut data = PartitionData::default()
                .with_partition_index(p.partition)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1)
                .with_records(Some(Bytes::new()));
            let code = match &name {
                None => Some(ResponseError::UnknownTopicId),
                Some(name) => {
                    let tp = TopicPartition::new(name.clone(), p.partition);
                    match broker.logs.get_log(&tp) {
                        None if broker.logs.offline_partitions().contains_key(&tp) => Some(ResponseError::KafkaStorageError),
                        None => Some(if version >= 13 { ResponseError::UnknownTopicId } else { ResponseError::UnknownTopicOrPartition }),
                        Some(log) => match log.read() {
                            Err(_) => Some(ResponseError::KafkaStorageError),
                            Ok(log) => {
                                let max = (p.partition_max_bytes.max(0) as usize).min(remaining);
                                match log.read(p.fetch_offset, max, total == 0) {
                                    Ok(info) => {
                                        total += info.records.len();
                                        remaining = remaining.saturating_sub(info.records.len());
                                        data = data
                                            .with_high_watermark(info.high_watermark)
                                            .with_last_stable_offset(info.high_watermark)
                                            .with_log_start_offset(info.log_start_offset)
                                            .with_records(Some(info.records));
                                        None
                                    }
                                    Err(e) => {
                                        data = data
                                            .with_high_watermark(log.high_watermark())
                                            .with_last_stable_offset(log.high_watermark())
                                            .with_log_start_offset(log.log_start_offset());
                                        Some(error_code(&e))
                                    }
                                }
                            }
                        },
                    }
                }
            };
            if let Some(code) = code {
                errors = true;
                data = data.with_error_code(code.code());
            }
            partitions.push(data);
        }
        topics.push(FetchableTopicResponse::default().with_topic(topic.topic.clone()).with_topic_id(topic.topic_id).with_partitions(partitions));
    }
    (FetchResponse::default().with_session_id(0).with_responses(topics), total, errors)
}

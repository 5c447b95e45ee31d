//! DeleteTopics by name (v0–5) or by name or id (v6+): the partitions' data is
//! removed from disk.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};

use super::error::error_code;
use super::{str_bytes, topic_name, uuid_of};
use crate::broker::Broker;

pub fn handle(broker: &Broker, request: DeleteTopicsRequest, version: i16) -> DeleteTopicsResponse {
    // (name, id) pairs as the client gave them.
    let wanted: Vec<(Option<String>, uuid::Uuid)> = if version >= 6 {
        request.topics.into_iter().map(|t| (t.name.map(|n| n.0.to_string()), t.topic_id)).collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let responses = wanted
        .into_iter()
        .map(|(name, id)| {
            let resolved = match &name {
                Some(n) => broker.logs.topic(n),
                None => broker.topic_name_by_id(&id).and_then(|n| broker.logs.topic(&n)),
            };
            let result = DeletableTopicResult::default()
                .with_name(name.clone().map(topic_name))
                .with_topic_id(id);
            let Some(info) = resolved else {
                let code = if name.is_some() {
                    ResponseError::UnknownTopicOrPartition
                } else {
                    ResponseError::UnknownTopicId
                };
                return result.with_error_code(code.code());
            };
            let result = result
                .with_name(Some(topic_name(info.name.clone())))
                .with_topic_id(uuid_of(info.id));
            if !broker.config.delete_topic_enable() {
                return result.with_error_code(ResponseError::TopicDeletionDisabled.code());
            }
            match broker.logs.delete_topic(&info.name) {
                Ok(()) => {
                    tracing::info!(topic = %info.name, "deleted topic");
                    result
                }
                Err(e) => result
                    .with_error_code(error_code(&e).code())
                    .with_error_message(Some(str_bytes(e.to_string()))),
            }
        })
        .collect();
    // Fetches parked on a deleted partition should notice now.
    broker.notify_appended();
    DeleteTopicsResponse::default().with_responses(responses)
}

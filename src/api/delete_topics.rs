//! DeleteTopics by name (v0–5) or by name or id (v6+): the partitions' data is
//! removed from disk.
//!
//! Authorization (Kafka's `ControllerApis.deleteTopics`): DELETE on the
//! cluster allows every topic; otherwise each topic needs DELETE on it, and
//! DESCRIBE decides what a refusal may say. A name the principal may not
//! describe is TOPIC_AUTHORIZATION_FAILED before its existence is looked at;
//! a describable one that does not exist is UNKNOWN_TOPIC_OR_PARTITION; one
//! without DELETE is TOPIC_AUTHORIZATION_FAILED. An id no topic has is
//! UNKNOWN_TOPIC_ID; a known id without DELETE is TOPIC_AUTHORIZATION_FAILED,
//! with the topic's name echoed only when the principal may describe it (an
//! id must not reveal a name).

use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};

use super::error::cluster_error_code;
use super::error::error_code;
use super::{str_bytes, topic_name, uuid_of, RequestContext};
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

/// What the principal may do with each topic name the request involves.
struct Access {
    describable: HashMap<String, bool>,
    deletable: HashMap<String, bool>,
}

impl Access {
    fn decide<'n>(ctx: &RequestContext<'_>, names: impl Iterator<Item = &'n str> + Clone) -> Self {
        let owned = |m: HashMap<&str, bool>| -> HashMap<String, bool> {
            m.into_iter().map(|(n, ok)| (n.to_string(), ok)).collect()
        };
        // Kafka asks for DELETE on the cluster without recording a denial.
        if ctx.is_authorized(AclOperation::Delete, ResourceType::Cluster, CLUSTER_NAME) {
            let all: HashMap<String, bool> = names.map(|n| (n.to_string(), true)).collect();
            return Self { describable: all.clone(), deletable: all };
        }
        Self {
            describable: owned(ctx.filter_authorized(
                AclOperation::Describe,
                ResourceType::Topic,
                names.clone(),
            )),
            deletable: owned(ctx.filter_authorized(
                AclOperation::Delete,
                ResourceType::Topic,
                names,
            )),
        }
    }

    fn may_describe(&self, name: &str) -> bool {
        self.describable.get(name) == Some(&true)
    }

    fn may_delete(&self, name: &str) -> bool {
        self.deletable.get(name) == Some(&true)
    }
}

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
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
    // Each entry's name: given, or the name of the topic its id is.
    let names: Vec<Option<String>> = wanted
        .iter()
        .map(|(name, id)| name.clone().or_else(|| broker.topic_name_by_id(id)))
        .collect();
    let access = Access::decide(ctx, names.iter().flatten().map(String::as_str));
    let responses = wanted
        .into_iter()
        .zip(names)
        .map(|((given, id), name)| {
            let result = DeletableTopicResult::default()
                .with_name(given.clone().map(topic_name))
                .with_topic_id(id);
            let refused = |r: DeletableTopicResult| {
                r.with_error_code(ResponseError::TopicAuthorizationFailed.code())
            };
            let Some(name) = name else {
                return result.with_error_code(ResponseError::UnknownTopicId.code());
            };
            if given.is_none() && !access.may_delete(&name) {
                let echoed = access.may_describe(&name).then(|| topic_name(name.clone()));
                return refused(result.with_name(echoed));
            }
            if !access.may_describe(&name) {
                return refused(result);
            }
            let Some(id) = broker.topic_id(&name) else {
                let code = if given.is_some() {
                    ResponseError::UnknownTopicOrPartition
                } else {
                    ResponseError::UnknownTopicId
                };
                return result.with_error_code(code.code());
            };
            if !access.may_delete(&name) {
                return refused(result);
            }
            delete(broker, &name, id, result)
        })
        .collect();
    // Fetches parked on a deleted partition should notice now.
    broker.replica.complete_all_delayed_fetches();
    DeleteTopicsResponse::default().with_responses(responses)
}

fn delete(
    broker: &KafkaApis,
    name: &str,
    id: [u8; 16],
    result: DeletableTopicResult,
) -> DeletableTopicResult {
    let result = result.with_name(Some(topic_name(name.to_string()))).with_topic_id(uuid_of(id));
    if !broker.config.delete_topic_enable() {
        return result.with_error_code(ResponseError::TopicDeletionDisabled.code());
    }
    // In a cluster the topic goes from etcd; each broker then deletes its
    // copies as it applies the deletion.
    let deleted = match &broker.topics {
        Some(topics) => {
            let now = broker.logs.clock().now_ms();
            crate::blocking::off_worker(|| {
                tokio::runtime::Handle::current().block_on(topics.delete(name, now))
            })
            .map(|_| ())
            .map_err(|e| (cluster_error_code(&e), e.to_string()))
        }
        _ => broker
            .logs
            .delete_topic(name, broker.cleaning())
            .map_err(|e| (error_code(&e), e.to_string())),
    };
    match deleted {
        Ok(()) => {
            tracing::info!(topic = %name, "deleted topic");
            result
        }
        Err((code, message)) => {
            result.with_error_code(code.code()).with_error_message(Some(str_bytes(message)))
        }
    }
}

//! CreateTopics: validate every topic (name, partition count, replication
//! factor of 1, configs) and create it unless `validate_only`.
//!
//! Authorization (Kafka's `ControllerApis.createTopics`): CREATE on the
//! cluster allows every topic; without it each name needs CREATE on the
//! topic, checked before anything else about it (so a refused name learns
//! nothing, not even that it exists): TOPIC_AUTHORIZATION_FAILED. A created
//! topic's configs (v5+), partition count and replication factor are
//! returned only with DESCRIBE_CONFIGS on it; otherwise
//! `topic_config_error_code` is TOPIC_AUTHORIZATION_FAILED and they stay
//! unset, as Kafka's `ReplicationControlManager` answers.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use super::describe_configs::topic_entries;
use super::error::error_code;
use super::{str_bytes, uuid_of, RequestContext};
use crate::api::KafkaApis;
use crate::log::{LogError, LogManager};
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let names = || request.topics.iter().map(|t| t.name.0.as_str());
    // Kafka asks for CREATE on the cluster without recording a denial, and
    // for DESCRIBE_CONFIGS only to decide what the answer shows.
    let creatable = if ctx.is_authorized(AclOperation::Create, ResourceType::Cluster, CLUSTER_NAME)
    {
        names().map(|n| (n.to_string(), true)).collect()
    } else {
        owned(ctx.filter_authorized(AclOperation::Create, ResourceType::Topic, names()))
    };
    let describable: HashMap<String, bool> = names()
        .map(|n| {
            (
                n.to_string(),
                ctx.is_authorized(AclOperation::DescribeConfigs, ResourceType::Topic, n),
            )
        })
        .collect();
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let result = CreatableTopicResult::default()
            .with_name(topic.name.clone())
            .with_num_partitions(-1)
            .with_replication_factor(-1);
        if creatable.get(&name) != Some(&true) {
            results.push(
                result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(str_bytes("Authorization failed."))),
            );
            continue;
        }
        let outcome = (|| -> Result<CreatableTopicResult, (ResponseError, String)> {
            let fail = |e: LogError| (error_code(&e), e.to_string());
            LogManager::validate_topic_name(&name).map_err(fail)?;
            let partitions = partition_count(broker, topic)?;
            let mut overrides = BTreeMap::new();
            for c in &topic.configs {
                if let Some(v) = &c.value {
                    overrides.insert(c.name.to_string(), v.to_string());
                }
            }
            let config = broker.logs.resolve_config(overrides.clone()).map_err(fail)?;
            let id = if request.validate_only {
                if broker.logs.topic(&name).is_some() {
                    return Err(fail(LogError::TopicExists(name.clone())));
                }
                [0; 16]
            } else {
                let info = broker.logs.create_topic(&name, partitions, overrides).map_err(fail)?;
                tracing::info!(topic = %name, partitions, "created topic");
                info.id
            };
            let r = result.clone().with_topic_id(uuid_of(id));
            if describable.get(&name) != Some(&true) {
                return Ok(
                    r.with_topic_config_error_code(ResponseError::TopicAuthorizationFailed.code())
                );
            }
            let mut r = r.with_num_partitions(partitions).with_replication_factor(1);
            if version >= 5 {
                let defaults = &broker.logs.topic_defaults();
                r.configs = Some(
                    topic_entries(&config, defaults)
                        .into_iter()
                        .map(|e| {
                            CreatableTopicConfigs::default()
                                .with_name(str_bytes(e.name))
                                .with_value(Some(str_bytes(e.value)))
                                .with_config_source(e.source)
                        })
                        .collect(),
                );
            }
            Ok(r)
        })();
        results.push(match outcome {
            Ok(r) => r,
            Err((code, message)) => {
                result.with_error_code(code.code()).with_error_message(Some(str_bytes(message)))
            }
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// The partition count a topic asks for (a count, the default, or an
/// assignment to this broker alone), with a replication factor of 1.
fn partition_count(
    broker: &KafkaApis,
    topic: &CreatableTopic,
) -> Result<i32, (ResponseError, String)> {
    let partitions = if !topic.assignments.is_empty() {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err((
                ResponseError::InvalidRequest,
                "give either assignments or a partition count and replication factor".into(),
            ));
        }
        if topic
            .assignments
            .iter()
            .any(|a| a.broker_ids.len() != 1 || a.broker_ids[0].0 != broker.node_id)
        {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!("every partition must be assigned to broker {} alone", broker.node_id),
            ));
        }
        topic.assignments.len() as i32
    } else if topic.num_partitions == -1 {
        broker.config.num_partitions()
    } else {
        topic.num_partitions
    };
    if partitions <= 0 {
        return Err((
            ResponseError::InvalidPartitions,
            format!("number of partitions must be larger than 0, got {partitions}"),
        ));
    }
    if topic.replication_factor != -1 && topic.replication_factor != 1 {
        return Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "replication factor {} is larger than the 1 available broker",
                topic.replication_factor
            ),
        ));
    }
    Ok(partitions)
}

fn owned(decided: HashMap<&str, bool>) -> HashMap<String, bool> {
    decided.into_iter().map(|(n, ok)| (n.to_string(), ok)).collect()
}

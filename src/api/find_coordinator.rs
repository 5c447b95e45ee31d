//! FindCoordinator: alone, this node coordinates every consumer group (key
//! type 0) and every transactional id (key type 1). In a cluster a group's
//! coordinator is the leader of its `__consumer_offsets` partition, a
//! transactional id's the leader of its `__transaction_state` partition.
//! The coordinator's topic is created on the first lookup, as Kafka does;
//! alone, a transactional id is answered COORDINATOR_LOAD_IN_PROGRESS until
//! `__transaction_state` is loaded (in a cluster the coordinator answers
//! that itself while its partition loads). Other key types get COORDINATOR_NOT_AVAILABLE. v4+ asks for
//! several keys at once, each answered on its own.
//!
//! Authorization comes first, per key (Kafka's `getCoordinator`): DESCRIBE
//! GROUP for a group key, else GROUP_AUTHORIZATION_FAILED; DESCRIBE
//! TRANSACTIONAL_ID for a transactional id, else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED. A denied key neither learns the
//! coordinator nor creates its topic.
//!
//! NOTE: librdkafka (kcat, confluent-kafka) also derives its LZ4 support from
//! FindCoordinator v0 being listed in ApiVersions (`rd_kafka_feature_map`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::error::{txn_error_code, TxnApi};
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::cluster::image::MetadataImage;
use crate::controller::topics::{NewTopic, TopicChangeError};
use crate::group::OFFSETS_TOPIC;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::TRANSACTION_STATE_TOPIC;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// A broker's id, host and port.
type Node = (i32, String, i32);

/// How long a FindCoordinator that creates a coordinator's topic in a
/// cluster waits for its leaders before answering (it answers
/// COORDINATOR_NOT_AVAILABLE either way, and the client asks again).
const INTERNAL_TOPIC_CREATE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// The coordinator of `key`, reached through `listener`.
fn coordinator(
    broker: &KafkaApis,
    listener: &str,
    key_type: i8,
    key: &str,
) -> Result<Node, (ResponseError, String)> {
    let internal = match key_type {
        KEY_TYPE_GROUP => Some((OFFSETS_TOPIC, broker.groups.partition_for(key))),
        KEY_TYPE_TRANSACTION => {
            Some((TRANSACTION_STATE_TOPIC, broker.txn.state_manager().partition_for(key)))
        }
        _ => None,
    };
    match (&broker.cluster, internal) {
        (Some(cluster), Some((topic, partition))) => {
            leader_of(broker, &cluster.current(), listener, (topic, partition))
        }
        _ => lookup(broker, key_type).map(|()| {
            let e = broker.endpoint(listener);
            (broker.node_id, e.host.clone(), i32::from(e.port))
        }),
    }
}

/// In a cluster a key's coordinator is the leader of its partition of the
/// coordinator's topic, which the first lookup creates as Kafka does
/// (COORDINATOR_NOT_AVAILABLE until it has a leader, or while the cluster
/// has fewer brokers than its replication factor).
fn leader_of(
    broker: &KafkaApis,
    image: &MetadataImage,
    listener: &str,
    (topic, partition): (&str, i32),
) -> Result<Node, (ResponseError, String)> {
    let unavailable = |msg: String| (ResponseError::CoordinatorNotAvailable, msg);
    if image.topics.topic(topic).is_none() {
        create_internal_topic(broker, topic);
        return Err(unavailable(format!("{topic} is being created")));
    }
    let leader = image.topics.state(topic, partition).map_or(-1, |s| s.state.leader);
    if leader < 0 {
        return Err(unavailable(format!("{topic}-{partition} has no leader")));
    }
    endpoint_of(image, leader, listener)
        .ok_or_else(|| unavailable(format!("broker {leader} has no endpoint on {listener}")))
}

/// Write `topic` (`__consumer_offsets` or `__transaction_state`) to the
/// cluster with Kafka's topic configs and its `offsets.topic.*` or
/// `transaction.state.log.*` keys; another broker doing the same at once
/// is fine (the create is create-only).
fn create_internal_topic(broker: &KafkaApis, topic: &str) {
    let Some(topics) = &broker.topics else { return };
    let new = if topic == OFFSETS_TOPIC {
        let config = broker.groups.config();
        NewTopic {
            name: topic.to_string(),
            partitions: config.offsets_topic_partitions,
            replication_factor: config.offsets_topic_replication_factor,
            assignment: None,
            config: [
                ("cleanup.policy".to_string(), "compact".to_string()),
                ("segment.bytes".to_string(), config.offsets_topic_segment_bytes.to_string()),
                ("compression.type".to_string(), "producer".to_string()),
            ]
            .into(),
        }
    } else {
        let config = broker.txn.state_manager().config();
        NewTopic {
            name: topic.to_string(),
            partitions: config.transaction_log_num_partitions,
            replication_factor: config.transaction_log_replication_factor,
            assignment: None,
            config: [
                ("cleanup.policy".to_string(), "compact".to_string()),
                ("segment.bytes".to_string(), config.transaction_log_segment_bytes.to_string()),
                ("compression.type".to_string(), "uncompressed".to_string()),
                ("min.insync.replicas".to_string(), config.transaction_log_min_isr.to_string()),
            ]
            .into(),
        }
    };
    let created = crate::blocking::off_worker(|| {
        tokio::runtime::Handle::current().block_on(topics.create(&new, INTERNAL_TOPIC_CREATE_WAIT))
    });
    match created {
        Ok(_) | Err(TopicChangeError::TimedOut(_)) => {
            tracing::info!(
                topic,
                replication_factor = new.replication_factor,
                "created in the cluster"
            );
        }
        Err(TopicChangeError::Exists(_)) => {}
        Err(e) => tracing::warn!(topic, "creating it in the cluster: {e}"),
    }
}

fn endpoint_of(image: &MetadataImage, node: i32, listener: &str) -> Option<Node> {
    let b = image.brokers.get(&node)?;
    let e = b.registration.endpoints.iter().find(|e| e.listener == listener)?;
    Some((node, e.host.clone(), i32::from(e.port)))
}

fn lookup(broker: &KafkaApis, key_type: i8) -> Result<(), (ResponseError, String)> {
    let unavailable =
        |e: crate::log::LogError| (ResponseError::CoordinatorNotAvailable, e.to_string());
    match key_type {
        // Kafka creates the coordinator's topic on the first lookup.
        KEY_TYPE_GROUP => broker.groups.ensure_offsets_topic().map_err(unavailable),
        KEY_TYPE_TRANSACTION => {
            let state = broker.txn.state_manager();
            state.ensure_transaction_state_topic().map_err(unavailable)?;
            state
                .check_loaded()
                .map_err(|e| (txn_error_code(&e, TxnApi::FindCoordinator, 0), e.to_string()))
        }
        other => Err((
            ResponseError::CoordinatorNotAvailable,
            format!("no coordinator of key type {other}"),
        )),
    }
}

/// The authorization error of `key`, if the principal may not look it up.
fn denied(ctx: &RequestContext<'_>, key_type: i8, key: &str) -> Option<ResponseError> {
    let (resource_type, error) = match key_type {
        KEY_TYPE_GROUP => (ResourceType::Group, ResponseError::GroupAuthorizationFailed),
        KEY_TYPE_TRANSACTION => {
            (ResourceType::TransactionalId, ResponseError::TransactionalIdAuthorizationFailed)
        }
        _ => return None,
    };
    (!ctx.authorize(AclOperation::Describe, resource_type, key)).then_some(error)
}

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let key_type = request.key_type;
    let listener = ctx.session.listener.as_str();
    if version >= 4 {
        // The coordinator's topic is created only for a key that may see it.
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let c = Coordinator::default().with_key(key.clone());
                let outcome = match denied(ctx, key_type, key.as_str()) {
                    Some(code) => Err((code, None)),
                    None => coordinator(broker, listener, key_type, key.as_str())
                        .map_err(|(code, msg)| (code, Some(msg))),
                };
                match outcome {
                    Ok((node, host, port)) => {
                        c.with_node_id(BrokerId(node)).with_host(str_bytes(host)).with_port(port)
                    }
                    // Kafka answers a denied key with no node and no message.
                    Err((code, None)) => c
                        .with_node_id(BrokerId(-1))
                        .with_host(str_bytes(""))
                        .with_port(-1)
                        .with_error_code(code.code()),
                    Err((code, Some(msg))) => c
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(code.code())
                        .with_error_message(Some(str_bytes(msg))),
                }
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let outcome = match denied(ctx, key_type, request.key.as_str()) {
        // The message is the error's own text, as Kafka's error response.
        Some(code) => Err((code, error_text(code).to_string())),
        None => coordinator(broker, listener, key_type, request.key.as_str()),
    };
    let response = match &outcome {
        Ok((node, host, port)) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(*node))
            .with_host(str_bytes(host.clone()))
            .with_port(*port),
        Err((code, _)) => FindCoordinatorResponse::default()
            .with_error_code(code.code())
            .with_node_id(BrokerId(-1))
            .with_port(-1),
    };
    match (&outcome, version >= 1) {
        (Err((_, msg)), true) => response.with_error_message(Some(str_bytes(msg.clone()))),
        _ => response,
    }
}

/// Kafka's default message of an authorization error.
fn error_text(code: ResponseError) -> &'static str {
    match code {
        ResponseError::GroupAuthorizationFailed => "Group authorization failed.",
        _ => "Transactional Id authorization failed.",
    }
}

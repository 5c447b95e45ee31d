//! FindCoordinator: alone, this node coordinates every consumer group (key
//! type 0) and every transactional id (key type 1). In a cluster a group's
//! coordinator is the leader of its `__consumer_offsets` partition, and the
//! controller coordinates transactional ids for now. The coordinator's
//! topic is created on the first lookup, as Kafka does; a transactional id
//! is answered COORDINATOR_LOAD_IN_PROGRESS until `__transaction_state` is
//! loaded. Other key types get COORDINATOR_NOT_AVAILABLE. v4+ asks for
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

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// A broker's id, host and port.
type Node = (i32, String, i32);

/// How long a FindCoordinator that creates `__consumer_offsets` in a
/// cluster waits for its leaders before answering (it answers
/// COORDINATOR_NOT_AVAILABLE either way, and the client asks again).
const OFFSETS_TOPIC_CREATE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// The coordinator of `key`, reached through `listener`.
fn coordinator(
    broker: &KafkaApis,
    listener: &str,
    key_type: i8,
    key: &str,
) -> Result<Node, (ResponseError, String)> {
    let here = || {
        let e = broker.endpoint(listener);
        (broker.node_id, e.host.clone(), i32::from(e.port))
    };
    match (&broker.cluster, key_type) {
        (Some(cluster), KEY_TYPE_GROUP) => {
            group_coordinator(broker, &cluster.current(), listener, key)
        }
        (Some(_), KEY_TYPE_TRANSACTION) => match controller(broker, listener)? {
            Some(node) => Ok(node),
            None => lookup(broker, key_type).map(|()| here()),
        },
        _ => lookup(broker, key_type).map(|()| here()),
    }
}

/// In a cluster a group's coordinator is the leader of its
/// `__consumer_offsets` partition, created on the first lookup as Kafka
/// does (COORDINATOR_NOT_AVAILABLE until it has a leader, or while the
/// cluster has fewer brokers than `offsets.topic.replication.factor`).
fn group_coordinator(
    broker: &KafkaApis,
    image: &MetadataImage,
    listener: &str,
    group: &str,
) -> Result<Node, (ResponseError, String)> {
    let unavailable = |msg: String| (ResponseError::CoordinatorNotAvailable, msg);
    if image.topics.topic(OFFSETS_TOPIC).is_none() {
        create_offsets_topic(broker);
        return Err(unavailable(format!("{OFFSETS_TOPIC} is being created")));
    }
    let partition = broker.groups.partition_for(group);
    let leader = image.topics.state(OFFSETS_TOPIC, partition).map_or(-1, |s| s.state.leader);
    if leader < 0 {
        return Err(unavailable(format!("{OFFSETS_TOPIC}-{partition} has no leader")));
    }
    endpoint_of(image, leader, listener)
        .ok_or_else(|| unavailable(format!("broker {leader} has no endpoint on {listener}")))
}

/// Write `__consumer_offsets` to the cluster, with Kafka's topic configs
/// and the `offsets.topic.*` keys; another broker doing the same at once
/// is fine (the create is create-only).
fn create_offsets_topic(broker: &KafkaApis) {
    let Some(topics) = &broker.topics else { return };
    let config = broker.groups.config();
    let new = NewTopic {
        name: OFFSETS_TOPIC.to_string(),
        partitions: config.offsets_topic_partitions,
        replication_factor: config.offsets_topic_replication_factor,
        assignment: None,
        config: [
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("segment.bytes".to_string(), config.offsets_topic_segment_bytes.to_string()),
            ("compression.type".to_string(), "producer".to_string()),
        ]
        .into(),
    };
    let created = crate::blocking::off_worker(|| {
        tokio::runtime::Handle::current().block_on(topics.create(&new, OFFSETS_TOPIC_CREATE_WAIT))
    });
    match created {
        Ok(_) | Err(TopicChangeError::TimedOut(_)) => {
            tracing::info!(
                replication_factor = new.replication_factor,
                "created {OFFSETS_TOPIC} in the cluster"
            );
        }
        Err(TopicChangeError::Exists(_)) => {}
        Err(e) => tracing::warn!("creating {OFFSETS_TOPIC} in the cluster: {e}"),
    }
}

fn endpoint_of(image: &MetadataImage, node: i32, listener: &str) -> Option<Node> {
    let b = image.brokers.get(&node)?;
    let e = b.registration.endpoints.iter().find(|e| e.listener == listener)?;
    Some((node, e.host.clone(), i32::from(e.port)))
}

/// In a cluster the controller coordinates every transactional id until
/// the transaction coordinator moves with `__transaction_state`'s
/// partitions (issue 29, milestone 5): another broker answers with the
/// controller's endpoint on the request's listener, or
/// COORDINATOR_NOT_AVAILABLE while there is none. `Ok(None)`: this broker
/// coordinates.
fn controller(broker: &KafkaApis, listener: &str) -> Result<Option<Node>, (ResponseError, String)> {
    let Some(cluster) = &broker.cluster else { return Ok(None) };
    let image = cluster.current();
    let controller = image.controller_id();
    if controller == broker.node_id {
        return Ok(None);
    }
    match endpoint_of(&image, controller, listener) {
        Some(node) => Ok(Some(node)),
        None => Err((
            ResponseError::CoordinatorNotAvailable,
            "the cluster has no controller to coordinate now".into(),
        )),
    }
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

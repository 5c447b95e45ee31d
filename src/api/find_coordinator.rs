//! FindCoordinator: this node coordinates every consumer group (key type 0)
//! and every transactional id (key type 1). The coordinator's topic is
//! created on the first lookup, as Kafka does; a transactional id is answered
//! COORDINATOR_LOAD_IN_PROGRESS until `__transaction_state` is loaded. Other
//! key types get COORDINATOR_NOT_AVAILABLE. v4+ asks for several keys at once.
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
use crate::security::acl::{AclOperation, ResourceType};

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// A broker's id, host and port.
type Node = (i32, String, i32);

/// In a cluster the controller coordinates every group and transactional
/// id until coordinators move with their partitions (issue 29, milestone
/// 5): another broker answers with the controller's endpoint on the
/// request's listener, or COORDINATOR_NOT_AVAILABLE while there is none.
/// `Ok(None)`: this broker coordinates.
fn elsewhere(broker: &KafkaApis, listener: &str) -> Result<Option<Node>, (ResponseError, String)> {
    let Some(cluster) = &broker.cluster else { return Ok(None) };
    let image = cluster.current();
    let controller = image.controller_id();
    if controller == broker.node_id {
        return Ok(None);
    }
    let endpoint = image
        .brokers
        .get(&controller)
        .and_then(|b| b.registration.endpoints.iter().find(|e| e.listener == listener));
    match endpoint {
        Some(e) => Ok(Some((controller, e.host.clone(), i32::from(e.port)))),
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
    // The coordinator: this node, reached through the request's listener,
    // or in a cluster perhaps another (`elsewhere`).
    let endpoint = broker.endpoint(&ctx.session.listener);
    let (mut node, mut host, mut port) =
        (BrokerId(broker.node_id), str_bytes(endpoint.host.clone()), endpoint.port as i32);
    let key_type = request.key_type;
    let here = match elsewhere(broker, &ctx.session.listener) {
        Ok(Some((id, h, p))) => {
            (node, host, port) = (BrokerId(id), str_bytes(h), p);
            Ok(false)
        }
        Ok(None) => Ok(true),
        Err(e) => Err(e),
    };
    let lookup = |broker: &KafkaApis, key_type: i8| match &here {
        Ok(true) => lookup(broker, key_type),
        Ok(false) => Ok(()),
        Err(e) => Err(e.clone()),
    };
    if version >= 4 {
        // The coordinator's topic is created only for a key that may see it.
        let mut outcome = None;
        let mut coordinators = Vec::with_capacity(request.coordinator_keys.len());
        for key in &request.coordinator_keys {
            let c = Coordinator::default().with_key(key.clone());
            let c = match denied(ctx, key_type, key.as_str()) {
                // Kafka answers a denied key with no node and no message.
                Some(code) => c
                    .with_node_id(BrokerId(-1))
                    .with_host(str_bytes(""))
                    .with_port(-1)
                    .with_error_code(code.code()),
                None => match outcome.get_or_insert_with(|| lookup(broker, key_type)) {
                    Ok(()) => c.with_node_id(node).with_host(host.clone()).with_port(port),
                    Err((code, msg)) => c
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(code.code())
                        .with_error_message(Some(str_bytes(msg.clone()))),
                },
            };
            coordinators.push(c);
        }
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let outcome = match denied(ctx, key_type, request.key.as_str()) {
        // The message is the error's own text, as Kafka's error response.
        Some(code) => Err((code, error_text(code).to_string())),
        None => lookup(broker, key_type),
    };
    let response = match &outcome {
        Ok(()) => {
            FindCoordinatorResponse::default().with_node_id(node).with_host(host).with_port(port)
        }
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

//! FindCoordinator: this node coordinates every consumer group (key type 0)
//! and every transactional id (key type 1). The coordinator's topic is
//! created on the first lookup, as Kafka does; a transactional id is answered
//! COORDINATOR_LOAD_IN_PROGRESS until `__transaction_state` is loaded. Other
//! key types get COORDINATOR_NOT_AVAILABLE. v4+ asks for several keys at once.
//!
//! NOTE: librdkafka (kcat, confluent-kafka) also derives its LZ4 support from
//! FindCoordinator v0 being listed in ApiVersions (`rd_kafka_feature_map`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::error::{txn_error_code, TxnApi};
use super::{str_bytes, RequestContext};
use crate::broker::Broker;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

fn lookup(broker: &Broker, key_type: i8) -> Result<(), (ResponseError, String)> {
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

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext<'_>,
    request: &FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let node = BrokerId(broker.node_id);
    // The coordinator is this node, reached through the request's listener.
    let endpoint = broker.endpoint(&ctx.session.listener);
    let host = str_bytes(endpoint.host.clone());
    let port = endpoint.port as i32;
    let outcome = lookup(broker, request.key_type);
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key: &StrBytes| {
                let c = Coordinator::default().with_key(key.clone());
                match &outcome {
                    Ok(()) => c.with_node_id(node).with_host(host.clone()).with_port(port),
                    Err((code, msg)) => c
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(code.code())
                        .with_error_message(Some(str_bytes(msg.clone()))),
                }
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
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

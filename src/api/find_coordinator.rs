//! FindCoordinator: this node coordinates every consumer group (key type 0);
//! there is no transaction coordinator (key type 1 gets
//! COORDINATOR_NOT_AVAILABLE). v4+ asks for several keys at once.
//!
//! NOTE: librdkafka (kcat, confluent-kafka) also derives its LZ4 support from
//! FindCoordinator v0 being listed in ApiVersions (`rd_kafka_feature_map`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::broker::Broker;

const KEY_TYPE_GROUP: i8 = 0;

fn lookup(broker: &Broker, key_type: i8) -> Result<(), (ResponseError, String)> {
    if key_type != KEY_TYPE_GROUP {
        return Err((
            ResponseError::CoordinatorNotAvailable,
            "sediment has no transaction coordinator".into(),
        ));
    }
    // Kafka creates the offsets topic on the first lookup.
    broker
        .groups
        .ensure_offsets_topic()
        .map_err(|e| (ResponseError::CoordinatorNotAvailable, e.to_string()))
}

pub fn handle(
    broker: &Broker,
    request: &FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let node = BrokerId(broker.node_id);
    let host = str_bytes(broker.advertised.host.clone());
    let port = broker.advertised.port as i32;
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

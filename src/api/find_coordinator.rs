//! FindCoordinator: there is no group or transaction coordinator yet, so every
//! key is answered with COORDINATOR_NOT_AVAILABLE, the code Apache Kafka gives
//! while a coordinator cannot serve. Clients retry it; none is told a node
//! coordinates a group it cannot join.
//!
//! NOTE: the API is advertised anyway because librdkafka (kcat,
//! confluent-kafka, every binding) derives its LZ4 feature from FindCoordinator
//! v0 being in ApiVersions (`rd_kafka_feature_map` in rdkafka_feature.c; LZ4
//! and the group coordinator both arrived in Kafka 0.8.2). Without it a
//! producer configured for lz4 silently sends uncompressed batches.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::str_bytes;

const MESSAGE: &str = "sediment has no group or transaction coordinator yet";

pub fn handle(request: &FindCoordinatorRequest, version: i16) -> FindCoordinatorResponse {
    let code = ResponseError::CoordinatorNotAvailable.code();
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| Coordinator::default().with_key(key.clone()).with_node_id(BrokerId(-1)).with_port(-1).with_error_code(code).with_error_message(Some(str_bytes(MESSAGE))))
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let response = FindCoordinatorResponse::default().with_error_code(code).with_node_id(BrokerId(-1)).with_port(-1);
    if version >= 1 {
        response.with_error_message(Some(str_bytes(MESSAGE)))
    } else {
        response
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::protocol::Encodable;

    use super::*;

    #[test]
    fn every_version_encodes_coordinator_not_available() {
        let request = FindCoordinatorRequest::default().with_key(str_bytes("g")).with_coordinator_keys(vec![str_bytes("g1"), str_bytes("g2")]);
        for version in 0..=6 {
            let response = handle(&request, version);
            // The encoder refuses fields a version does not have, which would
            // close the client's connection instead of answering it.
            response.encode(&mut BytesMut::new(), version).unwrap_or_else(|e| panic!("v{version}: {e}"));
            let code = ResponseError::CoordinatorNotAvailable.code();
            if version >= 4 {
                let keys: Vec<_> = response.coordinators.iter().map(|c| (c.key.to_string(), c.error_code, c.node_id.0)).collect();
                assert_eq!(keys, [("g1".to_string(), code, -1), ("g2".to_string(), code, -1)]);
            } else {
                assert_eq!((response.error_code, response.node_id.0, response.port), (code, -1, -1));
            }
        }
    }
}

//! InitProducerId for idempotent producers: a fresh producer id, epoch 0.
//! Transactions are not implemented: a transactional id is refused.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::broker::Broker;

pub fn handle(broker: &Broker, request: &InitProducerIdRequest) -> InitProducerIdResponse {
    let response =
        InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    if request.transactional_id.is_some() {
        // NOTE: no transaction coordinator exists; say so rather than pretend.
        return response.with_error_code(ResponseError::UnsupportedVersion.code());
    }
    match broker.next_producer_id() {
        // Kafka issues a new id to every non-transactional producer (also on an
        // epoch-bump request), which resets its sequences cleanly.
        Ok(id) => response.with_producer_id(ProducerId(id)).with_producer_epoch(0),
        Err(e) => {
            tracing::error!("cannot persist the producer id block: {e}");
            response.with_error_code(ResponseError::KafkaStorageError.code())
        }
    }
}

//! InitProducerId. Without a transactional id (idempotent producers): a fresh
//! producer id, epoch 0. With one: the transaction coordinator's answer
//! (docs/design/transactions.md, "Epochs, fencing, KIP-360" and "Behaviour and errors, per API"): the id's producer id with its epoch
//! bumped, an ongoing transaction fenced and aborted, or an error. v3+ may
//! name the producer id and epoch the client had (KIP-360), both or neither.
//!
//! Authorization comes first (Kafka's `handleInitProducerIdRequest`): with a
//! transactional id, WRITE on it, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
//! without one, IDEMPOTENT_WRITE on the cluster or WRITE on some topic
//! (`authorize_by_resource_type`), else CLUSTER_AUTHORIZATION_FAILED. A
//! denial of IDEMPOTENT_WRITE is recorded only when the topic check fails
//! too: a producer allowed by a topic ACL is the usual case.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::error::{txn_error_code, TxnApi};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use crate::txn::{ProducerIdAndEpoch, TxnError};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let response =
        InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    if let Some(denied) = authorization_error(ctx, request) {
        return response.with_error_code(denied.code());
    }
    if let Some(id) = &request.transactional_id {
        return match init_transactional(broker, id.as_str(), request) {
            Ok(p) => {
                response.with_producer_id(ProducerId(p.producer_id)).with_producer_epoch(p.epoch)
            }
            Err(e) => {
                tracing::debug!(transactional_id = %id.as_str(), "InitProducerId: {e}");
                response.with_error_code(txn_error_code(&e, TxnApi::InitProducerId, version).code())
            }
        };
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

fn authorization_error(
    ctx: &RequestContext<'_>,
    request: &InitProducerIdRequest,
) -> Option<ResponseError> {
    match &request.transactional_id {
        Some(id) => (!ctx.authorize(AclOperation::Write, ResourceType::TransactionalId, id))
            .then_some(ResponseError::TransactionalIdAuthorizationFailed),
        None => {
            // The last call repeats the first check to record the denial.
            let idempotent = ctx.is_authorized(
                AclOperation::IdempotentWrite,
                ResourceType::Cluster,
                CLUSTER_NAME,
            ) || ctx
                .authorize_by_resource_type(AclOperation::Write, ResourceType::Topic)
                || ctx.authorize_cluster(AclOperation::IdempotentWrite);
            (!idempotent).then_some(ResponseError::ClusterAuthorizationFailed)
        }
    }
}

fn init_transactional(
    broker: &KafkaApis,
    transactional_id: &str,
    request: &InitProducerIdRequest,
) -> Result<ProducerIdAndEpoch, TxnError> {
    let expected = match (request.producer_id.0, request.producer_epoch) {
        (-1, -1) => None,
        (producer_id, epoch) if producer_id != -1 && epoch != -1 => {
            Some(ProducerIdAndEpoch { producer_id, epoch })
        }
        // Kafka: both or neither.
        _ => return Err(TxnError::InvalidRequest("producer id and epoch must both be set")),
    };
    broker.txn.init_producer_id(transactional_id, request.transaction_timeout_ms, expected)
}

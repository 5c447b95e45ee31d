//! EndTxn: commit or abort the id's transaction (docs/design/transactions.md, "EndTxn / timeout abort, step by step (crash protocol)").
//! The answer comes once the outcome is durable (PrepareCommit or
//! PrepareAbort written); the markers and the Complete record follow, and a
//! retry of the same outcome is answered NONE once complete. v5 (an epoch
//! bump per transaction, KIP-890) is not served: the producer id and epoch
//! answered are -1, as Kafka answers v4 and below. WRITE on the
//! transactional id is checked first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::error::{txn_error_code, TxnApi};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::TransactionResult;

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &EndTxnRequest,
    version: i16,
) -> EndTxnResponse {
    let id = request.transactional_id.as_str();
    if !ctx.authorize(AclOperation::Write, ResourceType::TransactionalId, id) {
        return EndTxnResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let result =
        if request.committed { TransactionResult::Commit } else { TransactionResult::Abort };
    let outcome =
        broker.txn.end_transaction(id, request.producer_id.0, request.producer_epoch, result);
    let response =
        EndTxnResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    match outcome {
        Ok(()) => response,
        Err(e) => {
            tracing::debug!(transactional_id = %id, "EndTxn: {e}");
            response.with_error_code(txn_error_code(&e, TxnApi::EndTxn, version).code())
        }
    }
}

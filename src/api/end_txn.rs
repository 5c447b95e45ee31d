//! EndTxn: commit or abort the id's transaction (docs/design/transactions.md, "EndTxn / timeout abort, step by step (crash protocol)").
//! The answer comes once the outcome is durable (PrepareCommit or
//! PrepareAbort written); the markers and the Complete record follow, and a
//! retry of the same outcome is answered NONE once complete. v5 is
//! transactions v2 (KIP-890): every EndTxn bumps the producer epoch and the
//! answer carries the producer id and epoch the client goes on with (-1 on
//! an error, and at v4 and below, as Kafka answers). WRITE on the
//! transactional id is checked first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::error::{txn_error_code, TxnApi};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::{TransactionResult, TransactionVersion};

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
    let tv = TransactionVersion::for_end_txn(version);
    let (pid, epoch) = (request.producer_id.0, request.producer_epoch);
    let outcome = broker.txn.end_transaction_with(id, pid, epoch, result, tv);
    let response =
        EndTxnResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    match outcome {
        Ok(answer) if tv.supports_epoch_bump() => response
            .with_producer_id(ProducerId(answer.producer_id))
            .with_producer_epoch(answer.epoch),
        Ok(_) => response,
        Err(e) => {
            tracing::debug!(transactional_id = %id, "EndTxn: {e}");
            response.with_error_code(txn_error_code(&e, TxnApi::EndTxn, version).code())
        }
    }
}

//! AddOffsetsToTxn: add the group's `__consumer_offsets` partition (the one
//! FindCoordinator's group key maps to) to the id's transaction, creating the
//! offsets topic first if needed, as Kafka does. The offsets themselves come
//! with TxnOffsetCommit, which verifies that partition is in the transaction.
//! WRITE on the transactional id, then READ on the group, are checked first
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED).

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use kafka_protocol::ResponseError;

use super::error::{txn_error_code, TxnApi};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::log::TopicPartition;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::TxnError;

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let id = request.transactional_id.as_str();
    let denied = if !ctx.authorize(AclOperation::Write, ResourceType::TransactionalId, id) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !ctx.authorize(AclOperation::Read, ResourceType::Group, request.group_id.as_str()) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    if let Some(code) = denied {
        return AddOffsetsToTxnResponse::default().with_error_code(code.code());
    }
    let outcome = broker.groups.ensure_offsets_topic().map_err(TxnError::from).and_then(|()| {
        let partition = broker.groups.partition_for(request.group_id.as_str());
        let tp = TopicPartition::new(crate::group::OFFSETS_TOPIC, partition);
        broker.txn.add_offsets_to_txn(id, request.producer_id.0, request.producer_epoch, tp)
    });
    match outcome {
        Ok(()) => AddOffsetsToTxnResponse::default(),
        Err(e) => {
            tracing::debug!(transactional_id = %id, "AddOffsetsToTxn: {e}");
            AddOffsetsToTxnResponse::default()
                .with_error_code(txn_error_code(&e, TxnApi::AddOffsetsToTxn, version).code())
        }
    }
}

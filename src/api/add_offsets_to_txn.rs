//! AddOffsetsToTxn: add the group's `__consumer_offsets` partition (the one
//! FindCoordinator's group key maps to) to the id's transaction, creating the
//! offsets topic first if needed, as Kafka does. The offsets themselves come
//! with TxnOffsetCommit, which verifies that partition is in the transaction.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::error::{txn_error_code, TxnApi};
use crate::broker::Broker;
use crate::log::TopicPartition;
use crate::txn::TxnError;

pub fn handle(
    broker: &Broker,
    request: &AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let id = request.transactional_id.as_str();
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

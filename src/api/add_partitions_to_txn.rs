//! AddPartitionsToTxn, the client form (v0-3): add partitions to the id's
//! transaction, starting one if none is open. A partition of a topic that
//! does not exist fails the request: it gets UNKNOWN_TOPIC_OR_PARTITION and
//! every other partition OPERATION_NOT_ATTEMPTED, and nothing is written (as
//! Kafka's `KafkaApis`). Otherwise every partition gets the coordinator's one
//! answer. v4-5 (the brokers' batched, verify-only form) are not served.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::error::{txn_error_code, TxnApi};
use crate::broker::Broker;
use crate::log::TopicPartition;

pub fn handle(
    broker: &Broker,
    request: &AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let id = request.v3_and_below_transactional_id.as_str();
    let mut partitions = BTreeSet::new();
    let mut unknown = BTreeSet::new();
    for topic in &request.v3_and_below_topics {
        for &p in &topic.partitions {
            let tp = TopicPartition::new(topic.name.as_str(), p);
            if broker.logs.get_log(&tp).is_some() {
                partitions.insert(tp);
            } else {
                unknown.insert(tp);
            }
        }
    }
    let code_of = |tp: &TopicPartition| -> i16 {
        if unknown.is_empty() {
            return 0;
        }
        if unknown.contains(tp) {
            ResponseError::UnknownTopicOrPartition.code()
        } else {
            ResponseError::OperationNotAttempted.code()
        }
    };
    let outcome = if unknown.is_empty() {
        broker.txn.add_partitions_to_txn(
            id,
            request.v3_and_below_producer_id.0,
            request.v3_and_below_producer_epoch,
            &partitions,
        )
    } else {
        Ok(())
    };
    let shared = match &outcome {
        Ok(()) => 0,
        Err(e) => {
            tracing::debug!(transactional_id = %id, "AddPartitionsToTxn: {e}");
            txn_error_code(e, TxnApi::AddPartitionsToTxn, version).code()
        }
    };
    let results = request
        .v3_and_below_topics
        .iter()
        .map(|topic| {
            let results = topic
                .partitions
                .iter()
                .map(|&p| {
                    let tp = TopicPartition::new(topic.name.as_str(), p);
                    let code = if unknown.is_empty() { shared } else { code_of(&tp) };
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(code)
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic.name.clone())
                .with_results_by_partition(results)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}

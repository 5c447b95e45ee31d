//! AddPartitionsToTxn: add partitions to an id's transaction, starting one
//! if none is open.
//!
//! * v0-3 (the client form): one transaction, in the `v3_and_below` fields.
//! * v4-5 (Kafka's brokers' batched form): many transactions, each answered
//!   on its own under its id; with `verify_only`, nothing is added or
//!   written: each partition is NONE if it is in the transaction, else
//!   TRANSACTION_ABORTABLE (Kafka's `handleVerifyPartitionsInTransaction`;
//!   an unknown id, another producer, a fenced epoch or a transaction being
//!   completed get the coordinator's code for every partition). Kafka answers
//!   TRANSACTION_ABORTABLE at v4 too (v5 only documents it).
//!
//! In both forms a partition of a topic that does not exist fails its
//! transaction: it gets UNKNOWN_TOPIC_OR_PARTITION and every other partition
//! OPERATION_NOT_ATTEMPTED, and nothing is written (as Kafka's `KafkaApis`).
//! Otherwise every partition of a transaction gets the coordinator's one
//! answer.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::error::{txn_error_code, TxnApi};
use crate::broker::Broker;
use crate::log::TopicPartition;
use crate::txn::TxnError;

/// The first version of the batched form.
const FIRST_BATCHED_VERSION: i16 = 4;

pub fn handle(
    broker: &Broker,
    request: &AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version < FIRST_BATCHED_VERSION {
        let txn = Transaction {
            id: request.v3_and_below_transactional_id.as_str(),
            producer_id: request.v3_and_below_producer_id.0,
            producer_epoch: request.v3_and_below_producer_epoch,
            verify_only: false,
            topics: &request.v3_and_below_topics,
        };
        let results = add_partitions(broker, &txn, version);
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    let results = request
        .transactions
        .iter()
        .map(|t| {
            let txn = Transaction {
                id: t.transactional_id.as_str(),
                producer_id: t.producer_id.0,
                producer_epoch: t.producer_epoch,
                verify_only: t.verify_only,
                topics: &t.topics,
            };
            AddPartitionsToTxnResult::default()
                .with_transactional_id(t.transactional_id.clone())
                .with_topic_results(add_partitions(broker, &txn, version))
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

/// One transaction of a request, in either form.
struct Transaction<'a> {
    id: &'a str,
    producer_id: i64,
    producer_epoch: i16,
    verify_only: bool,
    topics: &'a [AddPartitionsToTxnTopic],
}

/// The answer for every partition of `txn`, by topic as asked.
fn add_partitions(
    broker: &Broker,
    txn: &Transaction<'_>,
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut partitions = BTreeSet::new();
    let mut unknown = BTreeSet::new();
    for topic in txn.topics {
        for &p in &topic.partitions {
            let tp = TopicPartition::new(topic.name.as_str(), p);
            if broker.logs.get_log(&tp).is_some() {
                partitions.insert(tp);
            } else {
                unknown.insert(tp);
            }
        }
    }
    let code_of: Box<dyn Fn(&TopicPartition) -> i16> = if !unknown.is_empty() {
        Box::new(|tp: &TopicPartition| {
            if unknown.contains(tp) {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                ResponseError::OperationNotAttempted.code()
            }
        })
    } else if txn.verify_only {
        Box::new(|tp: &TopicPartition| verify(broker, txn, tp, version))
    } else {
        let outcome = broker.txn.add_partitions_to_txn(
            txn.id,
            txn.producer_id,
            txn.producer_epoch,
            &partitions,
        );
        let shared = outcome.map_or_else(|e| code(&e, txn, version), |()| 0);
        Box::new(move |_: &TopicPartition| shared)
    };
    txn.topics
        .iter()
        .map(|topic| {
            let results = topic
                .partitions
                .iter()
                .map(|&p| {
                    let tp = TopicPartition::new(topic.name.as_str(), p);
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(code_of(&tp))
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic.name.clone())
                .with_results_by_partition(results)
        })
        .collect()
}

/// Verify-only: whether `tp` is in the transaction; nothing is written.
fn verify(broker: &Broker, txn: &Transaction<'_>, tp: &TopicPartition, version: i16) -> i16 {
    if txn.id.is_empty() {
        return ResponseError::InvalidRequest.code();
    }
    match broker.txn.verify_partition(txn.id, txn.producer_id, txn.producer_epoch, tp) {
        Ok(()) => 0,
        Err(TxnError::PartitionNotInTransaction { .. }) => {
            ResponseError::TransactionAbortable.code()
        }
        Err(e) => code(&e, txn, version),
    }
}

fn code(e: &TxnError, txn: &Transaction<'_>, version: i16) -> i16 {
    tracing::debug!(transactional_id = %txn.id, "AddPartitionsToTxn: {e}");
    txn_error_code(e, TxnApi::AddPartitionsToTxn, version).code()
}

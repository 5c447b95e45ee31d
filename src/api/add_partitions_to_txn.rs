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
//!   TRANSACTION_ABORTABLE at v4 too (v5 only documents it). Without
//!   `verify_only` a leader adds for a transactions-v2 producer (KIP-890),
//!   and the transaction is written at that level.
//!
//! In both forms a partition of a topic that does not exist fails its
//! transaction: it gets UNKNOWN_TOPIC_OR_PARTITION and every other partition
//! OPERATION_NOT_ATTEMPTED, and nothing is written (as Kafka's `KafkaApis`).
//! Otherwise every partition of a transaction gets the coordinator's one
//! answer.
//!
//! Authorization (Kafka's `handleAddPartitionsToTxnRequest`): v4-5 come from
//! brokers and need CLUSTER_ACTION on the cluster (denied: the top-level
//! CLUSTER_AUTHORIZATION_FAILED). v0-3 need WRITE on the transactional id
//! (denied: TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition), then
//! WRITE on each topic, checked before existence: a denied topic's partitions
//! get TOPIC_AUTHORIZATION_FAILED and fail the transaction as an unknown one
//! does. As on Kafka, the internal topics are never authorized for a client
//! here (only when an authorizer is configured: without one nothing changes).

use std::collections::{BTreeSet, HashSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::error::{txn_error_code, TxnApi};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::group::OFFSETS_TOPIC;
use crate::log::TopicPartition;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::{TransactionVersion, TxnError, TRANSACTION_STATE_TOPIC};

/// The first version of the batched form.
const FIRST_BATCHED_VERSION: i16 = 4;

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
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
        let results = if ctx.authorize(AclOperation::Write, ResourceType::TransactionalId, txn.id) {
            let denied = denied_topics(ctx, txn.topics);
            add_partitions(broker, &txn, &denied, version)
        } else {
            every_partition(txn.topics, ResponseError::TransactionalIdAuthorizationFailed.code())
        };
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    if !ctx.authorize_cluster(AclOperation::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
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
                .with_topic_results(add_partitions(broker, &txn, &HashSet::new(), version))
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

/// The topics of a client's (v0-3) request it may not write to; internal
/// topics are never authorized, as Kafka leaves them out of the check.
fn denied_topics<'a>(
    ctx: &RequestContext<'_>,
    topics: &'a [AddPartitionsToTxnTopic],
) -> HashSet<&'a str> {
    if !ctx.authorization_enabled() {
        return HashSet::new();
    }
    let internal = |t: &str| t == OFFSETS_TOPIC || t == TRANSACTION_STATE_TOPIC;
    let names = topics.iter().map(|t| t.name.as_str());
    let allowed = ctx.filter_authorized(
        AclOperation::Write,
        ResourceType::Topic,
        names.filter(|t| !internal(t)),
    );
    topics.iter().map(|t| t.name.as_str()).filter(|t| allowed.get(t) != Some(&true)).collect()
}

/// Every partition of `topics` answered `code`.
fn every_partition(
    topics: &[AddPartitionsToTxnTopic],
    code: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|topic| {
            let results = topic
                .partitions
                .iter()
                .map(|&p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(code)
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic.name.clone())
                .with_results_by_partition(results)
        })
        .collect()
}

/// The answer for every partition of `txn`, by topic as asked; the
/// partitions of `denied` topics fail the transaction.
fn add_partitions(
    broker: &KafkaApis,
    txn: &Transaction<'_>,
    denied: &HashSet<&str>,
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut partitions = BTreeSet::new();
    let mut unknown = BTreeSet::new();
    for topic in txn.topics.iter().filter(|t| !denied.contains(t.name.as_str())) {
        for &p in &topic.partitions {
            let tp = TopicPartition::new(topic.name.as_str(), p);
            if broker.has_partition(&tp.topic, tp.partition) {
                partitions.insert(tp);
            } else {
                unknown.insert(tp);
            }
        }
    }
    let code_of: Box<dyn Fn(&TopicPartition) -> i16> = if !unknown.is_empty() || !denied.is_empty()
    {
        Box::new(|tp: &TopicPartition| {
            if denied.contains(tp.topic.as_str()) {
                ResponseError::TopicAuthorizationFailed.code()
            } else if unknown.contains(tp) {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                ResponseError::OperationNotAttempted.code()
            }
        })
    } else if txn.verify_only {
        Box::new(|tp: &TopicPartition| verify(broker, txn, tp, version))
    } else {
        let outcome = broker.txn.add_partitions_to_txn_with(
            txn.id,
            txn.producer_id,
            txn.producer_epoch,
            &partitions,
            TransactionVersion::for_add_partitions_to_txn(version),
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
fn verify(broker: &KafkaApis, txn: &Transaction<'_>, tp: &TopicPartition, version: i16) -> i16 {
    if txn.id.is_empty() {
        return ResponseError::InvalidRequest.code();
    }
    // Only this broker's own answer: a verify-only request comes from another
    // broker, and is never passed on (two brokers with different images
    // would otherwise send it back and forth).
    match broker.txn.verify_partition_locally(txn.id, txn.producer_id, txn.producer_epoch, tp) {
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

//! DescribeTransactions (v0): per transactional id, its state name, timeout,
//! start time (-1 with no transaction), producer id and epoch, and the
//! partitions of its transaction grouped by topic, as Kafka's
//! `TransactionCoordinator.handleDescribeTransactions` answers: an empty id is
//! INVALID_REQUEST; an id the coordinator does not hold, or one being expired
//! (Dead), TRANSACTIONAL_ID_NOT_FOUND; COORDINATOR_LOAD_IN_PROGRESS until
//! `__transaction_state` is loaded. The state is the current one, not a
//! pending transition's target.
//!
//! DESCRIBE on each transactional id is checked first (denied:
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED, even for an empty id), and the
//! partitions answered are only those of topics the principal may describe,
//! as Kafka's `handleDescribeTransactionsRequest`.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TransactionalId,
};

use super::error::{txn_error_code, TxnApi};
use super::{str_bytes, topic_name, RequestContext};
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::TransactionState as State;

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &DescribeTransactionsRequest,
    version: i16,
) -> DescribeTransactionsResponse {
    let states = request
        .transactional_ids
        .iter()
        .map(|id| {
            let state = if ctx.authorize(AclOperation::Describe, ResourceType::TransactionalId, id)
            {
                let mut state = describe(broker, id, version);
                state.topics.retain(|t| {
                    ctx.authorize(AclOperation::Describe, ResourceType::Topic, t.topic.as_str())
                });
                state
            } else {
                let denied = ResponseError::TransactionalIdAuthorizationFailed.code();
                TransactionState::default().with_error_code(denied)
            };
            state.with_transactional_id(id.clone())
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

fn describe(broker: &KafkaApis, id: &TransactionalId, version: i16) -> TransactionState {
    let not_found = || {
        TransactionState::default().with_error_code(ResponseError::TransactionalIdNotFound.code())
    };
    if id.is_empty() {
        return TransactionState::default().with_error_code(ResponseError::InvalidRequest.code());
    }
    let metadata = match broker.txn.state_manager().get_transaction_state(id.as_str()) {
        Ok(Some(m)) => m,
        Ok(None) => return not_found(),
        Err(e) => {
            let code = txn_error_code(&e, TxnApi::DescribeTransactions, version);
            return TransactionState::default().with_error_code(code.code());
        }
    };
    let m = metadata.lock();
    if m.state() == State::Dead {
        return not_found();
    }
    let mut topics: Vec<TopicData> = Vec::new();
    // The set is ordered by topic, then partition: one entry per topic.
    for tp in &m.partitions {
        match topics.last_mut() {
            Some(t) if t.topic.as_str() == tp.topic => t.partitions.push(tp.partition),
            _ => topics.push(
                TopicData::default()
                    .with_topic(topic_name(tp.topic.clone()))
                    .with_partitions(vec![tp.partition]),
            ),
        }
    }
    TransactionState::default()
        .with_transaction_state(str_bytes(m.state().name()))
        .with_transaction_timeout_ms(m.txn_timeout_ms)
        .with_transaction_start_time_ms(m.txn_start_timestamp)
        .with_producer_id(ProducerId(m.producer_id))
        .with_producer_epoch(m.producer_epoch)
        .with_topics(topics)
}

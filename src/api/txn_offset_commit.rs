//! TxnOffsetCommit (v0–6): offsets committed inside a transaction. v6
//! (KIP-1319) names topics by id and answers GROUP_ID_NOT_FOUND and
//! STALE_MEMBER_EPOCH where earlier versions answer ILLEGAL_GENERATION.
//!
//! * The producer's transaction must already hold the group's offsets
//!   partition (AddOffsetsToTxn): the transaction coordinator verifies it, as
//!   Kafka's verification guard does, before anything is written; a failure
//!   answers every partition. From v5 (transactions v2, which sends no
//!   AddOffsetsToTxn) the coordinator adds the partition instead.
//! * The group coordinator appends the offsets as a transactional batch of the
//!   producer and keeps them pending until the transaction's marker lands on
//!   that partition (`group::txn_offsets`).
//! * A partition of an unknown topic is UNKNOWN_TOPIC_OR_PARTITION and not
//!   written, as Kafka's `KafkaApis` filters it.
//! * Authorization comes first: WRITE on the transactional id, then READ on
//!   the group (denied: TRANSACTIONAL_ID_AUTHORIZATION_FAILED or
//!   GROUP_AUTHORIZATION_FAILED on every partition), then READ on each topic
//!   (denied, before the existence check: TOPIC_AUTHORIZATION_FAILED on its
//!   partitions, which are not written).

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::ResponseError;

use super::error::{group_code, txn_offset_commit_error_code};
use super::offset_partitions::{by_topic_id, partition_codes, requested_offsets, PartitionChecks};
use super::RequestContext;
use crate::api::KafkaApis;
use crate::group::{GroupError, TxnProducer, OFFSETS_TOPIC};
use crate::log::TopicPartition;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::TransactionVersion;

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    if version >= 6 {
        return by_topic_id(broker, ctx, request, version);
    }
    by_name(broker, ctx, request, version)
}

/// v6 names topics by id (KIP-1319): answered by name ([`by_topic_id`]).
fn by_topic_id(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let topics = by_topic_id!(broker, request, TxnOffsetCommitResponseTopic,
        TxnOffsetCommitResponsePartition, refused: refusal(ctx, request),
        by_name: |named| by_name(broker, ctx, &named, version));
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// Errors a version before 6 does not know, as Kafka answers them then.
fn for_version(e: Option<GroupError>, version: i16) -> Option<GroupError> {
    match e {
        Some(GroupError::StaleMemberEpoch | GroupError::GroupIdNotFound) if version < 6 => {
            Some(GroupError::IllegalGeneration)
        }
        e => e,
    }
}

fn by_name(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let group = request.group_id.0.as_str();
    if let Some(code) = refusal(ctx, request) {
        return every_partition(request, code);
    }
    let topics = request.topics.iter().map(|t| t.name.0.as_str());
    let checks = PartitionChecks::new(ctx, broker, topics);
    let offsets = requested_offsets!(&request.topics, checks, leader_epoch: version >= 2);
    // Nothing left to commit: the coordinators are not asked (under
    // transactions v2 that would add the offsets partition for nothing).
    let codes: Vec<i16> = if offsets.is_empty() {
        Vec::new()
    } else {
        match verify(broker, request, group, version) {
            Err(code) => vec![code; offsets.len()],
            Ok(()) => commit(broker, request, version, &offsets),
        }
    };
    let mut codes = codes.into_iter();
    let topics = partition_codes!(
        request.topics,
        TxnOffsetCommitResponseTopic,
        TxnOffsetCommitResponsePartition,
        |t, p| checks.code(t.name.0.as_str(), p.partition_index, || codes.next().unwrap_or(0))
    );
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The group coordinator's per-partition codes for the verified offsets.
fn commit(
    broker: &KafkaApis,
    request: &TxnOffsetCommitRequest,
    version: i16,
    offsets: &[(String, i32, crate::group::CommittedOffset)],
) -> Vec<i16> {
    let (generation, member, instance) = if version >= 3 {
        let instance = request.group_instance_id.as_ref().map(|s| s.to_string());
        (request.generation_id, request.member_id.to_string(), instance)
    } else {
        (-1, String::new(), None)
    };
    let producer = TxnProducer { id: request.producer_id.0, epoch: request.producer_epoch };
    let group = request.group_id.0.as_str();
    broker
        .groups
        .txn_commit(group, producer, generation, &member, instance.as_deref(), offsets)
        .into_iter()
        .map(|e| group_code(for_version(e, version)))
        .collect()
}

/// WRITE on the transactional id, then READ on the group: the code that
/// answers every partition when one is denied.
fn refusal(ctx: &RequestContext<'_>, request: &TxnOffsetCommitRequest) -> Option<i16> {
    let id = request.transactional_id.as_str();
    if !ctx.authorize(AclOperation::Write, ResourceType::TransactionalId, id) {
        return Some(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let group = request.group_id.0.as_str();
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, group) {
        return Some(ResponseError::GroupAuthorizationFailed.code());
    }
    None
}

/// Kafka's error response: `code` on every partition of the request.
fn every_partition(request: &TxnOffsetCommitRequest, code: i16) -> TxnOffsetCommitResponse {
    let topics = partition_codes!(
        request.topics,
        TxnOffsetCommitResponseTopic,
        TxnOffsetCommitResponsePartition,
        |t, p| code
    );
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The transaction of the request's producer must hold the group's
/// offsets partition; the error code for every partition if not. Skipped
/// when `transaction.partition.verification.enable` is false, as Kafka does,
/// except that from v5 (transactions v2) the partition is added to the
/// transaction, whatever that key says.
fn verify(
    broker: &KafkaApis,
    request: &TxnOffsetCommitRequest,
    group: &str,
    version: i16,
) -> Result<(), i16> {
    let tv = TransactionVersion::for_txn_offset_commit(version);
    if !tv.supports_epoch_bump() && !broker.config.transaction_partition_verification_enable() {
        return Ok(());
    }
    let tp = TopicPartition::new(OFFSETS_TOPIC, broker.groups.partition_for(group));
    let id = request.transactional_id.as_str();
    let (pid, epoch) = (request.producer_id.0, request.producer_epoch);
    broker.txn.verify_partition_with(id, pid, epoch, &tp, tv).map_err(|e| {
        tracing::debug!(transactional_id = %id, group, "TxnOffsetCommit: {e}");
        txn_offset_commit_error_code(&e, version).code()
    })
}

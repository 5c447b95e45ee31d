//! AlterPartition (v2-3, KIP-903): a partition leader's ISR change, sent
//! to the controller (`controller::replication_control`, which checks and
//! writes it). Brokers send it to each other; no client does.
//!
//! * CLUSTER_ACTION on the cluster is required (Kafka's rule): denied, the
//!   top-level error is CLUSTER_AUTHORIZATION_FAILED and nothing is read.
//! * A broker that is not the controller, or runs alone, answers
//!   NOT_CONTROLLER at the top level (the sender finds the controller in
//!   its metadata and asks again); a sender whose broker epoch is not its
//!   registration's, STALE_BROKER_EPOCH.
//! * v2 names ISR members without broker epochs (each taken as -1, not
//!   compared); v3 gives them.
//! * Each partition answers its new state (leader, leader epoch, ISR,
//!   recovery state, partition epoch) or its refusal alone.

use kafka_protocol::messages::alter_partition_request::PartitionData as RequestPartition;
use kafka_protocol::messages::alter_partition_response::{PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, BrokerId};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::api::KafkaApis;
use crate::controller::replication_control::{AlterPartitionError, IsrRequest};
use crate::security::acl::AclOperation;

pub async fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &AlterPartitionRequest,
    version: i16,
) -> AlterPartitionResponse {
    if !ctx.authorize_cluster(AclOperation::ClusterAction) {
        return top_level(ResponseError::ClusterAuthorizationFailed.code());
    }
    let Some(control) = &broker.replication_control else {
        return top_level(code(AlterPartitionError::NotController));
    };
    let asked: Vec<IsrRequest> = request
        .topics
        .iter()
        .flat_map(|t| {
            let id = *t.topic_id.as_bytes();
            t.partitions.iter().map(move |p| isr_request(id, p, version))
        })
        .collect();
    let sender = (request.broker_id.0, request.broker_epoch);
    let mut answers = match control.alter_partition(sender, asked).await {
        Ok(answers) => answers.into_iter(),
        Err(e) => return top_level(code(e)),
    };
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| partition_answer(p.partition_index, answers.next()))
                .collect();
            TopicData::default().with_topic_id(t.topic_id).with_partitions(partitions)
        })
        .collect();
    AlterPartitionResponse::default().with_topics(topics)
}

fn isr_request(topic_id: [u8; 16], p: &RequestPartition, version: i16) -> IsrRequest {
    let isr = if version >= 3 {
        p.new_isr_with_epochs.iter().map(|b| (b.broker_id.0, b.broker_epoch)).collect()
    } else {
        p.new_isr.iter().map(|b| (b.0, -1)).collect()
    };
    IsrRequest {
        topic_id,
        partition: p.partition_index,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        isr,
        leader_recovery_state: p.leader_recovery_state,
    }
}

fn partition_answer(
    index: i32,
    answer: Option<Result<crate::cluster::keys::PartitionStateValue, AlterPartitionError>>,
) -> PartitionData {
    let base = PartitionData::default().with_partition_index(index);
    match answer {
        Some(Ok(s)) => base
            .with_leader_id(BrokerId(s.leader))
            .with_leader_epoch(s.leader_epoch)
            .with_isr(s.isr.iter().map(|m| BrokerId(*m)).collect())
            .with_leader_recovery_state(s.leader_recovery_state)
            .with_partition_epoch(s.partition_epoch),
        Some(Err(e)) => base.with_error_code(code(e)),
        None => base.with_error_code(ResponseError::UnknownServerError.code()),
    }
}

fn top_level(code: i16) -> AlterPartitionResponse {
    AlterPartitionResponse::default().with_error_code(code)
}

/// Kafka's code for each refusal.
pub fn code(e: AlterPartitionError) -> i16 {
    use AlterPartitionError as E;
    let error = match e {
        E::NotController => ResponseError::NotController,
        E::StaleBrokerEpoch => ResponseError::StaleBrokerEpoch,
        E::UnknownTopicId => ResponseError::UnknownTopicId,
        E::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        E::FencedLeaderEpoch => ResponseError::FencedLeaderEpoch,
        E::InvalidRequest => ResponseError::InvalidRequest,
        E::InvalidUpdateVersion => ResponseError::InvalidUpdateVersion,
        E::IneligibleReplica => ResponseError::IneligibleReplica,
        E::Unavailable => ResponseError::RequestTimedOut,
    };
    error.code()
}

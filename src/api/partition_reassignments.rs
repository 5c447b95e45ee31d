//! AlterPartitionReassignments (v0-1) and ListPartitionReassignments (v0),
//! what `kafka-reassign-partitions` and `kafka-topics --describe` send. In
//! a cluster they start, replace, cancel and list the reassignments of
//! `controller::reassignments`, through etcd, on whichever broker the
//! request reached. Alone, the only replica there is is this broker: a
//! target of just this broker changes nothing and succeeds, a target naming
//! any other is refused as Kafka refuses an unregistered broker, a cancel
//! finds nothing in progress, and nothing is ever listed.
//!
//! * ALTER on the cluster is required to alter, DESCRIBE to list (Kafka's
//!   rules); denied, the top-level error is CLUSTER_AUTHORIZATION_FAILED.
//! * v0 always allows a change of the replication factor; v1 says whether
//!   it does, and the answer echoes it.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::ResponseError;

use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::controller::reassignments::{self, Answered, ReassignmentError, Requested};
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

const DENIED: &str = "Cluster authorization failed.";

pub fn alter(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    let allow = version == 0 || request.allow_replication_factor_change;
    let response =
        AlterPartitionReassignmentsResponse::default().with_allow_replication_factor_change(allow);
    let requested: Vec<Requested> = request
        .topics
        .iter()
        .map(|t| {
            let targets = t.partitions.iter().map(|p| {
                let target = p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
                (p.partition_index, target)
            });
            (t.name.0.to_string(), targets.collect())
        })
        .collect();
    if !ctx.authorize(AclOperation::Alter, ResourceType::Cluster, CLUSTER_NAME) {
        // As Kafka's error response: the top level and every partition.
        let code = ResponseError::ClusterAuthorizationFailed;
        let denied = |(t, parts): Requested| {
            (t, parts.into_iter().map(|(p, _)| (p, Err(ReassignmentError::Denied))).collect())
        };
        let responses = responses(requested.into_iter().map(denied).collect());
        return response
            .with_error_code(code.code())
            .with_error_message(Some(str_bytes(DENIED.to_string())))
            .with_responses(responses);
    }
    let answers = match &broker.topics {
        Some(topics) => crate::blocking::off_worker(|| {
            tokio::runtime::Handle::current().block_on(topics.alter_reassignments(requested, allow))
        }),
        None => requested.into_iter().map(|r| alone(broker, r)).collect(),
    };
    response.with_responses(responses(answers))
}

/// One node: each partition's only replica is this broker, the only one
/// registered.
fn alone(broker: &KafkaApis, (topic, parts): Requested) -> Answered {
    let node = broker.node_id;
    let answer = |(p, target): (i32, Option<Vec<i32>>)| {
        let result = if !broker.logs.contains_partition(&topic, p) {
            Err(ReassignmentError::UnknownPartition)
        } else {
            match target {
                None => Err(ReassignmentError::NoneInProgress),
                // Passing the checks, the target is [node]: nothing changes.
                Some(t) => reassignments::check_target(&|b| b == node, &t),
            }
        };
        (p, result)
    };
    let answers = parts.into_iter().map(answer).collect();
    (topic, answers)
}

fn code_of(r: &Result<(), ReassignmentError>) -> (i16, Option<String>) {
    let Err(e) = r else { return (0, None) };
    let code = match e {
        ReassignmentError::UnknownPartition => ResponseError::UnknownTopicOrPartition,
        ReassignmentError::InvalidAssignment(_) => ResponseError::InvalidReplicaAssignment,
        ReassignmentError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
        ReassignmentError::NoneInProgress => ResponseError::NoReassignmentInProgress,
        ReassignmentError::Unavailable(_) => ResponseError::RequestTimedOut,
        ReassignmentError::Denied => ResponseError::ClusterAuthorizationFailed,
    };
    (code.code(), Some(e.to_string()))
}

/// The per-topic answers, as the request grouped them.
fn responses(answers: Vec<Answered>) -> Vec<ReassignableTopicResponse> {
    let partition = |(p, result): (i32, Result<(), ReassignmentError>)| {
        let (code, message) = code_of(&result);
        ReassignablePartitionResponse::default()
            .with_partition_index(p)
            .with_error_code(code)
            .with_error_message(message.map(str_bytes))
    };
    let topic = |(name, parts): Answered| {
        ReassignableTopicResponse::default()
            .with_name(TopicName(str_bytes(name)))
            .with_partitions(parts.into_iter().map(partition).collect())
    };
    answers.into_iter().map(topic).collect()
}

pub fn list(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !ctx.authorize(AclOperation::Describe, ResourceType::Cluster, CLUSTER_NAME) {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let Some(topics) = &broker.topics else {
        return ListPartitionReassignmentsResponse::default();
    };
    let wanted: Option<BTreeMap<String, Vec<i32>>> = request
        .topics
        .as_ref()
        .map(|ts| ts.iter().map(|t| (t.name.0.to_string(), t.partition_indexes.clone())).collect());
    let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let partition = |o: reassignments::Ongoing| {
        OngoingPartitionReassignment::default()
            .with_partition_index(o.partition)
            .with_replicas(ids(&o.replicas))
            .with_adding_replicas(ids(&o.reassignment.adding))
            .with_removing_replicas(ids(&o.reassignment.removing))
    };
    let out: Vec<OngoingTopicReassignment> =
        reassignments::ongoing(&topics.image(), wanted.as_ref())
            .into_iter()
            .map(|(name, parts)| {
                OngoingTopicReassignment::default()
                    .with_name(TopicName(str_bytes(name)))
                    .with_partitions(parts.into_iter().map(partition).collect())
            })
            .collect();
    ListPartitionReassignmentsResponse::default().with_topics(out)
}

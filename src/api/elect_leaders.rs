//! ElectLeaders (v0-2, `kafka-leader-election`): in a cluster, the
//! preferred or unclean elections of `controller::elections`, made through
//! etcd by the broker the request reached; alone, every partition is led
//! by its only replica already (ELECTION_NOT_NEEDED; UNKNOWN_TOPIC_OR_PARTITION
//! for one that does not exist).
//!
//! * ALTER on the cluster is required (Kafka's rule): denied, the
//!   top-level error is CLUSTER_AUTHORIZATION_FAILED (v1+; v0 has none,
//!   and every partition carries it).
//! * v0 is always a preferred election; v1+ name the type (0 preferred, 1
//!   unclean; another gets INVALID_REQUEST).
//! * With no partitions named, every partition is tried and, as on Kafka,
//!   only the partitions where something happened or failed are answered
//!   (ELECTION_NOT_NEEDED is left out).

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::ResponseError;

use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::controller::elections::{ElectionOutcome, ElectionType};
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    let requested: Option<Vec<(String, i32)>> = request.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.0.to_string(), *p)))
            .collect()
    });
    if !ctx.authorize(AclOperation::Alter, ResourceType::Cluster, CLUSTER_NAME) {
        let code = ResponseError::ClusterAuthorizationFailed.code();
        let each = requested.unwrap_or_default().into_iter().map(|(t, p)| (t, p, code, None));
        let response = ElectLeadersResponse::default().with_replica_election_results(results(each));
        return if version >= 1 { response.with_error_code(code) } else { response };
    }
    let kind = match (version, request.election_type) {
        (0, _) | (_, 0) => ElectionType::Preferred,
        (_, 1) => ElectionType::Unclean,
        _ => {
            return ElectLeadersResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code())
        }
    };
    let all = requested.is_none();
    let outcomes = match &broker.topics {
        Some(topics) => crate::blocking::off_worker(|| {
            tokio::runtime::Handle::current().block_on(topics.elect_leaders(requested, kind))
        }),
        None => alone(broker, requested),
    };
    let each = outcomes
        .into_iter()
        .filter(|(_, _, o)| !(all && *o == ElectionOutcome::NotNeeded))
        .map(|(t, p, o)| {
            let (code, message) = code_of(&o, &t, p);
            (t, p, code, message)
        });
    ElectLeadersResponse::default().with_replica_election_results(results(each))
}

/// One node: each partition is led by its only replica.
fn alone(
    broker: &KafkaApis,
    requested: Option<Vec<(String, i32)>>,
) -> Vec<(String, i32, ElectionOutcome)> {
    let Some(requested) = requested else { return Vec::new() };
    let outcome = |t: &str, p: i32| {
        if broker.logs.contains_partition(t, p) {
            ElectionOutcome::NotNeeded
        } else {
            ElectionOutcome::UnknownPartition
        }
    };
    requested.into_iter().map(|(t, p)| (t.clone(), p, outcome(&t, p))).collect()
}

fn code_of(o: &ElectionOutcome, topic: &str, p: i32) -> (i16, Option<String>) {
    match o {
        ElectionOutcome::Elected => (0, None),
        ElectionOutcome::NotNeeded => (
            ResponseError::ElectionNotNeeded.code(),
            Some("Leader election not needed for topic partition.".into()),
        ),
        ElectionOutcome::PreferredLeaderNotAvailable => (
            ResponseError::PreferredLeaderNotAvailable.code(),
            Some(format!("Failed to elect leader for partition {topic}-{p} under strategy PreferredReplicaPartitionLeaderElectionStrategy")),
        ),
        ElectionOutcome::EligibleLeadersNotAvailable => (
            ResponseError::EligibleLeadersNotAvailable.code(),
            Some(format!("Failed to elect leader for partition {topic}-{p}: no replica is alive")),
        ),
        ElectionOutcome::UnknownPartition => (
            ResponseError::UnknownTopicOrPartition.code(),
            Some("The partition does not exist.".into()),
        ),
        ElectionOutcome::Unavailable(why) => {
            (ResponseError::RequestTimedOut.code(), Some(why.clone()))
        }
    }
}

/// The per-topic results, topics in the order first met.
fn results(
    each: impl Iterator<Item = (String, i32, i16, Option<String>)>,
) -> Vec<ReplicaElectionResult> {
    let mut out: Vec<ReplicaElectionResult> = Vec::new();
    for (topic, p, code, message) in each {
        let r = PartitionResult::default()
            .with_partition_id(p)
            .with_error_code(code)
            .with_error_message(message.map(str_bytes));
        match out.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(t) => t.partition_result.push(r),
            None => out.push(
                ReplicaElectionResult::default()
                    .with_topic(TopicName(str_bytes(topic)))
                    .with_partition_result(vec![r]),
            ),
        }
    }
    out
}

//! CreatePartitions: grow a topic to a larger partition count. Each topic
//! needs ALTER on it, checked before its existence:
//! TOPIC_AUTHORIZATION_FAILED otherwise (Kafka's `ControllerApis`).
//!
//! A request adds at most [`MAX_NEW_PARTITIONS_PER_REQUEST`] partitions in
//! all, as on Kafka, so a count of 2^31 - 1 is refused before anything is
//! made.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::error::cluster_error_code;
use super::error::error_code;
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};

/// Most partitions one request may add: each is one record of the
/// controller's batch, which Kafka caps at 10,000 records. Past it Kafka
/// 4.4 answers POLICY_VIOLATION for every topic of the request, as here
/// (4.1 answered UNKNOWN_SERVER_ERROR, its controller's unhandled refusal).
pub const MAX_NEW_PARTITIONS_PER_REQUEST: i64 = 10_000;

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let alterable: Vec<bool> = {
        let allowed = ctx.filter_authorized(
            AclOperation::Alter,
            ResourceType::Topic,
            request.topics.iter().map(|t| t.name.0.as_str()),
        );
        request.topics.iter().map(|t| allowed.get(t.name.0.as_str()) == Some(&true)).collect()
    };
    // Every topic is checked first; nothing is created unless the request's
    // new partitions together stay within the cap.
    let checked: Vec<_> = request
        .topics
        .iter()
        .zip(alterable)
        .map(|(t, alterable)| check(broker, t, alterable))
        .collect();
    let added: i64 = checked.iter().filter_map(|c| c.as_ref().ok()).map(|n| i64::from(*n)).sum();
    let too_many = added > MAX_NEW_PARTITIONS_PER_REQUEST;
    let results = request
        .topics
        .into_iter()
        .zip(checked)
        .map(|(t, checked)| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            match checked {
                Err((code, message)) => with_error(result, code, message),
                Ok(_) if too_many => {
                    let msg = format!("the request adds {added} partitions; at most {MAX_NEW_PARTITIONS_PER_REQUEST} may be added at once");
                    with_error(result, ResponseError::PolicyViolation, Some(msg))
                }
                Ok(_) if request.validate_only => result,
                Ok(_) => match grow(broker, &t, request.timeout_ms) {
                    Ok(()) => result,
                    Err((code, message)) => with_error(result, code, Some(message)),
                },
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

/// Add `t`'s partitions: in a cluster through etcd (placed there, or as
/// the request assigns them), waiting up to the timeout for their leaders.
fn grow(
    broker: &KafkaApis,
    t: &CreatePartitionsTopic,
    timeout_ms: i32,
) -> Result<(), (ResponseError, String)> {
    match &broker.topics {
        Some(topics) => {
            let given = t
                .assignments
                .as_ref()
                .map(|a| a.iter().map(|a| a.broker_ids.iter().map(|b| b.0).collect()).collect());
            let wait = std::time::Duration::from_millis(timeout_ms.max(0) as u64);
            crate::blocking::off_worker(|| {
                tokio::runtime::Handle::current()
                    .block_on(topics.add_partitions(&t.name.0, t.count, given, wait))
            })
            .map_err(|e| (cluster_error_code(&e), e.to_string()))
        }
        _ => broker
            .logs
            .create_partitions(&t.name.0, t.count)
            .map_err(|e| (error_code(&e), e.to_string())),
    }
}

fn with_error(
    result: CreatePartitionsTopicResult,
    code: ResponseError,
    message: Option<String>,
) -> CreatePartitionsTopicResult {
    result.with_error_code(code.code()).with_error_message(message.map(str_bytes))
}

/// How many partitions `t` adds, or why it may not.
fn check(
    broker: &KafkaApis,
    t: &CreatePartitionsTopic,
    alterable: bool,
) -> Result<i32, (ResponseError, Option<String>)> {
    let name = t.name.0.as_str();
    if !alterable {
        return Err((ResponseError::TopicAuthorizationFailed, None));
    }
    let in_cluster = broker.topics.as_ref();
    let partitions = match in_cluster {
        Some(topics) => topics.image().topics.topic(name).map(|t| t.partition_count()),
        None => broker.logs.topic(name).map(|t| t.partitions),
    };
    let Some(partitions) = partitions else {
        let msg = format!("topic {name} does not exist");
        return Err((ResponseError::UnknownTopicOrPartition, Some(msg)));
    };
    if t.count <= partitions {
        let msg = format!(
            "topic currently has {partitions} partitions, which is higher than or equal to the requested {}",
            t.count
        );
        return Err((ResponseError::InvalidPartitions, Some(msg)));
    }
    let added = i64::from(t.count) - i64::from(partitions);
    if let Some(assignments) =
        t.assignments.as_ref().filter(|a| in_cluster.is_some() && a.len() as i64 != added)
    {
        let msg = format!("{} assignments given for {added} new partitions", assignments.len());
        return Err((ResponseError::InvalidReplicaAssignment, Some(msg)));
    }
    if let Some(assignments) = t.assignments.as_ref().filter(|_| in_cluster.is_none()) {
        let node = broker.node_id;
        if assignments.len() as i64 != added
            || assignments.iter().any(|a| a.broker_ids.iter().any(|b| b.0 != node))
        {
            let msg = format!("new partitions must be assigned to broker {node} alone");
            return Err((ResponseError::InvalidReplicaAssignment, Some(msg)));
        }
    }
    Ok(t.count - partitions)
}

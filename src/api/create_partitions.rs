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

use super::error::error_code;
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};

/// Most partitions one request may add: each is one record of the
/// controller's batch, which Kafka caps at 10,000 records (it answers
/// UNKNOWN_SERVER_ERROR past it, for every topic of the request).
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
                    with_error(result, ResponseError::UnknownServerError, Some(msg))
                }
                Ok(_) if request.validate_only => result,
                Ok(_) => match broker.logs.create_partitions(&t.name.0, t.count) {
                    Ok(()) => result,
                    Err(e) => with_error(result, error_code(&e), Some(e.to_string())),
                },
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
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
    let Some(info) = broker.logs.topic(name) else {
        let msg = format!("topic {name} does not exist");
        return Err((ResponseError::UnknownTopicOrPartition, Some(msg)));
    };
    if t.count <= info.partitions {
        let msg = format!(
            "topic currently has {} partitions, which is higher than or equal to the requested {}",
            info.partitions, t.count
        );
        return Err((ResponseError::InvalidPartitions, Some(msg)));
    }
    if let Some(assignments) = &t.assignments {
        let node = broker.node_id;
        if assignments.len() as i64 != i64::from(t.count) - i64::from(info.partitions)
            || assignments.iter().any(|a| a.broker_ids.iter().any(|b| b.0 != node))
        {
            let msg = format!("new partitions must be assigned to broker {node} alone");
            return Err((ResponseError::InvalidReplicaAssignment, Some(msg)));
        }
    }
    Ok(t.count - info.partitions)
}

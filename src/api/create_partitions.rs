//! CreatePartitions: grow a topic to a larger partition count. Each topic
//! needs ALTER on it, checked before its existence:
//! TOPIC_AUTHORIZATION_FAILED otherwise (Kafka's `ControllerApis`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::error::error_code;
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};

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
    let results = request
        .topics
        .into_iter()
        .zip(alterable)
        .map(|(t, alterable)| {
            let name = t.name.0.to_string();
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            if !alterable {
                return result.with_error_code(ResponseError::TopicAuthorizationFailed.code());
            }
            let Some(info) = broker.logs.topic(&name) else {
                return result.with_error_code(ResponseError::UnknownTopicOrPartition.code()).with_error_message(Some(str_bytes(format!("topic {name} does not exist"))));
            };
            if t.count <= info.partitions {
                let msg = format!("topic currently has {} partitions, which is higher than or equal to the requested {}", info.partitions, t.count);
                return result.with_error_code(ResponseError::InvalidPartitions.code()).with_error_message(Some(str_bytes(msg)));
            }
            if let Some(assignments) = &t.assignments {
                if assignments.len() as i32 != t.count - info.partitions || assignments.iter().any(|a| a.broker_ids.iter().any(|b| b.0 != broker.node_id)) {
                    return result.with_error_code(ResponseError::InvalidReplicaAssignment.code()).with_error_message(Some(str_bytes(format!("new partitions must be assigned to broker {} alone", broker.node_id))));
                }
            }
            if request.validate_only {
                return result;
            }
            match broker.logs.create_partitions(&name, t.count) {
                Ok(()) => result,
                Err(e) => result.with_error_code(error_code(&e).code()).with_error_message(Some(str_bytes(e.to_string()))),
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

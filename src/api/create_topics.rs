//! CreateTopics: validate every topic (name, partition count, replication
//! factor of 1, configs) and create it unless `validate_only`.
//!
//! Kafka's caps on one request hold before anything is created: at most
//! [`MAX_PARTITIONS_PER_REQUEST`] partitions asked for and at most
//! [`MAX_RECORDS_PER_REQUEST`] records (a topic's, its partitions', its
//! configs'); past either, every topic of the request is POLICY_VIOLATION,
//! so a count of 2^31 - 1 never reaches the log manager.
//!
//! Authorization (Kafka's `ControllerApis.createTopics`): CREATE on the
//! cluster allows every topic; without it each name needs CREATE on the
//! topic, checked before anything else about it (so a refused name learns
//! nothing, not even that it exists): TOPIC_AUTHORIZATION_FAILED. A created
//! topic's configs (v5+), partition count and replication factor are
//! returned only with DESCRIBE_CONFIGS on it; otherwise
//! `topic_config_error_code` is TOPIC_AUTHORIZATION_FAILED and they stay
//! unset, as Kafka's `ReplicationControlManager` answers.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use super::describe_configs::topic_entries;
use super::error::cluster_error_code;
use super::error::error_code;
use super::{str_bytes, uuid_of, RequestContext};
use crate::api::KafkaApis;
use crate::controller::{ClusterTopics, NewTopic, TopicChangeError};
use crate::log::{LogError, LogManager};
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let names = || request.topics.iter().map(|t| t.name.0.as_str());
    // Kafka asks for CREATE on the cluster without recording a denial, and
    // for DESCRIBE_CONFIGS only to decide what the answer shows.
    let creatable = if ctx.is_authorized(AclOperation::Create, ResourceType::Cluster, CLUSTER_NAME)
    {
        names().map(|n| (n.to_string(), true)).collect()
    } else {
        owned(ctx.filter_authorized(AclOperation::Create, ResourceType::Topic, names()))
    };
    let describable: HashMap<String, bool> = names()
        .map(|n| {
            (
                n.to_string(),
                ctx.is_authorized(AclOperation::DescribeConfigs, ResourceType::Topic, n),
            )
        })
        .collect();
    let authorized: Vec<&CreatableTopic> =
        request.topics.iter().filter(|t| creatable.get(t.name.0.as_str()) == Some(&true)).collect();
    // Kafka's caps on one request, over the topics it may create: the
    // partitions asked for, then the records creating them would take.
    let asked: i64 = authorized.iter().map(|t| i64::from(asked_partitions(broker, t).max(0))).sum();
    let mut refused_all = (asked > MAX_PARTITIONS_PER_REQUEST).then(|| {
        format!("the request asks for {asked} partitions; at most {MAX_PARTITIONS_PER_REQUEST} may be created at once")
    });
    let checked: Vec<Outcome> = request
        .topics
        .iter()
        .map(|topic| match creatable.get(topic.name.0.as_str()) {
            Some(true) if refused_all.is_none() => check_topic(broker, topic),
            Some(true) => {
                Err((ResponseError::PolicyViolation, refused_all.clone().unwrap_or_default()))
            }
            _ => Err((ResponseError::TopicAuthorizationFailed, "Authorization failed.".into())),
        })
        .collect();
    let records: i64 = checked.iter().filter_map(|c| c.as_ref().ok()).map(|p| p.records()).sum();
    if records > MAX_RECORDS_PER_REQUEST {
        refused_all = Some(format!("creating these topics takes {records} records; at most {MAX_RECORDS_PER_REQUEST} may be written at once"));
    }
    let results = request
        .topics
        .iter()
        .zip(checked)
        .map(|(topic, checked)| {
            let result = CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_num_partitions(-1)
                .with_replication_factor(-1);
            let outcome = match (checked, &refused_all) {
                (Err(e), _) => Err(e),
                (Ok(_), Some(why)) => Err((ResponseError::PolicyViolation, why.clone())),
                (Ok(plan), None) => {
                    let describable = describable.get(&plan.name) == Some(&true);
                    let how = (request.validate_only, request.timeout_ms, describable);
                    create(broker, plan, how, version)
                }
            };
            match outcome {
                Ok(r) => r.with_name(topic.name.clone()),
                Err((code, message)) => {
                    result.with_error_code(code.code()).with_error_message(Some(str_bytes(message)))
                }
            }
        })
        .collect();
    CreateTopicsResponse::default().with_topics(results)
}

/// Most partitions one CreateTopics may ask for in all (Kafka's cap;
/// POLICY_VIOLATION past it).
pub const MAX_PARTITIONS_PER_REQUEST: i64 = 10_000;

/// Most records one CreateTopics may take in all: per topic one for the
/// topic, one per partition and one per config, as Kafka's controller
/// writes them (POLICY_VIOLATION past it).
pub const MAX_RECORDS_PER_REQUEST: i64 = 10_000;

type Outcome = Result<Planned, (ResponseError, String)>;

/// A topic that passed every check, ready to create.
struct Planned {
    name: String,
    partitions: i32,
    overrides: BTreeMap<String, String>,
    config: crate::log::LogConfig,
    /// As asked (-1: the default); only a cluster places more than one.
    replication_factor: i16,
    /// Replicas per partition, as asked (a cluster checks them).
    assignment: Option<Vec<Vec<i32>>>,
}

impl Planned {
    fn records(&self) -> i64 {
        1 + i64::from(self.partitions) + self.overrides.len() as i64
    }
}

/// What a topic asks for before any check: its assignments' count, the
/// default (-1), or its count as given (perhaps invalid).
fn asked_partitions(broker: &KafkaApis, topic: &CreatableTopic) -> i32 {
    if !topic.assignments.is_empty() {
        topic.assignments.len() as i32
    } else if topic.num_partitions == -1 {
        broker.config.num_partitions()
    } else {
        topic.num_partitions
    }
}

/// Check one topic's name, partitions, replication factor and configs.
fn check_topic(broker: &KafkaApis, topic: &CreatableTopic) -> Outcome {
    let name = topic.name.0.to_string();
    let fail = |e: LogError| (error_code(&e), e.to_string());
    LogManager::validate_topic_name(&name).map_err(fail)?;
    let partitions = partition_count(broker, topic)?;
    let mut overrides = BTreeMap::new();
    for c in &topic.configs {
        if let Some(v) = &c.value {
            overrides.insert(c.name.to_string(), v.to_string());
        }
    }
    let config = broker.logs.resolve_config(overrides.clone()).map_err(fail)?;
    let assignment = (!topic.assignments.is_empty()).then(|| {
        topic.assignments.iter().map(|a| a.broker_ids.iter().map(|b| b.0).collect()).collect()
    });
    let replication_factor = topic.replication_factor;
    Ok(Planned { name, partitions, overrides, config, replication_factor, assignment })
}

/// Create a checked topic (or, with `validate_only`, check it does not
/// exist yet) and answer as Kafka does.
fn create(
    broker: &KafkaApis,
    plan: Planned,
    (validate_only, timeout_ms, describable): (bool, i32, bool),
    version: i16,
) -> Result<CreatableTopicResult, (ResponseError, String)> {
    let (id, factor) = match &broker.topics {
        Some(topics) => create_in_cluster(broker, topics, &plan, validate_only, timeout_ms)?,
        _ => (create_here(broker, &plan, validate_only)?, 1),
    };
    let Planned { partitions, config, .. } = plan;
    let r = CreatableTopicResult::default().with_topic_id(uuid_of(id));
    if !describable {
        return Ok(r
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_topic_config_error_code(ResponseError::TopicAuthorizationFailed.code()));
    }
    let mut r = r.with_num_partitions(partitions).with_replication_factor(factor);
    if version >= 5 {
        let defaults = &broker.logs.topic_defaults();
        r.configs = Some(
            topic_entries(&config, defaults)
                .into_iter()
                .map(|e| {
                    CreatableTopicConfigs::default()
                        .with_name(str_bytes(e.name))
                        .with_value(Some(str_bytes(e.value)))
                        .with_config_source(e.source)
                })
                .collect(),
        );
    }
    Ok(r)
}

/// Create a checked topic in this node's logs; its id (zeros with
/// `validate_only`, once it is known not to exist).
fn create_here(
    broker: &KafkaApis,
    plan: &Planned,
    validate_only: bool,
) -> Result<[u8; 16], (ResponseError, String)> {
    let fail = |e: LogError| (error_code(&e), e.to_string());
    let Planned { name, partitions, overrides, .. } = plan;
    let (name, partitions) = (name.clone(), *partitions);
    let id = if validate_only {
        if broker.logs.topic(&name).is_some() {
            return Err(fail(LogError::TopicExists(name)));
        }
        [0; 16]
    } else {
        let info = broker.logs.create_topic(&name, partitions, overrides.clone()).map_err(fail)?;
        tracing::info!(topic = %name, partitions, "created topic");
        info.id
    };
    Ok(id)
}

/// Create a checked topic in the cluster (`controller::topics`), waiting up
/// to the request's timeout for its leaders; its id and replication factor.
fn create_in_cluster(
    broker: &KafkaApis,
    topics: &ClusterTopics,
    plan: &Planned,
    validate_only: bool,
    timeout_ms: i32,
) -> Result<([u8; 16], i16), (ResponseError, String)> {
    let fail = |e: TopicChangeError| (cluster_error_code(&e), e.to_string());
    let factor = match plan.replication_factor {
        -1 => broker.config.default_replication_factor(),
        f => i32::from(f),
    };
    let new = NewTopic {
        name: plan.name.clone(),
        partitions: plan.partitions,
        replication_factor: factor,
        assignment: plan.assignment.clone(),
        config: plan.overrides.clone(),
    };
    let factor =
        plan.assignment.as_ref().and_then(|a| a.first()).map_or(factor, |r| r.len() as i32);
    if validate_only {
        topics.plan(&new).map_err(fail)?;
        if topics.image().topics.topic(&plan.name).is_some() {
            return Err(fail(TopicChangeError::Exists(plan.name.clone())));
        }
        return Ok(([0; 16], factor as i16));
    }
    let wait = std::time::Duration::from_millis(timeout_ms.max(0) as u64);
    let created = crate::blocking::off_worker(|| {
        tokio::runtime::Handle::current().block_on(topics.create(&new, wait))
    });
    let id = created.map_err(fail)?;
    Ok((id, factor as i16))
}

/// The partition count a topic asks for (a count, the default, or an
/// assignment to this broker alone), with a replication factor of 1.
fn partition_count(
    broker: &KafkaApis,
    topic: &CreatableTopic,
) -> Result<i32, (ResponseError, String)> {
    if !topic.assignments.is_empty() {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err((
                ResponseError::InvalidRequest,
                "give either assignments or a partition count and replication factor".into(),
            ));
        }
        // A cluster checks assignments against its brokers.
        if broker.topics.is_none()
            && topic
                .assignments
                .iter()
                .any(|a| a.broker_ids.len() != 1 || a.broker_ids[0].0 != broker.node_id)
        {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!("every partition must be assigned to broker {} alone", broker.node_id),
            ));
        }
    }
    let partitions = asked_partitions(broker, topic);
    if partitions <= 0 {
        return Err((
            ResponseError::InvalidPartitions,
            format!("number of partitions must be larger than 0, got {partitions}"),
        ));
    }
    if broker.topics.is_none() && topic.replication_factor != -1 && topic.replication_factor != 1 {
        return Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "replication factor {} is larger than the 1 available broker",
                topic.replication_factor
            ),
        ));
    }
    Ok(partitions)
}

fn owned(decided: HashMap<&str, bool>) -> HashMap<String, bool> {
    decided.into_iter().map(|(n, ok)| (n.to_string(), ok)).collect()
}

//! Metadata: this node as the only broker and controller, and every requested
//! topic with its id and partitions (led by this node). Unknown topics are
//! created when both the client and `auto.create.topics.enable` allow it.
//! The broker is described at the advertised endpoint of the listener the
//! request came in on, as Kafka does, so each network sees its own address.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};

use super::error::error_code;
use super::{str_bytes, topic_name, uuid_of, RequestContext};
use crate::broker::Broker;
use crate::log::{LogError, LogManager, TopicInfo, TopicPartition};

fn topic_response(broker: &Broker, info: &TopicInfo) -> MetadataResponseTopic {
    let offline = broker.logs.offline_partitions();
    let node = BrokerId(broker.node_id);
    let partitions = (0..info.partitions)
        .map(|p| {
            let r = MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_replica_nodes(vec![node]);
            if offline.contains_key(&TopicPartition::new(info.name.clone(), p)) {
                r.with_error_code(ResponseError::KafkaStorageError.code())
                    .with_leader_id(BrokerId(-1))
                    .with_leader_epoch(-1)
                    .with_offline_replicas(vec![node])
            } else {
                r.with_leader_id(node).with_leader_epoch(0).with_isr_nodes(vec![node])
            }
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(info.name.clone())))
        .with_topic_id(uuid_of(info.id))
        .with_is_internal(info.name.starts_with("__"))
        .with_partitions(partitions)
        .with_topic_authorized_operations(i32::MIN)
}

fn error_topic(name: Option<String>, id: uuid::Uuid, code: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(code.code())
        .with_name(name.map(topic_name))
        .with_topic_id(id)
        .with_topic_authorized_operations(i32::MIN)
}

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext<'_>,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    // v0: an empty list means every topic; v1+: null means every topic.
    let requested = match request.topics {
        Some(t) if !(version == 0 && t.is_empty()) => Some(t),
        _ => None,
    };
    // Before v4 clients could not say no to auto-creation.
    let allow_auto_create =
        (version < 4 || request.allow_auto_topic_creation) && broker.config.auto_create_topics();
    let topics = match requested {
        None => broker.logs.topics().iter().map(|t| topic_response(broker, t)).collect(),
        Some(requested) => {
            let by_id: BTreeMap<[u8; 16], TopicInfo> =
                broker.logs.topics().into_iter().map(|t| (t.id, t)).collect();
            requested
                .into_iter()
                .map(|t| match t.name {
                    None => match by_id.get(t.topic_id.as_bytes()) {
                        Some(info) => topic_response(broker, info),
                        None => error_topic(None, t.topic_id, ResponseError::UnknownTopicId),
                    },
                    Some(name) => {
                        let name = name.0.to_string();
                        match broker.logs.topic(&name) {
                            Some(info) => topic_response(broker, &info),
                            None if !allow_auto_create => error_topic(Some(name), uuid::Uuid::nil(), ResponseError::UnknownTopicOrPartition),
                            None => match LogManager::validate_topic_name(&name).and_then(|_| broker.logs.create_topic(&name, broker.config.num_partitions(), BTreeMap::new())) {
                                Ok(info) => {
                                    tracing::info!(topic = %name, partitions = info.partitions, "auto-created topic");
                                    topic_response(broker, &info)
                                }
                                // Another request created it in between.
                                Err(LogError::TopicExists(_)) => broker.logs.topic(&name).map_or_else(|| error_topic(Some(name.clone()), uuid::Uuid::nil(), ResponseError::UnknownTopicOrPartition), |i| topic_response(broker, &i)),
                                Err(e) => error_topic(Some(name), uuid::Uuid::nil(), error_code(&e)),
                            },
                        }
                    }
                })
                .collect()
        }
    };
    let endpoint = broker.endpoint(&ctx.session.listener);
    let node = MetadataResponseBroker::default()
        .with_node_id(BrokerId(broker.node_id))
        .with_host(str_bytes(endpoint.host.clone()))
        .with_port(endpoint.port as i32);
    MetadataResponse::default()
        .with_brokers(vec![node])
        .with_cluster_id(Some(str_bytes(broker.cluster_id.clone())))
        .with_controller_id(BrokerId(broker.node_id))
        .with_topics(topics)
        .with_cluster_authorized_operations(i32::MIN)
}

//! Metadata: this node as the only broker and controller, and every requested
//! topic with its id and partitions (led by this node). Unknown topics are
//! created when both the client and `auto.create.topics.enable` allow it.
//! The broker is described at the advertised endpoint of the listener the
//! request came in on, as Kafka does, so each network sees its own address.
//!
//! Authorization (Kafka's `handleTopicMetadataRequest`): a topic is described
//! only with DESCRIBE on it. An all-topics request leaves the others out
//! silently (a filter: no denial recorded). A named topic without DESCRIBE
//! is TOPIC_AUTHORIZATION_FAILED with its name, a null id and no partitions
//! whether or not it exists: existence is looked at only after the check. A
//! topic asked for by id (v12+) is UNKNOWN_TOPIC_ID when no topic has it, and
//! without DESCRIBE it is TOPIC_AUTHORIZATION_FAILED with the id and a null
//! name (Kafka counts ids as not sensitive). Auto-creation of a describable
//! missing topic needs CREATE on the cluster or on the topic, else
//! TOPIC_AUTHORIZATION_FAILED. Authorized-operation fields are filled only
//! when asked for (`i32::MIN` otherwise): a topic's on every topic described
//! or looked up (not on refused ones or unknown ids); the cluster's (v8-10)
//! is 0 without DESCRIBE on the cluster.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};

use super::error::error_code;
use super::{str_bytes, topic_name, uuid_of, RequestContext};
use crate::api::KafkaApis;
use std::sync::Arc;

use super::error::cluster_error_code;
use crate::cluster::image::MetadataImage;
use crate::cluster::topics_image::TopicImage;
use crate::controller::{ClusterTopics, NewTopic, TopicChangeError};
use crate::log::{LogError, LogManager, TopicInfo, TopicPartition};
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

/// Where the topics come from: this node's logs, or in a cluster the image
/// this broker applied (also DescribeTopicPartitions').
pub(super) enum Catalog {
    Local,
    Cluster(Arc<MetadataImage>),
}

impl Catalog {
    pub(super) fn of(broker: &KafkaApis) -> Self {
        match &broker.cluster {
            Some(watcher) => Catalog::Cluster(watcher.current()),
            None => Catalog::Local,
        }
    }

    /// The described topic named `name`, if it exists.
    pub(super) fn describe(&self, broker: &KafkaApis, name: &str) -> Option<MetadataResponseTopic> {
        match self {
            Catalog::Cluster(image) => {
                image.topics.topic(name).map(|t| cluster_topic_response(image, t))
            }
            Catalog::Local => broker.logs.topic(name).map(|info| topic_response(broker, &info)),
        }
    }

    /// Every topic's name and id.
    pub(super) fn names_and_ids(&self, broker: &KafkaApis) -> Vec<(String, [u8; 16])> {
        match self {
            Catalog::Local => broker.logs.topics().into_iter().map(|t| (t.name, t.id)).collect(),
            Catalog::Cluster(image) => {
                image.topics.topics().map(|t| (t.name.clone(), t.id)).collect()
            }
        }
    }
}

fn topic_response(broker: &KafkaApis, info: &TopicInfo) -> MetadataResponseTopic {
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

/// A topic of the cluster: each partition's leader, epoch, replicas, ISR
/// and the replicas on brokers not eligible (Kafka's offline replicas); a
/// partition without a leader is LEADER_NOT_AVAILABLE.
fn cluster_topic_response(image: &MetadataImage, topic: &TopicImage) -> MetadataResponseTopic {
    let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let partitions = topic
        .assignment
        .iter()
        .map(|(&p, replicas)| {
            let offline: Vec<i32> =
                replicas.iter().copied().filter(|b| !image.is_eligible(*b)).collect();
            let r = MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_replica_nodes(ids(replicas))
                .with_offline_replicas(ids(&offline));
            match image.topics.state(&topic.name, p) {
                Some(s) if s.state.leader >= 0 => r
                    .with_leader_id(BrokerId(s.state.leader))
                    .with_leader_epoch(s.state.leader_epoch)
                    .with_isr_nodes(ids(&s.state.isr)),
                state => r
                    .with_error_code(ResponseError::LeaderNotAvailable.code())
                    .with_leader_id(BrokerId(-1))
                    .with_leader_epoch(state.map_or(-1, |s| s.state.leader_epoch))
                    .with_isr_nodes(state.map_or_else(Vec::new, |s| ids(&s.state.isr))),
            }
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(topic.name.clone())))
        .with_topic_id(uuid_of(topic.id))
        .with_is_internal(topic.name.starts_with("__"))
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

/// Kafka's answer for a topic the principal may not describe (or create):
/// nothing about it but the name or id it was asked by.
fn refused_topic(name: Option<String>, id: uuid::Uuid) -> MetadataResponseTopic {
    let internal = matches!(name.as_deref(), Some("__consumer_offsets" | "__transaction_state"));
    error_topic(name, id, ResponseError::TopicAuthorizationFailed).with_is_internal(internal)
}

/// Create `name` on a Metadata request's behalf (the principal may).
fn auto_create(broker: &KafkaApis, catalog: &Catalog, name: String) -> MetadataResponseTopic {
    if let Some(topics) = &broker.topics {
        return auto_create_in_cluster(broker, topics, name);
    }
    let created = LogManager::validate_topic_name(&name).and_then(|_| {
        broker.logs.create_topic(&name, broker.config.num_partitions(), BTreeMap::new())
    });
    match created {
        Ok(info) => {
            tracing::info!(topic = %name, partitions = info.partitions, "auto-created topic");
            topic_response(broker, &info)
        }
        // Another request created it in between.
        Err(LogError::TopicExists(_)) => match catalog.describe(broker, &name) {
            Some(t) => t,
            None => {
                error_topic(Some(name), uuid::Uuid::nil(), ResponseError::UnknownTopicOrPartition)
            }
        },
        Err(e) => error_topic(Some(name), uuid::Uuid::nil(), error_code(&e)),
    }
}

/// Auto-creation in a cluster: the topic is written to etcd and described
/// as this broker's image then has it (its leaders may still be coming:
/// LEADER_NOT_AVAILABLE, which clients retry).
fn auto_create_in_cluster(
    broker: &KafkaApis,
    topics: &ClusterTopics,
    name: String,
) -> MetadataResponseTopic {
    if let Err(e) = LogManager::validate_topic_name(&name) {
        return error_topic(Some(name), uuid::Uuid::nil(), error_code(&e));
    }
    let new = NewTopic {
        name: name.clone(),
        partitions: broker.config.num_partitions(),
        replication_factor: broker.config.default_replication_factor(),
        assignment: None,
        config: BTreeMap::new(),
    };
    let created = crate::blocking::off_worker(|| {
        tokio::runtime::Handle::current().block_on(topics.create(&new, AUTO_CREATE_WAIT))
    });
    match created {
        Ok(_) | Err(TopicChangeError::Exists(_) | TopicChangeError::TimedOut(_)) => {
            tracing::info!(topic = %name, "auto-created topic in the cluster");
            let image = topics.image();
            match image.topics.topic(&name) {
                Some(t) => cluster_topic_response(&image, t),
                None => {
                    error_topic(Some(name), uuid::Uuid::nil(), ResponseError::LeaderNotAvailable)
                }
            }
        }
        Err(e) => {
            tracing::warn!(topic = %name, "auto-creation in the cluster failed: {e}");
            error_topic(Some(name), uuid::Uuid::nil(), cluster_error_code(&e))
        }
    }
}

/// How long an auto-creation waits for its leaders before answering.
const AUTO_CREATE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The topics a request names (by name or, v12+, by id), in its order.
fn named_topics(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    requested: Vec<MetadataRequestTopic>,
    allow_auto_create: bool,
) -> Vec<MetadataResponseTopic> {
    let catalog = Catalog::of(broker);
    let by_id: BTreeMap<[u8; 16], String> =
        catalog.names_and_ids(broker).into_iter().map(|(name, id)| (id, name)).collect();
    // Each entry's name: asked for, or the name of the topic its id is.
    let names: Vec<Option<String>> = requested
        .iter()
        .map(|t| match &t.name {
            Some(name) => Some(name.0.to_string()),
            None => by_id.get(t.topic_id.as_bytes()).cloned(),
        })
        .collect();
    let describable: HashMap<String, bool> = ctx
        .filter_authorized(
            AclOperation::Describe,
            ResourceType::Topic,
            names.iter().flatten().map(String::as_str),
        )
        .into_iter()
        .map(|(n, ok)| (n.to_string(), ok))
        .collect();
    let mut cluster_create = None;
    let mut creatable: HashMap<String, bool> = HashMap::new();
    let mut topics = Vec::with_capacity(requested.len());
    for (t, name) in requested.into_iter().zip(names) {
        let by_name = t.name.is_some();
        let Some(name) = name else {
            topics.push(error_topic(None, t.topic_id, ResponseError::UnknownTopicId));
            continue;
        };
        if describable.get(&name) != Some(&true) {
            topics.push(if by_name {
                refused_topic(Some(name), uuid::Uuid::nil())
            } else {
                refused_topic(None, t.topic_id)
            });
            continue;
        }
        if let Some(described) = catalog.describe(broker, &name) {
            topics.push(described);
            continue;
        }
        if !allow_auto_create {
            let unknown = ResponseError::UnknownTopicOrPartition;
            topics.push(error_topic(Some(name), uuid::Uuid::nil(), unknown));
            continue;
        }
        // CREATE on the cluster is asked once and not recorded as a denial
        // (Kafka's logIfDenied=false); CREATE on the topic is.
        let on_cluster = *cluster_create.get_or_insert_with(|| {
            ctx.is_authorized(AclOperation::Create, ResourceType::Cluster, CLUSTER_NAME)
        });
        let may_create = on_cluster
            || *creatable
                .entry(name.clone())
                .or_insert_with(|| ctx.authorize(AclOperation::Create, ResourceType::Topic, &name));
        topics.push(if may_create {
            auto_create(broker, &catalog, name)
        } else {
            refused_topic(Some(name), uuid::Uuid::nil())
        });
    }
    topics
}

pub fn handle(
    broker: &KafkaApis,
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
    let mut topics: Vec<MetadataResponseTopic> = match requested {
        None => {
            let catalog = Catalog::of(broker);
            catalog
                .names_and_ids(broker)
                .iter()
                .filter(|(name, _)| {
                    ctx.is_authorized(AclOperation::Describe, ResourceType::Topic, name)
                })
                .filter_map(|(name, _)| catalog.describe(broker, name))
                .collect()
        }
        Some(requested) => named_topics(broker, ctx, requested, allow_auto_create),
    };
    if version >= 8 && request.include_topic_authorized_operations {
        let refused = [ResponseError::TopicAuthorizationFailed, ResponseError::UnknownTopicId]
            .map(|e| e.code());
        for t in topics.iter_mut().filter(|t| !refused.contains(&t.error_code)) {
            if let Some(name) = &t.name {
                t.topic_authorized_operations =
                    ctx.authorized_operations(ResourceType::Topic, name.0.as_str());
            }
        }
    }
    let cluster_operations =
        if (8..=10).contains(&version) && request.include_cluster_authorized_operations {
            if ctx.authorize_cluster(AclOperation::Describe) {
                ctx.authorized_operations(ResourceType::Cluster, CLUSTER_NAME)
            } else {
                0
            }
        } else {
            i32::MIN
        };
    let (brokers, controller_id) = match &broker.cluster {
        Some(watcher) => cluster_brokers(&watcher.current(), &ctx.session.listener),
        None => {
            let endpoint = broker.endpoint(&ctx.session.listener);
            let node = MetadataResponseBroker::default()
                .with_node_id(BrokerId(broker.node_id))
                .with_host(str_bytes(endpoint.host.clone()))
                .with_port(endpoint.port as i32);
            (vec![node], broker.node_id)
        }
    };
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(str_bytes(broker.cluster_id.clone())))
        .with_controller_id(BrokerId(controller_id))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_operations)
}

/// The cluster's RUNNING brokers at their endpoint of `listener`, and the
/// controller's id (-1: none now).
fn cluster_brokers(image: &MetadataImage, listener: &str) -> (Vec<MetadataResponseBroker>, i32) {
    let brokers = image
        .running_on(listener)
        .map(|(id, e, rack)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(str_bytes(e.host.clone()))
                .with_port(i32::from(e.port))
                .with_rack(rack.cloned().map(str_bytes))
        })
        .collect();
    (brokers, image.controller_id())
}

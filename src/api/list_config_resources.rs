//! ListConfigResources (API 74; v0 was ListClientMetricsResources, KIP-714,
//! v1 names the resource types: KIP-1142), as Kafka 4.4 answers it: the
//! config resources that exist, of the types asked for (none: every type
//! the version knows). `kafka-configs --describe --entity-type groups` asks
//! it which groups have configs.
//!
//! * Needs DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED).
//! * v0 knows client metrics (16) only; v1 also topics (2), brokers (4),
//!   broker loggers (8) and groups (32). A type the version does not know
//!   answers UNSUPPORTED_VERSION.
//! * Topics: every topic; brokers and loggers: every broker's id; groups:
//!   those with configs of their own (`group_config_manager`); client
//!   metrics: none (sediment takes no client metrics subscriptions).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};

use super::describe_configs::{
    RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_GROUP, RESOURCE_TOPIC,
};
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::security::acl::AclOperation;

/// ConfigResource.Type.CLIENT_METRICS.
const RESOURCE_CLIENT_METRICS: i8 = 16;

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &ListConfigResourcesRequest,
    version: i16,
) -> ListConfigResourcesResponse {
    let response = ListConfigResourcesResponse::default();
    if !ctx.authorize_cluster(AclOperation::DescribeConfigs) {
        return response.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let supported: &[i8] = if version == 0 {
        &[RESOURCE_CLIENT_METRICS]
    } else {
        &[
            RESOURCE_TOPIC,
            RESOURCE_BROKER,
            RESOURCE_BROKER_LOGGER,
            RESOURCE_CLIENT_METRICS,
            RESOURCE_GROUP,
        ]
    };
    let asked = if version == 0 || request.resource_types.is_empty() {
        supported.to_vec()
    } else {
        request.resource_types.clone()
    };
    if asked.iter().any(|t| !supported.contains(t)) {
        return response.with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let resource = |name: String, kind: i8| {
        ConfigResource::default().with_resource_name(str_bytes(name)).with_resource_type(kind)
    };
    let mut out = Vec::new();
    if asked.contains(&RESOURCE_GROUP) {
        if let Some(configs) = broker.groups.group_configs() {
            out.extend(configs.groups().into_iter().map(|g| resource(g, RESOURCE_GROUP)));
        }
    }
    for kind in [RESOURCE_BROKER_LOGGER, RESOURCE_BROKER] {
        if asked.contains(&kind) {
            out.extend(node_ids(broker).into_iter().map(|id| resource(id.to_string(), kind)));
        }
    }
    if asked.contains(&RESOURCE_TOPIC) {
        out.extend(topic_names(broker).into_iter().map(|t| resource(t, RESOURCE_TOPIC)));
    }
    response.with_config_resources(out)
}

/// The running brokers' ids (a single node: its own).
fn node_ids(broker: &KafkaApis) -> Vec<i32> {
    match &broker.cluster {
        Some(c) => c.current().brokers.keys().copied().collect(),
        None => vec![broker.node_id],
    }
}

/// Every topic (in a cluster, the cluster's).
fn topic_names(broker: &KafkaApis) -> Vec<String> {
    match &broker.cluster {
        Some(c) => c.current().topics.topics().map(|t| t.name.clone()).collect(),
        None => broker.logs.topics().into_iter().map(|t| t.name).collect(),
    }
}

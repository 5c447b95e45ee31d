//! DescribeCluster: a single node is the whole cluster and its controller,
//! at the advertised endpoint of the listener the request came in on. In a
//! cluster the answer is the image this broker applied from etcd: every
//! running broker with an endpoint on that listener (by name, as Kafka
//! matches them), and the controller (-1 while there is none); endpoint
//! type 2 (KIP-919's controllers) names the controller alone.
//! It needs no ACL; `cluster_authorized_operations`, when asked for, is 0
//! without DESCRIBE on the cluster (Kafka's `AuthHelper`), `i32::MIN` when
//! not asked for.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::cluster::image::MetadataImage;
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

/// Endpoint type 1: brokers; 2: controllers (KIP-919). One node is both.
pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &DescribeClusterRequest,
) -> DescribeClusterResponse {
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_id(str_bytes(broker.cluster_id.clone()));
    if request.endpoint_type != 1 && request.endpoint_type != 2 {
        return response
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_error_message(Some(str_bytes(format!(
                "unknown endpoint type {}",
                request.endpoint_type
            ))));
    }
    let operations = if !request.include_cluster_authorized_operations {
        i32::MIN
    } else if ctx.authorize_cluster(AclOperation::Describe) {
        ctx.authorized_operations(ResourceType::Cluster, CLUSTER_NAME)
    } else {
        0
    };
    let response = response.with_cluster_authorized_operations(operations);
    if let Some(cluster) = &broker.cluster {
        return from_image(
            &cluster.current(),
            &ctx.session.listener,
            request.endpoint_type,
            response,
        );
    }
    let endpoint = broker.endpoint(&ctx.session.listener);
    let node = DescribeClusterBroker::default()
        .with_broker_id(BrokerId(broker.node_id))
        .with_host(str_bytes(endpoint.host.clone()))
        .with_port(endpoint.port as i32);
    response.with_controller_id(BrokerId(broker.node_id)).with_brokers(vec![node])
}

/// The cluster's brokers on `listener`, and its controller, from `image`.
fn from_image(
    image: &MetadataImage,
    listener: &str,
    endpoint_type: i8,
    response: DescribeClusterResponse,
) -> DescribeClusterResponse {
    let controller = image.controller_id();
    let brokers = image
        .running_on(listener)
        .filter(|(id, ..)| endpoint_type == 1 || *id == controller)
        .map(|(id, e, rack)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(id))
                .with_host(str_bytes(e.host.clone()))
                .with_port(i32::from(e.port))
                .with_rack(rack.cloned().map(str_bytes))
        })
        .collect();
    response.with_controller_id(BrokerId(controller)).with_brokers(brokers)
}

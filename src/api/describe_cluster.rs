//! DescribeCluster: this single node is the whole cluster and its controller,
//! at the advertised endpoint of the listener the request came in on.
//! It needs no ACL; `cluster_authorized_operations`, when asked for, is 0
//! without DESCRIBE on the cluster (Kafka's `AuthHelper`), `i32::MIN` when
//! not asked for.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
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
    let endpoint = broker.endpoint(&ctx.session.listener);
    let node = DescribeClusterBroker::default()
        .with_broker_id(BrokerId(broker.node_id))
        .with_host(str_bytes(endpoint.host.clone()))
        .with_port(endpoint.port as i32);
    response
        .with_controller_id(BrokerId(broker.node_id))
        .with_brokers(vec![node])
        .with_cluster_authorized_operations(operations)
}

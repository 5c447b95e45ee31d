//! DescribeClientQuotas, which answers "no quotas" because sediment has
//! none (`kafka-configs --describe --entity-type users` asks for it beside
//! the SCRAM credentials).
//!
//! Authorization comes first: DESCRIBE_CONFIGS on the cluster; a denial is
//! CLUSTER_AUTHORIZATION_FAILED at the top level, with no entries.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::scram_credentials::CLUSTER_DENIED;
use super::{str_bytes, RequestContext};
use crate::security::acl::AclOperation;

/// DescribeClientQuotas as the principal may: DESCRIBE_CONFIGS on the cluster.
pub fn handle_describe_client_quotas(
    ctx: &RequestContext<'_>,
    request: &DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    if ctx.authorize_cluster(AclOperation::DescribeConfigs) {
        return describe_client_quotas(request);
    }
    DescribeClientQuotasResponse::default()
        .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
        .with_error_message(Some(str_bytes(CLUSTER_DENIED)))
        .with_entries(None)
}

/// sediment has no client quotas: every filter matches nothing.
pub fn describe_client_quotas(
    _request: &DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default().with_entries(Some(Vec::new()))
}

//! ApiVersions: the exact version range of every API in `SUPPORTED_APIS`.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use super::SUPPORTED_APIS;

fn api_list() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.key as i16)
                .with_min_version(a.min)
                .with_max_version(a.max)
        })
        .collect()
}

pub fn handle(_request: &ApiVersionsRequest, _version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(api_list())
        .with_finalized_features_epoch(-1)
}

/// The answer to an ApiVersions request of a version we do not know: error
/// UNSUPPORTED_VERSION with the list, always encoded as v0 (the client then
/// retries with a version from the list).
pub fn unsupported_version() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(kafka_protocol::error::ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_list())
        .with_finalized_features_epoch(-1)
}

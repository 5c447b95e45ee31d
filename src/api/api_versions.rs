//! ApiVersions: the exact version range of every API in `SUPPORTED_APIS`,
//! and (v3+) the features: `transaction.version`, supported 0-2 and
//! finalized at `sediment.transaction.version`, which Java clients 4.0+ read
//! to choose transactions v2 (KIP-890).
//!
//! Invariants, as the Java client reads them (it adopts a broker's finalized
//! features only when their epoch is above every epoch it saw before, and
//! never at -1):
//! * The finalized epoch is the time this broker process first answered
//!   ApiVersions, so a restart with another level is adopted by clients
//!   already running.
//! * A finalized level of 0 is left out, as Kafka leaves it out.
//! * Below v4 the supported features whose minimum is 0 are left out
//!   (Kafka's `maybeFilterSupportedFeatureKeys`: older clients refuse them).

use std::sync::OnceLock;

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::SUPPORTED_APIS;
use crate::txn::TransactionVersion;

/// Kafka's name of the feature.
pub const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";

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

/// The finalized features' epoch: when this process first answered.
fn features_epoch() -> i64 {
    static EPOCH: OnceLock<i64> = OnceLock::new();
    *EPOCH.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    })
}

/// The answer, with `level` as the finalized `transaction.version`. From v5
/// (KIP-1242) a client that names the cluster it means (and so the node)
/// gets REBOOTSTRAP_REQUIRED when this broker is another one: `identity` is
/// this broker's (cluster id, node id).
pub fn handle(
    request: &ApiVersionsRequest,
    version: i16,
    level: TransactionVersion,
    identity: (&str, i32),
) -> ApiVersionsResponse {
    use kafka_protocol::error::ResponseError;
    if version >= 5 {
        // Both or neither, as Kafka's `isValid` wants them.
        if request.cluster_id.is_some() != (request.node_id != -1) {
            return ApiVersionsResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code());
        }
        let named = request.cluster_id.as_deref();
        if named.is_some_and(|c| c != identity.0 || request.node_id != identity.1) {
            return ApiVersionsResponse::default()
                .with_error_code(ResponseError::RebootstrapRequired.code());
        }
    }
    let name = || StrBytes::from_static_str(TRANSACTION_VERSION_FEATURE);
    let supported = SupportedFeatureKey::default()
        .with_name(name())
        .with_min_version(0)
        .with_max_version(TransactionVersion::LATEST.level());
    let finalized = (level.level() > 0).then(|| {
        FinalizedFeatureKey::default()
            .with_name(name())
            .with_min_version_level(level.level())
            .with_max_version_level(level.level())
    });
    ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(api_list())
        .with_supported_features(if version >= 4 { vec![supported] } else { vec![] })
        .with_finalized_features_epoch(features_epoch())
        .with_finalized_features(finalized.into_iter().collect())
}

/// The answer during SASL authentication, before the client may learn
/// anything of the broker but its API versions: no features (clients read
/// them from the ApiVersions they send once authenticated).
pub fn handle_unauthenticated(_request: &ApiVersionsRequest) -> ApiVersionsResponse {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_version_is_advertised_as_kafka_reads_it() {
        let r = handle(&ApiVersionsRequest::default(), 4, TransactionVersion::TV_2, ("c", 1));
        assert!(r.finalized_features_epoch > 0);
        let f = &r.finalized_features;
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].name.as_str(), "transaction.version");
        assert_eq!((f[0].min_version_level, f[0].max_version_level), (2, 2));
        let s = &r.supported_features;
        assert_eq!(
            (s[0].name.as_str(), s[0].min_version, s[0].max_version),
            ("transaction.version", 0, 2)
        );
        // The same epoch on every answer of this process.
        let again = handle(&ApiVersionsRequest::default(), 3, TransactionVersion::TV_0, ("c", 1));
        assert_eq!(again.finalized_features_epoch, r.finalized_features_epoch);
        assert!(again.finalized_features.is_empty(), "level 0 is left out");
        assert!(again.supported_features.is_empty(), "min 0 is left out below v4");
    }

    #[test]
    fn a_client_meaning_another_cluster_or_node_is_told_to_rebootstrap() {
        let rebootstrap = kafka_protocol::error::ResponseError::RebootstrapRequired.code();
        let ask = |cluster: Option<&'static str>, node: i32, version: i16| {
            let request = ApiVersionsRequest::default()
                .with_cluster_id(cluster.map(StrBytes::from_static_str))
                .with_node_id(node);
            let r = handle(&request, version, TransactionVersion::TV_2, ("c", 1));
            (r.error_code, r.api_keys.is_empty())
        };
        assert_eq!(ask(Some("c"), 1, 5), (0, false));
        assert_eq!(ask(None, -1, 5), (0, false), "nothing named, nothing checked");
        assert_eq!(ask(Some("other"), 1, 5), (rebootstrap, true));
        assert_eq!(ask(Some("c"), 2, 5), (rebootstrap, true));
        assert_eq!(ask(Some("other"), 2, 4), (0, false), "not before v5");
        let invalid = kafka_protocol::error::ResponseError::InvalidRequest.code();
        assert_eq!(ask(Some("c"), -1, 5), (invalid, true), "a cluster without its node");
        assert_eq!(ask(None, 1, 5), (invalid, true), "a node without its cluster");
    }
}

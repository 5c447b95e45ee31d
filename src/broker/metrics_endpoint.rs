//! The metrics endpoint of a broker, over every part that reports to it.

use std::sync::Arc;

use super::cluster_member::ClusterMember;
use super::{AclAuditAuthorizer, BrokerError, MetricsEndpoint};
use crate::api::KafkaApis;
use crate::cleaner::LogCleaner;
use crate::metrics::access::AuditAuthorizer;
use crate::metrics::cluster::ClusterStatus;
use crate::metrics::Metrics;
use crate::remote::RemoteLogManager;

/// The metrics endpoint at `addr`, over every part that reports.
pub(super) async fn start_metrics(
    addr: &str,
    broker: &Arc<KafkaApis>,
    cleaner: &LogCleaner,
    remote: Option<&Arc<RemoteLogManager>>,
    member: Option<&Arc<ClusterMember>>,
) -> Result<MetricsEndpoint, BrokerError> {
    let max_timeout = broker.config.transaction_config().transaction_max_timeout_ms;
    let metrics = Metrics::new(
        Arc::clone(&broker.logs),
        Arc::clone(cleaner.handle()),
        &broker.request_metrics,
    )?
    .with_max_transaction_timeout_ms(i64::from(max_timeout));
    let metrics = match remote {
        Some(r) => metrics.with_remote(r.stats()),
        None => metrics,
    };
    let metrics = match broker.replica.remote_reader() {
        Some(reader) => metrics.with_remote_reads(reader.cache().reads())?,
        None => metrics,
    };
    let metrics = match member {
        Some(m) => metrics.with_cluster(Arc::clone(m) as Arc<dyn ClusterStatus>),
        None => metrics,
    };
    let mut access = broker.config.metrics_endpoint()?;
    access.authorizer = broker
        .acls
        .as_ref()
        .map(|acls| Arc::new(AclAuditAuthorizer(Arc::clone(acls))) as Arc<dyn AuditAuthorizer>);
    MetricsEndpoint::start(addr, metrics, access).await
}

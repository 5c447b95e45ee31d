//! A cluster member's metrics (docs/design/multi-broker.md, 12), refreshed
//! at each scrape from what the broker hands in as a [`ClusterStatus`]:
//! Kafka's `ActiveControllerCount` (1 on exactly one broker of a cluster; a
//! single node is its own controller and reads 1), whether the session's
//! lease timer runs, how many times it was lost, and the etcd revision of
//! the image the broker serves from.

use std::sync::Arc;

use prometheus::{IntCounter, IntGauge, Registry};

use super::{int_gauge, Metrics};

/// What a cluster member reports (implemented by the broker, above this
/// layer).
pub trait ClusterStatus: Send + Sync + std::fmt::Debug {
    /// This broker is the controller now.
    fn is_active_controller(&self) -> bool;
    /// The session's lease timer runs (the broker may lead).
    fn session_live(&self) -> bool;
    /// Times the session was lost.
    fn sessions_lost(&self) -> u64;
    /// The etcd revision of the image this broker serves from.
    fn applied_revision(&self) -> i64;
}

#[derive(Debug)]
pub(super) struct ClusterGauges {
    active_controller: IntGauge,
    session_live: IntGauge,
    session_lost: IntCounter,
    applied_revision: IntGauge,
}

impl ClusterGauges {
    pub(super) fn register(r: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            active_controller: int_gauge(
                r,
                "kafka_controller_kafkacontroller_activecontrollercount",
                "1 on the broker that is the cluster's controller (a single node is its own), 0 on the others",
            )?,
            session_live: int_gauge(
                r,
                "sediment_cluster_session_live",
                "1 while the broker's etcd session surely lasts (its lease timer runs) and it may lead; 0 on a single node",
            )?,
            session_lost: {
                let c = IntCounter::new(
                    "sediment_cluster_session_lost_total",
                    "Times the broker's etcd session was lost (etcd unanswered past the lease timer, or the lease expired)",
                )?;
                r.register(Box::new(c.clone()))?;
                c
            },
            applied_revision: int_gauge(
                r,
                "sediment_cluster_metadata_applied_revision",
                "The etcd revision of the cluster image this broker serves from (0 on a single node); brokers far apart are not following etcd",
            )?,
        })
    }

    pub(super) fn refresh(&self, status: Option<&dyn ClusterStatus>) {
        match status {
            None => {
                self.active_controller.set(1);
                self.session_live.set(0);
                self.applied_revision.set(0);
            }
            Some(s) => {
                self.active_controller.set(i64::from(s.is_active_controller()));
                self.session_live.set(i64::from(s.session_live()));
                self.applied_revision.set(s.applied_revision());
                // The member counts; the counter follows it up.
                let lost = s.sessions_lost();
                self.session_lost.inc_by(lost.saturating_sub(self.session_lost.get()));
            }
        }
    }
}

impl Metrics {
    /// Export a cluster member's state (without it: a single node's).
    #[must_use]
    pub fn with_cluster(mut self, status: Arc<dyn ClusterStatus>) -> Self {
        self.cluster = Some(status);
        self
    }

    pub(super) fn refresh_cluster(&self) {
        self.gauges.cluster.refresh(self.cluster.as_deref());
    }
}

//! A cluster member's metrics (docs/design/multi-broker.md, 12), refreshed
//! at each scrape from what the broker hands in as a [`ClusterStatus`]:
//! Kafka's `ActiveControllerCount` (1 on exactly one broker of a cluster; a
//! single node is its own controller and reads 1), whether the session's
//! lease timer runs, how many times it was lost, the etcd revision of the
//! image the broker serves from, and Kafka's `ReplicaManager` gauges
//! (leaders, partitions, under-replicated, under-min-ISR and reassigning
//! partitions, ISR shrinks and expansions), the controller's
//! OfflinePartitionsCount (the cluster's leaderless partitions), the
//! replication throttles' measured byte rates, and the replica fetchers'
//! FetcherStats (answered requests and bytes per fetcher thread) and
//! DeadThreadCount. A single
//! node leads all its partitions, in sync, and counts those in an offline
//! log dir as offline.

use std::sync::Arc;

use prometheus::{Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

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
    /// The partitions this broker holds and their replication.
    fn replication(&self) -> ReplicationCounts;
    /// On the active controller, the cluster's partitions without a leader
    /// (Kafka's OfflinePartitionsCount; 0 on the other brokers).
    fn offline_partitions(&self) -> i64;
    /// Leaders this broker elected from outside the ISR.
    fn unclean_elections(&self) -> u64;
    /// Each partition followed here and its lag, in offsets, behind its
    /// leader's high watermark as the last fetch answered.
    fn fetcher_lags(&self) -> Vec<(String, i32, i64)>;
    /// Each replica fetcher thread's client id with its answered requests
    /// and replicated record bytes so far (Kafka's FetcherStats).
    fn fetcher_stats(&self) -> Vec<(String, u64, u64)>;
    /// This broker's `node.id`.
    fn node_id(&self) -> i32;
    /// The replication throttles' measured rates in bytes per second, as
    /// leader and as follower (Kafka's LeaderReplication and
    /// FollowerReplication `byte-rate`).
    fn replication_byte_rates(&self) -> (f64, f64);
    /// What this broker's replica of a partition is now, with the leader
    /// epoch it knows (`None`: the cluster does not place it here).
    fn replica_role(&self, topic: &str, partition: i32) -> Option<(ReplicaRole, i32)>;
}

/// A local replica's part in its partition, as the views name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaRole {
    Leader,
    Follower,
    /// Placed here, with no live leader to follow.
    Offline,
}

impl ReplicaRole {
    pub fn name(self) -> &'static str {
        match self {
            ReplicaRole::Leader => "leader",
            ReplicaRole::Follower => "follower",
            ReplicaRole::Offline => "offline",
        }
    }
}

/// Kafka's `ReplicaManager` gauges and meters, as one broker counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicationCounts {
    /// Partitions led here.
    pub leaders: i64,
    /// Partitions with a replica here (led or followed).
    pub partitions: i64,
    /// Led here with an ISR smaller than the replicas.
    pub under_replicated: i64,
    /// Led here with an ISR below the effective min ISR.
    pub under_min_isr: i64,
    /// Led here with an ISR exactly at the effective min ISR.
    pub at_min_isr: i64,
    /// Led here and being reassigned.
    pub reassigning: i64,
    pub isr_shrinks: u64,
    pub isr_expands: u64,
    /// ISR changes the controller refused or did not answer.
    pub failed_isr_updates: u64,
    /// The largest lag of a partition this broker follows (Kafka's MaxLag).
    pub replica_max_lag: i64,
    /// Replica fetcher threads that ended while assigned partitions
    /// (Kafka's DeadThreadCount).
    pub fetcher_dead_threads: i64,
}

#[derive(Debug)]
pub(super) struct ClusterGauges {
    active_controller: IntGauge,
    session_live: IntGauge,
    session_lost: IntCounter,
    applied_revision: IntGauge,
    leaders: IntGauge,
    partitions: IntGauge,
    under_replicated: IntGauge,
    under_min_isr: IntGauge,
    at_min_isr: IntGauge,
    reassigning: IntGauge,
    offline: IntGauge,
    isr_shrinks: IntCounter,
    isr_expands: IntCounter,
    failed_isr_updates: IntCounter,
    replica_max_lag: IntGauge,
    fetcher_lag: IntGaugeVec,
    fetcher_requests: IntCounterVec,
    fetcher_bytes: IntCounterVec,
    fetcher_dead_threads: IntGauge,
    unclean_elections: IntCounter,
    leader_replication_rate: Gauge,
    follower_replication_rate: Gauge,
}

fn gauge(r: &Registry, name: &str, help: &str) -> Result<Gauge, prometheus::Error> {
    let g = Gauge::new(name, help)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

fn counter_vec(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<IntCounterVec, prometheus::Error> {
    let c = IntCounterVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

fn counter(r: &Registry, name: &str, help: &str) -> Result<IntCounter, prometheus::Error> {
    let c = IntCounter::new(name, help)?;
    r.register(Box::new(c.clone()))?;
    Ok(c)
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
            session_lost: counter(
                r,
                "sediment_cluster_session_lost_total",
                "Times the broker's etcd session was lost (etcd unanswered past the lease timer, or the lease expired)",
            )?,
            applied_revision: int_gauge(
                r,
                "sediment_cluster_metadata_applied_revision",
                "The etcd revision of the cluster image this broker serves from (0 on a single node); brokers far apart are not following etcd",
            )?,
            leaders: int_gauge(r, "kafka_server_replicamanager_leadercount", "Partitions this broker leads")?,
            partitions: int_gauge(r, "kafka_server_replicamanager_partitioncount", "Partitions with a replica on this broker")?,
            under_replicated: int_gauge(
                r,
                "kafka_server_replicamanager_underreplicatedpartitions",
                "Partitions led here whose ISR is smaller than their replicas",
            )?,
            under_min_isr: int_gauge(
                r,
                "kafka_server_replicamanager_underminisrpartitioncount",
                "Partitions led here whose ISR is below min.insync.replicas: acks=all is refused and the high watermark stays",
            )?,
            at_min_isr: int_gauge(
                r,
                "kafka_server_replicamanager_atminisrpartitioncount",
                "Partitions led here whose ISR is exactly min.insync.replicas: one more loss stops acks=all",
            )?,
            reassigning: int_gauge(
                r,
                "kafka_server_replicamanager_reassigningpartitions",
                "Partitions led here that a reassignment is moving (kafka-reassign-partitions)",
            )?,
            offline: int_gauge(
                r,
                "kafka_controller_kafkacontroller_offlinepartitionscount",
                "On the controller, partitions without a leader (their in-sync replicas all gone; a single node: those in an offline log dir); 0 on other brokers",
            )?,
            isr_shrinks: counter(r, "kafka_server_replicamanager_isrshrinks_total", "ISR shrinks this broker made as leader")?,
            isr_expands: counter(r, "kafka_server_replicamanager_isrexpands_total", "ISR expansions this broker made as leader")?,
            failed_isr_updates: counter(
                r,
                "kafka_server_replicamanager_failedisrupdates_total",
                "ISR changes this broker asked of the controller (AlterPartition) that were refused or not answered; the next round asks again",
            )?,
            replica_max_lag: int_gauge(
                r,
                "kafka_server_replicafetchermanager_maxlag",
                "The largest lag, in offsets, of a partition this broker follows behind its leader's high watermark, as the last fetch answered (Kafka's MaxLag, clientId=Replica)",
            )?,
            fetcher_lag: super::int_gauge_vec(
                r,
                "kafka_server_fetcherlagmetrics_consumerlag",
                "Per partition this broker follows, its lag in offsets behind its leader's high watermark as the last fetch answered (Kafka's FetcherLagMetrics ConsumerLag)",
                &["topic", "partition"],
            )?,
            fetcher_requests: counter_vec(
                r,
                "kafka_server_fetcherstats_requests_total",
                "Replica fetches answered, per fetcher thread (client_id ReplicaFetcherThread-<fetcher id>-<leader>; Kafka's FetcherStats RequestsPerSec)",
                &["client_id"],
            )?,
            fetcher_bytes: counter_vec(
                r,
                "kafka_server_fetcherstats_bytes_total",
                "Record bytes replicated, per fetcher thread (Kafka's FetcherStats BytesPerSec)",
                &["client_id"],
            )?,
            fetcher_dead_threads: int_gauge(
                r,
                "kafka_server_replicafetchermanager_deadthreadcount",
                "Replica fetcher threads that ended while assigned partitions (Kafka's DeadThreadCount): their partitions are not replicated until their leader changes",
            )?,
            unclean_elections: counter(
                r,
                "kafka_controller_controllerstats_uncleanleaderelections_total",
                "Leaders this broker elected from outside the ISR (as controller, or for ElectLeaders UNCLEAN asked of it); records only the old ISR held may be lost",
            )?,
            leader_replication_rate: gauge(
                r,
                "kafka_server_leaderreplication_byte_rate",
                "Bytes per second this broker sent as leader for replicas in leader.replication.throttled.replicas, as the throttle measures it (counted while leader.replication.throttled.rate is set)",
            )?,
            follower_replication_rate: gauge(
                r,
                "kafka_server_followerreplication_byte_rate",
                "Bytes per second this broker fetched as follower for replicas in follower.replication.throttled.replicas, as the throttle measures it",
            )?,
        })
    }

    /// `local_partitions`: a single node's logs, all led by it, and how
    /// many of them are offline.
    pub(super) fn refresh(
        &self,
        status: Option<&dyn ClusterStatus>,
        (local_partitions, local_offline): (i64, i64),
    ) {
        let counts = status.map_or(
            ReplicationCounts {
                leaders: local_partitions,
                partitions: local_partitions,
                ..ReplicationCounts::default()
            },
            ClusterStatus::replication,
        );
        self.leaders.set(counts.leaders);
        self.partitions.set(counts.partitions);
        self.under_replicated.set(counts.under_replicated);
        self.under_min_isr.set(counts.under_min_isr);
        self.at_min_isr.set(counts.at_min_isr);
        self.reassigning.set(counts.reassigning);
        self.isr_shrinks.inc_by(counts.isr_shrinks.saturating_sub(self.isr_shrinks.get()));
        self.isr_expands.inc_by(counts.isr_expands.saturating_sub(self.isr_expands.get()));
        let failed = counts.failed_isr_updates.saturating_sub(self.failed_isr_updates.get());
        self.failed_isr_updates.inc_by(failed);
        self.replica_max_lag.set(counts.replica_max_lag);
        self.fetcher_dead_threads.set(counts.fetcher_dead_threads);
        match status {
            None => {
                self.offline.set(local_offline);
                self.active_controller.set(1);
                self.session_live.set(0);
                self.applied_revision.set(0);
            }
            Some(s) => {
                self.offline.set(s.offline_partitions());
                self.active_controller.set(i64::from(s.is_active_controller()));
                self.session_live.set(i64::from(s.session_live()));
                self.applied_revision.set(s.applied_revision());
                // The member counts; the counter follows it up.
                let lost = s.sessions_lost();
                self.session_lost.inc_by(lost.saturating_sub(self.session_lost.get()));
                self.fetcher_lag.reset();
                for (topic, partition, lag) in s.fetcher_lags() {
                    let partition = partition.to_string();
                    self.fetcher_lag.with_label_values(&[&topic, &partition]).set(lag);
                }
                for (client_id, requests, bytes) in s.fetcher_stats() {
                    let r = self.fetcher_requests.with_label_values(&[&client_id]);
                    r.inc_by(requests.saturating_sub(r.get()));
                    let b = self.fetcher_bytes.with_label_values(&[&client_id]);
                    b.inc_by(bytes.saturating_sub(b.get()));
                }
                let (leader_rate, follower_rate) = s.replication_byte_rates();
                self.leader_replication_rate.set(leader_rate);
                self.follower_replication_rate.set(follower_rate);
                let unclean = s.unclean_elections();
                self.unclean_elections.inc_by(unclean.saturating_sub(self.unclean_elections.get()));
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
        let local = self.logs.all_logs().len() as i64;
        let offline = self.logs.offline_partitions().len() as i64;
        self.gauges.cluster.refresh(self.cluster.as_deref(), (local, offline));
    }
}

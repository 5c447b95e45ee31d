//! A broker's membership of a cluster (with `sediment.cluster.etcd.endpoints`
//! set): at start it reaches etcd within `initial.broker.registration.timeout.ms`,
//! checks the namespace's cluster id against `meta.properties`, registers
//! with its endpoints on its session's lease and campaigns for controller;
//! then it renews the session every heartbeat, and registers anew (a new
//! broker epoch) when etcd expired the old lease. At a clean stop it
//! revokes the session, so its registration and controller key go at once
//! and another broker takes over without waiting for the lease to expire.
//!
//! It keeps the cluster's image (`cluster::image`), which Metadata and
//! DescribeCluster answer from, runs the controller's reconciler (which
//! acts while this broker is the controller), writes topic changes
//! (`controller::topics`) and takes its producer ids from the cluster's
//! blocks, and serves the controller's side of AlterPartition.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::clock::SharedClock;
use crate::cluster::channel_security::ChannelSecurity;
use crate::cluster::image::ImageWatcher;
use crate::cluster::keys::{broker_state, BrokerRegistration, ClusterKeys, EndpointValue};
use crate::cluster::peers::BrokerChannels;
use crate::cluster::producer_ids::ClusterProducerIdBlocks;
use crate::cluster::registration::{self, JoinError};
use crate::cluster::security_store::ClusterSecurityStore;
use crate::cluster::session::{BrokerSession, KeepAlive};
use crate::cluster::{ClusterConfig, Coordination, EtcdCoordination};
use crate::controller::reconciler::Reconciler;
use crate::controller::{ClusterTopics, ControllerElection, ReplicationControl};
use crate::group::TopicCatalog;
use crate::metrics::cluster::{ClusterStatus, ReplicaRole, ReplicationCounts};
use crate::replica::coordinator_writes::ReplicatedCoordinatorWrites;
use crate::replica::leadership::LedPartition;
use crate::replica::replication_quota::ReplicationQuotas;
use crate::replica::Leadership;

#[derive(Debug)]
pub struct ClusterMember {
    /// The cluster's id (this broker's, or the namespace's it adopted).
    pub cluster_id: String,
    /// The cluster as this broker applied it.
    pub image: Arc<ImageWatcher>,
    namespace: String,
    node_id: i32,
    session: Arc<BrokerSession>,
    leadership: Arc<Leadership>,
    /// This broker's registration, for its state changes.
    registration: BrokerRegistration,
    /// How long a clean stop waits for leaderships to move (`None`: off).
    controlled_shutdown: Option<Duration>,
    election: Arc<ControllerElection>,
    /// How this broker's channels to the others authenticate.
    channel_security: Arc<ChannelSecurity>,
    tasks: Vec<JoinHandle<()>>,
    /// The broker's replication throttles, once attached (for the metrics).
    quotas: std::sync::OnceLock<Arc<ReplicationQuotas>>,
}

/// Who this broker is, for its registration.
pub struct Identity<'a> {
    pub node_id: i32,
    pub cluster_id: &'a str,
    /// The log dirs hold no partition: the namespace's cluster id may
    /// replace `cluster_id`.
    pub may_adopt: bool,
    /// The data dir's identity (host and first log dir): a registration
    /// naming it is this broker's own predecessor.
    pub directory_id: String,
    pub endpoints: Vec<EndpointValue>,
    /// `broker.rack`.
    pub rack: Option<String>,
    pub inter_broker_listener: String,
    /// How it proves who it is to the other brokers, on that listener.
    pub channel_security: Arc<ChannelSecurity>,
}

impl ClusterMember {
    /// Join the cluster (module doc).
    ///
    /// # Errors
    /// etcd unreachable within the registration timeout, another cluster's
    /// namespace, a duplicate `node.id`.
    pub async fn join(
        config: &ClusterConfig,
        who: Identity<'_>,
        clock: SharedClock,
    ) -> Result<Self, JoinError> {
        let deadline = Instant::now() + config.registration_timeout;
        let coordination = connect(config, deadline).await?;
        let session = BrokerSession::open(coordination, config.session, clock).await?;
        let session = Arc::new(session);
        let keys = ClusterKeys::new(&config.namespace);
        let cluster_id =
            registration::ensure_cluster_id(&session, &keys, who.cluster_id, who.may_adopt).await?;
        let value = registration_of(&who);
        let epoch = registration::register(&session, &keys, who.node_id, &value).await?;
        let election = Arc::new(ControllerElection::new(
            Arc::clone(&session),
            keys.clone(),
            who.node_id,
            epoch,
        ));
        let retry = Duration::from_millis(config.session.heartbeat_interval_ms as u64);
        let image = ImageWatcher::start(Arc::clone(session.coordination()), keys.clone(), retry);
        let image = Arc::new(image.await?);
        let campaign = tokio::spawn(Arc::clone(&election).run());
        let reconciler = Reconciler::new(
            Arc::clone(&election),
            Arc::clone(session.coordination()),
            (keys.clone(), Arc::clone(&image)),
            (config.leader_rebalance, config.unclean_leader_election),
        );
        let reconciler = tokio::spawn(reconciler.run());
        let registration = value.clone();
        let keepalive = tokio::spawn(keep_alive(
            Arc::clone(&session),
            Arc::clone(&election),
            (keys, who.node_id, value),
        ));
        let namespace = config.namespace.clone();
        let tasks = vec![campaign, keepalive, reconciler];
        let node_id = who.node_id;
        let live = Arc::clone(&session);
        let leadership = Arc::new(Leadership::new(node_id, move || live.is_live()));
        let controlled_shutdown = config.controlled_shutdown;
        Ok(Self {
            cluster_id,
            image,
            namespace,
            node_id,
            session,
            leadership,
            registration,
            controlled_shutdown,
            election,
            channel_security: who.channel_security,
            tasks,
            quotas: std::sync::OnceLock::new(),
        })
    }

    /// The cluster's producer id blocks, for this broker's InitProducerId.
    pub fn producer_id_blocks(&self, node_id: i32) -> ClusterProducerIdBlocks {
        let keys = ClusterKeys::new(self.namespace.as_str());
        let handle = tokio::runtime::Handle::current();
        ClusterProducerIdBlocks::new(Arc::clone(self.session.coordination()), keys, node_id, handle)
    }

    /// Give the handlers the cluster: its image, topic changes through
    /// etcd, coordinators that follow their partitions' leadership and the
    /// cluster's producer id blocks, ACLs, SCRAM credentials and dynamic
    /// broker configs.
    ///
    /// # Errors
    /// An ACL key in etcd is damaged (named).
    pub fn attach(
        &self,
        broker: &mut crate::api::KafkaApis,
    ) -> Result<(), crate::security::store::StoreError> {
        broker.cluster = Some(Arc::clone(&self.image));
        let _ = self.quotas.set(Arc::clone(broker.replica.quotas()));
        broker.topics = Some(self.topics());
        broker.replication_control = Some(Arc::new(self.replication_control()));
        let writes = ReplicatedCoordinatorWrites::new(
            Arc::clone(&broker.replica),
            Duration::from_millis(broker.groups.config().offsets_commit_timeout_ms.max(1) as u64),
            tokio::runtime::Handle::current(),
        );
        let catalog = Arc::new(ImageTopics(Arc::clone(&self.image)));
        let writes: Arc<dyn crate::replica::coordinator_writes::CoordinatorReplication> =
            Arc::new(writes);
        broker.groups.place_by_cluster(Arc::clone(&writes), catalog);
        broker.txn.state_manager().place_by_cluster(writes);
        let blocks = Arc::new(self.producer_id_blocks(broker.node_id));
        broker.producer_ids.lock().use_cluster_blocks(blocks);
        let security = Arc::new(ClusterSecurityStore::new(
            Arc::clone(self.session.coordination()),
            Arc::clone(&self.image),
            ClusterKeys::new(&self.namespace),
            tokio::runtime::Handle::current(),
        ));
        broker.scram.use_cluster(Arc::clone(&security));
        if let Some(configs) = broker.groups.group_configs() {
            configs.use_cluster(Arc::clone(&security));
        }
        if let Some(dynamic) = &broker.dynamic {
            let (logs, cleaner) = (Arc::clone(&broker.logs), broker.cleaner.clone());
            let replica = Arc::clone(&broker.replica);
            let hook = move |new: &crate::config::BrokerConfig| {
                crate::api::alter_configs::apply_effective((&logs, &replica), cleaner.as_ref(), new)
            };
            dynamic.use_cluster(Arc::clone(&security), self.node_id, Box::new(hook));
        }
        match &broker.acls {
            Some(acls) => acls.use_cluster(security),
            None => Ok(()),
        }
    }

    /// Only a partition's leader writes the store (docs/design/multi-broker.md, 8.1).
    pub fn upload_only_led(&self, remote: &crate::remote::RemoteLogManager) {
        let l = Arc::clone(&self.leadership);
        let leads =
            move |tp: &crate::log::TopicPartition| l.leads(tp) == crate::replica::Leading::Yes;
        remote.upload_only_for(crate::remote::remote_log_manager::UploadFilter(Box::new(leads)));
    }

    /// Connections to the other brokers, for this broker's own calls.
    pub fn peers(&self) -> Arc<BrokerChannels> {
        Arc::new(BrokerChannels::new(
            self.node_id,
            Arc::clone(&self.image),
            PEER_TIMEOUT,
            Arc::clone(&self.channel_security),
        ))
    }

    /// How this broker's channels to the others authenticate (the replica
    /// fetchers' too).
    pub fn channel_security(&self) -> Arc<ChannelSecurity> {
        Arc::clone(&self.channel_security)
    }

    /// Topic changes through etcd, for the admin requests and auto-creation.
    pub fn topics(&self) -> ClusterTopics {
        let keys = ClusterKeys::new(self.namespace.as_str());
        let unclean = Arc::clone(self.election.unclean_elections());
        ClusterTopics::new(
            Arc::clone(self.session.coordination()),
            keys,
            Arc::clone(&self.image),
            unclean,
        )
    }

    /// The partitions this broker leads, which count only while its
    /// session's timer runs.
    pub fn leadership(&self) -> Arc<Leadership> {
        Arc::clone(&self.leadership)
    }

    /// The leader's ISR changes, sent to the controller as AlterPartition
    /// on channels of their own, bounded by its answer timeout.
    pub fn isr_writer(&self) -> super::isr_writer::ControllerIsrWriter {
        let timeout = super::isr_writer::ANSWER_TIMEOUT;
        super::isr_writer::ControllerIsrWriter {
            image: Arc::clone(&self.image),
            election: Arc::clone(&self.election),
            peers: Arc::new(BrokerChannels::new(
                self.node_id,
                Arc::clone(&self.image),
                timeout,
                Arc::clone(&self.channel_security),
            )),
            node_id: self.node_id,
        }
    }

    /// The controller's side of AlterPartition (acting while this broker
    /// is the controller).
    pub fn replication_control(&self) -> ReplicationControl {
        ReplicationControl::new(
            Arc::clone(&self.election),
            Arc::clone(self.session.coordination()),
            ClusterKeys::new(self.namespace.as_str()),
            Arc::clone(&self.image),
        )
    }

    /// Controlled shutdown (docs/design/multi-broker.md, 6.6): register as
    /// PENDING_CONTROLLED_SHUTDOWN, so the controller moves this broker's
    /// leaderships to other in-sync replicas and drops it from the ISRs,
    /// then wait, serving meanwhile (clients get NOT_LEADER_OR_FOLLOWER and
    /// move), until it leads only partitions no other member can take, or
    /// the timeout. Skipped with `controlled.shutdown.enable=false`.
    pub async fn controlled_shutdown(&self) {
        let Some(timeout) = self.controlled_shutdown else { return };
        let keys = ClusterKeys::new(self.namespace.as_str());
        let value = BrokerRegistration {
            state: broker_state::PENDING_CONTROLLED_SHUTDOWN,
            ..self.registration.clone()
        };
        let epoch = self.election.broker_epoch();
        match registration::update(&self.session, &keys, self.node_id, epoch, &value).await {
            Ok(true) => {}
            Ok(false) => {
                return tracing::warn!(
                    "controlled shutdown: the registration is no longer this broker's"
                )
            }
            Err(e) => {
                return tracing::warn!("controlled shutdown: etcd did not take the new state: {e}")
            }
        }
        let started = Instant::now();
        let mut waiting = self.leadership.view().led.len();
        while started.elapsed() < timeout {
            // Led partitions another member could still take.
            let view = self.leadership.view();
            waiting =
                view.led.values().filter(|p| p.isr.iter().any(|m| *m != self.node_id)).count();
            if waiting == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let led = self.leadership.view().led.len();
        let elapsed_ms = started.elapsed().as_millis() as u64;
        tracing::info!(
            elapsed_ms,
            still_leading = led,
            not_moved = waiting,
            "controlled shutdown: leaderships moved"
        );
    }

    /// Leave: stop renewing and revoke the session (its keys go at once).
    pub async fn leave(&self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Err(e) = self.session.close().await {
            tracing::warn!("leaving the cluster: the session is left to expire: {e}");
        }
    }
}

impl ClusterStatus for ClusterMember {
    fn is_active_controller(&self) -> bool {
        self.election.is_active()
    }
    fn session_live(&self) -> bool {
        self.session.is_live()
    }
    fn sessions_lost(&self) -> u64 {
        self.session.lost_count()
    }
    fn applied_revision(&self) -> i64 {
        self.image.current().revision
    }
    fn unclean_elections(&self) -> u64 {
        self.election.unclean_elections().load(std::sync::atomic::Ordering::Relaxed)
    }
    fn offline_partitions(&self) -> i64 {
        if !self.election.is_active() {
            return 0;
        }
        let image = self.image.current();
        let mut offline = 0;
        for t in image.topics.topics() {
            let led =
                |p: &i32| image.topics.state(&t.name, *p).is_some_and(|s| s.state.leader >= 0);
            offline += t.assignment.keys().filter(|p| !led(p)).count() as i64;
        }
        offline
    }
    fn node_id(&self) -> i32 {
        self.node_id
    }

    fn replica_role(&self, topic: &str, partition: i32) -> Option<(ReplicaRole, i32)> {
        let tp = crate::log::TopicPartition::new(topic, partition);
        let view = self.leadership.view();
        if let Some(led) = view.led.get(&tp) {
            return Some((ReplicaRole::Leader, led.leader_epoch));
        }
        if let Some(epoch) = view.following.get(&tp) {
            return Some((ReplicaRole::Follower, *epoch));
        }
        let image = self.image.current();
        let placed = image.topics.topic(topic)?.assignment.get(&partition)?.contains(&self.node_id);
        let epoch = image.topics.state(topic, partition).map_or(-1, |s| s.state.leader_epoch);
        placed.then_some((ReplicaRole::Offline, epoch))
    }

    fn replication_byte_rates(&self) -> (f64, f64) {
        let now = crate::clock::system().now_ms();
        self.quotas
            .get()
            .map_or((0.0, 0.0), |q| (q.leader.byte_rate(now), q.follower.byte_rate(now)))
    }
    fn fetcher_stats(&self) -> Vec<(String, u64, u64)> {
        let each = self.leadership.fetcher_stats().each();
        each.into_iter().map(|(id, c)| (id, c.requests, c.bytes)).collect()
    }

    fn fetcher_lags(&self) -> Vec<(String, i32, i64)> {
        let lags = self.leadership.fetcher_lags().each();
        lags.into_iter().map(|(tp, lag)| (tp.topic, tp.partition, lag)).collect()
    }

    fn replication(&self) -> ReplicationCounts {
        let view = self.leadership.view();
        let led = view.led.values();
        let count = |f: &dyn Fn(&LedPartition) -> bool| led.clone().filter(|p| f(p)).count() as i64;
        let (isr_shrinks, isr_expands, failed_isr_updates) = self.leadership.isr_changes();
        ReplicationCounts {
            leaders: view.led.len() as i64,
            partitions: (view.led.len() + view.following.len()) as i64,
            under_replicated: count(&LedPartition::is_under_replicated),
            reassigning: count(&|p| p.reassignment.is_some()),
            under_min_isr: count(&|p| p.isr.len() < p.min_isr),
            at_min_isr: count(&|p| p.isr.len() == p.min_isr),
            isr_shrinks,
            isr_expands,
            failed_isr_updates,
            replica_max_lag: self.leadership.fetcher_lags().max_lag(),
            fetcher_dead_threads: self.leadership.fetcher_stats().dead_threads(),
        }
    }
}

/// The socket timeout of a call to another broker (Kafka's
/// `request.timeout.ms` of its inter-broker clients).
const PEER_TIMEOUT: Duration = Duration::from_secs(30);

/// The cluster's topics, as the group coordinator reads them.
#[derive(Debug)]
struct ImageTopics(Arc<ImageWatcher>);

impl TopicCatalog for ImageTopics {
    fn topic(&self, name: &str) -> Option<([u8; 16], i32)> {
        let image = self.0.current();
        image.topics.topic(name).map(|t| (t.id, t.partition_count()))
    }
    fn topic_name_by_id(&self, id: &[u8; 16]) -> Option<String> {
        self.0.current().topics.topic_by_id(id).map(|t| t.name.clone())
    }
    fn topic_names(&self) -> Vec<String> {
        self.0.current().topics.topics().map(|t| t.name.clone()).collect()
    }
}

/// Connect, retrying until `deadline`.
async fn connect(
    config: &ClusterConfig,
    deadline: Instant,
) -> Result<Arc<dyn Coordination>, JoinError> {
    loop {
        match EtcdCoordination::connect(&config.etcd).await {
            Ok(c) => return Ok(Arc::new(c)),
            Err(e) if Instant::now() >= deadline => {
                tracing::error!(endpoints = ?config.etcd.endpoints, "etcd did not answer within initial.broker.registration.timeout.ms");
                return Err(e.into());
            }
            Err(e) => {
                tracing::warn!(endpoints = ?config.etcd.endpoints, "etcd not reached yet: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

fn registration_of(who: &Identity<'_>) -> BrokerRegistration {
    BrokerRegistration {
        version: 1,
        incarnation_id: uuid::Uuid::new_v4().to_string(),
        directory_id: who.directory_id.clone(),
        rack: who.rack.clone(),
        state: broker_state::RUNNING,
        endpoints: who.endpoints.clone(),
        inter_broker_listener: who.inter_broker_listener.clone(),
        software_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Renew the session every heartbeat; after an expiry, a new lease and a
/// new registration (the election campaigns again by itself).
async fn keep_alive(
    session: Arc<BrokerSession>,
    election: Arc<ControllerElection>,
    (keys, node_id, value): (ClusterKeys, i32, BrokerRegistration),
) {
    let interval = Duration::from_millis(session.config().heartbeat_interval_ms as u64);
    loop {
        tokio::time::sleep(interval).await;
        if session.keep_alive_once().await != KeepAlive::Expired {
            continue;
        }
        tracing::warn!(node_id, "etcd expired the session: registering anew");
        let rejoined = async {
            session.renew().await?;
            registration::register(&session, &keys, node_id, &value).await
        };
        match rejoined.await {
            Ok(epoch) => election.set_broker_epoch(epoch),
            Err(e) => tracing::error!(node_id, "registering anew failed, retrying: {e}"),
        }
    }
}

//! `KafkaApis`: what every request handler runs against (Kafka's name for
//! it): the broker's identity, its config and the managers requests reach.
//!
//! Invariant: it is built once, complete, by the composition root
//! (`src/broker.rs`), and nothing is patched into it afterwards; handlers
//! read it and never start or stop anything. `api` does not import the
//! broker or the server: they import it.

use std::sync::Arc;

use crate::cleaner::LogCleanerHandle;
use crate::config::dynamic::DynamicBrokerConfig;
use crate::config::{BrokerConfig, Listener};
use crate::group::GroupCoordinator;
use crate::log::manager::CleaningControl;
use crate::log::producer_id_manager::ProducerIdManager;
use crate::log::{LogError, LogManager};
use crate::metrics::RequestMetrics;
use crate::replica::{Leading, ReplicaManager};
use crate::security::acl_store::AclStore;
use crate::security::credentials::CredentialStore;
use crate::txn::{LogMarkerWriter, TransactionCoordinator};
use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;

/// Everything a handler needs: the broker's identity, config and managers.
#[derive(Debug)]
pub struct KafkaApis {
    pub config: BrokerConfig,
    pub logs: Arc<LogManager>,
    pub node_id: i32,
    pub cluster_id: String,
    /// Each listener's advertised endpoint, by upper-case listener name, in
    /// the order of `listeners`.
    pub advertised: Vec<(String, Listener)>,
    pub groups: Arc<GroupCoordinator>,
    /// The transaction coordinator (its state loads on the `txn-coordinator`
    /// thread the broker's start-up runs).
    pub txn: Arc<TransactionCoordinator>,
    /// The coordinator's marker writer, also used by WriteTxnMarkers (the
    /// admin abort path) so both append markers the same way.
    pub markers: Arc<LogMarkerWriter>,
    /// The producer id block (`producer_id_block` in the first log dir).
    pub producer_ids: Arc<Mutex<ProducerIdManager>>,
    /// Per-API counters and latency, updated by the server, exported by `metrics`.
    pub request_metrics: RequestMetrics,
    /// SCRAM credentials (`sediment-scram-credentials.json` in the first log dir).
    pub scram: Arc<CredentialStore>,
    /// The authorizer and its ACLs (`sediment-acls.json`), when
    /// `authorizer.class.name` is set; `None`: every request is allowed.
    pub acls: Option<Arc<AclStore>>,
    /// The dynamic broker configs (`config::dynamic`); `None` in one built
    /// by hand (the fuzz target), which then refuses broker AlterConfigs.
    pub dynamic: Option<Arc<DynamicBrokerConfig>>,
    /// The cleaner's threads, reconfigured by dynamic configs.
    pub cleaner: Option<Arc<LogCleanerHandle>>,
    /// How Produce and Fetch reach the logs: appends, delayed-fetch
    /// wakeups, fetch sessions, the store's reader.
    pub replica: Arc<ReplicaManager>,
    /// In a cluster, the cluster as this broker applied it from etcd.
    pub cluster: Option<Arc<crate::cluster::image::ImageWatcher>>,
    /// In a cluster, topic changes go through etcd.
    pub topics: Option<crate::controller::ClusterTopics>,
    /// The controller's side of AlterPartition, in a cluster.
    pub replication_control: Option<Arc<crate::controller::ReplicationControl>>,
}

impl KafkaApis {
    /// The endpoint advertised to clients of `listener`. Every session's
    /// listener is one of ours; the first listener's endpoint stands in for a
    /// name that is not (a broker built by hand, as in the fuzz target).
    pub fn endpoint(&self, listener: &str) -> &Listener {
        static NONE: Listener = Listener { host: String::new(), port: 0 };
        self.advertised
            .iter()
            .find(|(name, _)| name == listener)
            .or_else(|| self.advertised.first())
            .map_or(&NONE, |(_, l)| l)
    }

    /// # Errors
    /// The block file could not be written.
    pub fn next_producer_id(&self) -> Result<i64, LogError> {
        self.producer_ids.lock().generate_producer_id()
    }

    /// The cleaner's control over its cleans, which topic deletion and
    /// DeleteRecords stop first (`None`: no cleaner runs).
    pub fn cleaning(&self) -> Option<&dyn CleaningControl> {
        self.cleaner.as_ref().map(|c| c.manager().as_ref() as &dyn CleaningControl)
    }

    /// Why `tp` is not served here, in a cluster: another broker leads it
    /// (NOT_LEADER_OR_FOLLOWER) or the cluster has no such partition. `None`
    /// when this broker leads it, as a single node leads everything.
    pub fn not_led(&self, tp: &crate::log::TopicPartition) -> Option<ResponseError> {
        match self.replica.leads(tp) {
            Leading::Yes => None,
            Leading::NotLeader => Some(ResponseError::NotLeaderOrFollower),
            Leading::Unknown => Some(ResponseError::UnknownTopicOrPartition),
        }
    }

    /// Whether the partition exists (in a cluster, in the image, wherever
    /// its replicas are).
    pub fn has_partition(&self, topic: &str, partition: i32) -> bool {
        match &self.cluster {
            Some(c) => c
                .current()
                .topics
                .topic(topic)
                .is_some_and(|t| t.assignment.contains_key(&partition)),
            None => self.logs.contains_partition(topic, partition),
        }
    }

    /// The name of the topic with this id (in a cluster, of the cluster's
    /// topics or the local internal ones).
    pub fn topic_name_by_id(&self, id: &uuid::Uuid) -> Option<String> {
        let in_cluster = self
            .cluster
            .as_ref()
            .and_then(|c| c.current().topics.topic_by_id(id.as_bytes()).map(|t| t.name.clone()));
        in_cluster.or_else(|| self.logs.topic_name_by_id(id.as_bytes()))
    }

    /// The config of the topic named `name` (in a cluster, its overrides in
    /// etcd over this broker's defaults).
    pub fn topic_config(&self, name: &str) -> Option<Arc<crate::log::LogConfig>> {
        match &self.cluster {
            Some(c) => {
                let image = c.current();
                image.topics.topic(name)?;
                // Checked when written: a value this broker refuses shows
                // the defaults rather than failing the describe.
                let resolved = self.logs.resolve_config(image.topics.config(name));
                Some(Arc::new(resolved.unwrap_or_else(|e| {
                    tracing::warn!(
                        topic = name,
                        "the cluster's topic config does not resolve here: {e}"
                    );
                    self.logs
                        .resolve_config(Default::default())
                        .expect("the broker defaults resolve")
                })))
            }
            None => self.logs.topic(name).map(|t| t.config),
        }
    }

    /// The id of the topic named `name`, as [`Self::topic_name_by_id`] finds topics.
    pub fn topic_id(&self, name: &str) -> Option<[u8; 16]> {
        let in_cluster =
            self.cluster.as_ref().map(|c| c.current().topics.topic(name).map(|t| t.id));
        match in_cluster {
            Some(found) => found,
            None => self.logs.topic(name).map(|t| t.id),
        }
    }
}

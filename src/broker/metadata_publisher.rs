//! Applies each cluster image to this broker (docs/design/multi-broker.md,
//! 5.4), on a blocking thread, in revision order:
//! * every partition whose state names this broker leader gets a local log
//!   (the cluster's topic id and config overrides) if it has none, and its
//!   leader epoch ([`crate::log::Log::become_leader`]) before it is served;
//! * every partition this broker is a follower of gets a local log too, and
//!   is handed to the replica fetcher of its leader (`replica::fetcher`);
//!   each replica's high watermark starts from the checkpointed one;
//! * the topic config overrides in the image replace the local ones;
//! * the copies of topics the image lists as deleted are removed, and so
//!   are those of partitions a completed reassignment moved away from this
//!   broker (once its replica fetcher has let them go);
//! * then the partitions led (with their epochs) and the partitions the
//!   cluster has are published to the replica manager's `Leadership`;
//! * last the group and transaction coordinators learn which
//!   `__consumer_offsets` and `__transaction_state` partitions are led here
//!   (Kafka's `onElection`/`onResignation`): a partition led at a new
//!   epoch loads on a blocking thread of its own, one no longer led is
//!   dropped.
//!
//! A local topic the image does not have and has not deleted is a stray:
//! never served, never deleted here (an etcd restored from an old backup
//! must not erase disks), logged once per start. A partition that could
//! not be created or given its epoch is left out of what is led, logged,
//! and tried again with the next image.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::cluster::image::{ImageWatcher, MetadataImage};
use crate::cluster::topics_image::TopicImage;
use crate::controller::reconciler::RECOVERING;
use crate::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::log::manager::CleaningControl;
use crate::log::{LogManager, TopicPartition};
use crate::replica::fetcher::{LeaderEndpoint, ReplicaFetcherManager};
use crate::replica::leadership::LedPartition;
use crate::replica::{Leadership, LeadershipView, ReplicaManager};
use crate::txn::{TransactionCoordinator, TRANSACTION_STATE_TOPIC};

pub struct MetadataPublisher {
    pub node_id: i32,
    pub logs: Arc<LogManager>,
    pub replica: Arc<ReplicaManager>,
    pub leadership: Arc<Leadership>,
    pub cleaning: Option<Arc<dyn CleaningControl>>,
    pub fetchers: Arc<ReplicaFetcherManager>,
    pub groups: Arc<GroupCoordinator>,
    pub txn: Arc<TransactionCoordinator>,
    /// Strays already logged.
    strays: HashSet<String>,
}

impl MetadataPublisher {
    pub fn new(
        node_id: i32,
        logs: Arc<LogManager>,
        replica: Arc<ReplicaManager>,
        leadership: Arc<Leadership>,
        cleaning: Option<Arc<dyn CleaningControl>>,
        (fetchers, groups, txn): (
            Arc<ReplicaFetcherManager>,
            Arc<GroupCoordinator>,
            Arc<TransactionCoordinator>,
        ),
    ) -> Self {
        let strays = HashSet::new();
        Self { node_id, logs, replica, leadership, cleaning, fetchers, groups, txn, strays }
    }

    /// Apply every new image until the watcher goes.
    pub fn spawn(mut self, image: &ImageWatcher) -> tokio::task::JoinHandle<()> {
        let mut rx = image.subscribe();
        tokio::spawn(async move {
            loop {
                let current = Arc::clone(&rx.borrow_and_update());
                self = match tokio::task::spawn_blocking(move || {
                    self.apply(&current);
                    self
                })
                .await
                {
                    Ok(me) => me,
                    Err(e) => {
                        tracing::error!("the metadata publisher failed: {e}");
                        return;
                    }
                };
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
    }

    /// Apply one image (module doc).
    pub fn apply(&mut self, image: &MetadataImage) {
        self.delete_removed(image);
        let mut view = LeadershipView::default();
        let mut followed = HashMap::new();
        let mut moved_away = Vec::new();
        for topic in image.topics.topics() {
            let config = image.topics.config(&topic.name);
            if let Some(local) = self.logs.topic(&topic.name) {
                if local.id != topic.id {
                    self.stray(&topic.name, "its topic id is not the cluster's");
                    continue;
                }
                if local.config.overrides != config {
                    self.apply_config(&topic.name, config.clone());
                }
            }
            self.apply_topic(image, topic, &config, (&mut view, &mut followed, &mut moved_away));
        }
        for t in self.logs.topics() {
            if image.topics.topic(&t.name).is_none() {
                self.stray(&t.name, "the cluster has no such topic");
            }
        }
        let led: Vec<TopicPartition> = view.led.keys().cloned().collect();
        view.following = followed.iter().map(|(tp, (_, epoch))| (tp.clone(), *epoch)).collect();
        view.broker_epochs = image.brokers.iter().map(|(id, b)| (*id, b.epoch)).collect();
        self.leadership.publish(view);
        // An ISR that changed may let a high watermark move.
        for tp in led {
            if let Some(log) = self.logs.get_log(&tp) {
                self.replica.maybe_advance_high_watermark(&mut log.write());
            }
        }
        self.fetchers.update(&followed, &leader_endpoints(image));
        self.move_coordinators();
        for tp in moved_away {
            match self.logs.delete_replica(&tp, self.cleaning.as_deref()) {
                Ok(()) => {
                    tracing::info!(partition = %tp, "deleted the local copy of a partition reassigned away")
                }
                Err(e) => {
                    tracing::error!(partition = %tp, "deleting a partition reassigned away: {e}")
                }
            }
        }
    }

    /// Load the group shards and transaction partitions newly led here,
    /// drop those no longer led.
    fn move_coordinators(&self) {
        let view = self.leadership.view();
        let led = |topic: &str| -> HashMap<i32, i32> {
            let led = view.led.iter().filter(|(tp, _)| tp.topic == topic);
            led.map(|(tp, p)| (tp.partition, p.leader_epoch)).collect()
        };
        for (partition, epoch) in self.groups.on_leadership(&led(OFFSETS_TOPIC)) {
            let groups = Arc::clone(&self.groups);
            tokio::task::spawn_blocking(move || groups.load_partition(partition, epoch));
        }
        for (partition, epoch) in self.txn.on_leadership(&led(TRANSACTION_STATE_TOPIC)) {
            let txn = Arc::clone(&self.txn);
            tokio::task::spawn_blocking(move || txn.load_partition(partition, epoch));
        }
    }

    /// The partitions of `topic` this broker is a replica of: led, or
    /// followed (partition → leader and epoch); and the local ones it no
    /// longer is a replica of.
    fn apply_topic(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        config: &BTreeMap<String, String>,
        (view, followed, moved_away): (
            &mut LeadershipView,
            &mut HashMap<TopicPartition, (i32, i32)>,
            &mut Vec<TopicPartition>,
        ),
    ) {
        for (&p, replicas) in &topic.assignment {
            let tp = TopicPartition::new(topic.name.clone(), p);
            view.known.insert(tp.clone());
            let Some(state) = image.topics.state(&topic.name, p).map(|s| &s.state) else {
                continue;
            };
            if !replicas.contains(&self.node_id) {
                if self.logs.get_log(&tp).is_some() {
                    moved_away.push(tp);
                }
                continue;
            }
            let epoch = state.leader_epoch;
            if state.leader == self.node_id {
                match self.lead(&tp, topic.id, epoch, config) {
                    Ok(min_isr) => {
                        let min_isr = min_isr.min(replicas.len());
                        let (replicas, isr) = (replicas.clone(), state.isr.clone());
                        view.led.insert(
                            tp,
                            LedPartition {
                                leader_epoch: epoch,
                                replicas,
                                isr,
                                min_isr,
                                reassignment: topic.reassigning.get(&p).map(|r| r.adding.clone()),
                                recovering: state.leader_recovery_state == RECOVERING,
                            },
                        );
                    }
                    Err(e) => tracing::error!(partition = %tp, epoch, "not leading: {e}"),
                }
            } else if state.leader >= 0 {
                match self.replica_log(&tp, topic.id, config) {
                    Ok(()) => {
                        followed.insert(tp, (state.leader, epoch));
                    }
                    Err(e) => tracing::error!(partition = %tp, "not following: {e}"),
                }
            }
        }
    }

    /// Give `tp` a local log and the leader epoch `epoch`; its topic's
    /// `min.insync.replicas`.
    fn lead(
        &self,
        tp: &TopicPartition,
        id: [u8; 16],
        epoch: i32,
        config: &BTreeMap<String, String>,
    ) -> Result<usize, crate::log::LogError> {
        self.replica_log(tp, id, config)?;
        let log = self.logs.get_log(tp).ok_or_else(|| self.logs.absent_partition_error(tp))?;
        let mut log = log.write();
        if log.leader_epoch() < epoch {
            log.become_leader(epoch)?;
            tracing::info!(partition = %tp, epoch, "leading");
        }
        Ok(log.config().min_insync_replicas.max(1) as usize)
    }

    /// A local log for `tp` (created if missing), its high watermark set
    /// the first time from the last checkpoint (none: its log end, as a
    /// single node's log had it).
    fn replica_log(
        &self,
        tp: &TopicPartition,
        id: [u8; 16],
        config: &BTreeMap<String, String>,
    ) -> Result<(), crate::log::LogError> {
        if self.logs.get_log(tp).is_none() {
            self.logs.create_replica(&tp.topic, id, tp.partition, config.clone())?;
            tracing::info!(partition = %tp, "created a replica");
        }
        let log = self.logs.get_log(tp).ok_or_else(|| self.logs.absent_partition_error(tp))?;
        let mut log = log.write();
        if log.replicated_high_watermark().is_none() {
            let hw = self.logs.checkpointed_high_watermark(tp).unwrap_or(log.log_end_offset());
            log.set_replicated_high_watermark(hw);
        }
        Ok(())
    }

    fn apply_config(&self, topic: &str, config: BTreeMap<String, String>) {
        match self.logs.alter_topic_config(topic, config) {
            Ok(_) => tracing::info!(topic, "topic config from the cluster applied"),
            Err(e) => tracing::error!(topic, "the cluster's topic config was not applied: {e}"),
        }
    }

    /// Delete the local copies of the topics the image lists as deleted.
    fn delete_removed(&self, image: &MetadataImage) {
        let mut deleted = false;
        for t in self.logs.topics() {
            let replaced = image.topics.topic(&t.name).is_some_and(|c| c.id != t.id);
            if !image.topics.is_deleted(&t.id)
                || (image.topics.topic(&t.name).is_some() && !replaced)
            {
                continue;
            }
            match self.logs.delete_topic(&t.name, self.cleaning.as_deref()) {
                Ok(()) => {
                    tracing::info!(topic = %t.name, "deleted the local copy of a topic the cluster deleted");
                    deleted = true;
                }
                Err(e) => {
                    tracing::error!(topic = %t.name, "deleting a topic the cluster deleted: {e}")
                }
            }
        }
        if deleted {
            // Fetches parked on a deleted partition should notice now.
            self.replica.complete_all_delayed_fetches();
        }
    }

    fn stray(&mut self, topic: &str, why: &str) {
        if self.strays.insert(topic.to_string()) {
            tracing::warn!(topic, "stray topic: not served, left on disk for an operator ({why})");
        }
    }
}

/// Each registered broker's endpoint on its inter-broker listener (a
/// leader reached otherwise is left out, and logged).
fn leader_endpoints(image: &MetadataImage) -> HashMap<i32, LeaderEndpoint> {
    let mut out = HashMap::new();
    for id in image.brokers.keys() {
        match image.inter_broker_endpoint(*id) {
            Ok((host, port)) => {
                out.insert(*id, LeaderEndpoint { host, port });
            }
            Err(e) => tracing::warn!(broker = id, "not replicating from it: {e}"),
        }
    }
    out
}

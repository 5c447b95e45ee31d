//! Applies each cluster image to this broker (docs/design/multi-broker.md,
//! 5.4), on a blocking thread, in revision order:
//! * every partition whose state names this broker leader gets a local log
//!   (the cluster's topic id and config overrides) if it has none, and its
//!   leader epoch ([`crate::log::Log::become_leader`]) before it is served;
//! * the topic config overrides in the image replace the local ones;
//! * the copies of topics the image lists as deleted are removed;
//! * then the partitions led (with their epochs) and the partitions the
//!   cluster has are published to the replica manager's `Leadership`.
//!
//! A local topic the image does not have and has not deleted is a stray:
//! never served, never deleted here (an etcd restored from an old backup
//! must not erase disks), logged once per start. A partition that could
//! not be created or given its epoch is left out of what is led, logged,
//! and tried again with the next image.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::cluster::image::{ImageWatcher, MetadataImage};
use crate::log::manager::{is_internal_topic, CleaningControl};
use crate::log::{LogManager, TopicPartition};
use crate::replica::{Leadership, LeadershipView, ReplicaManager};

pub struct MetadataPublisher {
    pub node_id: i32,
    pub logs: Arc<LogManager>,
    pub replica: Arc<ReplicaManager>,
    pub leadership: Arc<Leadership>,
    pub cleaning: Option<Arc<dyn CleaningControl>>,
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
    ) -> Self {
        Self { node_id, logs, replica, leadership, cleaning, strays: HashSet::new() }
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
        for topic in image.topics.topics() {
            let config = image.topics.config(&topic.name);
            let local = self.logs.topic(&topic.name);
            if let Some(local) = &local {
                if local.id != topic.id {
                    self.stray(&topic.name, "its topic id is not the cluster's");
                    continue;
                }
                if local.config.overrides != config {
                    self.apply_config(&topic.name, config.clone());
                }
            }
            for &p in topic.assignment.keys() {
                let tp = TopicPartition::new(topic.name.clone(), p);
                view.known.insert(tp.clone());
                let Some(state) = image.topics.state(&topic.name, p) else { continue };
                if state.state.leader != self.node_id {
                    continue;
                }
                let epoch = state.state.leader_epoch;
                match self.lead(&tp, topic.id, epoch, &config) {
                    Ok(()) => {
                        view.led.insert(tp, epoch);
                    }
                    Err(e) => tracing::error!(partition = %tp, epoch, "not leading: {e}"),
                }
            }
        }
        for t in self.logs.topics() {
            if !is_internal_topic(&t.name) && image.topics.topic(&t.name).is_none() {
                self.stray(&t.name, "the cluster has no such topic");
            }
        }
        self.leadership.publish(view);
    }

    /// Give `tp` a local log and the leader epoch `epoch`.
    fn lead(
        &self,
        tp: &TopicPartition,
        id: [u8; 16],
        epoch: i32,
        config: &BTreeMap<String, String>,
    ) -> Result<(), crate::log::LogError> {
        if self.logs.get_log(tp).is_none() {
            self.logs.create_replica(&tp.topic, id, tp.partition, config.clone())?;
            tracing::info!(partition = %tp, epoch, "created the replica this broker leads");
        }
        let log = self.logs.get_log(tp).ok_or_else(|| self.logs.absent_partition_error(tp))?;
        let mut log = log.write();
        if log.leader_epoch() < epoch {
            log.become_leader(epoch)?;
            tracing::info!(partition = %tp, epoch, "leading");
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

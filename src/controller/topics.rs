//! Creating, growing and deleting topics in the cluster (docs/design/multi-broker.md,
//! 4.5), done by whichever broker the admin request or the auto-creation
//! reached, as ZooKeeper-mode Kafka's brokers wrote `/brokers/topics`
//! themselves: the topic key (its id and each partition's replicas) and its
//! config key are created in one transaction that fails if either exists,
//! which is the commit point. The controller then gives each partition its
//! first state (`reconciler`); the request is answered once this broker's
//! image shows every partition with a leader, or at its timeout.
//!
//! Deleting is one transaction too, compared on the topic key's revision:
//! the topic key, its partition states and its config go, and a marker
//! `admin/delete_topics/<id>` stays, from which every broker deletes its
//! copies.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::placement::{self, Candidate, PlacementError};
use crate::cluster::coordination::{Compare, Coordination, CoordinationError, KeyRange, Op, Txn};
use crate::cluster::image::{ImageWatcher, MetadataImage};
use crate::cluster::keys::{self, ClusterKeys, DeletedTopicValue, TopicConfigValue, TopicValue};
use crate::log::manager::{random_topic_id, topic_id_to_string};

/// Why a topic change was not made (each maps to Kafka's code in `api`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicChangeError {
    #[error("Topic '{0}' already exists.")]
    Exists(String),
    #[error("This server does not host this topic-partition.")]
    Unknown(String),
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    #[error("{0}")]
    InvalidPartitions(String),
    /// etcd did not answer, or the topic key kept changing.
    #[error("the cluster's metadata could not be changed: {0}")]
    Unavailable(String),
    /// Written, but not every partition had a leader in time.
    #[error("topic '{0}' was created, but not every partition had a leader within the request's timeout")]
    TimedOut(String),
}

impl From<CoordinationError> for TopicChangeError {
    fn from(e: CoordinationError) -> Self {
        TopicChangeError::Unavailable(e.to_string())
    }
}

impl From<PlacementError> for TopicChangeError {
    fn from(e: PlacementError) -> Self {
        TopicChangeError::InvalidReplicationFactor(e.to_string())
    }
}

/// A topic to create: replicas by placement or given per partition.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i32,
    /// Replicas per partition, when the request gave them.
    pub assignment: Option<Vec<Vec<i32>>>,
    pub config: BTreeMap<String, String>,
}

/// Topic changes through etcd (module doc).
#[derive(Debug, Clone)]
pub struct ClusterTopics {
    pub(super) coordination: Arc<dyn Coordination>,
    pub(super) keys: ClusterKeys,
    pub(super) image: Arc<ImageWatcher>,
    /// This broker's count of unclean elections (`ControllerElection`'s).
    pub(super) unclean_elections: Arc<std::sync::atomic::AtomicU64>,
}

impl ClusterTopics {
    pub fn new(
        coordination: Arc<dyn Coordination>,
        keys: ClusterKeys,
        image: Arc<ImageWatcher>,
        unclean_elections: Arc<std::sync::atomic::AtomicU64>,
    ) -> Self {
        Self { coordination, keys, image, unclean_elections }
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.current()
    }

    /// The replicas `topic` would get, checked against the registered brokers.
    ///
    /// # Errors
    /// Kafka's replication factor and assignment refusals.
    pub fn plan(&self, topic: &NewTopic) -> Result<Vec<Vec<i32>>, TopicChangeError> {
        let image = self.image.current();
        match &topic.assignment {
            Some(given) => check_assignment(&image, given).map(|()| given.clone()),
            None => {
                check_factor(&image, topic.replication_factor)?;
                let candidates = candidates(&image);
                let start = random_start(candidates.len());
                Ok(placement::assign(
                    &candidates,
                    0,
                    topic.partitions,
                    topic.replication_factor,
                    start,
                )?)
            }
        }
    }

    /// Create `topic` and wait up to `wait` for its partitions' leaders.
    /// Returns its id.
    ///
    /// # Errors
    /// The topic exists, a refused factor or assignment, etcd unavailable,
    /// or leaders not all there in time (the topic is created then).
    pub async fn create(
        &self,
        topic: &NewTopic,
        wait: Duration,
    ) -> Result<[u8; 16], TopicChangeError> {
        let replicas = self.plan(topic)?;
        let id = random_topic_id();
        let value = TopicValue {
            version: 3,
            topic_id: topic_id_to_string(&id),
            partitions: replicas.into_iter().enumerate().map(|(p, r)| (p.to_string(), r)).collect(),
            adding_replicas: BTreeMap::new(),
            removing_replicas: BTreeMap::new(),
        };
        let config = TopicConfigValue { version: 1, config: topic.config.clone() };
        let (topic_key, config_key) =
            (self.keys.topic(&topic.name), self.keys.topic_config(&topic.name));
        let txn = Txn {
            compares: vec![
                Compare::CreateRevision(topic_key.clone(), 0),
                Compare::CreateRevision(config_key.clone(), 0),
            ],
            success: vec![
                Op::put(topic_key, keys::to_json(&value)),
                Op::put(config_key, keys::to_json(&config)),
            ],
            failure: vec![],
        };
        let r = self.coordination.txn(txn).await?;
        if !r.succeeded {
            return Err(TopicChangeError::Exists(topic.name.clone()));
        }
        tracing::info!(topic = %topic.name, partitions = topic.partitions, revision = r.revision, "created topic in the cluster");
        self.image.wait_for(r.revision).await;
        self.wait_for_leaders(&topic.name, id, wait).await?;
        Ok(id)
    }

    /// Wait until every partition of `name` (with `id`) has a leader.
    async fn wait_for_leaders(
        &self,
        name: &str,
        id: [u8; 16],
        wait: Duration,
    ) -> Result<(), TopicChangeError> {
        let led = |image: &MetadataImage| {
            image.topics.topic(name).is_some_and(|t| {
                t.id == id
                    && t.assignment
                        .keys()
                        .all(|p| image.topics.state(name, *p).is_some_and(|s| s.state.leader >= 0))
            })
        };
        let mut rx = self.image.subscribe();
        let waited = tokio::time::timeout(wait, async {
            loop {
                if led(&rx.borrow_and_update()) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        });
        waited.await.map_err(|_| TopicChangeError::TimedOut(name.to_string()))
    }

    /// Delete `name`: the topic key, its states and config in one
    /// transaction, leaving the deletion marker.
    ///
    /// # Errors
    /// No such topic, etcd unavailable or the topic changing meanwhile.
    pub async fn delete(&self, name: &str, now_ms: i64) -> Result<[u8; 16], TopicChangeError> {
        let image = self.image.current();
        let topic =
            image.topics.topic(name).ok_or_else(|| TopicChangeError::Unknown(name.to_string()))?;
        let marker = DeletedTopicValue { version: 1, name: name.to_string(), deleted_ms: now_ms };
        let txn = Txn {
            compares: vec![Compare::ModRevision(self.keys.topic(name), topic.mod_revision)],
            success: vec![
                Op::Delete(KeyRange::Key(self.keys.topic(name))),
                Op::Delete(KeyRange::Prefix(self.keys.partition_states(name))),
                Op::Delete(KeyRange::Key(self.keys.topic_config(name))),
                Op::put(self.keys.deleted_topic(&topic.id_text()), keys::to_json(&marker)),
            ],
            failure: vec![],
        };
        let revision = self.commit(txn, &format!("topic '{name}'")).await?;
        tracing::info!(topic = %name, revision, "deleted topic in the cluster");
        Ok(topic.id)
    }

    /// Grow `name` to `total` partitions, the new ones placed after the
    /// existing round robin (or as given), and wait for their leaders.
    ///
    /// # Errors
    /// No such topic, not growing, refused replicas, etcd unavailable.
    pub async fn add_partitions(
        &self,
        name: &str,
        total: i32,
        given: Option<Vec<Vec<i32>>>,
        wait: Duration,
    ) -> Result<(), TopicChangeError> {
        let image = self.image.current();
        let topic =
            image.topics.topic(name).ok_or_else(|| TopicChangeError::Unknown(name.to_string()))?;
        let have = topic.partition_count();
        if total <= have {
            return Err(TopicChangeError::InvalidPartitions(format!(
                "Topic currently has {have} partitions, which is higher than the requested {total}."
            )));
        }
        let factor = (topic.target(0).len() as i32).max(1);
        let added = match given {
            Some(given) => {
                check_assignment(&image, &given)?;
                given
            }
            None => {
                check_factor(&image, factor)?;
                let candidates = candidates(&image);
                let start = random_start(candidates.len());
                placement::assign(&candidates, have, total - have, factor, start)?
            }
        };
        // Reassignments going on are kept.
        let mut value = topic.to_value();
        for (i, r) in added.into_iter().enumerate() {
            value.partitions.insert((have + i as i32).to_string(), r);
        }
        let key = self.keys.topic(name);
        let txn = Txn {
            compares: vec![Compare::ModRevision(key.clone(), topic.mod_revision)],
            success: vec![Op::put(key, keys::to_json(&value))],
            failure: vec![],
        };
        self.commit(txn, &format!("topic '{name}'")).await?;
        self.wait_for_leaders(name, topic.id, wait).await
    }

    /// Run `txn`, a compared change of `what`, and wait until this broker's
    /// image shows it; its revision.
    async fn commit(&self, txn: Txn, what: &str) -> Result<i64, TopicChangeError> {
        let r = self.coordination.txn(txn).await?;
        if !r.succeeded {
            return Err(TopicChangeError::Unavailable(format!("{what} changed meanwhile; retry")));
        }
        self.image.wait_for(r.revision).await;
        Ok(r.revision)
    }

    /// Replace `name`'s config overrides (compared on the config key's
    /// revision the caller read).
    ///
    /// # Errors
    /// No such topic, the config changed meanwhile, etcd unavailable.
    pub async fn set_config(
        &self,
        name: &str,
        config: BTreeMap<String, String>,
    ) -> Result<(), TopicChangeError> {
        let image = self.image.current();
        if image.topics.topic(name).is_none() {
            return Err(TopicChangeError::Unknown(name.to_string()));
        }
        let key = self.keys.topic_config(name);
        let value = TopicConfigValue { version: 1, config };
        let txn = Txn {
            compares: vec![
                Compare::ModRevision(key.clone(), image.topics.config_revision(name)),
                Compare::ModRevision(
                    self.keys.topic(name),
                    image.topics.topic(name).map_or(0, |t| t.mod_revision),
                ),
            ],
            success: vec![Op::put(key, keys::to_json(&value))],
            failure: vec![],
        };
        self.commit(txn, &format!("the config of '{name}'")).await.map(|_| ())
    }
}

/// The brokers new replicas may go to: registered and RUNNING.
fn candidates(image: &MetadataImage) -> Vec<Candidate> {
    image
        .brokers
        .iter()
        .filter(|(id, _)| image.is_eligible(**id))
        .map(|(id, b)| Candidate { node_id: *id, rack: b.registration.rack.clone() })
        .collect()
}

fn random_start(n: usize) -> usize {
    (uuid::Uuid::new_v4().as_u128() % n.max(1) as u128) as usize
}

/// Kafka's factor checks.
fn check_factor(image: &MetadataImage, factor: i32) -> Result<(), TopicChangeError> {
    let brokers = candidates(image).len();
    if factor < 1 {
        return Err(PlacementError::FactorBelowOne.into());
    }
    if factor as usize > brokers {
        return Err(PlacementError::TooFewBrokers { factor, brokers }.into());
    }
    Ok(())
}

/// A given assignment: every partition's replicas registered brokers, none
/// twice, all of one factor (Kafka's INVALID_REPLICA_ASSIGNMENT).
fn check_assignment(image: &MetadataImage, given: &[Vec<i32>]) -> Result<(), TopicChangeError> {
    let bad = |why: String| Err(TopicChangeError::InvalidReplicaAssignment(why));
    let Some(first) = given.first() else {
        return bad("the assignment names no partition".into());
    };
    for (p, replicas) in given.iter().enumerate() {
        if replicas.is_empty() {
            return bad(format!("partition {p} has no replica"));
        }
        if replicas.len() != first.len() {
            return bad("All partitions should have the same number of replicas".into());
        }
        let mut seen = replicas.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != replicas.len() {
            return bad(format!("partition {p} names a broker more than once"));
        }
        if let Some(missing) = replicas.iter().find(|b| !image.brokers.contains_key(b)) {
            return bad(format!("broker {missing} of partition {p} is not registered"));
        }
    }
    check_factor(image, first.len() as i32).map_err(|e| match e {
        TopicChangeError::InvalidReplicationFactor(m) => {
            TopicChangeError::InvalidReplicaAssignment(m)
        }
        other => other,
    })
}

//! The topics part of the [`MetadataImage`](super::image::MetadataImage)
//! (Kafka's `TopicsImage`): each topic's id, assignment and config
//! overrides, each partition's state, and the ids of deleted topics.
//!
//! Invariant: a partition state is visible only through a topic whose id it
//! names ([`TopicsImage::state`]), so the states of a deleted topic, or ones
//! written for an earlier topic of the same name, are never served. Values
//! that do not parse are left out and logged, never trusted.

use std::collections::BTreeMap;

use super::coordination::KeyValue;
use super::keys::TopicValue;
use super::keys::{self, DeletedTopicValue, KeyKind, PartitionStateValue, TopicConfigValue};
use crate::log::manager::topic_id_from_string;

/// One topic as the cluster holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: [u8; 16],
    /// Each partition's replicas, preferred leader first.
    pub assignment: BTreeMap<i32, Vec<i32>>,
    /// The partitions being reassigned (their replicas above are the
    /// target followed by the replicas leaving).
    pub reassigning: BTreeMap<i32, Reassignment>,
    /// The topic key's mod revision (the compare of a change of it).
    pub mod_revision: i64,
}

/// An ongoing reassignment of one partition (Kafka's adding and removing
/// replicas): both are subsets of its replicas, disjoint, and not both empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reassignment {
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

impl TopicImage {
    /// Partition `p`'s target replicas: all of them but the ones leaving.
    pub fn target(&self, p: i32) -> Vec<i32> {
        let replicas = self.assignment.get(&p).cloned().unwrap_or_default();
        match self.reassigning.get(&p) {
            Some(r) => replicas.into_iter().filter(|b| !r.removing.contains(b)).collect(),
            None => replicas,
        }
    }

    /// The topic key's value for this topic (what a change of it rewrites).
    pub fn to_value(&self) -> TopicValue {
        let by_partition = |f: &dyn Fn(&Reassignment) -> &Vec<i32>| {
            let listed = self.reassigning.iter().filter(|(_, r)| !f(r).is_empty());
            listed.map(|(p, r)| (p.to_string(), f(r).clone())).collect()
        };
        TopicValue {
            version: 3,
            topic_id: self.id_text(),
            partitions: self.assignment.iter().map(|(p, r)| (p.to_string(), r.clone())).collect(),
            adding_replicas: by_partition(&|r| &r.adding),
            removing_replicas: by_partition(&|r| &r.removing),
        }
    }

    /// The topic id in Kafka's text form (as the keys hold it).
    pub fn id_text(&self) -> String {
        crate::log::manager::topic_id_to_string(&self.id)
    }
    pub fn partition_count(&self) -> i32 {
        self.assignment.len() as i32
    }
}

/// A partition's state with the mod revision it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRegistration {
    pub state: PartitionStateValue,
    pub mod_revision: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicsImage {
    topics: BTreeMap<String, TopicImage>,
    states: BTreeMap<(String, i32), PartitionRegistration>,
    /// Overrides and the config key's mod revision.
    configs: BTreeMap<String, (BTreeMap<String, String>, i64)>,
    /// Deleted topics by id text.
    deleted: BTreeMap<String, DeletedTopicValue>,
}

impl TopicsImage {
    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topics.get(name)
    }

    pub fn topics(&self) -> impl Iterator<Item = &TopicImage> {
        self.topics.values()
    }

    pub fn topic_by_id(&self, id: &[u8; 16]) -> Option<&TopicImage> {
        self.topics.values().find(|t| t.id == *id)
    }

    /// The state of `topic`'s partition `partition`, if it names the topic's id.
    pub fn state(&self, topic: &str, partition: i32) -> Option<&PartitionRegistration> {
        let t = self.topics.get(topic)?;
        let r = self.states.get(&(topic.to_string(), partition))?;
        (topic_id_from_string(&r.state.topic_id) == Some(t.id)).then_some(r)
    }

    /// The mod revision of the state key of `topic`'s partition `partition`,
    /// whichever topic id it names (0: absent): what replacing it compares.
    pub fn state_key_revision(&self, topic: &str, partition: i32) -> i64 {
        self.states.get(&(topic.to_string(), partition)).map_or(0, |r| r.mod_revision)
    }

    /// The config overrides of `topic` (empty when it has none).
    pub fn config(&self, topic: &str) -> BTreeMap<String, String> {
        self.configs.get(topic).map(|(c, _)| c.clone()).unwrap_or_default()
    }

    /// The config key's mod revision (0: absent).
    pub fn config_revision(&self, topic: &str) -> i64 {
        self.configs.get(topic).map_or(0, |(_, r)| *r)
    }

    /// The deletion markers: topic id text and when it was deleted (ms).
    pub fn deleted(&self) -> impl Iterator<Item = (&str, i64)> {
        self.deleted.iter().map(|(id, v)| (id.as_str(), v.deleted_ms))
    }

    /// Whether a topic with this id was deleted.
    pub fn is_deleted(&self, id: &[u8; 16]) -> bool {
        self.deleted.contains_key(&crate::log::manager::topic_id_to_string(id))
    }

    /// The image with one topic key's new value (`None`: deleted).
    pub(super) fn apply(&mut self, key: &str, kind: KeyKind<'_>, kv: Option<&KeyValue>) {
        match kind {
            KeyKind::Topic(name) => match kv.and_then(|kv| topic_of(key, name, kv)) {
                Some(t) => {
                    self.topics.insert(name.to_string(), t);
                }
                None => {
                    self.topics.remove(name);
                }
            },
            KeyKind::PartitionState(name, p) => {
                let state = kv.and_then(|kv| {
                    let state = parsed::<PartitionStateValue>(key, &kv.value)?;
                    Some(PartitionRegistration { state, mod_revision: kv.mod_revision })
                });
                match state {
                    Some(s) => self.states.insert((name.to_string(), p), s),
                    None => self.states.remove(&(name.to_string(), p)),
                };
            }
            KeyKind::TopicConfig(name) => {
                let config = kv.and_then(|kv| {
                    parsed::<TopicConfigValue>(key, &kv.value).map(|c| (c.config, kv.mod_revision))
                });
                match config {
                    Some(c) => self.configs.insert(name.to_string(), c),
                    None => self.configs.remove(name),
                };
            }
            KeyKind::DeletedTopic(id) => {
                match kv.and_then(|kv| parsed::<DeletedTopicValue>(key, &kv.value)) {
                    Some(v) => self.deleted.insert(id.to_string(), v),
                    None => self.deleted.remove(id),
                };
            }
        }
    }
}

fn topic_of(key: &str, name: &str, kv: &KeyValue) -> Option<TopicImage> {
    let v = parsed::<TopicValue>(key, &kv.value)?;
    let id = topic_id_from_string(&v.topic_id);
    let assignment: Option<BTreeMap<i32, Vec<i32>>> =
        v.partitions.iter().map(|(p, r)| Some((p.parse().ok()?, r.clone()))).collect();
    // Partitions 0..n, each with a replica: anything else is not a topic.
    let valid = |a: &BTreeMap<i32, Vec<i32>>| {
        a.keys().copied().eq(0..a.len() as i32) && a.values().all(|r| !r.is_empty())
    };
    match (id, assignment) {
        (Some(id), Some(assignment)) if valid(&assignment) => Some(TopicImage {
            name: name.to_string(),
            id,
            reassigning: reassignments_of(key, &v, &assignment),
            assignment,
            mod_revision: kv.mod_revision,
        }),
        _ => {
            tracing::warn!(
                key,
                "a topic in etcd has no valid id or assignment; left out of the image"
            );
            None
        }
    }
}

/// The topic's reassignments; one naming a replica the partition does not
/// have, or a broker both added and removed, is left out and logged.
fn reassignments_of(
    key: &str,
    v: &TopicValue,
    assignment: &BTreeMap<i32, Vec<i32>>,
) -> BTreeMap<i32, Reassignment> {
    let mut out: BTreeMap<i32, Reassignment> = BTreeMap::new();
    let listed = v.adding_replicas.keys().chain(v.removing_replicas.keys());
    for p in listed {
        let (Ok(index), Some(replicas)) =
            (p.parse::<i32>(), p.parse().ok().and_then(|i| assignment.get(&i)))
        else {
            tracing::warn!(key, partition = %p, "a reassignment of a partition the topic does not have; ignored");
            continue;
        };
        let r = Reassignment {
            adding: v.adding_replicas.get(p).cloned().unwrap_or_default(),
            removing: v.removing_replicas.get(p).cloned().unwrap_or_default(),
        };
        let subset = r.adding.iter().chain(&r.removing).all(|b| replicas.contains(b));
        let disjoint = r.adding.iter().all(|b| !r.removing.contains(b));
        if subset && disjoint && !(r.adding.is_empty() && r.removing.is_empty()) {
            out.insert(index, r);
        } else {
            tracing::warn!(key, partition = %p, "a reassignment that does not match the partition's replicas; ignored");
        }
    }
    out
}

fn parsed<T: for<'de> serde::Deserialize<'de>>(key: &str, bytes: &[u8]) -> Option<T> {
    let value = keys::parse(bytes);
    if value.is_none() {
        tracing::warn!(key, "a value in etcd does not parse; left out of the image");
    }
    value
}

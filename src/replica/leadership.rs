//! Which partitions this broker leads, in a cluster (docs/design/multi-broker.md,
//! 5.1 and 5.4): the broker's metadata publisher sets, from each image it
//! applies, the partitions whose state names this broker leader (with the
//! leader epoch) and every partition the cluster has; Produce, Fetch and
//! the other partition requests ask [`Leadership::leads`] before touching a
//! log.
//!
//! Invariant: a partition counts as led only while the broker's session
//! timer runs (`may_lead`): once etcd may have expired the session and
//! another broker been given the partition, this one answers
//! NOT_LEADER_OR_FOLLOWER instead of serving it. The coordinators'
//! internal topics are local to each broker until they are placed by the
//! cluster, and are always served.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::log::manager::is_internal_topic;
use crate::log::TopicPartition;

/// What the cluster says of one partition on this broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leading {
    Yes,
    /// The cluster has it; another broker leads it, or none now.
    NotLeader,
    /// The cluster has no such partition.
    Unknown,
}

/// The partitions led and known, as of one applied image.
#[derive(Debug, Clone, Default)]
pub struct LeadershipView {
    /// Led here, with their leader epochs.
    pub led: HashMap<TopicPartition, i32>,
    pub known: HashSet<TopicPartition>,
}

pub struct Leadership {
    view: RwLock<Arc<LeadershipView>>,
    may_lead: Box<dyn Fn() -> bool + Send + Sync>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership").field("led", &self.view.read().led.len()).finish()
    }
}

impl Leadership {
    /// Nothing led until the first [`Self::publish`]; `may_lead` is the
    /// session's timer.
    pub fn new(may_lead: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self { view: RwLock::default(), may_lead: Box::new(may_lead) }
    }

    pub fn publish(&self, view: LeadershipView) {
        *self.view.write() = Arc::new(view);
    }

    pub fn view(&self) -> Arc<LeadershipView> {
        Arc::clone(&self.view.read())
    }

    pub fn leads(&self, tp: &TopicPartition) -> Leading {
        if is_internal_topic(&tp.topic) {
            return Leading::Yes;
        }
        let view = self.view.read();
        if view.led.contains_key(tp) && (self.may_lead)() {
            Leading::Yes
        } else if view.known.contains(tp) {
            Leading::NotLeader
        } else {
            Leading::Unknown
        }
    }
}

/// Whether this broker coordinates groups or transactional ids now: in a
/// cluster, until coordinators move with their internal topics' partitions
/// (docs/design/multi-broker.md, milestone 5), only the controller does.
pub struct CoordinatorGate(Box<dyn Fn() -> bool + Send + Sync>);

impl CoordinatorGate {
    pub fn new(gate: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Box::new(gate))
    }
    pub fn is_open(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for CoordinatorGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CoordinatorGate").field(&self.is_open()).finish()
    }
}

//! The controller's reconciler (docs/design/multi-broker.md, 4.2 and 4.3):
//! level-triggered and stateless. While this broker is the controller, each
//! new image (and, as a safety net, every second) it computes the state
//! each partition is owed and writes each change as one transaction
//! compared on the controller's epoch, the topic key and the state key's
//! revisions. A lost compare, a missed event or a new controller only
//! means the next round finds the same difference.
//!
//! What a partition is owed:
//! * **No state yet** (a new topic or partition): leader = the first
//!   eligible replica in assignment order, ISR = the eligible replicas
//!   (every replica of a new partition holds the same, nothing), epochs 0.
//!   With none eligible: leader -1, ISR = the replicas, so the first to
//!   come back leads.
//! * **Leader not eligible**: the first replica in order that is in the
//!   ISR and eligible leads; ineligible members leave the ISR, whose last
//!   member stays listed while the partition is offline (leader -1), so
//!   that broker's return revives it. Leader epoch + 1.
//! * **Offline, an ISR member eligible again**: it leads, leader epoch + 1.
//! * **An ISR follower not eligible**: it leaves the ISR.
//!
//! Every write raises the partition epoch by one. Unclean election
//! (`unclean.leader.election.enable`) is not done yet: a partition whose
//! ISR is all gone stays offline until one of them returns.

use std::sync::Arc;
use std::time::Duration;

use super::election::ControllerElection;
use crate::cluster::coordination::{Compare, Coordination, Op, Txn};
use crate::cluster::image::{ImageWatcher, MetadataImage};
use crate::cluster::keys::{self, ClusterKeys, PartitionStateValue};
use crate::cluster::topics_image::TopicImage;

/// One partition's owed state and what its write compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionChange {
    pub topic: String,
    pub partition: i32,
    pub topic_revision: i64,
    /// The state key's mod revision read (0: none yet).
    pub state_revision: i64,
    pub state: PartitionStateValue,
}

/// The changes `image` owes, written by a controller of `controller_epoch`.
pub fn plan(image: &MetadataImage, controller_epoch: i64) -> Vec<PartitionChange> {
    let mut changes = Vec::new();
    for topic in image.topics.topics() {
        for (&p, replicas) in &topic.assignment {
            let current = image.topics.state(&topic.name, p);
            let owed = match current {
                None => Some(first_state(image, topic, replicas)),
                Some(r) => next_state(image, replicas, &r.state),
            };
            if let Some(mut state) = owed {
                state.controller_epoch = controller_epoch;
                changes.push(PartitionChange {
                    topic: topic.name.clone(),
                    partition: p,
                    topic_revision: topic.mod_revision,
                    state_revision: current.map_or(0, |r| r.mod_revision),
                    state,
                });
            }
        }
    }
    changes
}

fn first_state(image: &MetadataImage, topic: &TopicImage, replicas: &[i32]) -> PartitionStateValue {
    let eligible: Vec<i32> = replicas.iter().copied().filter(|r| image.is_eligible(*r)).collect();
    let (leader, isr) = match eligible.first() {
        Some(&leader) => (leader, eligible),
        None => (-1, replicas.to_vec()),
    };
    PartitionStateValue {
        version: 1,
        topic_id: topic.id_text(),
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        isr,
        leader_recovery_state: 0,
        controller_epoch: 0,
    }
}

/// The state after `s`, if it is owed a change.
fn next_state(
    image: &MetadataImage,
    replicas: &[i32],
    s: &PartitionStateValue,
) -> Option<PartitionStateValue> {
    let mut isr: Vec<i32> = s.isr.iter().copied().filter(|r| image.is_eligible(*r)).collect();
    let leader_ok = s.leader >= 0 && image.is_eligible(s.leader);
    let leader = if leader_ok {
        s.leader
    } else {
        replicas.iter().copied().find(|r| isr.contains(r)).unwrap_or(-1)
    };
    if isr.is_empty() {
        // Never empty: the last member stays listed while offline.
        isr = if s.leader >= 0 { vec![s.leader] } else { s.isr.clone() };
    }
    if leader == s.leader && isr == s.isr {
        return None;
    }
    let leader_epoch = if leader == s.leader { s.leader_epoch } else { s.leader_epoch + 1 };
    Some(PartitionStateValue {
        leader,
        leader_epoch,
        partition_epoch: s.partition_epoch + 1,
        isr,
        ..s.clone()
    })
}

/// Runs the reconciler on every broker; it acts only while its broker is
/// the controller.
#[derive(Debug)]
pub struct Reconciler {
    election: Arc<ControllerElection>,
    coordination: Arc<dyn Coordination>,
    keys: ClusterKeys,
    image: Arc<ImageWatcher>,
}

impl Reconciler {
    pub fn new(
        election: Arc<ControllerElection>,
        coordination: Arc<dyn Coordination>,
        keys: ClusterKeys,
        image: Arc<ImageWatcher>,
    ) -> Self {
        Self { election, coordination, keys, image }
    }

    /// Reconcile for ever (the broker aborts the task at shutdown).
    pub async fn run(self) {
        let mut rx = self.image.subscribe();
        loop {
            if let Some(epoch) = self.election.epoch() {
                let image = Arc::clone(&rx.borrow_and_update());
                self.round(&image, epoch).await;
            }
            // A new image, or a second: whichever comes first.
            let _ = tokio::time::timeout(Duration::from_secs(1), rx.changed()).await;
        }
    }

    async fn round(&self, image: &MetadataImage, epoch: i64) {
        // One at a time: a round follows a broker's loss or a creation,
        // and etcd answers each in about a millisecond on its network.
        for change in plan(image, epoch) {
            match self.write(&change, epoch).await {
                Ok(true) => tracing::info!(
                    topic = %change.topic,
                    partition = change.partition,
                    leader = change.state.leader,
                    leader_epoch = change.state.leader_epoch,
                    isr = ?change.state.isr,
                    "partition state changed"
                ),
                // Something changed under it: the next image decides again.
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(topic = %change.topic, partition = change.partition, "partition state not written: {e}")
                }
            }
        }
    }

    async fn write(
        &self,
        c: &PartitionChange,
        epoch: i64,
    ) -> Result<bool, crate::cluster::CoordinationError> {
        let key = self.keys.partition_state(&c.topic, c.partition);
        let txn = Txn {
            compares: vec![
                Compare::CreateRevision(self.keys.controller(), epoch),
                Compare::ModRevision(self.keys.topic(&c.topic), c.topic_revision),
                Compare::ModRevision(key.clone(), c.state_revision),
            ],
            success: vec![Op::put(key, keys::to_json(&c.state))],
            failure: vec![],
        };
        Ok(self.coordination.txn(txn).await?.succeeded)
    }
}

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
//! * **A leader in controlled shutdown** (registration state 6): as a lost
//!   leader, except that with no other eligible ISR member it keeps the
//!   partition until it stops.
//!
//! * **Preferred leader** (every `leader.imbalance.check.interval.seconds`
//!   with `auto.leader.rebalance.enable`): a partition whose first replica
//!   is eligible, in the ISR and not leading gets it back, epoch + 1.
//!
//! * **A reassignment whose target replicas are all in the ISR**: it
//!   completes (`reassignments::completion`), topic key and state in one
//!   transaction.
//!
//! * **Offline, no ISR member eligible, unclean election enabled** (the
//!   topic's `unclean.leader.election.enable`, else the broker's): the
//!   first eligible replica leads alone (ISR = [it]), leader epoch + 1,
//!   leader recovery state RECOVERING (KIP-704) until the leader's
//!   AlterPartition says RECOVERED; what only the old ISR held may be
//!   lost, as on Kafka. Disabled (the
//!   default), the partition stays offline until an ISR member returns.
//!
//! Every write raises the partition epoch by one.
//!
//! The controller also removes the deletion markers of topics deleted more
//! than [`DELETE_MARKER_RETENTION_MS`] ago (7 days): a broker away longer
//! finds the topic's copies on its disk as strays, left for an operator.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::election::ControllerElection;
use super::reassignments;
use crate::cluster::coordination::{Compare, Coordination, Op, Txn};
use crate::cluster::image::{ImageWatcher, MetadataImage};
use crate::cluster::keys::{self, ClusterKeys, PartitionStateValue, TopicValue};
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
    /// The topic key's new value, when the change completes a reassignment.
    pub topic_value: Option<TopicValue>,
}

/// What a round of planning may do beyond the changes always owed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanRules {
    /// Give partitions back to their preferred leaders.
    pub preferred: bool,
    /// `unclean.leader.election.enable` for topics that do not set it.
    pub unclean_by_default: bool,
}

/// Whether `topic` may elect a leader outside its ISR.
fn unclean_enabled(image: &MetadataImage, topic: &str, rules: PlanRules) -> bool {
    match image.topics.config(topic).get(UNCLEAN_LEADER_ELECTION_ENABLE) {
        Some(v) => v.trim().eq_ignore_ascii_case("true"),
        None => rules.unclean_by_default,
    }
}

const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// The changes `image` owes, written by a controller of `controller_epoch`,
/// under `rules`.
pub fn plan(
    image: &MetadataImage,
    controller_epoch: i64,
    rules: PlanRules,
) -> Vec<PartitionChange> {
    let preferred = rules.preferred;
    let mut changes = Vec::new();
    for topic in image.topics.topics() {
        let unclean = unclean_enabled(image, &topic.name, rules);
        for (&p, replicas) in &topic.assignment {
            let current = image.topics.state(&topic.name, p);
            let owed = match current {
                None => Some((first_state(image, topic, replicas), None)),
                Some(r) => next_state(image, replicas, &r.state, unclean)
                    .map(|s| (s, None))
                    .or_else(|| {
                        let (value, s) = reassignments::completion(image, topic, p, &r.state)?;
                        Some((s, Some(value)))
                    })
                    .or_else(|| {
                        let s = preferred.then(|| preferred_state(image, replicas, &r.state))??;
                        Some((s, None))
                    }),
            };
            if let Some((mut state, topic_value)) = owed {
                state.controller_epoch = controller_epoch;
                changes.push(PartitionChange {
                    topic: topic.name.clone(),
                    partition: p,
                    topic_revision: topic.mod_revision,
                    state_revision: image.topics.state_key_revision(&topic.name, p),
                    state,
                    topic_value,
                });
            }
        }
    }
    changes
}

/// Whether `change` gives its partition a leader from outside the ISR it
/// had in `image` (an unclean election; logged where it is planned).
pub(super) fn is_unclean(image: &MetadataImage, change: &PartitionChange) -> bool {
    let leader = change.state.leader;
    image.topics.state(&change.topic, change.partition).is_some_and(|old| {
        leader >= 0 && leader != old.state.leader && !old.state.isr.contains(&leader)
    })
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

/// The state after `s`, if it is owed a change (`unclean`: a replica
/// outside the ISR may lead when no member can).
fn next_state(
    image: &MetadataImage,
    replicas: &[i32],
    s: &PartitionStateValue,
    unclean: bool,
) -> Option<PartitionStateValue> {
    let mut isr: Vec<i32> = s.isr.iter().copied().filter(|r| image.is_eligible(*r)).collect();
    let leader_ok = s.leader >= 0 && image.is_eligible(s.leader);
    let leader = if leader_ok {
        s.leader
    } else {
        match replicas.iter().copied().find(|r| isr.contains(r)) {
            Some(next) => next,
            // A leader in controlled shutdown with no other member to take
            // over keeps the partition until it stops (design 6.6).
            None if shutting_down(image, s.leader) => {
                isr.insert(0, s.leader);
                s.leader
            }
            None => match replicas.iter().copied().find(|r| unclean && image.is_eligible(*r)) {
                Some(r) => {
                    tracing::warn!(?replicas, isr = ?s.isr, leader = r, "unclean leader election: records only the old ISR held may be lost");
                    isr = vec![r];
                    r
                }
                None => -1,
            },
        }
    };
    if isr.is_empty() {
        // Never empty: the last member stays listed while offline.
        isr = if s.leader >= 0 { vec![s.leader] } else { s.isr.clone() };
    }
    if leader == s.leader && isr == s.isr {
        return None;
    }
    let leader_epoch = if leader == s.leader { s.leader_epoch } else { s.leader_epoch + 1 };
    // A leader from outside the ISR recovers first (KIP-704): until it
    // reports RECOVERED, its ISR stays itself alone.
    let unclean_leader = leader >= 0 && leader != s.leader && !s.isr.contains(&leader);
    Some(PartitionStateValue {
        leader,
        leader_epoch,
        partition_epoch: s.partition_epoch + 1,
        isr,
        leader_recovery_state: if unclean_leader { RECOVERING } else { s.leader_recovery_state },
        ..s.clone()
    })
}

/// Kafka's `LeaderRecoveryState.RECOVERING` (KIP-704): the leader was
/// elected uncleanly and has not yet told the controller it recovered.
pub const RECOVERING: i8 = 1;

/// The transaction writing `c`: it fails, changing nothing, unless the
/// controller key is still the one of `epoch` and neither the topic key nor
/// the state key changed since the image `c` was planned from.
pub fn change_txn(keys: &ClusterKeys, c: &PartitionChange, epoch: i64) -> Txn {
    let key = keys.partition_state(&c.topic, c.partition);
    let mut success = vec![Op::put(key.clone(), keys::to_json(&c.state))];
    if let Some(value) = &c.topic_value {
        success.push(Op::put(keys.topic(&c.topic), keys::to_json(value)));
    }
    Txn {
        compares: vec![
            Compare::CreateRevision(keys.controller(), epoch),
            Compare::ModRevision(keys.topic(&c.topic), c.topic_revision),
            Compare::ModRevision(key, c.state_revision),
        ],
        success,
        failure: vec![],
    }
}

/// The state giving `s` back to its preferred replica (the first), if that
/// one is eligible, in the ISR and not leading (Kafka's preferred election;
/// KRaft's rule: `leader.imbalance.per.broker.percentage` is not used).
fn preferred_state(
    image: &MetadataImage,
    replicas: &[i32],
    s: &PartitionStateValue,
) -> Option<PartitionStateValue> {
    let preferred = *replicas.first()?;
    if preferred == s.leader || !s.isr.contains(&preferred) || !image.is_eligible(preferred) {
        return None;
    }
    Some(PartitionStateValue {
        leader: preferred,
        leader_epoch: s.leader_epoch + 1,
        partition_epoch: s.partition_epoch + 1,
        ..s.clone()
    })
}

/// Whether `node` is registered and in controlled shutdown.
fn shutting_down(image: &MetadataImage, node: i32) -> bool {
    use crate::cluster::keys::broker_state::PENDING_CONTROLLED_SHUTDOWN;
    image.brokers.get(&node).is_some_and(|b| b.registration.state == PENDING_CONTROLLED_SHUTDOWN)
}

/// How long a topic's deletion marker is kept for brokers that were away.
pub const DELETE_MARKER_RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;

/// The deletion markers of `image` older than the retention at `now_ms`
/// (topic id texts).
pub fn expired_markers(image: &MetadataImage, now_ms: i64) -> Vec<String> {
    let expired = image.topics.deleted().filter(|(_, at)| now_ms - at > DELETE_MARKER_RETENTION_MS);
    expired.map(|(id, _)| id.to_string()).collect()
}

/// Runs the reconciler on every broker; it acts only while its broker is
/// the controller.
#[derive(Debug)]
pub struct Reconciler {
    election: Arc<ControllerElection>,
    coordination: Arc<dyn Coordination>,
    keys: ClusterKeys,
    image: Arc<ImageWatcher>,
    /// How often preferred leaders are restored (`None`: never).
    rebalance: Option<Duration>,
    /// The broker's `unclean.leader.election.enable`.
    unclean_by_default: bool,
}

impl Reconciler {
    pub fn new(
        election: Arc<ControllerElection>,
        coordination: Arc<dyn Coordination>,
        (keys, image): (ClusterKeys, Arc<ImageWatcher>),
        (rebalance, unclean_by_default): (Option<Duration>, bool),
    ) -> Self {
        Self { election, coordination, keys, image, rebalance, unclean_by_default }
    }

    /// Reconcile for ever (the broker aborts the task at shutdown).
    pub async fn run(self) {
        let mut rx = self.image.subscribe();
        let mut last_rebalance = tokio::time::Instant::now();
        loop {
            if let Some(epoch) = self.election.epoch() {
                let image = Arc::clone(&rx.borrow_and_update());
                let preferred =
                    self.rebalance.is_some_and(|every| last_rebalance.elapsed() >= every);
                if preferred {
                    last_rebalance = tokio::time::Instant::now();
                }
                let rules = PlanRules { preferred, unclean_by_default: self.unclean_by_default };
                self.round(&image, epoch, rules).await;
                self.expire_markers(&image, epoch).await;
            }
            // A new image, this broker becoming the controller, or a
            // second: whichever comes first.
            let woken = async {
                tokio::select! {
                    _ = rx.changed() => {}
                    () = self.election.became_controller() => {}
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(1), woken).await;
        }
    }

    /// Remove the expired deletion markers, each compared on the
    /// controller's epoch.
    async fn expire_markers(&self, image: &MetadataImage, epoch: i64) {
        let now = crate::clock::system().now_ms();
        for id in expired_markers(image, now) {
            let key = self.keys.deleted_topic(&id);
            let txn = Txn {
                compares: vec![Compare::CreateRevision(self.keys.controller(), epoch)],
                success: vec![Op::Delete(crate::cluster::coordination::KeyRange::Key(key))],
                failure: vec![],
            };
            match self.coordination.txn(txn).await {
                Ok(r) if r.succeeded => tracing::info!(topic_id = %id, "deletion marker expired"),
                Ok(_) => {}
                Err(e) => tracing::warn!(topic_id = %id, "deletion marker not removed: {e}"),
            }
        }
    }

    async fn round(&self, image: &MetadataImage, epoch: i64, rules: PlanRules) {
        // One at a time: a round follows a broker's loss or a creation,
        // and etcd answers each in about a millisecond on its network.
        for change in plan(image, epoch, rules) {
            let unclean = is_unclean(image, &change);
            match self.write(&change, epoch).await {
                Ok(true) => {
                    if unclean {
                        self.election.unclean_elections().fetch_add(1, Ordering::Relaxed);
                    }
                    tracing::info!(
                        topic = %change.topic,
                        partition = change.partition,
                        leader = change.state.leader,
                        leader_epoch = change.state.leader_epoch,
                        isr = ?change.state.isr,
                        reassignment_completed = change.topic_value.is_some(),
                        "partition state changed"
                    );
                }
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
        let txn = change_txn(&self.keys, c, epoch);
        Ok(self.coordination.txn(txn).await?.succeeded)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cluster::keys::broker_state;
    use crate::controller::test_cluster::Cluster;

    const PREFERRED: PlanRules = PlanRules { preferred: true, unclean_by_default: false };

    fn leader_isr_epochs(s: &PartitionStateValue) -> (i32, Vec<i32>, i32, i32) {
        (s.leader, s.isr.clone(), s.leader_epoch, s.partition_epoch)
    }

    #[test]
    fn a_new_partition_is_led_by_its_first_eligible_replica() {
        let c = Cluster::new(&[1, 3], &[&[1, 2, 3], &[2, 3, 1], &[2]]);
        let states = c.round();
        assert_eq!(leader_isr_epochs(&states[0]), (1, vec![1, 3], 0, 0));
        assert_eq!(leader_isr_epochs(&states[1]), (3, vec![3, 1], 0, 0));
        // No replica eligible: offline, every replica listed so the first back leads.
        assert_eq!(leader_isr_epochs(&states[2]), (-1, vec![2], 0, 0));
        assert!(states.iter().all(|s| s.controller_epoch == c.epoch));
        c.set_broker(2, true);
        assert_eq!(leader_isr_epochs(&c.round()[2]), (2, vec![2], 1, 1));
    }

    #[test]
    fn a_lost_leader_hands_over_within_the_isr_or_leaves_the_partition_offline() {
        let c = Cluster::new(&[1, 2, 3], &[&[1, 2, 3], &[1]]);
        c.round();
        c.set_broker(1, false);
        let states = c.round();
        assert_eq!(leader_isr_epochs(&states[0]), (2, vec![2, 3], 1, 1));
        // Its only replica gone: offline, the last member kept in the ISR.
        assert_eq!(leader_isr_epochs(&states[1]), (-1, vec![1], 1, 1));
        // A follower lost: out of the ISR, the leader stays at its epoch.
        c.set_broker(3, false);
        assert_eq!(leader_isr_epochs(&c.round()[0]), (2, vec![2], 1, 2));
        // Broker 1 returns: its own partition comes back at the next epoch;
        // the other stays with its leader (1 rejoins the ISR by catching up,
        // which replication decides, not the controller).
        c.set_broker(1, true);
        let states = c.round();
        assert_eq!(leader_isr_epochs(&states[0]), (2, vec![2], 1, 2));
        assert_eq!(leader_isr_epochs(&states[1]), (1, vec![1], 2, 2));
    }

    #[test]
    fn a_preferred_leader_in_sync_gets_its_partition_back_when_asked() {
        let c = Cluster::new(&[1, 2, 3], &[&[1, 2, 3]]);
        c.round();
        c.set_broker(1, false);
        c.round();
        // Back, but not in the ISR yet: nothing to restore.
        c.set_broker(1, true);
        assert!(plan(&c.image(), c.epoch, PREFERRED).is_empty());
        let state = c.image().topics.state("t", 0).unwrap().state.clone();
        let rejoined = PartitionStateValue { isr: vec![2, 3, 1], partition_epoch: 2, ..state };
        c.put(&c.keys.partition_state("t", 0), keys::to_json(&rejoined));
        assert!(c.plan().is_empty(), "only a rebalance round moves it");
        let change = plan(&c.image(), c.epoch, PREFERRED).remove(0);
        assert_eq!(leader_isr_epochs(&change.state), (1, vec![2, 3, 1], 2, 3));
    }

    #[test]
    fn a_broker_in_controlled_shutdown_hands_over_what_others_can_take() {
        let c = Cluster::new(&[1, 2, 3], &[&[1, 2, 3], &[1]]);
        c.round();
        c.set_broker_state(1, true, broker_state::PENDING_CONTROLLED_SHUTDOWN);
        let states = c.round();
        assert_eq!(leader_isr_epochs(&states[0]), (2, vec![2, 3], 1, 1));
        // No one else in sync: it keeps the partition until it stops.
        assert_eq!(leader_isr_epochs(&states[1]), (1, vec![1], 0, 0));
        c.set_broker(1, false);
        assert_eq!(leader_isr_epochs(&c.round()[1]), (-1, vec![1], 1, 1));
    }

    #[test]
    fn a_reassignment_completes_once_its_target_is_in_sync() {
        let c = Cluster::new(&[1, 2, 3, 4], &[&[1, 2, 3]]);
        c.round();
        // [1, 2, 3] -> [4, 2, 3], as AlterPartitionReassignments writes it.
        let image = c.image();
        let mut value = image.topics.topic("t").unwrap().to_value();
        value.partitions.insert("0".into(), vec![4, 2, 3, 1]);
        value.adding_replicas.insert("0".into(), vec![4]);
        value.removing_replicas.insert("0".into(), vec![1]);
        c.put(&c.keys.topic("t"), keys::to_json(&value));
        assert!(c.plan().is_empty(), "nothing until broker 4 is in sync");
        // The leader takes 4 into the ISR.
        let state = c.image().topics.state("t", 0).unwrap().state.clone();
        let caught_up = PartitionStateValue { isr: vec![4, 2, 3, 1], partition_epoch: 1, ..state };
        c.put(&c.keys.partition_state("t", 0), keys::to_json(&caught_up));
        let states = c.round();
        // Leader 1 leaves: the first target replica leads at the next epoch.
        assert_eq!(leader_isr_epochs(&states[0]), (4, vec![4, 2, 3], 1, 2));
        let t = c.image().topics.topic("t").unwrap().clone();
        assert_eq!(t.assignment[&0], vec![4, 2, 3]);
        assert!(t.reassigning.is_empty());
    }

    #[test]
    fn an_offline_partition_is_led_outside_its_isr_only_where_unclean_election_is_enabled() {
        let c = Cluster::new(&[1, 2], &[&[1, 2]]);
        c.round();
        c.set_broker(2, false);
        c.round();
        c.set_broker(1, false);
        assert_eq!(leader_isr_epochs(&c.round()[0]), (-1, vec![1], 1, 2));
        // 2 returns, out of sync: offline unless unclean election is on.
        c.set_broker(2, true);
        assert!(c.plan().is_empty());
        let unclean = PlanRules { preferred: false, unclean_by_default: true };
        let set_topic = |v: &str| {
            let mut config = BTreeMap::new();
            config.insert(UNCLEAN_LEADER_ELECTION_ENABLE.to_string(), v.to_string());
            let value = keys::TopicConfigValue { version: 1, config };
            c.put(&c.keys.topic_config("t"), keys::to_json(&value));
        };
        set_topic("false");
        assert!(plan(&c.image(), c.epoch, unclean).is_empty(), "the topic's false wins");
        set_topic("true");
        let change = c.plan().remove(0);
        assert_eq!(leader_isr_epochs(&change.state), (2, vec![2], 2, 3));
        assert_eq!(change.state.leader_recovery_state, RECOVERING, "KIP-704");
    }

    #[test]
    fn deletion_markers_expire_after_seven_days() {
        let c = Cluster::new(&[1], &[&[1]]);
        for (id, at) in [("AAAAAAAAAAAAAAAAAAAAAw", 0), ("AAAAAAAAAAAAAAAAAAAABA", 1_000)] {
            let marker =
                keys::DeletedTopicValue { version: 1, name: "gone".into(), deleted_ms: at };
            c.put(&c.keys.deleted_topic(id), keys::to_json(&marker));
        }
        let day = 24 * 3600 * 1000;
        assert!(expired_markers(&c.image(), 7 * day).is_empty(), "kept 7 days");
        assert_eq!(expired_markers(&c.image(), 7 * day + 500), vec!["AAAAAAAAAAAAAAAAAAAAAw"]);
        assert_eq!(expired_markers(&c.image(), 8 * day).len(), 2);
    }

    #[test]
    fn a_deposed_controller_or_a_stale_plan_writes_nothing() {
        let c = Cluster::new(&[1], &[&[1]]);
        let change = c.plan().remove(0);
        // Another controller since: the epoch compare fails.
        let stale = change_txn(&c.keys, &change, c.epoch - 1);
        assert!(!c.rt.block_on(c.c.txn(stale)).unwrap().succeeded);
        // The topic changed after the plan was made: so does the topic compare.
        let topic = c.image().topics.topic("t").map(|t| t.mod_revision).unwrap();
        c.put(
            &c.keys.topic("t"),
            c.rt.block_on(c.c.range(
                crate::cluster::coordination::KeyRange::Key(c.keys.topic("t")),
                0,
                0,
            ))
            .unwrap()
            .kvs[0]
                .value
                .clone(),
        );
        assert_ne!(c.image().topics.topic("t").map(|t| t.mod_revision), Some(topic));
        let r = c.rt.block_on(c.c.txn(change_txn(&c.keys, &change, c.epoch))).unwrap();
        assert!(!r.succeeded);
        assert!(c.image().topics.state("t", 0).is_none(), "nothing written");
    }

    #[test]
    fn a_state_of_another_topic_id_is_replaced() {
        let c = Cluster::new(&[1], &[&[1]]);
        let stale = PartitionStateValue {
            version: 1,
            topic_id: "AAAAAAAAAAAAAAAAAAAAAg".into(),
            leader: 1,
            leader_epoch: 9,
            partition_epoch: 9,
            isr: vec![1],
            leader_recovery_state: 0,
            controller_epoch: 1,
        };
        c.put(&c.keys.partition_state("t", 0), keys::to_json(&stale));
        let states = c.round();
        assert_eq!(states[0].topic_id, "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(leader_isr_epochs(&states[0]), (1, vec![1], 0, 0));
    }
}

//! Partition reassignments (AlterPartitionReassignments and
//! ListPartitionReassignments, `kafka-reassign-partitions`), as Kafka's
//! controller runs them:
//! 1. A request names each partition's target replicas. The partition's
//!    replicas become the target followed by the current replicas not in it;
//!    the target's new brokers are its *adding* replicas, the others leaving
//!    its *removing* ones (kept in the topic key, [`TopicValue`]). Every
//!    broker applying the image sees itself a replica: the new ones create
//!    the partition and fetch from its leader, whose ISR takes them in once
//!    they have caught up (`replica::isr_manager`).
//! 2. Once every target replica is in the ISR, the controller's reconciler
//!    completes it ([`completion`]): replicas = the target, the ISR keeps
//!    only target members, a leader outside the target hands over to the
//!    first eligible target replica, and the leader epoch rises (the
//!    replicas leaving are fenced). Topic key and state change in one
//!    transaction. The brokers no longer replicas delete their copies.
//! 3. A request with no target cancels: the replicas go back to the
//!    original ones (the current minus the adding), and the adding ones
//!    leave the ISR. A new target for a partition being reassigned replaces
//!    the old one, computed from the original replicas.
//!
//! Requests are served by whichever broker they reach; each topic's
//! changes are one transaction compared on the topic key and the state keys
//! it read (and on the controller key when it writes a state), planned
//! again from a newer image when something changed meanwhile.
//!
//! Kafka's refusals: an empty target, a broker named twice or not
//! registered (INVALID_REPLICA_ASSIGNMENT); a target of another size when
//! the request does not allow a factor change (INVALID_REPLICATION_FACTOR);
//! a cancel with nothing going on (NO_REASSIGNMENT_IN_PROGRESS). A change
//! that would leave no in-sync replica (only adding replicas in sync) is
//! refused as an invalid assignment rather than taking the partition offline.

use std::collections::BTreeMap;
use std::time::Duration;

use super::topics::ClusterTopics;
use crate::cluster::coordination::{Compare, Op, Txn};
use crate::cluster::image::MetadataImage;
use crate::cluster::keys::{self, PartitionStateValue, TopicValue};
use crate::cluster::topics_image::{Reassignment, TopicImage};

/// Why a partition's reassignment was not changed (each maps to Kafka's code in `api`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReassignmentError {
    #[error("The partition does not exist.")]
    UnknownPartition,
    #[error("{0}")]
    InvalidAssignment(String),
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("There is no ongoing reassignment for this partition.")]
    NoneInProgress,
    /// The request may not alter the cluster.
    #[error("Cluster authorization failed.")]
    Denied,
    /// etcd did not answer, or the topic kept changing.
    #[error("the cluster's metadata could not be changed: {0}")]
    Unavailable(String),
}

/// A partition and its target (`None`: cancel).
pub type Target = (i32, Option<Vec<i32>>);

/// One topic's requested targets, as the request groups them.
pub type Requested = (String, Vec<Target>);

/// One topic's answers, a partition's each, in the order asked.
pub type Answered = (String, Vec<(i32, Result<(), ReassignmentError>)>);

/// A partition's reassignment going on, as ListPartitionReassignments
/// answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ongoing {
    pub partition: i32,
    pub replicas: Vec<i32>,
    pub reassignment: Reassignment,
}

/// How many times a topic's write lost to a concurrent change is planned again.
const ATTEMPTS: usize = 3;

/// What a request does to one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    replicas: Vec<i32>,
    reassignment: Option<Reassignment>,
    /// The partition's new state, when its ISR or leader must change.
    state: Option<PartitionStateValue>,
}

impl ClusterTopics {
    /// Start, replace or cancel the reassignments of `requested`, each
    /// topic's in one transaction.
    pub async fn alter_reassignments(
        &self,
        requested: Vec<Requested>,
        allow_factor_change: bool,
    ) -> Vec<Answered> {
        let mut out = Vec::with_capacity(requested.len());
        for (topic, parts) in requested {
            let answers = self.alter_topic(&topic, &parts, allow_factor_change).await;
            let answers = parts.iter().zip(answers).map(|((p, _), r)| (*p, r)).collect();
            out.push((topic, answers));
        }
        out
    }

    async fn alter_topic(
        &self,
        topic: &str,
        parts: &[Target],
        allow: bool,
    ) -> Vec<Result<(), ReassignmentError>> {
        for _ in 0..ATTEMPTS {
            let image = self.image();
            let Some(t) = image.topics.topic(topic) else {
                return vec![Err(ReassignmentError::UnknownPartition); parts.len()];
            };
            let steps: Vec<_> = parts
                .iter()
                .map(|(p, target)| plan(&image, t, *p, target.as_deref(), allow))
                .collect();
            let Some(txn) = self.txn_of(&image, t, parts, &steps) else {
                return steps.into_iter().map(|s| s.map(|_| ())).collect();
            };
            match self.coordination.txn(txn).await {
                Ok(r) if r.succeeded => {
                    let wait = self.image.wait_for(r.revision);
                    let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
                    tracing::info!(topic, revision = r.revision, "partition reassignments changed");
                    return steps.into_iter().map(|s| s.map(|_| ())).collect();
                }
                Ok(r) => {
                    let wait = self.image.wait_for(r.revision);
                    let _ = tokio::time::timeout(Duration::from_secs(1), wait).await;
                }
                Err(e) => {
                    let failed = || Err(ReassignmentError::Unavailable(e.to_string()));
                    return steps.into_iter().map(|s| s.and_then(|_| failed())).collect();
                }
            }
        }
        let busy = || Err(ReassignmentError::Unavailable("the topic kept changing".into()));
        vec![busy(); parts.len()]
    }

    /// The transaction applying every planned step of topic `t` (`None`:
    /// nothing to write).
    fn txn_of(
        &self,
        image: &MetadataImage,
        t: &TopicImage,
        parts: &[Target],
        steps: &[Result<Option<Step>, ReassignmentError>],
    ) -> Option<Txn> {
        let mut value = t.to_value();
        let mut compares = vec![Compare::ModRevision(self.keys.topic(&t.name), t.mod_revision)];
        let mut success = Vec::new();
        let mut any = false;
        for ((p, _), step) in parts.iter().zip(steps) {
            let Ok(Some(step)) = step else { continue };
            any = true;
            set_partition(&mut value, *p, step.replicas.clone(), step.reassignment.as_ref());
            let state_key = self.keys.partition_state(&t.name, *p);
            compares.push(Compare::ModRevision(
                state_key.clone(),
                image.topics.state_key_revision(&t.name, *p),
            ));
            if let Some(state) = &step.state {
                success.push(Op::put(state_key, keys::to_json(state)));
            }
        }
        if !any {
            return None;
        }
        if let Some((_, epoch)) = image.controller.as_ref().filter(|_| !success.is_empty()) {
            compares.push(Compare::CreateRevision(self.keys.controller(), *epoch));
        }
        success.push(Op::put(self.keys.topic(&t.name), keys::to_json(&value)));
        Some(Txn { compares, success, failure: vec![] })
    }
}

/// Partition `p`'s replicas and reassignment in `value`.
fn set_partition(value: &mut TopicValue, p: i32, replicas: Vec<i32>, r: Option<&Reassignment>) {
    let key = p.to_string();
    value.partitions.insert(key.clone(), replicas);
    value.adding_replicas.remove(&key);
    value.removing_replicas.remove(&key);
    if let Some(r) = r {
        if !r.adding.is_empty() {
            value.adding_replicas.insert(key.clone(), r.adding.clone());
        }
        if !r.removing.is_empty() {
            value.removing_replicas.insert(key, r.removing.clone());
        }
    }
}

/// What `target` (`None`: cancel) does to partition `p` of `t`; `None`
/// when nothing changes.
fn plan(
    image: &MetadataImage,
    t: &TopicImage,
    p: i32,
    target: Option<&[i32]>,
    allow_factor_change: bool,
) -> Result<Option<Step>, ReassignmentError> {
    let replicas = t.assignment.get(&p).ok_or(ReassignmentError::UnknownPartition)?;
    let ongoing = t.reassigning.get(&p);
    let original: Vec<i32> = match ongoing {
        Some(r) => replicas.iter().copied().filter(|b| !r.adding.contains(b)).collect(),
        None => replicas.clone(),
    };
    let (new_replicas, reassignment) = match target {
        None if ongoing.is_none() => return Err(ReassignmentError::NoneInProgress),
        None => (original, None),
        Some(target) => {
            check_target(&|b| image.brokers.contains_key(&b), target)?;
            if !allow_factor_change && target.len() != original.len() {
                return Err(ReassignmentError::InvalidReplicationFactor(format!(
                    "The replication factor is changed from {} to {} but allowReplicationFactorChange is false",
                    original.len(),
                    target.len()
                )));
            }
            if ongoing.is_none() && target == replicas.as_slice() {
                return Ok(None);
            }
            merged(&original, target)
        }
    };
    let state = match image.topics.state(&t.name, p) {
        Some(current) => state_for(image, &current.state, &new_replicas)?,
        None => None,
    };
    Ok(Some(Step { replicas: new_replicas, reassignment, state }))
}

/// The replicas while moving from `original` to `target` (the target, then
/// the original ones leaving) and the reassignment, if any remains.
fn merged(original: &[i32], target: &[i32]) -> (Vec<i32>, Option<Reassignment>) {
    let removing: Vec<i32> = original.iter().copied().filter(|b| !target.contains(b)).collect();
    let adding: Vec<i32> = target.iter().copied().filter(|b| !original.contains(b)).collect();
    let replicas = target.iter().chain(&removing).copied().collect();
    let r =
        (!adding.is_empty() || !removing.is_empty()).then_some(Reassignment { adding, removing });
    (replicas, r)
}

/// Kafka's checks of a manual assignment, `registered` saying which
/// brokers are.
///
/// # Errors
/// An empty target, a broker named twice or not registered.
pub fn check_target(
    registered: &dyn Fn(i32) -> bool,
    target: &[i32],
) -> Result<(), ReassignmentError> {
    let bad = |m: String| Err(ReassignmentError::InvalidAssignment(m));
    if target.is_empty() {
        return bad("The manual partition assignment includes an empty replica list.".into());
    }
    for (i, b) in target.iter().enumerate() {
        if target[..i].contains(b) {
            return bad(format!(
                "The manual partition assignment includes the broker {b} more than once."
            ));
        }
        if !registered(*b) {
            return bad(format!(
                "The manual partition assignment includes broker {b}, but no such broker is registered."
            ));
        }
    }
    Ok(())
}

/// The state `s` must take for `replicas` to be the partition's replicas:
/// ISR members outside them leave, and a leader among those leaving hands
/// over (`None`: no change).
fn state_for(
    image: &MetadataImage,
    s: &PartitionStateValue,
    replicas: &[i32],
) -> Result<Option<PartitionStateValue>, ReassignmentError> {
    let isr: Vec<i32> = s.isr.iter().copied().filter(|m| replicas.contains(m)).collect();
    if isr == s.isr {
        return Ok(None);
    }
    if isr.is_empty() {
        return Err(ReassignmentError::InvalidAssignment(
            "The change would leave the partition with no in-sync replica.".into(),
        ));
    }
    let leader = if isr.contains(&s.leader) {
        s.leader
    } else {
        replicas.iter().copied().find(|b| isr.contains(b) && image.is_eligible(*b)).unwrap_or(-1)
    };
    Ok(Some(changed(image, s, leader, isr, leader != s.leader)))
}

/// `s` with `leader` and `isr`, the partition epoch raised (and the leader
/// epoch with `bump`), written by the image's controller.
fn changed(
    image: &MetadataImage,
    s: &PartitionStateValue,
    leader: i32,
    isr: Vec<i32>,
    bump: bool,
) -> PartitionStateValue {
    PartitionStateValue {
        leader,
        isr,
        leader_epoch: s.leader_epoch + i32::from(bump),
        partition_epoch: s.partition_epoch + 1,
        controller_epoch: image.controller.as_ref().map_or(s.controller_epoch, |(_, e)| *e),
        ..s.clone()
    }
}

/// The completion partition `p` of `t` is owed, if it is being reassigned
/// and every target replica is in its ISR: the topic key's new value and
/// the partition's new state (module doc, step 2).
pub fn completion(
    image: &MetadataImage,
    t: &TopicImage,
    p: i32,
    s: &PartitionStateValue,
) -> Option<(TopicValue, PartitionStateValue)> {
    let r = t.reassigning.get(&p)?;
    let target = t.target(p);
    if !target.iter().all(|b| s.isr.contains(b)) {
        return None;
    }
    let isr: Vec<i32> = s.isr.iter().copied().filter(|m| target.contains(m)).collect();
    let leader = if target.contains(&s.leader) {
        s.leader
    } else {
        target.iter().copied().find(|b| image.is_eligible(*b))?
    };
    // Replicas leaving are fenced by the new epoch (KRaft does the same).
    let bump = leader != s.leader || !r.removing.is_empty();
    let mut value = t.to_value();
    set_partition(&mut value, p, target, None);
    Some((value, changed(image, s, leader, isr, bump)))
}

/// The reassignments going on, per topic, of `wanted` (topic →
/// partitions) or all; topics with none are left out.
pub fn ongoing(
    image: &MetadataImage,
    wanted: Option<&BTreeMap<String, Vec<i32>>>,
) -> Vec<(String, Vec<Ongoing>)> {
    let mut out = Vec::new();
    for t in image.topics.topics() {
        let asked = match wanted.map(|w| w.get(&t.name)) {
            Some(None) => continue,
            asked => asked.flatten(),
        };
        let partitions: Vec<Ongoing> = t
            .reassigning
            .iter()
            .filter(|(p, _)| asked.is_none_or(|ps| ps.contains(p)))
            .map(|(p, r)| Ongoing {
                partition: *p,
                replicas: t.assignment.get(p).cloned().unwrap_or_default(),
                reassignment: r.clone(),
            })
            .collect();
        if !partitions.is_empty() {
            out.push((t.name.clone(), partitions));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replicas_while_moving_are_the_target_then_those_leaving() {
        let (replicas, r) = merged(&[1, 2, 3], &[4, 2, 3]);
        assert_eq!(replicas, vec![4, 2, 3, 1]);
        assert_eq!(r, Some(Reassignment { adding: vec![4], removing: vec![1] }));
        // A reorder is no reassignment: it applies at once.
        assert_eq!(merged(&[1, 2, 3], &[3, 1, 2]), (vec![3, 1, 2], None));
        // Fewer replicas: only removals.
        let (replicas, r) = merged(&[1, 2, 3], &[2]);
        assert_eq!(replicas, vec![2, 1, 3]);
        assert_eq!(r, Some(Reassignment { adding: vec![], removing: vec![1, 3] }));
    }
}

//! Leader elections an operator asks for (ElectLeaders, `kafka-leader-election`),
//! made by whichever broker the request reached, each a CAS on the
//! partition's state as the reconciler's own changes are (compared on the
//! controller key, the topic key and the state key), so a controller or a
//! state that changed meanwhile makes the write fail and it is planned
//! again from the newer image.
//!
//! * PREFERRED: the first replica leads again if it is eligible and in the
//!   ISR; ELECTION_NOT_NEEDED if it leads already, PREFERRED_LEADER_NOT_AVAILABLE
//!   otherwise (Kafka's rules).
//! * UNCLEAN: only for a partition without a leader: its first eligible
//!   ISR member if one returned, else its first eligible replica, which
//!   becomes the whole ISR (records only the old ISR held may be lost, as
//!   on Kafka); ELECTION_NOT_NEEDED for a partition with a leader,
//!   ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is eligible.
//!
//! Each new state raises the leader epoch and the partition epoch.

use std::time::Duration;

use std::sync::atomic::Ordering;

use super::reconciler::{change_txn, is_unclean, PartitionChange};
use super::topics::ClusterTopics;
use crate::cluster::image::MetadataImage;
use crate::cluster::keys::PartitionStateValue;

/// Kafka's election types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    Preferred,
    Unclean,
}

/// What an election did to one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElectionOutcome {
    Elected,
    NotNeeded,
    PreferredLeaderNotAvailable,
    EligibleLeadersNotAvailable,
    UnknownPartition,
    /// etcd did not answer, or the partition kept changing.
    Unavailable(String),
}

/// How many times a write lost to a concurrent change is planned again.
const ATTEMPTS: usize = 3;

impl ClusterTopics {
    /// Elect the leaders of `partitions` (every partition when `None`).
    pub async fn elect_leaders(
        &self,
        partitions: Option<Vec<(String, i32)>>,
        kind: ElectionType,
    ) -> Vec<(String, i32, ElectionOutcome)> {
        let wanted = match partitions {
            Some(p) => p,
            None => every_partition(&self.image()),
        };
        let mut out = Vec::with_capacity(wanted.len());
        for (topic, partition) in wanted {
            let outcome = self.elect_one(&topic, partition, kind).await;
            if outcome == ElectionOutcome::Elected {
                tracing::info!(topic, partition, ?kind, "leader elected on request");
            }
            out.push((topic, partition, outcome));
        }
        out
    }

    async fn elect_one(&self, topic: &str, partition: i32, kind: ElectionType) -> ElectionOutcome {
        for _ in 0..ATTEMPTS {
            let image = self.image();
            let change = match planned(&image, topic, partition, kind) {
                Ok(change) => change,
                Err(outcome) => return outcome,
            };
            let epoch = change.state.controller_epoch;
            let txn = change_txn(&self.keys, &change, epoch);
            let unclean = is_unclean(&image, &change);
            match self.coordination.txn(txn).await {
                Ok(r) if r.succeeded => {
                    if unclean {
                        self.unclean_elections.fetch_add(1, Ordering::Relaxed);
                    }
                    let wait = self.image.wait_for(r.revision);
                    let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
                    return ElectionOutcome::Elected;
                }
                // Something changed under it: plan again from a newer image.
                Ok(r) => {
                    let wait = self.image.wait_for(r.revision);
                    let _ = tokio::time::timeout(Duration::from_secs(1), wait).await;
                }
                Err(e) => return ElectionOutcome::Unavailable(e.to_string()),
            }
        }
        ElectionOutcome::Unavailable("the partition kept changing".into())
    }
}

fn every_partition(image: &MetadataImage) -> Vec<(String, i32)> {
    let topics = image.topics.topics();
    topics.flat_map(|t| t.assignment.keys().map(|p| (t.name.clone(), *p))).collect()
}

/// The write electing `topic`-`partition`'s leader, or why there is none.
fn planned(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    kind: ElectionType,
) -> Result<PartitionChange, ElectionOutcome> {
    let t = image.topics.topic(topic).ok_or(ElectionOutcome::UnknownPartition)?;
    let replicas = t.assignment.get(&partition).ok_or(ElectionOutcome::UnknownPartition)?;
    let current = image.topics.state(topic, partition).ok_or(ElectionOutcome::UnknownPartition)?;
    let (_, controller_epoch) = image
        .controller
        .as_ref()
        .ok_or_else(|| ElectionOutcome::Unavailable("no controller".into()))?;
    let s = &current.state;
    let (leader, isr) = match kind {
        ElectionType::Preferred => preferred(image, replicas, s)?,
        ElectionType::Unclean => unclean(image, replicas, s)?,
    };
    let recovering = !s.isr.contains(&leader);
    let state = PartitionStateValue {
        leader,
        isr,
        leader_epoch: s.leader_epoch + 1,
        partition_epoch: s.partition_epoch + 1,
        controller_epoch: *controller_epoch,
        // A leader from outside the ISR recovers first (KIP-704).
        leader_recovery_state: if recovering {
            super::reconciler::RECOVERING
        } else {
            s.leader_recovery_state
        },
        ..s.clone()
    };
    Ok(PartitionChange {
        topic: topic.to_string(),
        partition,
        topic_revision: t.mod_revision,
        state_revision: image.topics.state_key_revision(topic, partition),
        state,
        topic_value: None,
    })
}

fn preferred(
    image: &MetadataImage,
    replicas: &[i32],
    s: &PartitionStateValue,
) -> Result<(i32, Vec<i32>), ElectionOutcome> {
    let first = *replicas.first().ok_or(ElectionOutcome::PreferredLeaderNotAvailable)?;
    if first == s.leader {
        return Err(ElectionOutcome::NotNeeded);
    }
    if !s.isr.contains(&first) || !image.is_eligible(first) {
        return Err(ElectionOutcome::PreferredLeaderNotAvailable);
    }
    Ok((first, s.isr.clone()))
}

fn unclean(
    image: &MetadataImage,
    replicas: &[i32],
    s: &PartitionStateValue,
) -> Result<(i32, Vec<i32>), ElectionOutcome> {
    if s.leader >= 0 {
        return Err(ElectionOutcome::NotNeeded);
    }
    if let Some(member) = s.isr.iter().copied().find(|m| image.is_eligible(*m)) {
        return Ok((member, s.isr.clone()));
    }
    match replicas.iter().copied().find(|r| image.is_eligible(*r)) {
        Some(replica) => {
            tracing::warn!(?replicas, isr = ?s.isr, leader = replica, "unclean leader election: records only the old ISR held may be lost");
            Ok((replica, vec![replica]))
        }
        None => Err(ElectionOutcome::EligibleLeadersNotAvailable),
    }
}

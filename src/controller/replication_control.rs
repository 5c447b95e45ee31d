//! Kafka's AlterPartition on the controller (docs/design/multi-broker.md,
//! 4.4): a partition's leader asks for a new ISR, and only the controller
//! writes it, so the leader's ISR changes and the reconciler's (elections,
//! members lost, reassignments) are serialised by one writer, and a member
//! the controller knows to be ineligible never joins an ISR.
//!
//! The checks are Kafka's, in its order, against this controller's image:
//! the sender's broker epoch (STALE_BROKER_EPOCH for the whole request),
//! the topic id, the partition, a leader or partition epoch newer than the
//! image (the image is waited for first, up to [`CATCH_UP`]; then
//! NOT_CONTROLLER, as Kafka answers a controller that is behind), an older
//! leader epoch (FENCED_LEADER_EPOCH), a sender that is not the leader
//! (INVALID_REQUEST), an older partition epoch (INVALID_UPDATE_VERSION),
//! an ISR outside the replicas, with duplicates or without the leader, or
//! a recovery state going back to RECOVERING (INVALID_REQUEST), and a
//! member not registered, fenced, shutting down or of another broker epoch
//! than its registration's (INELIGIBLE_REPLICA; epoch -1 skips that
//! comparison, as KIP-903 allows).
//!
//! A request that passes is written as the reconciler writes: one
//! transaction compared on the controller's epoch, the topic key and the
//! state key, raising the partition epoch by one. A write that loses to a
//! change made meanwhile is checked again on an image holding that change,
//! so it then fails as Kafka's would against the newer state. A refusal
//! changes nothing. An ISR equal to the current one is answered with the
//! current state, unwritten. Reassignments are completed by the reconciler
//! once the ISR holds their target, from the next image.
//!
//! Invariant: nothing is written unless this broker is the controller when
//! the transaction commits (the compare on its epoch).

use std::sync::Arc;
use std::time::Duration;

use super::election::ControllerElection;
use super::reconciler::{change_txn, PartitionChange};
use crate::cluster::coordination::{Coordination, KeyRange, Op};
use crate::cluster::image::{ImageWatcher, MetadataImage};
use crate::cluster::keys::{broker_state, ClusterKeys, PartitionStateValue};

/// How long a request naming a newer state than the image waits for it.
pub const CATCH_UP: Duration = Duration::from_secs(1);

/// How many times a write lost to a concurrent change is checked again.
const ATTEMPTS: usize = 3;

/// Kafka's leader recovery states.
const RECOVERED: i8 = 0;
const RECOVERING: i8 = 1;

/// One partition's requested change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrRequest {
    pub topic_id: [u8; 16],
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// The new ISR, each member with the broker epoch the leader knows it
    /// by (-1: not known).
    pub isr: Vec<(i32, i64)>,
    pub leader_recovery_state: i8,
}

/// Why a request or one of its partitions was refused (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AlterPartitionError {
    #[error("this broker is not the controller, or its image is behind")]
    NotController,
    #[error("the sender's broker epoch is not its registration's")]
    StaleBrokerEpoch,
    #[error("no topic has this id")]
    UnknownTopicId,
    #[error("the topic has no such partition")]
    UnknownTopicOrPartition,
    #[error("the leader epoch is older than the partition's")]
    FencedLeaderEpoch,
    #[error("the sender does not lead the partition, or the ISR is not valid")]
    InvalidRequest,
    #[error("the partition epoch is older than the partition's")]
    InvalidUpdateVersion,
    #[error("an ISR member may not be in an ISR now")]
    IneligibleReplica,
    #[error("etcd did not take the change in time")]
    Unavailable,
}

/// The controller's side of AlterPartition.
#[derive(Debug)]
pub struct ReplicationControl {
    election: Arc<ControllerElection>,
    coordination: Arc<dyn Coordination>,
    keys: ClusterKeys,
    image: Arc<ImageWatcher>,
}

impl ReplicationControl {
    pub fn new(
        election: Arc<ControllerElection>,
        coordination: Arc<dyn Coordination>,
        keys: ClusterKeys,
        image: Arc<ImageWatcher>,
    ) -> Self {
        Self { election, coordination, keys, image }
    }

    /// Answer the AlterPartition of broker `sender` at `sender_epoch`: the
    /// new (or unchanged) state of each partition, or why not.
    ///
    /// # Errors
    /// For the whole request: NOT_CONTROLLER or STALE_BROKER_EPOCH.
    pub async fn alter_partition(
        &self,
        (sender, sender_epoch): (i32, i64),
        requests: Vec<IsrRequest>,
    ) -> Result<Vec<Result<PartitionStateValue, AlterPartitionError>>, AlterPartitionError> {
        if !self.election.is_active() {
            return Err(AlterPartitionError::NotController);
        }
        let image = self.image.current();
        if image.brokers.get(&sender).is_none_or(|b| b.epoch != sender_epoch) {
            return Err(AlterPartitionError::StaleBrokerEpoch);
        }
        let mut answers = Vec::with_capacity(requests.len());
        for request in &requests {
            answers.push(self.alter_one(sender, request).await);
        }
        Ok(answers)
    }

    async fn alter_one(
        &self,
        sender: i32,
        request: &IsrRequest,
    ) -> Result<PartitionStateValue, AlterPartitionError> {
        let mut image = self.caught_up(request).await;
        for _ in 0..ATTEMPTS {
            let Some(epoch) = self.election.epoch() else {
                return Err(AlterPartitionError::NotController);
            };
            let Some(change) = check(&image, sender, request, epoch)? else {
                return current(&image, request).ok_or(AlterPartitionError::Unavailable);
            };
            let mut txn = change_txn(&self.keys, &change, epoch);
            let key = self.keys.partition_state(&change.topic, change.partition);
            txn.failure = vec![Op::Get(KeyRange::Key(key))];
            let r = self.coordination.txn(txn).await.map_err(|e| {
                tracing::warn!(topic = %change.topic, partition = change.partition, "AlterPartition not written: {e}");
                AlterPartitionError::Unavailable
            })?;
            if r.succeeded {
                tracing::info!(
                    topic = %change.topic,
                    partition = change.partition,
                    leader = sender,
                    isr = ?change.state.isr,
                    partition_epoch = change.state.partition_epoch,
                    "ISR altered for its leader"
                );
                return Ok(change.state);
            }
            // Something changed under it: check again against an image
            // holding what the state key now is.
            let seen = r
                .reads
                .first()
                .and_then(|kvs| kvs.first())
                .map_or(r.revision, |kv| kv.mod_revision);
            image = match tokio::time::timeout(CATCH_UP, self.image.wait_for(seen)).await {
                Ok(image) => image,
                Err(_) => return Err(AlterPartitionError::Unavailable),
            };
        }
        Err(AlterPartitionError::Unavailable)
    }

    /// The image once it holds at least the state `request` names, or the
    /// newest after [`CATCH_UP`].
    async fn caught_up(&self, request: &IsrRequest) -> Arc<MetadataImage> {
        let mut rx = self.image.subscribe();
        let deadline = tokio::time::Instant::now() + CATCH_UP;
        loop {
            let image = Arc::clone(&rx.borrow_and_update());
            let behind = state_of(&image, request).is_some_and(|(_, s)| {
                request.leader_epoch > s.leader_epoch || request.partition_epoch > s.partition_epoch
            });
            if !behind {
                return image;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return image,
            }
        }
    }
}

/// The partition's topic name and state in `image`.
fn state_of<'a>(
    image: &'a MetadataImage,
    request: &IsrRequest,
) -> Option<(&'a str, &'a PartitionStateValue)> {
    let topic = image.topics.topic_by_id(&request.topic_id)?;
    let s = image.topics.state(&topic.name, request.partition)?;
    Some((topic.name.as_str(), &s.state))
}

fn current(image: &MetadataImage, request: &IsrRequest) -> Option<PartitionStateValue> {
    state_of(image, request).map(|(_, s)| s.clone())
}

/// Kafka's checks of `request` from `sender` against `image` (module
/// doc): the change to write, `None` when the ISR asked for is already
/// the partition's.
///
/// # Errors
/// The refusal, as Kafka's controller gives it.
pub fn check(
    image: &MetadataImage,
    sender: i32,
    request: &IsrRequest,
    controller_epoch: i64,
) -> Result<Option<PartitionChange>, AlterPartitionError> {
    use AlterPartitionError as E;
    let topic = match image.topics.topic_by_id(&request.topic_id) {
        Some(t) if !image.topics.is_deleted(&request.topic_id) => t,
        _ => return Err(E::UnknownTopicId),
    };
    let (Some(replicas), Some(registration)) = (
        topic.assignment.get(&request.partition),
        image.topics.state(&topic.name, request.partition),
    ) else {
        return Err(E::UnknownTopicOrPartition);
    };
    let s = &registration.state;
    if request.leader_epoch > s.leader_epoch || request.partition_epoch > s.partition_epoch {
        return Err(E::NotController);
    }
    if request.leader_epoch < s.leader_epoch {
        return Err(E::FencedLeaderEpoch);
    }
    if sender != s.leader {
        return Err(E::InvalidRequest);
    }
    if request.partition_epoch < s.partition_epoch {
        return Err(E::InvalidUpdateVersion);
    }
    let isr: Vec<i32> = request.isr.iter().map(|(id, _)| *id).collect();
    let duplicates = isr.iter().enumerate().any(|(i, m)| isr[..i].contains(m));
    if duplicates || !isr.iter().all(|m| replicas.contains(m)) || !isr.contains(&s.leader) {
        return Err(E::InvalidRequest);
    }
    let recovery = request.leader_recovery_state;
    let recovery_ok = match recovery {
        RECOVERED => true,
        RECOVERING => s.leader_recovery_state == RECOVERING && isr.len() == 1,
        _ => false,
    };
    if !recovery_ok {
        return Err(E::InvalidRequest);
    }
    if request.isr.iter().any(|(id, epoch)| !eligible(image, *id, *epoch)) {
        return Err(E::IneligibleReplica);
    }
    if isr == s.isr && recovery == s.leader_recovery_state {
        return Ok(None);
    }
    Ok(Some(PartitionChange {
        topic: topic.name.clone(),
        partition: request.partition,
        topic_revision: topic.mod_revision,
        state_revision: registration.mod_revision,
        state: PartitionStateValue {
            isr,
            leader_recovery_state: recovery,
            partition_epoch: s.partition_epoch + 1,
            controller_epoch,
            ..s.clone()
        },
        topic_value: None,
    }))
}

/// Kafka's eligibility of an ISR member: registered, RUNNING (not fenced,
/// not in controlled shutdown) and, unless `epoch` is -1, of that epoch.
fn eligible(image: &MetadataImage, id: i32, epoch: i64) -> bool {
    image.brokers.get(&id).is_some_and(|b| {
        b.registration.state == broker_state::RUNNING && (epoch == -1 || b.epoch == epoch)
    })
}

#[cfg(test)]
#[path = "replication_control_tests.rs"]
mod tests;

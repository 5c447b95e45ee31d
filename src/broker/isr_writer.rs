//! [`IsrWriter`] through the controller: a leader's ISR changes of one
//! round sent together as Kafka's AlterPartition v3 to the controller its
//! image names, over the controller's inter-broker listener (the
//! controller's own changes go to itself the same way, as a combined
//! KRaft node's do). A change counts once this broker's image shows the
//! partition epoch the controller answered; a refusal, an unreachable or
//! unknown controller, or an image that does not catch up within
//! [`ANSWER_TIMEOUT`] count as not made, and the next round asks again.
//!
//! The leader names itself with its broker epoch; followers with -1 (not
//! compared), since replica fetches (v12) do not carry their epoch.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, BrokerId};
use kafka_protocol::ResponseError;

use crate::cluster::coordination::BoxFuture;
use crate::cluster::image::{ImageWatcher, MetadataImage};
use crate::cluster::peers::BrokerChannels;
use crate::controller::ControllerElection;
use crate::log::TopicPartition;
use crate::replica::isr_manager::{IsrChange, IsrWriter};

/// How long one AlterPartition and the image showing its answer may take:
/// a paused controller must not hold the leader's ISR rounds for the
/// peers' 30 s; its successor is asked at the next round.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// AlterPartition v3: ISR members with their broker epochs (KIP-903).
const VERSION: i16 = 3;

#[derive(Debug)]
pub struct ControllerIsrWriter {
    pub image: Arc<ImageWatcher>,
    pub election: Arc<ControllerElection>,
    pub peers: Arc<BrokerChannels>,
    pub node_id: i32,
}

impl IsrWriter for ControllerIsrWriter {
    fn alter_isr(&self, changes: Vec<IsrChange>) -> BoxFuture<'_, Vec<bool>> {
        Box::pin(async move {
            let mut made = vec![false; changes.len()];
            let image = self.image.current();
            let (request, asked) = self.request(&image, &changes);
            let controller = image.controller_id();
            if asked.is_empty() || controller < 0 {
                return made;
            }
            let peers = Arc::clone(&self.peers);
            let call =
                tokio::task::spawn_blocking(move || peers.call(controller, VERSION, &request));
            let response = match tokio::time::timeout(ANSWER_TIMEOUT, call).await {
                Ok(Ok(Ok(r))) => r,
                Ok(Ok(Err(e))) => {
                    tracing::debug!(controller, "AlterPartition not answered: {e}");
                    return made;
                }
                _ => return made,
            };
            if response.error_code != 0 {
                tracing::debug!(controller, error = response.error_code, "AlterPartition refused");
                return made;
            }
            for (i, partition_epoch) in accepted(&response, &asked) {
                made[i] = self.shows(&changes[i].tp, partition_epoch).await;
            }
            made
        })
    }

    fn is_eligible(&self, node: i32) -> bool {
        self.image.current().is_eligible(node)
    }
}

/// Where each asked partition's answer goes: (topic id, partition) → the
/// index of its change.
type Asked = BTreeMap<([u8; 16], i32), usize>;

impl ControllerIsrWriter {
    /// The request for the changes still led here at their epoch in `image`.
    fn request(
        &self,
        image: &MetadataImage,
        changes: &[IsrChange],
    ) -> (AlterPartitionRequest, Asked) {
        let epoch = self.election.broker_epoch();
        let mut asked = Asked::new();
        let mut topics: BTreeMap<[u8; 16], Vec<PartitionData>> = BTreeMap::new();
        for (i, c) in changes.iter().enumerate() {
            let (Some(topic), Some(current)) =
                (image.topics.topic(&c.tp.topic), image.topics.state(&c.tp.topic, c.tp.partition))
            else {
                continue;
            };
            let s = &current.state;
            if s.leader != self.node_id || s.leader_epoch != c.leader_epoch {
                continue;
            }
            let members = c.isr.iter().map(|m| {
                let e = if *m == self.node_id {
                    epoch
                } else {
                    c.member_epochs.get(m).copied().unwrap_or(-1)
                };
                BrokerState::default().with_broker_id(BrokerId(*m)).with_broker_epoch(e)
            });
            topics.entry(topic.id).or_default().push(
                PartitionData::default()
                    .with_partition_index(c.tp.partition)
                    .with_leader_epoch(s.leader_epoch)
                    .with_new_isr_with_epochs(members.collect())
                    .with_leader_recovery_state(c.leader_recovery_state)
                    .with_partition_epoch(s.partition_epoch),
            );
            asked.insert((topic.id, c.tp.partition), i);
        }
        let topics = topics
            .into_iter()
            .map(|(id, partitions)| {
                TopicData::default()
                    .with_topic_id(uuid::Uuid::from_bytes(id))
                    .with_partitions(partitions)
            })
            .collect();
        let request = AlterPartitionRequest::default()
            .with_broker_id(BrokerId(self.node_id))
            .with_broker_epoch(epoch)
            .with_topics(topics);
        (request, asked)
    }

    /// Wait until this broker's image shows `tp` at `partition_epoch` or
    /// later; whether it did within [`ANSWER_TIMEOUT`].
    async fn shows(&self, tp: &TopicPartition, partition_epoch: i32) -> bool {
        let mut rx = self.image.subscribe();
        let wait = async {
            loop {
                let shown = rx
                    .borrow_and_update()
                    .topics
                    .state(&tp.topic, tp.partition)
                    .is_some_and(|s| s.state.partition_epoch >= partition_epoch);
                if shown {
                    return true;
                }
                if rx.changed().await.is_err() {
                    return false;
                }
            }
        };
        tokio::time::timeout(ANSWER_TIMEOUT, wait).await.unwrap_or(false)
    }
}

/// The changes the controller made: (index of the change, its new
/// partition epoch). A refusal is logged; the next round decides again.
fn accepted(response: &AlterPartitionResponse, asked: &Asked) -> Vec<(usize, i32)> {
    let mut made = Vec::new();
    for t in &response.topics {
        let id = *t.topic_id.as_bytes();
        for p in &t.partitions {
            let Some(&i) = asked.get(&(id, p.partition_index)) else { continue };
            if p.error_code == 0 {
                made.push((i, p.partition_epoch));
            } else {
                let error = ResponseError::try_from_code(p.error_code);
                tracing::info!(
                    partition = p.partition_index,
                    ?error,
                    "the controller refused an ISR change"
                );
            }
        }
    }
    made
}

//! [`IsrWriter`] over etcd: a leader's ISR change written to its partition
//! state with a compare on the state's and the topic key's revisions, and
//! only while the image still names this broker leader at that epoch; a
//! write that loses answers `false` and the leader decides again from the
//! next image. Raises the partition epoch by one, as every state write.

use std::sync::Arc;

use crate::cluster::coordination::{BoxFuture, Compare, Coordination, Op, Txn};
use crate::cluster::image::ImageWatcher;
use crate::cluster::keys::{self, ClusterKeys, PartitionStateValue};
use crate::log::TopicPartition;
use crate::replica::isr_manager::IsrWriter;

#[derive(Debug)]
pub struct ClusterIsrWriter {
    pub coordination: Arc<dyn Coordination>,
    pub keys: ClusterKeys,
    pub image: Arc<ImageWatcher>,
    pub node_id: i32,
}

impl IsrWriter for ClusterIsrWriter {
    fn alter_isr(
        &self,
        tp: &TopicPartition,
        leader_epoch: i32,
        isr: Vec<i32>,
    ) -> BoxFuture<'_, bool> {
        let tp = tp.clone();
        Box::pin(async move {
            let image = self.image.current();
            let (Some(topic), Some(current)) =
                (image.topics.topic(&tp.topic), image.topics.state(&tp.topic, tp.partition))
            else {
                return false;
            };
            let s = &current.state;
            if s.leader != self.node_id || s.leader_epoch != leader_epoch {
                return false;
            }
            let state =
                PartitionStateValue { isr, partition_epoch: s.partition_epoch + 1, ..s.clone() };
            let key = self.keys.partition_state(&tp.topic, tp.partition);
            let txn = Txn {
                compares: vec![
                    Compare::ModRevision(key.clone(), current.mod_revision),
                    Compare::ModRevision(self.keys.topic(&tp.topic), topic.mod_revision),
                ],
                success: vec![Op::put(key, keys::to_json(&state))],
                failure: vec![],
            };
            match self.coordination.txn(txn).await {
                Ok(r) if r.succeeded => {
                    self.image.wait_for(r.revision).await;
                    true
                }
                Ok(_) => false,
                Err(e) => {
                    tracing::warn!(partition = %tp, "ISR change not written: {e}");
                    false
                }
            }
        })
    }

    fn is_eligible(&self, node: i32) -> bool {
        self.image.current().is_eligible(node)
    }
}

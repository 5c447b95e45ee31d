//! Producer id blocks shared by a cluster's brokers (docs/design/multi-broker.md,
//! 3.5): the key `latest_producer_id_block` names the last block handed
//! out, as ZooKeeper-mode Kafka's `/latest_producer_id_block` did; a broker
//! whose block ran out takes the next one itself with a compare-and-swap on
//! the key's mod revision, so InitProducerId never waits on the controller
//! and two brokers never hold overlapping blocks.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::coordination::{Compare, Coordination, KeyRange, Op, Txn};
use super::keys::{self, ClusterKeys};
use crate::log::error::{LogError, Result};
use crate::log::producer_id_manager::{ProducerIdBlocks, PRODUCER_ID_BLOCK_SIZE};

/// The key's value (Kafka's ZooKeeper format: inclusive bounds as strings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlockValue {
    pub version: i32,
    pub broker: i32,
    pub block_start: String,
    pub block_end: String,
}

/// [`ProducerIdBlocks`] over the cluster's key; called from a blocking
/// section (InitProducerId's), it waits on `runtime` for etcd.
#[derive(Debug)]
pub struct ClusterProducerIdBlocks {
    coordination: Arc<dyn Coordination>,
    keys: ClusterKeys,
    node_id: i32,
    runtime: tokio::runtime::Handle,
}

impl ClusterProducerIdBlocks {
    pub fn new(
        coordination: Arc<dyn Coordination>,
        keys: ClusterKeys,
        node_id: i32,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self { coordination, keys, node_id, runtime }
    }

    /// Reserve the block after the key's, starting at or past `at_least`.
    async fn reserve(&self, at_least: i64) -> Result<(i64, i64)> {
        let key = self.keys.latest_producer_id_block();
        // Another broker's CAS may win: read again and retry, a few times.
        for _ in 0..16 {
            let current = self.coordination.range(KeyRange::Key(key.clone()), 0, 0).await;
            let current = current.map_err(unavailable)?;
            let (next, compare) = match current.kvs.first() {
                None => (0, Compare::CreateRevision(key.clone(), 0)),
                Some(kv) => {
                    let v: ProducerIdBlockValue = keys::parse(&kv.value)
                        .ok_or_else(|| corrupt(&key, "does not parse".into()))?;
                    let end: i64 = v.block_end.parse().map_err(|_| corrupt(&key, v.block_end))?;
                    (end.saturating_add(1), Compare::ModRevision(key.clone(), kv.mod_revision))
                }
            };
            let start = next.max(at_least);
            let end = start
                .checked_add(PRODUCER_ID_BLOCK_SIZE)
                .ok_or_else(|| corrupt(&key, format!("no block fits after {start}")))?;
            let value = ProducerIdBlockValue {
                version: 1,
                broker: self.node_id,
                block_start: start.to_string(),
                block_end: (end - 1).to_string(),
            };
            let txn = Txn {
                compares: vec![compare],
                success: vec![Op::put(&key, keys::to_json(&value))],
                failure: vec![],
            };
            if self.coordination.txn(txn).await.map_err(unavailable)?.succeeded {
                tracing::info!(
                    node_id = self.node_id,
                    start,
                    end,
                    "producer id block reserved in the cluster"
                );
                return Ok((start, end));
            }
        }
        Err(unavailable("the producer id block key kept changing"))
    }
}

impl ProducerIdBlocks for ClusterProducerIdBlocks {
    fn next_block(&self, at_least: i64) -> Result<(i64, i64)> {
        crate::blocking::off_worker(|| self.runtime.block_on(self.reserve(at_least)))
    }
}

fn unavailable(e: impl std::fmt::Display) -> LogError {
    let source = std::io::Error::other(format!("etcd: {e}"));
    LogError::Io { path: "latest_producer_id_block".into(), source }
}

fn corrupt(key: &str, reason: String) -> LogError {
    LogError::Corrupt { path: key.into(), position: 0, reason }
}

//! How a coordinator's own appends (group records, in time transaction
//! state) become durable in a cluster: Kafka's coordinators write their
//! internal topics with `acks=all` at the leader epoch they loaded at, and
//! answer a request only once the partition's ISR holds its records.
//!
//! * [`CoordinatorReplication::check_leader`] before an append: the
//!   partition is led here, at the coordinator's epoch, while the session
//!   timer runs, with an ISR at its effective min ISR.
//! * [`CoordinatorReplication::await_committed`] after it: the followers'
//!   parked fetches are woken (they wait for appends like consumers do),
//!   the high watermark is raised if the ISR is this broker alone, and the
//!   caller waits until the high watermark reached the end, this broker
//!   stopped leading, or `timeout` passed. It blocks: it runs off the async
//!   workers, as the coordinators' appends do.
//!
//! The caller maps the outcomes to Kafka's coordinator codes:
//! NOT_LEADER_OR_FOLLOWER → NOT_COORDINATOR; NOT_ENOUGH_REPLICAS and
//! REQUEST_TIMED_OUT → COORDINATOR_NOT_AVAILABLE.

use std::sync::Arc;
use std::time::Duration;

use super::{ReplicaManager, Replicated};
use crate::log::TopicPartition;

/// Why a coordinator's write does not count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CoordinatorWriteError {
    #[error("this broker does not lead the partition at the coordinator's epoch")]
    NotLeader,
    #[error("the partition's ISR is below its min.insync.replicas")]
    NotEnoughReplicas,
    #[error("the partition's ISR did not take the write in time")]
    TimedOut,
}

/// See the module doc.
pub trait CoordinatorReplication: Send + Sync + std::fmt::Debug {
    /// # Errors
    /// `NotLeader` or `NotEnoughReplicas`.
    fn check_leader(&self, tp: &TopicPartition, epoch: i32) -> Result<(), CoordinatorWriteError>;

    /// # Errors
    /// `NotLeader` or `TimedOut`.
    fn await_committed(&self, tp: &TopicPartition, end: i64) -> Result<(), CoordinatorWriteError>;
}

/// The broker's [`CoordinatorReplication`], over its replica manager.
#[derive(Debug)]
pub struct ReplicatedCoordinatorWrites {
    replica: Arc<ReplicaManager>,
    /// `offsets.commit.timeout.ms` (Kafka's wait for the ISR).
    timeout: Duration,
    runtime: tokio::runtime::Handle,
}

impl ReplicatedCoordinatorWrites {
    pub fn new(
        replica: Arc<ReplicaManager>,
        timeout: Duration,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self { replica, timeout, runtime }
    }
}

impl CoordinatorReplication for ReplicatedCoordinatorWrites {
    fn check_leader(&self, tp: &TopicPartition, epoch: i32) -> Result<(), CoordinatorWriteError> {
        let led = self.replica.leadership().and_then(|l| l.led(tp));
        match led {
            Some(led) if led.leader_epoch != epoch => Err(CoordinatorWriteError::NotLeader),
            Some(led) if led.isr.len() < led.min_isr => {
                Err(CoordinatorWriteError::NotEnoughReplicas)
            }
            Some(_) => Ok(()),
            None => Err(CoordinatorWriteError::NotLeader),
        }
    }

    fn await_committed(&self, tp: &TopicPartition, end: i64) -> Result<(), CoordinatorWriteError> {
        let pending = [(tp.clone(), end)];
        let outcome = self.replica.await_appended(&pending, self.timeout, &self.runtime);
        match outcome.first() {
            Some(Replicated::Committed) => Ok(()),
            Some(Replicated::NotLeader) => Err(CoordinatorWriteError::NotLeader),
            _ => Err(CoordinatorWriteError::TimedOut),
        }
    }
}

//! The cluster's controller (docs/design/multi-broker.md, section 4): one
//! broker at a time, elected through etcd, is the only writer of topics,
//! partitions and their states.
//!
//! What is here so far: the election (`election`), which makes exactly one
//! live broker the controller, with an epoch every write of a later
//! controller will compare (`ActiveControllerCount` reads it); the
//! `reconciler`, which while this broker is the controller gives each
//! partition the state it is owed; `placement` of new replicas; and
//! `topics`, the topic changes any broker writes (topic and config keys),
//! whose partitions the reconciler then gives states.
//!
//! Invariant: a broker counts itself controller only while its controller
//! key exists on its own lease and its session's timer runs, so two brokers
//! never both act as controller past the timer's margin; and every state it
//! writes compares its epoch, so a deposed controller writes nothing. This layer imports
//! `cluster` and nothing of `replica` or `log`.

pub mod election;
pub mod elections;

pub use election::ControllerElection;
pub mod placement;
pub mod reassignments;
pub mod reconciler;
pub mod replication_control;
#[cfg(test)]
mod test_cluster;
pub mod topics;

pub use replication_control::ReplicationControl;
pub use topics::{ClusterTopics, NewTopic, TopicChangeError};

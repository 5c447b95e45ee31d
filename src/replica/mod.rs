//! The replica manager: the one layer through which Produce and Fetch reach
//! the partitions' logs (Kafka's `ReplicaManager`). Replication extends this
//! layer (the high watermark, the ISR, replica fetches, a delayed produce
//! for `acks=all`); the handlers in `api` only turn requests into its calls
//! and its results into responses.
//!
//! What it owns:
//! * **Appending** ([`ReplicaManager::append_records`]): each partition's
//!   batches appended as its leader, a transactional batch first verified by
//!   the caller's check (the transaction coordinator, which `replica` does
//!   not import) under a verification guard taken from the log, so a
//!   transaction that ended while the coordinator was asked cannot be
//!   reopened by the batch. On a single node every [`Acks`] level is met by
//!   the local append (fsynced when `log.flush.before.ack` is set); in a
//!   cluster `acks=all` waits until the high watermark passes the records
//!   ([`ReplicaManager::wait_for_replication`], parked like a fetch) and is
//!   refused NOT_ENOUGH_REPLICAS with an ISR below the effective min ISR.
//! * **The high watermark** in a cluster: a leader raises it to the least
//!   log end over its ISR as follower fetches report them
//!   ([`ReplicaManager::record_follower_fetch`]), never while the ISR is
//!   below the min ISR; a follower takes its leader's.
//! * **Delayed fetches** ([`delayed_fetch`], Kafka's purgatory keyed by
//!   partition): a long-polling fetch parks on the partitions it reads
//!   ([`ReplicaManager::watch_partitions`]) and is woken only by an append
//!   or a marker on one of them ([`ReplicaManager::append_records`] and the
//!   markers' hook),
//!   or by a deletion or shutdown, which wake all.
//! * **Fetch sessions** (KIP-227, [`fetch_session`]), which outlive
//!   connections and so are the broker's state, not a handler's.
//! * **The store's reader** for tiered partitions read below their local log.
//! * **Leadership** in a cluster ([`leadership`]): which partitions this
//!   broker may serve as leader; the others answer NOT_LEADER_OR_FOLLOWER.
//! * **Coordinators' writes** in a cluster ([`coordinator_writes`]): an
//!   internal topic's append counts once its ISR holds it.
//! * **Followers' fetching** ([`fetcher`], measured in [`fetcher_stats`]) and the leader's ISR changes
//!   ([`isr_manager`]), with replication's keys ([`config`]).
//! * **Replication throttles** ([`replication_quota`], KIP-73): the
//!   leader's, applied to replica fetches it answers, and the followers'.
//!
//! Invariants: nothing here knows Kafka error codes (`api` maps
//! [`AppendError`]); no log lock is held while a transaction is verified
//! (lock order: coordinator before log); an append that may fsync runs where
//! the async runtime can move its worker's other tasks away first.

pub mod config;
pub mod coordinator_writes;
pub mod delayed_fetch;
pub mod fetch_session;
pub mod fetcher;
pub mod fetcher_stats;
pub mod isr_manager;
pub mod leadership;
mod replica_manager;
pub mod replica_selector;
pub mod replication_quota;

pub use leadership::{Leadership, LeadershipView, Leading};
pub use replica_manager::{Acks, AppendError, ReplicaManager, Replicated, Verify};

//! A cluster of brokers coordinated by etcd (docs/design/multi-broker.md):
//! the coordination layer against a real etcd and its in-memory stand-in.
//!
//! One test binary for the area (`cargo test --test cluster`), one module per
//! scenario; the harness is shared by every binary (`tests/broker`, `tests/common`).

#[path = "../broker/mod.rs"]
mod broker;
#[path = "../common/mod.rs"]
mod common;

mod alter_partition;
mod brokers;
mod coordination;
mod coordinators;
mod election;
mod elections;
mod exactly_once;
mod failover;
mod fetch_from_follower;
mod image;
mod inter_broker_security;
mod reassignments;
mod replication;
mod replication_throttle;
mod resurrection_guard;
mod security;
mod support;
mod topics;
mod transactions;

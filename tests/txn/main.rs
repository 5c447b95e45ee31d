//! Transactions: the coordinator on the wire, crashes and restarts, readers, Kafka's schemas, Streams EOS.
//!
//! One test binary for the area (`cargo test --test txn`), one module per
//! scenario; the harness is shared by every binary (`tests/broker`, `tests/common`).

#[path = "../broker/mod.rs"]
mod broker;
#[path = "../common/mod.rs"]
mod common;

mod streams_eos;
mod txn_admin;
mod txn_confluent;
mod txn_crash;
mod txn_java;
mod txn_kill_restart;
mod txn_log;
mod txn_observability;
mod txn_readers;
mod txn_recovery;
mod txn_state_dump_log;
mod txn_state_from_kafka;
mod txn_state_kafka_schema;
mod txn_v2;
mod txn_wire;

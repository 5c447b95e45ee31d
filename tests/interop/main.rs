//! Clients on the wire: Java, kcat, Python, fetch sessions, hostile frames, Kafka 4.1.2 conformance.
//!
//! One test binary for the area (`cargo test --test interop`), one module per
//! scenario; the harness is shared by every binary (`tests/broker`, `tests/common`).

#[path = "../broker/mod.rs"]
mod broker;
#[path = "../common/mod.rs"]
mod common;

mod conformance_api_versions;
mod conformance_describe_topic_partitions;
mod conformance_leader_epochs;
mod conformance_partition_limits;
mod conformance_unknown_topic;
mod connection_limits;
mod fetch_sessions_java;
mod hostile_frames;
mod interop_java;
mod interop_kcat;
mod interop_python;
mod server_protocol;
mod slow_disk;

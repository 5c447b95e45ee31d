//! Consumer groups: the classic and consumer protocols, committed offsets, Java and Python clients.
//!
//! One test binary for the area (`cargo test --test groups`), one module per
//! scenario; the harness is shared by every binary (`tests/broker`, `tests/common`).

#[path = "../broker/mod.rs"]
mod broker;
#[path = "../common/mod.rs"]
mod common;

mod conformance_long_strings;
mod consumer_group_wire;
mod consumer_groups_java;
mod consumer_protocol_eos;
mod consumer_protocol_java;
mod group_configs;
mod group_coordinator;
mod group_migration_java;
mod interop_python_groups;

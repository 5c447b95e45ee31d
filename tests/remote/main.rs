//! Tiered storage: uploads, remote reads, retention, faults, compaction in the store.
//!
//! One test binary for the area (`cargo test --test remote`), one module per
//! scenario; the harness is shared by every binary (`tests/broker`, `tests/common`).

#[path = "../broker/mod.rs"]
mod broker;
#[path = "../common/mod.rs"]
mod common;

mod cleaner_store_segments;
mod remote_compacted_read;
mod remote_expiry;
mod remote_faults;
mod remote_fetch;
mod remote_multipart;
mod remote_retention;
mod remote_storage;
mod remote_store_compaction;
mod remote_store_strategy;

//! The log layer: the segment format, recovery, producer state, compression, dump-log.
//!
//! One test binary for the area (`cargo test --test log`), one module per
//! scenario; the harness is shared by every binary (`tests/broker`, `tests/common`).

#[path = "../broker/mod.rs"]
mod broker;
#[path = "../common/mod.rs"]
mod common;

mod compression_type;
mod deferred_flush;
mod follower_append;
mod kafka_dump_log_format;
mod log_dir_failure;
mod log_model;
mod log_recovery;
mod log_truncation;
mod producer_snapshots;
mod topic_creation;

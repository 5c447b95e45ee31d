//! The log cleaner: compaction end to end, crashes, load, the key audit and the resurrection guard.
//!
//! One test binary for the area (`cargo test --test cleaner`), one module per
//! scenario; the harness is shared by every binary (`tests/broker`, `tests/common`).

#[path = "../broker/mod.rs"]
mod broker;
#[path = "../common/mod.rs"]
mod common;

mod cleaner_buffers;
mod cleaner_capacity;
mod cleaner_crash;
mod cleaner_dump_log;
mod cleaner_end_to_end;
mod cleaner_garbage_threshold;
mod cleaner_kill_restart;
mod cleaner_load;
mod cleaner_model;
mod cleaner_prometheus;
mod cleaner_seeds;
mod cleaner_strategy_e2e;
mod cleaner_strategy_model;
mod cleaner_tombstone_guard;
mod cleaner_txn;
mod cleaner_uncleanable;
mod cleaner_untouched;
mod garbage_threshold_e2e;
mod key_audit;
mod offsets_topic_compaction;
mod resurrection_guard;

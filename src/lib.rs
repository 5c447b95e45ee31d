//! sediment: a Kafka-compatible broker built around log compaction.
//!
//! Layers, top to bottom; a module imports only from layers below it:
//!
//! ```text
//! main → broker → server → api → (group, txn, security, metrics) → cleaner → log → clock
//! ```
//!
//! * `broker`: the composition root; builds the managers, starts and joins
//!   their threads, and owns the start and shutdown order.
//! * `server`: the TCP edge (framing, dispatch, draining on shutdown).
//! * `api`: one handler per Kafka API, and the only place Kafka error codes
//!   are chosen.
//! * `group`: the consumer group coordinator over `__consumer_offsets`.
//! * `txn`: the transaction coordinator over `__transaction_state`.
//! * `security`: who a connection is (session, principal) and the TLS
//!   configuration of SSL listeners.
//! * `metrics`: Prometheus metrics and the cleaner status over HTTP.
//! * `cleaner`: compaction of the logs.
//! * `log`: partitions in Kafka's on-disk format, and the broker's other
//!   small files (checkpoints, `meta.properties`, the producer id block).
//! * `clock`: injected time.
//!
//! Nothing refers upward: `api::KafkaApis` (identity, config, managers) is
//! what requests run against, built by `broker` and handed to `server`;
//! traits declared below (`cleaner::collaborators`,
//! `log::manager::CleaningControl`) are implemented above and passed down
//! at construction.
//!
//! Beside the layers: `blocking` lets an async worker wait on a lock or a
//! disk without stalling its other tasks (used by `replica`, `group`, `api`);
//! `config_def` is what a config key is, below every
//! module, each of which declares its own keys and builds its settings from
//! them; `config` merges those tables and reads the broker's TOML; `tools` holds the
//! operator commands built on the log; `readable` reads the coordinators'
//! record schemas and `writable` writes them (used by `group` and `txn`).

#![warn(clippy::too_many_lines)]

pub mod api;
pub mod blocking;
pub mod broker;
pub mod cleaner;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod config_def;
pub mod controller;
pub mod failpoint;
pub mod group;
pub mod log;
pub mod metrics;
pub mod readable;
pub mod remote;
pub mod replica;
pub mod security;
pub mod server;
pub mod tools;
pub mod txn;
pub mod writable;

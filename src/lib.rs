//! sediment: a Kafka-compatible broker built around log compaction.
//!
//! Layers (see the repository's DESIGN notes): `log` stores partitions in
//! Kafka's on-disk format; `cleaner` compacts them; `api` answers Kafka requests against it; `server`
//! is the TCP edge (framing, dispatch, shutdown); `config` reads the broker's
//! TOML; `metrics` serves Prometheus metrics and the cleaner status over
//! HTTP; `tools` holds the operator commands built on the log.

pub mod api;
pub mod cleaner;
pub mod clock;
pub mod config;
pub mod group;
pub mod log;
pub mod metrics;
pub mod server;
pub mod tools;

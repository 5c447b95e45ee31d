//! sediment: a Kafka-compatible broker built around log compaction.
//!
//! Layers (see the repository's DESIGN notes): `log` stores partitions in
//! Kafka's on-disk format; `tools` holds the operator commands built on it.

pub mod cleaner;
pub mod clock;
pub mod log;
pub mod tools;

//! A cluster's coordination, kept in etcd (docs/design/multi-broker.md,
//! section 3): the small consistent state Kafka kept in ZooKeeper, which
//! every broker reads and the brokers change by compare-and-swap.
//!
//! What is here so far (milestone 2 of the design's build order):
//! * `coordination`: the narrow trait over etcd's v3 API the cluster uses
//!   (ranges at a revision, transactions, leases, watches), in this
//!   crate's own types;
//! * `etcd`: that trait over a real etcd, the only importer of the
//!   `etcd-client` crate;
//! * `memory`: the same semantics in memory, for tests;
//! * `keys`: the key paths and their JSON values;
//! * `session`: a broker's lease and the timer that says whether it may
//!   lead;
//! * `registration`: the cluster id and a broker's registration on its
//!   lease (its broker epoch);
//! * `producer_ids`: blocks of producer ids the brokers take by CAS;
//! * `channel`: a blocking connection to another broker's listener, whose
//!   answers are bounded before they are read (the replica fetchers');
//! * `peers`: the connections a broker keeps to the others for its own
//!   calls (transaction markers, produce verification);
//! * `image`: the namespace at one revision, kept current by a watch, as
//!   every broker serves the cluster from it; `topics_image` its topics;
//! * `security_store`: the ACL and SCRAM credential keys, written by CAS.
//!
//! Invariants every user of `Coordination` may rely on, whichever the
//! implementation: a transaction is all or nothing and gets one revision;
//! a watch delivers whole revisions in order from the one asked for, or
//! says the history is compacted; a lease's keys go together in one
//! revision when it ends. Nothing here writes a partition's log: this
//! layer sits below `replica` and above `remote` and `log`, and is async
//! only at its edge.

pub mod channel;
pub mod channel_security;
pub mod config;
pub mod coordination;
pub mod etcd;
pub mod image;
pub mod keys;
pub mod memory;
pub mod peers;
pub mod producer_ids;
pub mod registration;
pub mod security_store;
pub mod session;
pub mod topics_image;

pub use config::ClusterConfig;
pub use coordination::{Coordination, CoordinationError};
pub use etcd::{EtcdCoordination, EtcdSettings, EtcdTls};
pub use memory::MemCoordination;

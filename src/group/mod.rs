//! The consumer-group coordinator for Kafka's classic group protocol, with
//! committed offsets and group metadata kept in the compacted internal topic
//! `__consumer_offsets` (Kafka's record schemas, see `schema`).
//!
//! # Group states (Kafka's `GroupState`)
//!
//! ```text
//!            join (new member)                all members joined, or the
//!   Empty ─────────────────────▶ Preparing ── rebalance timeout passed ──▶ Completing
//!     ▲                          Rebalance  ◀── join / leave / expiry ──── Rebalance
//!     │ last member gone             ▲                                        │ leader's
//!     │ (join completes empty)       │ join (leader or new protocols),        │ SyncGroup
//!     └──────────────────────────────┤ leave, session expiry                  ▼
//!                                    └─────────────────────────────────── Stable
//! Dead: deleted (DeleteGroups, or an empty group whose offsets all expired).
//! ```
//!
//! No other transition happens: one the diagram does not draw is refused
//! with an error and never applied (`group_metadata` has the table).
//!
//! * Generations only grow; every completed join round bumps the generation.
//! * Offsets are written to the log before they are acknowledged and applied
//!   to the cache only after the append succeeded; deleting offsets or a group
//!   writes tombstones, so the cleaner eventually removes them.
//! * At start the state is rebuilt by reading the offsets topic from its log
//!   start (later records win, tombstones delete); until then group requests
//!   get COORDINATOR_LOAD_IN_PROGRESS. The coordinator is the only writer, so
//!   afterwards the cache follows the log by construction. Nothing unreadable
//!   is skipped in silence.
//! * Nothing here holds a lock across an await: the state is a std mutex,
//!   waiting members hold oneshot receivers.
//!
//! # Files (Kafka's names), one concept each
//!
//! The coordinator follows Kafka's split: a shard holding the groups and the
//! operations on them, a runtime serialising access to it and writing its
//! records, and a loader rebuilding it. No file imports one that imports it.
//!
//! * `coordinator`: [`GroupCoordinator`] itself (the shard's facade), the
//!   load and the periodic tick. `config`: [`GroupConfig`], its keys.
//!   `group_config_manager`: each group's own configs (`kafka-configs
//!   --entity-type groups`).
//! * `runtime`: `CoordinatorRuntime`, the groups in one shard per
//!   `__consumer_offsets` partition, each behind its own lock, and the
//!   appends to that topic (creating it first).
//! * `loader`: rebuilding the groups from `__consumer_offsets` at start.
//! * The shard's operations, one `impl GroupCoordinator` per file:
//!   `membership` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, session
//!   expiry and the join round; Kafka's classic half of
//!   `GroupMetadataManager`), `offsets` (OffsetCommit, OffsetFetch,
//!   OffsetDelete, offset expiry; Kafka's `OffsetMetadataManager`),
//!   `txn_offsets` (TxnOffsetCommit, completed by the transaction's marker),
//!   `group_admin` (ListGroups, DescribeGroups, DeleteGroups), and, for the
//!   KIP-848 groups below, `consumer_group_heartbeat` and
//!   `consumer_group_admin`. `committed_offsets` gives the cleaner its view.
//! * The state: `group_metadata` (one group and its members, `GroupMetadata`,
//!   `MemberMetadata`, with its offsets), `group_state` (the [`GroupState`]
//!   machine), `offset_and_metadata` ([`CommittedOffset`]), and
//!   `classic_protocol` (JoinGroup's and SyncGroup's requests and answers).
//! * `schema`: the record formats. `error`: [`GroupError`] and the schema's
//!   error.
//!
//! # Consumer groups (KIP-848)
//!
//! A group is of one kind at a time: a classic group (the diagram above) or
//! a consumer group of the KIP-848 protocol, whose state is
//! `Group::consumer` (the classic side then stays Empty, and classic members
//! live in the consumer group). The kind changes online (`group_migration`). Both kinds share
//! the offsets, the `__consumer_offsets` partition and the load. A consumer
//! group's members heartbeat with a member epoch; the broker computes the
//! target assignment (`assignor`) and moves each member toward it
//! (`current_assignment_builder`), never giving a partition to a member
//! before its previous owner revoked it. Every change is written (Kafka's
//! ConsumerGroup* records) before the heartbeat is answered.
//!
//! * `consumer_group`: `ConsumerGroup`, `ConsumerGroupMember`, the derived
//!   [`ConsumerGroupState`].
//! * `consumer_group_heartbeat`: ConsumerGroupHeartbeat, leaving, fencing.
//! * `consumer_group_admin`: ConsumerGroupDescribe and the classic APIs'
//!   checks on consumer groups (offset commits and fetches, JoinGroup with
//!   `group.consumer.migration.policy=disabled`).
//! * `consumer_group_classic`: members of a consumer group that speak the
//!   classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).
//! * `group_migration`: a classic group upgraded to a consumer group by a
//!   consumer-protocol join, and downgraded back when the last
//!   consumer-protocol member leaves. `consumer_protocol`: the subscription
//!   and assignment bytes the classic protocol carries.
//! * `current_assignment_builder`: the member state machine.
//! * `consumer_group_records`: the records' schemas. `assignor`: `uniform`
//!   and `range`.

pub mod assignor;
pub mod config;
pub mod consumer_group_records;
pub mod group_config_manager;
pub mod schema;

mod classic_protocol;
mod committed_offsets;
mod consumer_group;
mod consumer_group_admin;
mod consumer_group_classic;
mod consumer_group_heartbeat;
mod consumer_protocol;
mod coordinator;
mod current_assignment_builder;
mod error;
mod group_admin;
mod group_metadata;
mod group_migration;
mod group_state;
mod loader;
mod membership;
mod offset_and_metadata;
mod offsets;
mod runtime;
mod topic_catalog;
mod txn_offsets;

pub use classic_protocol::{JoinRequest, JoinResult, Reply, SyncResult};
pub use config::GroupConfig;
pub use consumer_group::ConsumerGroupState;
pub use consumer_group_admin::{ConsumerGroupDescription, ConsumerMemberDescription};
pub use consumer_group_heartbeat::{ConsumerHeartbeat, ConsumerHeartbeatResult};
pub use coordinator::{spawn_ticker, GroupCoordinator};
pub use error::GroupError;
pub use group_admin::{GroupDescription, ListedGroup};
pub use group_state::{GroupState, GroupStateError};
pub use loader::LoadStats;
pub use offset_and_metadata::CommittedOffset;
pub use runtime::OFFSETS_TOPIC;
pub use topic_catalog::TopicCatalog;
pub use txn_offsets::TxnProducer;

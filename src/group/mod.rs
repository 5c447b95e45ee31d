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
//! # Files (Kafka's names)
//!
//! * `coordinator`: [`GroupCoordinator`] itself, its config, the periodic
//!   tick, the request and result types of the protocol, ListGroups,
//!   DescribeGroups and DeleteGroups.
//! * `group_metadata`: one group and its members (`GroupMetadata`,
//!   `MemberMetadata`) and the [`GroupState`] machine.
//! * `membership`: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, session
//!   expiry and the join round (rebalance completion).
//! * `offsets`: OffsetCommit, OffsetFetch, OffsetDelete, offset expiry.
//! * `txn_offsets`: TxnOffsetCommit and its pending offsets, completed by the
//!   transaction's marker on the group's offsets partition.
//! * `metadata_manager`: `__consumer_offsets` itself (`GroupMetadataManager`):
//!   creating it, appending to it, loading from it.
//! * `schema`: its record formats. `error`: [`GroupError`].
//!
//! # Consumer groups (KIP-848)
//!
//! A group is of one kind at a time: a classic group (the diagram above) or
//! a consumer group of the KIP-848 protocol, whose state is
//! `Group::consumer` (the classic side then stays Empty). Both kinds share
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
//!   checks on consumer groups (`group.consumer.migration.policy=disabled`).
//! * `current_assignment_builder`: the member state machine.
//! * `consumer_group_records`: the records' schemas. `assignor`: `uniform`
//!   and `range`.

pub mod assignor;
pub mod config;
pub mod consumer_group_records;
pub mod schema;

mod committed_offsets;
mod consumer_group;
mod consumer_group_admin;
mod consumer_group_heartbeat;
#[cfg(test)]
mod consumer_group_tests;
mod coordinator;
mod current_assignment_builder;
mod error;
mod group_metadata;
mod membership;
mod metadata_manager;
mod offsets;
mod txn_offsets;

pub use config::GroupConfig;
pub use consumer_group::ConsumerGroupState;
pub use consumer_group_admin::{ConsumerGroupDescription, ConsumerMemberDescription};
pub use consumer_group_heartbeat::{ConsumerHeartbeat, ConsumerHeartbeatResult};
pub use coordinator::{
    spawn_ticker, GroupCoordinator, GroupDescription, JoinRequest, JoinResult, ListedGroup, Reply,
    SyncResult,
};
pub use error::GroupError;
pub use group_metadata::{GroupState, GroupStateError};
pub use metadata_manager::{LoadStats, OFFSETS_TOPIC};
pub use offsets::CommittedOffset;
pub use txn_offsets::TxnProducer;

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
//! * Generations only grow; a join round that completes bumps the generation,
//!   picks the protocol every member supports by vote, keeps the leader if it
//!   rejoined (else the first member), answers every waiting JoinGroup (the
//!   leader gets the member list) and moves to CompletingRebalance.
//! * A round completes when every member has rejoined, or at the largest
//!   rebalance timeout, when members that did not rejoin are removed. A round
//!   starting from Empty waits `group.initial.rebalance.delay.ms` after the
//!   last join first, so a starting fleet lands in one generation.
//! * Members awaiting a join or sync response are alive; others expire
//!   `session.timeout.ms` after their last heartbeat.
//! * Static members (`group.instance.id`) keep their identity across restarts:
//!   a rejoin with an unknown member id replaces the old member id; in a stable
//!   group with unchanged protocols this needs no rebalance.
//! * Offsets are written to the log before they are acknowledged and applied
//!   to the cache only after the append succeeded; deleting offsets or a group
//!   writes tombstones, so the cleaner eventually removes them.
//! * At start the state is rebuilt by reading the offsets topic from its log
//!   start (later records win, tombstones delete); until then group requests
//!   get COORDINATOR_LOAD_IN_PROGRESS. The coordinator is the only writer, so
//!   afterwards the cache follows the log by construction.
//! * Nothing here holds a lock across an await: the state is a std mutex,
//!   waiting members hold oneshot receivers.

pub mod schema;

mod coordinator;

pub use coordinator::*;

//! The classic group's state machine (Kafka's `GroupState`) and the error
//! of a refused transition.
//!
//! # Transitions (Kafka's valid previous states)
//!
//! | to                  | allowed from                                    |
//! |---------------------|-------------------------------------------------|
//! | Empty               | PreparingRebalance                              |
//! | PreparingRebalance  | Empty, Stable, CompletingRebalance              |
//! | CompletingRebalance | PreparingRebalance                              |
//! | Stable              | CompletingRebalance                             |
//! | Dead                | any state, Dead included                        |
//!
//! `Group::transition` refuses anything else with a [`GroupStateError`]
//! and leaves the group as it was: an illegal transition is a coordinator bug,
//! and applying it would corrupt membership silently. The only other way the
//! state is set is `Group::restore`, when the loader rebuilds a group from
//! `__consumer_offsets` (Empty without members, else Stable, as Kafka loads).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name DescribeGroups and ListGroups report.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Whether a group in `self` may move to `to` (the table in the module doc).
    pub fn can_transition_to(self, to: GroupState) -> bool {
        use GroupState::*;
        match to {
            Empty => self == PreparingRebalance,
            PreparingRebalance => matches!(self, Empty | Stable | CompletingRebalance),
            CompletingRebalance => self == PreparingRebalance,
            Stable => self == CompletingRebalance,
            Dead => true,
        }
    }
}

impl std::fmt::Display for GroupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A refused [`GroupState`] transition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("group {group}: illegal state transition {from} -> {to}")]
pub struct GroupStateError {
    pub group: String,
    pub from: GroupState,
    pub to: GroupState,
}

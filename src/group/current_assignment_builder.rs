//! `CurrentAssignmentBuilder`: moves one consumer group member from its
//! current assignment toward its target assignment, the member state machine
//! of KIP-848.
//!
//! # Member states (Kafka's `MemberState`, its byte in the records)
//!
//! ```text
//!  Stable (0) ── target epoch moved ──▶ compute next:
//!       ▲                                 partitions to revoke?  ──▶ UnrevokedPartitions (1)
//!       │                                 partitions held by others ─▶ UnreleasedPartitions (2)
//!       └──────────────────────────────── otherwise ──────────────────▶ Stable, at the target epoch
//!  UnrevokedPartitions: stays until the member's heartbeat no longer lists
//!       a partition pending revocation, then computes next (epoch + 1).
//!  UnreleasedPartitions: computes next on every heartbeat.
//! ```
//!
//! Invariants:
//! * A member is never given a partition another member still holds
//!   (assigned or pending revocation): it waits in UnreleasedPartitions.
//! * A member that must revoke partitions gets nothing new and keeps its
//!   epoch until it has acknowledged the revocation (a heartbeat whose owned
//!   partitions no longer include them). A heartbeat that does not list
//!   its owned partitions (`None`) acknowledges nothing.
//! * The member epoch only grows, and reaches the target epoch once nothing
//!   is pending revocation.

use super::consumer_group_records::{Assignment, TopicId};

/// Kafka's `MemberState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
    Unknown,
}

impl MemberState {
    pub fn value(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    pub fn from_value(v: i8) -> Self {
        match v {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }
}

/// The reconciliation part of a member: what `CurrentAssignmentBuilder` reads
/// and produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberAssignment {
    pub state: MemberState,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

impl MemberAssignment {
    fn with_epoch(&self, epoch: i32) -> (i32, i32) {
        if epoch == self.member_epoch {
            (self.member_epoch, self.previous_member_epoch)
        } else {
            (epoch, self.member_epoch)
        }
    }
}

/// Kafka's `CurrentAssignmentBuilder` for one member.
pub struct CurrentAssignmentBuilder<'a> {
    pub member: &'a MemberAssignment,
    pub target_epoch: i32,
    pub target: &'a Assignment,
    /// The partitions the member says it owns (`None`: not sent).
    pub owned: Option<&'a Assignment>,
    /// Whether another member holds the partition (assigned or revoking).
    pub held_by_other: &'a dyn Fn(&TopicId, i32) -> bool,
}

impl CurrentAssignmentBuilder<'_> {
    /// The member's next state.
    ///
    /// # Errors
    /// `Fenced` for a member in an unknown state that still owns partitions:
    /// it must give them up and rejoin.
    pub fn build(&self) -> Result<MemberAssignment, Fenced> {
        let m = self.member;
        Ok(match m.state {
            MemberState::Stable if m.member_epoch == self.target_epoch => m.clone(),
            MemberState::Stable => self.next(m.member_epoch, &m.assigned),
            MemberState::UnrevokedPartitions if self.owns_any(&m.pending_revocation) => m.clone(),
            MemberState::UnrevokedPartitions => self.next(m.member_epoch + 1, &m.assigned),
            MemberState::UnreleasedPartitions => self.next(m.member_epoch, &m.assigned),
            MemberState::Unknown => {
                if self.owned.is_none_or(|o| o.values().any(|p| !p.is_empty())) {
                    return Err(Fenced);
                }
                self.next(self.target_epoch, &m.assigned)
            }
        })
    }

    fn owns_any(&self, partitions: &Assignment) -> bool {
        let Some(owned) = self.owned else { return true };
        owned.iter().any(|(t, ps)| {
            partitions.get(t).is_some_and(|pending| ps.iter().any(|p| pending.contains(p)))
        })
    }

    fn next(&self, epoch: i32, current: &Assignment) -> MemberAssignment {
        let mut unreleased = false;
        let mut assigned = Assignment::new();
        let mut revoking = Assignment::new();
        let mut adding = Assignment::new();
        let topics: std::collections::BTreeSet<&TopicId> =
            self.target.keys().chain(current.keys()).collect();
        for t in topics {
            let empty = Default::default();
            let target = self.target.get(t).unwrap_or(&empty);
            let now = current.get(t).unwrap_or(&empty);
            let kept: std::collections::BTreeSet<i32> = now.intersection(target).copied().collect();
            let revoke: std::collections::BTreeSet<i32> = now.difference(&kept).copied().collect();
            let mut add: std::collections::BTreeSet<i32> =
                target.difference(&kept).copied().collect();
            let before = add.len();
            add.retain(|p| !(self.held_by_other)(t, *p));
            unreleased |= add.len() != before;
            for (map, set) in [(&mut assigned, kept), (&mut revoking, revoke), (&mut adding, add)] {
                if !set.is_empty() {
                    map.insert(*t, set);
                }
            }
        }
        let member = self.member;
        if !revoking.is_empty() && self.owns_any(&revoking) {
            let (member_epoch, previous_member_epoch) = member.with_epoch(epoch);
            return MemberAssignment {
                state: MemberState::UnrevokedPartitions,
                member_epoch,
                previous_member_epoch,
                assigned,
                pending_revocation: revoking,
            };
        }
        for (t, ps) in adding {
            assigned.entry(t).or_default().extend(ps);
        }
        let (member_epoch, previous_member_epoch) = member.with_epoch(self.target_epoch);
        MemberAssignment {
            state: if unreleased { MemberState::UnreleasedPartitions } else { MemberState::Stable },
            member_epoch,
            previous_member_epoch,
            assigned,
            pending_revocation: Assignment::new(),
        }
    }
}

/// The member must abandon its partitions and rejoin (FENCED_MEMBER_EPOCH).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenced;

#[cfg(test)]
mod tests {
    use super::*;

    const T: TopicId = [1; 16];

    fn a(ps: &[i32]) -> Assignment {
        if ps.is_empty() {
            return Assignment::new();
        }
        [(T, ps.iter().copied().collect())].into()
    }

    fn member(
        state: MemberState,
        epoch: i32,
        assigned: &[i32],
        revoking: &[i32],
    ) -> MemberAssignment {
        MemberAssignment {
            state,
            member_epoch: epoch,
            previous_member_epoch: epoch - 1,
            assigned: a(assigned),
            pending_revocation: a(revoking),
        }
    }

    fn build(
        m: &MemberAssignment,
        target_epoch: i32,
        target: &[i32],
        owned: Option<&[i32]>,
        held: &[i32],
    ) -> MemberAssignment {
        let target = a(target);
        let owned = owned.map(a);
        let held = |_: &TopicId, p: i32| held.contains(&p);
        CurrentAssignmentBuilder {
            member: m,
            target_epoch,
            target: &target,
            owned: owned.as_ref(),
            held_by_other: &held,
        }
        .build()
        .expect("not fenced")
    }

    #[test]
    fn a_stable_member_at_the_target_epoch_is_unchanged() {
        let m = member(MemberState::Stable, 5, &[0, 1], &[]);
        assert_eq!(build(&m, 5, &[0, 1, 2], Some(&[0, 1]), &[]), m);
    }

    #[test]
    fn free_partitions_are_assigned_at_the_target_epoch() {
        let m = member(MemberState::Stable, 5, &[0, 1], &[]);
        let next = build(&m, 6, &[0, 1, 2], Some(&[0, 1]), &[]);
        assert_eq!(next.state, MemberState::Stable);
        assert_eq!((next.member_epoch, next.previous_member_epoch), (6, 5));
        assert_eq!(next.assigned, a(&[0, 1, 2]));
    }

    #[test]
    fn revocation_comes_first_and_keeps_the_epoch_until_acknowledged() {
        let m = member(MemberState::Stable, 5, &[0, 1, 2], &[]);
        // Target: give up 2, gain 3 (free).
        let revoking = build(&m, 6, &[0, 1, 3], Some(&[0, 1, 2]), &[]);
        assert_eq!(revoking.state, MemberState::UnrevokedPartitions);
        assert_eq!(revoking.member_epoch, 5);
        assert_eq!(revoking.assigned, a(&[0, 1]), "nothing new before the revocation");
        assert_eq!(revoking.pending_revocation, a(&[2]));
        // Still owning 2: nothing moves.
        assert_eq!(build(&revoking, 6, &[0, 1, 3], Some(&[0, 1, 2]), &[]), revoking);
        // Revoked: 3 arrives, at the target epoch.
        let done = build(&revoking, 6, &[0, 1, 3], Some(&[0, 1]), &[]);
        assert_eq!(done.state, MemberState::Stable);
        assert_eq!(done.member_epoch, 6);
        assert_eq!(done.assigned, a(&[0, 1, 3]));
        assert!(done.pending_revocation.is_empty());
    }

    #[test]
    fn a_partition_another_member_holds_waits_until_released() {
        let m = member(MemberState::Stable, 5, &[0], &[]);
        let waiting = build(&m, 6, &[0, 1], Some(&[0]), &[1]);
        assert_eq!(waiting.state, MemberState::UnreleasedPartitions);
        assert_eq!(waiting.member_epoch, 6);
        assert_eq!(waiting.assigned, a(&[0]));
        let released = build(&waiting, 6, &[0, 1], Some(&[0]), &[]);
        assert_eq!(released.state, MemberState::Stable);
        assert_eq!(released.assigned, a(&[0, 1]));
    }

    #[test]
    fn an_unknown_member_owning_partitions_is_fenced() {
        let m = member(MemberState::Unknown, 5, &[0], &[]);
        let t = a(&[0]);
        let owned = a(&[0]);
        let held = |_: &TopicId, _: i32| false;
        let b = CurrentAssignmentBuilder {
            member: &m,
            target_epoch: 6,
            target: &t,
            owned: Some(&owned),
            held_by_other: &held,
        };
        assert_eq!(b.build(), Err(Fenced));
    }

    #[test]
    fn state_bytes_match_kafka() {
        for s in [
            MemberState::Stable,
            MemberState::UnrevokedPartitions,
            MemberState::UnreleasedPartitions,
            MemberState::Unknown,
        ] {
            assert_eq!(MemberState::from_value(s.value()), s);
        }
        assert_eq!(MemberState::UnreleasedPartitions.value(), 2);
    }
}

//! `UniformAssignor`: balanced and sticky (see the module doc of `assignor`).
//!
//! 1. Every partition keeps its current owner when that member still
//!    subscribes to the topic (and no other member claimed it first).
//! 2. Partitions without an owner go, in topic and partition order, to the
//!    least loaded subscribed member (ties: the smaller member id).
//! 3. While some member holds two partitions more than a member that could
//!    take one of them, the most loaded member gives its last such partition
//!    to the least loaded eligible member. Each move lowers the sum of squared
//!    counts, so this ends; it moves only what balance needs.

use std::collections::BTreeMap;

use super::{empty_assignment, MemberSubscription, PartitionAssignor};
use crate::group::consumer_group_records::{Assignment, TopicId};

#[derive(Debug, Clone, Copy)]
pub struct UniformAssignor;

impl PartitionAssignor for UniformAssignor {
    fn name(&self) -> &'static str {
        "uniform"
    }

    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<TopicId, i32>,
    ) -> BTreeMap<String, Assignment> {
        let mut owner: BTreeMap<(TopicId, i32), usize> = BTreeMap::new();
        for (i, m) in members.iter().enumerate() {
            for (t, ps) in &m.current {
                let Some(n) = partitions.get(t) else { continue };
                if !m.topics.contains(t) {
                    continue;
                }
                for p in ps.iter().filter(|p| (0..*n).contains(*p)) {
                    owner.entry((*t, *p)).or_insert(i);
                }
            }
        }
        let mut counts = vec![0usize; members.len()];
        for i in owner.values() {
            counts[*i] += 1;
        }
        for (t, n) in partitions {
            for p in 0..*n {
                if owner.contains_key(&(*t, p)) {
                    continue;
                }
                if let Some(i) = least_loaded(members, &counts, t, None) {
                    owner.insert((*t, p), i);
                    counts[i] += 1;
                }
            }
        }
        balance(members, &mut owner, &mut counts);
        let mut out = empty_assignment(members);
        for ((t, p), i) in owner {
            if let Some(a) = out.get_mut(&members[i].member_id) {
                a.entry(t).or_default().insert(p);
            }
        }
        out
    }
}

/// The subscriber of `topic` with the fewest partitions (ties: smaller id),
/// below `under` partitions if given.
fn least_loaded(
    members: &[MemberSubscription],
    counts: &[usize],
    topic: &TopicId,
    under: Option<usize>,
) -> Option<usize> {
    members
        .iter()
        .enumerate()
        .filter(|(i, m)| m.topics.contains(topic) && under.is_none_or(|u| counts[*i] < u))
        .min_by(|(i, a), (j, b)| counts[*i].cmp(&counts[*j]).then(a.member_id.cmp(&b.member_id)))
        .map(|(i, _)| i)
}

/// Step 3 of the module doc.
fn balance(
    members: &[MemberSubscription],
    owner: &mut BTreeMap<(TopicId, i32), usize>,
    counts: &mut [usize],
) {
    loop {
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.sort_by(|a, b| {
            counts[*b].cmp(&counts[*a]).then(members[*a].member_id.cmp(&members[*b].member_id))
        });
        let mut moved = false;
        'givers: for giver in order {
            if counts[giver] < 2 {
                break;
            }
            let held: Vec<(TopicId, i32)> =
                owner.iter().rev().filter(|(_, i)| **i == giver).map(|(k, _)| *k).collect();
            for (t, p) in held {
                if let Some(taker) = least_loaded(members, counts, &t, Some(counts[giver] - 1)) {
                    owner.insert((t, p), taker);
                    counts[giver] -= 1;
                    counts[taker] += 1;
                    moved = true;
                    break 'givers;
                }
            }
        }
        if !moved {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::assignor::tests::{assert_complete, count, member, topic};

    #[test]
    fn six_partitions_three_members_two_each() {
        let members = [member("a", &[1], &[]), member("b", &[1], &[]), member("c", &[1], &[])];
        let partitions = [(topic(1), 6)].into();
        let out = UniformAssignor.assign(&members, &partitions);
        assert_complete(&members, &partitions, &out);
        assert!(out.values().all(|a| count(a) == 2), "{out:?}");
    }

    #[test]
    fn a_member_leaving_moves_only_its_partitions() {
        let before = [member("a", &[1], &[(1, &[0, 1])]), member("b", &[1], &[(1, &[2, 3])])];
        let partitions = [(topic(1), 6)].into();
        // c (which held 4 and 5) left: a and b keep theirs and split 4 and 5.
        let out = UniformAssignor.assign(&before, &partitions);
        assert_complete(&before, &partitions, &out);
        assert!(out["a"][&topic(1)].is_superset(&[0, 1].into()));
        assert!(out["b"][&topic(1)].is_superset(&[2, 3].into()));
        assert_eq!((count(&out["a"]), count(&out["b"])), (3, 3));
    }

    #[test]
    fn a_member_joining_takes_only_what_balance_needs() {
        let members = [
            member("a", &[1], &[(1, &[0, 1, 2])]),
            member("b", &[1], &[(1, &[3, 4, 5])]),
            member("c", &[1], &[]),
        ];
        let partitions = [(topic(1), 6)].into();
        let out = UniformAssignor.assign(&members, &partitions);
        assert_complete(&members, &partitions, &out);
        assert!(out.values().all(|a| count(a) == 2), "{out:?}");
        // Each of a and b gave up exactly one partition.
        assert!(out["a"][&topic(1)].is_subset(&[0, 1, 2].into()));
        assert!(out["b"][&topic(1)].is_subset(&[3, 4, 5].into()));
    }

    #[test]
    fn heterogeneous_subscriptions_stay_within_what_each_may_take() {
        let members = [member("a", &[1], &[]), member("b", &[1, 2], &[]), member("c", &[2], &[])];
        let partitions = [(topic(1), 4), (topic(2), 4)].into();
        let out = UniformAssignor.assign(&members, &partitions);
        assert_complete(&members, &partitions, &out);
        let counts: Vec<usize> = ["a", "b", "c"].iter().map(|m| count(&out[*m])).collect();
        assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{counts:?}");
    }

    #[test]
    fn the_same_input_gives_the_same_output() {
        let members = [member("x", &[1, 2], &[(2, &[1])]), member("y", &[1, 2], &[])];
        let partitions = [(topic(1), 5), (topic(2), 3)].into();
        assert_eq!(
            UniformAssignor.assign(&members, &partitions),
            UniformAssignor.assign(&members, &partitions)
        );
    }
}

#[cfg(test)]
mod scale {
    use super::*;
    use crate::group::assignor::tests::{count, member};

    #[test]
    fn a_thousand_partitions_over_a_hundred_members() {
        let partitions = [([1u8; 16], 1000)].into();
        let mut members: Vec<MemberSubscription> =
            (0..100).map(|i| member(&format!("m{i:03}"), &[1], &[])).collect();
        let started = std::time::Instant::now();
        let out = UniformAssignor.assign(&members, &partitions);
        let fresh = started.elapsed();
        for m in members.iter_mut() {
            m.current = out[&m.member_id].clone();
        }
        members.pop();
        let started = std::time::Instant::now();
        let out = UniformAssignor.assign(&members, &partitions);
        let after_leave = started.elapsed();
        assert!(out.values().all(|a| (10..=11).contains(&count(a))));
        eprintln!("fresh {fresh:?}, after a leave {after_leave:?}");
    }
}

//! `RangeAssignor`: per topic, consecutive ranges to the subscribed members
//! in member id order (see the module doc of `assignor`).

use std::collections::BTreeMap;

use super::{empty_assignment, MemberSubscription, PartitionAssignor};
use crate::group::consumer_group_records::{Assignment, TopicId};

#[derive(Debug, Clone, Copy)]
pub struct RangeAssignor;

impl PartitionAssignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<TopicId, i32>,
    ) -> BTreeMap<String, Assignment> {
        let mut out = empty_assignment(members);
        for (topic, count) in partitions {
            let mut subscribers: Vec<&str> = members
                .iter()
                .filter(|m| m.topics.contains(topic))
                .map(|m| m.member_id.as_str())
                .collect();
            if subscribers.is_empty() || *count <= 0 {
                continue;
            }
            subscribers.sort_unstable();
            let n = subscribers.len() as i32;
            let (quota, extra) = (count / n, count % n);
            let mut next = 0;
            for (i, member) in subscribers.into_iter().enumerate() {
                let take = quota + i32::from((i as i32) < extra);
                if take == 0 {
                    continue;
                }
                if let Some(a) = out.get_mut(member) {
                    a.entry(*topic).or_default().extend(next..next + take);
                }
                next += take;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::assignor::tests::{assert_complete, count, member, topic};

    #[test]
    fn ranges_in_member_order_with_the_remainder_first() {
        let members = [member("b", &[1], &[]), member("a", &[1], &[]), member("c", &[1], &[])];
        let partitions = [(topic(1), 7)].into();
        let out = RangeAssignor.assign(&members, &partitions);
        assert_complete(&members, &partitions, &out);
        assert_eq!(out["a"][&topic(1)], [0, 1, 2].into());
        assert_eq!(out["b"][&topic(1)], [3, 4].into());
        assert_eq!(out["c"][&topic(1)], [5, 6].into());
    }

    #[test]
    fn topics_of_equal_size_are_co_partitioned() {
        let members =
            [member("m1", &[1, 2], &[]), member("m2", &[1, 2], &[]), member("m3", &[1, 2], &[])];
        let partitions = [(topic(1), 6), (topic(2), 6)].into();
        let out = RangeAssignor.assign(&members, &partitions);
        assert_complete(&members, &partitions, &out);
        for (m, a) in &out {
            assert_eq!(
                a[&topic(1)],
                a[&topic(2)],
                "{m} holds different partitions of the two topics"
            );
            assert_eq!(a[&topic(1)].len(), 2);
        }
    }

    #[test]
    fn only_subscribers_get_a_topic_and_more_members_than_partitions_leave_some_idle() {
        let members = [member("a", &[1], &[]), member("b", &[1, 2], &[]), member("c", &[2], &[])];
        let partitions = [(topic(1), 1), (topic(2), 4)].into();
        let out = RangeAssignor.assign(&members, &partitions);
        assert_complete(&members, &partitions, &out);
        assert_eq!(count(&out["a"]), 1);
        assert_eq!(out["b"].get(&topic(2)), Some(&[0, 1].into()));
        assert_eq!(out["c"][&topic(2)], [2, 3].into());
    }
}

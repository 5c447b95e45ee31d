//! Server-side partition assignors of consumer groups (Kafka's
//! `ConsumerGroupPartitionAssignor`s): given each member's subscription (topic
//! ids) and its current target assignment, and the partition count of every
//! subscribed topic, compute the next target assignment.
//!
//! * `uniform` ([`UniformAssignor`]): every partition of a subscribed topic
//!   goes to exactly one member subscribed to it; the counts per member are as
//!   even as the subscriptions allow (with identical subscriptions they differ
//!   by at most one); a partition stays with its current member unless it must
//!   move for balance (sticky).
//! * `range` ([`RangeAssignor`]): per topic, the subscribed members sorted by
//!   member id get consecutive ranges, the first `partitions % members` one
//!   partition more. Topics with the same partition count and subscribers are
//!   co-partitioned: partition i of each goes to the same member.
//!
//! Both are deterministic: the same input gives the same output.

mod range;
mod uniform;

use std::collections::{BTreeMap, BTreeSet};

pub use range::RangeAssignor;
pub use uniform::UniformAssignor;

use super::consumer_group_records::{Assignment, TopicId};

/// One member as an assignor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSubscription {
    pub member_id: String,
    /// Subscribed topics that exist.
    pub topics: BTreeSet<TopicId>,
    /// Its current target assignment (for stickiness).
    pub current: Assignment,
}

/// A server-side assignor.
pub trait PartitionAssignor: Send + Sync {
    /// The name clients ask for (`group.remote.assignor`) and
    /// `group.consumer.assignors` lists.
    fn name(&self) -> &'static str;

    /// The target assignment of every member (members without partitions
    /// map to an empty assignment).
    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<TopicId, i32>,
    ) -> BTreeMap<String, Assignment>;
}

/// The assignor `group.consumer.assignors` names with `name` (Kafka's short
/// name or class name).
pub fn by_name(name: &str) -> Option<&'static dyn PartitionAssignor> {
    match name.trim() {
        "uniform" | "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => {
            Some(&UniformAssignor)
        }
        "range" | "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => {
            Some(&RangeAssignor)
        }
        _ => None,
    }
}

/// Every member with an empty assignment, to be filled.
fn empty_assignment(members: &[MemberSubscription]) -> BTreeMap<String, Assignment> {
    members.iter().map(|m| (m.member_id.clone(), Assignment::new())).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn topic(n: u8) -> TopicId {
        [n; 16]
    }

    pub(crate) fn member(id: &str, topics: &[u8], current: &[(u8, &[i32])]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.to_string(),
            topics: topics.iter().map(|t| topic(*t)).collect(),
            current: current
                .iter()
                .map(|(t, ps)| (topic(*t), ps.iter().copied().collect()))
                .collect(),
        }
    }

    pub(crate) fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    /// Every partition of every topic someone subscribes to is assigned to
    /// exactly one member that subscribes to it.
    pub(crate) fn assert_complete(
        members: &[MemberSubscription],
        partitions: &BTreeMap<TopicId, i32>,
        out: &BTreeMap<String, Assignment>,
    ) {
        for (t, n) in partitions {
            if !members.iter().any(|m| m.topics.contains(t)) {
                continue;
            }
            for p in 0..*n {
                let owners: Vec<&String> = out
                    .iter()
                    .filter(|(_, a)| a.get(t).is_some_and(|s| s.contains(&p)))
                    .map(|(m, _)| m)
                    .collect();
                assert_eq!(owners.len(), 1, "partition {p} of {t:?}: {owners:?}");
                let m = members.iter().find(|m| &m.member_id == owners[0]).expect("member");
                assert!(
                    m.topics.contains(t),
                    "{} got a topic it does not subscribe to",
                    m.member_id
                );
            }
        }
    }

    #[test]
    fn names_resolve() {
        assert_eq!(by_name("uniform").map(|a| a.name()), Some("uniform"));
        assert_eq!(by_name("range").map(|a| a.name()), Some("range"));
        assert_eq!(
            by_name("org.apache.kafka.coordinator.group.assignor.RangeAssignor").map(|a| a.name()),
            Some("range")
        );
        assert!(by_name("roundrobin").is_none());
    }
}

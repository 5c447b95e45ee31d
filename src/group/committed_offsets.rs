//! The groups' committed offsets on one partition, for the cleaner's
//! resurrection guard and its at-risk counts ([`ConsumerOffsets`]).

use crate::cleaner::tombstone_guard::ConsumerOffsets;
use crate::log::TopicPartition;

use super::GroupCoordinator;

impl ConsumerOffsets for GroupCoordinator {
    /// One lookup per group; while the coordinator loads, no group is known
    /// (the guard then keeps nothing back and nothing shows at risk).
    fn committed(&self, tp: &TopicPartition) -> Vec<(String, i64)> {
        let Ok(groups) = self.list() else { return Vec::new() };
        let wanted = [(tp.topic.clone(), tp.partition)];
        groups
            .into_iter()
            .filter_map(|listed| {
                let group = listed.group_id;
                let (_, _, offset) = self.fetch_offsets(&group, Some(&wanted)).ok()?.pop()?;
                Some((group, offset?.offset))
            })
            .collect()
    }
}

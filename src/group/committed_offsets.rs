//! The groups' committed offsets on one partition, for the cleaner's
//! resurrection guard and its at-risk counts ([`ConsumerOffsets`]).

use std::collections::HashMap;

use crate::cleaner::ConsumerOffsets;
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

    fn committed_by_partition(&self) -> HashMap<TopicPartition, Vec<(String, i64)>> {
        let mut out: HashMap<TopicPartition, Vec<(String, i64)>> = HashMap::new();
        let Ok(groups) = self.list() else { return out };
        for listed in groups {
            let Ok(offsets) = self.fetch_offsets(&listed.group_id, None) else { continue };
            for (topic, partition, offset) in offsets {
                if let Some(o) = offset {
                    let tp = TopicPartition::new(topic, partition);
                    out.entry(tp).or_default().push((listed.group_id.clone(), o.offset));
                }
            }
        }
        out
    }
}

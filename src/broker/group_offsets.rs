//! The committed offsets the cleaner's resurrection guard and its at-risk
//! views read ([`ConsumerOffsets`]): on a single node the group
//! coordinator's; in a cluster every group's, wherever it is coordinated
//! (docs/design/multi-broker.md, 8.4). This broker's coordinator answers
//! for the `__consumer_offsets` partitions it leads; each other leader of
//! one is asked with Kafka's own requests, ListGroups then OffsetFetch
//! (v8, many groups at once), over the inter-broker channels.
//!
//! Invariants:
//! * The guard errs on keeping: when a coordinator cannot answer (down,
//!   loading, a group moved away mid-question, an offsets partition with no
//!   leader), the answer for a partition carries a stand-in entry at offset
//!   -1 naming it, so the guard keeps that partition's tombstones (still
//!   bounded by `sediment.tombstone.retention.max.wait.ms`) and
//!   `cleaner-status` lists it among the groups at risk.
//! * A guard decision asks afresh; the views' all-partitions answer is
//!   reused for [`VIEWS_REUSE`], so scrapes do not fan out to every broker.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ListGroupsRequest, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;

use crate::cleaner::ConsumerOffsets;
use crate::cluster::peers::BrokerChannels;
use crate::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::log::TopicPartition;

/// How long the views reuse an all-partitions answer.
pub const VIEWS_REUSE: Duration = Duration::from_secs(10);

/// Groups per OffsetFetch, so one answer stays well inside a channel's bound.
const GROUPS_PER_FETCH: usize = 500;

/// Committed offsets by partition: (group id, offset).
type ByPartition = HashMap<TopicPartition, Vec<(String, i64)>>;

#[derive(Debug)]
pub struct GroupOffsets {
    local: Arc<GroupCoordinator>,
    /// In a cluster: this broker's id and its channels to the others.
    cluster: OnceLock<(i32, Arc<BrokerChannels>)>,
    views: Mutex<Option<(Instant, ByPartition)>>,
}

/// Who could not answer for their groups, by a name the views show.
type Unanswered = Vec<String>;

impl GroupOffsets {
    pub fn new(local: Arc<GroupCoordinator>) -> Self {
        Self { local, cluster: OnceLock::new(), views: Mutex::new(None) }
    }

    /// From now on, gather every coordinator's groups of the cluster.
    pub fn use_cluster(&self, node_id: i32, peers: Arc<BrokerChannels>) {
        let _ = self.cluster.set((node_id, peers));
    }

    /// Every coordinator's committed offsets (on `only`, or everywhere),
    /// and who did not answer.
    fn gather(
        &self,
        (me, peers): (i32, &BrokerChannels),
        only: Option<&TopicPartition>,
    ) -> (ByPartition, Unanswered) {
        let image = peers.image();
        let mut coordinators = BTreeSet::new();
        let mut unanswered = Vec::new();
        if let Some(topic) = image.topics.topic(OFFSETS_TOPIC) {
            for p in topic.assignment.keys() {
                match image.topics.state(OFFSETS_TOPIC, *p).map(|s| s.state.leader) {
                    Some(leader) if leader >= 0 => {
                        coordinators.insert(leader);
                    }
                    _ => unanswered.push(format!("{OFFSETS_TOPIC}-{p} (no leader)")),
                }
            }
        }
        let mut out = ByPartition::new();
        for node in coordinators {
            let answer =
                if node == me { self.local_offsets(only) } else { remote(peers, node, only) };
            match answer {
                Ok(rows) => {
                    for (tp, group, offset) in rows {
                        out.entry(tp).or_default().push((group, offset));
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        coordinator = node,
                        "the resurrection guard could not read a coordinator's groups: {e}"
                    );
                    unanswered.push(format!("coordinator {node} (no answer)"));
                }
            }
        }
        (out, unanswered)
    }

    /// This broker's groups, or an error while it loads them.
    fn local_offsets(&self, only: Option<&TopicPartition>) -> Result<Vec<Row>, String> {
        let groups = self.local.list().map_err(|e| e.to_string())?;
        let wanted = only.map(|tp| vec![(tp.topic.clone(), tp.partition)]);
        let mut rows = Vec::new();
        for listed in groups {
            let offsets = self.local.fetch_offsets(&listed.group_id, wanted.as_deref());
            for (topic, partition, committed) in offsets.map_err(|e| e.to_string())? {
                if let Some(c) = committed {
                    let tp = TopicPartition::new(topic, partition);
                    rows.push((tp, listed.group_id.clone(), c.offset));
                }
            }
        }
        Ok(rows)
    }
}

/// (partition, group, committed offset).
type Row = (TopicPartition, String, i64);

/// The committed offsets of the groups broker `node` coordinates, on
/// `only` or everywhere. Any group it no longer coordinates, or any error,
/// fails the whole answer (the guard then keeps).
fn remote(
    peers: &BrokerChannels,
    node: i32,
    only: Option<&TopicPartition>,
) -> Result<Vec<Row>, String> {
    let listed = peers.call(node, 4, &ListGroupsRequest::default()).map_err(|e| e.to_string())?;
    if listed.error_code != 0 {
        return Err(format!("ListGroups answered error {}", listed.error_code));
    }
    let topics = only.map(|tp| {
        vec![OffsetFetchRequestTopics::default()
            .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
            .with_partition_indexes(vec![tp.partition])]
    });
    let mut rows = Vec::new();
    for chunk in listed.groups.chunks(GROUPS_PER_FETCH) {
        let groups = chunk
            .iter()
            .map(|g| {
                OffsetFetchRequestGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_topics(topics.clone())
            })
            .collect();
        let request = OffsetFetchRequest::default().with_groups(groups);
        let answer = peers.call(node, 8, &request).map_err(|e| e.to_string())?;
        rows.extend(offset_rows(answer)?);
    }
    Ok(rows)
}

fn offset_rows(answer: OffsetFetchResponse) -> Result<Vec<Row>, String> {
    if answer.error_code != 0 {
        return Err(format!("OffsetFetch answered error {}", answer.error_code));
    }
    let mut rows = Vec::new();
    for g in answer.groups {
        if g.error_code != 0 {
            return Err(format!(
                "OffsetFetch of group {} answered error {}",
                g.group_id.0, g.error_code
            ));
        }
        for t in g.topics {
            for p in t.partitions.iter().filter(|p| p.error_code == 0 && p.committed_offset >= 0) {
                let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                rows.push((tp, g.group_id.0.to_string(), p.committed_offset));
            }
        }
    }
    Ok(rows)
}

impl ConsumerOffsets for GroupOffsets {
    fn committed(&self, tp: &TopicPartition) -> Vec<(String, i64)> {
        let Some((me, peers)) = self.cluster.get() else { return self.local.committed(tp) };
        let (mut by_partition, unanswered) = self.gather((*me, peers), Some(tp));
        let mut out = by_partition.remove(tp).unwrap_or_default();
        out.extend(unanswered.into_iter().map(|who| (who, -1)));
        out
    }

    fn committed_by_partition(&self) -> ByPartition {
        let Some((me, peers)) = self.cluster.get() else {
            return self.local.committed_by_partition();
        };
        let mut views = self.views.lock();
        if let Some((_, answer)) = views.as_ref().filter(|(at, _)| at.elapsed() < VIEWS_REUSE) {
            return answer.clone();
        }
        let (answer, _) = self.gather((*me, peers), None);
        *views = Some((Instant::now(), answer.clone()));
        answer
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
    };
    use kafka_protocol::messages::GroupId;

    use super::*;

    fn group(id: &str, error: i16, partitions: &[(i32, i64, i16)]) -> OffsetFetchResponseGroup {
        let partitions = partitions
            .iter()
            .map(|(p, o, e)| {
                OffsetFetchResponsePartitions::default()
                    .with_partition_index(*p)
                    .with_committed_offset(*o)
                    .with_error_code(*e)
            })
            .collect();
        OffsetFetchResponseGroup::default()
            .with_group_id(GroupId(StrBytes::from_string(id.into())))
            .with_error_code(error)
            .with_topics(vec![OffsetFetchResponseTopics::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(partitions)])
    }

    #[test]
    fn committed_offsets_are_read_and_missing_ones_left_out() {
        let answer = OffsetFetchResponse::default().with_groups(vec![
            group("a", 0, &[(0, 5, 0), (1, -1, 0)]),
            group("b", 0, &[(0, 9, 0)]),
        ]);
        let rows = offset_rows(answer).unwrap();
        let t0 = TopicPartition::new("t".to_string(), 0);
        assert_eq!(rows, vec![(t0.clone(), "a".to_string(), 5), (t0, "b".to_string(), 9)]);
    }

    #[test]
    fn a_group_that_moved_fails_the_whole_answer() {
        let not_coordinator = 16;
        let answer = OffsetFetchResponse::default()
            .with_groups(vec![group("a", 0, &[(0, 5, 0)]), group("b", not_coordinator, &[])]);
        assert!(offset_rows(answer).unwrap_err().contains("group b"));
        let answer = OffsetFetchResponse::default().with_error_code(14);
        assert!(offset_rows(answer).is_err());
    }
}

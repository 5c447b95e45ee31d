//! Rebuilding every group from `__consumer_offsets` at start (the loading
//! half of Kafka's `GroupMetadataManager`, driven by the log layer's
//! `coordinator_loader`).
//!
//! * Loading reads each partition from its log start: later records win, a
//!   tombstone deletes. Until the load finished, group requests get
//!   COORDINATOR_LOAD_IN_PROGRESS. The coordinator is the only writer, so
//!   afterwards the cache follows the log by construction.
//! * Nothing unreadable is skipped in silence (the log layer's
//!   `coordinator_loader` walks the partitions): a record without a key or
//!   whose key or value does not decode, and whatever cannot be read or framed,
//!   is logged with partition, segment file, byte position and offset, skipped,
//!   and counted in [`LoadStats`]; the other records and partitions still load.

use std::collections::HashMap;

use super::consumer_group_records::{ConsumerGroupKey, ConsumerGroupValue};
use super::error::SchemaError;
use super::group_metadata::Group;
use super::offset_and_metadata::{CommittedOffset, PendingOffset};
use super::runtime::OFFSETS_TOPIC;
use super::schema::{GroupValue, OffsetValue, RecordKey};
pub use crate::log::coordinator_loader::LoadStats;
use crate::log::coordinator_loader::{load_partition, CoordinatorRecordVisitor};
use crate::log::record_batch::BatchHeader;
use crate::log::topic_partition::coordinator_partition;
use crate::log::{LogManager, TopicPartition};

/// The largest decompressed batch the loader accepts.
const MAX_BATCH_RECORDS_BYTES: usize = 64 << 20;

/// Read every group of the `partitions` partitions of the offsets topic as of
/// `now`, with what the walk read.
pub(super) fn load_groups(
    logs: &LogManager,
    partitions: i32,
    now: i64,
) -> (HashMap<String, Group>, LoadStats) {
    let mut loader = GroupLoader { groups: HashMap::new(), now, partition: 0, partitions };
    let mut stats = LoadStats::default();
    if let Some(info) = logs.topic(OFFSETS_TOPIC) {
        for p in 0..info.partitions {
            let Some(log) = logs.get_log(&TopicPartition::new(OFFSETS_TOPIC, p)) else {
                continue;
            };
            let log = log.read();
            loader.partition = p;
            load_partition(&log, MAX_BATCH_RECORDS_BYTES, &mut loader, &mut stats);
        }
    }
    (loader.groups, stats)
}

/// Read the groups of `__consumer_offsets` partition `partition` (of
/// `partitions`) as of `now`, with what the walk read and the log end it
/// read to (a cluster's leader loading one shard).
pub(super) fn load_partition_groups(
    logs: &LogManager,
    partition: i32,
    partitions: i32,
    now: i64,
) -> Option<(HashMap<String, Group>, LoadStats, i64)> {
    let log = logs.get_log(&TopicPartition::new(OFFSETS_TOPIC, partition))?;
    let mut loader = GroupLoader { groups: HashMap::new(), now, partition, partitions };
    let mut stats = LoadStats::default();
    let log = log.read();
    load_partition(&log, MAX_BATCH_RECORDS_BYTES, &mut loader, &mut stats);
    Some((loader.groups, stats, log.log_end_offset()))
}

/// One load in progress: the groups rebuilt so far (with the transactional
/// offsets still pending), and the partition being read.
struct GroupLoader {
    groups: HashMap<String, Group>,
    now: i64,
    partition: i32,
    partitions: i32,
}

impl CoordinatorRecordVisitor for GroupLoader {
    type Error = RecordError;

    fn record(
        &mut self,
        header: &BatchHeader,
        _: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(), RecordError> {
        let key = key.ok_or(RecordError::Keyless)?;
        apply_record(&mut self.groups, header, key, value, self.now)
    }

    fn end_txn_marker(&mut self, header: &BatchHeader, commit: bool) {
        for group in self.groups.values_mut() {
            if coordinator_partition(&group.id, self.partitions) == self.partition {
                group.complete_pending_offsets(header.producer_id, commit);
            }
        }
    }
}

/// Why one record could not be applied.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    #[error("{0}")]
    Schema(#[from] SchemaError),
    #[error("a record without a key")]
    Keyless,
}

/// Apply one `__consumer_offsets` record while loading.
/// Apply one `__consumer_offsets` record of the batch `header` while
/// loading: an offset of a transactional batch is pending for its producer.
fn apply_record(
    groups: &mut HashMap<String, Group>,
    header: &BatchHeader,
    key: &[u8],
    value: Option<&[u8]>,
    now: i64,
) -> Result<(), RecordError> {
    match RecordKey::decode(key)? {
        RecordKey::Offset { group, topic, partition } => match value {
            None if header.is_transactional() => {
                if let Some(g) = groups.get_mut(&group) {
                    if let Some(p) = g.pending_txn_offsets.get_mut(&header.producer_id) {
                        p.remove(&(topic, partition));
                    }
                }
            }
            None => {
                if let Some(g) = groups.get_mut(&group) {
                    g.remove_offset(&(topic, partition));
                }
            }
            Some(value) => {
                let v = OffsetValue::decode(value)?;
                let offset = CommittedOffset {
                    offset: v.offset,
                    leader_epoch: v.leader_epoch,
                    metadata: v.metadata,
                    commit_timestamp: v.commit_timestamp,
                };
                let g = group_entry(groups, group, now);
                let key = (topic, partition);
                if header.is_transactional() {
                    let pending = PendingOffset { offset, log_offset: header.base_offset };
                    g.add_pending_offset(header.producer_id, key, pending);
                } else {
                    g.install_offset(key, offset, Some(header.base_offset));
                }
            }
        },
        RecordKey::Consumer(key) => apply_consumer_record(groups, &key, value, now)?,
        RecordKey::Group { group } => match value {
            None => {
                // Only the classic group goes: its offsets stay, and so does
                // a consumer group that replaced it (an upgrade writes this
                // tombstone first). The entry goes once nothing is left.
                if let Some(g) = groups.get_mut(&group) {
                    g.end_classic_membership(now);
                    let offsets = !g.offsets.is_empty() || !g.pending_txn_offsets.is_empty();
                    if g.consumer.is_none() && !offsets {
                        groups.remove(&group);
                    }
                }
            }
            Some(value) => {
                let v = GroupValue::decode(value)?;
                group_entry(groups, group, now).restore(v, now);
            }
        },
    }
    Ok(())
}

/// Apply a consumer group record while loading: the group's metadata
/// tombstone removes the consumer group (its offsets stay, as a group entry
/// only while it has some).
fn apply_consumer_record(
    groups: &mut HashMap<String, Group>,
    key: &ConsumerGroupKey,
    value: Option<&[u8]>,
    now: i64,
) -> Result<(), RecordError> {
    let value = value.map(|v| ConsumerGroupValue::decode(key, v)).transpose()?;
    let group = key.group().to_string();
    if matches!(key, ConsumerGroupKey::Metadata { .. }) && value.is_none() {
        if let Some(g) = groups.get_mut(&group) {
            g.consumer = None;
            if g.offsets.is_empty() && g.pending_txn_offsets.is_empty() {
                groups.remove(&group);
            }
        }
        return Ok(());
    }
    let g = group_entry(groups, group, now);
    g.consumer.get_or_insert_with(Default::default).replay(key, value, now);
    Ok(())
}

fn group_entry(groups: &mut HashMap<String, Group>, group: String, now: i64) -> &mut Group {
    groups.entry(group.clone()).or_insert_with(|| Group::new(&group, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::membership::tests::coordinator;

    fn offset(offset: i64) -> Vec<(String, i32, CommittedOffset)> {
        let o = CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        };
        vec![("t".to_string(), 0, o)]
    }

    #[test]
    fn undecodable_records_are_counted_and_the_others_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = coordinator(dir.path());
        assert_eq!(c.commit("g", -1, "", None, &offset(5)), vec![None]);
        let cut_value = RecordKey::Offset { group: "g".into(), topic: "t".into(), partition: 1 };
        let bad =
            [(vec![0, 9, 1, 2], Some(vec![1])), (cut_value.encode().unwrap(), Some(vec![0, 3, 0]))];
        c.runtime.append_encoded("g", &bad, None).expect("append");
        assert_eq!(c.commit("g", -1, "", None, &offset(7)), vec![None]);

        c.load();
        let stats =
            LoadStats { batches: 3, records: 4, unreadable_batches: 0, unreadable_records: 2 };
        assert_eq!(c.load_stats(), stats);
        let fetched = c.fetch_offsets("g", None).expect("loaded");
        assert_eq!(fetched.len(), 1);
        assert_eq!((fetched[0].1, fetched[0].2.as_ref().map(|o| o.offset)), (0, Some(7)));
    }
}

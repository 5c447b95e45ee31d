//! The coordinator's side of `__consumer_offsets` (Kafka's
//! `GroupMetadataManager`): creating the topic, appending group and offset
//! records to a group's partition, and rebuilding every group from the log at
//! start.
//!
//! * A group's records go to partition `abs(javaHash(group)) % partitions`, so
//!   later records of a group follow earlier ones in one log.
//! * Loading reads each partition from its log start: later records win, a
//!   tombstone deletes. Until the load finished, group requests get
//!   COORDINATOR_LOAD_IN_PROGRESS. The coordinator is the only writer, so
//!   afterwards the cache follows the log by construction.
//! * Nothing unreadable is skipped in silence. A batch whose records cannot be
//!   decoded, a record that cannot be framed (with the rest of its batch,
//!   whose boundaries are then unknown), and a record whose key or value does
//!   not decode are each logged with partition, segment file, byte position
//!   and offset, skipped, and counted in [`LoadStats`]. A read error or a batch
//!   header that cannot be parsed ends the load of that partition (where the
//!   next batch starts is unknown), logged and counted the same way; the other
//!   partitions still load.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::atomic::Ordering;

use super::coordinator::GroupCoordinator;
use super::error::GroupError;
use super::group_metadata::Group;
use super::offsets::{CommittedOffset, OffsetsRecord};
use super::schema::{GroupValue, OffsetValue, RecordKey, SchemaError};
use crate::log::compression::Compression;
use crate::log::record_batch::{records_bytes, BatchBuilder, BatchHeader, RecordIter};
use crate::log::{Log, LogError, TopicPartition};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The largest decompressed batch the loader accepts.
const MAX_BATCH_RECORDS_BYTES: usize = 64 << 20;

/// What the last load of `__consumer_offsets` read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadStats {
    pub batches: u64,
    pub records: u64,
    /// Batches skipped because their records could not be decoded, plus reads
    /// or batch headers that ended a partition's load early.
    pub unreadable_batches: u64,
    /// Records not applied: in a skipped batch, not framed, or with a key or
    /// value that does not decode.
    pub unreadable_records: u64,
}

impl GroupCoordinator {
    /// Create the offsets topic if it does not exist yet (as Kafka does on the
    /// first FindCoordinator).
    ///
    /// # Errors
    /// The topic could not be created.
    pub fn ensure_offsets_topic(&self) -> Result<(), LogError> {
        if self.logs.topic(OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        let overrides = [
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("segment.bytes".to_string(), self.config.offsets_topic_segment_bytes.to_string()),
            ("compression.type".to_string(), "producer".to_string()),
        ]
        .into();
        match self.logs.create_topic(OFFSETS_TOPIC, self.config.offsets_topic_partitions, overrides)
        {
            Ok(_) => {
                tracing::info!(
                    partitions = self.config.offsets_topic_partitions,
                    "created {OFFSETS_TOPIC}"
                );
                Ok(())
            }
            Err(LogError::TopicExists(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Rebuild every group from the offsets topic. Group requests are refused
    /// with COORDINATOR_LOAD_IN_PROGRESS until this returns.
    pub fn load(&self) {
        let started = std::time::Instant::now();
        let mut loader =
            Loader { groups: HashMap::new(), stats: LoadStats::default(), now: self.now() };
        if let Some(info) = self.logs.topic(OFFSETS_TOPIC) {
            for p in 0..info.partitions {
                let Some(log) = self.logs.get_log(&TopicPartition::new(OFFSETS_TOPIC, p)) else {
                    continue;
                };
                let log = log.read();
                loader.load_partition(&log);
            }
        }
        let stats = loader.stats;
        *self.lock() = loader.groups;
        *self.load_stats.lock() = stats;
        self.loaded.store(true, Ordering::Release);
        if stats.unreadable_batches + stats.unreadable_records > 0 {
            tracing::error!(
                unreadable_batches = stats.unreadable_batches,
                unreadable_records = stats.unreadable_records,
                "{OFFSETS_TOPIC} loaded with unreadable data; the groups it held may be stale"
            );
        }
        tracing::info!(
            records = stats.records,
            batches = stats.batches,
            groups = self.lock().len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "group coordinator loaded"
        );
    }

    /// What the last [`GroupCoordinator::load`] read (zeros before it ran).
    pub fn load_stats(&self) -> LoadStats {
        *self.load_stats.lock()
    }

    /// Append records for `group` to its offsets partition.
    pub(super) fn append(&self, group: &str, records: &[OffsetsRecord]) -> Result<(), GroupError> {
        if records.is_empty() {
            return Ok(());
        }
        self.ensure_offsets_topic().map_err(|e| {
            tracing::error!("creating {OFFSETS_TOPIC}: {e}");
            GroupError::from(e)
        })?;
        let tp = TopicPartition::new(OFFSETS_TOPIC, self.partition_for(group));
        let log = self.logs.get_log(&tp).ok_or(GroupError::CoordinatorNotAvailable)?;
        let now = self.now();
        let mut builder = BatchBuilder::new(Compression::None, now);
        for (k, v) in records {
            builder.append(now, Some(k), v.as_deref());
        }
        let mut batch = builder.build();
        let mut log = log.write();
        log.append_as_leader(&mut batch).map_err(|e| {
            tracing::error!(partition = %tp, "writing group records: {e}");
            GroupError::from(e)
        })?;
        Ok(())
    }

    /// Write the group's metadata (members, assignments, generation).
    pub(super) fn persist_group(&self, g: &Group) -> Result<(), GroupError> {
        let key = RecordKey::Group { group: g.id.clone() }.encode();
        self.append(&g.id, &[(key, Some(g.to_value().encode()))])
    }
}

/// Where a batch was read from, for reports about it.
#[derive(Debug, Clone, Copy)]
struct BatchPosition {
    /// The batch's base offset (the offset asked for when no header was read).
    offset: i64,
    /// Its byte position in its segment file, when known.
    file_position: Option<u64>,
}

/// Hand every batch of `log` that holds offsets at or past its log start to
/// `visit`, with where it was read from. The segments are read with the log's
/// one `BatchReader`, so framing, size limits and CRCs are checked exactly as
/// recovery checks them.
///
/// # Errors
/// A read that failed or a batch that does not frame or check, with where:
/// the walk cannot know where the next batch starts, so it stops there.
fn read_batches(
    log: &Log,
    mut visit: impl FnMut(&BatchHeader, &[u8], BatchPosition),
) -> Result<(), (BatchPosition, LogError)> {
    let start = log.log_start_offset();
    let mut next_offset = start;
    let mut buf = Vec::new();
    for segment in log.segments().filter(|s| s.next_offset() > start) {
        next_offset = next_offset.max(segment.base_offset());
        let mut reader = segment.batches(0..segment.size(), &mut buf);
        loop {
            let at = BatchPosition { offset: next_offset, file_position: Some(reader.position()) };
            let Some((position, batch)) = reader.next_batch().map_err(|e| (at, e.into()))? else {
                break;
            };
            let header = BatchHeader::parse(batch).map_err(|e| (at, e.into()))?;
            let last = header.base_offset + i64::from(header.last_offset_delta);
            if last < start {
                continue;
            }
            let at = BatchPosition { offset: header.base_offset, file_position: Some(position) };
            visit(&header, batch, at);
            next_offset = last + 1;
        }
    }
    Ok(())
}

/// One load in progress: the groups rebuilt so far and what was read.
struct Loader {
    groups: HashMap<String, Group>,
    stats: LoadStats,
    now: i64,
}

impl Loader {
    fn load_partition(&mut self, log: &Log) {
        let mut scratch = Vec::new();
        let walked =
            read_batches(log, |h, batch, at| self.load_batch(log, h, batch, at, &mut scratch));
        if let Err((at, e)) = walked {
            report(log, at, at.offset, "the rest of the partition is not loaded", &e);
            self.stats.unreadable_batches += 1;
        }
    }

    fn load_batch(
        &mut self,
        log: &Log,
        h: &BatchHeader,
        batch: &[u8],
        at: BatchPosition,
        scratch: &mut Vec<u8>,
    ) {
        self.stats.batches += 1;
        if h.is_control() {
            return;
        }
        let count = h.records_count.max(0) as u64;
        let payload = match records_bytes(h, batch, scratch, MAX_BATCH_RECORDS_BYTES) {
            Ok(p) => p,
            Err(e) => {
                report(log, at, h.base_offset, "skipping a batch whose records cannot be read", &e);
                self.stats.unreadable_batches += 1;
                self.stats.unreadable_records += count;
                return;
            }
        };
        for (read, r) in RecordIter::new(payload, h.records_count).enumerate() {
            match r {
                Ok(r) => {
                    self.load_record(log, at, h.base_offset + r.offset_delta as i64, r.key, r.value)
                }
                Err(e) => {
                    // Where the next record starts is unknown: the rest of the batch is lost.
                    let what = format!("skipping the batch's records from record {read} on");
                    report(log, at, h.base_offset + read as i64, &what, &e);
                    self.stats.unreadable_records += count - read as u64;
                    return;
                }
            }
        }
    }

    fn load_record(
        &mut self,
        log: &Log,
        at: BatchPosition,
        offset: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) {
        self.stats.records += 1;
        let applied = match key {
            Some(key) => apply_record(&mut self.groups, key, value, self.now),
            None => Err(RecordError::Keyless),
        };
        if let Err(e) = applied {
            report(log, at, offset, "skipping a record", &e);
            self.stats.unreadable_records += 1;
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

fn report(log: &Log, at: BatchPosition, offset: i64, what: &str, cause: &dyn Display) {
    let segment = log
        .segments()
        .rev()
        .find(|s| s.base_offset() <= at.offset)
        .map(|s| s.log_path().display().to_string())
        .unwrap_or_default();
    tracing::error!(
        partition = %log.topic_partition(),
        segment,
        position = ?at.file_position,
        offset,
        "{OFFSETS_TOPIC}: {what}: {cause}"
    );
}

/// Apply one `__consumer_offsets` record while loading.
fn apply_record(
    groups: &mut HashMap<String, Group>,
    key: &[u8],
    value: Option<&[u8]>,
    now: i64,
) -> Result<(), RecordError> {
    match RecordKey::decode(key)? {
        RecordKey::Offset { group, topic, partition } => match value {
            None => {
                if let Some(g) = groups.get_mut(&group) {
                    g.offsets.remove(&(topic, partition));
                }
            }
            Some(value) => {
                let v = OffsetValue::decode(value)?;
                group_entry(groups, group, now).offsets.insert(
                    (topic, partition),
                    CommittedOffset {
                        offset: v.offset,
                        leader_epoch: v.leader_epoch,
                        metadata: v.metadata,
                        commit_timestamp: v.commit_timestamp,
                    },
                );
            }
        },
        RecordKey::Group { group } => match value {
            None => {
                groups.remove(&group);
            }
            Some(value) => {
                let v = GroupValue::decode(value)?;
                group_entry(groups, group, now).restore(v, now);
            }
        },
    }
    Ok(())
}

fn group_entry(groups: &mut HashMap<String, Group>, group: String, now: i64) -> &mut Group {
    groups.entry(group.clone()).or_insert_with(|| Group::new(&group, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::membership::tests::coordinator;
    use crate::log::record_batch::{RECORDS_COUNT_OFFSET, RECORD_BATCH_OVERHEAD};

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
        let bad = [(vec![0, 9, 1, 2], Some(vec![1])), (cut_value.encode(), Some(vec![0, 3, 0]))];
        c.append("g", &bad).expect("append");
        assert_eq!(c.commit("g", -1, "", None, &offset(7)), vec![None]);

        c.load();
        let stats =
            LoadStats { batches: 3, records: 4, unreadable_batches: 0, unreadable_records: 2 };
        assert_eq!(c.load_stats(), stats);
        let fetched = c.fetch_offsets("g", None).expect("loaded");
        assert_eq!(fetched.len(), 1);
        assert_eq!((fetched[0].1, fetched[0].2.as_ref().map(|o| o.offset)), (0, Some(7)));
    }

    #[test]
    fn batches_and_records_that_cannot_be_framed_are_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = coordinator(dir.path());
        c.ensure_offsets_topic().expect("offsets topic");
        let log = c.logs.get_log(&TopicPartition::new(OFFSETS_TOPIC, 0)).expect("partition 0");
        let log = log.read();
        let batch = |compression| {
            let mut b = BatchBuilder::new(compression, 0);
            for (k, v) in [(b"k1", b"v1"), (b"k2", b"v2"), (b"k3", b"v3")] {
                b.append(0, Some(k), Some(v));
            }
            b.build()
        };
        let mut loader = Loader { groups: HashMap::new(), stats: LoadStats::default(), now: 0 };
        let at = BatchPosition { offset: 0, file_position: Some(0) };
        let mut load = |bytes: &[u8]| {
            let header = BatchHeader::parse(bytes).expect("header");
            loader.load_batch(&log, &header, bytes, at, &mut Vec::new());
        };

        // A gzip batch whose compressed bytes are garbage: all 3 records lost.
        let mut gzip = batch(Compression::Gzip);
        gzip[RECORD_BATCH_OVERHEAD..].fill(0xff);
        load(&gzip);
        // A batch claiming 5 records holds 3: 2 cannot be framed; the 3 keys
        // are not `__consumer_offsets` keys either.
        let mut short = batch(Compression::None);
        short[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4].copy_from_slice(&5i32.to_be_bytes());
        load(&short);

        let stats =
            LoadStats { batches: 2, records: 3, unreadable_batches: 1, unreadable_records: 8 };
        assert_eq!(loader.stats, stats);
        assert!(loader.groups.is_empty());
    }
}

//! Reading a coordinator's compacted topic back at start (Kafka's
//! `CoordinatorLoaderImpl`): every record of one partition of
//! `__consumer_offsets` or `__transaction_state`, in offset order from the log
//! start, handed to the coordinator's [`CoordinatorRecordVisitor`], which
//! rebuilds its state (later records win, a tombstone deletes).
//!
//! The segments are read with the log's one `BatchReader`
//! ([`LogSegment::batches`](super::segment::LogSegment::batches)), so framing,
//! size limits and CRCs are checked exactly as recovery checks them.
//!
//! Nothing unreadable is skipped in silence. A batch whose records cannot be
//! decoded, a record that cannot be framed (with the rest of its batch, whose
//! boundaries are then unknown), and a record the visitor refuses are each
//! logged with partition, segment file, byte position and offset, skipped, and
//! counted in [`LoadStats`]. A read error or a batch header that cannot be
//! parsed ends the load of that partition (where the next batch starts is
//! unknown), logged and counted the same way; the caller goes on with its
//! other partitions. Control batches are counted as batches; a COMMIT or
//! ABORT marker among them is handed to the visitor's `end_txn_marker` (a
//! coordinator holding transactional records completes them there), an
//! unreadable one is reported and counted like an unreadable batch.

use std::fmt::Display;

use super::control_record::{read_control_batch, ControlBatch};
use super::error::LogError;
use super::record_batch::{records_bytes, BatchHeader, RecordIter};
use super::unified_log::Log;

/// What loading a coordinator's topic read, summed over its partitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadStats {
    pub batches: u64,
    pub records: u64,
    /// Batches skipped because their records could not be decoded, plus reads
    /// or batch headers that ended a partition's load early.
    pub unreadable_batches: u64,
    /// Records not applied: in a skipped batch, not framed, or refused by the
    /// visitor (a key or value that does not decode).
    pub unreadable_records: u64,
}

impl std::ops::AddAssign for LoadStats {
    /// The sums of two loads (a cluster loads one partition at a time).
    fn add_assign(&mut self, more: Self) {
        self.batches += more.batches;
        self.records += more.records;
        self.unreadable_batches += more.unreadable_batches;
        self.unreadable_records += more.unreadable_records;
    }
}

/// A coordinator rebuilding its state from its topic.
pub trait CoordinatorRecordVisitor {
    /// Why a record was not applied; logged with where the record was.
    type Error: Display;

    /// Apply one record of a data batch (`header` is its batch's), at `offset`.
    /// A null `value` is a tombstone.
    ///
    /// # Errors
    /// The record is unreadable (no key, or a key or value that does not
    /// decode): it is reported, counted, and the load goes on.
    fn record(
        &mut self,
        header: &BatchHeader,
        offset: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(), Self::Error>;

    /// A transaction marker of `header.producer_id` at `header.base_offset`:
    /// `commit` true for COMMIT, false for ABORT. Ignored by default.
    fn end_txn_marker(&mut self, header: &BatchHeader, commit: bool) {
        let _ = (header, commit);
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

/// Hand every record of `log` at or past its log start to `visitor`, adding
/// what was read to `stats`. Batches whose records inflate beyond
/// `max_batch_records_bytes` are unreadable.
pub fn load_partition<V: CoordinatorRecordVisitor>(
    log: &Log,
    max_batch_records_bytes: usize,
    visitor: &mut V,
    stats: &mut LoadStats,
) {
    let mut loader = Loader { log, max_batch_records_bytes, visitor, stats, scratch: Vec::new() };
    let walked = read_batches(log, |h, batch, at| loader.load_batch(h, batch, at));
    if let Err((at, e)) = walked {
        report(log, at, at.offset, "the rest of the partition is not loaded", &e);
        stats.unreadable_batches += 1;
    }
}

/// Hand every batch of `log` that holds offsets at or past its log start to
/// `visit`, with where it was read from.
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

/// The load of one partition in progress.
struct Loader<'a, V> {
    log: &'a Log,
    max_batch_records_bytes: usize,
    visitor: &'a mut V,
    stats: &'a mut LoadStats,
    /// Where compressed batches are inflated, reused.
    scratch: Vec<u8>,
}

impl<V: CoordinatorRecordVisitor> Loader<'_, V> {
    fn load_batch(&mut self, h: &BatchHeader, batch: &[u8], at: BatchPosition) {
        self.stats.batches += 1;
        if h.is_control() {
            let limit = self.max_batch_records_bytes;
            match read_control_batch(h, batch, &mut self.scratch, limit) {
                Ok(ControlBatch::Marker(m)) => self.visitor.end_txn_marker(h, !m.is_abort()),
                Ok(ControlBatch::Empty | ControlBatch::Other(_)) => {}
                Err(e) => {
                    report(self.log, at, h.base_offset, "skipping an unreadable control batch", &e);
                    self.stats.unreadable_batches += 1;
                }
            }
            return;
        }
        let count = h.records_count.max(0) as u64;
        let payload = match records_bytes(h, batch, &mut self.scratch, self.max_batch_records_bytes)
        {
            Ok(p) => p,
            Err(e) => {
                let what = "skipping a batch whose records cannot be read";
                report(self.log, at, h.base_offset, what, &e);
                self.stats.unreadable_batches += 1;
                self.stats.unreadable_records += count;
                return;
            }
        };
        for (read, r) in RecordIter::new(payload, h.records_count).enumerate() {
            match r {
                Ok(r) => {
                    let offset = h.base_offset + i64::from(r.offset_delta);
                    self.stats.records += 1;
                    if let Err(e) = self.visitor.record(h, offset, r.key, r.value) {
                        report(self.log, at, offset, "skipping a record", &e);
                        self.stats.unreadable_records += 1;
                    }
                }
                Err(e) => {
                    // Where the next record starts is unknown: the rest of the batch is lost.
                    let what = format!("skipping the batch's records from record {read} on");
                    report(self.log, at, h.base_offset + read as i64, &what, &e);
                    self.stats.unreadable_records += count.saturating_sub(read as u64);
                    return;
                }
            }
        }
    }
}

fn report(log: &Log, at: BatchPosition, offset: i64, what: &str, cause: &dyn Display) {
    let segment = log
        .segments()
        .rev()
        .find(|s| s.base_offset() <= at.offset)
        .map(|s| s.log_path().display().to_string())
        .unwrap_or_default();
    let tp = log.topic_partition();
    tracing::error!(
        partition = %tp,
        segment,
        position = ?at.file_position,
        offset,
        "{}: {what}: {cause}",
        tp.topic
    );
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::clock;
    use crate::log::compression::Compression;
    use crate::log::record_batch::{BatchBuilder, RECORDS_COUNT_OFFSET, RECORD_BATCH_OVERHEAD};
    use crate::log::{LoadParams, LogConfig, TopicPartition};

    /// Accepts records whose key starts with `ok`, remembers them.
    #[derive(Default)]
    struct Keys(Vec<(i64, Vec<u8>)>);

    impl CoordinatorRecordVisitor for Keys {
        type Error = String;
        fn record(
            &mut self,
            _: &BatchHeader,
            offset: i64,
            key: Option<&[u8]>,
            _: Option<&[u8]>,
        ) -> Result<(), String> {
            match key {
                Some(k) if k.starts_with(b"ok") => {
                    self.0.push((offset, k.to_vec()));
                    Ok(())
                }
                _ => Err("not an ok key".into()),
            }
        }
    }

    fn log(dir: &std::path::Path) -> Log {
        let config = LogConfig::resolve(&BTreeMap::new(), BTreeMap::new()).expect("config");
        let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: false };
        let tp = TopicPartition::new("coordinator", 0);
        Log::open(&dir.join("coordinator-0"), tp, Arc::new(config), load, false, clock::system())
            .expect("open")
    }

    fn batch(compression: Compression, keys: &[&[u8]]) -> Vec<u8> {
        let mut b = BatchBuilder::new(compression, 0);
        for k in keys {
            b.append(0, Some(k), Some(b"v"));
        }
        b.build()
    }

    #[test]
    fn records_in_offset_order_and_refusals_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = log(dir.path());
        log.append_as_leader(&mut batch(Compression::None, &[b"ok1", b"bad"])).expect("append");
        log.append_as_leader(&mut batch(Compression::Gzip, &[b"ok2"])).expect("append");
        let (mut keys, mut stats) = (Keys::default(), LoadStats::default());
        load_partition(&log, 1 << 20, &mut keys, &mut stats);
        assert_eq!(keys.0, vec![(0, b"ok1".to_vec()), (2, b"ok2".to_vec())]);
        let want =
            LoadStats { batches: 2, records: 3, unreadable_batches: 0, unreadable_records: 1 };
        assert_eq!(stats, want);
    }

    #[test]
    fn batches_and_records_that_cannot_be_framed_are_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log(dir.path());
        let (mut keys, mut stats) = (Keys::default(), LoadStats::default());
        let mut loader = Loader {
            log: &log,
            max_batch_records_bytes: 1 << 20,
            visitor: &mut keys,
            stats: &mut stats,
            scratch: Vec::new(),
        };
        let at = BatchPosition { offset: 0, file_position: Some(0) };
        let mut load = |bytes: &[u8]| {
            let header = BatchHeader::parse(bytes).expect("header");
            loader.load_batch(&header, bytes, at);
        };

        // A gzip batch whose compressed bytes are garbage: all 3 records lost.
        let mut gzip = batch(Compression::Gzip, &[b"ok1", b"ok2", b"ok3"]);
        gzip[RECORD_BATCH_OVERHEAD..].fill(0xff);
        load(&gzip);
        // A batch claiming 5 records holds 3: 2 cannot be framed, and the
        // visitor refuses the 3 it is handed.
        let mut short = batch(Compression::None, &[b"k1", b"k2", b"k3"]);
        short[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4].copy_from_slice(&5i32.to_be_bytes());
        load(&short);

        let want =
            LoadStats { batches: 2, records: 3, unreadable_batches: 1, unreadable_records: 8 };
        assert_eq!(stats, want);
        assert!(keys.0.is_empty());
    }
}

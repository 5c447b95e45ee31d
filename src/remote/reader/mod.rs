//! `RemoteLogReader`: Fetch and ListOffsets below the local log, served from
//! the store's segments through the [`SegmentCache`] (Kafka's
//! `RemoteLogManager.read` and `findOffsetByTimestamp`).
//!
//! * The segment holding an offset is found in the partition's latest valid
//!   manifest, read from the store on first use and kept per partition. A
//!   manifest that does not reach the offset, or an object gone from the
//!   store (a clean replaced the segment and the sweep deleted the old
//!   objects), makes the reader read the latest manifest again, once, and retry.
//! * A read returns whole batches from the batch holding the offset (or the
//!   next one), from ONE segment, as Kafka does: when the segment holds no
//!   batch at or after the offset (a compaction gap at its end) the next
//!   listed segment is read; a fetch never spans two segments. Past the last
//!   store-only segment the read answers nothing, and the fetch reads the
//!   local log from its start instead.
//! * Only segments below the local log start are read: from there on the
//!   local log answers. read_committed reads name the aborted transactions of
//!   the store's segments from the one read up to the local log start (by
//!   their `.txnindex`, the rule of `log::unified_log::read`); when that search is not
//!   complete the caller continues it in the local log. A later segment not
//!   in the cache is not downloaded for it: its `.txnindex` object alone is
//!   read (checked against the manifest's size and CRC32C).
//! * Everything here runs on the async runtime; segment file reads run on
//!   blocking threads, never under a log's lock.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use super::cache::{CachedSegment, SegmentCache};
use super::manifest::{self, Manifest, ObjectEntry, SegmentEntry};
use super::store::RemoteStore;
use super::{blocking, RemoteError};
use crate::log::index::TimeIndex;
use crate::log::manager::topic_id_to_string;
use crate::log::segment::SegmentConfig;
use crate::log::transaction_index::{parse_entries, AbortedTxn, TxnIndexSearchResult};
use crate::log::unified_log::store_listing_digest;
use crate::log::{FetchIsolation, LogError, TopicPartition};

/// A failed remote read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RemoteReadError {
    /// The store lists no segment at or after the offset below the local start.
    #[error("offset {offset} of {partition} is not in the store (its segments reach {end})")]
    NotInStore { partition: String, offset: i64, end: i64 },
    /// Segments of the partition are in the store only, and tiered storage
    /// is off on this broker.
    #[error("{partition}: the offset is in the store only and tiered storage is off on this broker (remote.log.storage.system.enable)")]
    Disabled { partition: String },
    /// The store's latest manifest is of an earlier topic of the same name.
    #[error("the store's manifest of {partition} is of another topic of that name (deleted and created again): not served")]
    OtherTopic { partition: String },
    #[error(transparent)]
    Remote(Arc<RemoteError>),
}

impl From<RemoteError> for RemoteReadError {
    fn from(e: RemoteError) -> Self {
        Self::Remote(Arc::new(e))
    }
}

impl From<Arc<RemoteError>> for RemoteReadError {
    fn from(e: Arc<RemoteError>) -> Self {
        Self::Remote(e)
    }
}

/// What a fetch read from the store.
#[derive(Debug, Clone, Default)]
pub struct RemoteFetch {
    /// Whole batches, as in the segment.
    pub records: Bytes,
    /// read_committed: the aborted transactions overlapping `records` found
    /// in the store's segments below the local start.
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
    /// Whether that search ended in the store (else the caller continues it
    /// in the local log, from `fetch_offset` to `upper_bound`).
    pub aborted_complete: bool,
    /// The offset after the batches returned.
    pub upper_bound: i64,
}

/// Where a read is, in the store's terms.
#[derive(Debug, Clone, Copy)]
pub struct RemoteRange {
    pub fetch_offset: i64,
    /// The local log's first offset: the store answers below it only.
    pub local_start: i64,
    pub max_bytes: usize,
    pub min_one_batch: bool,
    pub isolation: FetchIsolation,
    /// The local topic's id: a manifest of another topic of that name is not read.
    pub topic_id: [u8; 16],
    /// The digest of the store listing the log was last told of
    /// (`Log::store_listing`): a kept manifest that lists otherwise is read
    /// again, so that a read after a store clean serves the cleaned
    /// segments, not the replaced ones still in the read cache.
    pub listing: Option<u64>,
}

/// A manifest kept for a partition, and the log listing it was last read
/// again for.
type KeptManifest = (Arc<Manifest>, Option<u64>);

#[derive(Debug)]
pub struct RemoteLogReader {
    store: RemoteStore,
    cache: Arc<SegmentCache>,
    /// Per partition, the manifest kept, and the log's listing digest it
    /// was last read again for (a listing that stays different, such as
    /// one told of a manifest the reader skips as invalid, costs one read
    /// of the store's manifest, not one per fetch).
    manifests: Mutex<HashMap<TopicPartition, KeptManifest>>,
    /// Store segments' largest timestamps, by `.timeindex` key (which names its content).
    max_timestamps: Mutex<HashMap<String, i64>>,
    /// Store segments' aborted transactions, by `.txnindex` key.
    txn_indexes: Mutex<HashMap<String, Arc<[AbortedTxn]>>>,
    /// `remote.fetch.max.wait.ms`: how long a fetch waits for the store.
    fetch_max_wait: Duration,
    /// `remote.list.offsets.request.timeout.ms`: how long an offset lookup waits.
    list_offsets_timeout: Duration,
}

/// Largest `.timeindex` object read for a timestamp lookup (an index's limit).
const MAX_TIME_INDEX: u64 = 64 << 20;
/// Largest `.txnindex` object read alone to name a read's aborted
/// transactions (30,840 entries); a larger one is read from the segment.
const MAX_TXN_INDEX_READ: u64 = 1 << 20;
/// Most `.txnindex` entries remembered from the store (32 bytes each).
const MAX_KNOWN_TXN_ENTRIES: usize = 1 << 18;
/// Segments' largest timestamps remembered (a few MB at most).
const MAX_KNOWN_TIMESTAMPS: usize = 100_000;

impl RemoteLogReader {
    pub fn new(store: RemoteStore, cache: Arc<SegmentCache>) -> Self {
        Self {
            store,
            cache,
            manifests: Mutex::default(),
            max_timestamps: Mutex::default(),
            txn_indexes: Mutex::default(),
            fetch_max_wait: Duration::from_millis(500),
            list_offsets_timeout: Duration::from_secs(30),
        }
    }

    #[must_use]
    pub fn with_fetch_max_wait(mut self, wait: Duration) -> Self {
        self.fetch_max_wait = wait;
        self
    }

    /// How long a fetch waits for a read from the store.
    pub fn fetch_max_wait(&self) -> Duration {
        self.fetch_max_wait
    }

    #[must_use]
    pub fn with_list_offsets_timeout(mut self, timeout: Duration) -> Self {
        self.list_offsets_timeout = timeout;
        self
    }

    /// How long a ListOffsets lookup waits for the store.
    pub fn list_offsets_timeout(&self) -> Duration {
        self.list_offsets_timeout
    }

    pub fn cache(&self) -> &Arc<SegmentCache> {
        &self.cache
    }

    /// Batches of `tp` from the store at `range.fetch_offset`; `None` when
    /// the store has no batch at or after it below the local start (the
    /// local log answers from its first batch).
    ///
    /// # Errors
    /// `NotInStore`, or the store's or cache's error (a corrupt object names its key).
    pub async fn read(
        &self,
        tp: &TopicPartition,
        range: RemoteRange,
        config: SegmentConfig,
    ) -> Result<Option<RemoteFetch>, RemoteReadError> {
        let started = Instant::now();
        let mut fresh = false;
        let result = loop {
            let attempt = match self.manifest_for(tp, fresh, range.listing).await {
                Ok(m) if !fresh && self.listing_moved(tp, &m, range.listing) => {
                    fresh = true;
                    continue;
                }
                Ok(m) if same_topic(&m, &range.topic_id) => {
                    self.read_from(tp, &m, range, config).await
                }
                Ok(_) => Err(other_topic(tp)),
                Err(e) => Err(e),
            };
            match attempt {
                Err(e) if !fresh && stale(&e) => fresh = true,
                other => break other,
            }
        };
        self.cache.reads().fetch_seconds.observe(started.elapsed().as_secs_f64());
        self.cache.release();
        result
    }

    async fn read_from(
        &self,
        tp: &TopicPartition,
        manifest: &Manifest,
        range: RemoteRange,
        config: SegmentConfig,
    ) -> Result<Option<RemoteFetch>, RemoteReadError> {
        let below: Vec<&SegmentEntry> = manifest
            .segments
            .iter()
            .filter(|s| s.next_offset > range.fetch_offset && s.base_offset < range.local_start)
            .collect();
        if below.is_empty() {
            let end = manifest.segments.last().map_or(manifest.log_start_offset, |s| s.next_offset);
            return if end >= range.local_start {
                Ok(None)
            } else {
                Err(RemoteReadError::NotInStore {
                    partition: tp.to_string(),
                    offset: range.fetch_offset,
                    end,
                })
            };
        }
        for (i, entry) in below.iter().enumerate() {
            let seg = self.cache.get(tp, entry, config).await?;
            let Some(mut fetch) = read_segment(Arc::clone(&seg), range).await? else { continue };
            if range.isolation == FetchIsolation::TxnCommitted && !fetch.aborted_complete {
                for later in &below[i + 1..] {
                    let Some(f) = later.files.iter().find(|f| f.ext == "txnindex") else {
                        continue;
                    };
                    let bounds = (range.fetch_offset, fetch.upper_bound);
                    let found = self.later_aborted(tp, later, f, config, bounds).await?;
                    fetch.aborted_transactions.get_or_insert_with(Vec::new).extend(found.aborted);
                    if found.complete {
                        fetch.aborted_complete = true;
                        break;
                    }
                }
            }
            return Ok(Some(fetch));
        }
        Ok(None)
    }

    /// ListOffsets by timestamp over the store's segments below the local
    /// start: the first record at or after `log_start` with a timestamp at or
    /// after `target` (`None`: the local log answers).
    ///
    /// # Errors
    /// As [`RemoteLogReader::read`].
    pub async fn find_offset_by_timestamp(
        &self,
        tp: &TopicPartition,
        target: i64,
        log_start: i64,
        local_start: i64,
        config: SegmentConfig,
        topic_id: &[u8; 16],
    ) -> Result<Option<(i64, i64)>, RemoteReadError> {
        let started = Instant::now();
        let mut manifest = self.manifest(tp, false).await?;
        // A kept manifest older than the local start (local retention went
        // on after it was read) does not list every segment below it: the
        // lookup would skip them and answer from the local log.
        let ends_below = |m: &Manifest| {
            m.segments.last().map_or(m.log_start_offset, |s| s.next_offset) < local_start
        };
        if !same_topic(&manifest, topic_id) || ends_below(&manifest) {
            manifest = self.manifest(tp, true).await?;
            if !same_topic(&manifest, topic_id) {
                return Err(other_topic(tp));
            }
        }
        let mut found = None;
        for entry in manifest
            .segments
            .iter()
            .filter(|s| s.next_offset > log_start && s.base_offset < local_start)
        {
            // Only the segment that can answer is downloaded whole.
            if self.max_timestamp(tp, entry).await? < target {
                continue;
            }
            let seg = self.cache.get(tp, entry, config).await?;
            if seg.segment().max_timestamp() < target {
                continue;
            }
            found = blocking(move || {
                let mut scratch = Vec::new();
                Ok(seg.segment().find_offset_by_timestamp(target, log_start, &mut scratch)?)
            })
            .await?;
            if found.is_some() {
                break;
            }
        }
        self.cache.reads().fetch_seconds.observe(started.elapsed().as_secs_f64());
        self.cache.release();
        Ok(found)
    }

    /// The aborted transactions a later segment adds to a read_committed
    /// read of `[from, upper)`. A segment in the cache answers from its
    /// copy; else a small `.txnindex` object `f` is read alone (and its
    /// entries remembered by key, which names the content), so naming the
    /// aborts of a read does not download the segments after it; a large
    /// one goes through the cache like a read of the segment.
    async fn later_aborted(
        &self,
        tp: &TopicPartition,
        entry: &SegmentEntry,
        f: &ObjectEntry,
        config: SegmentConfig,
        (from, upper): (i64, i64),
    ) -> Result<TxnIndexSearchResult, RemoteReadError> {
        let known = self.txn_indexes.lock().get(&f.key).cloned();
        let entries = match known {
            Some(entries) => entries,
            None if f.size <= MAX_TXN_INDEX_READ && self.cache.peek(tp, entry).is_none() => {
                self.read_txn_index(tp, entry, f).await?
            }
            None => {
                let seg = self.cache.get(tp, entry, config).await?;
                let found = blocking(move || {
                    Ok(seg.segment().txn_index().collect_aborted_txns(from, upper)?)
                })
                .await?;
                return Ok(found);
            }
        };
        Ok(TxnIndexSearchResult::search(&entries, from, upper))
    }

    /// The entries of a segment's `.txnindex` object, read, checked as a
    /// file is on open, and remembered (the memory bounded by
    /// [`MAX_KNOWN_TXN_ENTRIES`]).
    async fn read_txn_index(
        &self,
        tp: &TopicPartition,
        entry: &SegmentEntry,
        f: &ObjectEntry,
    ) -> Result<Arc<[AbortedTxn]>, RemoteReadError> {
        let bytes = self.fetch_verified(tp, f, MAX_TXN_INDEX_READ).await?;
        let entries: Arc<[AbortedTxn]> = match parse_entries(&bytes, entry.base_offset) {
            Ok(entries) => entries.into(),
            Err(reason) => {
                let key = format!("{}/{}", manifest::partition_dir(tp), f.key);
                let e = RemoteError::CorruptSegment { key, reason };
                self.cache.stats().error(e.kind());
                tracing::warn!(partition = %tp, "tiered storage: reading from the store: {e}");
                return Err(e.into());
            }
        };
        let mut known = self.txn_indexes.lock();
        if known.values().map(|e| e.len()).sum::<usize>() + entries.len() > MAX_KNOWN_TXN_ENTRIES {
            known.clear();
        }
        known.insert(f.key.clone(), Arc::clone(&entries));
        Ok(entries)
    }

    /// A store segment's largest timestamp, from its `.timeindex` object
    /// (small; verified against the manifest; remembered by key). A segment
    /// listed without one answers `i64::MAX`: only the segment can tell.
    async fn max_timestamp(
        &self,
        tp: &TopicPartition,
        entry: &SegmentEntry,
    ) -> Result<i64, RemoteReadError> {
        let Some(f) = entry.files.iter().find(|f| f.ext == "timeindex") else {
            return Ok(i64::MAX);
        };
        if let Some(ts) = self.max_timestamps.lock().get(&f.key) {
            return Ok(*ts);
        }
        let bytes = self.fetch_verified(tp, f, MAX_TIME_INDEX).await?;
        let ts = TimeIndex::last_entry_of(&bytes, entry.base_offset).map_or(-1, |e| e.timestamp);
        let mut known = self.max_timestamps.lock();
        if known.len() >= MAX_KNOWN_TIMESTAMPS {
            known.clear();
        }
        known.insert(f.key.clone(), ts);
        Ok(ts)
    }

    /// One object of a segment, read whole (refused above `max` bytes) and
    /// checked against the manifest's size and CRC32C.
    async fn fetch_verified(
        &self,
        tp: &TopicPartition,
        f: &ObjectEntry,
        max: u64,
    ) -> Result<Bytes, RemoteReadError> {
        let key = self.store.key(&format!("{}/{}", manifest::partition_dir(tp), f.key));
        let fetched = match self.store.get_bounded(&key, f.size.min(max)).await {
            Ok(bytes) => {
                let crc = crc32c::crc32c(&bytes);
                if bytes.len() as u64 == f.size && crc == f.crc32c {
                    Ok(bytes)
                } else {
                    Err(RemoteError::Verify {
                        key: key.to_string(),
                        size: f.size,
                        crc: f.crc32c,
                        got_size: bytes.len() as u64,
                        got_crc: crc,
                    })
                }
            }
            Err(e) => Err(e),
        };
        fetched.map_err(|e| {
            self.cache.stats().error(e.kind());
            tracing::warn!(partition = %tp, "tiered storage: reading from the store: {e}");
            RemoteReadError::from(e)
        })
    }

    /// The store segments of `tp` that hold offsets in `offsets` (below
    /// the local start), oldest first, from the latest manifest read now.
    ///
    /// # Errors
    /// The store's error; `NotInStore` when the manifest does not reach
    /// `offsets.end` (a store that lost segments).
    pub async fn entries_holding(
        &self,
        tp: &TopicPartition,
        offsets: std::ops::Range<i64>,
    ) -> Result<Vec<SegmentEntry>, RemoteReadError> {
        let m = self.manifest(tp, true).await?;
        if m.end_offset < offsets.end {
            return Err(RemoteReadError::NotInStore {
                partition: tp.to_string(),
                offset: offsets.end - 1,
                end: m.end_offset,
            });
        }
        Ok(m.segments
            .iter()
            .filter(|s| s.base_offset < offsets.end && s.next_offset > offsets.start)
            .cloned()
            .collect())
    }

    /// The partition's latest valid manifest (an invalid latest one is
    /// skipped, as a restore skips it): the one kept, unless `fresh` or none.
    async fn manifest(
        &self,
        tp: &TopicPartition,
        fresh: bool,
    ) -> Result<Arc<Manifest>, RemoteReadError> {
        self.manifest_for(tp, fresh, None).await
    }

    /// Whether the log was told of a listing (`listing`) other than the
    /// kept manifest's, which has not been read again for it yet.
    fn listing_moved(&self, tp: &TopicPartition, m: &Manifest, listing: Option<u64>) -> bool {
        let Some(l) = listing.filter(|l| *l != listing_of(m)) else { return false };
        self.manifests.lock().get(tp).is_none_or(|(_, told)| *told != Some(l))
    }

    /// [`Self::manifest`], a manifest read again being kept as read for
    /// the log's listing `told`.
    async fn manifest_for(
        &self,
        tp: &TopicPartition,
        fresh: bool,
        told: Option<u64>,
    ) -> Result<Arc<Manifest>, RemoteReadError> {
        if !fresh {
            if let Some((m, _)) = self.manifests.lock().get(tp) {
                return Ok(Arc::clone(m));
            }
        }
        let latest = match manifest::latest_valid(&self.store, tp).await {
            Ok(m) => m,
            Err(e) => {
                self.cache.stats().error(e.kind());
                return Err(e.into());
            }
        };
        let Some((_, m)) = latest else {
            return Err(RemoteReadError::NotInStore {
                partition: tp.to_string(),
                offset: -1,
                end: -1,
            });
        };
        let m = Arc::new(m);
        self.manifests.lock().insert(tp.clone(), (Arc::clone(&m), told.filter(|_| fresh)));
        Ok(m)
    }
}

/// The digest of `m`'s listing, as the log digests what it was told of it.
fn listing_of(m: &Manifest) -> u64 {
    store_listing_digest(m.segments.iter().map(|s| (s.base_offset, s.next_offset, s.size())))
}

/// Whether `m` is of the topic with this id, not of an earlier topic of
/// the same name (deleted and created again).
fn same_topic(m: &Manifest, topic_id: &[u8; 16]) -> bool {
    let id = topic_id_to_string(topic_id);
    m.partition_metadata
        .lines()
        .any(|l| l.strip_prefix("topic_id:").map(str::trim) == Some(id.as_str()))
}

fn other_topic(tp: &TopicPartition) -> RemoteReadError {
    RemoteReadError::OtherTopic { partition: tp.to_string() }
}

/// Whether reading the latest manifest again may help.
fn stale(e: &RemoteReadError) -> bool {
    match e {
        RemoteReadError::NotInStore { .. } | RemoteReadError::OtherTopic { .. } => true,
        RemoteReadError::Remote(r) => r.kind() == "not_found",
        RemoteReadError::Disabled { .. } => false,
    }
}

/// Read `range` from one cached segment (blocking file reads off the runtime).
async fn read_segment(
    seg: Arc<CachedSegment>,
    range: RemoteRange,
) -> Result<Option<RemoteFetch>, RemoteError> {
    blocking(move || {
        let s = seg.segment();
        let offset = range.fetch_offset;
        let Some((_, region)) = s.read_region(offset, range.max_bytes, range.min_one_batch)? else {
            return Ok(None);
        };
        let records = region.read_to_bytes().map_err(LogError::io(s.log_path()))?;
        let end = region.position() + region.len() as u64;
        let upper = s.read_header_at(end)?.map_or(s.next_offset(), |h| h.base_offset);
        let (aborted_transactions, aborted_complete) =
            if range.isolation == FetchIsolation::TxnCommitted && !records.is_empty() {
                let found = s.txn_index().collect_aborted_txns(offset, upper)?;
                (Some(found.aborted), found.complete)
            } else {
                let committed = range.isolation == FetchIsolation::TxnCommitted;
                (committed.then(Vec::new), true)
            };
        Ok(Some(RemoteFetch {
            records,
            aborted_transactions,
            aborted_complete,
            upper_bound: upper,
        }))
    })
    .await
}

#[cfg(test)]
mod tests;

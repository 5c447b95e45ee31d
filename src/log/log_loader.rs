//! The loader (Kafka's `LogLoader`): what happens to a partition directory
//! between a start (after a clean shutdown or a crash) and the first append.
//!
//! In order:
//! 1. The cleaner's leftovers are settled by `complete_interrupted_swaps`:
//!    `.deleted` and `.cleaned` files go, a `.swap` either commits or is
//!    discarded (the rules, and why each is safe, are on that function and on
//!    the steps of `Log::replace_segments`), and orphaned index files go.
//! 2. The segments are opened in offset order. The unflushed tail (the last
//!    segment and any segment reaching past the recovery point) is scanned
//!    after a crash and a torn or corrupt end is truncated; every segment
//!    after a truncated one followed a hole and is deleted.
//! 3. Producer snapshots are sorted out (a write a crash interrupted left a
//!    `<offset>.tmp`, deleted): with `R` = the base of the first
//!    segment recovered in step 2, else the log end (clean shutdown), those
//!    above `R`, those at or below the log start, and strays (no segment at
//!    their offset, other than the newest if it is above the last segment's
//!    base: the shutdown one) are deleted. The newest one that reads back
//!    whole is the start; a corrupt one is deleted and the next older tried;
//!    none means an empty state at the first segment.
//! 4. The producer state is rebuilt by replaying every batch from there
//!    (origin Recovery: headers, plus the record of each control batch).
//!    Every segment recovered in step 2 (or whose `.txnindex` failed its
//!    check) is at or above `R`, so wholly replayed: it gets its `.txnindex`
//!    reset and rebuilt from the aborted transactions its markers complete,
//!    as Kafka's recovery does; the other segments keep theirs.
//! 5. Each open transaction without a start time (restored from a snapshot,
//!    which holds none) is dated by its first batch's max timestamp (else the
//!    load time); nothing is written.
//! 6. The leader epoch cache is read from `leader-epoch-checkpoint`, and the
//!    epochs of the batches of the segments recovered in step 2 are added
//!    (each one above the latest, as Kafka's recovery does); a file that is
//!    missing or unreadable is rebuilt from every batch header instead. The
//!    entries at or past the log end and before the log start go.
//!
//! Invariants of what `load` returns (the segments `Log::open` starts from):
//! * at least one segment, keyed by base offset; the last one is the active one;
//! * `log_start_offset <= recovery_point <= next_offset`; the log start is
//!   the checkpointed one for a `remote.storage.enable` topic (the offsets
//!   below the first local segment may be in the object store), else at
//!   least the first segment's base;
//! * nothing below the recovery point it was given was cut: damage there is
//!   `Offline` with the file and position, never a silent truncation;
//! * no `.cleaned`, `.swap` or `.deleted` file is left in the directory;
//! * the leader epoch cache holds no entry at or past the log end, and
//!   every epoch change of the batches it was rebuilt or recovered from;
//! * the producer state equals (in its snapshot entries) the replay of every
//!   batch of the segments, and
//!   the `.txnindex` of every recovered segment is what appending its batches
//!   would have written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::control_record;
use super::error::{LogError, Result};
use super::leader_epoch_cache::LeaderEpochFileCache;
use super::log_file_utils::segment_files;
use super::producer_snapshot;
use super::producer_state::{ProducerBatch, ProducerStateManager};
use super::record_batch::BatchHeader;
use super::segment::{LogSegment, SegmentConfig};
use super::topic_partition::TopicPartition;
use super::transaction_index::AbortedTxn;
use crate::clock::SharedClock;

/// How the log was opened, for recovery decisions.
#[derive(Debug, Clone, Copy)]
pub struct LoadParams {
    pub recovery_point: i64,
    pub log_start_offset: i64,
    /// The log dir was shut down cleanly (its marker file was present).
    pub clean_shutdown: bool,
}

/// A loaded partition: the segments and offsets a `Log` starts from.
#[derive(Debug)]
pub(super) struct LoadedLog {
    pub segments: BTreeMap<i64, LogSegment>,
    pub log_start_offset: i64,
    pub next_offset: i64,
    pub recovery_point: i64,
    pub producers: ProducerStateManager,
    pub leader_epochs: LeaderEpochFileCache,
}

/// Load the partition in `dir` (which must exist): complete interrupted swaps,
/// recover the unflushed tail and rebuild the producer state.
///
/// # Errors
/// I/O errors, and `Offline` when data below the recovery point is damaged.
pub(super) fn load(
    dir: &Path,
    tp: &TopicPartition,
    seg_config: SegmentConfig,
    load: LoadParams,
    remote_storage_enable: bool,
    clock: &SharedClock,
) -> Result<LoadedLog> {
    let bases = complete_interrupted_swaps(dir, seg_config)?;
    let now = clock.now_ms();
    let (mut segments, truncated_at, recovered) =
        recover_segments(dir, tp, seg_config, bases, load)?;
    let start = load.log_start_offset.max(0);
    if segments.is_empty() {
        segments.insert(start, LogSegment::create(dir, start, seg_config, "", now)?);
    }
    let next_offset = segments.values().next_back().map_or(start, LogSegment::next_offset);
    let first_base = *segments.keys().next().expect("non-empty");
    // With the object store holding the segments below the first local one,
    // the checkpointed log start is the log's (Kafka's loader keeps it too);
    // otherwise nothing below the first segment exists.
    let log_start_offset =
        if remote_storage_enable { start } else { start.max(first_base) }.min(next_offset);
    let local_start = log_start_offset.max(first_base).min(next_offset);
    let recovery_point = load
        .recovery_point
        .clamp(local_start, next_offset)
        .max(truncated_at.unwrap_or(0).min(next_offset));
    let snapshot_limit = recovered.iter().next().map_or(next_offset, |&b| b.min(next_offset));
    let (state, from) =
        restore_from_snapshot(dir, tp, &segments, log_start_offset, snapshot_limit)?;
    let mut producers =
        rebuild_producer_state(&mut segments, state, from, log_start_offset, &recovered)?;
    date_open_transactions(&segments, &mut producers, now);
    let leader_epochs =
        load_leader_epochs(dir, tp, &segments, &recovered, log_start_offset, next_offset)?;
    Ok(LoadedLog {
        segments,
        log_start_offset,
        next_offset,
        recovery_point,
        producers,
        leader_epochs,
    })
}

/// The producer state of a log just cut at `next_offset` (`Log::truncate_to`):
/// the snapshots above it deleted, then steps 3 to 5 from the newest one
/// left. No segment counts as recovered: the cut already trimmed their
/// `.txnindex` files.
///
/// # Errors
/// I/O errors.
pub(super) fn reload_producer_state(
    dir: &Path,
    tp: &TopicPartition,
    segments: &mut BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    next_offset: i64,
    now: i64,
) -> Result<ProducerStateManager> {
    let (state, from) = restore_from_snapshot(dir, tp, segments, log_start_offset, next_offset)?;
    let mut producers =
        rebuild_producer_state(segments, state, from, log_start_offset, &BTreeSet::new())?;
    date_open_transactions(segments, &mut producers, now);
    Ok(producers)
}

/// Step 6: the leader epoch cache, from its file and the recovered
/// segments' batches, or rebuilt from every batch when the file cannot be
/// trusted; fitted to the log's offsets.
fn load_leader_epochs(
    dir: &Path,
    tp: &TopicPartition,
    segments: &BTreeMap<i64, LogSegment>,
    recovered: &BTreeSet<i64>,
    log_start_offset: i64,
    next_offset: i64,
) -> Result<LeaderEpochFileCache> {
    let (mut cache, rebuild) = match LeaderEpochFileCache::read(dir) {
        Ok(Some(cache)) => (cache, false),
        Ok(None) => (LeaderEpochFileCache::empty(dir), true),
        Err(e @ LogError::Corrupt { .. }) => {
            tracing::warn!(partition = %tp, error = %e, "rebuilding the leader epoch cache from the batches");
            (LeaderEpochFileCache::empty(dir), true)
        }
        Err(e) => return Err(e),
    };
    for (base, seg) in segments {
        if !rebuild && !recovered.contains(base) {
            continue;
        }
        let mut pos = 0u64;
        while let Some(header) = seg.read_header_at(pos)? {
            let epoch = header.partition_leader_epoch;
            if cache.latest_epoch().is_none_or(|latest| epoch > latest) {
                cache.assign_in_memory(epoch, header.base_offset);
            }
            pos += header.size_in_bytes() as u64;
        }
    }
    // A new, empty log gets its file at its first append.
    let write_rebuilt = rebuild && !cache.entries().is_empty();
    cache.fit_to(log_start_offset, next_offset, write_rebuilt)?;
    Ok(cache)
}

/// The segments opened, where a torn tail was cut (the offset the log now
/// ends at), and the base offsets of the segments recovered.
type Recovered = (BTreeMap<i64, LogSegment>, Option<i64>, BTreeSet<i64>);

/// Open the segments at `bases` (ascending), recovering those in the unflushed
/// tail.
fn recover_segments(
    dir: &Path,
    tp: &TopicPartition,
    seg_config: SegmentConfig,
    bases: Vec<i64>,
    load: LoadParams,
) -> Result<Recovered> {
    let mut segments = BTreeMap::new();
    let mut recovered = BTreeSet::new();
    let offline = |reason: String| LogError::Offline { partition: tp.to_string(), reason };
    let recovery_point = load.recovery_point;
    let mut truncated_at: Option<i64> = None;
    for (i, &base) in bases.iter().enumerate() {
        if truncated_at.is_some() {
            // Everything after a truncated segment followed a hole: drop it
            // (it is at or past the recovery point, so nothing flushed is lost).
            let seg = LogSegment::open(dir, base, seg_config, "")?;
            tracing::warn!(partition = %tp, base_offset = base, "deleting segment after a truncated one");
            seg.delete_files()?;
            continue;
        }
        let is_last = i + 1 == bases.len();
        let mut seg = LogSegment::open(dir, base, seg_config, "")?;
        // The unflushed tail: the last segment, and any segment reaching past the
        // recovery point (or whose offsets are unknown because it must be rebuilt).
        let next_base = bases.get(i + 1).copied().unwrap_or(i64::MAX);
        let in_unflushed_tail = is_last || next_base > recovery_point;
        if in_unflushed_tail && (!load.clean_shutdown || seg.needs_recovery()) {
            recovered.insert(base);
            let truncated = seg.recover_from(recovery_point).map_err(|e| offline(e.to_string()))?;
            if truncated > 0 {
                tracing::warn!(partition = %tp, base_offset = base, bytes = truncated, next_offset = seg.next_offset(), "recovered segment by truncating its torn tail");
                truncated_at = Some(seg.next_offset());
            }
            if !is_last && truncated == 0 {
                // A closed segment ends its time index with its largest timestamp.
                seg.on_become_inactive()?;
            }
        } else if seg.needs_recovery() {
            // Below the recovery point nothing may be cut: rebuild the indexes if the
            // data is whole, else take the partition offline.
            recovered.insert(base);
            seg.recover_from(i64::MAX).map_err(|e| offline(e.to_string()))?;
            seg.on_become_inactive()?;
        }
        segments.insert(base, seg);
    }
    Ok((segments, truncated_at, recovered))
}

/// Step 3: delete the snapshots the load may not use and return the state of
/// the newest valid one at or below `limit` with its offset, else an empty
/// state from the start of the log.
fn restore_from_snapshot(
    dir: &Path,
    tp: &TopicPartition,
    segments: &BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    limit: i64,
) -> Result<(ProducerStateManager, i64)> {
    producer_snapshot::remove_unfinished(dir)?;
    let mut snapshots = producer_snapshot::list(dir)?;
    let last_base = segments.keys().next_back().copied().unwrap_or(i64::MIN);
    let newest_stray = snapshots.keys().rev().find(|o| !segments.contains_key(o)).copied();
    let doomed: Vec<i64> = snapshots
        .keys()
        .copied()
        .filter(|&o| {
            // The newest stray above the last segment's base is the shutdown one.
            let kept = segments.contains_key(&o) || Some(o) == newest_stray && o > last_base;
            o > limit || o <= log_start_offset || !kept
        })
        .collect();
    for offset in doomed {
        snapshots.remove(&offset);
        producer_snapshot::delete(dir, offset)?;
    }
    for (&offset, path) in snapshots.iter().rev() {
        match producer_snapshot::read(path) {
            Ok(entries) => {
                tracing::info!(partition = %tp, offset, producers = entries.len(), "loading producer state from snapshot");
                return Ok((ProducerStateManager::from_snapshot(&entries), offset));
            }
            Err(e @ LogError::Corrupt { .. }) => {
                tracing::warn!(partition = %tp, offset, error = %e, "deleting unreadable producer snapshot");
                producer_snapshot::delete(dir, offset)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok((ProducerStateManager::new(), i64::MIN))
}

/// Step 4: rebuild the producer state by replaying every batch from offset
/// `from` on into `producers`, and the `.txnindex` of each segment in
/// `recovered` (all of which start at or above `from`). One small read per
/// batch header; a control batch is read whole (CRC checked) for its marker.
fn rebuild_producer_state(
    segments: &mut BTreeMap<i64, LogSegment>,
    mut producers: ProducerStateManager,
    from: i64,
    log_start_offset: i64,
    recovered: &BTreeSet<i64>,
) -> Result<ProducerStateManager> {
    let (mut buf, mut scratch) = (Vec::new(), Vec::new());
    for (base, seg) in segments.iter_mut() {
        let rebuild = recovered.contains(base);
        debug_assert!(!rebuild || *base >= from, "a recovered segment is replayed whole");
        if rebuild {
            seg.txn_index_mut().reset()?;
        } else if seg.next_offset() <= from {
            continue;
        }
        let mut pos = 0u64;
        while let Some(header) = seg.read_header_at(pos)? {
            if header.has_producer_id() && header.last_offset() >= from {
                let control = if header.is_control() {
                    Some(read_control(seg, &header, pos, &mut buf, &mut scratch)?)
                } else {
                    None
                };
                for done in producers.replay(&ProducerBatch { header, control }) {
                    if rebuild && done.is_aborted {
                        let txn = AbortedTxn {
                            producer_id: done.producer_id,
                            first_offset: done.first_offset,
                            last_offset: done.last_offset,
                            last_stable_offset: producers.last_stable_offset(&done),
                        };
                        seg.txn_index_mut().append(&txn)?;
                    }
                    producers.complete_txn(&done);
                }
            }
            pos += header.size_in_bytes() as u64;
        }
        if rebuild {
            // Below the recovery point nothing flushes this segment again.
            seg.txn_index().flush()?;
        }
    }
    producers.truncate_below(log_start_offset);
    Ok(producers)
}

/// Step 5: give the open transactions that have no start time (restored
/// from a snapshot, or whose first batch has no timestamp) the max timestamp
/// of their first batch, one header read each, else the load time `now`: an
/// age measured from it is never too high.
fn date_open_transactions(
    segments: &BTreeMap<i64, LogSegment>,
    producers: &mut ProducerStateManager,
    now: i64,
) {
    producers.date_ongoing_txns(|first_offset| {
        let (_, seg) = match segments.range(..=first_offset).next_back() {
            Some(s) => s,
            None => return now,
        };
        match seg.translate_offset(first_offset) {
            Ok(Some(b)) if b.header.max_timestamp >= 0 => b.header.max_timestamp,
            _ => now,
        }
    });
}

/// The marker of the control batch at `pos`, read whole and checked.
fn read_control(
    seg: &LogSegment,
    header: &BatchHeader,
    pos: u64,
    buf: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Result<control_record::ControlBatch> {
    let end = pos + header.size_in_bytes() as u64;
    let mut reader = seg.batches(pos..end, buf);
    let Some((_, batch)) = reader.next_batch()? else {
        return Err(LogError::Corrupt {
            path: seg.log_path(),
            position: pos,
            reason: "control batch runs past the end of the segment".into(),
        });
    };
    let limit = control_record::MAX_CONTROL_PAYLOAD;
    control_record::read_control_batch(header, batch, scratch, limit).map_err(|e| {
        LogError::Corrupt { path: seg.log_path(), position: pos, reason: e.to_string() }
    })
}

/// The files of a partition directory, by what recovery does with them.
#[derive(Debug, Default)]
struct DirListing {
    /// Base offsets of `.log` files.
    logs: Vec<i64>,
    /// Base offsets of `.log.swap` files.
    swaps: Vec<i64>,
    /// Base offsets of `.log.cleaned` files.
    cleaned: Vec<i64>,
    /// `.index`, `.timeindex` and `.txnindex` files.
    indexes: Vec<(i64, PathBuf)>,
    /// `.index.swap`, `.timeindex.swap` and `.txnindex.swap` files.
    swap_indexes: Vec<(i64, PathBuf)>,
    /// `.deleted` and `.cleaned` files of any kind.
    doomed: Vec<PathBuf>,
}

/// Sort the segment files of `dir` (twenty-digit base offset, then a suffix);
/// anything else is not the log's and is left alone.
fn list_dir(dir: &Path) -> Result<DirListing> {
    let mut listing = DirListing::default();
    for entry in std::fs::read_dir(dir).map_err(LogError::io(dir))? {
        let entry = entry.map_err(LogError::io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let Some((stem, rest)) = name.split_once('.') else { continue };
        let Ok(base) = stem.parse::<i64>() else { continue };
        if stem.len() != 20 {
            continue;
        }
        match rest {
            "log" => listing.logs.push(base),
            "index" | "timeindex" | "txnindex" => listing.indexes.push((base, path)),
            r if r.ends_with("deleted") => listing.doomed.push(path),
            r if r.ends_with("cleaned") => {
                if r == "log.cleaned" {
                    listing.cleaned.push(base);
                }
                listing.doomed.push(path);
            }
            "log.swap" => listing.swaps.push(base),
            "index.swap" | "timeindex.swap" | "txnindex.swap" => {
                listing.swap_indexes.push((base, path));
            }
            _ => {}
        }
    }
    Ok(listing)
}

/// Sort out the files left in `dir` by a crash, by Kafka's rules, and return
/// the base offsets of the segments to open:
/// 1. `.deleted` files: the segment was already replaced or retained away; delete.
/// 2. `.cleaned` files: a clean that never reached the swap; delete.
/// 3. `.swap` files at or above the smallest `.cleaned` offset: that clean had
///    not renamed its whole group to `.swap`; delete them (the originals are intact).
/// 4. Other `.swap` files: the clean had committed; delete the segments they
///    replace (those whose offsets they cover, and any file left at the
///    swap's own base) and strip the suffix.
/// 5. An index `.swap` whose `.log.swap` is gone: with its `.log.cleaned`
///    still there, step 2 of the swap was interrupted (the log is renamed
///    last into `.swap`): delete it; with its `.log` there, step 5 was (the
///    log is stripped first): strip it too; else delete it.
/// 6. Index files with no `.log`: orphans; delete.
fn complete_interrupted_swaps(dir: &Path, seg_config: SegmentConfig) -> Result<Vec<i64>> {
    let DirListing { mut logs, mut swaps, cleaned, indexes, swap_indexes, doomed } = list_dir(dir)?;
    for path in doomed {
        tracing::info!(file = %path.display(), "deleting leftover file");
        remove_if_exists(&path)?;
    }
    let min_cleaned = cleaned.iter().copied().min().unwrap_or(i64::MAX);
    swaps.sort_unstable();
    for (base, path) in swap_indexes {
        if swaps.binary_search(&base).is_ok() {
            continue;
        }
        if !cleaned.contains(&base) && logs.contains(&base) {
            let stripped = path.with_extension("");
            tracing::info!(file = %path.display(), "completing the interrupted strip of a swap's suffixes");
            std::fs::rename(&path, &stripped).map_err(LogError::io(&path))?;
        } else {
            tracing::info!(file = %path.display(), "deleting index of an unfinished swap");
            remove_if_exists(&path)?;
        }
    }
    for base in swaps {
        if base >= min_cleaned {
            tracing::info!(
                base_offset = base,
                "deleting .swap of a clean that did not finish its swap"
            );
            for p in segment_files(dir, base, ".swap") {
                remove_if_exists(&p)?;
            }
            continue;
        }
        commit_swap(dir, base, seg_config, &mut logs)?;
    }
    for (base, path) in indexes {
        if !logs.contains(&base) {
            remove_if_exists(&path)?;
        }
    }
    logs.sort_unstable();
    logs.dedup();
    Ok(logs)
}

/// Rule 4 for the `.swap` segment at `base`: delete the segments in `logs`
/// whose offsets it covers, strip its suffix, and list it in `logs` instead.
fn commit_swap(
    dir: &Path,
    base: i64,
    seg_config: SegmentConfig,
    logs: &mut Vec<i64>,
) -> Result<()> {
    // Learn the offsets the swap segment covers, then replace what it overlaps.
    let mut swap = LogSegment::open(dir, base, seg_config, ".swap")?;
    if swap.needs_recovery() {
        swap.recover_from(i64::MIN)?;
    }
    let next = swap.next_offset();
    drop(swap);
    let replaced = |b: i64| b >= base && b < next.max(base + 1);
    for old in logs.iter().copied().filter(|&b| replaced(b)) {
        tracing::info!(
            base_offset = old,
            replaced_by = base,
            "completing interrupted swap: removing replaced segment"
        );
        for p in segment_files(dir, old, "") {
            remove_if_exists(&p)?;
        }
    }
    // The replaced segment at this base may have lost its `.log` to
    // `.deleted` (step 4 renames it first) and kept an index; none of its
    // files may pass for the new segment's (it may have no `.txnindex`).
    for p in segment_files(dir, base, "") {
        remove_if_exists(&p)?;
    }
    logs.retain(|&b| !replaced(b));
    for (from, to) in
        segment_files(dir, base, ".swap").into_iter().zip(segment_files(dir, base, ""))
    {
        if from.exists() {
            std::fs::rename(&from, &to).map_err(LogError::io(&from))?;
        }
    }
    logs.push(base);
    Ok(())
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io(path)(e)),
    }
}

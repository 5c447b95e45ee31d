//! The key audit's part in the object store: the copies of a key in a
//! tiered partition's store-only segments (below the local log start) and
//! when the store cleaner is bound to remove them. The store's rules differ
//! from the local ones: a store clean runs at the uploader's next look once
//! the store's dirty ratio exceeds `min.cleanable.dirty.ratio`, maps only
//! what the store's manifest lists and never rewrites its last entry; there
//! is no time-driven (`max.compaction.lag.ms`, delete horizon) schedule.

use serde::Serialize;

use std::sync::Arc;

use super::{AuditError, Bound, KeyCopy, PartitionView, Rules, SegmentFile, Throttled};
use crate::cleaner::store_segments::{FetchedSegment, StoreSegmentSource};
use crate::cleaner::throttler::Throttler;
use crate::cleaner::tiered_store::StoreCleanState;

/// The object store's part of a tiered partition (`tiered_store.rs`): the
/// offsets below the local log start, read from the store's segments.
#[derive(Debug)]
pub struct StorePart {
    /// From the log start to the local log start.
    pub offsets: std::ops::Range<i64>,
    /// The store segments holding them, oldest first, fetched one at a
    /// time as the audit reads them; or why they cannot be read (an
    /// offline audit, the store unreachable).
    pub segments: Result<Arc<dyn StoreSegmentSource>, String>,
    /// The store cleaner's last measure, if any.
    pub state: Option<StoreCleanState>,
}

/// The object store's part of an audit.
#[derive(Debug, Clone, Serialize)]
pub struct StoreAudit {
    /// Offsets only in the store: from the log start to the local log start.
    pub first_offset: i64,
    pub end_offset: i64,
    /// Why the store's segments were not read (their copies are unknown).
    pub not_read: Option<String>,
    pub segments_read: usize,
    pub bytes_read: u64,
    /// The store cleaner's clean point and dirty ratio, when it measured them.
    pub clean_offset: Option<i64>,
    pub dirty_ratio: Option<f64>,
}

/// The copies of `key` in the store's segments (those in `part.offsets`).
pub(super) fn scan_store(
    view: &PartitionView,
    part: &StorePart,
    key: &[u8],
    buf: &mut Vec<u8>,
    throttler: Option<&Throttler>,
    copies: &mut Vec<KeyCopy>,
) -> Result<StoreAudit, AuditError> {
    let mut audit = StoreAudit {
        first_offset: part.offsets.start,
        end_offset: part.offsets.end,
        not_read: None,
        segments_read: 0,
        bytes_read: 0,
        clean_offset: part.state.as_ref().map(|s| s.clean_offset),
        dirty_ratio: part.state.as_ref().map(|s| s.dirty_ratio),
    };
    let source = match &part.segments {
        Ok(source) => source,
        Err(why) => {
            audit.not_read = Some(why.clone());
            return Ok(audit);
        }
    };
    let mut found: Vec<KeyCopy> = Vec::new();
    for (i, meta) in source.segments().iter().enumerate() {
        // One fetched segment at a time: its copy is let go once scanned.
        let FetchedSegment { file, path, hold } = match source.fetch(i) {
            Ok(fetched) => fetched,
            Err(why) => {
                // What was read stays in the answer; the rest is unknown.
                audit.not_read = Some(why);
                break;
            }
        };
        let seg = SegmentFile { path, base_offset: meta.base_offset, size: meta.size, file };
        let (_, read) =
            super::scan_segment(view, &seg, key, buf, Throttled(throttler), &mut found)?;
        drop(hold);
        audit.segments_read += 1;
        audit.bytes_read += read;
    }
    copies.extend(found.into_iter().filter(|c| part.offsets.contains(&c.offset)));
    Ok(audit)
}

impl Rules<'_> {
    /// The store cleaner's measure, or why there is none to go by.
    fn store_state(&self) -> Result<&StoreCleanState, String> {
        if !self.view.cleaner.enabled {
            return Err(
                "the cleaner is off (log.cleaner.enable=false): the store is not cleaned".into()
            );
        }
        self.view
            .store
            .as_ref()
            .and_then(|s| s.state.as_ref())
            .ok_or_else(|| "the store cleaner has not measured the store yet".to_string())
    }

    /// When a store clean is bound to start: at the uploader's next look
    /// once the store's dirty ratio exceeds `min.cleanable.dirty.ratio`,
    /// assuming the store answers. Below it, only segments leaving local
    /// disk raise the ratio: the store has no time-driven schedule. A store
    /// clean that failed last gives no time.
    fn store_clean_starts_by(&self, state: &StoreCleanState) -> Bound {
        if let Some(e) = &state.last_error {
            return Err(format!("the last store clean failed ({e}); it is tried again later"));
        }
        let min = self.view.config.min_cleanable_dirty_ratio;
        if state.dirty_ratio <= min {
            return Err(format!(
                "the store's dirty ratio {:.3} is not above min.cleanable.dirty.ratio {min}: only more segments leaving local disk start a store clean (the store has no max.compaction.lag.ms schedule)",
                state.dirty_ratio
            ));
        }
        Ok(self.now_ms.saturating_add(state.check_within_ms))
    }

    /// A superseded copy in the store: gone with the first store clean
    /// that maps a newer copy (below what its map reaches: the manifest's
    /// end and the local first uncleanable offset) and rewrites its segment
    /// (not the manifest's last entry).
    pub(super) fn store_superseded_gone_by(&self, offset: i64, newer: &[i64]) -> Bound {
        let state = self.store_state()?;
        if offset >= state.last_entry_base_offset {
            return Err("its segment is the store's last, which a store clean maps but never rewrites: it is cleaned once a later segment is in the store".into());
        }
        if !newer.iter().any(|&n| n < state.map_bound) {
            return Err(format!(
                "no newer copy is where a store clean maps yet: below offset {} (what the store's manifest lists, short of the local log's first uncleanable offset)",
                state.map_bound
            ));
        }
        self.store_clean_starts_by(state)
    }

    /// The newest copy, a tombstone in the store: gone with the first store
    /// clean after its horizon, which only the store's ratio schedules.
    pub(super) fn store_tombstone_gone_by(&self, copy: &KeyCopy) -> Bound {
        let state = self.store_state()?;
        if self.view.config.tombstone_wait_for_groups {
            return Err("the topic keeps tombstones for consumer groups (sediment.tombstone.retention.wait.for.groups), whose offsets the store's clean does not see: it keeps every tombstone".into());
        }
        match copy.delete_horizon_ms {
            Some(h) if h <= self.now_ms && copy.offset < state.last_entry_base_offset => {
                self.store_clean_starts_by(state)
            }
            Some(h) => Err(format!(
                "it goes with the first store clean after its delete horizon {h} ms that rewrites its segment; only the store's dirty ratio starts one (the store has no horizon-driven schedule)"
            )),
            None => Err("its delete horizon is not stamped yet: a store clean stamps it delete.retention.ms ahead, and a later one the store's dirty ratio starts removes it".into()),
        }
    }
}

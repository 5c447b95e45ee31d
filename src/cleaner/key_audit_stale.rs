//! The key audit's part for segments kept under
//! `sediment.compaction.min.segment.garbage.ratio`: a superseded copy a
//! clean listed in its segment's `.stale` list stays until that segment is
//! rewritten, which happens at the first clean at or past the list's
//! deadline (`max.compaction.lag.ms` after the superseding record's
//! segment began), when the segment's superseded share reaches the ratio,
//! or when a tombstone of the key passes its delete horizon (that clean
//! removes the listed copies and holds the tombstone, which the next
//! clean, due at once, removes).

use std::path::Path;

use super::{Bound, KeyCopy, PartitionView, Rules};
use crate::cleaner::offset_map::hash_key;
use crate::cleaner::stale_list::StaleList;

/// The copies of `key` the lists of `view`'s segments name: (offset,
/// deadline). A list that does not match its segment's size is obsolete
/// and ignored; an unreadable one names nothing here (the next clean goes
/// back to the log start for it).
pub(super) fn listed_copies(view: &PartitionView, key: &[u8]) -> Vec<(i64, i64)> {
    let hash = hash_key(key);
    let mut out = Vec::new();
    for seg in &view.segments {
        let Some(dir) = seg.path.parent() else { continue };
        let Some(list) = read_list(dir, seg.base_offset) else { continue };
        if list.segment_size != seg.size {
            continue;
        }
        for (rel, h) in &list.entries {
            if *h == hash {
                out.push((seg.base_offset + i64::from(*rel), list.deadline_ms));
            }
        }
    }
    out
}

fn read_list(dir: &Path, base_offset: i64) -> Option<StaleList> {
    StaleList::read(&StaleList::path(dir, base_offset), base_offset).ok().flatten()
}

impl Rules<'_> {
    /// A listed copy: gone with the clean that rewrites its segment, at its
    /// list's deadline or, when the key's winner is a tombstone, with the
    /// first clean after its horizon (`tombstone`: that tombstone's bound).
    pub(super) fn listed_gone_by(&self, deadline_ms: i64, tombstone: Option<&Bound>) -> Bound {
        let backoff = self.view.cleaner.backoff_ms;
        if !self.view.cleaner.enabled {
            return Err("the cleaner is off (log.cleaner.enable=false)".into());
        }
        let by_deadline =
            (deadline_ms < i64::MAX).then(|| deadline_ms.max(self.now_ms).saturating_add(backoff));
        // The tombstone's bound is the clean after its horizon: the one
        // that removes the listed copies (the tombstone goes one later).
        let by_tombstone = tombstone.and_then(|b| b.as_ref().ok().copied());
        match (by_deadline, by_tombstone) {
            (Some(a), Some(b)) => Ok(a.min(b)),
            (Some(t), None) | (None, Some(t)) => Ok(t),
            (None, None) => Err(format!(
                "superseded, and kept in a segment whose superseded share is under sediment.compaction.min.segment.garbage.ratio={}: it leaves when that share reaches it, or when a tombstone of the key passes its horizon; max.compaction.lag.ms is not set",
                self.view.config.min_segment_garbage_ratio
            )),
        }
    }
}

/// Mark the listed copies among `copies` and bound them (and the
/// tombstone that waits for them one clean longer).
pub(super) fn assess_listed(rules: &Rules<'_>, copies: &mut [KeyCopy], listed: &[(i64, i64)]) {
    if listed.is_empty() {
        return;
    }
    let winner = copies.iter().find(|c| !c.superseded);
    let tombstone = winner.filter(|c| c.tombstone).map(|c| match c.gone_by_ms {
        Some(t) => Ok(t),
        None => Err(c.no_guarantee.clone().unwrap_or_default()),
    });
    let mut any = false;
    for copy in copies.iter_mut().filter(|c| c.superseded) {
        let Some((_, deadline)) = listed.iter().find(|(o, _)| *o == copy.offset) else { continue };
        copy.listed_stale = true;
        any = true;
        match rules.listed_gone_by(*deadline, tombstone.as_ref()) {
            Ok(t) => {
                copy.gone_by_ms = Some(t);
                copy.no_guarantee = None;
            }
            Err(why) => {
                copy.gone_by_ms = None;
                copy.no_guarantee = Some(why);
            }
        }
    }
    if !any {
        return;
    }
    // The tombstone itself goes one clean after the listed copies.
    let backoff = rules.view.cleaner.backoff_ms;
    if let Some(t) = copies.iter_mut().find(|c| !c.superseded && c.tombstone) {
        t.gone_by_ms = t.gone_by_ms.map(|g| g.saturating_add(backoff));
    }
}

//! The resurrection guard: tombstones that consumer groups have not read yet.
//!
//! A reader that lags by more than `delete.retention.ms` behind a tombstone
//! whose horizon the cleaner stamped reads past the deletion: the tombstone
//! is gone when it gets there, the old value was read before, and the key
//! comes back in its state. Two things here:
//!
//! * **At risk.** After each clean the manager keeps the tombstones the clean
//!   kept with a delete horizon ([`KeptTombstones`], oldest first, bounded to
//!   [`MAX_TRACKED_TOMBSTONES`] a partition). A tombstone is at risk for a
//!   group with committed offsets on the partition when the group's
//!   committed offset is at or below it: its horizon runs out while the
//!   group has not read it. Tombstones not yet stamped are not at risk (their
//!   horizon has not started), and one below the log start is gone anyway.
//! * **Guard.** With the sediment topic config
//!   `sediment.tombstone.retention.wait.for.groups=true`, a clean keeps a
//!   tombstone past its horizon while some group with committed offsets on
//!   the partition has committed at or below it, but never more than
//!   `sediment.tombstone.retention.max.wait.ms` past the horizon, so a dead
//!   group cannot block erasure forever. Off by default: Kafka's behaviour.
//!
//! The committed offsets come from the group coordinator through
//! [`ConsumerOffsets`], which the broker gives the manager (so `cleaner`
//! imports nothing of `group`); it is asked with no lock of the cleaner or
//! of a log held.

use serde::Serialize;

/// How many kept tombstones the manager tracks per partition; past it the
/// at-risk counts are lower bounds (`truncated`).
pub const MAX_TRACKED_TOMBSTONES: usize = 100_000;

/// What one clean of a guarded partition must respect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TombstoneGuard {
    /// The lowest committed offset of any group on the partition.
    pub min_committed: i64,
    /// The most a tombstone is kept past its horizon.
    pub max_wait_ms: i64,
}

impl TombstoneGuard {
    /// The guard of a partition whose groups committed `committed`; none
    /// when no group has offsets there (nobody to wait for).
    pub fn new(committed: &[(String, i64)], max_wait_ms: i64) -> Option<Self> {
        let min_committed = committed.iter().map(|(_, o)| *o).min()?;
        Some(Self { min_committed, max_wait_ms })
    }

    /// Whether a tombstone at `offset` whose horizon `horizon_ms` has passed
    /// at `now_ms` is kept: a group has not read it and the wait is not over.
    pub fn keeps(&self, offset: i64, horizon_ms: i64, now_ms: i64) -> bool {
        self.min_committed <= offset && now_ms < horizon_ms.saturating_add(self.max_wait_ms)
    }

    /// When a kept tombstone must go at the latest (a clean is due then).
    pub fn deadline(&self, horizon_ms: i64) -> i64 {
        horizon_ms.saturating_add(self.max_wait_ms)
    }
}

/// The tombstones a clean kept with a delete horizon: (offset, horizon),
/// ascending by offset.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptTombstones {
    entries: Vec<(i64, i64)>,
    truncated: bool,
}

impl KeptTombstones {
    /// Note one kept tombstone (offsets arrive in increasing order).
    pub fn push(&mut self, offset: i64, horizon_ms: i64) {
        if self.entries.len() < MAX_TRACKED_TOMBSTONES {
            self.entries.push((offset, horizon_ms));
        } else {
            self.truncated = true;
        }
    }

    /// Add tombstones noted out of order (a kept segment's, found by the
    /// survey before the recopy), keeping the entries ascending.
    pub fn merge(&mut self, more: &[(i64, i64)]) {
        if more.is_empty() {
            return;
        }
        self.entries.extend_from_slice(more);
        self.entries.sort_unstable_by_key(|(offset, _)| *offset);
        if self.entries.len() > MAX_TRACKED_TOMBSTONES {
            self.entries.truncate(MAX_TRACKED_TOMBSTONES);
            self.truncated = true;
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Per group with offsets on the partition: the tombstones at or above
    /// its committed offset (and at or above `log_start`), and the earliest
    /// of their horizons. Groups with none at risk are left out.
    pub fn at_risk(&self, committed: &[(String, i64)], log_start: i64) -> Vec<TombstonesAtRisk> {
        let mut out: Vec<TombstonesAtRisk> = committed
            .iter()
            .filter_map(|(group, offset)| {
                let from = (*offset).max(log_start);
                let first = self.entries.partition_point(|(o, _)| *o < from);
                let rest = &self.entries[first..];
                let earliest = rest.iter().map(|(_, h)| *h).min()?;
                Some(TombstonesAtRisk {
                    group: group.clone(),
                    committed_offset: *offset,
                    tombstones: rest.len() as u64,
                    earliest_horizon_ms: earliest,
                    at_least: self.truncated,
                })
            })
            .collect();
        out.sort_by(|a, b| a.group.cmp(&b.group));
        out
    }
}

/// Tombstones one group has not read yet whose horizons are running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TombstonesAtRisk {
    pub group: String,
    pub committed_offset: i64,
    pub tombstones: u64,
    /// When the first of them may be removed.
    pub earliest_horizon_ms: i64,
    /// More tombstones were kept than are tracked: the count is a lower bound.
    pub at_least: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(list: &[(&str, i64)]) -> Vec<(String, i64)> {
        list.iter().map(|(g, o)| (g.to_string(), *o)).collect()
    }

    #[test]
    fn at_risk_counts_what_each_group_has_not_read() {
        let mut kept = KeptTombstones::default();
        for (o, h) in [(10, 500), (20, 300), (30, 400)] {
            kept.push(o, h);
        }
        let risk = kept.at_risk(&groups(&[("slow", 15), ("done", 31), ("on-it", 30)]), 0);
        assert_eq!(risk.len(), 2, "done has read them all: {risk:?}");
        let slow = risk.iter().find(|r| r.group == "slow").unwrap();
        assert_eq!((slow.tombstones, slow.earliest_horizon_ms), (2, 300));
        let on_it = risk.iter().find(|r| r.group == "on-it").unwrap();
        assert_eq!((on_it.tombstones, on_it.earliest_horizon_ms), (1, 400));
        // Below the log start they are gone: not at risk.
        let risk = kept.at_risk(&groups(&[("slow", 0)]), 25);
        assert_eq!(risk[0].tombstones, 1);
    }

    #[test]
    fn the_guard_waits_for_the_slowest_group_up_to_the_cap() {
        assert_eq!(TombstoneGuard::new(&[], 1_000), None, "no group: nobody to wait for");
        let g = TombstoneGuard::new(&groups(&[("a", 50), ("b", 5)]), 1_000).unwrap();
        assert_eq!(g.min_committed, 5);
        assert!(g.keeps(5, 100, 200), "b has not read offset 5");
        assert!(!g.keeps(4, 100, 200), "every group is past offset 4");
        assert!(g.keeps(7, 100, 1_099));
        assert!(!g.keeps(7, 100, 1_100), "the cap");
        assert_eq!(g.deadline(100), 1_100);
    }

    #[test]
    fn tracking_is_bounded() {
        let mut kept = KeptTombstones::default();
        for o in 0..MAX_TRACKED_TOMBSTONES as i64 + 5 {
            kept.push(o, 1);
        }
        assert_eq!(kept.len(), MAX_TRACKED_TOMBSTONES);
        assert!(kept.at_risk(&groups(&[("g", 0)]), 0)[0].at_least);
    }
}

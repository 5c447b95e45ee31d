//! Replication throttles (Kafka's `ReplicationQuotaManager`, KIP-73): a
//! bound in bytes per second on the records a broker sends to followers as
//! leader (`leader.replication.throttled.rate`) and fetches as follower
//! (`follower.replication.throttled.rate`), counting only the replicas its
//! topics name in `leader/follower.replication.throttled.replicas`, which
//! `kafka-reassign-partitions --throttle` sets for the replicas it moves.
//!
//! Invariants (Kafka's):
//! * Only a replica outside the ISR (on the leader) or behind its leader's
//!   high watermark (on the follower) is ever held back, so a throttle never
//!   slows replication of what is already in sync or shrinks an ISR.
//! * Held back means left out of the fetch, never cut short: a partition is
//!   skipped while the measured rate exceeds the bound, and every throttled
//!   partition's bytes are counted once fetched.
//! * The rate is Kafka's sampled rate: `replication.quota.window.num`
//!   windows of `replication.quota.window.size.seconds`, measured over at
//!   least all but one of them, so a fresh throttle lets through about
//!   (windows − 1) seconds' worth before it holds anything back.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::config_def::{broker_key, ConfigDef, ConfigValues};

pub const LEADER_REPLICATION_THROTTLED_RATE: ConfigDef = broker_key!(
    "leader.replication.throttled.rate",
    Long,
    "9223372036854775807",
    Some(0.0),
    "replication: bytes per second this broker sends, as leader, to the replicas its topics list in leader.replication.throttled.replicas (outside the ISR only); dynamic, per broker or cluster-wide"
);
pub const FOLLOWER_REPLICATION_THROTTLED_RATE: ConfigDef = broker_key!(
    "follower.replication.throttled.rate",
    Long,
    "9223372036854775807",
    Some(0.0),
    "replication: bytes per second this broker fetches, as follower, for the replicas its topics list in follower.replication.throttled.replicas (while behind the leader only); dynamic, per broker or cluster-wide"
);
pub const REPLICATION_QUOTA_WINDOW_NUM: ConfigDef = broker_key!(
    "replication.quota.window.num",
    Int,
    "11",
    Some(1.0),
    "replication: samples the throttled rate is measured over"
);
pub const REPLICATION_QUOTA_WINDOW_SIZE_SECONDS: ConfigDef = broker_key!(
    "replication.quota.window.size.seconds",
    Int,
    "1",
    Some(1.0),
    "replication: seconds each sample of the throttled rate spans"
);

/// The two rates, which a running broker may change.
pub const RECONFIGURABLE_RATES: [&ConfigDef; 2] =
    [&LEADER_REPLICATION_THROTTLED_RATE, &FOLLOWER_REPLICATION_THROTTLED_RATE];

/// One side's throttle.
#[derive(Debug)]
pub struct ReplicationQuota {
    /// Bytes per second; `i64::MAX` (Kafka's default) or more is no throttle.
    bound: AtomicU64,
    rate: Mutex<SampledRate>,
}

/// A broker's two throttles.
#[derive(Debug)]
pub struct ReplicationQuotas {
    pub leader: ReplicationQuota,
    pub follower: std::sync::Arc<ReplicationQuota>,
}

impl Default for ReplicationQuotas {
    /// Kafka's windows, no throttle.
    fn default() -> Self {
        Self {
            leader: ReplicationQuota::new(11, 1000),
            follower: std::sync::Arc::new(ReplicationQuota::new(11, 1000)),
        }
    }
}

impl ReplicationQuotas {
    /// Windows and bounds from `values`.
    pub fn from_values(values: &dyn ConfigValues) -> Self {
        let windows = values.int(&REPLICATION_QUOTA_WINDOW_NUM).clamp(1, 1000) as usize;
        let window_ms = values.int(&REPLICATION_QUOTA_WINDOW_SIZE_SECONDS).clamp(1, 3600) * 1000;
        let quotas = Self {
            leader: ReplicationQuota::new(windows, window_ms),
            follower: std::sync::Arc::new(ReplicationQuota::new(windows, window_ms)),
        };
        quotas.set_bounds(values);
        quotas
    }

    /// The bounds `values` give (after a dynamic change).
    pub fn set_bounds(&self, values: &dyn ConfigValues) {
        let bound = |def: &ConfigDef| values.int(def).max(0) as u64;
        self.leader.set_bound(bound(&LEADER_REPLICATION_THROTTLED_RATE));
        self.follower.set_bound(bound(&FOLLOWER_REPLICATION_THROTTLED_RATE));
    }
}

impl ReplicationQuota {
    pub fn new(windows: usize, window_ms: i64) -> Self {
        let rate = SampledRate { samples: VecDeque::new(), windows, window_ms };
        Self { bound: AtomicU64::new(i64::MAX as u64), rate: Mutex::new(rate) }
    }

    pub fn set_bound(&self, bytes_per_second: u64) {
        let before = self.bound.swap(bytes_per_second, Ordering::Relaxed);
        if before != bytes_per_second {
            tracing::info!(bytes_per_second, "replication throttle changed");
        }
    }

    /// The bound in bytes per second, `None` when unthrottled.
    pub fn bound(&self) -> Option<u64> {
        Some(self.bound.load(Ordering::Relaxed)).filter(|b| *b < i64::MAX as u64)
    }

    /// Whether throttled partitions are held back now.
    pub fn is_exceeded(&self, now_ms: i64) -> bool {
        self.bound().is_some_and(|bound| self.rate.lock().measure(now_ms) > bound as f64)
    }

    /// Count `bytes` of throttled partitions fetched or sent.
    pub fn record(&self, bytes: u64, now_ms: i64) {
        if bytes > 0 {
            self.rate.lock().record(bytes, now_ms);
        }
    }

    /// The measured rate in bytes per second (Kafka's `byte-rate`).
    pub fn byte_rate(&self, now_ms: i64) -> f64 {
        self.rate.lock().measure(now_ms)
    }
}

/// Kafka's `Rate` over a `SampledStat`: bytes per sample window.
#[derive(Debug)]
struct SampledRate {
    /// (window start ms, bytes), oldest first.
    samples: VecDeque<(i64, u64)>,
    windows: usize,
    window_ms: i64,
}

impl SampledRate {
    fn purge(&mut self, now_ms: i64) {
        let expired = now_ms - self.window_ms * self.windows as i64;
        self.samples.retain(|(start, _)| *start > expired);
    }

    fn record(&mut self, bytes: u64, now_ms: i64) {
        self.purge(now_ms);
        match self.samples.back_mut() {
            Some((start, sum)) if now_ms < *start + self.window_ms => *sum += bytes,
            _ => {
                self.samples.push_back((now_ms, bytes));
                if self.samples.len() > self.windows {
                    self.samples.pop_front();
                }
            }
        }
    }

    /// The bytes of the live samples over the time they span, at least
    /// `windows - 1` windows (Kafka's `Rate.windowSize`).
    fn measure(&mut self, now_ms: i64) -> f64 {
        self.purge(now_ms);
        let total: u64 = self.samples.iter().map(|(_, b)| b).sum();
        let oldest = self.samples.front().map_or(now_ms, |(start, _)| *start);
        let elapsed = (now_ms - oldest).max(0);
        let (full_windows, least) = (elapsed / self.window_ms, self.windows as i64 - 1);
        let elapsed = elapsed + (least - full_windows).max(0) * self.window_ms;
        let seconds = elapsed.max(1) as f64 / 1000.0;
        total as f64 / seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unbounded_quota_is_never_exceeded() {
        let q = ReplicationQuota::new(11, 1000);
        q.set_bound(i64::MAX as u64);
        q.record(u64::MAX / 2, 0);
        assert!(!q.is_exceeded(1));
        assert_eq!(q.bound(), None);
    }

    #[test]
    fn the_rate_is_measured_over_at_least_all_but_one_window() {
        let q = ReplicationQuota::new(11, 1000);
        q.set_bound(100);
        // 1,000 bytes at once: 1,000 / 10 s = 100 B/s, not above the bound.
        q.record(1000, 0);
        assert_eq!(q.byte_rate(0), 100.0);
        assert!(!q.is_exceeded(0));
        // 1,100 bytes over 10.5 s (half a window, plus the nine missing).
        q.record(100, 500);
        assert!(q.is_exceeded(500), "{}", q.byte_rate(500));
    }

    #[test]
    fn old_samples_expire_and_release_the_throttle() {
        let q = ReplicationQuota::new(3, 1000);
        q.set_bound(100);
        q.record(1000, 0);
        assert!(q.is_exceeded(100));
        // Three windows later the sample is gone.
        assert!(!q.is_exceeded(3000));
        assert_eq!(q.byte_rate(3000), 0.0);
    }

    #[test]
    fn samples_fill_one_window_each_and_keep_only_the_last_n() {
        let mut r = SampledRate { samples: VecDeque::new(), windows: 2, window_ms: 1000 };
        r.record(10, 0);
        r.record(10, 999);
        r.record(10, 1000);
        r.record(10, 1500);
        assert_eq!(r.samples, [(0, 20), (1000, 20)]);
        // 40 bytes over 1.5 s since the oldest window's start.
        assert!((r.measure(1500) - 40.0 / 1.5).abs() < 1e-9);
        r.record(1, 2000);
        assert_eq!(r.samples, [(1000, 20), (2000, 1)]);
    }

    #[test]
    fn a_lowered_bound_takes_effect_at_once() {
        let q = ReplicationQuota::new(11, 1000);
        q.record(5000, 0);
        assert!(!q.is_exceeded(0));
        q.set_bound(10);
        assert!(q.is_exceeded(0));
    }
}

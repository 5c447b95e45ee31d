//! `Throttler`: the I/O budget all cleaner threads share
//! (`log.cleaner.io.max.bytes.per.second`, read plus write bytes).
//!
//! Each thread reports the bytes of every chunk it read or wrote. Once at
//! least `check_interval_ms` has passed since the current period began, or
//! the period has used a whole interval's budget (so a burst cannot slip
//! through between two checks), the observed rate is compared with the
//! desired one; above it, the reporting
//! thread sleeps just long enough for the period's average to come down to the
//! desired rate, then a new period begins. The lock is held while sleeping on
//! purpose: the budget is shared, so every thread waits out the excess.
//!
//! The limit may be changed while threads run (`log.cleaner.io.max.bytes.per.second`
//! altered dynamically): the new rate applies from the next report, and the
//! current period starts over so the old rate's history does not count.
//!
//! Time comes from the injected [`Clock`](crate::clock::Clock) and sleeping
//! from an injected [`Sleeper`], so tests drive the throttle with a mock clock
//! and record the sleeps instead of waiting.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::clock::SharedClock;

/// How the throttle waits. Production sleeps the thread; tests advance a mock clock.
pub type Sleeper = Arc<dyn Fn(i64) + Send + Sync>;

/// The real sleeper.
pub fn thread_sleeper() -> Sleeper {
    Arc::new(|ms: i64| {
        if ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(ms as u64));
        }
    })
}

/// Kafka's check interval for the cleaner's throttle.
pub const DEFAULT_CHECK_INTERVAL_MS: i64 = 300;

#[derive(Debug)]
struct Period {
    start_ms: i64,
    observed: f64,
}

/// A shared bytes-per-second limit.
pub struct Throttler {
    /// The limit's `f64` bits (changed live by [`Throttler::set_desired_per_sec`]).
    desired_per_sec: std::sync::atomic::AtomicU64,
    check_interval_ms: i64,
    clock: SharedClock,
    sleeper: Sleeper,
    period: Mutex<Period>,
    total_sleep_ms: std::sync::atomic::AtomicI64,
    /// Every byte reported, throttled or not (the cleaner's I/O counter).
    total_bytes: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Throttler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Throttler")
            .field("desired_per_sec", &self.desired_per_sec())
            .field("check_interval_ms", &self.check_interval_ms)
            .finish()
    }
}

impl Throttler {
    /// A throttle at `desired_per_sec` bytes per second (infinite, `f64::MAX` or non-positive: none).
    pub fn new(
        desired_per_sec: f64,
        check_interval_ms: i64,
        clock: SharedClock,
        sleeper: Sleeper,
    ) -> Self {
        let start_ms = clock.now_ms();
        Self {
            desired_per_sec: std::sync::atomic::AtomicU64::new(desired_per_sec.to_bits()),
            check_interval_ms: check_interval_ms.max(1),
            clock,
            sleeper,
            period: Mutex::new(Period { start_ms, observed: 0.0 }),
            total_sleep_ms: std::sync::atomic::AtomicI64::new(0),
            total_bytes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// No limit (Kafka's default of `Double.MAX_VALUE`).
    pub fn unlimited(clock: SharedClock) -> Self {
        Self::new(f64::INFINITY, DEFAULT_CHECK_INTERVAL_MS, clock, thread_sleeper())
    }

    pub fn is_unlimited(&self) -> bool {
        // Kafka's default, Double.MAX_VALUE, means no limit too.
        let desired = self.desired_per_sec();
        !(desired.is_finite() && desired > 0.0 && desired < f64::MAX)
    }

    /// Change the limit (infinite or non-positive: none); the current
    /// period starts over.
    pub fn set_desired_per_sec(&self, desired_per_sec: f64) {
        let mut period = self.period.lock();
        self.desired_per_sec.store(desired_per_sec.to_bits(), std::sync::atomic::Ordering::Relaxed);
        period.start_ms = self.clock.now_ms();
        period.observed = 0.0;
    }

    /// Milliseconds slept so far, over all threads.
    pub fn total_sleep_ms(&self) -> i64 {
        self.total_sleep_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes of I/O reported so far (read plus write), over all threads.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The limit in bytes per second (infinite when unlimited).
    pub fn desired_per_sec(&self) -> f64 {
        f64::from_bits(self.desired_per_sec.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Account `bytes` of I/O and sleep if the shared rate is over the limit.
    pub fn maybe_throttle(&self, bytes: u64) {
        self.total_bytes.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        if self.is_unlimited() {
            return;
        }
        let mut period = self.period.lock();
        let desired = self.desired_per_sec();
        period.observed += bytes as f64;
        let now = self.clock.now_ms();
        let elapsed = now - period.start_ms;
        // Check at the end of each interval, or earlier once a whole interval's
        // budget is spent: otherwise a burst inside one interval (a small clean
        // right after a quiet spell) would go unthrottled.
        let interval_budget = desired * self.check_interval_ms as f64 / 1000.0;
        if elapsed < self.check_interval_ms && period.observed < interval_budget {
            return;
        }
        let rate = period.observed * 1000.0 / elapsed.max(1) as f64;
        if rate > desired {
            // The sleep that brings this period's average down to the desired rate.
            let target_ms = (period.observed * 1000.0 / desired) as i64;
            let sleep_ms = target_ms - elapsed;
            if sleep_ms > 0 {
                tracing::trace!(rate, sleep_ms, "cleaner I/O over its limit; sleeping");
                (self.sleeper)(sleep_ms);
                self.total_sleep_ms.fetch_add(sleep_ms, std::sync::atomic::Ordering::Relaxed);
            }
        }
        period.start_ms = self.clock.now_ms();
        period.observed = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, MockClock};

    fn mock(rate: f64) -> (Arc<MockClock>, Arc<Mutex<Vec<i64>>>, Throttler) {
        let clock = MockClock::new(1_000);
        let sleeps = Arc::new(Mutex::new(Vec::new()));
        let (c, s) = (Arc::clone(&clock), Arc::clone(&sleeps));
        let sleeper: Sleeper = Arc::new(move |ms| {
            s.lock().push(ms);
            c.advance(ms);
        });
        let throttler = Throttler::new(rate, 100, clock.clone(), sleeper);
        (clock, sleeps, throttler)
    }

    #[test]
    fn sleeps_to_bring_the_rate_down() {
        // 1000 bytes/s; 50 bytes then 300 bytes in 100 ms is 3500 bytes/s: sleep until 350 ms have passed.
        let (clock, sleeps, t) = mock(1000.0);
        t.maybe_throttle(50);
        clock.advance(100);
        t.maybe_throttle(300);
        assert_eq!(*sleeps.lock(), vec![250]);
        assert_eq!(t.total_sleep_ms(), 250);
    }

    #[test]
    fn a_burst_inside_one_interval_is_throttled_at_once() {
        // 1000 bytes/s and a 100 ms interval: 100 bytes is an interval's budget.
        // 500 bytes with no time passing must not wait for the interval to end.
        let (_clock, sleeps, t) = mock(1000.0);
        t.maybe_throttle(99);
        assert!(sleeps.lock().is_empty(), "under one interval's budget");
        t.maybe_throttle(401);
        assert_eq!(*sleeps.lock(), vec![500], "500 bytes at 1000 bytes/s take 500 ms");
    }

    #[test]
    fn under_the_rate_never_sleeps() {
        let (clock, sleeps, t) = mock(1_000_000.0);
        for _ in 0..100 {
            t.maybe_throttle(1000);
            clock.advance(10);
        }
        assert!(sleeps.lock().is_empty());
    }

    #[test]
    fn long_run_average_matches_the_limit() {
        let (clock, _sleeps, t) = mock(10_000.0);
        let start = clock.now_ms();
        let mut total = 0u64;
        for _ in 0..1000 {
            t.maybe_throttle(512);
            total += 512;
            clock.advance(1);
        }
        // Close the last period: the limit holds over completed periods.
        clock.advance(100);
        t.maybe_throttle(0);
        let secs = (clock.now_ms() - start) as f64 / 1000.0;
        let rate = total as f64 / secs;
        assert!(rate <= 10_000.0 * 1.01, "rate {rate}");
        assert!(rate >= 10_000.0 * 0.9, "rate {rate}");
    }

    #[test]
    fn a_new_limit_applies_from_the_next_report() {
        let (clock, sleeps, t) = mock(1000.0);
        t.maybe_throttle(50);
        t.set_desired_per_sec(f64::MAX);
        assert!(t.is_unlimited());
        t.maybe_throttle(10_000);
        assert!(sleeps.lock().is_empty(), "unlimited now");
        t.set_desired_per_sec(2000.0);
        assert_eq!(t.desired_per_sec(), 2000.0);
        clock.advance(100);
        t.maybe_throttle(400);
        // 400 bytes at 2000 bytes/s take 200 ms; the bytes before the change do not count.
        assert_eq!(*sleeps.lock(), vec![100]);
    }

    #[test]
    fn unlimited_is_free() {
        let t = Throttler::unlimited(MockClock::new(0));
        assert!(t.is_unlimited());
        t.maybe_throttle(u64::MAX / 2);
        assert_eq!(t.total_sleep_ms(), 0);
    }
}

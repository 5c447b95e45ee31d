//! Injected time. Lag, horizons, roll and retention decisions and the cleaner's
//! throttle read a `Clock`, so tests move time instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Wall-clock milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// Milliseconds of a clock that never goes back and counts a suspend
    /// (`CLOCK_BOOTTIME`), for deadlines that must hold against another
    /// machine's timer (a cluster's lease timer); a mock clock's time.
    fn boot_ms(&self) -> i64 {
        self.now_ms()
    }
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }

    fn boot_ms(&self) -> i64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given, nothing else.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        assert_eq!(rc, 0, "CLOCK_BOOTTIME is always there on Linux");
        ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
    }
}

/// A clock tests set and advance by hand.
#[derive(Debug, Default)]
pub struct MockClock(AtomicI64);

impl MockClock {
    pub fn new(start_ms: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(start_ms)))
    }
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
    pub fn set(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for MockClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

pub type SharedClock = Arc<dyn Clock>;

pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

//! Test-only crash injection for the real binary: with the environment
//! variable `SEDIMENT_TXN_CRASH_POINT` set when the broker starts, the
//! process SIGKILLs itself at that step of ending a transaction (the crash
//! protocol of `end_txn`), so the integration tests
//! (`tests/txn_crash.rs`) kill it at a known step instead of hoping a random
//! kill lands there. Never set it in production: the broker dies on purpose.
//!
//! Values (read once, when the coordinator is built):
//! * `after-prepare`: the Prepare record is appended, no marker is written;
//! * `after-markers:K`: K markers are written and at least one is left (a
//!   transaction with K or fewer partitions does not stop here);
//! * `after-markers`: every marker is written, the Complete record is not.
//!
//! It fires on the first transaction that reaches the step, whoever ends it
//! (EndTxn, a fence, a timeout abort, the completion of a loaded
//! transaction). A value it cannot parse is logged and ignored.
//!
//! The library tests need no hook: their marker writer copies the log dir at
//! the crash point (`coordinator_restart_tests`).

/// The environment variable read at start.
pub const TXN_CRASH_POINT_ENV: &str = "SEDIMENT_TXN_CRASH_POINT";

/// Where ending a transaction kills the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnCrashPoint {
    /// After the Prepare record, before any marker.
    AfterPrepare,
    /// After this many markers, when more are left.
    AfterMarkers(usize),
    /// After every marker, before the Complete record.
    AfterAllMarkers,
}

impl TxnCrashPoint {
    /// Parse a value of [`TXN_CRASH_POINT_ENV`].
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "after-prepare" => Some(Self::AfterPrepare),
            "after-markers" => Some(Self::AfterAllMarkers),
            v => {
                let k = v.strip_prefix("after-markers:")?.parse().ok()?;
                (k > 0).then_some(Self::AfterMarkers(k))
            }
        }
    }

    /// The crash point the environment asks for, if any.
    pub fn from_env() -> Option<Self> {
        let value = std::env::var(TXN_CRASH_POINT_ENV).ok()?;
        let point = Self::parse(&value);
        match point {
            Some(p) => {
                tracing::warn!("{TXN_CRASH_POINT_ENV}={value}: test-only, crashing at {p:?}")
            }
            None => tracing::error!("{TXN_CRASH_POINT_ENV}={value} is not a crash point; ignored"),
        }
        point
    }

    /// Whether the step reached, with `written` of `total` markers written,
    /// is this point. Called before the first marker (`written` 0) and after
    /// each one.
    pub fn is_reached(self, written: usize, total: usize) -> bool {
        match self {
            Self::AfterPrepare => written == 0,
            Self::AfterMarkers(k) => written == k && k < total,
            Self::AfterAllMarkers => written == total,
        }
    }

    /// Kill this process with SIGKILL at once: no destructor, no flush, no
    /// shutdown step runs, exactly as `kill -9` from outside.
    pub fn crash(self, transactional_id: &str) -> ! {
        tracing::warn!(transactional_id, "{TXN_CRASH_POINT_ENV}: SIGKILL at {self:?}");
        // SAFETY: kill(2) with this process's own pid; no memory is touched.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        // SIGKILL cannot be caught; should it not be delivered at once, no
        // further step may run.
        std::process::abort()
    }
}

#[cfg(test)]
mod tests {
    use super::TxnCrashPoint::{self, *};

    #[test]
    fn values_parse_and_garbage_does_not() {
        assert_eq!(TxnCrashPoint::parse("after-prepare"), Some(AfterPrepare));
        assert_eq!(TxnCrashPoint::parse("after-markers"), Some(AfterAllMarkers));
        assert_eq!(TxnCrashPoint::parse("after-markers:2"), Some(AfterMarkers(2)));
        for bad in ["", "after-markers:0", "after-markers:x", "before-prepare", "after-markers:"] {
            assert_eq!(TxnCrashPoint::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn each_point_is_reached_once_at_its_step() {
        let steps = |p: TxnCrashPoint, total| -> Vec<usize> {
            (0..=total).filter(|&w| p.is_reached(w, total)).collect()
        };
        assert_eq!(steps(AfterPrepare, 3), [0]);
        assert_eq!(steps(AfterMarkers(1), 3), [1]);
        assert_eq!(steps(AfterMarkers(3), 3), Vec::<usize>::new(), "not some but all");
        assert_eq!(steps(AfterAllMarkers, 3), [3]);
        assert_eq!(steps(AfterAllMarkers, 0), [0]);
    }
}

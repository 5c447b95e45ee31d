//! Test-only crash injection for the real binary: with the environment
//! variable `SEDIMENT_REMOTE_CRASH_POINT` set when the broker starts, the
//! process SIGKILLs itself the first time an upload round reaches that step,
//! so the integration tests (`tests/remote_faults.rs`) kill it at a known
//! step of the manifest switch instead of hoping a random kill lands there.
//! Never set it in production: the broker dies on purpose.
//!
//! Values (read once, when the uploader starts):
//! * `before-manifest`: the round's objects are uploaded and read back, its
//!   manifest is not written;
//! * `after-manifest`: the manifest is written, the round's sweep has not run;
//! * `mid-sweep`: a sweep deleted objects, the manifests it found out of date
//!   are not deleted yet;
//! * `store-clean-before-manifest`: a store clean's segments are uploaded and
//!   read back, its manifest is not written (`store_cleaner`);
//! * `store-clean-after-manifest`: its manifest is written.
//!
//! A value it cannot parse is logged and ignored.

use std::sync::OnceLock;

/// The environment variable read at start.
pub const REMOTE_CRASH_POINT_ENV: &str = "SEDIMENT_REMOTE_CRASH_POINT";

/// Where an upload round kills the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteCrashPoint {
    BeforeManifest,
    AfterManifest,
    MidSweep,
    StoreCleanBeforeManifest,
    StoreCleanAfterManifest,
}

static POINT: OnceLock<Option<RemoteCrashPoint>> = OnceLock::new();

impl RemoteCrashPoint {
    /// Parse a value of [`REMOTE_CRASH_POINT_ENV`].
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "before-manifest" => Some(Self::BeforeManifest),
            "after-manifest" => Some(Self::AfterManifest),
            "mid-sweep" => Some(Self::MidSweep),
            "store-clean-before-manifest" => Some(Self::StoreCleanBeforeManifest),
            "store-clean-after-manifest" => Some(Self::StoreCleanAfterManifest),
            _ => None,
        }
    }
}

/// Read the environment once (later calls keep the first answer).
pub fn init() -> Option<RemoteCrashPoint> {
    *POINT.get_or_init(|| {
        let value = std::env::var(REMOTE_CRASH_POINT_ENV).ok()?;
        let point = RemoteCrashPoint::parse(&value);
        match point {
            Some(p) => {
                tracing::warn!("{REMOTE_CRASH_POINT_ENV}={value}: test-only, crashing at {p:?}")
            }
            None => {
                tracing::error!("{REMOTE_CRASH_POINT_ENV}={value} is not a crash point; ignored")
            }
        }
        point
    })
}

/// Kill this process with SIGKILL if `step` is the configured crash point:
/// no destructor, no flush, no shutdown step runs, exactly as `kill -9`.
pub fn reached(step: RemoteCrashPoint) {
    if init() != Some(step) {
        return;
    }
    tracing::warn!("{REMOTE_CRASH_POINT_ENV}: SIGKILL at {step:?}");
    // SAFETY: kill(2) with this process's own pid; no memory is touched.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL cannot be caught; should it not be delivered at once, no
    // further step may run.
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::RemoteCrashPoint::{self, *};

    #[test]
    fn values_parse_and_garbage_does_not() {
        assert_eq!(RemoteCrashPoint::parse("before-manifest"), Some(BeforeManifest));
        assert_eq!(RemoteCrashPoint::parse(" after-manifest\n"), Some(AfterManifest));
        assert_eq!(RemoteCrashPoint::parse("mid-sweep"), Some(MidSweep));
        for bad in ["", "mid", "after-manifest:1", "before_manifest"] {
            assert_eq!(RemoteCrashPoint::parse(bad), None, "{bad}");
        }
    }
}

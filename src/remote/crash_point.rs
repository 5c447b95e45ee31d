//! Test-only crash points of tiered storage, as fail points
//! (`crate::failpoint`): a broker started with `FAILPOINTS=<name>=return`
//! SIGKILLs itself the first time an upload round reaches that step, so the
//! integration tests (`tests/remote/remote_faults.rs`,
//! `tests/remote/remote_store_compaction.rs`) kill it at a known step of the
//! manifest switch instead of hoping a random kill lands there.

use crate::failpoint;

/// The round's objects are uploaded and read back, its manifest is not written.
pub const BEFORE_MANIFEST: &str = "remote-before-manifest";
/// The manifest is written, the round's sweep has not run.
pub const AFTER_MANIFEST: &str = "remote-after-manifest";
/// A sweep deleted objects, the manifests it found out of date are not deleted yet.
pub const MID_SWEEP: &str = "remote-mid-sweep";
/// A store clean's segments are uploaded and read back, its manifest is
/// not written (`store_cleaner`).
pub const STORE_CLEAN_BEFORE_MANIFEST: &str = "remote-store-clean-before-manifest";
/// A store clean's manifest is written.
pub const STORE_CLEAN_AFTER_MANIFEST: &str = "remote-store-clean-after-manifest";

/// Every step, in the order a round meets them.
pub const ALL: &[&str] = &[
    BEFORE_MANIFEST,
    AFTER_MANIFEST,
    MID_SWEEP,
    STORE_CLEAN_BEFORE_MANIFEST,
    STORE_CLEAN_AFTER_MANIFEST,
];

/// Kill this process with SIGKILL if `step` is a configured crash point.
pub fn reached(step: &'static str) {
    if failpoint::fires(step, |_| true) {
        failpoint::kill_process(step);
    }
}

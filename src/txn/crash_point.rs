//! Test-only crash points of ending a transaction (the crash protocol of
//! `end_txn`), as fail points (`crate::failpoint`): a broker started with
//! `FAILPOINTS=<name>=return[(K)]` SIGKILLs itself at that step, so the
//! integration tests (`tests/txn/txn_crash.rs`) kill it at a known step
//! instead of hoping a random kill lands there.
//!
//! * [`AFTER_PREPARE`]: the Prepare record is appended, no marker is written;
//! * [`AFTER_MARKERS`] with `return(K)`: K markers are written and at least
//!   one is left (a transaction with K or fewer partitions does not stop
//!   here); with a bare `return`: every marker is written, the Complete
//!   record is not.
//!
//! It fires on the first transaction that reaches the step, whoever ends it
//! (EndTxn, a fence, a timeout abort, the completion of a loaded
//! transaction). The library tests need no hook: their marker writer copies
//! the log dir at the crash point (`coordinator_restart_tests`).

use crate::failpoint;

/// After the Prepare record, before any marker.
pub const AFTER_PREPARE: &str = "txn-after-prepare";
/// After K markers (its argument) when more are left; bare: after all.
pub const AFTER_MARKERS: &str = "txn-after-markers";

/// Whether the step reached, with `written` of `total` markers written, is
/// the one `after_markers` (the argument of [`AFTER_MARKERS`]) names.
fn after_markers_reached(after_markers: Option<&str>, written: usize, total: usize) -> bool {
    match after_markers.map(str::trim) {
        None | Some("") => written == total,
        Some(k) => k.parse::<usize>().is_ok_and(|k| k > 0 && written == k && k < total),
    }
}

/// Called before the first marker (`written` 0) and after each one: SIGKILL
/// the process if this step is a configured crash point.
pub(super) fn maybe_crash(transactional_id: &str, written: usize, total: usize) {
    let step = if written == 0 && failpoint::fires(AFTER_PREPARE, |_| true) {
        Some(AFTER_PREPARE)
    } else if failpoint::fires(AFTER_MARKERS, |k| {
        after_markers_reached(k.as_deref(), written, total)
    }) {
        Some(AFTER_MARKERS)
    } else {
        None
    };
    if let Some(step) = step {
        tracing::warn!(transactional_id, written, total, "crash point {step}");
        failpoint::kill_process(step);
    }
}

#[cfg(test)]
mod tests {
    use super::after_markers_reached;

    #[test]
    fn each_point_is_reached_once_at_its_step() {
        let steps = |k: Option<&str>, total| -> Vec<usize> {
            (0..=total).filter(|&w| after_markers_reached(k, w, total)).collect()
        };
        assert_eq!(steps(Some("1"), 3), [1]);
        assert_eq!(steps(Some("3"), 3), Vec::<usize>::new(), "not some but all");
        assert_eq!(steps(None, 3), [3]);
        assert_eq!(steps(None, 0), [0]);
        for bad in ["0", "x", "-1"] {
            assert_eq!(steps(Some(bad), 3), Vec::<usize>::new(), "{bad}");
        }
    }
}

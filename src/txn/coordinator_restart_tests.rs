//! Restart after a crash at each step of the end-of-transaction protocol
//! (`end_txn`'s module doc): the marker writer copies the log dir at the
//! crash point (what a killed process leaves: every append is a `pwrite`),
//! then a new LogManager, state manager and coordinator open the copy, and
//! the transaction must finish as Kafka's coordinator finishes it after a
//! failover: every marker written again with the stored producer id and
//! epoch, then the Complete record, and the producer carries on.

use crate::clock::MockClock;
use crate::txn::marker_writer::TransactionResult::{self, Abort, Commit};
use crate::txn::test_support::*;
use crate::txn::transaction_metadata::TransactionState::{self, *};

const PARTITIONS: [(&str, i32); 3] = [("__consumer_offsets", 2), ("a", 0), ("b", 1)];

fn complete_state(result: TransactionResult) -> (TransactionState, TransactionState) {
    match result {
        Commit => (PrepareCommit, CompleteCommit),
        Abort => (PrepareAbort, CompleteAbort),
    }
}

/// EndTxn(`result`) crashing after `k` of the 3 markers; then the restart.
fn crash_during_end_txn(k: usize, result: TransactionResult) {
    let (live, image) =
        (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let clock = MockClock::new(NOW);
    let node = open(live.path(), &clock);
    let p = begin(&node, ID, &PARTITIONS);
    node.writer.crash_after(k, live.path(), image.path());
    node.coordinator.end_transaction(ID, p.producer_id, p.epoch, result).expect("decided");
    let before_crash = node.writer.written();
    assert_eq!(before_crash.len(), k);
    drop(node);

    clock.advance(10);
    let node = open_unloaded(image.path(), &clock);
    let outcome = node.coordinator.load();
    let (prepare, complete) = complete_state(result);
    let found: Vec<_> = outcome
        .pending_completion
        .iter()
        .map(|m| (m.transactional_id.as_str(), m.state()))
        .collect();
    assert_eq!(found, [(ID, prepare)], "k = {k}");
    // Every marker again, in order, with the stored producer id and epoch.
    let all: Vec<_> = PARTITIONS.iter().map(|(t, n)| (tp(t, *n), marker(p, result))).collect();
    assert_eq!(node.writer.written(), all, "k = {k}");
    assert_eq!(before_crash[..], all[..k], "k = {k}: the first run wrote a prefix");
    let st: Vec<_> = states(&node, ID).into_iter().flatten().collect();
    assert_eq!(st, [Empty, Ongoing, prepare, complete], "k = {k}");
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.pending_state(), m.producer_epoch), (complete, None, p.epoch));
    assert!(m.partitions.is_empty());
    assert!(node.coordinator.pending_completion_ids().is_empty());
    // The client's retry of EndTxn is answered NONE; the producer carries on.
    node.coordinator.end_transaction(ID, p.producer_id, p.epoch, result).expect("retry");
    let next = node.coordinator.init_producer_id(ID, TIMEOUT, None).expect("init");
    assert_eq!(next, pe(p.producer_id, p.epoch + 1));
    let other = node.coordinator.init_producer_id("other", TIMEOUT, None).expect("init");
    assert!(other.producer_id > p.producer_id, "no producer id issued twice");
    node.logs.shutdown().expect("shutdown");
    drop(node);
    // A third start finds nothing left to do.
    let node = open(image.path(), &clock);
    assert!(node.writer.written().is_empty());
    assert_eq!(cached(&node, ID).state(), Empty);
}

#[test]
fn a_crash_after_the_prepare_record_completes_on_restart() {
    crash_during_end_txn(0, Commit);
    crash_during_end_txn(0, Abort);
}

#[test]
fn a_crash_after_some_markers_completes_on_restart() {
    crash_during_end_txn(1, Commit);
    crash_during_end_txn(2, Abort);
}

#[test]
fn a_crash_after_every_marker_before_complete_completes_on_restart() {
    crash_during_end_txn(3, Commit);
    crash_during_end_txn(3, Abort);
}

#[test]
fn a_crash_before_the_prepare_record_leaves_an_ongoing_transaction() {
    let (live, image) =
        (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let clock = MockClock::new(NOW);
    let node = open(live.path(), &clock);
    let p = begin(&node, ID, &PARTITIONS);
    copy_dir(live.path(), image.path());
    drop(node);
    let node = open(image.path(), &clock);
    assert!(node.writer.written().is_empty(), "nothing decided, nothing marked");
    assert_eq!(cached(&node, ID).state(), Ongoing);
    // The client's retried EndTxn commits it ...
    node.coordinator.end_transaction(ID, p.producer_id, p.epoch, Commit).expect("commit");
    assert_eq!(node.writer.written().len(), 3);
    assert_eq!(cached(&node, ID).state(), CompleteCommit);
    drop(node);
    // ... or, with no client, the timeout aborts it once start + timeout passed.
    let again = tempfile::tempdir().expect("tempdir");
    copy_dir(live.path(), again.path());
    clock.advance(i64::from(TIMEOUT) + 1);
    let node = open(again.path(), &clock);
    assert_eq!(node.coordinator.abort_timed_out_transactions(), 1);
    let fenced = pe(p.producer_id, p.epoch + 1);
    let all: Vec<_> = PARTITIONS.iter().map(|(t, n)| (tp(t, *n), marker(fenced, Abort))).collect();
    assert_eq!(node.writer.written(), all);
}

#[test]
fn a_fence_crashing_after_one_marker_completes_with_the_bumped_epoch() {
    let (live, image) =
        (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let clock = MockClock::new(NOW);
    let node = open(live.path(), &clock);
    let old = begin(&node, ID, &PARTITIONS);
    node.writer.crash_after(1, live.path(), image.path());
    assert!(is_concurrent(node.coordinator.init_producer_id(ID, TIMEOUT, None)));
    drop(node);
    let node = open(image.path(), &clock);
    let fenced = pe(old.producer_id, old.epoch + 1);
    let all: Vec<_> = PARTITIONS.iter().map(|(t, n)| (tp(t, *n), marker(fenced, Abort))).collect();
    assert_eq!(node.writer.written(), all);
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.producer_epoch), (CompleteAbort, old.epoch + 1));
    assert!(is_fenced(node.coordinator.end_transaction(ID, old.producer_id, old.epoch, Commit)));
    // The new instance's retry: old + 2.
    let new = node.coordinator.init_producer_id(ID, TIMEOUT, None).expect("retry");
    assert_eq!(new, pe(old.producer_id, old.epoch + 2));
}

#[test]
fn a_timeout_abort_crashing_after_prepare_completes_on_restart() {
    let (live, image) =
        (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let clock = MockClock::new(NOW);
    let node = open(live.path(), &clock);
    let p = begin(&node, ID, &PARTITIONS);
    node.writer.crash_after(0, live.path(), image.path());
    clock.advance(i64::from(TIMEOUT) + 1);
    assert_eq!(node.coordinator.abort_timed_out_transactions(), 1);
    drop(node);
    let node = open(image.path(), &clock);
    let fenced = pe(p.producer_id, p.epoch + 1);
    let all: Vec<_> = PARTITIONS.iter().map(|(t, n)| (tp(t, *n), marker(fenced, Abort))).collect();
    assert_eq!(node.writer.written(), all);
    let st: Vec<_> = states(&node, ID).into_iter().flatten().collect();
    assert_eq!(st, [Empty, Ongoing, PrepareAbort, CompleteAbort]);
}

#[test]
fn markers_failing_during_recovery_are_retried_and_block_the_id_meanwhile() {
    let (live, image) =
        (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let clock = MockClock::new(NOW);
    let node = open(live.path(), &clock);
    let p = begin(&node, ID, &PARTITIONS);
    node.writer.crash_after(0, live.path(), image.path());
    node.coordinator.end_transaction(ID, p.producer_id, p.epoch, Commit).expect("decided");
    drop(node);
    let node = open_unloaded(image.path(), &clock);
    node.writer.fail(tp("a", 0));
    node.coordinator.load();
    assert_eq!(node.coordinator.pending_completion_ids(), [ID]);
    assert_eq!(cached(&node, ID).state(), PrepareCommit);
    assert_eq!(states(&node, ID).last(), Some(&Some(PrepareCommit)));
    assert!(is_concurrent(node.coordinator.init_producer_id(ID, TIMEOUT, None)));
    assert_eq!(node.writer.take_written().len(), 2);
    node.writer.heal();
    assert_eq!(node.coordinator.retry_pending_completions(), 1);
    assert_eq!(node.writer.written(), [(tp("a", 0), marker(p, Commit))]);
    assert_eq!(cached(&node, ID).state(), CompleteCommit);
    assert_eq!(states(&node, ID).last(), Some(&Some(CompleteCommit)));
}

#[test]
fn producer_ids_in_the_transaction_log_are_never_reissued_even_without_the_block_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = MockClock::new(NOW);
    let node = open(dir.path(), &clock);
    let ids: Vec<i64> = (0..3)
        .map(|i| node.coordinator.init_producer_id(&format!("t{i}"), TIMEOUT, None).expect("init"))
        .map(|p| p.producer_id)
        .collect();
    node.logs.shutdown().expect("shutdown");
    drop(node);
    // The block file is lost: only __transaction_state knows the ids.
    let block = dir.path().join(crate::log::producer_id_manager::PRODUCER_ID_BLOCK_FILE);
    std::fs::remove_file(&block).expect("remove the block file");
    let node = open(dir.path(), &clock);
    let next = node.coordinator.init_producer_id("new", TIMEOUT, None).expect("init");
    let max = *ids.iter().max().expect("ids");
    assert_eq!(next.producer_id, max + 1, "issuing resumes above the largest id loaded");
}

#[test]
fn a_loaded_prepare_commit_answers_by_state_until_it_is_completed() {
    let (live, image) =
        (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let clock = MockClock::new(NOW);
    let node = open(live.path(), &clock);
    let p = begin(&node, ID, &PARTITIONS);
    node.writer.crash_after(0, live.path(), image.path());
    node.coordinator.end_transaction(ID, p.producer_id, p.epoch, Commit).expect("decided");
    drop(node);
    // Only the state is loaded: PrepareCommit with no transition pending,
    // as between the load and the completion of what it found.
    let node = open_unloaded(image.path(), &clock);
    node.state.load();
    let c = &node.coordinator;
    let parts = set(&[("z", 0)]);
    assert!(is_concurrent(c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &parts)));
    assert!(is_concurrent(c.end_transaction(ID, p.producer_id, p.epoch, Commit)));
    let r = c.end_transaction(ID, p.producer_id, p.epoch, Abort);
    assert!(
        matches!(r, Err(crate::txn::TxnError::InvalidTxnState { state: PrepareCommit, .. })),
        "{r:?}"
    );
    assert!(is_concurrent(c.init_producer_id(ID, TIMEOUT, None)));
    assert!(node.writer.written().is_empty());
    c.load();
    assert_eq!(node.writer.written().len(), 3);
    assert_eq!(cached(&node, ID).state(), CompleteCommit);
}

#[test]
fn recovery_skips_the_partitions_whose_transaction_is_already_closed() {
    let (live, image) =
        (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let clock = MockClock::new(NOW);
    let node = open(live.path(), &clock);
    let p = begin(&node, ID, &PARTITIONS);
    node.writer.crash_after(1, live.path(), image.path());
    node.coordinator.end_transaction(ID, p.producer_id, p.epoch, Abort).expect("decided");
    drop(node);
    let node = open_unloaded(image.path(), &clock);
    // The first partition's marker landed before the crash: its producer
    // state has no open transaction, so recovery writes only the other two.
    let (first, _) = PARTITIONS[0];
    node.writer.close(tp(first, PARTITIONS[0].1));
    node.coordinator.load();
    let rest: Vec<_> = PARTITIONS[1..].iter().map(|(t, n)| (tp(t, *n), marker(p, Abort))).collect();
    assert_eq!(node.writer.written(), rest);
    assert_eq!(cached(&node, ID).state(), CompleteAbort);
    assert_eq!(states(&node, ID).last(), Some(&Some(CompleteAbort)));
}

//! The coordinator's rules (docs/design/transactions.md, "Epochs, fencing, KIP-360" to "Timers", and "Behaviour and errors, per API"), each against a
//! real `LogManager` in a temp dir, a MockClock and a recording marker writer.

use std::sync::Arc;

use crate::clock::MockClock;
use crate::txn::error::TxnError;
use crate::txn::marker_writer::TransactionResult;
use crate::txn::test_support::*;
use crate::txn::transaction_metadata::TransactionState::*;

#[test]
fn a_new_id_gets_a_fresh_producer_id_and_each_init_bumps_the_epoch() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let first = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    assert_eq!(first.epoch, 0);
    let other = c.init_producer_id("txn-b", TIMEOUT, None).expect("init");
    assert_ne!(other.producer_id, first.producer_id);
    let second = c.init_producer_id(ID, 30_000, None).expect("init");
    assert_eq!(second, pe(first.producer_id, 1));
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.txn_timeout_ms, m.last_producer_epoch), (Empty, 30_000, -1));
    let recs = records(&node, ID);
    assert_eq!(recs.len(), 2);
    let last = recs[1].as_ref().expect("value");
    assert_eq!((last.state(), last.producer_epoch, last.txn_timeout_ms), (Empty, 1, 30_000));
    assert!(last.partitions.is_empty() && last.txn_start_timestamp == -1);
}

#[test]
fn bad_init_requests_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = MockClock::new(NOW);
    let node = open_unloaded(dir.path(), &clock);
    let c = &node.coordinator;
    // Before the load: COORDINATOR_LOAD_IN_PROGRESS for every request.
    assert!(matches!(
        c.init_producer_id(ID, TIMEOUT, None),
        Err(TxnError::CoordinatorLoadInProgress)
    ));
    let parts = set(&[("a", 0)]);
    assert!(matches!(
        c.add_partitions_to_txn(ID, 1, 0, &parts),
        Err(TxnError::CoordinatorLoadInProgress)
    ));
    assert!(matches!(
        c.end_transaction(ID, 1, 0, TransactionResult::Commit),
        Err(TxnError::CoordinatorLoadInProgress)
    ));
    c.load();
    assert!(matches!(c.init_producer_id("", TIMEOUT, None), Err(TxnError::InvalidRequest(_))));
    for timeout in [0, -1, 900_001, i32::MAX] {
        let r = c.init_producer_id(ID, timeout, None);
        assert!(
            matches!(r, Err(TxnError::InvalidTransactionTimeout { timeout_ms, max_ms: 900_000 }) if timeout_ms == timeout),
            "{timeout}: {r:?}"
        );
    }
    assert!(node.state.get_transaction_state(ID).expect("loaded").is_none());
    assert!(records(&node, ID).is_empty());
    assert_eq!(c.init_producer_id(ID, 900_000, None).expect("the maximum is allowed").epoch, 0);
}

#[test]
fn add_partitions_checks_the_producer_and_grows_the_set() {
    let (_dir, clock, node) = fresh();
    let c = &node.coordinator;
    let parts = set(&[("a", 0)]);
    assert!(is_bad_mapping(c.add_partitions_to_txn("unknown", 1, 0, &parts)));
    assert!(matches!(c.add_partitions_to_txn("", 1, 0, &parts), Err(TxnError::InvalidRequest(_))));
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    assert!(is_bad_mapping(c.add_partitions_to_txn(ID, p.producer_id + 1, 0, &parts)));
    assert!(is_fenced(c.add_partitions_to_txn(ID, p.producer_id, 1, &parts)));
    assert!(is_fenced(c.add_partitions_to_txn(ID, p.producer_id, -1, &parts)));
    assert_eq!(records(&node, ID).len(), 1, "refusals write nothing");

    clock.advance(5);
    c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &parts).expect("add");
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.txn_start_timestamp), (Ongoing, NOW + 5));
    // Already in the set: NONE, nothing written.
    clock.advance(5);
    c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &parts).expect("add again");
    assert_eq!(records(&node, ID).len(), 2);
    c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &set(&[("b", 1), ("a", 0)])).expect("add");
    let m = cached(&node, ID);
    assert_eq!(m.partitions, set(&[("a", 0), ("b", 1)]));
    assert_eq!((m.txn_start_timestamp, m.txn_last_update_timestamp), (NOW + 5, NOW + 10));
    let last = records(&node, ID).pop().flatten().expect("value");
    assert_eq!((last.state(), last.partitions.len()), (Ongoing, 2));
}

#[test]
fn add_offsets_adds_the_groups_offsets_partition() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let p = begin(&node, ID, &[("a", 0)]);
    c.add_offsets_to_txn(ID, p.producer_id, p.epoch, tp("__consumer_offsets", 7)).expect("add");
    assert_eq!(cached(&node, ID).partitions, set(&[("__consumer_offsets", 7), ("a", 0)]));
    assert!(is_fenced(c.add_offsets_to_txn(ID, p.producer_id, 9, tp("__consumer_offsets", 7))));
    c.end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Commit).expect("commit");
    let written: Vec<_> = node.writer.written().into_iter().map(|(t, _)| t).collect();
    assert_eq!(written, [tp("__consumer_offsets", 7), tp("a", 0)]);
}

#[test]
fn commit_writes_prepare_then_every_marker_then_complete() {
    let (_dir, clock, node) = fresh();
    let c = &node.coordinator;
    let p = begin(&node, ID, &[("b", 0), ("a", 2), ("a", 1)]);
    let start = cached(&node, ID).txn_start_timestamp;
    // At every marker the PrepareCommit record is already in the log, and
    // the Complete record is not yet.
    let last_at_marker = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (logs, state, seen) =
        (Arc::clone(&node.logs), Arc::clone(&node.state), Arc::clone(&last_at_marker));
    node.writer.set_hook(move |_| {
        let last = records_in(&logs, &state, ID).pop().flatten().map(|m| m.state());
        seen.lock().push(last);
    });
    clock.advance(100);
    c.end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Commit).expect("commit");
    assert_eq!(*last_at_marker.lock(), [Some(PrepareCommit); 3]);
    let want: Vec<_> = [tp("a", 1), tp("a", 2), tp("b", 0)]
        .into_iter()
        .map(|t| (t, marker(p, TransactionResult::Commit)))
        .collect();
    assert_eq!(node.writer.written(), want, "in topic/partition order, the txn's pid and epoch");
    let recs = records(&node, ID);
    let tail: Vec<_> = recs.iter().flatten().map(|m| m.state()).collect();
    assert_eq!(tail, [Empty, Ongoing, PrepareCommit, CompleteCommit]);
    let prepare = recs[2].as_ref().expect("value");
    assert_eq!(prepare.partitions.len(), 3);
    let complete = recs[3].as_ref().expect("value");
    assert!(complete.partitions.is_empty());
    assert_eq!(complete.txn_start_timestamp, start, "start time kept");
    assert_eq!(complete.producer_epoch, p.epoch);
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.pending_state()), (CompleteCommit, None));

    // A retried commit is answered NONE with nothing written; an abort now is invalid.
    c.end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Commit).expect("retry");
    let r = c.end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Abort);
    assert!(matches!(r, Err(TxnError::InvalidTxnState { state: CompleteCommit, .. })), "{r:?}");
    assert_eq!(records(&node, ID).len(), 4);
    assert_eq!(node.writer.written().len(), 3);
    // The next transaction starts from CompleteCommit with a new start time.
    clock.advance(100);
    c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &set(&[("c", 0)])).expect("next txn");
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.txn_start_timestamp), (Ongoing, NOW + 200));
    assert_eq!(m.partitions, set(&[("c", 0)]));
}

#[test]
fn abort_writes_abort_markers_and_end_txn_refuses_bad_input() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    // EndTxn with no transaction: INVALID_TXN_STATE, for either outcome.
    for result in [TransactionResult::Commit, TransactionResult::Abort] {
        let r = c.end_transaction(ID, p.producer_id, p.epoch, result);
        assert!(matches!(r, Err(TxnError::InvalidTxnState { state: Empty, .. })), "{r:?}");
    }
    c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &set(&[("a", 0)])).expect("add");
    assert!(is_bad_mapping(c.end_transaction("nope", 1, 0, TransactionResult::Abort)));
    assert!(is_bad_mapping(c.end_transaction(
        ID,
        p.producer_id + 1,
        p.epoch,
        TransactionResult::Abort
    )));
    assert!(is_fenced(c.end_transaction(ID, p.producer_id, p.epoch + 1, TransactionResult::Abort)));
    assert!(matches!(
        c.end_transaction("", p.producer_id, p.epoch, TransactionResult::Abort),
        Err(TxnError::InvalidRequest(_))
    ));
    assert_eq!(cached(&node, ID).state(), Ongoing, "refusals change nothing");
    c.end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Abort).expect("abort");
    assert_eq!(node.writer.written(), [(tp("a", 0), marker(p, TransactionResult::Abort))]);
    let st: Vec<_> = states(&node, ID).into_iter().flatten().collect();
    assert_eq!(st, [Empty, Ongoing, PrepareAbort, CompleteAbort]);
    c.end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Abort).expect("retry");
    let r = c.end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Commit);
    assert!(matches!(r, Err(TxnError::InvalidTxnState { state: CompleteAbort, .. })), "{r:?}");
}

#[test]
fn a_failed_marker_keeps_the_transaction_in_prepare_until_the_retry() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let p = begin(&node, ID, &[("a", 0), ("b", 0), ("c", 0)]);
    node.writer.fail(tp("b", 0));
    // The outcome is decided: the client is answered NONE.
    c.end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Commit).expect("decided");
    let written: Vec<_> = node.writer.take_written().into_iter().map(|(t, _)| t).collect();
    assert_eq!(written, [tp("a", 0), tp("c", 0)], "the others are still written");
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.pending_state()), (PrepareCommit, Some(CompleteCommit)));
    assert_eq!(states(&node, ID).last(), Some(&Some(PrepareCommit)), "no Complete yet");
    assert_eq!(c.pending_completion_ids(), [ID]);
    // Meanwhile every request on the id is told to retry.
    let parts = set(&[("d", 0)]);
    assert!(is_concurrent(c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &parts)));
    assert!(is_concurrent(c.end_transaction(
        ID,
        p.producer_id,
        p.epoch,
        TransactionResult::Commit
    )));
    assert!(is_concurrent(c.end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Abort)));
    assert!(is_concurrent(c.init_producer_id(ID, TIMEOUT, None)));
    // Still failing: nothing completes.
    assert_eq!(c.retry_pending_completions(), 0);
    assert_eq!(node.writer.take_written(), []);
    node.writer.heal();
    assert_eq!(c.retry_pending_completions(), 1);
    assert_eq!(node.writer.written(), [(tp("b", 0), marker(p, TransactionResult::Commit))]);
    assert_eq!(states(&node, ID).last(), Some(&Some(CompleteCommit)));
    assert!(c.pending_completion_ids().is_empty());
    c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &parts).expect("usable again");
}

#[test]
fn a_deleted_partition_gets_no_marker_and_does_not_block_completion() {
    let (_dir, _clock, node) = fresh();
    let p = begin(&node, ID, &[("gone", 0), ("kept", 0)]);
    node.writer.delete_topic("gone");
    node.coordinator
        .end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Abort)
        .expect("abort");
    let written: Vec<_> = node.writer.written().into_iter().map(|(t, _)| t).collect();
    assert_eq!(written, [tp("kept", 0)]);
    assert_eq!(cached(&node, ID).state(), CompleteAbort);
}

#[test]
fn a_request_during_a_pending_transition_gets_concurrent_transactions() {
    let (_dir, _clock, node) = fresh();
    let p = begin(&node, ID, &[("a", 0)]);
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (weak, seen2) = (Arc::downgrade(&node.coordinator), Arc::clone(&seen));
    // While the markers are written, the Complete transition is pending.
    node.writer.set_hook(move |_| {
        let c = weak.upgrade().expect("coordinator");
        let parts = crate::txn::test_support::set(&[("z", 0)]);
        seen2
            .lock()
            .push(format!("{:?}", c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &parts)));
        seen2.lock().push(format!("{:?}", c.init_producer_id(ID, TIMEOUT, None)));
        let pending =
            c.state_manager().get_transaction_state(ID).unwrap().unwrap().lock().pending_state();
        seen2.lock().push(format!("{pending:?}"));
    });
    node.coordinator
        .end_transaction(ID, p.producer_id, p.epoch, TransactionResult::Commit)
        .expect("commit");
    let seen = seen.lock().clone();
    assert_eq!(seen.len(), 3);
    assert!(seen[0].starts_with("Err(ConcurrentTransactions"), "{}", seen[0]);
    assert!(seen[1].starts_with("Err(ConcurrentTransactions"), "{}", seen[1]);
    assert_eq!(seen[2], "Some(CompleteCommit)");
    assert_eq!(cached(&node, ID).state(), CompleteCommit);
}

#[test]
fn racing_inits_on_one_id_each_get_a_distinct_epoch_or_retry() {
    let (_dir, _clock, node) = fresh();
    let first = node.coordinator.init_producer_id(ID, TIMEOUT, None).expect("init");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| node.coordinator.init_producer_id(ID, TIMEOUT, None)))
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let mut epochs = vec![first.epoch];
    for r in &results {
        match r {
            Ok(p) => {
                assert_eq!(p.producer_id, first.producer_id);
                epochs.push(p.epoch);
            }
            Err(e) => assert!(matches!(e, TxnError::ConcurrentTransactions { .. }), "{e:?}"),
        }
    }
    let granted = epochs.len();
    epochs.sort_unstable();
    epochs.dedup();
    assert_eq!(epochs.len(), granted, "no epoch handed out twice");
    assert_eq!(records(&node, ID).len(), granted, "one record per granted bump");
    assert_eq!(cached(&node, ID).producer_epoch, *epochs.last().expect("some"));
    assert_eq!(cached(&node, ID).pending_state(), None);
}

#[test]
fn bad_requests_leave_other_producers_and_the_target_untouched() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let a = begin(&node, ID, &[("a", 0)]);
    let b = begin(&node, "txn-b", &[("b", 0)]);
    let (before_a, before_b) = (cached(&node, ID), cached(&node, "txn-b"));
    let (records_a, records_b) = (records(&node, ID).len(), records(&node, "txn-b").len());
    // B's producer id and stale epochs aimed at A's id, and nonsense on B's.
    let parts = set(&[("x", 0)]);
    assert!(is_bad_mapping(c.add_partitions_to_txn(ID, b.producer_id, b.epoch, &parts)));
    assert!(is_bad_mapping(c.end_transaction(
        ID,
        b.producer_id,
        a.epoch,
        TransactionResult::Abort
    )));
    assert!(is_fenced(c.end_transaction(ID, a.producer_id, a.epoch + 3, TransactionResult::Abort)));
    assert!(is_fenced(c.init_producer_id(ID, TIMEOUT, Some(pe(b.producer_id, b.epoch)))));
    assert!(is_fenced(c.add_partitions_to_txn("txn-b", b.producer_id, b.epoch - 1, &parts)));
    assert!(matches!(
        c.init_producer_id("txn-b", 0, None),
        Err(TxnError::InvalidTransactionTimeout { .. })
    ));
    assert_eq!((cached(&node, ID), cached(&node, "txn-b")), (before_a, before_b));
    assert_eq!(records(&node, ID).len(), records_a);
    assert_eq!(records(&node, "txn-b").len(), records_b);
    assert!(node.writer.written().is_empty());
    c.end_transaction(ID, a.producer_id, a.epoch, TransactionResult::Commit).expect("commit A");
    assert_eq!(node.writer.take_written(), [(tp("a", 0), marker(a, TransactionResult::Commit))]);
    assert_eq!(cached(&node, "txn-b").state(), Ongoing);
    c.end_transaction("txn-b", b.producer_id, b.epoch, TransactionResult::Abort).expect("abort B");
    assert_eq!(node.writer.written(), [(tp("b", 0), marker(b, TransactionResult::Abort))]);
}

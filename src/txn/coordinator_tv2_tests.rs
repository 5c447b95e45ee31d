//! Transactions v2 (KIP-890 part 2) in the coordinator, as Kafka 4.4.0's
//! `TransactionCoordinator` runs it: the partition leader adds partitions
//! (no AddPartitionsToTxn from the client), every EndTxn v5 bumps the epoch
//! and answers the one the producer goes on with, a retry is recognised by
//! the epoch before the bump, an abort with nothing open is taken, and an
//! exhausted epoch hands over a new producer id, also across a restart.

use crate::clock::MockClock;
use crate::txn::marker_writer::TransactionResult::{Abort, Commit};
use crate::txn::test_support::*;
use crate::txn::transaction_metadata::TransactionState::*;
use crate::txn::transaction_version::TransactionVersion;
use crate::txn::txn_transit_metadata::EXHAUSTED_EPOCH;
use crate::txn::TxnError;

const TV2: TransactionVersion = TransactionVersion::TV_2;

/// What a Produce v12 of producer `(id, epoch)` to `(topic, partition)`
/// asks of the coordinator.
fn produce(node: &Node, (id, epoch): (i64, i16), (topic, n): (&str, i32)) -> Result<(), TxnError> {
    node.coordinator.verify_partition_with(ID, id, epoch, &tp(topic, n), TV2)
}

#[test]
fn every_end_txn_bumps_the_epoch_and_its_markers_carry_the_new_one() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    produce(&node, (p.producer_id, p.epoch), ("a", 0)).expect("the leader adds the partition");
    produce(&node, (p.producer_id, p.epoch), ("a", 0)).expect("added already: nothing written");
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.client_transaction_version), (Ongoing, 2));
    assert_eq!(records(&node, ID).len(), 2, "Empty, then Ongoing once");

    let after = c.end_transaction_with(ID, p.producer_id, p.epoch, Commit, TV2).expect("commit");
    assert_eq!(after, pe(p.producer_id, p.epoch + 1));
    let bumped = pe(p.producer_id, p.epoch + 1);
    assert_eq!(node.writer.take_written(), [(tp("a", 0), marker(bumped, Commit))]);
    let st: Vec<_> = records(&node, ID).into_iter().flatten().collect();
    let epochs: Vec<_> = st.iter().map(|m| (m.state(), m.producer_epoch)).collect();
    assert_eq!(
        epochs,
        [(Empty, 0), (Ongoing, 0), (PrepareCommit, 1), (CompleteCommit, 1)],
        "the Prepare record already has the new epoch"
    );

    // A late write of the ended transaction is fenced; the next one goes on.
    assert!(is_fenced(produce(&node, (p.producer_id, p.epoch), ("b", 0))));
    produce(&node, (p.producer_id, p.epoch + 1), ("b", 0)).expect("next transaction");
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.partitions.clone()), (Ongoing, set(&[("b", 0)])));
    let after = c.end_transaction_with(ID, p.producer_id, p.epoch + 1, Abort, TV2).expect("abort");
    assert_eq!(after, pe(p.producer_id, p.epoch + 2));
    assert_eq!(node.writer.take_written(), [(tp("b", 0), marker(after, Abort))]);
}

#[test]
fn a_retry_is_known_by_the_epoch_before_the_bump() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    produce(&node, (p.producer_id, p.epoch), ("a", 0)).expect("add");
    node.writer.fail(tp("a", 0));
    let e = p.epoch;
    let answer = c.end_transaction_with(ID, p.producer_id, e, Commit, TV2).expect("decided");
    assert_eq!(answer, pe(p.producer_id, e + 1));
    // Still completing: the retry, and the next transaction's first write,
    // are told to retry.
    assert!(is_concurrent(c.end_transaction_with(ID, p.producer_id, e, Commit, TV2)));
    assert!(is_concurrent(produce(&node, (p.producer_id, e + 1), ("b", 0))));
    node.writer.heal();
    assert_eq!(c.retry_pending_completions(), 1);
    let written = records(&node, ID).len();
    let retry = c.end_transaction_with(ID, p.producer_id, e, Commit, TV2).expect("a retry");
    assert_eq!(retry, pe(p.producer_id, e + 1), "answered with the current epoch");
    assert_eq!(records(&node, ID).len(), written, "a retry writes nothing");
    let r = c.end_transaction_with(ID, p.producer_id, e, Abort, TV2);
    assert!(matches!(r, Err(TxnError::InvalidTxnState { .. })), "{r:?}");
    assert!(is_fenced(c.end_transaction_with(ID, p.producer_id, e - 1, Commit, TV2)));
    assert!(is_fenced(c.end_transaction_with(ID, p.producer_id, e + 2, Commit, TV2)));
    assert!(is_bad_mapping(c.end_transaction_with(ID, p.producer_id + 1, e + 1, Commit, TV2)));
    // Committing with nothing open is refused; level 0 keeps its rule too.
    let r = c.end_transaction_with(ID, p.producer_id, e + 1, Commit, TV2);
    assert!(matches!(r, Err(TxnError::InvalidTxnState { .. })), "{r:?}");
}

#[test]
fn an_abort_with_nothing_open_bumps_the_epoch_and_writes_no_marker() {
    let (_dir, clock, node) = fresh();
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    // Level 0 refuses it, as Kafka does below EndTxn v5.
    let r = c.end_transaction(ID, p.producer_id, p.epoch, Abort);
    assert!(matches!(r, Err(TxnError::InvalidTxnState { state: Empty, .. })), "{r:?}");
    clock.advance(7);
    let answer = c.end_transaction_with(ID, p.producer_id, p.epoch, Abort, TV2).expect("abort");
    assert_eq!(answer, pe(p.producer_id, p.epoch + 1));
    assert_eq!(node.writer.written(), []);
    let st: Vec<_> = records(&node, ID).into_iter().flatten().map(|m| m.state()).collect();
    assert_eq!(st, [Empty, PrepareAbort, CompleteAbort]);
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.txn_start_timestamp), (CompleteAbort, NOW + 7));
    // Again from CompleteAbort (not a retry: the current epoch).
    let again = c.end_transaction_with(ID, p.producer_id, p.epoch + 1, Abort, TV2).expect("abort");
    assert_eq!(again, pe(p.producer_id, p.epoch + 2));
    // A stale producer is fenced by it.
    assert!(is_fenced(produce(&node, (p.producer_id, p.epoch), ("a", 0))));
}

#[test]
fn an_exhausted_epoch_hands_over_a_new_producer_id_also_after_a_crash() {
    let (live, image) =
        (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let clock = MockClock::new(NOW);
    let node = open(live.path(), &clock);
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    set_epoch(&node, ID, EXHAUSTED_EPOCH);
    let old = pe(p.producer_id, EXHAUSTED_EPOCH);
    produce(&node, (old.producer_id, old.epoch), ("a", 0)).expect("add");
    // The process dies after the Prepare record, before any marker.
    node.writer.crash_after(0, live.path(), image.path());
    let answer = c.end_transaction_with(ID, old.producer_id, old.epoch, Commit, TV2).unwrap();
    assert_ne!(answer.producer_id, p.producer_id);
    assert_eq!(answer.epoch, 0);
    let prepare = records(&node, ID).into_iter().flatten().last().expect("a record");
    assert_eq!((prepare.state(), prepare.next_producer_id), (PrepareCommit, answer.producer_id));
    drop(node);

    let node = open(image.path(), &clock);
    let c = &node.coordinator;
    // The load writes the marker with the old id at the last epoch, then
    // hands over the new id.
    let last = pe(p.producer_id, i16::MAX);
    assert_eq!(node.writer.written(), [(tp("a", 0), marker(last, Commit))]);
    let m = cached(&node, ID);
    assert_eq!(
        (m.state(), m.producer_id, m.producer_epoch),
        (CompleteCommit, answer.producer_id, 0)
    );
    assert_eq!((m.prev_producer_id, m.next_producer_id), (p.producer_id, -1));
    // The client's retry with the old id is answered with the new one.
    let retry = c.end_transaction_with(ID, old.producer_id, old.epoch, Commit, TV2).unwrap();
    assert_eq!(retry, answer);
    produce(&node, (answer.producer_id, 0), ("a", 0)).expect("the new id goes on");
    assert!(is_bad_mapping(produce(&node, (old.producer_id, i16::MAX), ("b", 0))));
}

#[test]
fn a_coordinator_abort_is_a_retry_for_a_v2_client_and_level_0_clients_keep_their_rules() {
    let (_dir, clock, node) = fresh();
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    produce(&node, (p.producer_id, p.epoch), ("a", 0)).expect("add");
    clock.advance(i64::from(TIMEOUT) + 1);
    assert_eq!(c.abort_timed_out_transactions(), 1);
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.producer_epoch), (CompleteAbort, p.epoch + 1), "bumped once");
    // The client aborts at its epoch: the timeout's abort answers it.
    let answer = c.end_transaction_with(ID, p.producer_id, p.epoch, Abort, TV2).expect("abort");
    assert_eq!(answer, pe(p.producer_id, p.epoch + 1));

    // A level-0 client on the same coordinator: no bump, no implicit add.
    let q = begin(&node, "old-client", &[("a", 1)]);
    c.end_transaction("old-client", q.producer_id, q.epoch, Commit).expect("commit");
    let m = cached(&node, "old-client");
    assert_eq!((m.producer_epoch, m.client_transaction_version), (q.epoch, 0));
    let r = c.verify_partition("old-client", q.producer_id, q.epoch, &tp("a", 2));
    assert!(matches!(r, Err(TxnError::PartitionNotInTransaction { .. })), "{r:?}");
}

#[test]
fn after_a_handover_a_retry_with_the_old_id_is_known_across_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = MockClock::new(NOW);
    let node = open(dir.path(), &clock);
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    set_epoch(&node, ID, EXHAUSTED_EPOCH);
    produce(&node, (p.producer_id, EXHAUSTED_EPOCH), ("a", 0)).expect("add");
    // A marker fails: the transaction stays completing, and the producer,
    // already holding the new id, is told to retry, not refused.
    node.writer.fail(tp("a", 0));
    let new = c.end_transaction_with(ID, p.producer_id, EXHAUSTED_EPOCH, Commit, TV2).unwrap();
    assert!(is_concurrent(produce(&node, (new.producer_id, 0), ("b", 0))));
    node.writer.heal();
    assert_eq!(c.retry_pending_completions(), 1);
    drop(node);

    // The restarted coordinator still knows the old id as the previous one.
    let node = open(dir.path(), &clock);
    let c = &node.coordinator;
    let retry = c.end_transaction_with(ID, p.producer_id, EXHAUSTED_EPOCH, Commit, TV2);
    assert_eq!(retry.expect("a retry"), new);
    assert_eq!(cached(&node, ID).prev_producer_id, p.producer_id);
    // Ids issued after the load are past the handed-over one.
    let other = c.init_producer_id("other", TIMEOUT, None).expect("init");
    assert!(other.producer_id > new.producer_id);
}

#[test]
fn a_timeout_abort_at_level_2_hands_over_at_exhaustion_and_keeps_kip_360_retries() {
    let (_dir, clock, node) = fresh();
    let c = &node.coordinator;
    // A level-0 client (KIP-360): its transaction times out; its
    // InitProducerId naming the epoch it had is answered as a retry.
    let q = begin(&node, "old-client", &[("a", 1)]);
    clock.advance(i64::from(TIMEOUT) + 1);
    assert_eq!(c.abort_timed_out_transactions(), 1);
    let expected = Some(pe(q.producer_id, q.epoch));
    let again = c.init_producer_id("old-client", TIMEOUT, expected).expect("a retry");
    assert_eq!(again, pe(q.producer_id, q.epoch + 1));

    // At an exhausted epoch the abort hands over a new producer id, which a
    // v2 client's EndTxn(abort) at its epoch is answered with.
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    set_epoch(&node, ID, EXHAUSTED_EPOCH);
    produce(&node, (p.producer_id, EXHAUSTED_EPOCH), ("a", 0)).expect("add");
    clock.advance(i64::from(TIMEOUT) + 1);
    assert_eq!(c.abort_timed_out_transactions(), 1);
    let m = cached(&node, ID);
    assert_ne!(m.producer_id, p.producer_id);
    assert_eq!((m.state(), m.producer_epoch), (CompleteAbort, 0));
    let answer = c.end_transaction_with(ID, p.producer_id, EXHAUSTED_EPOCH, Abort, TV2).unwrap();
    assert_eq!(answer, pe(m.producer_id, 0));
}

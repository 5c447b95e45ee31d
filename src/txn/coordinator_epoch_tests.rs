//! Epochs, fencing, KIP-360 recovery, epoch exhaustion (docs/design/transactions.md
//! 2.3), and the timers (2.5): timeout aborts and id expiry.

use crate::txn::error::TxnError;
use crate::txn::marker_writer::TransactionResult::{Abort, Commit};
use crate::txn::test_support::*;
use crate::txn::transaction_metadata::TransactionState::*;
use crate::txn::transaction_version::TransactionVersion;

#[test]
fn a_new_instance_fences_an_ongoing_transaction_and_ends_two_epochs_up() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let old = begin(&node, ID, &[("a", 0), ("b", 0)]);
    // The new instance's first InitProducerId aborts the open transaction
    // with epoch + 1 and is told to retry.
    assert!(is_concurrent(c.init_producer_id(ID, TIMEOUT, None)));
    let fenced = pe(old.producer_id, old.epoch + 1);
    let want = vec![(tp("a", 0), marker(fenced, Abort)), (tp("b", 0), marker(fenced, Abort))];
    assert_eq!(node.writer.written(), want);
    let recs = records(&node, ID);
    let st: Vec<_> = recs.iter().flatten().map(|m| (m.state(), m.producer_epoch)).collect();
    assert_eq!(st, [(Empty, 0), (Ongoing, 0), (PrepareAbort, 1), (CompleteAbort, 1)]);
    // The old instance is fenced everywhere.
    let parts = set(&[("c", 0)]);
    assert!(is_fenced(c.add_partitions_to_txn(ID, old.producer_id, old.epoch, &parts)));
    assert!(is_fenced(c.end_transaction(ID, old.producer_id, old.epoch, Commit)));
    // The retry bumps again: the new instance ends at old + 2, as on Kafka.
    let new = c.init_producer_id(ID, TIMEOUT, None).expect("retry");
    assert_eq!(new, pe(old.producer_id, old.epoch + 2));
    assert!(is_fenced(c.end_transaction(ID, old.producer_id, old.epoch + 1, Abort)));
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.has_failed_epoch_fence()), (Empty, false));
}

#[test]
fn kip_360_bumps_on_the_current_epoch_repeats_a_retry_and_fences_the_rest() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    // The producer recovers with its current id and epoch: a bump.
    let bumped = c.init_producer_id(ID, TIMEOUT, Some(p)).expect("recover");
    assert_eq!(bumped, pe(p.producer_id, 1));
    assert_eq!(cached(&node, ID).last_producer_epoch, 0);
    // Its response was lost and it retries with the same epoch: the same answer.
    assert_eq!(c.init_producer_id(ID, TIMEOUT, Some(p)).expect("retry"), bumped);
    assert_eq!(cached(&node, ID).producer_epoch, 1);
    // An epoch neither current nor last, or another producer id: fenced.
    assert!(is_fenced(c.init_producer_id(ID, TIMEOUT, Some(pe(p.producer_id, 7)))));
    assert!(is_fenced(c.init_producer_id(ID, TIMEOUT, Some(pe(p.producer_id + 50, 1)))));
    // A plain InitProducerId (a new instance) forgets the last epoch, so the
    // old instance's retry is fenced from then on.
    assert_eq!(c.init_producer_id(ID, TIMEOUT, None).expect("new instance").epoch, 2);
    assert!(is_fenced(c.init_producer_id(ID, TIMEOUT, Some(p))));
    assert_eq!(cached(&node, ID).producer_epoch, 2, "refusals change nothing");
    // A fresh id accepts any expected producer: it was just created.
    let fresh_id = c.init_producer_id("new", TIMEOUT, Some(pe(4242, 3))).expect("fresh");
    assert_eq!(fresh_id.epoch, 0);
    assert_ne!(fresh_id.producer_id, 4242);
}

#[test]
fn an_exhausted_epoch_rotates_to_a_new_producer_id() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    set_epoch(&node, ID, 32_765);
    assert_eq!(c.init_producer_id(ID, TIMEOUT, None).expect("last bump").epoch, 32_766);
    let rotated = c.init_producer_id(ID, TIMEOUT, None).expect("rotate");
    assert_ne!(rotated.producer_id, p.producer_id);
    assert_eq!(rotated.epoch, 0);
    let m = cached(&node, ID);
    assert_eq!((m.prev_producer_id, m.last_producer_epoch), (p.producer_id, -1));
    let last = records(&node, ID).pop().flatten().expect("value");
    assert_eq!(
        (last.producer_id, last.producer_epoch, last.state()),
        (rotated.producer_id, 0, Empty)
    );
}

#[test]
fn kip_360_on_an_exhausted_epoch_rotates_and_answers_the_retry_the_same() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    set_epoch(&node, ID, 32_766);
    let exhausted = pe(p.producer_id, 32_766);
    // An expected epoch that is not the current one, on an exhausted epoch: fenced.
    assert!(is_fenced(c.init_producer_id(ID, TIMEOUT, Some(pe(p.producer_id, 32_765)))));
    let rotated = c.init_producer_id(ID, TIMEOUT, Some(exhausted)).expect("rotate");
    assert_eq!(rotated.epoch, 0);
    assert_ne!(rotated.producer_id, p.producer_id);
    assert_eq!(cached(&node, ID).last_producer_epoch, 32_766);
    // The retry names the previous producer id with its exhausted epoch.
    assert_eq!(c.init_producer_id(ID, TIMEOUT, Some(exhausted)).expect("retry"), rotated);
    // The previous id with an epoch that is not exhausted is a stale producer.
    assert!(is_fenced(c.init_producer_id(ID, TIMEOUT, Some(pe(p.producer_id, 5)))));
}

#[test]
fn fencing_at_the_last_epoch_aborts_with_it_and_the_retry_rotates() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let p = c.init_producer_id(ID, TIMEOUT, None).expect("init");
    set_epoch(&node, ID, 32_766);
    let at_end = pe(p.producer_id, 32_766);
    c.add_partitions_to_txn(ID, p.producer_id, 32_766, &set(&[("a", 0)])).expect("add");
    assert!(is_concurrent(c.init_producer_id(ID, TIMEOUT, None)));
    assert_eq!(
        node.writer.written(),
        [(tp("a", 0), marker(pe(at_end.producer_id, i16::MAX), Abort))]
    );
    // At `transaction.version` 2 (the default) the abort itself hands over a
    // new producer id at epoch 0, as Kafka 4.4's does; the retry bumps it.
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.producer_epoch), (CompleteAbort, 0));
    assert_ne!(m.producer_id, p.producer_id);
    let new = c.init_producer_id(ID, TIMEOUT, None).expect("retry");
    assert_eq!(new, pe(m.producer_id, 1));
}

#[test]
fn a_failed_fence_does_not_bump_twice() {
    let mut m = crate::txn::TransactionMetadata::new(ID, 5, 3, TIMEOUT, NOW);
    m.transition(Ongoing).expect("legal");
    m.partitions.insert(tp("a", 0));
    m.txn_start_timestamp = NOW;
    let fence = m.prepare_fence_producer_epoch().expect("fence");
    assert_eq!(fence.producer_epoch, 4);
    let abort =
        m.prepare_abort_after_fence(&fence, TransactionVersion::TV_0, -1, NOW).expect("abort");
    assert_eq!((abort.state, abort.producer_epoch), (PrepareAbort, 4));
    assert_eq!(m.producer_epoch, 4, "the fence's epoch is applied at once");
    // The PrepareAbort append failed: what the coordinator does then.
    m.abort_pending_transition();
    m.has_failed_epoch_fence = true;
    let again = m.prepare_fence_producer_epoch().expect("fence again");
    assert_eq!(again.producer_epoch, 4, "not bumped a second time");
    let abort =
        m.prepare_abort_after_fence(&again, TransactionVersion::TV_0, -1, NOW).expect("abort");
    m.complete_transition(&abort).expect("complete");
    let complete = m.prepare_complete(NOW).expect("complete");
    assert!(!m.has_failed_epoch_fence(), "a durable Prepare ends the failed fence");
    assert_eq!(complete.producer_epoch, 4);
}

#[test]
fn transitions_are_refused_while_one_is_pending_or_when_they_do_not_match() {
    let mut m = crate::txn::TransactionMetadata::new(ID, 5, 0, TIMEOUT, NOW);
    let add =
        m.prepare_add_partitions(&set(&[("a", 0)]), TransactionVersion::TV_0, NOW).expect("add");
    let before = m.clone();
    assert!(matches!(
        m.prepare_increment_producer_epoch(TIMEOUT, None, NOW),
        Err(TxnError::IllegalTransit { .. })
    ));
    let mut other = add.clone();
    other.producer_epoch = 9;
    assert!(matches!(m.complete_transition(&other), Err(TxnError::IllegalTransit { .. })));
    assert_eq!(m, before, "nothing changed");
    m.complete_transition(&add).expect("complete");
    assert_eq!((m.state(), m.pending_state()), (Ongoing, None));
    assert!(matches!(m.complete_transition(&add), Err(TxnError::IllegalTransit { .. })));
    // The table still rules: Ongoing cannot go to Empty.
    assert!(matches!(
        m.prepare_increment_producer_epoch(TIMEOUT, None, NOW),
        Err(TxnError::IllegalState(_))
    ));
    assert_eq!(m.pending_state(), None);
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let (_dir, clock, node) = fresh();
    let c = &node.coordinator;
    let short = 1_000;
    let p = c.init_producer_id(ID, short, None).expect("init");
    c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &set(&[("a", 0)])).expect("add");
    let idle = c.init_producer_id("idle", short, None).expect("init");
    let other = begin(&node, "long", &[("b", 0)]);
    clock.advance(i64::from(short));
    assert_eq!(c.abort_timed_out_transactions(), 0, "start + timeout == now is not past it");
    clock.advance(1);
    assert_eq!(c.abort_timed_out_transactions(), 1);
    let fenced = pe(p.producer_id, p.epoch + 1);
    assert_eq!(node.writer.written(), [(tp("a", 0), marker(fenced, Abort))]);
    let m = cached(&node, ID);
    assert_eq!((m.state(), m.producer_epoch), (CompleteAbort, p.epoch + 1));
    assert!(is_fenced(c.end_transaction(ID, p.producer_id, p.epoch, Commit)));
    assert!(is_fenced(c.add_partitions_to_txn(ID, p.producer_id, p.epoch, &set(&[("a", 0)]))));
    // Neither an id with no transaction nor one within its timeout is touched.
    assert_eq!(cached(&node, "idle").producer_epoch, idle.epoch);
    assert_eq!(cached(&node, "long").state(), Ongoing);
    assert_eq!(c.abort_timed_out_transactions(), 0);
    c.end_transaction("long", other.producer_id, other.epoch, Commit).expect("commit");
    // The client re-initializes and carries on.
    let again = c.init_producer_id(ID, short, None).expect("init");
    assert_eq!(again.epoch, p.epoch + 2);
}

#[test]
fn a_timed_out_transaction_whose_markers_fail_is_aborted_once_and_retried() {
    let (_dir, clock, node) = fresh();
    let c = &node.coordinator;
    let p = begin(&node, ID, &[("a", 0)]);
    node.writer.fail(tp("a", 0));
    clock.advance(i64::from(TIMEOUT) + 1);
    assert_eq!(c.abort_timed_out_transactions(), 1);
    assert_eq!(c.abort_timed_out_transactions(), 0, "PrepareAbort is not Ongoing");
    assert_eq!(cached(&node, ID).state(), PrepareAbort);
    node.writer.heal();
    assert_eq!(c.retry_pending_completions(), 1);
    assert_eq!(
        node.writer.written(),
        [(tp("a", 0), marker(pe(p.producer_id, p.epoch + 1), Abort))]
    );
    assert_eq!(cached(&node, ID).state(), CompleteAbort);
}

#[test]
fn ids_unused_for_the_expiration_time_are_removed_with_a_tombstone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = crate::clock::MockClock::new(NOW);
    let node = open(dir.path(), &clock);
    let c = &node.coordinator;
    let expiration = config().transactional_id_expiration_ms;
    let empty = c.init_producer_id("empty", TIMEOUT, None).expect("init");
    let done = begin(&node, "done", &[("a", 0)]);
    c.end_transaction("done", done.producer_id, done.epoch, Commit).expect("commit");
    let open_txn = begin(&node, "open", &[("b", 0)]);
    clock.advance(expiration - 1);
    assert_eq!(c.remove_expired_transactional_ids(), 0);
    c.init_producer_id("fresh", TIMEOUT, None).expect("init");
    clock.advance(1);
    assert_eq!(c.remove_expired_transactional_ids(), 2);
    for id in ["empty", "done"] {
        assert!(node.state.get_transaction_state(id).expect("loaded").is_none(), "{id}");
        assert_eq!(states(&node, id).last(), Some(&None), "{id}: a tombstone");
    }
    // Ongoing is never expired (the timeout aborts it); recent ids stay.
    assert_eq!(cached(&node, "open").state(), Ongoing);
    assert!(node.state.get_transaction_state("fresh").expect("loaded").is_some());
    let parts = set(&[("a", 0)]);
    assert!(is_bad_mapping(c.add_partitions_to_txn("empty", empty.producer_id, 0, &parts)));
    // Reloaded, the expired ids are gone too; a returning id gets a new producer id.
    node.logs.shutdown().expect("shutdown");
    drop(node);
    let node = open(dir.path(), &clock);
    assert!(node.state.get_transaction_state("done").expect("loaded").is_none());
    assert_eq!(cached(&node, "open").producer_id, open_txn.producer_id);
    let back = node.coordinator.init_producer_id("empty", TIMEOUT, None).expect("init");
    assert_eq!(back.epoch, 0);
    assert!(back.producer_id > open_txn.producer_id, "ids are never reissued");
}

/// Make every `__transaction_state` append fail (`max.message.bytes` below
/// any batch), or lift that again.
fn limit_records(node: &Node, max_message_bytes: Option<usize>) {
    let mut overrides: std::collections::BTreeMap<String, String> =
        [("cleanup.policy", "compact"), ("compression.type", "uncompressed")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    if let Some(max) = max_message_bytes {
        overrides.insert("max.message.bytes".into(), max.to_string());
    }
    node.logs.alter_topic_config(crate::txn::TRANSACTION_STATE_TOPIC, overrides).expect("alter");
}

#[test]
fn a_failed_append_changes_nothing_and_a_failed_fence_bumps_only_once() {
    let (_dir, _clock, node) = fresh();
    let c = &node.coordinator;
    let old = begin(&node, ID, &[("a", 0)]);
    let written = records(&node, ID).len();
    limit_records(&node, Some(10));
    let r = c.add_partitions_to_txn(ID, old.producer_id, old.epoch, &set(&[("b", 0)]));
    assert!(matches!(r, Err(TxnError::Storage(_))), "{r:?}");
    let m = cached(&node, ID);
    assert_eq!(
        (m.state(), m.pending_state(), m.partitions.clone()),
        (Ongoing, None, set(&[("a", 0)]))
    );
    let r = c.end_transaction(ID, old.producer_id, old.epoch, Commit);
    assert!(matches!(r, Err(TxnError::Storage(_))), "{r:?}");
    assert_eq!((cached(&node, ID).state(), cached(&node, ID).pending_state()), (Ongoing, None));
    // A fence whose PrepareAbort cannot be written: the epoch is bumped in
    // memory (the old producer is fenced) and the fence is marked failed.
    let r = c.init_producer_id(ID, TIMEOUT, None);
    assert!(matches!(r, Err(TxnError::Storage(_))), "{r:?}");
    let m = cached(&node, ID);
    assert_eq!(
        (m.state(), m.producer_epoch, m.has_failed_epoch_fence()),
        (Ongoing, old.epoch + 1, true)
    );
    assert!(is_fenced(c.end_transaction(ID, old.producer_id, old.epoch, Commit)));
    // Again failing: still no second bump.
    assert!(matches!(c.init_producer_id(ID, TIMEOUT, None), Err(TxnError::Storage(_))));
    assert_eq!(cached(&node, ID).producer_epoch, old.epoch + 1);
    assert_eq!(records(&node, ID).len(), written, "nothing reached the log");
    assert!(node.writer.written().is_empty(), "no marker before a Prepare record");
    limit_records(&node, None);
    assert!(is_concurrent(c.init_producer_id(ID, TIMEOUT, None)));
    let fenced = pe(old.producer_id, old.epoch + 1);
    assert_eq!(node.writer.written(), [(tp("a", 0), marker(fenced, Abort))]);
    assert!(!cached(&node, ID).has_failed_epoch_fence());
    assert_eq!(
        c.init_producer_id(ID, TIMEOUT, None).expect("retry"),
        pe(old.producer_id, old.epoch + 2)
    );
}

#[test]
fn expiry_writes_one_tombstone_batch_per_partition_within_max_message_bytes() {
    let (_dir, clock, node) = fresh();
    let c = &node.coordinator;
    // Six ids of one __transaction_state partition, three of others.
    let all: Vec<String> = (0..40).map(|i| format!("id-{i:02}")).collect();
    let target = node.state.partition_for(&all[0]);
    let (same, other): (Vec<_>, Vec<_>) =
        all.iter().cloned().partition(|id| node.state.partition_for(id) == target);
    let (same, other) = (&same[..6], &other[..3]);
    for id in same.iter().chain(other) {
        c.init_producer_id(id, TIMEOUT, None).expect("init");
    }
    let batches = |p: i32| {
        let log =
            node.logs.get_log(&tp(crate::txn::TRANSACTION_STATE_TOPIC, p)).expect("partition");
        let mut stats = crate::log::coordinator_loader::LoadStats::default();
        struct Skip;
        impl crate::log::coordinator_loader::CoordinatorRecordVisitor for Skip {
            type Error = String;
            fn record(
                &mut self,
                _: &crate::log::record_batch::BatchHeader,
                _: i64,
                _: Option<&[u8]>,
                _: Option<&[u8]>,
            ) -> Result<(), String> {
                Ok(())
            }
        }
        crate::log::coordinator_loader::load_partition(&log.read(), 1 << 20, &mut Skip, &mut stats);
        stats.batches
    };
    let before = batches(target);
    // Room for four tombstones of these ids per batch: two passes for six.
    let four = 61 + 4 * (same[0].len() + 4 + 26);
    let mut overrides: std::collections::BTreeMap<String, String> =
        [("cleanup.policy", "compact"), ("max.message.bytes", &*four.to_string())]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    node.logs
        .alter_topic_config(crate::txn::TRANSACTION_STATE_TOPIC, overrides.clone())
        .expect("alter");
    clock.advance(config().transactional_id_expiration_ms);
    assert_eq!(c.remove_expired_transactional_ids(), 4 + other.len());
    assert_eq!(batches(target), before + 1, "one batch for the partition's four");
    let left: Vec<_> = same
        .iter()
        .filter(|id| node.state.get_transaction_state(id).expect("loaded").is_some())
        .collect();
    assert_eq!(left.len(), 2, "the rest waits for the next pass");
    overrides.remove("max.message.bytes");
    node.logs.alter_topic_config(crate::txn::TRANSACTION_STATE_TOPIC, overrides).expect("alter");
    assert_eq!(c.remove_expired_transactional_ids(), 2);
    assert_eq!(batches(target), before + 2);
    for id in same.iter().chain(other) {
        assert_eq!(states(&node, id).last(), Some(&None), "{id}: a tombstone");
    }
}

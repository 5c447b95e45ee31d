//! The broker process SIGKILLed at each step of ending a transaction
//! (`src/txn/end_txn.rs`'s crash protocol), made deterministic by the
//! test-only fail points of `sediment::txn::crash_point`, set through
//! `FAILPOINTS` (the process kills itself there):
//! after the Prepare record, after some but not all markers (one partition
//! being `__consumer_offsets`, on either side of the cut), after every marker
//! but before the Complete record. Restarted on the same data dir and port,
//! the broker completes the transaction with the decided outcome: every
//! partition holds exactly one marker of it, the transactional offset is
//! installed on commit and dropped on abort, read_committed readers see the
//! committed records once and no aborted one, and the client's retried EndTxn
//! is answered NONE. A second restart finds the same. The same for the abort
//! the coordinator starts when a second instance fences the producer (the
//! fenced producer's EndTxn is then PRODUCER_FENCED).
//!
//! Also the broker SIGKILLed from outside during the clean of a compacted
//! partition that holds committed, aborted and still-open transactions.

use std::os::unix::process::ExitStatusExt;

use sediment::failpoint;
use sediment::txn::crash_point::{AFTER_MARKERS, AFTER_PREPARE};

use crate::broker::txn::{
    connect_loaded, end_offset, fetch_offset, offsets_partition, read_partition, transaction_state,
    TxnProducer, INVALID_TXN_STATE, NONE, PRODUCER_FENCED,
};
use crate::broker::{
    cleaner_checkpoint, create_topic, dump_log, now_ms, produce, TestBroker, Wire,
};

const GROUP: &str = "g";
const ID: &str = "crashing";
const OFFSET: i64 = 42;

/// The markers (COMMIT/ABORT control batches) in a partition's first segment, read from disk.
fn markers_on_disk(b: &TestBroker, topic: &str, partition: i32) -> usize {
    let segment =
        b.data_dir().join(format!("{topic}-{partition}")).join("00000000000000000000.log");
    if !segment.exists() {
        return 0;
    }
    dump_log(&segment).matches("isControl: true").count()
}

/// How the transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Commit,
    Abort,
    /// A second instance's InitProducerId fences the producer: the
    /// coordinator aborts the transaction with the epoch bumped.
    Fence,
}

/// One transaction over `topics` (partition 0 each, two records per
/// partition) plus a transactional offset for `GROUP`, ended as `ending`
/// by a broker started with the fail point `point` (name, argument); the broker
/// kills itself before answering. `marked_before` is how many of the
/// partitions (in topic/partition order, `__consumer_offsets` among them)
/// had their marker when it died.
fn crash_then_restart(
    point: (&str, Option<&str>),
    topics: &[&str],
    ending: Ending,
    marked_before: usize,
) {
    let setting = failpoint::setting(point.0, point.1);
    let mut b = TestBroker::start_with_env(&[], &[(failpoint::ENV, setting.as_str())]);
    for t in topics {
        create_topic(b.port, t, 1, &[]);
    }
    let mut w = connect_loaded(b.port);
    let mut p = TxnProducer::init(&mut w, ID, 60_000).expect("init");
    let tps: Vec<(&str, i32)> = topics.iter().map(|t| (*t, 0)).collect();
    assert_eq!(p.add(&mut w, &tps).expect("add"), vec![NONE; tps.len()]);
    assert_eq!(p.add_offsets(&mut w, GROUP), Some(NONE));
    let ts = now_ms();
    for t in topics {
        let records: Vec<_> = (0..2).map(|i| (format!("k{i}"), format!("{t}-{i}"))).collect();
        assert_eq!(p.produce(&mut w, (t, 0), ts, &records), Some(NONE));
    }
    assert_eq!(p.commit_offset(&mut w, GROUP, (topics[0], 0), OFFSET), Some(NONE));
    let commit = ending == Ending::Commit;
    match ending {
        Ending::Commit | Ending::Abort => p.send_end(&mut w, commit).expect("EndTxn sent"),
        Ending::Fence => {
            let mut other = connect_loaded(b.port);
            TxnProducer::send_init(&mut other, ID, 60_000).expect("InitProducerId sent")
        }
    };
    let status = b.wait_exit(30);
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}; broker log:\n{}", b.log());
    assert!(b.log().contains("SIGKILL at"), "the crash point fired: {}", b.log());

    // What the killed process left: the first `marked_before` partitions
    // have their marker, the others none.
    let offsets_topic = "__consumer_offsets";
    let group_partition = offsets_partition(GROUP);
    let mut all: Vec<(&str, i32)> = tps.clone();
    all.push((offsets_topic, group_partition));
    all.sort();
    let on_disk: Vec<usize> = all.iter().map(|(t, n)| markers_on_disk(&b, t, *n)).collect();
    let expected: Vec<usize> = (0..all.len()).map(|i| usize::from(i < marked_before)).collect();
    assert_eq!(on_disk, expected, "markers at the crash in {all:?}");

    b.set_env(&[]);
    b.restart();
    let mut w = connect_loaded(b.port);
    if ending == Ending::Fence {
        // The fenced producer's commit is refused; the abort stands. The
        // refusal needs only the new epoch, so the abort's markers may still
        // be on their way: what follows waits for its Complete record.
        assert_eq!(p.end_retrying(&mut w, true), Some(PRODUCER_FENCED), "{}", b.log());
        b.wait_for(30, "the fence's abort to complete", || {
            (transaction_state(&mut w, ID)? == "CompleteAbort").then_some(())
        });
    } else {
        // The client's retried EndTxn: the outcome stands.
        assert_eq!(p.end_retrying(&mut w, commit), Some(NONE), "broker log:\n{}", b.log());
        assert_eq!(p.end(&mut w, !commit), Some(INVALID_TXN_STATE), "the other outcome");
    }
    check_completed(&mut w, &p, topics, commit);
    let stopped = b.stop();
    assert!(stopped.success(), "{stopped:?}; broker log:\n{}", b.log());
    b.restart();
    let mut w = connect_loaded(b.port);
    check_completed(&mut w, &p, topics, commit);
    // The producer (or, after a fence, the new instance retrying its
    // InitProducerId: old epoch + 2, as on Kafka) carries on.
    let next = TxnProducer::init(&mut w, ID, 60_000).expect("init");
    let bump = if ending == Ending::Fence { 2 } else { 1 };
    assert_eq!((next.pid, next.epoch), (p.pid, p.epoch + bump));
    p = next;
    assert_eq!(p.add(&mut w, &tps[..1]).expect("add"), [NONE]);
    assert_eq!(p.end(&mut w, true), Some(NONE));
}

/// Exactly one marker of `p` with the decided outcome in every partition of
/// its transaction, no transaction left open, the records visible to
/// read_committed once on commit and never on abort, the offset installed
/// on commit only.
fn check_completed(w: &mut Wire, p: &TxnProducer, topics: &[&str], commit: bool) {
    let group_partition = offsets_partition(GROUP);
    let offsets = read_partition(w, "__consumer_offsets", group_partition, false);
    assert_eq!(offsets.markers_of(p.pid).len(), 1, "one marker on __consumer_offsets");
    assert_eq!(offsets.markers_of(p.pid)[0].1, commit);
    for t in topics {
        assert_eq!(end_offset(w, t, 0, true), end_offset(w, t, 0, false), "{t}: nothing open");
        let all = read_partition(w, t, 0, false);
        let markers = all.markers_of(p.pid);
        assert_eq!(markers.len(), 1, "{t}: one marker, got {markers:?}");
        assert_eq!(markers[0], (2, commit), "{t}: the marker after the two records");
        let committed = read_partition(w, t, 0, true).values();
        let want: Vec<String> =
            if commit { (0..2).map(|i| format!("{t}-{i}")).collect() } else { Vec::new() };
        assert_eq!(committed, want, "{t}: read_committed");
    }
    let installed = if commit { OFFSET } else { -1 };
    assert_eq!(fetch_offset(w, GROUP, topics[0], 0), (NONE, installed), "the group's offset");
}

#[test]
fn sigkill_after_the_prepare_record() {
    crash_then_restart((AFTER_PREPARE, None), &["a", "b"], Ending::Commit, 0);
    crash_then_restart((AFTER_PREPARE, None), &["a", "b"], Ending::Abort, 0);
}

#[test]
fn sigkill_after_some_markers_the_offsets_partition_among_the_marked() {
    // Order: Alpha-0, __consumer_offsets-n, b-0 ('A' < '_' < 'b').
    crash_then_restart((AFTER_MARKERS, Some("2")), &["Alpha", "b"], Ending::Commit, 2);
    // Order: __consumer_offsets-n, a-0, b-0.
    crash_then_restart((AFTER_MARKERS, Some("1")), &["a", "b"], Ending::Abort, 1);
}

#[test]
fn sigkill_after_some_markers_the_offsets_partition_among_the_unmarked() {
    crash_then_restart((AFTER_MARKERS, Some("1")), &["Alpha", "b"], Ending::Commit, 1);
    crash_then_restart((AFTER_MARKERS, Some("1")), &["Alpha", "b"], Ending::Abort, 1);
}

#[test]
fn sigkill_after_every_marker_before_the_complete_record() {
    crash_then_restart((AFTER_MARKERS, None), &["a", "b"], Ending::Commit, 3);
    crash_then_restart((AFTER_MARKERS, None), &["a", "b"], Ending::Abort, 3);
}

#[test]
fn sigkill_in_the_middle_of_a_fence() {
    crash_then_restart((AFTER_PREPARE, None), &["a", "b"], Ending::Fence, 0);
    crash_then_restart((AFTER_MARKERS, Some("1")), &["Alpha", "b"], Ending::Fence, 1);
}

const KEYS: usize = 2000;

#[test]
fn sigkill_mid_clean_of_a_partition_with_open_transactions() {
    // The ~8 MB clean lasts seconds under the slow cleaner's throttle.
    let mut b = TestBroker::start_with_slow_cleaner();
    let mut w = connect_loaded(b.port);
    let t = now_ms() - 60_000;
    let pad = "x".repeat(1000);
    let batch = |round: &str, chunk: &[usize]| -> Vec<(String, String)> {
        chunk.iter().map(|k| (format!("key-{k:05}"), format!("{round}-{pad}"))).collect()
    };
    let chunks: Vec<Vec<usize>> =
        (0..KEYS).collect::<Vec<_>>().chunks(100).map(<[_]>::to_vec).collect();
    // Round 0 plain, round 1 committed, round 2 aborted, round 3 committed
    // by one producer; then another producer's transaction stays open.
    for c in &chunks {
        let records: Vec<_> = batch("plain0", c).into_iter().map(|(k, v)| (k, Some(v))).collect();
        produce(&mut w, "state", 0, t, &records);
    }
    let mut p = TxnProducer::init(&mut w, "writer", 60_000).expect("init");
    for (round, commit) in [("committed1", true), ("aborted2", false), ("committed3", true)] {
        assert_eq!(p.add(&mut w, &[("state", 0)]).expect("add"), [NONE]);
        for c in &chunks {
            assert_eq!(p.produce(&mut w, ("state", 0), t, &batch(round, c)), Some(NONE));
        }
        assert_eq!(p.end(&mut w, commit), Some(NONE));
    }
    let mut open = TxnProducer::init(&mut w, "open", 120_000).expect("init");
    assert_eq!(open.add(&mut w, &[("state", 0)]).expect("add"), [NONE]);
    let open_value = "open4".to_string();
    assert_eq!(
        open.produce(&mut w, ("state", 0), t, &[("key-00000".into(), open_value.clone())]),
        Some(NONE)
    );
    let first_unstable = end_offset(&mut w, "state", 0, false) - 1;
    // A plain record a minute ahead (record time) rolls the segment, so the
    // open transaction lies in closed, cleanable segments. (The markers,
    // stamped with the broker's time, may have rolled segments before.)
    produce(&mut w, "state", 0, now_ms() + 60_000, &[("key-00001".into(), Some("plain5".into()))]);
    drop(w);

    let dir = b.data_dir().join("state-0");
    b.wait_for_clean_in_progress(&dir, 60);
    b.kill();
    assert_eq!(cleaner_checkpoint(&b.data_dir(), "state", 0), None, "killed mid-clean");

    b.restart();
    let mut w = connect_loaded(b.port);
    assert_eq!(
        end_offset(&mut w, "state", 0, true),
        first_unstable,
        "the open transaction holds the LSO"
    );
    // Newest committed value per key below the LSO: round 3's.
    let check = |w: &mut Wire, extra: &[(&str, &str)]| {
        let read = read_partition(w, "state", 0, true);
        let mut latest = std::collections::BTreeMap::new();
        for (_, k, v) in &read.records {
            assert!(!v.starts_with("aborted2"), "aborted data visible at read_committed: {k}");
            latest.insert(k.clone(), v.split('-').next().unwrap_or("").to_string());
        }
        assert_eq!(latest.len(), KEYS, "every key");
        let mut want: std::collections::BTreeMap<String, String> =
            (0..KEYS).map(|k| (format!("key-{k:05}"), "committed3".to_string())).collect();
        for (k, v) in extra {
            want.insert(k.to_string(), v.to_string());
        }
        assert_eq!(latest, want);
    };
    check(&mut w, &[]);
    // The open transaction, loaded Ongoing, commits after the restart.
    assert_eq!(open.end(&mut w, true), Some(NONE), "broker log:\n{}", b.log());
    assert_eq!(end_offset(&mut w, "state", 0, true), end_offset(&mut w, "state", 0, false));
    check(&mut w, &[("key-00000", &open_value), ("key-00001", "plain5")]);
    // A clean completes after the restart (the killed one wrote no
    // checkpoint): the aborted batches below the first unstable offset are
    // gone even for read_uncommitted.
    let end = b.wait_for(60, "a clean to complete after the restart", || {
        cleaner_checkpoint(&b.data_dir(), "state", 0)
    });
    assert!(end >= first_unstable, "the clean stopped at {end}; broker log:\n{}", b.log());
    let all = read_partition(&mut w, "state", 0, false);
    assert!(all.records.iter().all(|r| !r.2.starts_with("aborted2")), "aborted data removed");
    check(&mut w, &[("key-00000", &open_value), ("key-00001", "plain5")]);
}

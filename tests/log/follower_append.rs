//! A follower's log (`Log::append_as_follower`): the leader's batches, read
//! as a follower's fetch reads them (`FetchIsolation::LogEnd`), appended
//! into another log leave it identical: the same bytes at the same
//! offsets, the same leader epochs, transactions, last stable offset and
//! producer state, also after a reopen. What does not follow the log end
//! or its epochs, or is damaged, is refused and changes nothing.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use sediment::clock::MockClock;
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::record_batch::{BatchBuilder, BatchHeader};
use sediment::log::{FetchIsolation, LoadParams, Log, LogConfig, LogError, TopicPartition};

const NOW: i64 = 1_700_000_000_000;

fn open(dir: &Path) -> Log {
    let mut overrides = std::collections::BTreeMap::new();
    overrides.insert("segment.bytes".to_string(), "400".to_string());
    let config = Arc::new(LogConfig::resolve(&Default::default(), overrides).unwrap());
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    Log::open(dir, TopicPartition::new("t", 0), config, load, false, MockClock::new(NOW)).unwrap()
}

fn batch(pid: i64, seq: i32, transactional: bool, codec: Compression) -> Vec<u8> {
    let mut b = BatchBuilder::new(codec, NOW).producer(pid, 0, seq);
    b.transactional = transactional;
    for i in 0..3 {
        b.append(NOW, Some(format!("k{pid}-{seq}-{i}").as_bytes()), Some(b"value"));
    }
    b.build()
}

/// A leader log over several segments and epochs, with an aborted
/// transaction, a committed one and one left open.
fn leader(dir: &Path) -> Log {
    let mut log = open(dir);
    for seq in (0..12).step_by(3) {
        log.append_as_leader(&mut batch(7, seq, false, Compression::None)).unwrap();
    }
    log.become_leader(3).unwrap();
    log.append_as_leader(&mut batch(9, 0, true, Compression::Lz4)).unwrap();
    log.append_end_txn_marker(9, 0, EndTransactionMarker::abort(0)).unwrap();
    log.append_as_leader(&mut batch(9, 3, true, Compression::Zstd)).unwrap();
    log.append_end_txn_marker(9, 0, EndTransactionMarker::commit(0)).unwrap();
    log.become_leader(4).unwrap();
    for seq in (12..24).step_by(3) {
        log.append_as_leader(&mut batch(7, seq, false, Compression::Gzip)).unwrap();
    }
    log.append_as_leader(&mut batch(11, 0, true, Compression::None)).unwrap();
    log
}

/// What a follower's fetches from `from` return, one response of at most
/// `max_bytes` at a time (at least one batch each).
fn fetches(log: &Log, mut from: i64, max_bytes: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    while from < log.log_end_offset() {
        let info = log.read_region_with_isolation(from, max_bytes, true, FetchIsolation::LogEnd);
        let bytes = info.unwrap().records.expect("records").read_to_bytes().unwrap();
        from = last_next_offset(&bytes);
        out.push(bytes);
    }
    out
}

fn last_next_offset(bytes: &[u8]) -> i64 {
    let mut pos = 0;
    let mut next = -1;
    while pos < bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).unwrap();
        next = h.next_offset();
        pos += h.size_in_bytes();
    }
    next
}

/// Everything of a log a replica must share with its leader.
fn state(log: &Log) -> String {
    let data: Vec<Bytes> = fetches(log, 0, 1 << 20);
    format!(
        "end {} lso {} fuo {:?} epochs {:?} aborted {:?} producers {:?} bytes {:?}",
        log.log_end_offset(),
        log.last_stable_offset(),
        log.first_unstable_offset(),
        log.leader_epoch_cache().entries(),
        log.collect_aborted_transactions(0, log.log_end_offset()).unwrap(),
        log.producer_state().snapshot_entries(),
        data.concat(),
    )
}

#[test]
fn a_follower_appending_its_leaders_fetches_holds_the_same_log() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = leader(ld.path());
    let mut follower = open(fd.path());
    for response in fetches(&leader, 0, 500) {
        follower.append_as_follower(&response).unwrap();
    }
    assert_eq!(state(&follower), state(&leader));
    assert_eq!(follower.first_unstable_offset(), leader.first_unstable_offset());
    assert!(leader.first_unstable_offset().is_some(), "producer 11's transaction is open");
    assert_eq!(
        follower.leader_epoch_cache().entries().iter().map(|e| e.epoch).collect::<Vec<_>>(),
        vec![0, 3, 4]
    );
    follower.close().unwrap();
    drop(follower);
    let follower = open(fd.path());
    assert_eq!(state(&follower), state(&leader), "after a reopen");
}

#[test]
fn what_does_not_follow_the_log_is_refused_and_changes_nothing() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = leader(ld.path());
    let responses = fetches(&leader, 0, 500);
    let mut follower = open(fd.path());
    follower.append_as_follower(&responses[0]).unwrap();
    follower.append_as_follower(&responses[1]).unwrap();
    let before = state(&follower);
    // The same batches again (overlapping offsets).
    let again = follower.append_as_follower(&responses[1]);
    assert!(matches!(again, Err(LogError::Batch(_))), "{again:?}");
    // A damaged byte (a value, under the CRC).
    let mut damaged = responses[2].to_vec();
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    let refused = follower.append_as_follower(&damaged);
    assert!(matches!(refused, Err(LogError::Batch(_))), "{refused:?}");
    // An epoch below the latest the follower holds.
    let late = responses.iter().position(|r| {
        let h = BatchHeader::parse(r).unwrap();
        h.partition_leader_epoch == 4
    });
    let late = late.expect("a response of epoch 4");
    follower.truncate_fully_and_start_at(0).unwrap();
    for r in &responses[..=late] {
        follower.append_as_follower(r).unwrap();
    }
    let epoch_zero = follower.append_as_follower(&responses[0]);
    assert!(epoch_zero.is_err(), "{epoch_zero:?}");
    assert_eq!(follower.failure(), None, "a refused append leaves the log writable");
    // The log as it was before each refusal: appending the rest completes it.
    for r in &responses[late + 1..] {
        follower.append_as_follower(r).unwrap();
    }
    assert_eq!(state(&follower), state(&leader));
    assert_ne!(before, state(&follower));
}

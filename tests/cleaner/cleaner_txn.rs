//! The cleaner's transaction rules, one scenario each, through the log API:
//! aborted batches go whatever their keys while committed data is
//! deduplicated like plain data; a marker stays while data of its
//! transaction is in the clean, gets its delete horizon in the first clean
//! without it and goes at or past it; the cleaned `.txnindex` keeps exactly
//! the entries of the ABORT markers kept for their data; a producer's last
//! data batch stays (empty), and with no data cached, its current epoch's
//! marker; nothing at or past the first unstable offset is touched.

use parking_lot::RwLock;

use crate::common::{all_batches, append, clean_once, cleaner, open_log, read_all};
use sediment::clock::MockClock;
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::record_batch::{BatchBuilder, BatchHeader};
use sediment::log::Log;

const NOW: i64 = 1_700_000_000_000;
const CONFIG: [(&str, &str); 3] =
    [("cleanup.policy", "compact"), ("delete.retention.ms", "1000"), ("file.delete.delay.ms", "0")];

fn txn(log: &mut Log, pid: i64, epoch: i16, seq: i32, records: &[(&str, &str)]) -> i64 {
    let mut b = BatchBuilder::new(Compression::None, NOW).producer(pid, epoch, seq);
    b.transactional = true;
    for (k, v) in records {
        b.append(NOW, Some(k.as_bytes()), Some(v.as_bytes()));
    }
    log.append_as_leader(&mut b.build()).unwrap().first_offset
}

fn end(log: &mut Log, pid: i64, epoch: i16, commit: bool) -> i64 {
    let m = if commit { EndTransactionMarker::commit(0) } else { EndTransactionMarker::abort(0) };
    log.append_end_txn_marker(pid, epoch, m).unwrap().first_offset
}

fn plain(log: &mut Log, k: &str, v: &str) -> i64 {
    append(log, Compression::None, &[(NOW, Some(k.as_bytes()), Some(v.as_bytes()))]).first_offset
}

fn batch_at(log: &Log, offset: i64) -> Option<(BatchHeader, usize)> {
    all_batches(log).into_iter().find(|(h, _)| h.base_offset == offset).map(|(h, r)| (h, r.len()))
}

/// A clean of everything cleanable at `now`, from `checkpoint`; the new checkpoint.
fn clean(c: &mut sediment::cleaner::Cleaner, log: &RwLock<Log>, checkpoint: i64, now: i64) -> i64 {
    let end = clean_once(c, log, checkpoint, now).end_offset;
    log.write().delete_expired_files(now, true).unwrap();
    end
}

#[test]
fn aborted_data_goes_markers_wait_for_their_data_then_their_horizon() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let mut log = open_log(dir.path(), "rules", &CONFIG, clock.clone());
    let v0 = plain(&mut log, "k1", "v0");
    let aborted = txn(&mut log, 5, 0, 0, &[("k1", "aborted"), ("k9", "aborted-only-key")]);
    let abort_marker = end(&mut log, 5, 0, false);
    let committed = txn(&mut log, 6, 0, 0, &[("k2", "c1")]);
    let commit_marker = end(&mut log, 6, 0, true);
    let v2 = plain(&mut log, "k2", "v2");
    // Both producers move on, so their last data batches are elsewhere.
    let later5 = txn(&mut log, 5, 0, 2, &[("k3", "c")]);
    end(&mut log, 5, 0, true);
    let later6 = txn(&mut log, 6, 0, 1, &[("k4", "c")]);
    end(&mut log, 6, 0, true);
    log.roll_if_not_empty().unwrap();
    let entries = log.collect_aborted_transactions(0, log.log_end_offset()).unwrap();
    assert_eq!(entries.len(), 1);
    let log = RwLock::new(log);
    let mut c = cleaner(1 << 20, clock.clone());

    // Clean 1: the aborted batch goes whole (its unique key too) and does not
    // shadow k1's committed value; committed k2 is superseded like plain data.
    let cp = clean(&mut c, &log, 0, NOW);
    {
        let l = log.read();
        let offsets: Vec<i64> = read_all(&l, 0, 1 << 20).iter().map(|r| r.offset).collect();
        assert!(offsets.contains(&v0) && offsets.contains(&v2), "{offsets:?}");
        assert!(!offsets.contains(&aborted) && !offsets.contains(&(aborted + 1)), "{offsets:?}");
        assert!(!offsets.contains(&committed), "{offsets:?}");
        assert!(offsets.contains(&later5) && offsets.contains(&later6));
        // Both markers saw their data in this clean: kept, no horizon yet.
        for m in [abort_marker, commit_marker] {
            let (h, n) = batch_at(&l, m).expect("marker kept");
            assert_eq!((n, h.delete_horizon_ms()), (1, None), "marker at {m}");
        }
        assert_eq!(l.collect_aborted_transactions(0, l.log_end_offset()).unwrap(), entries);
    }

    // Clean 2: their data is gone, so the horizon is stamped now; the ABORT
    // marker's `.txnindex` entry goes (nothing of it is left to filter).
    let t2 = NOW + 10;
    let cp = clean(&mut c, &log, cp, t2);
    {
        let l = log.read();
        for m in [abort_marker, commit_marker] {
            let (h, n) = batch_at(&l, m).expect("marker kept until its horizon");
            assert_eq!((n, h.delete_horizon_ms()), (1, Some(t2 + 1000)), "marker at {m}");
        }
        assert_eq!(l.collect_aborted_transactions(0, l.log_end_offset()).unwrap(), vec![]);
    }

    // Clean 3, just before the horizon: still there; clean 4, at it: gone.
    let cp = clean(&mut c, &log, cp, t2 + 999);
    assert!(batch_at(&log.read(), abort_marker).is_some());
    clean(&mut c, &log, cp, t2 + 1000);
    let l = log.read();
    assert!(batch_at(&l, abort_marker).is_none() && batch_at(&l, commit_marker).is_none());
    assert!(batch_at(&l, later5).is_some() && batch_at(&l, later6).is_some());
}

#[test]
fn a_producers_last_data_batch_stays_and_with_none_its_epochs_marker() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let mut log = open_log(dir.path(), "last", &CONFIG, clock.clone());
    // Producer 7: its only data batch is superseded, then committed.
    let data7 = txn(&mut log, 7, 0, 0, &[("k1", "a")]);
    let marker7 = end(&mut log, 7, 0, true);
    plain(&mut log, "k1", "b");
    // Producer 8: the coordinator aborts with a bumped epoch; the state then
    // caches no data batch of the new epoch.
    let data8 = txn(&mut log, 8, 0, 0, &[("k5", "x")]);
    let marker8 = end(&mut log, 8, 1, false);
    log.roll_if_not_empty().unwrap();
    let log = RwLock::new(log);
    let mut c = cleaner(1 << 20, clock.clone());
    let mut cp = 0;
    for now in [NOW, NOW + 10, NOW + 5000] {
        cp = clean(&mut c, &log, cp, now);
    }
    let l = log.read();
    // Producer 7's last data batch stays, emptied; its marker stays with it
    // (a batch of its transaction is still seen by every clean).
    let (h, n) = batch_at(&l, data7).expect("last data batch kept");
    assert_eq!((n, h.producer_id, h.base_sequence), (0, 7, 0));
    assert!(batch_at(&l, marker7).is_some());
    // Producer 8: the aborted batch is gone; past its horizon the marker of
    // the current epoch stays as an empty batch.
    assert!(batch_at(&l, data8).is_none());
    let (h, n) = batch_at(&l, marker8).expect("current epoch's marker kept");
    assert_eq!((n, h.is_control(), h.producer_epoch), (0, true, 1));
}

#[test]
fn nothing_at_or_past_the_first_unstable_offset_changes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let mut log = open_log(dir.path(), "fuo", &CONFIG, clock.clone());
    plain(&mut log, "k1", "a");
    let open = txn(&mut log, 9, 0, 0, &[("k1", "open")]);
    let later = plain(&mut log, "k1", "newer");
    log.roll_if_not_empty().unwrap();
    let fuo = log.first_unstable_offset();
    assert_eq!(fuo, Some(open));
    let before: Vec<_> =
        all_batches(&log).into_iter().filter(|(h, _)| h.base_offset >= open).collect();
    let log = RwLock::new(log);
    let mut c = cleaner(1 << 20, clock.clone());
    let end = clean(&mut c, &log, 0, NOW);
    assert!(end <= open, "the clean ended at {end}, past the FUO {open}");
    let l = log.read();
    let after: Vec<_> =
        all_batches(&l).into_iter().filter(|(h, _)| h.base_offset >= open).collect();
    assert_eq!(after, before);
    // k1's first value stays: the newer ones are not cleanable yet.
    let offsets: Vec<i64> = read_all(&l, 0, 1 << 20).iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![0, open, later]);
}

#[test]
fn an_abort_before_the_dirty_range_does_not_hide_the_producers_later_data() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let mut log = open_log(dir.path(), "dirty", &CONFIG, clock.clone());
    txn(&mut log, 3, 0, 0, &[("k1", "aborted")]);
    end(&mut log, 3, 0, false);
    log.roll_if_not_empty().unwrap();
    let log = RwLock::new(log);
    let mut c = cleaner(1 << 20, clock.clone());
    let cp = clean(&mut c, &log, 0, NOW);
    // Dirty now: the producer's committed k2 twice, and a newer k2 after it.
    {
        let mut l = log.write();
        txn(&mut l, 3, 0, 1, &[("k2", "c1")]);
        end(&mut l, 3, 0, true);
        txn(&mut l, 3, 0, 2, &[("k2", "c2"), ("k9", "x")]);
        end(&mut l, 3, 0, true);
        l.roll_if_not_empty().unwrap();
    }
    let end_offset = clean(&mut c, &log, cp, NOW);
    let l = log.read();
    let k2: Vec<_> = read_all(&l, 0, 1 << 20)
        .into_iter()
        .filter(|r| r.key.as_deref() == Some(&b"k2"[..]) && r.offset < end_offset)
        .collect();
    assert_eq!(k2.len(), 1, "committed data is deduplicated: {k2:?}");
    assert_eq!(k2[0].value.as_deref(), Some(&b"c2"[..]));
}

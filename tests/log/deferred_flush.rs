//! Produce's fsyncs run after the partition's lock is released
//! (`Log::append_deferring_flush`, `FlushJob`), and with
//! `log.flush.before.ack` nothing is answered or readable before its fsync:
//! the high watermark waits for the job, and a retried batch whose
//! original's fsync is still pending is answered only with a job of its own
//! covering the original.

use std::sync::Arc;

use sediment::clock::MockClock;
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;
use sediment::log::{FetchIsolation, LoadParams, Log, LogConfig, TopicPartition};

const NOW: i64 = 1_700_000_000_000;

fn open(dir: &std::path::Path) -> Log {
    let config = Arc::new(LogConfig::resolve(&Default::default(), Default::default()).unwrap());
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    // flush_before_ack: the broker's log.flush.before.ack=true.
    Log::open(dir, TopicPartition::new("acks", 0), config, load, true, MockClock::new(NOW)).unwrap()
}

/// One record of idempotent producer 7 at sequence `seq`.
fn batch(seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, NOW).producer(7, 0, seq);
    b.append(NOW, Some(format!("k{seq}").as_bytes()), Some(b"v"));
    b.build()
}

#[test]
fn a_record_is_readable_only_once_its_fsync_ran() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    let (info, job) = log.append_deferring_flush(&mut batch(0), None).unwrap();
    let job = job.expect("log.flush.before.ack defers an fsync");
    assert_eq!((info.first_offset, log.log_end_offset()), (0, 1));
    assert_eq!(log.high_watermark(), 0, "readable before it is durable");
    let read = |log: &Log, isolation| {
        log.read_region_with_isolation(0, 1 << 20, true, isolation).unwrap().records.is_some()
    };
    assert!(!read(&log, FetchIsolation::HighWatermark), "a consumer read it before its fsync");
    assert!(!read(&log, FetchIsolation::TxnCommitted));
    assert!(read(&log, FetchIsolation::LogEnd), "a follower reads to the log end");
    assert_eq!(job.upto(), 1);
    let synced = job.run();
    log.complete_flush(synced).unwrap();
    assert_eq!((log.high_watermark(), log.recovery_point()), (1, 1));
    assert!(read(&log, FetchIsolation::HighWatermark), "readable once durable");
}

#[test]
fn a_retry_while_the_original_fsync_is_pending_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    let (_, original) = log.append_deferring_flush(&mut batch(0), None).unwrap();
    assert!(original.is_some());
    // The producer timed out and resends while the original's job runs.
    let (retry, job) = log.append_deferring_flush(&mut batch(0), None).unwrap();
    assert_eq!((retry.first_offset, retry.records_count), (0, 0), "answered as a duplicate");
    let job = job.expect("the retry is not answered before the original is durable");
    assert_eq!(job.upto(), 1);
    let synced = job.run();
    log.complete_flush(synced).unwrap();
    assert_eq!(log.recovery_point(), 1);
    // Once durable, a retry needs no fsync of its own.
    let (_, again) = log.append_deferring_flush(&mut batch(0), None).unwrap();
    assert!(again.is_none());
}

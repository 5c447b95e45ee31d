//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sediment::clock::{self, SharedClock};
use sediment::log::compression::Compression;
use sediment::log::record_batch::{BatchBuilder, BatchHeader, RecordIter};
use sediment::log::{Log, LogManager, LogManagerConfig};

/// One record as the tests model it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// (timestamp, key, value) of a record to append.
pub type RecordSpec<'a> = (i64, Option<&'a [u8]>, Option<&'a [u8]>);

/// Build one producer batch from (timestamp, key, value) triples.
pub fn batch(codec: Compression, records: &[RecordSpec<'_>]) -> Vec<u8> {
    let base_ts = records.first().map_or(0, |r| r.0);
    let mut b = BatchBuilder::new(codec, base_ts);
    for (ts, k, v) in records {
        b.append(*ts, *k, *v);
    }
    b.build()
}

/// Decode every record in `bytes` (whole batches).
pub fn decode(bytes: &[u8]) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut scratch = Vec::new();
    while pos < bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).expect("header");
        let batch = &bytes[pos..pos + h.size_in_bytes()];
        sediment::log::record_batch::check_batch(batch, usize::MAX).expect("crc");
        let payload = sediment::log::record_batch::records_bytes(&h, batch, &mut scratch, 1 << 30)
            .expect("payload");
        for r in RecordIter::new(payload, h.records_count) {
            let r = r.expect("record");
            out.push(Rec {
                offset: h.base_offset + r.offset_delta as i64,
                timestamp: h.timestamp_base() + r.timestamp_delta,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
            });
        }
        pos += h.size_in_bytes();
    }
    out
}

/// Every record of the log from `from`, read in `max_bytes` steps.
pub fn read_all(log: &Log, from: i64, max_bytes: usize) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end_offset() {
        let data = log.read(next, max_bytes, true).expect("read");
        if data.records.is_empty() {
            // Only legitimate in a gap the cleaner left before an empty active segment.
            let holds_more = log.segments().any(|s| s.size() > 0 && s.next_offset() > next);
            assert!(
                !holds_more,
                "read at {next} returned nothing before the log end {}",
                log.log_end_offset()
            );
            break;
        }
        for r in decode(&data.records) {
            if r.offset >= next {
                next = r.offset + 1;
                out.push(r);
            }
        }
        // Like a consumer, continue after the last batch read: batches may be
        // empty (a producer's last batch kept by the cleaner) or end in removed records.
        let mut pos = 0;
        while pos < data.records.len() {
            let h = BatchHeader::parse(&data.records[pos..]).expect("header");
            next = next.max(h.next_offset());
            pos += h.size_in_bytes();
        }
    }
    out
}

pub fn manager(dir: &Path, defaults: &[(&str, &str)], clock: SharedClock) -> LogManager {
    let mut config = LogManagerConfig::new(dir);
    config.topic_defaults =
        defaults.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>();
    LogManager::open(config, clock).expect("open log manager")
}

pub fn system_manager(dir: &Path) -> LogManager {
    manager(dir, &[], clock::system())
}

pub fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

pub fn shared<T>(t: T) -> Arc<T> {
    Arc::new(t)
}

// ---- cleaner helpers ----

use parking_lot::RwLock;

use sediment::cleaner::{
    cleanable_offsets, CancellationToken, CleanResult, Cleaner, CleanerConfig, LogToClean,
    Throttler,
};
use sediment::log::{LoadParams, LogConfig, TopicPartition};

/// Open (or reopen) a partition log directly, as `LogManager` would after a crash.
pub fn open_log(dir: &Path, topic: &str, pairs: &[(&str, &str)], clock: SharedClock) -> Log {
    let config = LogConfig::resolve(&BTreeMap::new(), overrides(pairs)).expect("config");
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: false };
    Log::open(dir, TopicPartition::new(topic, 0), Arc::new(config), load, false, clock)
        .expect("open log")
}

/// A cleaner with `budget` bytes of map and small buffers.
pub fn cleaner(budget: usize, clock: SharedClock) -> Cleaner {
    let config = CleanerConfig {
        dedupe_buffer_size: budget,
        io_buffer_size: 4096,
        ..CleanerConfig::default()
    };
    Cleaner::new(0, config, Arc::new(Throttler::unlimited(clock.clone())), clock).expect("cleaner")
}

/// One clean from `checkpoint`, as the manager would run it; returns the result.
pub fn clean_once(
    cleaner: &mut Cleaner,
    log: &RwLock<Log>,
    checkpoint: i64,
    now: i64,
) -> CleanResult {
    let to_clean = {
        let log = log.read();
        let (first_dirty, uncleanable) = cleanable_offsets(&log, Some(checkpoint), None, now);
        LogToClean::new(&log, first_dirty, uncleanable)
    };
    cleaner.clean(log, &to_clean, now, &CancellationToken::new()).expect("clean")
}

/// Clean until the checkpoint reaches the first uncleanable offset; returns the checkpoint.
pub fn clean_fully(cleaner: &mut Cleaner, log: &RwLock<Log>, mut checkpoint: i64, now: i64) -> i64 {
    loop {
        let result = clean_once(cleaner, log, checkpoint, now);
        let uncleanable = log.read().active_segment().base_offset();
        assert!(result.end_offset >= checkpoint, "the checkpoint never moves back");
        if result.end_offset == checkpoint || result.end_offset >= uncleanable {
            return result.end_offset;
        }
        checkpoint = result.end_offset;
    }
}

/// Every batch of every segment, read from the files: header and records.
/// Panics on a bad CRC or framing.
pub fn all_batches(log: &Log) -> Vec<(BatchHeader, Vec<Rec>)> {
    let mut out = Vec::new();
    for seg in log.segments() {
        let bytes = std::fs::read(seg.log_path()).expect("read segment");
        let bytes = &bytes[..seg.size() as usize];
        let mut pos = 0;
        while pos < bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]).expect("header");
            let batch = &bytes[pos..pos + h.size_in_bytes()];
            sediment::log::record_batch::check_batch(batch, usize::MAX).expect("valid CRC");
            out.push((h, decode(batch)));
            pos += h.size_in_bytes();
        }
    }
    out
}

/// Names of leftover files of an interrupted clean in `dir`.
pub fn stray_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted"))
        .collect();
    v.sort();
    v
}

/// Append one batch; key-less records need the log to accept them for a moment.
pub fn append(
    log: &mut Log,
    codec: Compression,
    records: &[RecordSpec<'_>],
) -> sediment::log::LogAppendInfo {
    let keyless = records.iter().any(|r| r.1.is_none());
    let config = Arc::clone(log.config());
    if keyless {
        let mut c = (*config).clone();
        c.compact = false;
        log.update_config(Arc::new(c));
    }
    let info = log.append_as_leader(&mut batch(codec, records)).expect("append");
    log.update_config(config);
    info
}

/// Apache Kafka's kafka-dump-log (DumpLogSegments, via scripts/kafka-tool.sh)
/// on `files` with `extra` options; fails the test on an error or exception.
pub fn kafka_dump_log<P: AsRef<Path>>(files: &[P], extra: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka-tool.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .arg("kafka.tools.DumpLogSegments")
        .args(extra)
        .arg("--files")
        .arg(files.iter().map(|p| p.as_ref().display().to_string()).collect::<Vec<_>>().join(","))
        .output()
        .expect("run scripts/kafka-tool.sh (needs Java 17 and Maven)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "kafka-dump-log failed: {stderr}\n{stdout}");
    assert!(!stderr.contains("Exception"), "kafka-dump-log raised: {stderr}");
    stdout
}

/// The files of `dir` with extension `ext`, sorted.
pub fn files_with(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

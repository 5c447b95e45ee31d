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
        let payload = sediment::log::record_batch::records_bytes(&h, batch, &mut scratch, 1 << 30).expect("payload");
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
        let recs = decode(&data.records);
        assert!(!recs.is_empty(), "read at {next} returned nothing before the log end {}", log.log_end_offset());
        for r in recs {
            if r.offset >= next {
                next = r.offset + 1;
                out.push(r);
            }
        }
    }
    out
}

pub fn manager(dir: &Path, defaults: &[(&str, &str)], clock: SharedClock) -> LogManager {
    let mut config = LogManagerConfig::new(dir);
    config.topic_defaults = defaults.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>();
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

//! Any bytes as the files of a partition directory, loaded as a broker
//! start loads them (`Log::open`: interrupted swaps completed, the
//! unflushed tail recovered, producer state restored from a snapshot and
//! replayed): the load returns a log or an error, never panics, and never
//! allocates beyond its bounds. A log that loads keeps the loader's
//! invariants (a segment, log start <= recovery point <= log end, no
//! `.swap`/`.cleaned`/`.deleted` file left); when nothing was trusted
//! (unclean shutdown, recovery point 0) every batch read back is whole and
//! passes its CRC, and its offsets move forward; closed and opened again
//! (a clean shutdown), it has the same offsets.
//!
//! Input: a flags byte (clean shutdown; the second segment's files named
//! `.swap`, a clean interrupted at its swap; with a snapshot), recovery
//! point and log start offset (8 bytes each), the second segment's base
//! offset (8), the snapshot's offset (8), then parts: the first segment's
//! `.log`, `.index`, `.timeindex`, `.txnindex`, the snapshot, the second
//! segment's `.index`, `.timeindex`, `.txnindex`, and the rest its `.log`.
#![no_main]

mod common;

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sediment::log::record_batch::check_batch;
use sediment::log::{LoadParams, Log, LogConfig, TopicPartition};

const PART: usize = 1 << 16;

fn write(dir: &Path, name: String, bytes: &[u8], present: bool) {
    if present {
        std::fs::write(dir.join(name), bytes).expect("write");
    }
}

fn open(dir: &Path, load: LoadParams) -> sediment::log::error::Result<Log> {
    let tp = TopicPartition::new("t", 0);
    Log::open(dir, tp, Arc::new(LogConfig::default()), load, false, sediment::clock::system())
}

fuzz_target!(|data: &[u8]| {
    let mut f = common::Fields(data);
    let flags = f.u8();
    let (clean_shutdown, swap, snapshot) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
    let (recovery_point, log_start_offset) = (f.i64(), f.i64());
    let second = f.i64();
    let snapshot_offset = f.i64();
    let dir = common::fresh_dir("partition");
    let first = format!("{:020}", 0);
    write(&dir, format!("{first}.log"), f.part(PART), true);
    for ext in ["index", "timeindex", "txnindex"] {
        let bytes = f.part(PART);
        write(&dir, format!("{first}.{ext}"), bytes, !bytes.is_empty());
    }
    let bytes = f.part(PART);
    write(&dir, format!("{snapshot_offset:020}.snapshot"), bytes, snapshot);
    // Formatted as the broker names files, whatever the number: a negative
    // or huge base offset is what a damaged directory can hold.
    let second = format!("{second:020}");
    let suffix = if swap { ".swap" } else { "" };
    for ext in ["index", "timeindex", "txnindex"] {
        let bytes = f.part(PART);
        write(&dir, format!("{second}.{ext}{suffix}"), bytes, !bytes.is_empty());
    }
    let rest = f.rest();
    write(&dir, format!("{second}.log{suffix}"), rest, !rest.is_empty());

    let load = LoadParams { recovery_point, log_start_offset, clean_shutdown };
    let Ok(mut log) = open(&dir, load) else { return };
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert!(log.segments().len() > 0);
    assert!(
        start <= log.recovery_point() && log.recovery_point() <= end,
        "{start} {} {end}",
        log.recovery_point()
    );
    for entry in std::fs::read_dir(&dir).expect("list") {
        let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
        let leftover = [".swap", ".cleaned", ".deleted"].iter().any(|s| name.ends_with(s));
        assert!(!leftover, "{name} left after the load");
    }
    if !clean_shutdown && recovery_point <= 0 {
        let mut offset = log.local_log_start_offset();
        let mut reads = 0;
        while offset < end && reads < 64 {
            reads += 1;
            let Ok(read) = log.read(offset, 1 << 20, true) else { break };
            let mut bytes = &read.records[..];
            if bytes.is_empty() {
                break;
            }
            let mut next = offset;
            let mut first = true;
            while !bytes.is_empty() {
                let header = check_batch(bytes, bytes.len()).expect("a recovered batch is whole");
                // A read starts at the batch holding the offset, or the next one.
                assert!(!first || header.last_offset() >= offset, "{header:?} read at {offset}");
                first = false;
                next = next.max(header.next_offset());
                bytes = &bytes[header.size_in_bytes()..];
            }
            if next <= offset {
                break;
            }
            offset = next;
        }
    }
    if log.close().is_err() {
        return;
    }
    let recovery_point = log.log_end_offset();
    drop(log);
    let load = LoadParams { recovery_point, log_start_offset: start, clean_shutdown: true };
    let again = open(&dir, load).expect("a log closed cleanly opens again");
    assert_eq!((again.log_start_offset(), again.log_end_offset()), (start, end));
});

//! Sequential append and read throughput of `Log` with 1 KiB records, next to
//! this machine's raw sequential write and read rate measured in the same run
//! on the same file system. Reported as a markdown table; nothing is asserted.
//!
//! `cargo bench --bench log_throughput` (SEDIMENT_BENCH_MB sets the volume per
//! round, default 1024; SEDIMENT_BENCH_ROUNDS the rounds, default 3;
//! SEDIMENT_BENCH_DIR the directory, default target/bench-data).
//!
//! Both sides write the same volume and end with an fsync, and both read back
//! after dropping the file's pages from the page cache (posix_fadvise
//! DONTNEED), so the comparison is disk to disk; a page-cache row shows the
//! CPU cost alone. Raw and Log alternate within each round and the table
//! reports medians, because a virtual disk's rate drifts between minutes.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use sediment::clock;
use sediment::log::compression::Compression;
use sediment::log::record_batch::{BatchBuilder, BatchHeader};
use sediment::log::{LoadParams, Log, LogConfig, TopicPartition};

const RECORD: usize = 1024;
/// Records per batch: a Java producer's default batch.size of 16 KiB.
const PER_BATCH: usize = 16;
const CHUNK: usize = 1 << 20;

fn drop_cache(path: &Path) {
    if let Ok(f) = File::open(path) {
        // SAFETY: fadvise on a valid open descriptor only affects caching.
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
}

fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1 << 20) as f64 / secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn raw_read(path: &Path, buf: &mut [u8]) -> (u64, f64) {
    let start = Instant::now();
    let f = File::open(path).unwrap();
    let mut read = 0u64;
    loop {
        let n = f.read_at(buf, read).unwrap();
        if n == 0 {
            break;
        }
        read += n as u64;
    }
    (read, start.elapsed().as_secs_f64())
}

/// Fetch-sized reads (1 MiB) from offset 0 to the end, as a consumer would.
fn log_read(log: &Log) -> (u64, f64) {
    let start = Instant::now();
    let mut offset = 0;
    let mut bytes = 0u64;
    while offset < log.log_end_offset() {
        let data = log.read(offset, CHUNK, true).unwrap();
        bytes += data.records.len() as u64;
        let mut pos = 0;
        while pos < data.records.len() {
            let h = BatchHeader::parse(&data.records[pos..]).unwrap();
            offset = h.next_offset();
            pos += h.size_in_bytes();
        }
    }
    (bytes, start.elapsed().as_secs_f64())
}

#[derive(Default)]
struct Rates {
    raw_write: Vec<f64>,
    log_write: Vec<f64>,
    raw_cold: Vec<f64>,
    log_cold: Vec<f64>,
    raw_warm: Vec<f64>,
    log_warm: Vec<f64>,
}

fn round(dir: &Path, total_mb: u64, rates: &mut Rates) {
    let total = total_mb << 20;
    let chunk = vec![0x5au8; CHUNK];
    let mut buf = vec![0u8; CHUNK];

    let raw_path = dir.join("raw.bin");
    let start = Instant::now();
    let mut f = OpenOptions::new().create(true).write(true).truncate(true).open(&raw_path).unwrap();
    for _ in 0..total_mb {
        f.write_all(&chunk).unwrap();
    }
    f.sync_all().unwrap();
    rates.raw_write.push(mb_per_s(total, start.elapsed().as_secs_f64()));
    drop(f);

    let log_dir = dir.join("bench-0");
    let _ = std::fs::remove_dir_all(&log_dir);
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    let mut log = Log::open(
        &log_dir,
        TopicPartition::new("bench", 0),
        Arc::new(LogConfig::default()),
        load,
        false,
        clock::system(),
    )
    .unwrap();
    let now = clock::system().now_ms();
    let mut b = BatchBuilder::new(Compression::None, now);
    let value = vec![0x61u8; RECORD - 24];
    for i in 0..PER_BATCH {
        b.append(now, Some(format!("key-{i:019}").as_bytes()), Some(&value));
    }
    let template = b.build();
    let mut work = template.clone();
    let start = Instant::now();
    for _ in 0..total / template.len() as u64 {
        work.copy_from_slice(&template);
        log.append_as_leader(&mut work).unwrap();
    }
    log.flush().unwrap();
    rates.log_write.push(mb_per_s(log.size(), start.elapsed().as_secs_f64()));

    drop_cache(&raw_path);
    let (n, secs) = raw_read(&raw_path, &mut buf);
    assert_eq!(n, total);
    rates.raw_cold.push(mb_per_s(n, secs));
    for seg in log.segments() {
        drop_cache(&seg.log_path());
    }
    let (n, secs) = log_read(&log);
    assert_eq!(n, log.size());
    rates.log_cold.push(mb_per_s(n, secs));

    let (n, secs) = raw_read(&raw_path, &mut buf);
    rates.raw_warm.push(mb_per_s(n, secs));
    let (n, secs) = log_read(&log);
    rates.log_warm.push(mb_per_s(n, secs));
    std::fs::remove_file(&raw_path).unwrap();
    drop(log);
    std::fs::remove_dir_all(&log_dir).unwrap();
}

fn main() {
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let total_mb = env("SEDIMENT_BENCH_MB", 1024);
    let rounds = env("SEDIMENT_BENCH_ROUNDS", 3).max(1);
    let base = std::env::var("SEDIMENT_BENCH_DIR")
        .map(Into::into)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data"));
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::tempdir_in(&base).unwrap();
    let mut rates = Rates::default();
    for _ in 0..rounds {
        round(dir.path(), total_mb, &mut rates);
    }
    let rows = [
        ("sequential write, fsync at end", rates.raw_write, rates.log_write),
        ("sequential read, cold cache", rates.raw_cold, rates.log_cold),
        ("sequential read, page cache", rates.raw_warm, rates.log_warm),
    ];
    println!("\nLog throughput: {total_mb} MiB per round, {rounds} rounds (medians), 1 KiB records in {PER_BATCH}-record batches, 1 MiB fetches\n");
    println!("| path | raw file MB/s | sediment Log MB/s | Log / raw |");
    println!("|---|---:|---:|---:|");
    for (name, raw, ours) in rows {
        let (raw, ours) = (median(raw), median(ours));
        println!("| {name} | {raw:.0} | {ours:.0} | {:.2} |", ours / raw);
    }
}

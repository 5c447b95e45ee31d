//! Sequential append and read throughput of `Log` with 1 KiB records, next to
//! this machine's raw sequential write and read rate measured in the same run
//! on the same file system. Reported as a markdown table; nothing is asserted.
//!
//! `cargo bench --bench log_throughput` (SEDIMENT_BENCH_MB sets the volume,
//! default 1024; SEDIMENT_BENCH_DIR the directory, default target/bench-data).
//!
//! Both sides write the same bytes and end with an fsync, and both read back
//! after dropping the file's pages from the page cache (posix_fadvise
//! DONTNEED), so the comparison is disk to disk rather than memory to memory.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use sediment::clock;
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;
use sediment::log::{LoadParams, Log, LogConfig, TopicPartition};

const RECORD: usize = 1024;
/// Records per batch: a Java producer's default batch.size of 16 KiB.
const PER_BATCH: usize = 16;

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

fn read_log(log: &Log) -> (u64, f64) {
    let start = Instant::now();
    let mut offset = 0;
    let mut bytes = 0u64;
    while offset < log.log_end_offset() {
        let data = log.read(offset, 1 << 20, true).unwrap();
        bytes += data.records.len() as u64;
        // Next offset: after the last batch returned.
        let mut pos = 0;
        while pos < data.records.len() {
            let h = sediment::log::record_batch::BatchHeader::parse(&data.records[pos..]).unwrap();
            offset = h.next_offset();
            pos += h.size_in_bytes();
        }
    }
    (bytes, start.elapsed().as_secs_f64())
}

fn main() {
    let total_mb: u64 = std::env::var("SEDIMENT_BENCH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(1024);
    let base = std::env::var("SEDIMENT_BENCH_DIR").map(Into::into).unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data"));
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::tempdir_in(&base).unwrap();
    let total = total_mb << 20;

    // Raw: 1 MiB writes, fsync, then 1 MiB reads from a cold cache.
    let raw_path = dir.path().join("raw.bin");
    let chunk = vec![0x5au8; 1 << 20];
    let start = Instant::now();
    let mut f = OpenOptions::new().create(true).write(true).truncate(true).open(&raw_path).unwrap();
    for _ in 0..total_mb {
        f.write_all(&chunk).unwrap();
    }
    f.sync_all().unwrap();
    let raw_write = start.elapsed().as_secs_f64();
    drop(f);
    drop_cache(&raw_path);
    let start = Instant::now();
    let f = File::open(&raw_path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut read = 0u64;
    loop {
        use std::os::unix::fs::FileExt;
        let n = f.read_at(&mut buf, read).unwrap();
        if n == 0 {
            break;
        }
        read += n as u64;
    }
    let raw_read = start.elapsed().as_secs_f64();
    assert_eq!(read, total);
    std::fs::remove_file(&raw_path).unwrap();

    // Log: producer-shaped batches appended through validation and offset
    // assignment, flushed at the end; then fetch-sized reads from a cold cache.
    let log_dir = dir.path().join("bench-0");
    let config = Arc::new(LogConfig::default());
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    let mut log = Log::open(&log_dir, TopicPartition::new("bench", 0), config, load, false, clock::system()).unwrap();
    let now = clock::system().now_ms();
    let mut b = BatchBuilder::new(Compression::None, now);
    let value = vec![0x61u8; RECORD - 24];
    for i in 0..PER_BATCH {
        b.append(now, Some(format!("key-{i:019}").as_bytes()), Some(&value));
    }
    let template = b.build();
    let batches = total / template.len() as u64;
    let mut work = template.clone();
    let start = Instant::now();
    for _ in 0..batches {
        work.copy_from_slice(&template);
        log.append_as_leader(&mut work).unwrap();
    }
    log.flush().unwrap();
    let log_write = start.elapsed().as_secs_f64();
    let written = log.size();
    for seg in log.segments() {
        drop_cache(&seg.log_path());
    }
    let (bytes, log_read) = read_log(&log);
    assert_eq!(bytes, written);
    let (_, log_read_warm) = read_log(&log);
    let start = Instant::now();
    let f = File::open(log.segments().next().unwrap().log_path()).unwrap();
    let seg_len = f.metadata().unwrap().len();
    let mut pos = 0u64;
    while pos < seg_len {
        use std::os::unix::fs::FileExt;
        pos += f.read_at(&mut buf, pos).unwrap() as u64;
    }
    let raw_read_warm = start.elapsed().as_secs_f64();

    let rows = [
        ("sequential write (fsync at end)", mb_per_s(total, raw_write), mb_per_s(written, log_write)),
        ("sequential read (cold cache)", mb_per_s(total, raw_read), mb_per_s(bytes, log_read)),
        ("sequential read (page cache)", mb_per_s(seg_len, raw_read_warm), mb_per_s(bytes, log_read_warm)),
    ];
    println!("\nLog throughput, {total_mb} MiB, 1 KiB records in {PER_BATCH}-record batches\n");
    println!("| path | raw disk MB/s | sediment Log MB/s | Log / raw |");
    println!("|---|---:|---:|---:|");
    for (name, raw, ours) in rows {
        println!("| {name} | {raw:.0} | {ours:.0} | {:.2} |", ours / raw);
    }
}

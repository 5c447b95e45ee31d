//! Cleaner throughput: clean a partition of 1 KiB records with 10% and with
//! 90% duplicate keys, next to this machine's raw sequential read+write rate
//! measured in the same run on the same file system. Reported as a markdown
//! table; nothing is asserted.
//!
//! `cargo bench --bench cleaner_throughput` (SEDIMENT_CLEANER_BENCH_MB sets the
//! partition size, default 1024; SEDIMENT_BENCH_DIR the directory, default
//! target/bench-data; SEDIMENT_CLEANER_BENCH_DEDUPE_MB the dedupe buffer,
//! default 128; SEDIMENT_CLEANER_BENCH_IO_KB each I/O buffer, default 1024).
//!
//! * Raw: read the partition's segment files sequentially and write a copy of
//!   the same bytes, fsynced: the floor of any cleaner's cost per byte.
//! * Clean: one `Cleaner::clean` of the whole partition (the map holds every
//!   key), from cold page cache as the raw copy is. Reported as partition MB
//!   per second, the same unit as raw, and as the clean thread's CPU seconds
//!   (user + system); a clean reads the dirty range twice (map, then recopy)
//!   and writes the survivors of the segments it changes: a segment with
//!   nothing to drop is kept as it is ("kept").
//! * Workloads: "tail" repeats, in the last records, keys of the first ones,
//!   so only the first segment changes; "spread" repeats keys all over the
//!   log, so every segment changes.
//! * Peak RSS is the process's VmHWM after the clean; the target is the
//!   dedupe buffer + I/O buffers + 64 MiB.
//! * SEDIMENT_CLEANER_BENCH_STRATEGY=timestamp or header cleans under that
//!   compaction strategy (`sediment.compaction.strategy`): each record gets
//!   a rising timestamp and a `v` header holding its index, so the winners,
//!   and what is written, are those of the default `offset` run; the
//!   difference is the cost of reading versions and of 32-byte map entries.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use std::time::Instant;

use sediment::cleaner::{
    cleanable_offsets, CancellationToken, Cleaner, CleanerConfig, LogToClean, Throttler,
};
use sediment::clock;
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;
use sediment::log::{LoadParams, Log, LogConfig, TopicPartition};

const RECORD: usize = 1024;
const KEY: usize = 16;
const PER_BATCH: usize = 16;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn drop_cache(path: &Path) {
    if let Ok(f) = File::open(path) {
        // SAFETY: fadvise on a valid open descriptor only affects caching.
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
}

/// CPU seconds (user + system) of the calling thread so far.
fn thread_cpu_secs() -> f64 {
    // SAFETY: getrusage writes only into the zeroed struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD on the calling thread, a valid pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn vm_hwm_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

/// Build a compacted partition of `records` 1 KiB records whose keys repeat
/// so that `dup_percent` of the records are older versions of a later one:
/// the older versions in the first records, or `spread` over the log.
fn build(dir: &Path, records: usize, dup_percent: usize, spread: bool, strategy: &str) -> Log {
    let mut pairs = vec![
        ("cleanup.policy", "compact"),
        ("segment.bytes", "134217728"),
        ("sediment.compaction.strategy", strategy),
    ];
    if strategy == "header" {
        pairs.push(("sediment.compaction.strategy.header", "v"));
    }
    let overrides = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let config = LogConfig::resolve(&Default::default(), overrides).unwrap();
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    let mut log = Log::open(
        dir,
        TopicPartition::new("bench", 0),
        Arc::new(config),
        load,
        false,
        clock::system(),
    )
    .unwrap();
    let unique = (records * (100 - dup_percent) / 100).max(1);
    let value = vec![b'v'; RECORD - KEY - 16];
    let now = clock::system().now_ms();
    let mut i = 0;
    while i < records {
        let mut b = BatchBuilder::new(Compression::None, now);
        for _ in 0..PER_BATCH.min(records - i) {
            // Spread each key's versions over the whole log.
            let scrambled = if spread {
                (i as u64).wrapping_mul(2_654_435_761) % records as u64
            } else {
                (i as u64).wrapping_mul(2_654_435_761)
            };
            let key = format!("{:016}", scrambled % unique as u64);
            if strategy == "offset" {
                b.append(now, Some(key.as_bytes()), Some(&value));
            } else {
                // Rising versions: the same winners as the offset rule.
                let version = i.to_string();
                let ts = now - records as i64 + i as i64;
                let header: [(&[u8], Option<&[u8]>); 1] = [(b"v", Some(version.as_bytes()))];
                b.append_with_headers(ts, Some(key.as_bytes()), Some(&value), &header);
            }
            i += 1;
        }
        log.append_as_leader(&mut b.build()).unwrap();
    }
    log.roll_if_not_empty().unwrap();
    log.flush().unwrap();
    log
}

/// Sequentially read `files` and write their bytes to `out`, fsynced: MB/s of input.
fn raw_copy(files: &[PathBuf], out: &Path, chunk: usize) -> (u64, f64) {
    for f in files {
        drop_cache(f);
    }
    let start = Instant::now();
    let dst = OpenOptions::new().create(true).truncate(true).write(true).open(out).unwrap();
    let mut buf = vec![0u8; chunk];
    let mut written = 0u64;
    for f in files {
        let src = File::open(f).unwrap();
        let mut pos = 0u64;
        loop {
            let n = src.read_at(&mut buf, pos).unwrap();
            if n == 0 {
                break;
            }
            dst.write_all_at(&buf[..n], written).unwrap();
            pos += n as u64;
            written += n as u64;
        }
    }
    dst.sync_all().unwrap();
    let secs = start.elapsed().as_secs_f64();
    drop(dst);
    std::fs::remove_file(out).unwrap();
    (written, secs)
}

fn main() {
    let size_mb = env_usize("SEDIMENT_CLEANER_BENCH_MB", 1024);
    let dedupe_mb = env_usize("SEDIMENT_CLEANER_BENCH_DEDUPE_MB", 128);
    let io_kb = env_usize("SEDIMENT_CLEANER_BENCH_IO_KB", 1024);
    let strategy =
        std::env::var("SEDIMENT_CLEANER_BENCH_STRATEGY").unwrap_or_else(|_| "offset".into());
    let base = std::env::var("SEDIMENT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data"));
    std::fs::create_dir_all(&base).unwrap();
    let records = size_mb * (1 << 20) / RECORD;
    println!("cleaner throughput: {size_mb} MiB partitions of {records} records of {RECORD} B, {PER_BATCH} per batch, dedupe buffer {dedupe_mb} MiB, I/O buffers {io_kb} KiB, compaction strategy {strategy}\n");
    println!("| duplicates | partition MB | raw read+write MB/s | clean MB/s | clean / raw | map s | copy s | clean CPU s | written MB | segments kept | keys mapped | map util | peak RSS MiB |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (dup, spread) in [(10usize, false), (10, true), (90, true)] {
        let dir = tempfile::Builder::new().prefix("cleaner-bench").tempdir_in(&base).unwrap();
        let part = dir.path().join("bench-0");
        let log = build(&part, records, dup, spread, &strategy);
        let files: Vec<PathBuf> = segment_files(&part)
            .into_iter()
            .filter(|f| std::fs::metadata(f).map(|m| m.len() > 0).unwrap_or(false))
            .collect();
        let (raw_bytes, raw_secs) = raw_copy(&files, &dir.path().join("raw-copy"), io_kb << 10);
        for f in &files {
            drop_cache(f);
        }
        let clock = clock::system();
        let config = CleanerConfig {
            dedupe_buffer_size: dedupe_mb << 20,
            io_buffer_size: io_kb << 10,
            ..CleanerConfig::default()
        };
        let mut cleaner =
            Cleaner::new(0, config, Arc::new(Throttler::unlimited(clock.clone())), clock.clone())
                .unwrap();
        let log = RwLock::new(log);
        let to_clean = {
            let l = log.read();
            let (d, u) = cleanable_offsets(&l, None, None, clock.now_ms());
            LogToClean::new(&l, d, u)
        };
        let start = Instant::now();
        let cpu_start = thread_cpu_secs();
        let result =
            cleaner.clean(&log, &to_clean, clock.now_ms(), &CancellationToken::new()).unwrap();
        let cpu = thread_cpu_secs() - cpu_start;
        let secs = start.elapsed().as_secs_f64();
        let s = &result.stats;
        let raw_rate = mb(raw_bytes) / raw_secs;
        let clean_rate = mb(to_clean.cleanable_bytes) / secs;
        println!(
            "| {dup}% {} | {:.0} | {:.1} | {:.1} | {:.0}% | {:.1} | {:.1} | {cpu:.2} | {:.0} | {} | {} | {:.1}% | {:.0} |",
            if spread { "spread" } else { "tail" },
            mb(to_clean.cleanable_bytes),
            raw_rate,
            clean_rate,
            100.0 * clean_rate / raw_rate,
            s.map_ms() as f64 / 1000.0,
            s.copy_ms() as f64 / 1000.0,
            mb(s.bytes_written),
            s.segments_kept,
            s.map_entries,
            100.0 * s.buffer_utilization,
            vm_hwm_kb() as f64 / 1024.0,
        );
        assert_eq!(result.end_offset, records as i64, "one pass covers the partition");
        log.write().delete_expired_files(0, true).unwrap();
    }
    println!(
        "\nRSS target: dedupe {dedupe_mb} MiB + I/O buffers 2 x {io_kb} KiB + 64 MiB = {} MiB",
        dedupe_mb + 2 * io_kb / 1024 + 64
    );
}

//! `sediment dump-log`: print the batches of segment files and check index
//! files against their log, in the spirit of Kafka's kafka-dump-log.

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use crate::log::batch_reader::BatchReader;
use crate::log::control_record::{ControlRecordType, EndTransactionMarker};
use crate::log::index::{OffsetIndex, TimeIndex};
use crate::log::record_batch::{self, BatchHeader, RecordIter, TimestampType};
use crate::log::transaction_index::{AbortedTxn, ENTRY_SIZE};

/// Options of one dump.
#[derive(Debug, Clone, Copy, Default)]
pub struct DumpOptions {
    /// Print keys and values (implies deep iteration).
    pub print_data_log: bool,
    /// Print every record, not only batches.
    pub deep_iteration: bool,
    /// Largest batch accepted while scanning.
    pub max_batch_size: usize,
}

/// Dump each file to `out`; returns the number of problems found (bad CRC,
/// torn tail, index entries that do not match the log).
///
/// # Errors
/// Files that cannot be opened or are not segment files.
pub fn dump_files(files: &[PathBuf], opts: DumpOptions, out: &mut String) -> anyhow::Result<usize> {
    let mut problems = 0;
    for file in files {
        let name = file.file_name().and_then(|n| n.to_str()).context("file name")?;
        let (stem, ext) =
            name.split_once('.').with_context(|| format!("{name}: not a segment file"))?;
        let base: i64 =
            stem.parse().with_context(|| format!("{name}: not named by a base offset"))?;
        writeln!(out, "Dumping {}", file.display())?;
        problems += match ext {
            "log" | "log.deleted" | "log.cleaned" | "log.swap" => dump_log(file, base, opts, out)?,
            "index" => check_offset_index(file, base, opts, out)?,
            "timeindex" => check_time_index(file, base, opts, out)?,
            "txnindex" | "txnindex.deleted" | "txnindex.cleaned" | "txnindex.swap" => {
                dump_txn_index(file, out)?
            }
            "snapshot" => dump_producer_snapshot(file, out)?,
            other => bail!("{name}: unknown file type .{other}"),
        };
    }
    Ok(problems)
}

fn dump_log(path: &Path, base: i64, opts: DumpOptions, out: &mut String) -> anyhow::Result<usize> {
    let file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let len = file.metadata()?.len();
    writeln!(out, "Log starting offset: {base}")?;
    let mut buf = Vec::new();
    let mut reader = BatchReader::new(&file, path, 0..len, opts.max_batch_size, &mut buf);
    let mut scratch = Vec::new();
    let mut problems = 0;
    loop {
        match reader.next_batch() {
            Ok(Some((pos, batch))) => {
                let h = BatchHeader::parse(batch)?;
                let compression = h.compression().map_or("unknown", |c| c.name());
                writeln!(
                    out,
                    "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} producerEpoch: {} \
                     partitionLeaderEpoch: {} isTransactional: {} isControl: {} deleteHorizonMs: {} position: {pos} {}: {} size: {} \
                     magic: {} compresscodec: {compression} crc: {} isvalid: true",
                    h.base_offset,
                    h.last_offset(),
                    h.records_count,
                    h.base_sequence,
                    h.last_sequence(),
                    h.producer_id,
                    h.producer_epoch,
                    h.partition_leader_epoch,
                    h.is_transactional(),
                    h.is_control(),
                    h.delete_horizon_ms().map_or("none".to_string(), |t| t.to_string()),
                    ts_name(h.timestamp_type()),
                    h.max_timestamp,
                    h.size_in_bytes(),
                    h.magic,
                    h.crc,
                )?;
                if opts.deep_iteration || opts.print_data_log {
                    problems += dump_records(&h, batch, &mut scratch, opts, out)?;
                }
            }
            Ok(None) => break,
            Err(e) => {
                writeln!(out, "ERROR: {e}")?;
                problems += 1;
                break;
            }
        }
    }
    Ok(problems)
}

fn ts_name(t: TimestampType) -> &'static str {
    match t {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

fn dump_records(
    h: &BatchHeader,
    batch: &[u8],
    scratch: &mut Vec<u8>,
    opts: DumpOptions,
    out: &mut String,
) -> anyhow::Result<usize> {
    let payload = match record_batch::records_bytes(h, batch, scratch, 512 << 20) {
        Ok(p) => p,
        Err(e) => {
            writeln!(out, "ERROR: batch at offset {}: {e}", h.base_offset)?;
            return Ok(1);
        }
    };
    let mut records = RecordIter::new(payload, h.records_count);
    for rec in records.by_ref() {
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                writeln!(out, "ERROR: batch at offset {}: {e}", h.base_offset)?;
                return Ok(1);
            }
        };
        let ts = match h.timestamp_type() {
            TimestampType::LogAppendTime => h.max_timestamp,
            TimestampType::CreateTime => h.timestamp_base() + rec.timestamp_delta,
        };
        let seq = if h.base_sequence < 0 {
            -1
        } else {
            record_batch::increment_sequence(h.base_sequence, rec.offset_delta)
        };
        write!(
            out,
            "| offset: {} {}: {ts} keySize: {} valueSize: {} sequence: {seq} headerCount: {}",
            h.base_offset + rec.offset_delta as i64,
            ts_name(h.timestamp_type()),
            rec.key.map_or(-1, |k| k.len() as i64),
            rec.value.map_or(-1, |v| v.len() as i64),
            rec.headers_count,
        )?;
        if h.is_control() {
            // Kafka's dump names the marker instead of printing the record.
            match EndTransactionMarker::deserialize(rec.key, rec.value) {
                Ok(Some(m)) => {
                    let kind = if m.is_abort() { "ABORT" } else { "COMMIT" };
                    write!(out, " endTxnMarker: {kind} coordinatorEpoch: {}", m.coordinator_epoch)?;
                }
                Ok(None) => {
                    let kind = ControlRecordType::parse_key(rec.key).map_or(-1, |t| t.id());
                    write!(out, " controlType: {kind}")?;
                }
                Err(e) => write!(out, " ERROR: {e}")?,
            }
        } else if opts.print_data_log {
            let show = |b: Option<&[u8]>| {
                b.map_or("null".to_string(), |b| String::from_utf8_lossy(b).into_owned())
            };
            write!(out, " key: {} payload: {}", show(rec.key), show(rec.value))?;
        }
        writeln!(out)?;
    }
    if let Err(e) = records.finish() {
        writeln!(out, "ERROR: batch at offset {}: {e}", h.base_offset)?;
        return Ok(1);
    }
    Ok(0)
}

/// The producers of a `.snapshot`, one line each as Kafka's DumpLogSegments
/// prints them; a file that is not a whole snapshot is one problem.
fn dump_producer_snapshot(path: &Path, out: &mut String) -> anyhow::Result<usize> {
    use crate::log::producer_snapshot;
    let entries = match producer_snapshot::read(path) {
        Ok(entries) => entries,
        Err(e @ crate::log::LogError::Corrupt { .. }) => {
            writeln!(out, "ERROR: {e}")?;
            return Ok(1);
        }
        Err(e) => return Err(e.into()),
    };
    for e in entries {
        let txn = match e.current_txn_first_offset {
            o if o >= 0 => format!("OptionalLong[{o}]"),
            _ => "OptionalLong.empty".to_string(),
        };
        write!(
            out,
            "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {txn} lastTimestamp: {} ",
            e.producer_id, e.epoch, e.coordinator_epoch, e.timestamp
        )?;
        if e.last_offset >= 0 {
            let entry = crate::log::producer_state::ProducerStateEntry::from_snapshot(&e);
            let first = entry.batches().next().copied();
            if let Some(b) = first {
                write!(
                    out,
                    "firstSequence: {} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}",
                    b.first_seq, b.last_seq, b.last_offset, e.offset_delta, b.max_timestamp
                )?;
            }
        }
        writeln!(out)?;
    }
    Ok(0)
}

/// The entries of a `.txnindex`, one line each as Kafka prints them; a
/// trailing partial entry or an unknown version is a problem. The file is
/// only read.
fn dump_txn_index(path: &Path, out: &mut String) -> anyhow::Result<usize> {
    use std::io::Read;
    let mut reader = std::io::BufReader::new(
        File::open(path).with_context(|| format!("open {}", path.display()))?,
    );
    let mut entry = [0u8; ENTRY_SIZE];
    loop {
        let mut filled = 0;
        while filled < ENTRY_SIZE {
            match reader.read(&mut entry[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        if filled == 0 {
            return Ok(0);
        }
        if filled < ENTRY_SIZE {
            writeln!(out, "ERROR: {filled} trailing bytes are not a whole entry")?;
            return Ok(1);
        }
        match AbortedTxn::from_bytes(&entry) {
            Ok(t) => writeln!(
                out,
                "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
                t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
            )?,
            Err(version) => {
                writeln!(out, "ERROR: entry of unknown version {version}")?;
                return Ok(1);
            }
        }
    }
}

fn log_of(index: &Path) -> PathBuf {
    let name = index.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default();
    index.with_file_name(format!("{stem}.log"))
}

/// The header of the batch at `position` in the log file, if whole.
fn header_at(log: &File, position: u64) -> Option<BatchHeader> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; record_batch::RECORD_BATCH_OVERHEAD];
    log.read_exact_at(&mut buf, position).ok()?;
    BatchHeader::parse(&buf).ok()
}

fn check_offset_index(
    path: &Path,
    base: i64,
    _opts: DumpOptions,
    out: &mut String,
) -> anyhow::Result<usize> {
    let size = std::fs::metadata(path)?.len() as usize;
    let index = OffsetIndex::open(path, base, size.max(8), false)?;
    let log =
        File::open(log_of(path)).with_context(|| format!("open the log of {}", path.display()))?;
    let log_size = log.metadata()?.len();
    let mut problems = 0;
    if let Err(e) = index.sanity_check(log_size) {
        writeln!(out, "ERROR: {e}")?;
        problems += 1;
    }
    for i in 0..index.entries() {
        let e = index.entry(i);
        writeln!(out, "offset: {} position: {}", e.offset, e.position)?;
        match header_at(&log, e.position as u64) {
            Some(h) if h.last_offset() == e.offset => {}
            Some(h) => {
                writeln!(
                    out,
                    "ERROR: index offset {} points at a batch ending at {}",
                    e.offset,
                    h.last_offset()
                )?;
                problems += 1;
            }
            None => {
                writeln!(
                    out,
                    "ERROR: index offset {} points at position {} where no batch starts",
                    e.offset, e.position
                )?;
                problems += 1;
            }
        }
    }
    Ok(problems)
}

fn check_time_index(
    path: &Path,
    base: i64,
    opts: DumpOptions,
    out: &mut String,
) -> anyhow::Result<usize> {
    let size = std::fs::metadata(path)?.len() as usize;
    let index = TimeIndex::open(path, base, size.max(12), false)?;
    let log_path = log_of(path);
    let log =
        File::open(&log_path).with_context(|| format!("open the log of {}", path.display()))?;
    let len = log.metadata()?.len();
    let mut problems = 0;
    let mut prev = i64::MIN;
    // Batch last offsets and max timestamps, read once.
    let mut batches = Vec::new();
    let mut buf = Vec::new();
    let mut reader = BatchReader::new(&log, log_path, 0..len, opts.max_batch_size, &mut buf);
    while let Ok(Some((_, batch))) = reader.next_batch() {
        let h = BatchHeader::parse(batch)?;
        batches.push((h.last_offset(), h.max_timestamp));
    }
    for i in 0..index.entries() {
        let e = index.entry(i);
        writeln!(out, "timestamp: {} offset: {}", e.timestamp, e.offset)?;
        match batches.iter().find(|(last, _)| *last >= e.offset) {
            Some((last, ts)) if *last == e.offset => {
                if *ts != e.timestamp {
                    writeln!(
                        out,
                        "ERROR: index timestamp {} but the batch's max timestamp is {ts}",
                        e.timestamp
                    )?;
                    problems += 1;
                }
            }
            _ => {
                writeln!(
                    out,
                    "ERROR: index offset {} is not the last offset of a batch",
                    e.offset
                )?;
                problems += 1;
            }
        }
        if e.timestamp <= prev {
            writeln!(out, "ERROR: index timestamp {} is not after {prev}", e.timestamp)?;
            problems += 1;
        }
        prev = e.timestamp;
    }
    Ok(problems)
}

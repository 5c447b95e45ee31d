//! Recovery of transactions: data and markers appended without a flush, the
//! process gone (the log dropped without closing, or a child SIGKILLed), and
//! the log reopened. The loader replays the producer state, so the last
//! stable offset and the aborted transactions are the same, and it rebuilds
//! the `.txnindex` of every recovered segment byte for byte as the appends
//! wrote it. A marker torn by the crash is cut off with the tail, and its
//! transaction is open again.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use sediment::clock::{self, MockClock, SharedClock};
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::record_batch::BatchBuilder;
use sediment::log::transaction_index::{AbortedTxn, ENTRY_SIZE};
use sediment::log::{LoadParams, Log, LogConfig, TopicPartition};

const NOW: i64 = 1_700_000_000_000;
const CONFIG: [(&str, &str); 2] = [("segment.bytes", "700"), ("index.interval.bytes", "100")];
const CHILD_ENV: &str = "SEDIMENT_TXN_CRASH_CHILD_DIR";

/// A deterministic stream of appends: plain batches, transactional batches of
/// three producers, and their COMMIT and ABORT markers.
#[derive(Default)]
struct Stream {
    i: usize,
    next_seq: [i32; 3],
}

impl Stream {
    /// Append the next operation; returns the offsets it took.
    fn append_next(&mut self, log: &mut Log) -> i64 {
        let i = self.i;
        self.i += 1;
        let pid = (i / 3 % 3) as i64;
        let info = match i % 5 {
            0 => {
                let value = format!("plain-{i}");
                let mut b =
                    common::batch(Compression::None, &[(NOW, Some(b"p"), Some(value.as_bytes()))]);
                log.append_as_leader(&mut b).unwrap()
            }
            1 | 2 => {
                let seq = &mut self.next_seq[pid as usize];
                let mut b = BatchBuilder::new(Compression::None, NOW).producer(10 + pid, 0, *seq);
                b.transactional = true;
                let n = 1 + i % 3;
                for j in 0..n {
                    b.append(
                        NOW,
                        Some(format!("k{j}").as_bytes()),
                        Some(format!("v{i}").as_bytes()),
                    );
                }
                *seq += n as i32;
                log.append_as_leader(&mut b.build()).unwrap()
            }
            _ => {
                let marker = if i % 4 == 0 {
                    EndTransactionMarker::commit(0)
                } else {
                    EndTransactionMarker::abort(0)
                };
                log.append_end_txn_marker(10 + pid, 0, marker).unwrap()
            }
        };
        info.last_offset - info.first_offset + 1
    }
}

fn open(dir: &Path, load: LoadParams, clock: SharedClock) -> Log {
    let config = LogConfig::resolve(&Default::default(), common::overrides(&CONFIG)).unwrap();
    Log::open(dir, TopicPartition::new("txn", 0), Arc::new(config), load, false, clock).unwrap()
}

/// Every `.txnindex` file of `dir` and its bytes.
fn txn_indexes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txnindex"))
        .map(|p| {
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())
        })
        .collect()
}

/// What must survive a crash: LSO, first unstable offset, the aborted transactions, the files.
#[derive(Debug, PartialEq)]
struct TxnState {
    log_end: i64,
    lso: i64,
    first_unstable: Option<i64>,
    aborted: Vec<AbortedTxn>,
    files: BTreeMap<String, Vec<u8>>,
}

fn state(log: &Log) -> TxnState {
    TxnState {
        log_end: log.log_end_offset(),
        lso: log.last_stable_offset(),
        first_unstable: log.first_unstable_offset(),
        aborted: log.collect_aborted_transactions(0, log.log_end_offset()).unwrap(),
        files: txn_indexes(log.dir()),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn unflushed_transactions_recover_to_the_same_lso_and_txn_index_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let clock: SharedClock = MockClock::new(NOW);
    let fresh = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    let mut log = open(dir.path(), fresh, clock.clone());
    let mut stream = Stream::default();
    for _ in 0..120 {
        stream.append_next(&mut log);
    }
    let before = state(&log);
    assert!(before.files.len() >= 3, "aborts in several segments: {:?}", before.files.keys());
    assert!(before.aborted.len() >= 10);
    assert!(before.lso < before.log_end, "a transaction is still open");
    let recovery_point = log.recovery_point();
    assert!(recovery_point > 0 && recovery_point < before.log_end);
    drop(log); // the process dies: nothing flushed, nothing closed

    // Recovering only the unflushed tail, or everything, or with every
    // `.txnindex` gone: the same state, the same bytes.
    let recover = |rp: i64, remove_indexes: bool| {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), copy.path());
        if remove_indexes {
            for name in before.files.keys() {
                std::fs::remove_file(copy.path().join(name)).unwrap();
            }
        }
        let load = LoadParams { recovery_point: rp, log_start_offset: 0, clean_shutdown: false };
        let log = open(copy.path(), load, clock.clone());
        (state(&log), copy)
    };
    assert_eq!(recover(recovery_point, false).0, before, "tail recovered");
    assert_eq!(recover(0, false).0, before, "every segment recovered");
    assert_eq!(recover(0, true).0, before, "every .txnindex rebuilt");

    // A partial entry left by the crash is cut off, below the recovery point too.
    let (name, bytes) = before.files.iter().max_by_key(|(_, b)| b.len()).unwrap();
    let mut torn = bytes.clone();
    torn.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7, 1, 2]);
    std::fs::write(dir.path().join(name), &torn).unwrap();
    let load =
        LoadParams { recovery_point: before.log_end, log_start_offset: 0, clean_shutdown: true };
    let log = open(dir.path(), load, clock.clone());
    assert_eq!(state(&log), before);
    assert_eq!(std::fs::read(dir.path().join(name)).unwrap().len() % ENTRY_SIZE, 0);
    // A corrupt one (entries out of order) is rebuilt from the log.
    drop(log);
    let mut swapped = bytes.clone();
    assert!(swapped.len() >= 2 * ENTRY_SIZE, "a segment with two aborts");
    swapped.rotate_left(ENTRY_SIZE);
    std::fs::write(dir.path().join(name), &swapped).unwrap();
    let log = open(dir.path(), load, clock.clone());
    assert_eq!(state(&log), before, "a corrupt .txnindex is rebuilt");
}

#[test]
fn a_torn_abort_marker_reopens_its_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock: SharedClock = MockClock::new(NOW);
    let fresh = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    let mut log = open(dir.path(), fresh, clock.clone());
    let mut stream = Stream::default();
    for _ in 0..40 {
        stream.append_next(&mut log);
    }
    // Producer 99 writes, then its abort marker is the last thing appended.
    let mut b = BatchBuilder::new(Compression::None, NOW).producer(99, 0, 0);
    b.transactional = true;
    b.append(NOW, Some(b"k"), Some(b"v"));
    let first = log.append_as_leader(&mut b.build()).unwrap().first_offset;
    let open_before = log.first_unstable_offset();
    log.append_end_txn_marker(99, 0, EndTransactionMarker::abort(0)).unwrap();
    let before = state(&log);
    assert_eq!(before.aborted.last().map(|t| (t.producer_id, t.first_offset)), Some((99, first)));
    let active = log.active_segment().log_path();
    let active_index = log.active_segment().txn_index().path().to_path_buf();
    drop(log);

    // The crash came while the marker's 78 bytes were being written.
    let len = std::fs::metadata(&active).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&active).unwrap().set_len(len - 30).unwrap();
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: false };
    let log = open(dir.path(), load, clock);
    let after = state(&log);
    assert_eq!(after.log_end, before.log_end - 1);
    assert_eq!(after.first_unstable, Some(open_before.map_or(first, |o| o.min(first))));
    assert_eq!(after.aborted, before.aborted[..before.aborted.len() - 1]);
    let expected_index = before.files[active_index.file_name().unwrap().to_str().unwrap()].clone();
    let kept = expected_index.len() - ENTRY_SIZE;
    assert_eq!(
        txn_indexes(dir.path()).get(active_index.file_name().unwrap().to_str().unwrap()).cloned(),
        (kept > 0).then(|| expected_index[..kept].to_vec())
    );
}

/// Runs only as the child of `sigkill_while_appending_transactions_recovers`:
/// appends the stream forever, printing the count of every acknowledged append.
#[test]
#[ignore = "child process of the SIGKILL test"]
fn crash_child_transactions() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let manager = common::system_manager(Path::new(&dir));
    manager.create_topic("txn", 1, common::overrides(&CONFIG)).unwrap();
    let log = manager.get_log(&TopicPartition::new("txn", 0)).unwrap();
    let mut stream = Stream::default();
    let mut out = std::io::stdout().lock();
    for n in 1.. {
        stream.append_next(&mut log.write());
        writeln!(out, "{n}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_while_appending_transactions_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "txn_recovery::crash_child_transactions",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acked = 0usize;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        if let Ok(n) = line.unwrap().trim().parse::<usize>() {
            acked = n;
            if n >= 2000 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(acked >= 2000);
    let part = dir.path().join("txn-0");
    let left_by_crash = txn_indexes(&part);

    let manager = common::system_manager(dir.path());
    let log = manager.get_log(&TopicPartition::new("txn", 0)).expect("log reopened");
    let recovered = state(&log.read());
    drop(log);

    // The oracle: the same stream appended to a fresh log up to the same end.
    let oracle_dir = tempfile::tempdir().unwrap();
    let fresh = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: true };
    let mut oracle = open(oracle_dir.path(), fresh, clock::system());
    let mut stream = Stream::default();
    let mut ops = 0usize;
    while oracle.log_end_offset() < recovered.log_end {
        stream.append_next(&mut oracle);
        ops += 1;
    }
    assert_eq!(oracle.log_end_offset(), recovered.log_end, "recovery ends at an append boundary");
    assert!(ops >= acked, "no acknowledged append is lost ({ops} < {acked})");
    assert_eq!(recovered, state(&oracle));
    // The crash left the entries written so far: all of them, or all but an
    // abort whose marker was written just before the kill.
    for (name, bytes) in &recovered.files {
        let left = left_by_crash.get(name).cloned().unwrap_or_default();
        assert!(
            left == *bytes || (left.len() + ENTRY_SIZE == bytes.len() && bytes.starts_with(&left)),
            "{name}: {} bytes left by the crash, {} rebuilt",
            left.len(),
            bytes.len()
        );
    }
}

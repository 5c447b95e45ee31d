//! Interop: sediment reads the `__transaction_state` a real Apache Kafka 4.1.2
//! broker wrote. A single-node KRaft Kafka (jars from scripts/kafka-jars.sh),
//! formatted with `transaction.version=1` (the protocol sediment implements),
//! runs the Java producer's transactions of tests/java/TxnProducer.java: a
//! commit, a client abort, a producer fenced by a second one with the same id,
//! and a transaction left open until the broker's timeout abort. Then:
//! * every record Kafka wrote decodes with sediment's schemas, in the
//!   partition `coordinator_partition` gives for its id, and each id goes
//!   through the states Kafka's coordinator drives;
//! * under this protocol Kafka 4.1.2 writes client transaction version 0 in
//!   every value, the aborts its coordinator starts itself (fencing a
//!   producer, a timeout) included, so no value has a tagged field;
//! * the state manager, over a copy of Kafka's partitions, loads every id to
//!   its last state with nothing unreadable.

use crate::broker;
use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::broker::{free_port, repo_root, Reaper};
use sediment::log::record_batch::{records_bytes, BatchHeader, RecordIter};
use sediment::log::topic_partition::coordinator_partition;
use sediment::txn::schema::{TransactionLogKey, TransactionLogValue};
use sediment::txn::{
    TransactionConfig, TransactionMetadata, TransactionState, TransactionStateManager,
    TRANSACTION_STATE_TOPIC,
};

const PARTITIONS: i32 = 3;

/// One record of Kafka's `__transaction_state`: partition, offset, id, value.
type TxnRecord = (i32, i64, String, Option<TransactionLogValue>);

fn kafka_tool(args: &[&str]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/kafka-tool.sh")).args(args);
    cmd
}

/// Format and start a single-node KRaft Kafka in `dir`; returns it and its port.
fn start_kafka(dir: &Path) -> (Reaper, u16) {
    let (port, controller) = (free_port(), free_port());
    let data = dir.join("data");
    let props = [
        ("process.roles", "broker,controller".to_string()),
        ("node.id", "1".into()),
        ("controller.quorum.bootstrap.servers", format!("127.0.0.1:{controller}")),
        ("listeners", format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}")),
        ("advertised.listeners", format!("PLAINTEXT://127.0.0.1:{port}")),
        ("controller.listener.names", "CONTROLLER".into()),
        ("listener.security.protocol.map", "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT".into()),
        ("log.dirs", data.display().to_string()),
        ("offsets.topic.replication.factor", "1".into()),
        ("transaction.state.log.replication.factor", "1".into()),
        ("transaction.state.log.min.isr", "1".into()),
        ("transaction.state.log.num.partitions", PARTITIONS.to_string()),
        ("transaction.abort.timed.out.transaction.cleanup.interval.ms", "500".into()),
        ("share.coordinator.state.topic.replication.factor", "1".into()),
        ("share.coordinator.state.topic.min.isr", "1".into()),
    ];
    let conf = dir.join("server.properties");
    let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(&conf, text).expect("write server.properties");
    let conf = conf.display().to_string();
    let (ok, out, err) = broker::run(&mut kafka_tool(&[
        "kafka.tools.StorageTool",
        "format",
        "-t",
        "MkU3OEVBNTcwNTJENDM2Qg",
        "-c",
        &conf,
        "--standalone",
        "--feature",
        "transaction.version=1",
    ]));
    assert!(ok, "format failed: {out}\n{err}");
    let log = std::fs::File::create(dir.join("kafka.log")).expect("kafka.log");
    let child = kafka_tool(&["kafka.Kafka", &conf])
        .env("KAFKA_LOG_LEVEL", "INFO")
        .stdout(Stdio::from(log.try_clone().expect("clone")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start Kafka (needs Java 17 and Maven)");
    let kafka = Reaper(child);
    wait_until(dir, 90, "Kafka to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok().then_some(())
    });
    (kafka, port)
}

fn wait_until<T>(dir: &Path, secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(t) = f() {
            return t;
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.join("kafka.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!("timed out waiting for {what}; Kafka's log ends:\n{}", tail.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every complete record of the `__transaction_state` segments under `data`,
/// in partition and offset order (a batch still being written is left out).
fn read_records(data: &Path) -> Vec<TxnRecord> {
    let mut out = Vec::new();
    for p in 0..PARTITIONS {
        let part = data.join(format!("{TRANSACTION_STATE_TOPIC}-{p}"));
        for segment in common::files_with(&part, "log") {
            let bytes = std::fs::read(&segment).expect("read segment");
            let mut pos = 0;
            while let Ok(h) = BatchHeader::parse(&bytes[pos..]) {
                let Some(batch) = bytes.get(pos..pos + h.size_in_bytes()) else { break };
                pos += h.size_in_bytes();
                if h.is_control() {
                    continue;
                }
                let mut scratch = Vec::new();
                let payload = records_bytes(&h, batch, &mut scratch, 1 << 24).expect("records");
                for r in RecordIter::new(payload, h.records_count) {
                    let r = r.expect("record");
                    let key = TransactionLogKey::decode(r.key.expect("keyed")).expect("key");
                    let value =
                        r.value.map(|v| TransactionLogValue::decode(v).expect("Kafka's value"));
                    let offset = h.base_offset + i64::from(r.offset_delta);
                    out.push((p, offset, key.transactional_id, value));
                }
            }
        }
    }
    out
}

/// (state, epoch, client transaction version) of the records of `id`, in
/// order, a repeat of the same triple counted once (the client adds
/// partitions as it sends, so a transaction has one or more Ongoing records).
fn history(records: &[TxnRecord], id: &str) -> Vec<(TransactionState, i16, i16)> {
    let mut states: Vec<_> = records
        .iter()
        .filter(|r| r.2 == id)
        .filter_map(|r| r.3.as_ref())
        .map(|v| {
            let state = TransactionState::from_id(v.transaction_status).expect("state id");
            (state, v.producer_epoch, v.client_transaction_version)
        })
        .collect();
    states.dedup();
    states
}

/// Copy the `__transaction_state` partitions (their `.log` files and
/// `partition.metadata`) out of Kafka's log dir into `to`.
fn copy_partitions(data: &Path, to: &Path) {
    for p in 0..PARTITIONS {
        let name = format!("{TRANSACTION_STATE_TOPIC}-{p}");
        std::fs::create_dir_all(to.join(&name)).expect("mkdir");
        let mut files: Vec<PathBuf> = common::files_with(&data.join(&name), "log");
        files.push(data.join(&name).join("partition.metadata"));
        for f in files {
            std::fs::copy(&f, to.join(&name).join(f.file_name().expect("name"))).expect("copy");
        }
    }
}

#[test]
fn sediment_reads_the_transaction_state_kafka_wrote() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut kafka, port) = start_kafka(dir.path());
    let (ok, out, err) = broker::run(&mut kafka_tool(&[
        &repo_root().join("tests/java/TxnProducer.java").display().to_string(),
        &format!("127.0.0.1:{port}"),
    ]));
    assert!(ok && out.trim() == "open", "TxnProducer failed: {out}\n{err}");
    let data = dir.path().join("data");
    // The broker aborts the open transaction once its 1000 ms ran out.
    let records = wait_until(dir.path(), 60, "the timeout abort", || {
        let records = read_records(&data);
        let done = history(&records, "timed-out").last().map(|h| h.0);
        (done == Some(TransactionState::CompleteAbort)).then_some(records)
    });
    let _ = kafka.0.kill();
    let _ = kafka.0.wait();

    // Every id's records are where coordinator_partition puts them.
    for (p, offset, id, _) in &records {
        assert_eq!(*p, coordinator_partition(id, PARTITIONS), "{id} at {p}/{offset}");
    }
    use TransactionState::*;
    // Every value carries client transaction version 0 (no tagged field),
    // the aborts the coordinator starts itself (fencing, timeout) included.
    let client = |state, epoch| (state, epoch, 0i16);
    assert_eq!(
        history(&records, "committed"),
        [client(Empty, 0), client(Ongoing, 0), client(PrepareCommit, 0), client(CompleteCommit, 0)]
    );
    assert_eq!(
        history(&records, "aborted"),
        [client(Empty, 0), client(Ongoing, 0), client(PrepareAbort, 0), client(CompleteAbort, 0)]
    );
    assert_eq!(
        history(&records, "fenced"),
        [
            client(Empty, 0),
            client(Ongoing, 0),
            (PrepareAbort, 1, 0),
            (CompleteAbort, 1, 0),
            client(Empty, 2),
            client(Ongoing, 2),
            client(PrepareCommit, 2),
            client(CompleteCommit, 2),
        ]
    );
    assert_eq!(
        history(&records, "timed-out"),
        [client(Empty, 0), client(Ongoing, 0), (PrepareAbort, 1, 0), (CompleteAbort, 1, 0)]
    );
    // The last Ongoing record holds every partition the transaction added.
    let ongoing = records
        .iter()
        .rfind(|r| r.2 == "committed" && r.3.as_ref().is_some_and(|v| v.transaction_status == 1));
    let partitions =
        ongoing.and_then(|r| r.3.as_ref()?.transaction_partitions.clone()).expect("listed");
    let mut listed: Vec<(String, Vec<i32>)> =
        partitions.into_iter().map(|e| (e.topic, e.partition_ids)).collect();
    for (_, ids) in &mut listed {
        ids.sort_unstable();
    }
    listed.sort();
    assert_eq!(listed, [("orders".to_string(), vec![0, 1]), ("payments".to_string(), vec![0])]);

    // The state manager loads a copy of Kafka's partitions to the last states.
    let ours = dir.path().join("sediment");
    copy_partitions(&data, &ours);
    let clock = sediment::clock::system();
    let logs = Arc::new(common::manager(&ours, &[], clock.clone()));
    let manager = TransactionStateManager::new(TransactionConfig::default(), logs, clock);
    assert_eq!(manager.partition_count(), PARTITIONS, "the existing topic's count");
    let outcome = manager.load();
    assert_eq!(outcome.stats.records as usize, records.len());
    assert_eq!(outcome.stats.unreadable_batches + outcome.stats.unreadable_records, 0);
    assert!(outcome.pending_completion.is_empty());
    let loaded = manager.snapshot().expect("loaded");
    let last: BTreeMap<&str, (TransactionState, i16)> = loaded
        .iter()
        .map(|(id, m): (&String, &TransactionMetadata)| {
            (id.as_str(), (m.state(), m.producer_epoch))
        })
        .collect();
    let want: BTreeMap<&str, (TransactionState, i16)> = [
        ("aborted", (CompleteAbort, 0)),
        ("committed", (CompleteCommit, 0)),
        ("fenced", (CompleteCommit, 2)),
        ("timed-out", (CompleteAbort, 1)),
    ]
    .into();
    assert_eq!(last, want);
    let max_pid = loaded.values().map(|m| m.producer_id).max();
    assert_eq!(outcome.max_producer_id, max_pid);
    assert!(loaded.values().all(|m| m.partitions.is_empty() && m.txn_timeout_ms > 0));
}

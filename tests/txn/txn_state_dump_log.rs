//! Format check: Apache Kafka 4.1.2's own DumpLogSegments (`kafka-dump-log
//! --transaction-log-decoder`, from the jars scripts/kafka-jars.sh fetches)
//! decodes the `__transaction_state` segments sediment's
//! `TransactionStateManager` wrote, over several segments per partition: every
//! record shows the transactional id, producer id, epoch, timeout, state,
//! partitions, timestamps and client transaction version written, and every
//! tombstone as a delete. A state manager over the reopened logs then loads
//! the last state of each id back.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use sediment::clock::{Clock, MockClock};
use sediment::log::{LogManager, TopicPartition};
use sediment::txn::{
    TransactionConfig, TransactionMetadata, TransactionState, TransactionStateManager,
    TRANSACTION_STATE_TOPIC,
};

const NOW: i64 = 1_700_000_000_000;
const PARTITIONS: i32 = 5;

/// What the dump must show for one record: its key and payload as Kafka's
/// JSON (`None` for a tombstone, printed `<DELETE>`).
type Expected = BTreeMap<(i32, i64), (Value, Option<Value>)>;

fn open(dir: &Path, clock: &Arc<MockClock>) -> (Arc<LogManager>, TransactionStateManager) {
    let logs = Arc::new(common::manager(dir, &[], clock.clone()));
    let config = TransactionConfig {
        transaction_log_num_partitions: PARTITIONS,
        // Small segments: each partition rolls several times.
        transaction_log_segment_bytes: 400,
        ..Default::default()
    };
    (Arc::clone(&logs), TransactionStateManager::new(config, logs, clock.clone()))
}

/// Writes records and remembers what the dump and the load must show.
struct Writer {
    manager: TransactionStateManager,
    clock: Arc<MockClock>,
    expected: Expected,
    last: BTreeMap<String, TransactionMetadata>,
}

impl Writer {
    /// Append `m`; `partitions` is the JSON Kafka prints for its partitions.
    fn write(&mut self, m: &TransactionMetadata, partitions: Value) {
        self.clock.advance(10);
        let offset = self.manager.append_transaction_to_log(m).expect("append");
        let mut data = json!({
            "producerId": m.producer_id,
            "producerEpoch": m.producer_epoch,
            "transactionTimeoutMs": m.txn_timeout_ms,
            "transactionStatus": m.state().id(),
            "transactionPartitions": partitions,
            "transactionLastUpdateTimestampMs": m.txn_last_update_timestamp,
            "transactionStartTimestampMs": m.txn_start_timestamp,
        });
        if m.client_transaction_version != 0 {
            data["clientTransactionVersion"] = json!(m.client_transaction_version);
        }
        let payload = json!({"version": "1", "data": data});
        let at = (self.manager.partition_for(&m.transactional_id), offset);
        self.expected.insert(at, (key(&m.transactional_id), Some(payload)));
        let mut loaded = m.clone();
        loaded.last_producer_epoch = -1;
        self.last.insert(m.transactional_id.clone(), loaded);
    }

    fn tombstone(&mut self, id: &str) {
        let offset = self.manager.append_tombstone(id).expect("tombstone");
        self.expected.insert((self.manager.partition_for(id), offset), (key(id), None));
        self.last.remove(id);
    }

    /// One transaction from Empty to `end`, through Ongoing on `partitions`.
    fn run(
        &mut self,
        mut m: TransactionMetadata,
        partitions: &[(&str, i32)],
        end: &[TransactionState],
    ) {
        self.write(&m, Value::Null);
        m.transition(TransactionState::Ongoing).expect("Empty -> Ongoing");
        m.partitions.extend(partitions.iter().map(|(t, p)| TopicPartition::new(*t, *p)));
        m.txn_start_timestamp = self.clock.now_ms();
        m.txn_last_update_timestamp = m.txn_start_timestamp;
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in partitions {
            by_topic.entry(t).or_default().push(*p);
        }
        let listed: Vec<Value> = by_topic
            .iter()
            .map(|(t, ps)| {
                let mut ps = ps.clone();
                ps.sort_unstable();
                json!({"topic": t, "partitionIds": ps})
            })
            .collect();
        self.write(&m, Value::Array(listed.clone()));
        for &state in end {
            m.transition(state).expect("legal");
            if matches!(state, TransactionState::PrepareAbort) {
                // A client transaction version (tag 2), so Kafka's decoder meets a
                // tagged field too (a client on transaction protocol 2 leaves one).
                m.client_transaction_version = 1;
            }
            let listed = match state {
                TransactionState::CompleteCommit | TransactionState::CompleteAbort => {
                    m.partitions.clear();
                    Value::Array(vec![])
                }
                _ => Value::Array(listed.clone()),
            };
            m.txn_last_update_timestamp = self.clock.now_ms();
            self.write(&m, listed);
        }
    }
}

fn key(id: &str) -> Value {
    json!({"type": "0", "data": {"transactionalId": id}})
}

/// The records of a `--transaction-log-decoder` dump, by partition and offset.
/// Kafka 4.1.2's decoder prints `transactionStatus` as its id, 4.4.0's as
/// its name (`"Empty"`): compared as the id, whichever tool printed it.
fn status_as_id(mut payload: Value) -> Value {
    let status = payload.get_mut("data").and_then(|d| d.get_mut("transactionStatus"));
    if let Some(status) = status {
        if let Some(name) = status.as_str() {
            let state = TransactionState::from_name(name)
                .unwrap_or_else(|| panic!("unknown transactionStatus {name}"));
            *status = json!(state.id());
        }
    }
    payload
}

fn parse_dump(out: &str) -> Expected {
    let mut records = Expected::new();
    let mut partition = None;
    for line in out.lines() {
        if let Some(path) = line.strip_prefix("Dumping ") {
            let dir = PathBuf::from(path);
            let name = dir.parent().and_then(|d| d.file_name()).expect("partition dir");
            let tp = TopicPartition::from_dir_name(&name.to_string_lossy()).expect("partition");
            partition = Some(tp.partition);
        }
        let Some(rest) = line.strip_prefix("| offset: ") else {
            continue;
        };
        let offset: i64 = rest.split(' ').next().and_then(|o| o.parse().ok()).expect("offset");
        let (_, after_key) = rest.split_once(" key: ").unwrap_or_else(|| panic!("no key: {line}"));
        let (k, payload) =
            after_key.split_once(" payload: ").unwrap_or_else(|| panic!("no payload: {line}"));
        let k: Value = serde_json::from_str(k).unwrap_or_else(|e| panic!("key {k}: {e}"));
        let payload = match payload {
            "<DELETE>" => None,
            p => Some(serde_json::from_str(p).unwrap_or_else(|e| panic!("payload {p}: {e}"))),
        };
        let payload = payload.map(status_as_id);
        let at = (partition.expect("a Dumping line first"), offset);
        assert!(records.insert(at, (k, payload)).is_none(), "{at:?} twice");
    }
    records
}

#[test]
fn kafka_decodes_our_transaction_state_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = MockClock::new(NOW);
    let (logs, manager) = open(dir.path(), &clock);
    let mut w =
        Writer { manager, clock: clock.clone(), expected: Expected::new(), last: BTreeMap::new() };
    use TransactionState::*;
    for round in 0..4i64 {
        let new = |id: &str, pid: i64, epoch: i16| {
            TransactionMetadata::new(format!("{id}-{round}"), pid + round, epoch, 60_000, NOW)
        };
        let orders = [("orders", 3), ("orders", 0), ("payments", 1)];
        w.run(new("orders-app", 5000, 0), &orders, &[PrepareCommit, CompleteCommit]);
        w.run(new("billing", 6000, 7), &[("ledger", 2)], &[PrepareAbort, CompleteAbort]);
        w.run(new("stuck", 7000, 1), &[("orders", 1)], &[]);
        w.run(new("deciding", 8000, 2), &[("x", 0)], &[PrepareCommit]);
        let old = new("old", 9000, 3);
        w.write(&old, Value::Null);
        w.tombstone(&old.transactional_id);
    }
    let Writer { expected, last, .. } = w;
    logs.shutdown().expect("shutdown");
    let mut files = Vec::new();
    let mut segments_per_partition = Vec::new();
    for p in 0..PARTITIONS {
        let part = dir.path().join(format!("{TRANSACTION_STATE_TOPIC}-{p}"));
        let logs: Vec<PathBuf> = common::files_with(&part, "log")
            .into_iter()
            .filter(|f| std::fs::metadata(f).map(|m| m.len() > 0).unwrap_or(false))
            .collect();
        segments_per_partition.push(logs.len());
        files.extend(logs);
    }
    assert!(segments_per_partition.iter().any(|&n| n > 2), "rolled: {segments_per_partition:?}");

    let out = common::kafka_dump_log(&files, &["--transaction-log-decoder"]);
    let dumped = parse_dump(&out);
    assert_eq!(dumped.len(), expected.len(), "{out}");
    for (at, want) in &expected {
        assert_eq!(dumped.get(at), Some(want), "record {at:?}");
    }
    let statuses: BTreeSet<i64> = dumped
        .values()
        .filter_map(|(_, p)| p.as_ref()?["data"]["transactionStatus"].as_i64())
        .collect();
    assert_eq!(statuses, (0..=5).collect(), "every written state was decoded");
    assert!(out.contains("\"clientTransactionVersion\":1"), "{out}");
    assert!(out.contains("<DELETE>"), "{out}");

    // Our own loader reads the same segments back to the last state of each id.
    let (_, reopened) = open(dir.path(), &clock);
    let outcome = reopened.load();
    assert_eq!(outcome.stats.records as usize, expected.len());
    assert_eq!(outcome.stats.unreadable_records + outcome.stats.unreadable_batches, 0);
    assert_eq!(reopened.snapshot().expect("loaded"), last);
    let pending: Vec<String> =
        outcome.pending_completion.iter().map(|m| m.transactional_id.clone()).collect();
    assert_eq!(pending, (0..4).map(|r| format!("deciding-{r}")).collect::<Vec<_>>());
    // The largest producer id ever written, that of a later deleted id included.
    assert_eq!(outcome.max_producer_id, Some(9003));
}

//! A transactional producer and a read_committed reader on the wire, for the
//! crash tests: the requests a Kafka client sends (FindCoordinator,
//! InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, transactional
//! Produce, TxnOffsetCommit, EndTxn), each returning the error code, and a
//! reader that filters aborted transactions the way Kafka's consumer does
//! (the fetch's aborted-transaction list, then each ABORT marker).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, BrokerId, EndTxnRequest, FetchRequest,
    FindCoordinatorRequest, GroupId, InitProducerIdRequest, ListOffsetsRequest, OffsetFetchRequest,
    ProduceRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use sediment::log::compression::Compression;
use sediment::log::control_record::ControlRecordType;
use sediment::log::record_batch::{self, BatchBuilder, BatchHeader, RecordIter};

use super::Wire;

pub const NONE: i16 = 0;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const NOT_COORDINATOR: i16 = 16;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const CONCURRENT_TRANSACTIONS: i16 = 51;
pub const INVALID_TXN_STATE: i16 = 48;
pub const PRODUCER_FENCED: i16 = 90;

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// `__consumer_offsets`'s partition of `group` (50 partitions, the default).
pub fn offsets_partition(group: &str) -> i32 {
    sediment::log::topic_partition::coordinator_partition(group, 50)
}

/// A connection once FindCoordinator finds the transaction coordinator
/// loaded, or `None` if the broker is not reachable.
pub fn try_connect_loaded(port: u16) -> Option<Wire> {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).ok()?;
    let mut w = Wire { stream, next_correlation: 1 };
    let find =
        FindCoordinatorRequest::default().with_key_type(1).with_coordinator_keys(vec![s("x")]);
    for _ in 0..600 {
        let correlation = w.send(4, &find);
        let (got, body) = w.recv_frame().ok()?;
        assert_eq!(got, correlation);
        let r = Wire::decode::<FindCoordinatorRequest>(4, body);
        match r.coordinators[0].error_code {
            NONE => return Some(w),
            COORDINATOR_LOAD_IN_PROGRESS => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            e => panic!("FindCoordinator: error {e}"),
        }
    }
    panic!("the transaction coordinator never loaded");
}

/// [`try_connect_loaded`], failing the test if the broker is not reachable.
pub fn connect_loaded(port: u16) -> Wire {
    try_connect_loaded(port).expect("connect to the broker")
}

/// Send `request` and read its answer; `None` if the connection broke
/// (the broker died).
pub fn try_call<R: kafka_protocol::protocol::Request>(
    w: &mut Wire,
    version: i16,
    request: &R,
) -> Option<R::Response> {
    use std::io::Write;
    let correlation = w.send_checked(version, request)?;
    w.stream.flush().ok()?;
    let (got, body) = w.recv_frame().ok()?;
    assert_eq!(got, correlation);
    Some(Wire::decode::<R>(version, body))
}

/// What tests/java/TxnEndToEnd.java prints, on one node or a cluster. Log
/// end offsets: txn holds 6 records and 3 markers; fence holds f1, its
/// abort marker (written by the fence), f2 and its commit marker; out holds
/// C1..C4, the commit marker, X and the abort marker.
pub const TXN_END_TO_END_OUTPUT: [&str; 8] = [
    "fenced=ProducerFencedException",
    "txn committed=c1,c2,c3,c4 end=9 position=9",
    "txn uncommitted=c1,c2,c3,a1,a2,c4 end=9 position=9",
    "fence committed=f2 end=4 position=4",
    "fence uncommitted=f1,f2 end=4 position=4",
    "ctp consumed=c1,c2,c3,c4 position=9 committed=9",
    "ctp after abort committed=9",
    "out committed=C1,C2,C3,C4 end=7 position=7",
];

/// One transactional producer: its id, producer id, epoch and the next
/// sequence per partition.
#[derive(Debug, Clone)]
pub struct TxnProducer {
    pub id: String,
    pub pid: i64,
    pub epoch: i16,
    pub timeout_ms: i32,
    seqs: BTreeMap<(String, i32), i32>,
}

impl TxnProducer {
    /// InitProducerId v4 until it answers NONE (CONCURRENT_TRANSACTIONS while
    /// a fenced transaction completes); `None` if the connection broke.
    pub fn init(w: &mut Wire, id: &str, timeout_ms: i32) -> Option<Self> {
        Self::init_retrying(w, id, timeout_ms, &[])
    }

    /// [`TxnProducer::init`] on a coordinator that has just become the id's
    /// in a cluster (its `__transaction_state` partition just created or
    /// moved), which a client retries on NOT_COORDINATOR (FindCoordinator
    /// named it from an image before its coordinator was told) and
    /// COORDINATOR_NOT_AVAILABLE (its write waited for an ISR still
    /// settling after a kill), as Kafka's producer does.
    pub fn init_after_move(w: &mut Wire, id: &str, timeout_ms: i32) -> Option<Self> {
        Self::init_retrying(w, id, timeout_ms, &[NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE])
    }

    fn init_retrying(w: &mut Wire, id: &str, timeout_ms: i32, also: &[i16]) -> Option<Self> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s(id))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        for _ in 0..500 {
            let r = try_call(w, 4, &request)?;
            match r.error_code {
                NONE => {
                    return Some(Self {
                        id: id.to_string(),
                        pid: r.producer_id.0,
                        epoch: r.producer_epoch,
                        timeout_ms,
                        seqs: BTreeMap::new(),
                    })
                }
                CONCURRENT_TRANSACTIONS | COORDINATOR_LOAD_IN_PROGRESS => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                e if also.contains(&e) => {
                    eprintln!("InitProducerId {id}: error {e}, retried");
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                e => panic!("InitProducerId {id}: error {e}"),
            }
        }
        panic!("InitProducerId {id}: still CONCURRENT_TRANSACTIONS");
    }

    /// Send InitProducerId v4 for `id` without waiting for the answer (a
    /// second instance fencing the first); `None` if the write failed.
    pub fn send_init(w: &mut Wire, id: &str, timeout_ms: i32) -> Option<i32> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s(id))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        w.send_checked(4, &request)
    }

    /// AddPartitionsToTxn v3: the code of each partition.
    pub fn add(&self, w: &mut Wire, tps: &[(&str, i32)]) -> Option<Vec<i16>> {
        let topics = tps
            .iter()
            .map(|(t, p)| {
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s(t)))
                    .with_partitions(vec![*p])
            })
            .collect();
        let r = try_call(
            w,
            3,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(s(&self.id)))
                .with_v3_and_below_producer_id(ProducerId(self.pid))
                .with_v3_and_below_producer_epoch(self.epoch)
                .with_v3_and_below_topics(topics),
        )?;
        Some(
            r.results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| t.results_by_partition.iter().map(|p| p.partition_error_code))
                .collect(),
        )
    }

    /// AddOffsetsToTxn v3 for `group`.
    pub fn add_offsets(&self, w: &mut Wire, group: &str) -> Option<i16> {
        let r = try_call(
            w,
            3,
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(s(&self.id)))
                .with_producer_id(ProducerId(self.pid))
                .with_producer_epoch(self.epoch)
                .with_group_id(GroupId(s(group))),
        )?;
        Some(r.error_code)
    }

    /// TxnOffsetCommit v3 of `offset` for `group` / `topic`-`partition`
    /// (a simple group: no member, generation -1).
    pub fn commit_offset(
        &self,
        w: &mut Wire,
        group: &str,
        (topic, partition): (&str, i32),
        offset: i64,
    ) -> Option<i16> {
        let p = TxnOffsetCommitRequestPartition::default()
            .with_partition_index(partition)
            .with_committed_offset(offset)
            .with_committed_leader_epoch(-1);
        let t = TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![p]);
        let r = try_call(
            w,
            3,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(s(&self.id)))
                .with_group_id(GroupId(s(group)))
                .with_producer_id(ProducerId(self.pid))
                .with_producer_epoch(self.epoch)
                .with_generation_id(-1)
                .with_topics(vec![t]),
        )?;
        Some(r.topics[0].partitions[0].error_code)
    }

    /// Produce v9 (acks=-1) of one transactional batch of `records` to
    /// `topic`-`partition`; the sequence advances only on success.
    pub fn produce(
        &mut self,
        w: &mut Wire,
        (topic, partition): (&str, i32),
        timestamp_ms: i64,
        records: &[(String, String)],
    ) -> Option<i16> {
        let key = (topic.to_string(), partition);
        let seq = self.seqs.get(&key).copied().unwrap_or(0);
        let mut b =
            BatchBuilder::new(Compression::None, timestamp_ms).producer(self.pid, self.epoch, seq);
        b.transactional = true;
        for (k, v) in records {
            b.append(timestamp_ms, Some(k.as_bytes()), Some(v.as_bytes()));
        }
        let r = try_call(
            w,
            9,
            &ProduceRequest::default()
                .with_transactional_id(Some(TransactionalId(s(&self.id))))
                .with_acks(-1)
                .with_timeout_ms(10_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(TopicName(s(topic)))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(Bytes::from(b.build())))])]),
        )?;
        let code = r.responses[0].partition_responses[0].error_code;
        if code == NONE {
            self.seqs.insert(key, seq + records.len() as i32);
        }
        Some(code)
    }

    /// Send EndTxn v3 without waiting for the answer (the broker may die
    /// before it gives one); `None` if the write failed.
    pub fn send_end(&self, w: &mut Wire, commit: bool) -> Option<i32> {
        w.send_checked(3, &self.end_request(commit))
    }

    fn end_request(&self, commit: bool) -> EndTxnRequest {
        EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(&self.id)))
            .with_producer_id(ProducerId(self.pid))
            .with_producer_epoch(self.epoch)
            .with_committed(commit)
    }

    /// EndTxn v3 once: its code.
    pub fn end(&self, w: &mut Wire, commit: bool) -> Option<i16> {
        Some(try_call(w, 3, &self.end_request(commit))?.error_code)
    }

    /// EndTxn v3 retried while the coordinator answers CONCURRENT_TRANSACTIONS
    /// or COORDINATOR_LOAD_IN_PROGRESS (as the Java client retries); the final code.
    pub fn end_retrying(&self, w: &mut Wire, commit: bool) -> Option<i16> {
        for _ in 0..500 {
            match self.end(w, commit)? {
                CONCURRENT_TRANSACTIONS | COORDINATOR_LOAD_IN_PROGRESS => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                code => return Some(code),
            }
        }
        panic!("EndTxn {}: still CONCURRENT_TRANSACTIONS", self.id);
    }
}

/// The end offset of `topic`-`partition`: the log end (`committed` false) or
/// the last stable offset (`committed` true).
pub fn end_offset(w: &mut Wire, topic: &str, partition: i32, committed: bool) -> i64 {
    let r = w.call(
        7,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(i8::from(committed))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(-1)])]),
    );
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, NONE, "ListOffsets {topic}-{partition}");
    p.offset
}

/// OffsetFetch v7 (`require_stable`) of `group` / `topic`-`partition`:
/// (partition code, committed offset), retried while the group coordinator loads.
pub fn fetch_offset(w: &mut Wire, group: &str, topic: &str, partition: i32) -> (i16, i64) {
    let t = OffsetFetchRequestTopic::default()
        .with_name(TopicName(s(topic)))
        .with_partition_indexes(vec![partition]);
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(Some(vec![t]))
        .with_require_stable(true);
    for _ in 0..500 {
        let r = w.call(7, &request);
        if r.error_code == COORDINATOR_LOAD_IN_PROGRESS {
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        }
        assert_eq!(r.error_code, NONE, "OffsetFetch {group}");
        let p = &r.topics[0].partitions[0];
        return (p.error_code, p.committed_offset);
    }
    panic!("the group coordinator never loaded");
}

/// What a partition holds, batch by batch, as read with Fetch v12.
#[derive(Debug, Default, Clone)]
pub struct PartitionRead {
    /// Data records a reader at this isolation level keeps: (offset, key, value).
    pub records: Vec<(i64, String, String)>,
    /// Control records: (offset, producer id, COMMIT = true / ABORT = false).
    pub markers: Vec<(i64, i64, bool)>,
}

impl PartitionRead {
    /// The markers of `producer_id`: (offset, commit).
    pub fn markers_of(&self, producer_id: i64) -> Vec<(i64, bool)> {
        self.markers.iter().filter(|m| m.1 == producer_id).map(|m| (m.0, m.2)).collect()
    }

    /// The values read.
    pub fn values(&self) -> Vec<String> {
        self.records.iter().map(|r| r.2.clone()).collect()
    }
}

/// Read `topic`-`partition` from offset 0 at read_committed (`committed`;
/// up to the last stable offset, aborted transactions dropped as Kafka's
/// consumer drops them) or read_uncommitted (everything up to the high watermark).
pub fn read_partition(w: &mut Wire, topic: &str, partition: i32, committed: bool) -> PartitionRead {
    let mut out = PartitionRead::default();
    let mut next = 0i64;
    let mut scratch = Vec::new();
    // Producers whose aborted transaction the reader is inside of.
    let mut aborting: BTreeSet<i64> = BTreeSet::new();
    loop {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(4 << 20)
            .with_isolation_level(i8::from(committed))
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(next)
                    .with_partition_max_bytes(4 << 20)])]);
        let r = w.call(12, &request);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, NONE, "fetch {topic}-{partition} at {next}");
        let end = if committed { p.last_stable_offset } else { p.high_watermark };
        // (first offset, producer id) of the aborted transactions in range.
        let mut aborted: Vec<(i64, i64)> = p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.first_offset, a.producer_id.0))
            .collect();
        aborted.sort_unstable();
        let bytes = p.records.clone().unwrap_or_default();
        let mut pos = 0;
        while pos + record_batch::RECORD_BATCH_OVERHEAD <= bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]).expect("batch header");
            if pos + h.size_in_bytes() > bytes.len() || h.base_offset >= end {
                break;
            }
            let batch = &bytes[pos..pos + h.size_in_bytes()];
            pos += h.size_in_bytes();
            let next_before = next;
            next = next.max(h.next_offset());
            if h.next_offset() <= next_before {
                continue;
            }
            if committed && h.has_producer_id() {
                // Kafka's consumeAbortedTransactionsUpTo(batch.lastOffset).
                aborting.extend(aborted.iter().filter(|a| a.0 <= h.last_offset()).map(|a| a.1));
                aborted.retain(|a| a.0 > h.last_offset());
            }
            let payload =
                record_batch::records_bytes(&h, batch, &mut scratch, 1 << 30).expect("records");
            for rec in RecordIter::new(payload, h.records_count) {
                let rec = rec.expect("record");
                let offset = h.base_offset + i64::from(rec.offset_delta);
                if h.is_control() {
                    let commit = match ControlRecordType::parse_key(rec.key).expect("control key") {
                        ControlRecordType::Commit => true,
                        ControlRecordType::Abort => false,
                        ControlRecordType::Unknown(t) => panic!("control type {t}"),
                    };
                    out.markers.push((offset, h.producer_id, commit));
                    if !commit {
                        aborting.remove(&h.producer_id);
                    }
                } else if !(h.is_transactional() && aborting.contains(&h.producer_id)) {
                    let text = |b: Option<&[u8]>| {
                        b.map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default()
                    };
                    out.records.push((offset, text(rec.key), text(rec.value)));
                }
            }
        }
        if next >= end {
            return out;
        }
    }
}

/// The state DescribeTransactions gives `transactional_id` (Kafka's name,
/// e.g. `Ongoing`, `CompleteAbort`), or `None` when the call fails.
pub fn transaction_state(w: &mut Wire, transactional_id: &str) -> Option<String> {
    use kafka_protocol::messages::{DescribeTransactionsRequest, TransactionalId};
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(s(transactional_id))]);
    let r = try_call(w, 0, &request)?;
    let t = r.transaction_states.first()?;
    (t.error_code == 0).then(|| t.transaction_state.to_string())
}

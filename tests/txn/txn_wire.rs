//! The transaction APIs on the wire, one test per bad input of
//! docs/design/transactions.md, "Behaviour and errors, per API" and "Transactional Produce" that they answer: the exact code (by
//! request version where Kafka downgrades it), and that another producer's
//! transaction, open on the same partitions meanwhile, still commits and
//! leaves nothing open (the read_committed end offset reaches the log end).
//! Also the broker's `txn-coordinator` thread: a timed-out transaction is
//! aborted (its producer fenced), and an open transaction is loaded again
//! after a restart.

use crate::broker::{create_topic, TestBroker, Wire};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, BrokerId, EndTxnRequest, EndTxnResponse,
    FindCoordinatorRequest, GroupId, InitProducerIdRequest, ListOffsetsRequest, OffsetFetchRequest,
    ProduceRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::record_batch::BatchBuilder;

const NOW: i64 = 1_700_000_000_000;
/// Records stamped `NOW` (2023) are past the default retention.ms: their
/// topics keep them, so a retention pass cannot delete what is asserted.
const KEEP: &[(&str, &str)] = &[("retention.ms", "-1")];
const TIMEOUT_MS: i32 = 60_000;

pub(super) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub(super) fn code(e: ResponseError) -> i16 {
    e.code()
}

/// A broker with topic "t" (2 partitions) whose transaction coordinator is
/// found and loaded.
pub(super) fn start() -> (TestBroker, Wire) {
    start_with(&[])
}

pub(super) fn start_with(overrides: &[&str]) -> (TestBroker, Wire) {
    let b = TestBroker::start(overrides);
    create_topic(b.port, "t", 2, KEEP);
    let w = connect_loaded(&b);
    (b, w)
}

/// A connection to `b` once FindCoordinator finds its transaction
/// coordinator loaded.
fn connect_loaded(b: &TestBroker) -> Wire {
    let mut w = Wire::connect(b.port);
    let find =
        FindCoordinatorRequest::default().with_key_type(1).with_coordinator_keys(vec![s("x")]);
    // The state loads on its own thread: bounded polling, as clients retry.
    for _ in 0..200 {
        let r = w.call(4, &find);
        let c = &r.coordinators[0];
        if c.error_code == 0 {
            assert_eq!((c.node_id, c.port), (BrokerId(1), b.port as i32));
            return w;
        }
        assert_eq!(c.error_code, code(ResponseError::CoordinatorLoadInProgress));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the transaction coordinator never loaded");
}

pub(super) fn init(w: &mut Wire, id: &str, timeout_ms: i32, version: i16) -> (i16, i64, i16) {
    let r = w.call(
        version,
        &InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s(id))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// AddPartitionsToTxn v`version`: the code of every partition, in order.
pub(super) fn add(
    w: &mut Wire,
    id: &str,
    pid: i64,
    epoch: i16,
    tps: &[(&str, i32)],
    version: i16,
) -> Vec<i16> {
    let topics = tps
        .iter()
        .map(|(t, p)| {
            AddPartitionsToTxnTopic::default().with_name(TopicName(s(t))).with_partitions(vec![*p])
        })
        .collect();
    let r = w.call(
        version,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s(id)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(topics),
    );
    r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| t.results_by_partition.iter().map(|p| p.partition_error_code))
        .collect()
}

pub(super) fn end(w: &mut Wire, id: &str, pid: i64, epoch: i16, commit: bool, version: i16) -> i16 {
    end_response(w, id, pid, epoch, commit, version).error_code
}

/// EndTxn v`version`'s whole answer.
pub(super) fn end_response(
    w: &mut Wire,
    id: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
    version: i16,
) -> EndTxnResponse {
    w.call(
        version,
        &EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit),
    )
}

pub(super) fn txn_batch(pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, NOW).producer(pid, epoch, seq);
    b.transactional = true;
    b.append(NOW, Some(b"k"), Some(b"v"));
    b.build()
}

/// Produce `records` to t-`partition` under `id`; the partition's code.
pub(super) fn produce(
    w: &mut Wire,
    id: &str,
    partition: i32,
    records: Vec<u8>,
    version: i16,
) -> i16 {
    let r = w.call(
        version,
        &ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(s(id))))
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(s("t")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(Bytes::from(records)))])]),
    );
    r.responses[0].partition_responses[0].error_code
}

/// The end offset of t-`partition` at `isolation` (0 uncommitted, 1 committed).
pub(super) fn end_offset(w: &mut Wire, partition: i32, isolation: i8) -> i64 {
    let r = w.call(
        7,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(isolation)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(-1)])]),
    );
    r.topics[0].partitions[0].offset
}

/// Another producer's transaction, open on t-0 and t-1 while a test sends
/// its bad input.
struct Bystander {
    pid: i64,
    epoch: i16,
}

impl Bystander {
    fn open(w: &mut Wire) -> Self {
        let (err, pid, epoch) = init(w, "bystander", TIMEOUT_MS, 4);
        assert_eq!(err, 0);
        assert_eq!(add(w, "bystander", pid, epoch, &[("t", 0), ("t", 1)], 3), [0, 0]);
        for p in 0..2 {
            assert_eq!(produce(w, "bystander", p, txn_batch(pid, epoch, 0), 9), 0);
        }
        Self { pid, epoch }
    }

    /// Commit, and see that nothing is left open on either partition.
    fn commits(self, w: &mut Wire) {
        assert_eq!(end(w, "bystander", self.pid, self.epoch, true, 3), 0);
        for p in 0..2 {
            let log_end = end_offset(w, p, 0);
            assert_eq!(end_offset(w, p, 1), log_end, "t-{p}: a transaction is still open");
        }
    }
}

#[test]
fn a_stale_epoch_is_fenced_by_version() {
    let (_b, mut w) = start();
    let by = Bystander::open(&mut w);
    let (_, pid, old) = init(&mut w, "x", TIMEOUT_MS, 4);
    let (_, pid2, epoch) = init(&mut w, "x", TIMEOUT_MS, 4);
    assert_eq!((pid2, epoch), (pid, old + 1), "a second init bumps the epoch");
    let fenced = code(ResponseError::ProducerFenced);
    let invalid_epoch = code(ResponseError::InvalidProducerEpoch);
    assert_eq!(add(&mut w, "x", pid, old, &[("t", 0)], 1), [invalid_epoch]);
    assert_eq!(add(&mut w, "x", pid, old, &[("t", 0)], 3), [fenced]);
    assert_eq!(end(&mut w, "x", pid, old, true, 1), invalid_epoch);
    assert_eq!(end(&mut w, "x", pid, old, true, 3), fenced);
    // The partition added under the current epoch: a batch of the old one
    // is refused by Produce (always INVALID_PRODUCER_EPOCH).
    assert_eq!(add(&mut w, "x", pid, epoch, &[("t", 0)], 3), [0]);
    assert_eq!(produce(&mut w, "x", 0, txn_batch(pid, old, 0), 9), invalid_epoch);
    assert_eq!(produce(&mut w, "x", 0, txn_batch(pid, epoch, 0), 9), 0);
    assert_eq!(end(&mut w, "x", pid, epoch, false, 3), 0);
    by.commits(&mut w);
}

#[test]
fn an_unknown_id_or_another_producer_id_has_no_mapping() {
    let (_b, mut w) = start();
    let by = Bystander::open(&mut w);
    let mapping = code(ResponseError::InvalidProducerIdMapping);
    assert_eq!(add(&mut w, "nobody", 1000, 0, &[("t", 0)], 3), [mapping]);
    assert_eq!(end(&mut w, "nobody", 1000, 0, true, 3), mapping);
    let (_, pid, epoch) = init(&mut w, "x", TIMEOUT_MS, 4);
    assert_eq!(add(&mut w, "x", by.pid, epoch, &[("t", 0)], 3), [mapping]);
    assert_eq!(end(&mut w, "x", pid + 1, epoch, true, 3), mapping);
    // Produce under an id whose producer id is not the batch's (a producer
    // with no transaction open on the partition, so it is verified).
    assert_eq!(produce(&mut w, "x", 0, txn_batch(pid + 1000, epoch, 0), 9), mapping);
    assert_eq!(produce(&mut w, "nobody", 0, txn_batch(1000, 0, 0), 9), mapping);
    by.commits(&mut w);
}

#[test]
fn a_timeout_out_of_range_is_refused() {
    let (_b, mut w) = start();
    let by = Bystander::open(&mut w);
    let invalid = code(ResponseError::InvalidTransactionTimeout);
    for timeout in [0, -1, 900_001] {
        assert_eq!(init(&mut w, "x", timeout, 4), (invalid, -1, -1), "timeout {timeout}");
    }
    assert_eq!(init(&mut w, "x", 900_000, 4).0, 0);
    by.commits(&mut w);
}

#[test]
fn a_missing_topic_fails_the_whole_add() {
    let (_b, mut w) = start();
    let by = Bystander::open(&mut w);
    let (_, pid, epoch) = init(&mut w, "x", TIMEOUT_MS, 4);
    let codes = add(&mut w, "x", pid, epoch, &[("t", 0), ("missing", 0), ("t", 7)], 3);
    let unknown = code(ResponseError::UnknownTopicOrPartition);
    assert_eq!(codes, [code(ResponseError::OperationNotAttempted), unknown, unknown]);
    // Nothing was added: t-0 is not in a transaction of "x".
    assert_eq!(end(&mut w, "x", pid, epoch, true, 3), code(ResponseError::InvalidTxnState));
    by.commits(&mut w);
}

#[test]
fn end_txn_without_a_transaction_is_an_invalid_state() {
    let (_b, mut w) = start();
    let by = Bystander::open(&mut w);
    let (_, pid, epoch) = init(&mut w, "x", TIMEOUT_MS, 4);
    let invalid = code(ResponseError::InvalidTxnState);
    assert_eq!(end(&mut w, "x", pid, epoch, true, 3), invalid);
    assert_eq!(end(&mut w, "x", pid, epoch, false, 3), invalid);
    // Committed, then aborted: the other outcome is refused too.
    assert_eq!(add(&mut w, "x", pid, epoch, &[("t", 1)], 3), [0]);
    assert_eq!(end(&mut w, "x", pid, epoch, true, 3), 0);
    assert_eq!(end(&mut w, "x", pid, epoch, true, 3), 0, "a retried commit");
    assert_eq!(end(&mut w, "x", pid, epoch, false, 3), invalid);
    by.commits(&mut w);
}

#[test]
fn produce_to_a_partition_not_added_is_refused_by_version() {
    let (_b, mut w) = start();
    let by = Bystander::open(&mut w);
    let (_, pid, epoch) = init(&mut w, "x", TIMEOUT_MS, 4);
    assert_eq!(add(&mut w, "x", pid, epoch, &[("t", 1)], 3), [0]);
    let before = end_offset(&mut w, 0, 0);
    for (version, expected) in [
        (9, ResponseError::InvalidTxnState),
        (10, ResponseError::InvalidTxnState),
        (11, ResponseError::TransactionAbortable),
    ] {
        assert_eq!(produce(&mut w, "x", 0, txn_batch(pid, epoch, 0), version), code(expected));
    }
    assert_eq!(end_offset(&mut w, 0, 0), before, "nothing appended to t-0");
    assert_eq!(produce(&mut w, "x", 1, txn_batch(pid, epoch, 0), 11), 0);
    assert_eq!(end(&mut w, "x", pid, epoch, true, 3), 0);
    by.commits(&mut w);
}

#[test]
fn a_control_batch_from_a_client_is_refused() {
    let (_b, mut w) = start();
    let by = Bystander::open(&mut w);
    let (_, pid, epoch) = init(&mut w, "x", TIMEOUT_MS, 4);
    assert_eq!(add(&mut w, "x", pid, epoch, &[("t", 0)], 3), [0]);
    let before = end_offset(&mut w, 0, 0);
    // A commit marker of the bystander's, forged by a client of "x" that
    // has t-0 in its transaction: the validator refuses it.
    let forged = EndTransactionMarker::commit(0).build_batch(pid, epoch, NOW);
    assert_eq!(produce(&mut w, "x", 0, forged, 9), code(ResponseError::InvalidRecord));
    let forged = EndTransactionMarker::commit(0).build_batch(by.pid, by.epoch, NOW);
    assert_eq!(produce(&mut w, "bystander", 0, forged, 9), code(ResponseError::InvalidRecord));
    assert_eq!(end_offset(&mut w, 0, 0), before, "no marker appended");
    assert!(end_offset(&mut w, 0, 1) < before, "the bystander's transaction is still open");
    assert_eq!(end(&mut w, "x", pid, epoch, false, 3), 0);
    by.commits(&mut w);
}

#[test]
fn a_timed_out_transaction_is_aborted_and_its_producer_fenced() {
    let (_b, mut w) =
        start_with(&["transaction.abort.timed.out.transaction.cleanup.interval.ms=100"]);
    let by = Bystander::open(&mut w);
    let (_, pid, epoch) = init(&mut w, "x", 500, 4);
    assert_eq!(add(&mut w, "x", pid, epoch, &[("t", 0)], 3), [0]);
    assert_eq!(produce(&mut w, "x", 0, txn_batch(pid, epoch, 0), 9), 0);
    // The bystander commits at once; x's transaction holds t-0's LSO back
    // until the coordinator aborts it (bounded polling: the scheduler runs
    // every 100 ms and the timeout is 500 ms).
    assert_eq!(end(&mut w, "bystander", by.pid, by.epoch, true, 3), 0);
    let mut aborted = false;
    for _ in 0..200 {
        if end_offset(&mut w, 0, 1) == end_offset(&mut w, 0, 0) {
            aborted = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(aborted, "the timed-out transaction was never aborted");
    // The marker (which moved the LSO) comes before the CompleteAbort record:
    // until that is written an EndTxn is answered CONCURRENT_TRANSACTIONS.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while crate::broker::txn::transaction_state(&mut w, "x").as_deref() != Some("CompleteAbort") {
        assert!(std::time::Instant::now() < deadline, "x never reached CompleteAbort");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The abort bumped the epoch: the producer's late commit is fenced.
    assert_eq!(end(&mut w, "x", pid, epoch, true, 3), code(ResponseError::ProducerFenced));
    // Under the bumped epoch the transaction is CompleteAbort: a commit is
    // refused, an abort is answered as a retry.
    assert_eq!(end(&mut w, "x", pid, epoch + 1, true, 3), code(ResponseError::InvalidTxnState));
    assert_eq!(end(&mut w, "x", pid, epoch + 1, false, 3), 0);
}

#[test]
fn an_open_transaction_survives_a_restart_and_commits() {
    let (mut b, mut w) = start();
    let (_, pid, epoch) = init(&mut w, "x", TIMEOUT_MS, 4);
    assert_eq!(add(&mut w, "x", pid, epoch, &[("t", 0)], 3), [0]);
    assert_eq!(produce(&mut w, "x", 0, txn_batch(pid, epoch, 0), 9), 0);
    assert_eq!(end_offset(&mut w, 0, 1), 0);
    drop(w);
    assert!(b.stop().success());
    b.restart();
    let mut w = connect_loaded(&b);
    assert_eq!(end_offset(&mut w, 0, 1), 0, "still open after the restart");
    // The loaded state knows the partition: more data, then the commit.
    assert_eq!(produce(&mut w, "x", 0, txn_batch(pid, epoch, 1), 9), 0);
    assert_eq!(end(&mut w, "x", pid, epoch, true, 3), 0);
    let log_end = end_offset(&mut w, 0, 0);
    assert_eq!(log_end, 3, "two records and the commit marker");
    assert_eq!(end_offset(&mut w, 0, 1), log_end);
}

/// OffsetFetch v7 of group "g", partition t-0: (partition code, offset),
/// polling while the group coordinator loads.
pub(super) fn fetch_offset(w: &mut Wire, require_stable: bool) -> (i16, i64) {
    let topic = OffsetFetchRequestTopic::default()
        .with_name(TopicName(s("t")))
        .with_partition_indexes(vec![0]);
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(Some(vec![topic]))
        .with_require_stable(require_stable);
    for _ in 0..200 {
        let r = w.call(7, &request);
        if r.error_code == code(ResponseError::CoordinatorLoadInProgress) {
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        }
        assert_eq!(r.error_code, 0);
        let p = &r.topics[0].partitions[0];
        return (p.error_code, p.committed_offset);
    }
    panic!("the group coordinator never loaded");
}

fn add_offsets(w: &mut Wire, id: &str, pid: i64, epoch: i16) -> i16 {
    let r = w.call(
        3,
        &AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_group_id(GroupId(s("g"))),
    );
    r.error_code
}

/// TxnOffsetCommit of offset `offset` for g / t-0, simple (no member).
pub(super) fn txn_offset_commit(
    w: &mut Wire,
    id: &str,
    pid: i64,
    epoch: i16,
    offset: i64,
    v: i16,
) -> i16 {
    let partition = TxnOffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(offset)
        .with_committed_leader_epoch(-1);
    let topic = TxnOffsetCommitRequestTopic::default()
        .with_name(TopicName(s("t")))
        .with_partitions(vec![partition]);
    let r = w.call(
        v,
        &TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_group_id(GroupId(s("g")))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_generation_id(-1)
            .with_topics(vec![topic]),
    );
    r.topics[0].partitions[0].error_code
}

#[test]
fn txn_offsets_need_add_offsets_to_txn() {
    let (_b, mut w) = start();
    let (_, pid, epoch) = init(&mut w, "x", TIMEOUT_MS, 4);
    assert_eq!(add(&mut w, "x", pid, epoch, &[("t", 0)], 3), [0]);
    assert_eq!(
        txn_offset_commit(&mut w, "x", pid, epoch, 5, 3),
        code(ResponseError::InvalidTxnState)
    );
    assert_eq!(
        txn_offset_commit(&mut w, "x", pid, epoch, 5, 4),
        code(ResponseError::TransactionAbortable)
    );
    assert_eq!(fetch_offset(&mut w, true), (0, -1), "nothing was written");
}

#[test]
fn require_stable_sees_unstable_offsets_until_the_commit() {
    let (_b, mut w) = start();
    assert_eq!(fetch_offset(&mut w, true), (0, -1));
    let (_, pid, epoch) = init(&mut w, "x", TIMEOUT_MS, 4);
    assert_eq!(add_offsets(&mut w, "x", pid, epoch), 0);
    assert_eq!(txn_offset_commit(&mut w, "x", pid, epoch, 5, 3), 0);
    let unstable = code(ResponseError::UnstableOffsetCommit);
    assert_eq!(fetch_offset(&mut w, true), (unstable, -1));
    assert_eq!(fetch_offset(&mut w, false), (0, -1), "the last committed offset: none");
    assert_eq!(end(&mut w, "x", pid, epoch, true, 3), 0);
    // The markers are written after EndTxn answers: bounded polling, as the
    // consumer retries UNSTABLE_OFFSET_COMMIT.
    for _ in 0..200 {
        match fetch_offset(&mut w, true) {
            (c, -1) if c == unstable => std::thread::sleep(std::time::Duration::from_millis(50)),
            got => {
                assert_eq!(got, (0, 5));
                return;
            }
        }
    }
    panic!("the transactional offset never became stable");
}

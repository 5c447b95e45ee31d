//! The admin path of transactions: Apache Kafka 4.1.2's own
//! `kafka-transactions` tool (`org.apache.kafka.tools.TransactionsCommand`)
//! against a sediment broker, and the four admin APIs on the wire.
//!
//! The tool scenario makes a hanging transaction as an operator meets one:
//! the broker runs with `transaction.partition.verification.enable=false`,
//! and a transactional batch of a producer id the coordinator never issued
//! lands on a compacted partition. It freezes the last stable offset and
//! the cleaner there; `find-hanging` must find it, `abort` must release the
//! LSO, and the cleaner must then clean past the former first unstable
//! offset and drop the aborted data. `list`, `describe` and
//! `describe-producers` are checked against a live transaction meanwhile.
//!
//! The wire test sends each bad input of WriteTxnMarkers, DescribeProducers,
//! ListTransactions (every filter, v2's pattern), DescribeTransactions and
//! AddPartitionsToTxn v4-5 (verify-only) and asserts Kafka's code; that an
//! admin abort wakes a read_committed fetch waiting at the LSO; and that a
//! marker on `__consumer_offsets` installs the pending transactional offsets
//! of its producer.

use crate::broker::txn::end_offset;
use crate::broker::{
    cleaner_checkpoint, create_topic, fetch_all, kafka_tool, now_ms, TestBroker, Wire,
};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, BrokerId, DescribeProducersRequest, DescribeProducersResponse,
    DescribeTransactionsRequest, EndTxnRequest, FetchRequest, FindCoordinatorRequest, GroupId,
    InitProducerIdRequest, ListTransactionsRequest, OffsetFetchRequest, ProduceRequest, ProducerId,
    TopicName, TransactionalId, TxnOffsetCommitRequest, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;

const TOOL: &str = "org.apache.kafka.tools.TransactionsCommand";
/// A producer id the coordinator never issued (its blocks start far below).
const GHOST_PID: i64 = 900_000_000;
const MINUTE: i64 = 60_000;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// A broker as `kafka-transactions find-hanging --broker-id 0` expects it
/// (node 0), without Produce verification, cleaning often.
fn start() -> TestBroker {
    TestBroker::start(&[
        "node.id=0",
        "transaction.partition.verification.enable=false",
        "log.cleaner.backoff.ms=100",
    ])
}

/// A connection once the transaction coordinator answers (loaded).
fn connect_loaded(b: &TestBroker) -> Wire {
    let mut w = Wire::connect(b.port);
    let find =
        FindCoordinatorRequest::default().with_key_type(1).with_coordinator_keys(vec![s("x")]);
    b.wait_for(20, "the transaction coordinator to load", || {
        let r = w.call(4, &find);
        let c = &r.coordinators[0];
        if c.error_code == code(ResponseError::CoordinatorLoadInProgress) {
            return None;
        }
        assert_eq!((c.error_code, c.node_id), (0, BrokerId(0)));
        Some(())
    });
    w
}

/// InitProducerId v4 for `id`: (producer id, epoch).
fn init(w: &mut Wire, id: &str) -> (i64, i16) {
    let r = w.call(
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s(id))))
            .with_transaction_timeout_ms(600_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(r.error_code, 0, "InitProducerId {id}");
    (r.producer_id.0, r.producer_epoch)
}

fn add_partition(w: &mut Wire, id: &str, pid: i64, epoch: i16, topic: &str, partition: i32) {
    let r = w.call(
        3,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s(id)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![partition])]),
    );
    let codes: Vec<i16> = r.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect();
    assert_eq!(codes, [0], "AddPartitionsToTxn {id} {topic}-{partition}");
}

fn end_txn(w: &mut Wire, id: &str, pid: i64, epoch: i16, commit: bool) {
    let r = w.call(
        3,
        &EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit),
    );
    assert_eq!(r.error_code, 0, "EndTxn {id}");
}

/// One batch of `records` (key, value) timestamped `ts`; transactional with
/// a producer when `producer` is given.
fn batch(producer: Option<(i64, i16, i32)>, ts: i64, records: &[(&str, &str)]) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, ts);
    if let Some((pid, epoch, seq)) = producer {
        b = b.producer(pid, epoch, seq);
        b.transactional = true;
    }
    for (k, v) in records {
        b.append(ts, Some(k.as_bytes()), Some(v.as_bytes()));
    }
    b.build()
}

/// Produce v9 of `records` to `topic`-`partition` (under `transactional_id`
/// when given): the partition's code.
fn produce(
    w: &mut Wire,
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    records: Vec<u8>,
) -> i16 {
    let r = w.call(
        9,
        &ProduceRequest::default()
            .with_transactional_id(transactional_id.map(|id| TransactionalId(s(id))))
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(s(topic)))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(Bytes::from(records)))])]),
    );
    r.responses[0].partition_responses[0].error_code
}

/// The rows of a table the tool printed whose first `key.len()` columns are `key`.
fn rows<'a>(out: &'a str, key: &[&str]) -> Vec<Vec<&'a str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cols| cols.len() >= key.len() && cols[..key.len()] == *key)
        .collect()
}

/// The cleaner's view of `topic`-`partition` in `/cleaner-status`.
fn cleaner_partition(b: &TestBroker, topic: &str, partition: i32) -> serde_json::Value {
    let status = b.cleaner_status();
    let partitions = status["manager"]["partitions"].as_array().cloned().unwrap_or_default();
    partitions
        .into_iter()
        .find(|p| p["topic"] == topic && p["partition"] == partition)
        .unwrap_or(serde_json::Value::Null)
}

#[test]
fn kafka_transactions_lists_describes_finds_and_aborts_a_hanging_transaction() {
    let b = start();
    let bs = b.bootstrap();
    let tool = |args: &[&str]| {
        let mut all = vec!["--bootstrap-server", bs.as_str()];
        all.extend_from_slice(args);
        kafka_tool(&b, TOOL, &all, None)
    };
    let compacted = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "1000"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("file.delete.delay.ms", "0"),
    ];
    create_topic(b.port, "t", 1, &compacted);
    create_topic(b.port, "u", 2, &[]);
    let mut w = connect_loaded(&b);

    // A live transaction of a known id, open on u-1.
    let (pid, epoch) = init(&mut w, "live");
    add_partition(&mut w, "live", pid, epoch, "u", 1);
    let now = now_ms();
    assert_eq!(
        produce(&mut w, Some("live"), "u", 1, batch(Some((pid, epoch, 0)), now, &[("a", "1")])),
        0
    );

    // t-0: plain data, the hanging transaction (20 minutes old, longer than
    // the tool's default 15-minute bound), then more plain data. Each batch
    // is more than segment.ms after the one before, so each rolls a segment.
    let t0 = now - 30 * MINUTE;
    assert_eq!(produce(&mut w, None, "t", 0, batch(None, t0, &[("k1", "a"), ("k1", "b")])), 0);
    let ghost = batch(Some((GHOST_PID, 0, 0)), now - 20 * MINUTE, &[("kh", "hanging")]);
    assert_eq!(produce(&mut w, Some("ghost"), "t", 0, ghost), 0, "verification is off");
    assert_eq!(produce(&mut w, None, "t", 0, batch(None, now - 10 * MINUTE, &[("k1", "c")])), 0);
    assert_eq!(produce(&mut w, None, "t", 0, batch(None, now, &[("k2", "x")])), 0);
    assert_eq!(end_offset(&mut w, "t", 0, false), 5);
    assert_eq!(end_offset(&mut w, "t", 0, true), 2, "the hanging transaction holds the LSO");

    // The cleaner stops at the first unstable offset and names the producer.
    b.wait_for(30, "a clean up to the open transaction", || {
        (cleaner_checkpoint(&b.data_dir(), "t", 0) == Some(2)).then_some(())
    });
    let p = cleaner_partition(&b, "t", 0);
    assert_eq!(p["first_uncleanable_offset"], 2, "{p}");
    assert_eq!(p["open_transaction"]["producer_id"], GHOST_PID, "{p}");

    // list and describe: the live transaction.
    let by_pattern = tool(&["list", "--transactional-id-pattern", "l.*"]);
    assert_eq!(rows(&by_pattern, &["live"]).len(), 1, "{by_pattern}");
    let by_pattern = tool(&["list", "--transactional-id-pattern", "x.*"]);
    assert!(rows(&by_pattern, &["live"]).is_empty(), "{by_pattern}");
    let listed = tool(&["list"]);
    let live = rows(&listed, &["live"]);
    assert_eq!(live.len(), 1, "{listed}");
    assert_eq!(live[0][1..], ["0", &pid.to_string(), "Ongoing"], "{listed}");
    assert!(rows(&listed, &["ghost"]).is_empty(), "{listed}");
    let described = tool(&["describe", "--transactional-id", "live"]);
    let row = rows(&described, &["0", "live"]);
    assert_eq!(row.len(), 1, "{described}");
    assert_eq!(row[0][2..6], [&pid.to_string(), &epoch.to_string(), "Ongoing", "600000"]);
    assert_eq!(row[0].last(), Some(&"u-1"), "{described}");

    // describe-producers: the ghost's open transaction at offset 2.
    let producers = tool(&["describe-producers", "--topic", "t", "--partition", "0"]);
    let ghost_row = rows(&producers, &[&GHOST_PID.to_string()]);
    assert_eq!(ghost_row.len(), 1, "{producers}");
    // ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset
    let expected_ts = (now - 20 * MINUTE).to_string();
    assert_eq!(ghost_row[0][1..], ["0", "-1", "0", &expected_ts, "2"], "{producers}");

    // find-hanging: the ghost's transaction and nothing else (the live one
    // is younger than the bound, and its coordinator knows u-1).
    let hanging = tool(&["find-hanging", "--broker-id", "0"]);
    let found = rows(&hanging, &["t", "0"]);
    assert_eq!(found.len(), 1, "{hanging}");
    assert_eq!(found[0][2..6], [&GHOST_PID.to_string(), "0", "-1", "2"], "{hanging}");
    assert!(rows(&hanging, &["u"]).is_empty(), "{hanging}");

    // abort: the LSO reaches the log end (the marker included).
    tool(&["abort", "--topic", "t", "--partition", "0", "--start-offset", "2"]);
    assert_eq!(end_offset(&mut w, "t", 0, false), 6, "one ABORT marker appended");
    assert_eq!(end_offset(&mut w, "t", 0, true), 6, "the LSO is released");
    let producers = tool(&["describe-producers", "--topic", "t", "--partition", "0"]);
    let ghost_row = rows(&producers, &[&GHOST_PID.to_string()]);
    assert_eq!(ghost_row[0][1..3], ["0", "0"], "{producers}");
    assert_eq!(ghost_row[0].last(), Some(&"None"), "{producers}");
    let hanging = tool(&["find-hanging", "--broker-id", "0"]);
    assert!(rows(&hanging, &["t", "0"]).is_empty(), "{hanging}");

    // The cleaner goes past the former first unstable offset: the aborted
    // record is gone and k1 keeps only its last value.
    b.wait_for(30, "a clean past offset 2", || {
        cleaner_checkpoint(&b.data_dir(), "t", 0).filter(|&c| c > 2)
    });
    let values: Vec<(String, String)> = fetch_all(b.port, "t", 0)
        .into_iter()
        .filter_map(|(_, k, v)| Some((k?, v?)))
        .filter(|(k, _)| k.starts_with('k'))
        .collect();
    let expected = [("k1", "c"), ("k2", "x")].map(|(k, v)| (k.to_string(), v.to_string()));
    assert_eq!(values, expected);
    let p = cleaner_partition(&b, "t", 0);
    assert!(p["open_transaction"].is_null(), "{p}");

    // The four APIs are advertised at Kafka 4.1.2's versions.
    let versions = kafka_tool(
        &b,
        "org.apache.kafka.tools.BrokerApiVersionsCommand",
        &["--bootstrap-server", &bs],
        None,
    );
    for served in [
        "WriteTxnMarkers(27): 1 [usable: 1]",
        "DescribeProducers(61): 0 [usable: 0]",
        "DescribeTransactions(65): 0 [usable: 0]",
        "ListTransactions(66): 0 to 2 [usable: 2]",
    ] {
        assert!(versions.contains(served), "{served} in\n{versions}");
    }

    // The live transaction was never disturbed: it commits.
    end_txn(&mut w, "live", pid, epoch, true);
    b.wait_for(10, "the live transaction's marker", || {
        (end_offset(&mut w, "u", 1, true) == 2).then_some(())
    });
    let listed = tool(&["list"]);
    assert_eq!(rows(&listed, &["live"])[0][3], "CompleteCommit", "{listed}");
}

fn marker(
    pid: i64,
    epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
    tps: &[(&str, &[i32])],
) -> WritableTxnMarker {
    WritableTxnMarker::default()
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_coordinator_epoch(coordinator_epoch)
        .with_transaction_result(commit)
        .with_topics(
            tps.iter()
                .map(|(t, ps)| {
                    WritableTxnMarkerTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partition_indexes(ps.to_vec())
                })
                .collect(),
        )
}

/// WriteTxnMarkers v1: the code of every partition of every marker, in order.
fn write_markers(w: &mut Wire, markers: Vec<WritableTxnMarker>) -> Vec<Vec<(String, i32, i16)>> {
    let r = w.call(1, &WriteTxnMarkersRequest::default().with_markers(markers));
    r.markers
        .iter()
        .map(|m| {
            m.topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.to_string(), p.partition_index, p.error_code))
                })
                .collect()
        })
        .collect()
}

/// Fetch v11 at `topic`-`partition` offset 0, read_committed, waiting up to `max_wait_ms` for a byte.
fn committed_fetch(topic: &str, partition: i32, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_topics(vec![FetchTopic::default().with_topic(TopicName(s(topic))).with_partitions(
            vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)],
        )])
}

fn pr(topic: &str) -> String {
    topic.to_string()
}

fn describe_producers(w: &mut Wire, tps: &[(&str, &[i32])]) -> DescribeProducersResponse {
    let topics = tps
        .iter()
        .map(|(t, ps)| {
            TopicRequest::default().with_name(TopicName(s(t))).with_partition_indexes(ps.to_vec())
        })
        .collect();
    w.call(0, &DescribeProducersRequest::default().with_topics(topics))
}

#[test]
fn admin_apis_answer_bad_input_with_kafkas_codes() {
    let b = start();
    create_topic(b.port, "w", 2, &[]);
    let mut w = connect_loaded(&b);
    let now = now_ms();
    let pid = GHOST_PID + 1;
    let open = |w: &mut Wire, epoch: i16, seq: i32| {
        let records = batch(Some((pid, epoch, seq)), now, &[("k", "v")]);
        assert_eq!(produce(w, Some("ghost"), "w", 0, records), 0);
    };
    open(&mut w, 3, 0);
    assert_eq!(end_offset(&mut w, "w", 0, true), 0);

    // WriteTxnMarkers: an unknown topic, and a partition past the topic's
    // count, are refused; w-1 (no transaction there) takes its marker.
    let unknown = code(ResponseError::UnknownTopicOrPartition);
    let got =
        write_markers(&mut w, vec![marker(pid, 3, 0, false, &[("nope", &[0]), ("w", &[1, 7])])]);
    assert_eq!(got, [vec![(pr("nope"), 0, unknown), (pr("w"), 1, 0), (pr("w"), 7, unknown)]]);
    // A producer epoch below the partition's is refused; the LSO stays.
    let got = write_markers(&mut w, vec![marker(pid, 2, 0, false, &[("w", &[0])])]);
    assert_eq!(got, [vec![(pr("w"), 0, code(ResponseError::InvalidProducerEpoch))]]);
    assert_eq!(end_offset(&mut w, "w", 0, true), 0);

    // DescribeProducers: the open transaction, and unknown partitions.
    let r = describe_producers(&mut w, &[("w", &[0, 9]), ("nope", &[0])]);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let state = p.active_producers.iter().find(|s| s.producer_id.0 == pid).expect("producer");
    assert_eq!((state.producer_epoch, state.last_sequence, state.last_timestamp), (3, 0, now));
    assert_eq!((state.coordinator_epoch, state.current_txn_start_offset), (-1, 0));
    assert_eq!(r.topics[0].partitions[1].error_code, unknown);
    assert_eq!(r.topics[1].partitions[0].error_code, unknown);

    // An admin abort with coordinator epoch 5 closes the transaction and
    // wakes a read_committed fetch waiting at the LSO; later markers of an
    // older coordinator epoch are fenced.
    let mut waiting = Wire::connect(b.port);
    let started = std::time::Instant::now();
    let fetch = waiting.send(11, &committed_fetch("w", 0, 30_000));
    let got = write_markers(&mut w, vec![marker(pid, 3, 5, false, &[("w", &[0])])]);
    assert_eq!(got, [vec![(pr("w"), 0, 0)]]);
    let (correlation, body) = waiting.recv_frame().expect("fetch response");
    assert_eq!(correlation, fetch);
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "the marker woke the fetch");
    let r = Wire::decode::<FetchRequest>(11, body);
    let p = &r.responses[0].partitions[0];
    assert_eq!((p.error_code, p.last_stable_offset), (0, 2));
    let aborted: Vec<i64> =
        p.aborted_transactions.iter().flatten().map(|a| a.producer_id.0).collect();
    assert_eq!(aborted, [pid], "the aborted batch comes with its transaction");
    assert_eq!(end_offset(&mut w, "w", 0, true), end_offset(&mut w, "w", 0, false));
    open(&mut w, 3, 1);
    let got = write_markers(&mut w, vec![marker(pid, 3, 4, true, &[("w", &[0])])]);
    assert_eq!(got, [vec![(pr("w"), 0, code(ResponseError::TransactionCoordinatorFenced))]]);
    let r = describe_producers(&mut w, &[("w", &[0])]);
    let state = &r.topics[0].partitions[0].active_producers[0];
    assert_eq!((state.producer_id.0, state.coordinator_epoch, state.last_sequence), (pid, 5, 1));
    assert_eq!(state.current_txn_start_offset, 2, "still open after the fenced marker");
    let got = write_markers(&mut w, vec![marker(pid, 3, 5, true, &[("w", &[0])])]);
    assert_eq!(got, [vec![(pr("w"), 0, 0)]]);
    assert_eq!(end_offset(&mut w, "w", 0, true), end_offset(&mut w, "w", 0, false));

    // A COMMIT marker on __consumer_offsets installs the producer's pending
    // transactional offsets (the group coordinator is told, as for the
    // coordinator's own markers).
    txn_offsets_complete_with_a_marker(&mut w, pid + 1);

    // DescribeTransactions: an empty id, an unknown id, a known one.
    let (known_pid, known_epoch) = init(&mut w, "known");
    let ids = ["", "unknown", "known"].map(|id| TransactionalId(s(id))).to_vec();
    let r = w.call(0, &DescribeTransactionsRequest::default().with_transactional_ids(ids));
    let codes: Vec<i16> = r.transaction_states.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        [code(ResponseError::InvalidRequest), code(ResponseError::TransactionalIdNotFound), 0]
    );
    let known = &r.transaction_states[2];
    assert_eq!(known.transactional_id.as_str(), "known");
    assert_eq!((known.producer_id.0, known.producer_epoch), (known_pid, known_epoch));
    assert_eq!(known.transaction_state.as_str(), "Empty");
    assert_eq!((known.transaction_timeout_ms, known.transaction_start_time_ms), (600_000, -1));
    assert!(known.topics.is_empty());

    // ListTransactions: state, producer id and (v1) duration filters.
    add_partition(&mut w, "known", known_pid, known_epoch, "w", 1);
    let list = |w: &mut Wire, version: i16, states: &[&str], pids: &[i64], duration: i64| {
        let r = w.call(
            version,
            &ListTransactionsRequest::default()
                .with_state_filters(states.iter().map(|n| s(n)).collect())
                .with_producer_id_filters(pids.iter().map(|&p| ProducerId(p)).collect())
                .with_duration_filter(duration),
        );
        assert_eq!(r.error_code, 0);
        let unknown: Vec<String> = r.unknown_state_filters.iter().map(|n| n.to_string()).collect();
        let listed: Vec<(String, i64, String)> = r
            .transaction_states
            .iter()
            .map(|t| {
                (t.transactional_id.to_string(), t.producer_id.0, t.transaction_state.to_string())
            })
            .collect();
        (unknown, listed)
    };
    let known_ongoing = ("known".to_string(), known_pid, "Ongoing".to_string());
    assert_eq!(list(&mut w, 0, &[], &[], -1), (vec![], vec![known_ongoing.clone()]));
    assert_eq!(
        list(&mut w, 0, &["Bogus", "Ongoing"], &[], -1),
        (vec!["Bogus".to_string()], vec![known_ongoing.clone()])
    );
    assert_eq!(list(&mut w, 0, &["Bogus"], &[], -1), (vec!["Bogus".to_string()], vec![]));
    assert_eq!(list(&mut w, 0, &["Empty"], &[], -1).1, vec![]);
    assert_eq!(list(&mut w, 0, &[], &[known_pid + 1000], -1).1, vec![]);
    assert_eq!(list(&mut w, 1, &[], &[], 3_600_000).1, vec![], "running for less than an hour");
    // Once it has run longer than 20 ms, a 20 ms duration filter lists it.
    let listed = b.wait_for(10, "the transaction to run 20 ms", || {
        let listed = list(&mut w, 1, &["Ongoing"], &[known_pid], 20).1;
        (!listed.is_empty()).then_some(listed)
    });
    assert_eq!(listed, vec![known_ongoing.clone()]);

    // v2: a pattern matching whole ids (RE2 syntax, as Kafka's RE2/J); one
    // that does not parse is INVALID_REGULAR_EXPRESSION.
    let by_pattern = |w: &mut Wire, pattern: &str| {
        let r = w.call(
            2,
            &ListTransactionsRequest::default()
                .with_duration_filter(-1)
                .with_transactional_id_pattern(Some(s(pattern))),
        );
        let ids: Vec<String> =
            r.transaction_states.iter().map(|t| t.transactional_id.to_string()).collect();
        (r.error_code, ids)
    };
    assert_eq!(by_pattern(&mut w, "kn.wn"), (0, vec!["known".to_string()]));
    assert_eq!(by_pattern(&mut w, ""), (0, vec!["known".to_string()]), "empty: no filter");
    assert_eq!(by_pattern(&mut w, "kn"), (0, vec![]), "the whole id must match");
    let invalid = code(ResponseError::InvalidRegularExpression);
    assert_eq!(by_pattern(&mut w, "kn(own"), (invalid, vec![]));

    add_partitions_batched(&mut w, known_pid, known_epoch);
}

/// AddPartitionsToTxn v4-5, the brokers' batched form: per transaction,
/// verify-only answers without writing; a plain add adds.
fn add_partitions_batched(w: &mut Wire, pid: i64, epoch: i16) {
    let txn = |id: &str, pid: i64, epoch: i16, verify_only: bool, tps: &[(&str, i32)]| {
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_verify_only(verify_only)
            .with_topics(
                tps.iter()
                    .map(|(t, p)| {
                        AddPartitionsToTxnTopic::default()
                            .with_name(TopicName(s(t)))
                            .with_partitions(vec![*p])
                    })
                    .collect(),
            )
    };
    let call = |w: &mut Wire, version: i16, txns| {
        let r = w.call(version, &AddPartitionsToTxnRequest::default().with_transactions(txns));
        assert_eq!(r.error_code, 0);
        r.results_by_transaction
            .iter()
            .map(|t| {
                let codes = t
                    .topic_results
                    .iter()
                    .flat_map(|r| r.results_by_partition.iter().map(|p| p.partition_error_code))
                    .collect::<Vec<_>>();
                (t.transactional_id.to_string(), codes)
            })
            .collect::<Vec<_>>()
    };
    let c = code;
    let got = call(
        w,
        5,
        vec![
            txn("known", pid, epoch, true, &[("w", 1), ("w", 0)]),
            txn("known", pid, epoch - 1, true, &[("w", 1)]),
            txn("unknown", pid, epoch, true, &[("w", 1)]),
            txn("", pid, epoch, true, &[("w", 1)]),
        ],
    );
    let expected = [
        ("known", vec![0, c(ResponseError::TransactionAbortable)]),
        ("known", vec![c(ResponseError::ProducerFenced)]),
        ("unknown", vec![c(ResponseError::InvalidProducerIdMapping)]),
        ("", vec![c(ResponseError::InvalidRequest)]),
    ]
    .map(|(id, codes)| (id.to_string(), codes));
    assert_eq!(got, expected);
    // A partition of a missing topic fails its transaction; nothing is added.
    let got = call(w, 4, vec![txn("known", pid, epoch, false, &[("w", 0), ("nope", 0)])]);
    let not_attempted = c(ResponseError::OperationNotAttempted);
    let unknown = c(ResponseError::UnknownTopicOrPartition);
    assert_eq!(got, [("known".to_string(), vec![not_attempted, unknown])]);
    let verified = call(w, 5, vec![txn("known", pid, epoch, true, &[("w", 0)])]);
    assert_eq!(verified[0].1, [c(ResponseError::TransactionAbortable)]);
    // A plain add at v4 adds, as v3 does.
    assert_eq!(call(w, 4, vec![txn("known", pid, epoch, false, &[("w", 0)])])[0].1, [0]);
    assert_eq!(call(w, 5, vec![txn("known", pid, epoch, true, &[("w", 0)])])[0].1, [0]);
}

/// A TxnOffsetCommit of producer `pid` (unknown to the coordinator; verification is off) is
/// pending until a WriteTxnMarkers COMMIT on the group's offsets partition installs it.
fn txn_offsets_complete_with_a_marker(w: &mut Wire, pid: i64) {
    let group = "admin-group";
    let r = w.call(
        4,
        &FindCoordinatorRequest::default().with_key_type(0).with_coordinator_keys(vec![s(group)]),
    );
    assert_eq!(r.coordinators[0].error_code, 0);
    let commit = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s("offsets-ghost")))
        .with_group_id(GroupId(s(group)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(0)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(s("w")))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)])]);
    let r = w.call(3, &commit);
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    let fetch = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(s("w")))
            .with_partition_indexes(vec![0])]))
        .with_require_stable(true);
    let r = w.call(7, &fetch);
    assert_eq!(r.topics[0].partitions[0].error_code, code(ResponseError::UnstableOffsetCommit));
    // The offsets partition the commit went to: the one with the producer's open transaction.
    let offsets_partition = (0..50)
        .find(|&p| {
            let r = describe_producers(w, &[("__consumer_offsets", &[p])]);
            r.topics[0].partitions[0].active_producers.iter().any(|s| s.producer_id.0 == pid)
        })
        .expect("an offsets partition holds the transaction");
    let got = write_markers(
        w,
        vec![marker(pid, 0, 0, true, &[("__consumer_offsets", &[offsets_partition])])],
    );
    assert_eq!(got, [vec![(pr("__consumer_offsets"), offsets_partition, 0)]]);
    let r = w.call(7, &fetch);
    let p = &r.topics[0].partitions[0];
    assert_eq!((p.error_code, p.committed_offset), (0, 1));
}

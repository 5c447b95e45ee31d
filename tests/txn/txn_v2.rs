//! Transactions v2 (KIP-890 part 2, `transaction.version` 2), as Kafka 4.x
//! clients run them against a broker that finalizes the feature:
//!
//! * on the wire: a Produce v12 adds its partition to the transaction and a
//!   TxnOffsetCommit v5 the offsets partition (no AddPartitionsToTxn or
//!   AddOffsetsToTxn); every EndTxn v5 answers the bumped epoch; a late
//!   write of the ended transaction is fenced, on a partition it wrote and
//!   on one it never reached; a retried EndTxn is answered the same; a
//!   level-0 producer (EndTxn v4, as librdkafka) on the same broker keeps its
//!   epoch;
//! * the Java producer and consumer 4.4.0 (tests/java/TxnEndToEnd.java): the
//!   broker's per-version request counts show EndTxn v5 and TxnOffsetCommit
//!   v6 (topics by id) and no AddPartitionsToTxn or AddOffsetsToTxn; with
//!   `sediment.transaction.version=0` the same program runs on the first
//!   protocol; `kafka-features describe` shows the feature.

use kafka_protocol::error::ResponseError;

use super::txn_wire::{
    add, code, end, end_offset, end_response, fetch_offset, init, produce, start, txn_batch,
    txn_offset_commit,
};
use crate::broker::{kafka_tool_output_at, repo_root, TestBroker, Wire};

const TIMEOUT_MS: i32 = 60_000;

/// EndTxn v5: the code and the producer id and epoch answered.
fn end_v5(w: &mut Wire, id: &str, pid: i64, epoch: i16, commit: bool) -> (i16, i64, i16) {
    let r = end_response(w, id, pid, epoch, commit, 5);
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

#[test]
fn transactions_v2_on_the_wire() {
    let (_b, mut w) = start();
    let w = &mut w;
    let (err, pid, e) = init(w, "v2", TIMEOUT_MS, 5);
    assert_eq!(err, 0);
    // No AddPartitionsToTxn: the Produce adds t-0, the TxnOffsetCommit the
    // group's offsets partition.
    assert_eq!(produce(w, "v2", 0, txn_batch(pid, e, 0), 12), 0);
    assert_eq!(produce(w, "v2", 0, txn_batch(pid, e, 1), 12), 0);
    assert_eq!(txn_offset_commit(w, "v2", pid, e, 2, 5), 0);
    assert_eq!(txn_offset_commit(w, "v2", pid, e, 2, 4), 0, "added already");
    assert_eq!(end_offset(w, 0, 1), 0, "open");
    assert_eq!(end_v5(w, "v2", pid, e, true), (0, pid, e + 1));
    assert_eq!(end_offset(w, 0, 1), end_offset(w, 0, 0), "the marker closed it");
    assert_eq!(fetch_offset(w, true), (0, 2));
    // The retry of that EndTxn gets the same answer.
    assert_eq!(end_v5(w, "v2", pid, e, true), (0, pid, e + 1));

    // A late write of the committed transaction is fenced where its
    // transaction was (by the marker's epoch) and where it never was (by
    // the coordinator).
    let fenced = code(ResponseError::InvalidProducerEpoch);
    assert_eq!(produce(w, "v2", 0, txn_batch(pid, e, 2), 12), fenced);
    assert_eq!(produce(w, "v2", 1, txn_batch(pid, e, 0), 12), fenced);
    let log_end = end_offset(w, 1, 0);
    assert_eq!(end_offset(w, 1, 1), log_end, "nothing opened on t-1");

    // The next transaction, at the new epoch, is aborted: its offset is not
    // taken and its record is not read_committed.
    assert_eq!(produce(w, "v2", 1, txn_batch(pid, e + 1, 0), 12), 0);
    assert_eq!(txn_offset_commit(w, "v2", pid, e + 1, 9, 5), 0);
    assert_eq!(end_v5(w, "v2", pid, e + 1, false), (0, pid, e + 2));
    assert_eq!(fetch_offset(w, true), (0, 2));
    assert_eq!(end_offset(w, 1, 1), end_offset(w, 1, 0));
    // An abort with nothing open is taken, and bumps too.
    assert_eq!(end_v5(w, "v2", pid, e + 2, false), (0, pid, e + 3));
    let stale = end_v5(w, "v2", pid, e + 1, false);
    assert_eq!(stale, (code(ResponseError::ProducerFenced), -1, -1));

    // A level-0 producer on the same broker: AddPartitionsToTxn, EndTxn v4,
    // its epoch unchanged across transactions.
    let (err, old_pid, old_e) = init(w, "v0", TIMEOUT_MS, 4);
    assert_eq!(err, 0);
    for (round, commit) in [(0, true), (1, false)] {
        assert_eq!(add(w, "v0", old_pid, old_e, &[("t", 0)], 3), [0]);
        assert_eq!(produce(w, "v0", 0, txn_batch(old_pid, old_e, round), 9), 0);
        assert_eq!(end(w, "v0", old_pid, old_e, commit, 4), 0);
    }
    assert_eq!(end_offset(w, 0, 1), end_offset(w, 0, 0), "nothing left open");
}

/// `tests/java/TxnEndToEnd.java` with the Kafka 4.4.0 client against `b`.
fn java_4_4_end_to_end(b: &TestBroker) {
    let program = repo_root().join("tests/java/TxnEndToEnd.java").display().to_string();
    let (ok, out, err) = kafka_tool_output_version("4.4.0", &program, &[&b.bootstrap()]);
    assert!(ok, "TxnEndToEnd failed\n{out}\n{err}\nbroker:\n{}", b.log());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, crate::broker::txn::TXN_END_TO_END_OUTPUT, "broker log:\n{}", b.log());
}

fn kafka_tool_output_version(
    version: &str,
    main_class: &str,
    args: &[&str],
) -> (bool, String, String) {
    kafka_tool_output_at(Some(version), main_class, args, None)
}

/// Requests of `api` at each version, from the broker's metrics.
fn requests_by_version(b: &TestBroker, api: &str) -> Vec<(i16, f64)> {
    let prefix =
        format!("kafka_network_requestmetrics_requests_total{{request=\"{api}\",version=\"");
    let mut found: Vec<(i16, f64)> = b
        .metrics()
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (version, value) = rest.split_once("\"} ")?;
            Some((version.parse().ok()?, value.trim().parse().ok()?))
        })
        .collect();
    found.sort_by_key(|(v, _)| *v);
    found
}

#[test]
fn the_java_4_4_producer_runs_transactions_v2_and_level_0_on_request() {
    let b = TestBroker::start(&[]);
    let (ok, features, err) = kafka_tool_output_version(
        "4.4.0",
        "org.apache.kafka.tools.FeatureCommand",
        &["--bootstrap-server", &b.bootstrap(), "describe"],
    );
    assert!(ok, "kafka-features describe: {err}");
    let line = features.lines().find(|l| l.contains("Feature: transaction.version"));
    let line = line.unwrap_or_else(|| panic!("no transaction.version in\n{features}"));
    for field in ["SupportedMinVersion: 0", "SupportedMaxVersion: 2", "FinalizedVersionLevel: 2"] {
        assert!(line.contains(field), "{field} in {line}");
    }
    java_4_4_end_to_end(&b);
    let end_txn = requests_by_version(&b, "EndTxn");
    assert!(!end_txn.is_empty() && end_txn.iter().all(|(v, _)| *v == 5), "EndTxn {end_txn:?}");
    let offsets = requests_by_version(&b, "TxnOffsetCommit");
    // v6: the 4.4 producer names the topics by id (KIP-1319).
    assert!(!offsets.is_empty() && offsets.iter().all(|(v, _)| *v == 6), "{offsets:?}");
    assert_eq!(requests_by_version(&b, "AddPartitionsToTxn"), []);
    assert_eq!(requests_by_version(&b, "AddOffsetsToTxn"), []);
    let produce = requests_by_version(&b, "Produce");
    assert!(produce.iter().any(|(v, _)| *v >= 12), "Produce {produce:?}");
    drop(b);

    // Level 0: the same client adds its partitions and keeps its epoch.
    let b = TestBroker::start(&["sediment.transaction.version=0"]);
    java_4_4_end_to_end(&b);
    let end_txn = requests_by_version(&b, "EndTxn");
    assert!(!end_txn.is_empty() && end_txn.iter().all(|(v, _)| *v <= 4), "EndTxn {end_txn:?}");
    assert!(!requests_by_version(&b, "AddPartitionsToTxn").is_empty());
    assert!(!requests_by_version(&b, "AddOffsetsToTxn").is_empty());
}

/// TxnOffsetCommit at `version` of offset 4 on partition 0 of each topic
/// (by id from v6 (KIP-1319), else topic t by name), for `group` at
/// `generation`: the codes by topic id.
fn txn_offset_commit_at(
    w: &mut Wire,
    version: i16,
    (pid, epoch): (i64, i16),
    group: &str,
    generation: i32,
    ids: &[uuid::Uuid],
) -> Vec<(uuid::Uuid, i16)> {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition as Partition, TxnOffsetCommitRequestTopic as Topic,
    };
    use kafka_protocol::messages::{
        GroupId, ProducerId, TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    };
    use kafka_protocol::protocol::StrBytes;
    let topic = |id: &uuid::Uuid| {
        Topic::default().with_topic_id(*id).with_partitions(vec![Partition::default()
            .with_partition_index(0)
            .with_committed_offset(4)
            .with_committed_leader_epoch(-1)])
    };
    let r: TxnOffsetCommitResponse = w.call(
        version,
        &TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("v6")))
            .with_group_id(GroupId(StrBytes::from_string(group.into())))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_generation_id(generation)
            .with_member_id(StrBytes::from_static_str(""))
            .with_topics(if version >= 6 {
                ids.iter().map(topic).collect()
            } else {
                ids.iter()
                    .map(|_| {
                        topic(&uuid::Uuid::nil()).with_name(kafka_protocol::messages::TopicName(
                            StrBytes::from_static_str("t"),
                        ))
                    })
                    .collect()
            }),
    );
    r.topics.iter().map(|t| (t.topic_id, t.partitions[0].error_code)).collect()
}

#[test]
fn txn_offset_commit_v6_names_topics_by_id() {
    let (_b, mut w) = start();
    let w = &mut w;
    let all = kafka_protocol::messages::MetadataRequest::default().with_topics(None);
    let meta: kafka_protocol::messages::MetadataResponse = w.call(12, &all);
    let t = meta.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "t"));
    let t_id = t.expect("topic t").topic_id;
    let (err, pid, e) = init(w, "v6", TIMEOUT_MS, 5);
    assert_eq!(err, 0);
    let unknown = uuid::Uuid::from_u128(7);
    let got = txn_offset_commit_at(w, 6, (pid, e), "g", -1, &[t_id, unknown]);
    assert_eq!(got, [(t_id, 0), (unknown, code(ResponseError::UnknownTopicId))]);
    // A member's commit to a group that does not exist: GROUP_ID_NOT_FOUND
    // from v6, ILLEGAL_GENERATION before (Kafka's KIP-1319 split).
    let got = txn_offset_commit_at(w, 6, (pid, e), "no-such-group", 3, &[t_id]);
    assert_eq!(got, [(t_id, code(ResponseError::GroupIdNotFound))]);
    let got = txn_offset_commit_at(w, 5, (pid, e), "no-such-group", 3, &[t_id]);
    assert_eq!(got[0].1, code(ResponseError::IllegalGeneration), "v5 knows no GROUP_ID_NOT_FOUND");
    assert_eq!(end_v5(w, "v6", pid, e, true), (0, pid, e + 1));
    assert_eq!(fetch_offset(w, true), (0, 4), "committed by id, read by name");
}

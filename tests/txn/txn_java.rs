//! Transactions end to end with Apache Kafka 4.1.2's Java client
//! (tests/java/TxnEndToEnd.java, run through scripts/kafka-tool.sh):
//! initTransactions, commit and abort; a read_committed consumer sees exactly
//! the committed records, a read_uncommitted one every record; a second
//! producer with the same transactional.id fences the first; a
//! consume-transform-produce loop commits its consumer's offsets with
//! `sendOffsetsToTransaction` (visible to OffsetFetch after the commit,
//! unchanged by an aborted transaction).

use crate::broker::{kafka_tool, repo_root, TestBroker};

#[test]
fn java_producer_transactions_commit_abort_and_fence() {
    let b = TestBroker::start(&[]);
    let program = repo_root().join("tests/java/TxnEndToEnd.java").display().to_string();
    let out = kafka_tool(&b, &program, &[&b.bootstrap()], None);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, crate::broker::txn::TXN_END_TO_END_OUTPUT, "broker log:\n{}", b.log());
}

#[test]
fn the_transaction_apis_are_advertised_as_served() {
    let b = TestBroker::start(&[]);
    let versions = kafka_tool(
        &b,
        "org.apache.kafka.tools.BrokerApiVersionsCommand",
        &["--bootstrap-server", &b.bootstrap()],
        None,
    );
    for served in [
        "FindCoordinator(10): 0 to 6 [usable: 6]",
        "InitProducerId(22): 0 to 5 [usable: 5]",
        "AddPartitionsToTxn(24): 0 to 5 [usable: 5]",
        "AddOffsetsToTxn(25): 0 to 4 [usable: 4]",
        // v5 is transactions v2 (KIP-890): a bump per EndTxn, and the
        // group coordinator adds the offsets partition itself.
        "EndTxn(26): 0 to 5 [usable: 5]",
        // v6 names topics by id (KIP-1319); usable as far as the tool knows.
        "TxnOffsetCommit(28): 0 to 6 [usable: ",
    ] {
        assert!(versions.contains(served), "{served} in\n{versions}");
    }
}

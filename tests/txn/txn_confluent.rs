//! confluent-kafka (librdkafka 2.16) transactions against the real broker:
//! commit and abort, `send_offsets_to_transaction` in a consume-transform-
//! produce loop (the group's `committed()` offsets move only with a commit),
//! fencing by a second producer with the same transactional.id (the first
//! one's next call fails fatally), and read_committed against
//! read_uncommitted readers. `tests/python/txn_confluent.py` asserts as it
//! goes and exits non-zero at the first failed check.

use crate::broker::{run_python_script, TestBroker};

#[test]
fn confluent_kafka_transactions() {
    // Faster groups, and small coordinator topics.
    let b = TestBroker::start(&[
        "group.initial.rebalance.delay.ms=0",
        "offsets.topic.num.partitions=5",
        "transaction.state.log.num.partitions=5",
    ]);
    run_python_script(&b, "txn_confluent.py", &[], "all confluent-kafka transaction checks passed");
}

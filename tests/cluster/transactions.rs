//! Transactions across brokers (docs/design/multi-broker.md, 7.3) while the
//! controller coordinates every transactional id: Apache Kafka's Java
//! producer runs the single node's transaction scenarios
//! (tests/java/TxnEndToEnd.java) against three brokers, each data topic led
//! by a broker that is not the controller, with the controller as its
//! follower. The coordinator's markers reach the leaders (WriteTxnMarkers),
//! each leader verifies a transaction's first batch with the coordinator
//! (AddPartitionsToTxn `verify_only`), the consumer offsets sent to the
//! transaction complete on their group coordinator, and the answers are
//! exactly the single node's. The followers' copies end where their
//! leaders' do: no marker was appended to a follower.

use kafka_protocol::messages::MetadataRequest;

use crate::broker::etcd::EtcdServer;
use crate::broker::{kafka_tool, repo_root, Wire};
use crate::support::{placement, start_cluster_with, TOPICS};

#[test]
fn java_transactions_span_brokers_with_the_coordinator_on_the_controller() {
    let etcd = EtcdServer::start();
    let brokers = start_cluster_with(
        &etcd,
        3,
        &["offsets.topic.num.partitions=3", "transaction.state.log.num.partitions=3"],
    );
    let port = brokers[0].port;
    let controller = brokers[0].wait_for(20, "a controller", || {
        let request = MetadataRequest::default().with_topics(Some(vec![]));
        let id = Wire::connect(port).call(12, &request).controller_id.0;
        (id > 0).then_some(id)
    });
    let others: Vec<i32> = (1..=3).filter(|b| *b != controller).collect();
    let bootstrap = brokers[0].bootstrap();
    for (topic, leader) in [("txn", others[0]), ("fence", others[1]), ("out", others[1])] {
        let assignment = format!("{leader}:{controller}");
        let args = [
            "--bootstrap-server",
            &bootstrap,
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            &assignment,
        ];
        kafka_tool(&brokers[0], TOPICS, &args, None);
        brokers[0].wait_for(20, "the topic led by its first replica, in sync", || {
            let p = placement(port, topic);
            p.get(&0).filter(|(l, _, _, isr)| *l == leader && isr.len() == 2).map(|_| ())
        });
    }

    let program = repo_root().join("tests/java/TxnEndToEnd.java").display().to_string();
    let all: String = brokers.iter().map(|b| b.bootstrap()).collect::<Vec<_>>().join(",");
    let out = kafka_tool(&brokers[0], &program, &[&all, "--topics-exist"], None);
    let lines: Vec<&str> = out.lines().collect();
    let logs = || brokers.iter().map(|b| b.log()).collect::<Vec<_>>().join("\n----\n");
    assert_eq!(
        lines,
        [
            "fenced=ProducerFencedException",
            "txn committed=c1,c2,c3,c4 end=9 position=9",
            "txn uncommitted=c1,c2,c3,a1,a2,c4 end=9 position=9",
            "fence committed=f2 end=4 position=4",
            "fence uncommitted=f1,f2 end=4 position=4",
            "ctp consumed=c1,c2,c3,c4 position=9 committed=9",
            "ctp after abort committed=9",
            "out committed=C1,C2,C3,C4 end=7 position=7",
        ],
        "brokers' logs:\n{}",
        logs()
    );
    // The controller's follower copies: byte for byte the leaders' logs.
    let follower = &brokers[controller as usize - 1];
    for (topic, leader) in [("txn", others[0]), ("fence", others[1]), ("out", others[1])] {
        let leader = &brokers[leader as usize - 1];
        let want = segment(leader, topic);
        assert!(!want.is_empty(), "{topic} on its leader");
        follower.wait_for(20, "the follower's copy as its leader's", || {
            (segment(follower, topic) == want).then_some(())
        });
    }
}

/// The first segment of `topic`-0 on `b`.
fn segment(b: &crate::broker::TestBroker, topic: &str) -> Vec<u8> {
    let file = b.data_dir().join(format!("{topic}-0")).join("00000000000000000000.log");
    std::fs::read(file).unwrap_or_default()
}

//! Transactions across brokers (docs/design/multi-broker.md, 7.2-7.3).
//!
//! * Apache Kafka's Java producer runs the single node's transaction
//!   scenarios (tests/java/TxnEndToEnd.java) against three brokers, each
//!   data topic led by a broker other than the controller, with the
//!   controller as its follower. Markers reach the leaders
//!   (WriteTxnMarkers), each leader verifies a transaction's first batch
//!   with the id's coordinator (AddPartitionsToTxn `verify_only`), the
//!   consumer offsets sent to the transaction complete on their group
//!   coordinator, and the answers are exactly the single node's. The
//!   followers' copies end where their leaders' do: no marker was appended
//!   to a follower.
//! * The coordinator of a transactional id is SIGKILLed with a transaction
//!   open: the new leader of the id's `__transaction_state` partition loads
//!   it from its replica, so the id keeps its producer id, a new producer
//!   instance fences the open transaction and its abort marker reaches the
//!   data partition, and a read_committed reader is not held back.

use kafka_protocol::messages::MetadataRequest;

use crate::broker::etcd::EtcdServer;
use crate::broker::txn::{end_offset, read_partition, TxnProducer};
use crate::broker::{kafka_tool, now_ms, repo_root, TestBroker, Wire};
use crate::support::{create_topic, placement, start_cluster_with, TOPICS};

#[test]
fn java_transactions_span_three_brokers() {
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
    assert_eq!(lines, crate::broker::txn::TXN_END_TO_END_OUTPUT, "brokers' logs:\n{}", logs());
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

/// FindCoordinator v2 of transactional id `id` through `port`: the node.
fn txn_coordinator(port: u16, id: &str) -> Option<i32> {
    crate::support::find_coordinator(port, id, 1).ok()
}

fn port_of(brokers: &[TestBroker], node: i32) -> u16 {
    brokers[node as usize - 1].port
}

#[test]
fn an_open_transaction_is_aborted_by_the_next_coordinator_after_a_kill() {
    let etcd = EtcdServer::start();
    let overrides = ["transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3"];
    let mut brokers = start_cluster_with(&etcd, 3, &overrides);
    let port = brokers[0].port;
    create_topic(&brokers[0], "ledger", 1, &["--replication-factor", "3"]);
    brokers[0].wait_for(20, "ledger-0 in sync on three", || {
        placement(port, "ledger")
            .get(&0)
            .filter(|(l, _, _, isr)| *l > 0 && isr.len() == 3)
            .map(|_| ())
    });
    // The first lookup creates __transaction_state at RF 3.
    let coord =
        brokers[0].wait_for(30, "a transaction coordinator", || txn_coordinator(port, "tx"));
    let txn_state = placement(port, "__transaction_state");
    assert!(txn_state.values().all(|(_, _, r, _)| r.len() == 3), "{txn_state:?}");

    let mut w = Wire::connect(port_of(&brokers, coord));
    let mut p = brokers[0]
        .wait_for(20, "InitProducerId", || TxnProducer::init_after_move(&mut w, "tx", 60_000));
    let leader = placement(port, "ledger")[&0].0;
    let mut lw = Wire::connect(port_of(&brokers, leader));
    assert_eq!(p.add(&mut w, &[("ledger", 0)]), Some(vec![0]));
    let record = |v: &str| [("k".to_string(), v.to_string())];
    assert_eq!(p.produce(&mut lw, ("ledger", 0), now_ms(), &record("committed")), Some(0));
    assert_eq!(p.end_retrying(&mut w, true), Some(0));
    // A second transaction, left open when its coordinator dies.
    assert_eq!(p.add(&mut w, &[("ledger", 0)]), Some(vec![0]));
    assert_eq!(p.produce(&mut lw, ("ledger", 0), now_ms(), &record("open")), Some(0));
    brokers[coord as usize - 1].kill();

    let survivor = brokers.iter().find(|b| b.port != port_of(&brokers, coord)).unwrap();
    let moved = survivor.wait_for(30, "a new transaction coordinator", || {
        txn_coordinator(survivor.port, "tx").filter(|c| *c != coord)
    });
    // The id's state moved: the same producer id at a higher epoch, after
    // the open transaction was fenced (aborted).
    let moved_port = port_of(&brokers, moved);
    survivor.wait_for(10, "the new coordinator knowing it", || {
        (txn_coordinator(moved_port, "tx") == Some(moved)).then_some(())
    });
    let mut w2 = Wire::connect(moved_port);
    let p2 = TxnProducer::init_after_move(&mut w2, "tx", 60_000)
        .expect("InitProducerId on the new coordinator");
    assert_eq!(p2.pid, p.pid, "the producer id the dead coordinator gave");
    assert!(p2.epoch > p.epoch, "{} after {}", p2.epoch, p.epoch);

    let leader = survivor.wait_for(30, "ledger-0 led by a live broker", || {
        let l = placement(survivor.port, "ledger")[&0].0;
        (l > 0 && l != coord).then_some(l)
    });
    let mut rw = Wire::connect(port_of(&brokers, leader));
    survivor.wait_for(30, "the last stable offset at the log end", || {
        (end_offset(&mut rw, "ledger", 0, true) == end_offset(&mut rw, "ledger", 0, false))
            .then_some(())
    });
    let read = read_partition(&mut rw, "ledger", 0, true);
    assert_eq!(read.values(), ["committed"]);
    let outcomes: Vec<bool> = read.markers_of(p.pid).iter().map(|m| m.1).collect();
    assert_eq!(outcomes, [true, false], "a commit, then the abort of the open transaction");
}

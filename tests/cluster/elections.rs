//! `kafka-leader-election` (ElectLeaders) against three brokers
//! (docs/design/multi-broker.md, 6.5): after a broker's SIGKILL and return
//! its partitions stay with the replicas that took them (the automatic
//! rebalance is off), and a PREFERRED election gives every partition back
//! to its first replica; asked again, nothing is needed. An UNCLEAN
//! election brings back a partition whose last in-sync replica is gone,
//! led by a replica that was not in sync; a topic with
//! `unclean.leader.election.enable=true` is brought back so by the
//! controller on its own. Both unclean elections are counted
//! (`kafka_controller_controllerstats_uncleanleaderelections_total`), and
//! each leader so elected reports itself recovered (KIP-704) before its
//! ISR grows back when the last in-sync replica returns.

use crate::broker::etcd::EtcdServer;
use crate::broker::{kafka_tool, kafka_tool_output, TestBroker};
use crate::support::{
    create_topic, etcd_image, placement, start_cluster_with, PartitionPlacement, TOPICS,
};

const ELECTION: &str = "org.apache.kafka.tools.LeaderElectionCommand";

fn elect(b: &TestBroker, args: &[&str]) -> String {
    let bootstrap = b.bootstrap();
    let mut all = vec!["--bootstrap-server", &bootstrap];
    all.extend_from_slice(args);
    kafka_tool(b, ELECTION, &all, None)
}

/// Whether every partition of `topic` is led by its first replica, with
/// `isr` replicas in sync.
fn preferred_and_in_sync(port: u16, topic: &str, isr: usize) -> bool {
    placement(port, topic).values().all(|(l, _, r, i)| r.first() == Some(l) && i.len() == isr)
}

#[test]
fn preferred_and_unclean_elections_on_request() {
    let etcd = EtcdServer::start();
    let mut brokers = start_cluster_with(&etcd, 3, &["auto.leader.rebalance.enable=false"]);
    let port = brokers[1].port;
    create_topic(&brokers[1], "pref", 3, &["--replication-factor", "3"]);
    brokers[1].wait_for(30, "preferred leaders in sync", || {
        preferred_and_in_sync(port, "pref", 3).then_some(())
    });

    brokers[0].kill();
    brokers[1].wait_for(30, "broker 1's leaderships taken over", || {
        placement(port, "pref").values().all(|(l, ..)| *l != 1 && *l > 0).then_some(())
    });
    brokers[0].restart();
    brokers[1].wait_for(30, "broker 1 back in every ISR", || {
        placement(port, "pref").values().all(|(.., isr)| isr.len() == 3).then_some(())
    });
    assert!(!preferred_and_in_sync(port, "pref", 3), "{:?}", placement(port, "pref"));

    let out = elect(&brokers[1], &["--election-type", "PREFERRED", "--all-topic-partitions"]);
    assert!(out.contains("Successfully completed leader election"), "{out}");
    brokers[1].wait_for(10, "preferred leaders again", || {
        preferred_and_in_sync(port, "pref", 3).then_some(())
    });
    let again = elect(
        &brokers[2],
        &["--election-type", "PREFERRED", "--topic", "pref", "--partition", "0"],
    );
    assert!(again.contains("already elected"), "{again}");

    // An unclean election: "lone" on brokers 2 and 3; 3 leaves the ISR,
    // then 2 (its last member) dies; 3 comes back out of sync.
    let bootstrap = brokers[0].bootstrap();
    let args = [
        "--bootstrap-server",
        &bootstrap,
        "--create",
        "--topic",
        "lone",
        "--replica-assignment",
        "2:3",
    ];
    kafka_tool(&brokers[0], TOPICS, &args, None);
    // "auto" likewise, with unclean.leader.election.enable=true.
    let auto = ["--topic", "auto", "--config", "unclean.leader.election.enable=true"];
    kafka_tool(&brokers[0], TOPICS, &[&args[..3], &auto, &args[5..]].concat(), None);
    let port = brokers[0].port;
    let both = |ok: &dyn Fn(&PartitionPlacement) -> bool| {
        ["lone", "auto"].iter().all(|t| placement(port, t).get(&0).is_some_and(ok))
    };
    brokers[0].wait_for(30, "lone in sync", || both(&|p| p.3.len() == 2).then_some(()));
    brokers[2].kill();
    brokers[0].wait_for(30, "broker 3 out of the ISR", || both(&|p| p.3 == vec![2]).then_some(()));
    brokers[1].kill();
    brokers[0].wait_for(30, "lone offline", || both(&|p| p.0 < 0).then_some(()));
    // The controller (broker 1, the only one left) counts both offline.
    let offline = "kafka_controller_kafkacontroller_offlinepartitionscount";
    brokers[0].wait_for(30, "both counted offline", || {
        (brokers[0].metric(offline) == Some(2.0)).then_some(())
    });
    brokers[2].restart();
    brokers[0].wait_for(30, "auto led by its out-of-sync replica", || {
        let (leader, _, _, isr) = placement(port, "auto").get(&0)?.clone();
        (leader == 3 && isr == vec![3]).then_some(())
    });
    let b1 = brokers[0].bootstrap();
    let args = ["--bootstrap-server", &b1, "--election-type", "PREFERRED", "--topic", "lone"];
    let (ok, out, err) =
        kafka_tool_output(ELECTION, &[&args[..], &["--partition", "0"]].concat(), None);
    assert!(
        !ok && (out + &err).contains("PreferredLeaderNotAvailable"),
        "a preferred election of lone-0 succeeded"
    );
    assert!(placement(port, "lone")[&0].0 < 0, "a clean election cannot bring it back");
    let out =
        elect(&brokers[0], &["--election-type", "UNCLEAN", "--topic", "lone", "--partition", "0"]);
    assert!(out.contains("Successfully completed leader election"), "{out}");
    let (leader, _, _, isr) = placement(port, "lone")[&0].clone();
    assert_eq!((leader, isr), (3, vec![3]), "the out-of-sync replica leads alone");
    // Broker 1 wrote both unclean elections: auto's as the controller,
    // lone's for the request; none of the clean ones counts.
    let unclean = "kafka_controller_controllerstats_uncleanleaderelections_total";
    assert_eq!(brokers[0].metric(unclean), Some(2.0));
    assert_eq!(brokers[2].metric(unclean), Some(0.0));

    // Each uncleanly elected leader reports itself recovered (KIP-704),
    // alone, before its ISR may grow: broker 2's return then brings both
    // partitions back to two in sync, RECOVERED.
    brokers[1].restart();
    brokers[0].wait_for(30, "both recovered and in sync again", || {
        let image = etcd_image(&etcd);
        let ok = ["lone", "auto"].iter().all(|t| {
            image.topics.state(t, 0).is_some_and(|s| {
                let s = &s.state;
                s.leader == 3 && s.isr.len() == 2 && s.leader_recovery_state == 0
            })
        });
        ok.then_some(())
    });
}

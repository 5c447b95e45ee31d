//! Replication between real brokers (docs/design/multi-broker.md, 5):
//! a topic created with `--replication-factor 3 --config
//! min.insync.replicas=2` has every partition on all three brokers, each
//! leading one; records produced with `acks=all` are on every replica, byte
//! for byte, and consumers read them through any bootstrap broker (kcat,
//! and confluent-kafka's idempotent producer and group consumer, each
//! through another broker). When a
//! leader is SIGKILLed, the controller elects another member of the ISR at
//! the next epoch and drops the dead one from the ISR; acks=all goes on and
//! nothing acknowledged is lost. With a second broker gone the ISR is below
//! the topic's min ISR: an acks=all produce gets NOT_ENOUGH_REPLICAS and
//! nothing is appended, while acks=1 still appends, but nothing more is
//! committed until the ISR is back (Kafka's rule since KAFKA-15583). When
//! both return they catch up, the leader adds them to the ISR again, the
//! acks=1 records become committed and every replica holds the same bytes
//! (with `num.replica.fetchers=2`, the followed partitions split between
//! two threads per leader).

use std::time::{Duration, Instant};

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::etcd::EtcdServer;
use crate::broker::{fetch_all, kcat, run_python_script, TestBroker, Wire};
use crate::support::{
    create_topic, placement, signal, start_cluster, start_cluster_with, wait_placement,
};

/// The bytes of a partition's `.log` files on one broker, in offset order.
fn log_bytes(b: &TestBroker, topic: &str, p: i32) -> Vec<u8> {
    let dir = b.data_dir().join(format!("{topic}-{p}"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|f: &std::path::PathBuf| f.extension().is_some_and(|e| e == "log"));
    files.sort();
    files.iter().flat_map(|f| std::fs::read(f).unwrap_or_default()).collect()
}

/// One record at `acks` to `topic`-`partition` through `port`: its error code.
fn produce_one(port: u16, topic: &str, partition: i32, acks: i16, value: &str) -> i16 {
    let mut b = sediment::log::record_batch::BatchBuilder::new(
        sediment::log::compression::Compression::None,
        crate::broker::now_ms(),
    );
    b.append(crate::broker::now_ms(), Some(b"k"), Some(value.as_bytes()));
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(bytes::Bytes::from(b.build())))])]);
    let r = Wire::connect(port).call(9, &request);
    r.responses[0].partition_responses[0].error_code
}

/// As a client produces: to the leader `port`'s Metadata names, again while
/// the answer is that it is not (yet) the leader. The last error code.
fn produce_to_leader(brokers: &[TestBroker], port: u16, p: i32, acks: i16, value: &str) -> i16 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let leader = placement(port, "rep")[&p].0;
        let code = produce_one(brokers[leader as usize - 1].port, "rep", p, acks, value);
        if !matches!(code, 5 | 6) || Instant::now() > deadline {
            return code;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every committed value of `topic`, each partition read from its leader
/// as `port`'s Metadata names it, sorted.
fn values(brokers: &[TestBroker], port: u16, topic: &str) -> Vec<String> {
    let mut out: Vec<String> = placement(port, topic)
        .iter()
        .flat_map(|(p, (leader, ..))| fetch_all(brokers[*leader as usize - 1].port, topic, *p))
        .filter_map(|(_, _, v)| v)
        .collect();
    out.sort();
    out
}

#[test]
fn acks_all_reaches_every_in_sync_replica_and_survives_the_leader() {
    let etcd = EtcdServer::start();
    // Two fetcher threads per leader: the partitions followed are split.
    let mut brokers = start_cluster_with(&etcd, 3, &["num.replica.fetchers=2"]);
    create_topic(
        &brokers[1],
        "rep",
        3,
        &["--replication-factor", "3", "--config", "min.insync.replicas=2"],
    );
    let placed = wait_placement(brokers[0].port, "rep", "three replicas in sync", |p| {
        p.len() == 3 && p.values().all(|(l, _, r, isr)| *l > 0 && r.len() == 3 && isr.len() == 3)
    });
    let mut leaders: Vec<i32> = placed.values().map(|(l, ..)| *l).collect();
    leaders.sort_unstable();
    assert_eq!(leaders, vec![1, 2, 3], "each broker leads one partition: {placed:?}");

    // acks=all through broker 1: on every replica, byte for byte.
    let input: String = (0..300).map(|i| format!("k{i}:a{i:03}\n")).collect();
    let b1 = brokers[0].bootstrap();
    let (ok, _, err) = kcat(&["-P", "-b", &b1, "-t", "rep", "-K:", "-X", "acks=all"], &input);
    assert!(ok, "kcat: {err}");
    for p in 0..3 {
        brokers[0].wait_for(30, "every replica holding the partition", || {
            let copies: Vec<Vec<u8>> = brokers.iter().map(|b| log_bytes(b, "rep", p)).collect();
            (!copies[0].is_empty() && copies.windows(2).all(|w| w[0] == w[1])).then_some(())
        });
    }
    let mut want: Vec<String> = (0..300).map(|i| format!("a{i:03}")).collect();
    assert_eq!(values(&brokers, brokers[2].port, "rep"), want, "acks=all answered once committed");

    // confluent-kafka: idempotent acks=all through broker 2, a group
    // consumer through broker 3 (its coordinator wherever its partition of
    // __consumer_offsets is led).
    let other = brokers[2].bootstrap();
    let args = [other.as_str(), "rep", "200"];
    run_python_script(
        &brokers[1],
        "cluster_confluent.py",
        &args,
        "all cluster confluent-kafka checks passed",
    );
    want.extend((0..200).map(|i| format!("cc-{i}")));
    want.sort();
    assert_eq!(values(&brokers, brokers[0].port, "rep"), want, "on the leaders");

    // SIGKILL the leader of partition 0: another ISR member leads at epoch
    // 1 and the dead one leaves the ISR; acks=all goes on.
    let (dead_leader, ..) = placed[&0].clone();
    let dead = dead_leader as usize - 1;
    brokers[dead].kill();
    let live: Vec<usize> = (0..3).filter(|i| *i != dead).collect();
    let port = brokers[live[0]].port;
    let after = wait_placement(port, "rep", "a new leader from the ISR", |p| {
        p.values().all(|(l, _, _, isr)| *l > 0 && *l != dead_leader && !isr.contains(&dead_leader))
    });
    assert_eq!(after[&0].1, 1, "partition 0's leader epoch rose: {after:?}");
    for p in 0..3 {
        let code = produce_to_leader(&brokers, port, p, -1, &format!("b{p}"));
        assert_eq!(code, 0, "acks=all to {p} with two in sync");
    }
    want.extend((0..3).map(|p| format!("b{p}")));
    want.sort();
    assert_eq!(values(&brokers, port, "rep"), want, "nothing acknowledged is lost");

    // A second broker gone: one in sync, below min.insync.replicas=2.
    let second = live[1];
    let survivor = live[0];
    let second_id = second as i32 + 1;
    brokers[second].kill();
    let port = brokers[survivor].port;
    wait_placement(port, "rep", "the ISR down to one", |p| {
        p.values().all(|(l, _, _, isr)| {
            *l == survivor as i32 + 1 && isr.len() == 1 && !isr.contains(&second_id)
        })
    });
    // The survivor's gauges show the step: its three partitions under
    // replicated and under their min ISR.
    let s = &brokers[survivor];
    s.wait_for(30, "the gauges at the ISR of one", || {
        let urp = s.metric("kafka_server_replicamanager_underreplicatedpartitions")?;
        let under = s.metric("kafka_server_replicamanager_underminisrpartitioncount")?;
        (urp >= 3.0 && under >= 3.0).then_some(())
    });
    let on_disk = |p: i32| log_bytes(&brokers[survivor], "rep", p).len();
    for p in 0..3 {
        let before = on_disk(p);
        let code = produce_to_leader(&brokers, port, p, -1, "refused");
        assert_eq!(code, 19, "NOT_ENOUGH_REPLICAS for {p}");
        assert_eq!(on_disk(p), before, "a refused acks=all record was appended to {p}");
        let code = produce_to_leader(&brokers, port, p, 1, &format!("c{p}"));
        assert_eq!(code, 0, "acks=1 still writes");
        assert!(on_disk(p) > before, "the acks=1 record of {p} is on disk");
    }
    // The high watermark stays while the ISR is below the min ISR (Kafka's
    // rule since KAFKA-15583): the acks=1 records are appended, not
    // committed. (A new leader's high watermark may even lag what it was
    // acknowledged for, as a follower learns it one fetch late, until its
    // ISR is back.)
    let committed = values(&brokers, port, "rep");
    assert!(
        committed.iter().all(|v| want.contains(v)),
        "only acks=all records committed: {committed:?}"
    );

    // Both back: they catch up from the survivor and rejoin the ISR, which
    // commits the acks=1 records; every replica ends the same.
    brokers[second].restart();
    brokers[dead].restart();
    wait_placement(port, "rep", "the ISR whole again", |p| {
        p.values().all(|(_, _, _, isr)| isr.len() == 3)
    });
    for p in 0..3 {
        want.push(format!("c{p}"));
    }
    want.sort();
    brokers[survivor].wait_for(30, "the acks=1 records committed", || {
        (values(&brokers, port, "rep") == want).then_some(())
    });
    for p in 0..3 {
        brokers[survivor].wait_for(30, "every replica the same again", || {
            let copies: Vec<Vec<u8>> = brokers.iter().map(|b| log_bytes(b, "rep", p)).collect();
            copies.windows(2).all(|w| w[0] == w[1]).then_some(())
        });
    }
    // The survivor's metrics saw it: it leads all three, none under-replicated
    // now, and it shrank (the dead brokers were dropped by the controller,
    // not counted) and expanded its ISRs.
    let s = &brokers[survivor];
    s.wait_for(20, "the replication gauges", || {
        let urp = s.metric("kafka_server_replicamanager_underreplicatedpartitions");
        (urp == Some(0.0)).then_some(())
    });
    // "rep" and the 50 partitions of __consumer_offsets the group created.
    assert_eq!(s.metric("kafka_server_replicamanager_leadercount"), Some(53.0));
    assert_eq!(s.metric("kafka_server_replicamanager_partitioncount"), Some(53.0));
    assert_eq!(s.metric("kafka_server_replicamanager_underminisrpartitioncount"), Some(0.0));
    let expands = s.metric("kafka_server_replicamanager_isrexpands_total").unwrap_or(0.0);
    assert!(expands >= 3.0, "ISR expansions as the returning brokers caught up: {expands}");
    for b in &brokers {
        assert!(!b.log().contains("panicked"), "{}", b.log());
    }
}

/// DeleteRecords v2 on the leader: the new low watermark of `partition`.
fn delete_records(port: u16, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::DeleteRecordsRequest;
    let request = DeleteRecordsRequest::default().with_timeout_ms(10_000).with_topics(vec![
        DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)]),
    ]);
    let r = Wire::connect(port).call(2, &request);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

/// A follower away while its leader's log start moved past its log end
/// asks the leader for its start (ListOffsets), starts again there, empty,
/// and catches up into the ISR; a follower present follows the log start.
#[test]
fn a_follower_behind_the_leaders_log_start_starts_again_there() {
    let etcd = EtcdServer::start();
    let mut brokers = start_cluster(&etcd, 2);
    let port = brokers[0].port;
    create_topic(&brokers[0], "trim", 1, &["--replication-factor", "2"]);
    let placed =
        wait_placement(port, "trim", "two in sync", |p| p.get(&0).is_some_and(|e| e.3.len() == 2));
    let leader = placed[&0].0 as usize - 1;
    let follower = 1 - leader;
    let lport = brokers[leader].port;
    for i in 0..10 {
        assert_eq!(produce_one(lport, "trim", 0, -1, &format!("a{i}")), 0);
    }
    brokers[follower].kill();
    wait_placement(lport, "trim", "the follower out of the ISR", |p| p[&0].3.len() == 1);
    for i in 0..10 {
        assert_eq!(produce_one(lport, "trim", 0, -1, &format!("b{i}")), 0);
    }
    assert_eq!(delete_records(lport, "trim", 0, 15), (0, 15));
    brokers[follower].restart();
    wait_placement(lport, "trim", "the follower back in the ISR", |p| p[&0].3.len() == 2);
    let f = &brokers[follower];
    let dir = f.data_dir().join("trim-0");
    f.wait_for(20, "the follower's log started again at 15", || {
        dir.join("00000000000000000015.log").exists().then_some(())
    });
    assert!(f.log().contains("behind the leader's log start: started again there"), "{}", f.log());
    // Both ends hold the records from 15 on; a later DeleteRecords moves
    // the follower's start too.
    assert_eq!(produce_one(lport, "trim", 0, -1, "c"), 0);
    assert_eq!(delete_records(lport, "trim", 0, 18), (0, 18));
    let checkpoint = f.data_dir().join("log-start-offset-checkpoint");
    f.wait_for(20, "the follower's log start following the leader's", || {
        std::fs::read_to_string(&checkpoint).ok().filter(|t| t.contains("trim 0 18"))
    });
}

/// A leader paused (SIGSTOP) past its session is replaced; a produce sent to
/// it meanwhile is not acknowledged when it resumes (its lease timer ran
/// out, so it leads nothing); it rejoins as a follower of the new leader
/// and ends with the same log.
#[test]
fn a_paused_leader_acknowledges_nothing_after_losing_leadership_and_rejoins() {
    let etcd = EtcdServer::start();
    let brokers = start_cluster(&etcd, 3);
    let port = brokers[0].port;
    create_topic(
        &brokers[0],
        "rep",
        1,
        &["--replication-factor", "3", "--config", "min.insync.replicas=2"],
    );
    let placed =
        wait_placement(port, "rep", "three in sync", |p| p.get(&0).is_some_and(|e| e.3.len() == 3));
    let old = placed[&0].0;
    let paused = &brokers[old as usize - 1];
    for i in 0..5 {
        assert_eq!(produce_one(paused.port, "rep", 0, -1, &format!("a{i}")), 0);
    }
    signal(paused, "STOP");
    let other = brokers.iter().find(|b| b.port != paused.port).unwrap().port;
    let moved = wait_placement(other, "rep", "a new leader", |p| p[&0].0 > 0 && p[&0].0 != old);
    assert_eq!(moved[&0].1, 1, "the next leader epoch");
    assert!(!moved[&0].3.contains(&old), "the paused leader left the ISR");
    assert_eq!(produce_to_leader(&brokers, other, 0, -1, "b"), 0);
    // A produce reaches the paused broker's socket; it is read on SIGCONT.
    let zombie_port = paused.port;
    let zombie = std::thread::spawn(move || produce_one(zombie_port, "rep", 0, -1, "zombie"));
    std::thread::sleep(Duration::from_millis(300));
    signal(paused, "CONT");
    let code = zombie.join().unwrap();
    assert_ne!(code, 0, "the deposed leader acknowledged a produce");
    wait_placement(other, "rep", "the old leader back in the ISR", |p| p[&0].3.len() == 3);
    let want: Vec<String> =
        ["a0", "a1", "a2", "a3", "a4", "b"].iter().map(|s| s.to_string()).collect();
    assert_eq!(values(&brokers, other, "rep"), want, "no zombie record committed");
    paused.wait_for(30, "the old leader's log the same as the new one's", || {
        let copies: Vec<Vec<u8>> = brokers.iter().map(|b| log_bytes(b, "rep", 0)).collect();
        copies.windows(2).all(|w| w[0] == w[1]).then_some(())
    });
}

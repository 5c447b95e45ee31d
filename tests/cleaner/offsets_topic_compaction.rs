//! `__consumer_offsets` is compacted by the same cleaner as users' topics:
//! after many commits its size tracks groups × partitions, not the number of
//! commits, and the latest commit of every partition survives the cleaning and
//! a restart.

use crate::broker;

use std::time::{Duration, Instant};

use crate::broker::{TestBroker, Wire};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetFetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

const GROUPS: usize = 3;
const PARTITIONS: i32 = 4;
const ROUNDS: i64 = 1500;
const SEGMENT: u64 = 16 * 1024;

fn log_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

fn commit(w: &mut Wire, group: &str, offset: i64) {
    let partitions = (0..PARTITIONS)
        .map(|p| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(offset)
                .with_committed_metadata(Some(StrBytes::from_static_str("")))
        })
        .collect();
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("events")))
            .with_partitions(partitions)]);
    // Right after a start the coordinator may still be loading (code 14,
    // retriable): retry as clients do.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = w.call(8, &request);
        let loading = r.topics[0].partitions.iter().all(|p| p.error_code == 14);
        if loading && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        assert!(r.topics[0].partitions.iter().all(|p| p.error_code == 0), "{r:?}");
        return;
    }
}

fn committed(port: u16, group: &str) -> Vec<i64> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("events")))
            .with_partition_indexes((0..PARTITIONS).collect())]));
    // Right after a start the coordinator may still be loading (code 14,
    // retriable): retry as clients do.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = Wire::connect(port).call(7, &request);
        if r.error_code == 14 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        assert_eq!(r.error_code, 0);
        return r.topics[0].partitions.iter().map(|p| p.committed_offset).collect();
    }
}

#[test]
fn many_commits_compact_to_one_record_per_key() {
    let mut b = TestBroker::start(&[
        "offsets.topic.num.partitions=1",
        &format!("offsets.topic.segment.bytes={SEGMENT}"),
        "log.cleaner.backoff.ms=100",
        "group.initial.rebalance.delay.ms=0",
    ]);
    // Offsets are committed only for partitions that exist, as on Kafka.
    broker::create_topic(b.port, "events", PARTITIONS, &[]);
    let groups: Vec<String> = (0..GROUPS).map(|g| format!("group-{g}")).collect();
    let mut w = Wire::connect(b.port);
    for round in 1..=ROUNDS {
        for g in &groups {
            commit(&mut w, g, round);
        }
    }
    let dir = b.data_dir().join("__consumer_offsets-0");
    let written = ROUNDS as u64 * GROUPS as u64;
    // Wait for the cleaner: what remains is one record per key in the cleaned
    // segments plus the active segment, which is never cleaned.
    let deadline = Instant::now() + Duration::from_secs(90);
    let bound = 3 * SEGMENT;
    loop {
        let size = log_bytes(&dir);
        if size <= bound {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "offsets topic still {size} bytes after {written} commit requests (bound {bound})\n{}",
            b.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Every commit is a record: the log end offset counts them all.
    let metrics = b.metrics();
    let end = metrics
        .lines()
        .find(|l| {
            l.starts_with("kafka_log_log_logendoffset{")
                && l.contains("topic=\"__consumer_offsets\"")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .expect("log end offset of __consumer_offsets");
    assert!(end >= (written * PARTITIONS as u64) as f64, "{end}");
    let checkpoint =
        std::fs::read_to_string(b.data_dir().join("cleaner-offset-checkpoint")).unwrap();
    assert!(checkpoint.lines().any(|l| l.starts_with("__consumer_offsets 0 ")), "{checkpoint}");

    // The latest commit of every partition survived, also across a restart.
    for g in &groups {
        assert_eq!(committed(b.port, g), vec![ROUNDS; PARTITIONS as usize]);
    }
    assert!(b.stop().success());
    b.restart();
    for g in &groups {
        assert_eq!(
            committed(b.port, g),
            vec![ROUNDS; PARTITIONS as usize],
            "after restart\n{}",
            b.log()
        );
    }
}

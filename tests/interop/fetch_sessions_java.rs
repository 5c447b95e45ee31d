//! Fetch sessions (KIP-227) with Apache Kafka 4.1.2's Java consumer
//! (tests/java/FetchSessionConsumer.java): a consumer of 100 partitions gets
//! a session and is then served incremental fetches; when its session is
//! evicted (one slot, taken by a replica's fetch, which may evict a young
//! consumer session) it gets FETCH_SESSION_ID_NOT_FOUND, starts over with a
//! full fetch, and still receives every record exactly once. The session
//! errors and the close with epoch -1 are checked on the wire.

use crate::broker;

use crate::broker::{create_topic, now_ms, produce, repo_root, TestBroker, Wire};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "many";
const PARTITIONS: i32 = 100;
const PER_PARTITION: usize = 40;

fn fetch(w: &mut Wire, replica: i32, session: (i32, i32), partitions: &[i32]) -> FetchResponse {
    let topics = if partitions.is_empty() {
        vec![]
    } else {
        vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&p| {
                        FetchPartition::default().with_partition(p).with_partition_max_bytes(1024)
                    })
                    .collect(),
            )]
    };
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(replica))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_id(session.0)
        .with_session_epoch(session.1)
        .with_topics(topics);
    w.call(12, &request)
}

fn produce_round(w: &mut Wire, round: usize) {
    for p in 0..PARTITIONS {
        let records: Vec<(String, Option<String>)> = (0..PER_PARTITION)
            .map(|i| (format!("k{i}"), Some(format!("r{round}-p{p}-{i}"))))
            .collect();
        produce(w, TOPIC, p, now_ms(), &records);
    }
}

#[test]
fn java_consumer_uses_sessions_and_recovers_from_eviction() {
    let b = TestBroker::start(&["max.incremental.fetch.session.cache.slots=1"]);
    let mut w = Wire::connect(b.port);
    create_topic(b.port, TOPIC, PARTITIONS, &[]);
    produce_round(&mut w, 0);
    let all: Vec<i32> = (0..PARTITIONS).collect();

    // On the wire: a full fetch opens a session, an incremental one continues
    // it, a wrong epoch is refused, epoch -1 closes it.
    let full = fetch(&mut w, -1, (0, 0), &all);
    assert_eq!(full.error_code, 0);
    let id = full.session_id;
    assert_ne!(id, 0, "a full fetch with epoch 0 opens a session");
    assert_eq!(full.responses[0].partitions.len(), PARTITIONS as usize);
    let next = fetch(&mut w, -1, (id, 1), &[]);
    assert_eq!((next.error_code, next.session_id), (0, id));
    assert_eq!(fetch(&mut w, -1, (id, 1), &[]).error_code, 71, "INVALID_FETCH_SESSION_EPOCH");
    let closed = fetch(&mut w, -1, (id, -1), &[0]);
    assert_eq!((closed.error_code, closed.session_id), (0, 0));
    assert_eq!(fetch(&mut w, -1, (id, 2), &[]).error_code, 70, "FETCH_SESSION_ID_NOT_FOUND");
    assert_eq!(b.metric("sediment_fetch_session_cache_sessions"), Some(0.0));

    let expected = 2 * PARTITIONS as usize * PER_PARTITION;
    let program = repo_root().join("tests/java/FetchSessionConsumer.java").display().to_string();
    let bootstrap = b.bootstrap();
    let consumer = std::thread::spawn(move || {
        broker::kafka_tool_output(
            &program,
            &[&bootstrap, TOPIC, &PARTITIONS.to_string(), &expected.to_string()],
            None,
        )
    });
    let incremental = |b: &TestBroker| {
        b.metric("sediment_fetch_session_incremental_fetches_total").unwrap_or(0.0)
    };
    let served = b.wait_for(60, "the Java consumer's incremental fetches", || {
        let n = incremental(&b);
        (b.metric("sediment_fetch_session_cache_sessions") == Some(1.0) && n >= 5.0).then_some(n)
    });
    assert_eq!(b.metric("sediment_fetch_session_cache_partitions"), Some(PARTITIONS as f64));

    // A replica's full fetch takes the only slot from the consumer's young session.
    let replica = fetch(&mut w, 1, (0, 0), &[0]);
    assert_ne!(replica.session_id, 0);
    assert_eq!(b.metric("sediment_fetch_session_cache_evictions_total"), Some(1.0));
    assert_eq!(b.metric("sediment_fetch_session_cache_partitions"), Some(1.0));
    // Closed again, the slot is free for the consumer's next full fetch.
    assert_eq!(fetch(&mut w, 1, (replica.session_id, -1), &[]).session_id, 0);
    produce_round(&mut w, 1);
    b.wait_for(60, "the consumer's new session serving incremental fetches", || {
        let partitions = b.metric("sediment_fetch_session_cache_partitions");
        (partitions == Some(PARTITIONS as f64) && incremental(&b) > served + 5.0).then_some(())
    });

    let (ok, stdout, stderr) = consumer.join().expect("consumer thread");
    assert!(ok, "{stdout}\n{stderr}\n{}", b.log());
    assert_eq!(
        stdout.trim(),
        format!("total={expected} distinct={expected}"),
        "every record exactly once\n{stderr}"
    );
}

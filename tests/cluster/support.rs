//! What the cluster scenarios share: brokers joining one etcd with short
//! sessions, a replicated topic created with Kafka's `kafka-topics`, and
//! each partition's placement as a broker's Metadata gives it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::etcd::EtcdServer;
use crate::broker::{kafka_tool, TestBroker, Wire};

pub const TOPICS: &str = "org.apache.kafka.tools.TopicCommand";

/// Broker `node_id` of the cluster on `etcd`: a 6 s session, a heartbeat a
/// second, log starts checkpointed often (tests read them from the file).
pub fn start(etcd: &EtcdServer, node_id: i32) -> TestBroker {
    start_with(etcd, node_id, &[])
}

/// As [`start`], with more `key=value` overrides.
pub fn start_with(etcd: &EtcdServer, node_id: i32, extra: &[&str]) -> TestBroker {
    let o = overrides(etcd, node_id, extra);
    TestBroker::start(&o.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Every override of broker `node_id` of [`start_with`] (for
/// [`TestBroker::set_overrides`] before a restart with other `extra`).
pub fn overrides(etcd: &EtcdServer, node_id: i32, extra: &[&str]) -> Vec<String> {
    let mut o = vec![
        format!("sediment.cluster.etcd.endpoints={}", etcd.endpoint()),
        format!("node.id={node_id}"),
        "broker.session.timeout.ms=6000".into(),
        "broker.heartbeat.interval.ms=1000".into(),
        "log.flush.start.offset.checkpoint.interval.ms=200".into(),
    ];
    o.extend(extra.iter().map(|s| s.to_string()));
    o
}

/// Brokers 1..=n, returned once the first one's Metadata lists them all.
pub fn start_cluster(etcd: &EtcdServer, n: i32) -> Vec<TestBroker> {
    start_cluster_with(etcd, n, &[])
}

/// As [`start_cluster`], each broker with more overrides.
pub fn start_cluster_with(etcd: &EtcdServer, n: i32, extra: &[&str]) -> Vec<TestBroker> {
    let brokers: Vec<TestBroker> = (1..=n).map(|id| start_with(etcd, id, extra)).collect();
    let port = brokers[0].port;
    brokers[0].wait_for(20, "every broker registered", || {
        let request = MetadataRequest::default().with_topics(Some(vec![]));
        (Wire::connect(port).call(12, &request).brokers.len() == n as usize).then_some(())
    });
    brokers
}

/// `kafka-topics --create` through `b`, with `extra` arguments
/// (`--replication-factor 3`, `--config k=v`).
pub fn create_topic(b: &TestBroker, topic: &str, partitions: i32, extra: &[&str]) {
    let bootstrap = b.bootstrap();
    let partitions = partitions.to_string();
    let mut args = vec![
        "--bootstrap-server",
        &bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        &partitions,
    ];
    args.extend_from_slice(extra);
    kafka_tool(b, TOPICS, &args, None);
}

/// Wait (30 s at most) until every broker of `brokers` describes `topic`
/// with `partitions` partitions, each with a leader. Clients bootstrapped
/// from all of them may ask any; a producer whose metadata still lacks a
/// partition's leader sends everything to the partitions that have one.
pub fn wait_leaders(brokers: &[TestBroker], topic: &str, partitions: i32) {
    for b in brokers {
        wait_placement(b.port, topic, "every partition with a leader", |p| {
            p.len() == partitions as usize && p.values().all(|(leader, ..)| *leader >= 0)
        });
    }
}

/// One partition's (leader, leader epoch, replicas, ISR).
pub type PartitionPlacement = (i32, i32, Vec<i32>, Vec<i32>);

/// Per partition, its placement.
pub type Placement = BTreeMap<i32, PartitionPlacement>;

/// `topic` as `port`'s Metadata v12 describes it.
pub fn placement(port: u16, topic: &str) -> Placement {
    let t = MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.into()))));
    let request =
        MetadataRequest::default().with_topics(Some(vec![t])).with_allow_auto_topic_creation(false);
    let r = Wire::connect(port).call(12, &request);
    let ids = |v: &[kafka_protocol::messages::BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    r.topics[0]
        .partitions
        .iter()
        .map(|p| {
            let entry = (p.leader_id.0, p.leader_epoch, ids(&p.replica_nodes), ids(&p.isr_nodes));
            (p.partition_index, entry)
        })
        .collect()
}

/// Wait (30 s at most) until `port`'s placement of `topic` is as `ok` wants.
pub fn wait_placement(
    port: u16,
    topic: &str,
    what: &str,
    ok: impl Fn(&Placement) -> bool,
) -> Placement {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = placement(port, topic);
        if ok(&p) {
            return p;
        }
        assert!(Instant::now() < deadline, "{what}: {p:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How a test reaches `etcd` as a client: 5 s timeouts, no user.
pub fn etcd_settings(etcd: &EtcdServer) -> sediment::cluster::EtcdSettings {
    sediment::cluster::EtcdSettings {
        endpoints: vec![etcd.endpoint()],
        connection_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(5),
        user: None,
        tls: None,
    }
}

/// The cluster's namespace as etcd holds it now, read as a broker's image.
pub fn etcd_image(etcd: &EtcdServer) -> sediment::cluster::image::MetadataImage {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = sediment::cluster::EtcdCoordination::connect(&etcd_settings(etcd)).await.unwrap();
        let keys = sediment::cluster::keys::ClusterKeys::new("/sediment");
        sediment::cluster::image::snapshot(&c, &keys).await.unwrap()
    })
}

/// Send `sig` (`STOP`, `CONT`) to broker `b`.
pub fn signal(b: &TestBroker, sig: &str) {
    let ok =
        std::process::Command::new("kill").arg(format!("-{sig}")).arg(b.pid().to_string()).status();
    assert!(ok.is_ok_and(|s| s.success()), "kill -{sig}");
}

/// FindCoordinator v2 through `port` for `key` of `key_type` (0 a group, 1
/// a transactional id): the node, or the error code.
pub fn find_coordinator(port: u16, key: &str, key_type: i8) -> Result<i32, i16> {
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(key.into()))
        .with_key_type(key_type);
    let r = Wire::connect(port).call(2, &request);
    if r.error_code == 0 {
        Ok(r.node_id.0)
    } else {
        Err(r.error_code)
    }
}

/// A record's key and value (`None`: a tombstone).
type KeyedRecord = (Vec<u8>, Option<Vec<u8>>);

/// What a read_committed consumer from offset 0 ends with, per key, in the
/// `.log` files of partition dir `dir`: transactional records count once
/// their COMMIT marker comes (an ABORT drops them), a tombstone removes its
/// key, a torn tail (a batch being written) ends the read.
pub fn committed_latest(dir: &std::path::Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    use sediment::log::record_batch::{check_batch, records_bytes, BatchHeader, RecordIter};
    let mut latest = BTreeMap::new();
    // Per producer id, its open transaction's (key, value) records.
    let mut open: BTreeMap<i64, Vec<KeyedRecord>> = BTreeMap::new();
    let mut scratch = Vec::new();
    for file in crate::common::files_with(dir, "log") {
        let bytes = std::fs::read(&file).unwrap_or_default();
        let mut pos = 0;
        while let Ok(h) = BatchHeader::parse(&bytes[pos..]) {
            let end = pos + h.size_in_bytes();
            if end > bytes.len() || check_batch(&bytes[pos..end], usize::MAX).is_err() {
                break;
            }
            let payload =
                records_bytes(&h, &bytes[pos..end], &mut scratch, 1 << 30).expect("payload");
            let records: Vec<_> = RecordIter::new(payload, h.records_count)
                .map(|r| r.expect("record"))
                .map(|r| (r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec)))
                .collect();
            if h.is_control() {
                // Key: version (i16), type (i16): 0 ABORT, 1 COMMIT.
                let commit = records
                    .first()
                    .and_then(|(k, _)| k.as_ref())
                    .is_some_and(|k| k.len() >= 4 && k[3] == 1);
                for (k, v) in open.remove(&h.producer_id).unwrap_or_default() {
                    if commit {
                        apply(&mut latest, k, v);
                    }
                }
            } else {
                let keyed = records.into_iter().filter_map(|(k, v)| Some((k?, v)));
                if h.is_transactional() {
                    open.entry(h.producer_id).or_default().extend(keyed);
                } else {
                    for (k, v) in keyed {
                        apply(&mut latest, k, v);
                    }
                }
            }
            pos = end;
        }
    }
    latest
}

fn apply(latest: &mut BTreeMap<Vec<u8>, Vec<u8>>, key: Vec<u8>, value: Option<Vec<u8>>) {
    match value {
        Some(v) => latest.insert(key, v),
        None => latest.remove(&key),
    };
}

/// Issue 29's acceptance 7 for `topics` (compacted) once writes stopped:
/// every replica of every partition, read from its own segments, ends
/// with the same committed latest value per key (waited for, 60 s at
/// most, while followers catch up), and Kafka's DumpLogSegments reads
/// every replica's segments as valid. `brokers[i]` is node `i + 1`.
pub fn assert_replicas_agree(brokers: &[TestBroker], topics: &[&str]) {
    let port = brokers[0].port;
    for topic in topics {
        let (mut segments, mut keys) = (Vec::new(), 0);
        for (p, (_, _, replicas, _)) in placement(port, topic) {
            let dir =
                |node: i32| brokers[(node - 1) as usize].data_dir().join(format!("{topic}-{p}"));
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let seen: Vec<_> = replicas.iter().map(|r| committed_latest(&dir(*r))).collect();
                if seen.windows(2).all(|w| w[0] == w[1]) {
                    keys += seen[0].len();
                    break;
                }
                let sizes: Vec<usize> = seen.iter().map(BTreeMap::len).collect();
                assert!(
                    Instant::now() < deadline,
                    "{topic}-{p}: replicas {replicas:?} differ (keys {sizes:?})"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
            for r in &replicas {
                segments.extend(crate::common::files_with(&dir(*r), "log"));
            }
        }
        assert!(keys > 0, "{topic}: no key in any replica, nothing compared");
        // One DumpLogSegments run over every replica's segments of the topic.
        let dump = crate::common::kafka_dump_log(&segments, &["--deep-iteration"]);
        assert!(!dump.contains("isvalid: false"), "{topic}: a segment does not read:\n{dump}");
    }
}

//! AlterPartition (docs/design/multi-broker.md, 4.4) from a test client
//! posing as a partition's leader, against three real brokers: only the
//! controller answers; it refuses a stale broker epoch, an unknown topic
//! id, stale epochs, a sender that does not lead, an ISR outside the
//! replicas and an ineligible member with Kafka's codes, changing nothing;
//! a valid shrink is written with the next partition epoch, and the real
//! leader then brings the follower back with its own AlterPartition.

use std::time::{Duration, Instant};

use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, BrokerId};
use sediment::cluster::image::MetadataImage;
use sediment::cluster::keys::PartitionStateValue;

use crate::broker::etcd::EtcdServer;
use crate::broker::{TestBroker, Wire};
use crate::support::{create_topic, etcd_image as image, start_cluster, wait_placement};

const TOPIC: &str = "ap";
const NOT_CONTROLLER: i16 = 41;
const STALE_BROKER_EPOCH: i16 = 77;
const UNKNOWN_TOPIC_ID: i16 = 100;
const FENCED_LEADER_EPOCH: i16 = 74;
const INVALID_REQUEST: i16 = 42;
const INVALID_UPDATE_VERSION: i16 = 95;
const INELIGIBLE_REPLICA: i16 = 107;

fn state(image: &MetadataImage) -> PartitionStateValue {
    image.topics.state(TOPIC, 0).unwrap().state.clone()
}

/// What a leader would ask: `isr` (members with their epochs) for `ap`-0.
#[derive(Clone)]
struct Ask {
    sender: (i32, i64),
    topic_id: [u8; 16],
    leader_epoch: i32,
    partition_epoch: i32,
    isr: Vec<(i32, i64)>,
}

impl Ask {
    fn send(&self, b: &TestBroker, version: i16) -> AlterPartitionResponse {
        let members = self.isr.iter().map(|(id, e)| {
            BrokerState::default().with_broker_id(BrokerId(*id)).with_broker_epoch(*e)
        });
        let mut p = PartitionData::default()
            .with_partition_index(0)
            .with_leader_epoch(self.leader_epoch)
            .with_partition_epoch(self.partition_epoch);
        p = if version >= 3 {
            p.with_new_isr_with_epochs(members.collect())
        } else {
            p.with_new_isr(self.isr.iter().map(|(id, _)| BrokerId(*id)).collect())
        };
        let topic = TopicData::default()
            .with_topic_id(uuid::Uuid::from_bytes(self.topic_id))
            .with_partitions(vec![p]);
        let request = AlterPartitionRequest::default()
            .with_broker_id(BrokerId(self.sender.0))
            .with_broker_epoch(self.sender.1)
            .with_topics(vec![topic]);
        Wire::connect(b.port).call(version, &request)
    }

    /// The partition's error code, the top level being NONE.
    fn refused(&self, b: &TestBroker) -> i16 {
        let r = self.send(b, 3);
        assert_eq!(r.error_code, 0, "{r:?}");
        r.topics[0].partitions[0].error_code
    }
}

#[test]
fn the_controller_checks_and_writes_alter_partition_as_kafka_does() {
    let etcd = EtcdServer::start();
    let brokers = start_cluster(&etcd, 3);
    let port = brokers[0].port;
    create_topic(&brokers[0], TOPIC, 1, &["--replication-factor", "3"]);
    wait_placement(port, TOPIC, "three in sync", |p| p.get(&0).is_some_and(|x| x.3.len() == 3));
    let before = image(&etcd);
    let s = state(&before);
    let controller = before.controller_id();
    let broker = |id: i32| &brokers[(id - 1) as usize];
    let epoch_of = |id: i32| before.brokers[&id].epoch;
    let leader = s.leader;
    let follower = s.isr.iter().copied().find(|m| *m != leader).unwrap();
    let others: Vec<i32> = s.isr.iter().copied().filter(|m| *m != leader).collect();
    let ok = Ask {
        sender: (leader, epoch_of(leader)),
        topic_id: before.topics.topic(TOPIC).unwrap().id,
        leader_epoch: s.leader_epoch,
        partition_epoch: s.partition_epoch,
        isr: vec![(leader, epoch_of(leader)), (others[0], epoch_of(others[0]))],
    };

    // Only the controller answers.
    let not_controller = (1..=3).find(|id| *id != controller).unwrap();
    assert_eq!(ok.send(broker(not_controller), 3).error_code, NOT_CONTROLLER);
    let c = broker(controller);
    let stale_sender = Ask { sender: (leader, epoch_of(leader) + 1000), ..ok.clone() };
    let r = stale_sender.send(c, 3);
    assert_eq!((r.error_code, r.topics.len()), (STALE_BROKER_EPOCH, 0), "{r:?}");

    // Each refusal, in Kafka's words.
    let cases = [
        (Ask { topic_id: [7; 16], ..ok.clone() }, UNKNOWN_TOPIC_ID),
        (Ask { leader_epoch: s.leader_epoch - 1, ..ok.clone() }, FENCED_LEADER_EPOCH),
        (Ask { partition_epoch: s.partition_epoch - 1, ..ok.clone() }, INVALID_UPDATE_VERSION),
        (Ask { sender: (follower, epoch_of(follower)), ..ok.clone() }, INVALID_REQUEST),
        (Ask { isr: vec![(leader, -1), (99, -1)], ..ok.clone() }, INVALID_REQUEST),
        (Ask { isr: vec![(others[0], -1)], ..ok.clone() }, INVALID_REQUEST),
        (
            Ask { isr: vec![(leader, -1), (others[0], epoch_of(others[0]) - 1)], ..ok.clone() },
            INELIGIBLE_REPLICA,
        ),
    ];
    for (ask, code) in &cases {
        assert_eq!(ask.refused(c), *code, "isr {:?} from {:?}", ask.isr, ask.sender);
    }
    assert_eq!(state(&image(&etcd)), s, "a refusal changes nothing");

    // A valid shrink (v2: members without epochs) is written at the next
    // partition epoch and answered with the new state.
    let r = ok.send(c, 2);
    assert_eq!(r.error_code, 0, "{r:?}");
    let answer = &r.topics[0].partitions[0];
    assert_eq!(answer.error_code, 0, "{r:?}");
    assert_eq!(answer.partition_epoch, s.partition_epoch + 1);
    assert_eq!((answer.leader_id.0, answer.leader_epoch), (leader, s.leader_epoch));
    let ids: Vec<i32> = answer.isr.iter().map(|b| b.0).collect();
    assert_eq!(ids, vec![leader, others[0]]);
    let written = state(&image(&etcd));
    assert_eq!((written.isr.clone(), written.partition_epoch), (ids, s.partition_epoch + 1));
    // The same request again is now stale.
    assert_eq!(ok.refused(c), INVALID_UPDATE_VERSION);

    // The leader sees the caught-up replica outside its ISR and asks the
    // controller to take it back.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = state(&image(&etcd));
        if now.isr.len() == 3 {
            assert!(now.partition_epoch >= s.partition_epoch + 2, "{now:?}");
            assert_eq!(now.leader_epoch, s.leader_epoch, "no election: {now:?}");
            break;
        }
        assert!(Instant::now() < deadline, "the ISR was not expanded again: {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let expands = broker(leader).metric("kafka_server_replicamanager_isrexpands_total");
    assert!(expands >= Some(1.0), "the leader counts its expansion: {expands:?}");
    let failed = broker(leader).metric("kafka_server_replicamanager_failedisrupdates_total");
    assert!(failed.is_some(), "FailedIsrUpdatesPerSec is exported");
    let leader_log = broker(leader).log();
    assert!(leader_log.contains("ISR changed"), "{leader_log}");
    let controller_log = c.log();
    assert!(controller_log.contains("ISR altered for its leader"), "{controller_log}");
    // The followers fetch in sessions (KIP-227): each opens one with the
    // leader once its first (long-polled) fetch is answered.
    brokers[0].wait_for(10, "both followers of ap-0 in fetch sessions", || {
        let opened = brokers.iter().filter(|b| b.log().contains("replica fetch session opened"));
        (opened.count() >= 2).then_some(())
    });
    broker(leader).wait_for(10, "incremental replica fetches served", || {
        let n = broker(leader).metric("sediment_fetch_session_incremental_fetches_total")?;
        (n > 0.0).then_some(())
    });
    // In sync and idle: no follower lags its leader (Kafka's MaxLag).
    for b in &brokers {
        b.wait_for(20, "no replica lag", || {
            (b.metric("kafka_server_replicafetchermanager_maxlag") == Some(0.0)).then_some(())
        });
        assert!(!b.log().contains("panicked"), "{}", b.log());
    }
}

//! Sessions, registration and the controller election over the in-memory
//! coordination with a mock clock: exactly one broker is the controller;
//! when its session ends (lease expired, or revoked at shutdown) another
//! takes over with a higher epoch; a broker whose keepalives go unanswered
//! stops counting itself controller once its lease timer runs out, before
//! etcd would expire the lease; a duplicate node.id is refused unless the
//! registration is its own data directory's.

use std::sync::Arc;
use std::time::Duration;

use sediment::clock::{MockClock, SharedClock};
use sediment::cluster::coordination::Coordination;
use sediment::cluster::keys::{broker_state, BrokerRegistration, ClusterKeys};
use sediment::cluster::registration::{self, JoinError};
use sediment::cluster::session::{BrokerSession, KeepAlive, SessionConfig};
use sediment::cluster::MemCoordination;
use sediment::controller::ControllerElection;

const CONFIG: SessionConfig =
    SessionConfig { session_timeout_ms: 6000, heartbeat_interval_ms: 1000, safety_margin_ms: 1000 };

fn registration(dir: &str) -> BrokerRegistration {
    BrokerRegistration {
        version: 1,
        incarnation_id: uuid::Uuid::new_v4().to_string(),
        directory_id: dir.to_string(),
        rack: None,
        state: broker_state::RUNNING,
        endpoints: vec![],
        inter_broker_listener: "PLAINTEXT".into(),
        software_version: "test".into(),
    }
}

struct Broker {
    session: Arc<BrokerSession>,
    election: Arc<ControllerElection>,
}

async fn join(c: &Arc<MemCoordination>, clock: &SharedClock, node_id: i32) -> Broker {
    let coordination: Arc<dyn Coordination> = c.clone();
    let session = Arc::new(BrokerSession::open(coordination, CONFIG, clock.clone()).await.unwrap());
    let keys = ClusterKeys::new("/sediment");
    registration::ensure_cluster_id(&session, &keys, "cluster-a", false).await.unwrap();
    let reg = registration(&format!("dir-{node_id}"));
    let epoch = registration::register(&session, &keys, node_id, &reg).await.unwrap();
    let election = Arc::new(ControllerElection::new(Arc::clone(&session), keys, node_id, epoch));
    tokio::spawn(Arc::clone(&election).run());
    Broker { session, election }
}

/// Let the election tasks run until `done` holds (bounded).
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{what}");
}

fn active(brokers: &[&Broker]) -> Vec<usize> {
    brokers.iter().enumerate().filter(|(_, b)| b.election.is_active()).map(|(i, _)| i).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_controller_and_a_takeover_when_its_session_ends() {
    let mock = MockClock::new(1_000_000);
    let clock: SharedClock = mock.clone();
    let c = Arc::new(MemCoordination::new(clock.clone()));
    let (a, b, d) =
        (join(&c, &clock, 1).await, join(&c, &clock, 2).await, join(&c, &clock, 3).await);
    let all = [&a, &b, &d];
    until("one controller", || active(&all).len() == 1).await;
    let first = active(&all)[0];
    let first_epoch = all[first].election.epoch().unwrap();
    // Each campaign reads who won once it has run.
    until("every broker knows the controller", || {
        all.iter().all(|x| x.election.controller_id() == first as i32 + 1)
    })
    .await;

    // The controller's process stops: no more keepalives; the others go on.
    for _ in 0..8 {
        mock.advance(1000);
        for (i, x) in all.iter().enumerate() {
            if i != first {
                assert_eq!(x.session.keep_alive_once().await, KeepAlive::Renewed);
            }
        }
        c.expire_leases();
    }
    assert!(!all[first].session.is_live(), "its timer ran out");
    until("another controller", || active(&all).len() == 1 && active(&all)[0] != first).await;
    let second = active(&all)[0];
    assert!(all[second].election.epoch().unwrap() > first_epoch, "a higher epoch");
    assert_eq!(all[first].session.keep_alive_once().await, KeepAlive::Expired);

    // A clean shutdown revokes the session: the next one takes over at once.
    all[second].session.close().await.unwrap();
    until("a third controller", || {
        let now = active(&all);
        now.len() == 1 && now[0] != second && now[0] != first
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_timer_runs_out_before_etcd_expires_the_lease() {
    let mock = MockClock::new(1_000_000);
    let clock: SharedClock = mock.clone();
    let c = Arc::new(MemCoordination::new(clock.clone()));
    let a = join(&c, &clock, 1).await;
    until("controller", || a.election.is_active()).await;
    c.set_down(true);
    // TTL 6 s: the timer allows 6 s less the drift and the 1 s margin.
    mock.advance(4900);
    assert_eq!(a.session.keep_alive_once().await, KeepAlive::Unanswered);
    assert!(
        a.election.is_active(),
        "within the timer: live {} epoch {:?} remaining {} ms",
        a.session.is_live(),
        a.election.epoch(),
        a.session.timer().remaining_ms(),
    );
    mock.advance(200);
    assert!(!a.session.is_live(), "past ttl - margin");
    assert!(!a.election.is_active(), "no controller without a running timer");
    assert_eq!(a.session.lost_count(), 0, "counted by the keepalive round that sees it");
    assert_eq!(a.session.keep_alive_once().await, KeepAlive::Unanswered);
    assert_eq!(a.session.lost_count(), 1);
    assert_eq!(a.session.keep_alive_once().await, KeepAlive::Unanswered);
    assert_eq!(a.session.lost_count(), 1, "once per loss");
    // etcd back before its lease expired: the same lease, nothing was taken.
    c.set_down(false);
    assert_eq!(a.session.keep_alive_once().await, KeepAlive::Renewed);
    assert!(a.election.is_active(), "controller again at the same epoch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_node_id_is_refused_unless_it_is_our_predecessor() {
    let clock: SharedClock = MockClock::new(1_000_000);
    let c = Arc::new(MemCoordination::new(clock.clone()));
    let coordination: Arc<dyn Coordination> = c.clone();
    let keys = ClusterKeys::new("/sediment");
    let open = || BrokerSession::open(Arc::clone(&coordination), CONFIG, clock.clone());
    let first = open().await.unwrap();
    let epoch = registration::register(&first, &keys, 7, &registration("dir-a")).await.unwrap();
    let other = open().await.unwrap();
    let refused = registration::register(&other, &keys, 7, &registration("dir-b")).await;
    assert!(
        matches!(refused, Err(JoinError::DuplicateRegistration { node_id: 7, .. })),
        "{refused:?}"
    );
    // The same data dir after a crash: the predecessor's session goes.
    let restarted = open().await.unwrap();
    let again = registration::register(&restarted, &keys, 7, &registration("dir-a")).await.unwrap();
    assert!(again > epoch, "a new broker epoch");
    assert_eq!(
        first.keep_alive_once().await,
        KeepAlive::Expired,
        "the predecessor's lease was revoked"
    );
    // Another cluster's namespace is refused.
    registration::ensure_cluster_id(&restarted, &keys, "cluster-a", false).await.unwrap();
    let other_cluster =
        registration::ensure_cluster_id(&restarted, &keys, "cluster-b", false).await;
    assert!(matches!(other_cluster, Err(JoinError::OtherCluster { .. })), "{other_cluster:?}");
    let adopted = registration::ensure_cluster_id(&restarted, &keys, "cluster-b", true).await;
    assert_eq!(adopted.unwrap(), "cluster-a", "a broker without data takes the cluster's id");
}

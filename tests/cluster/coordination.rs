//! `Coordination` keeps etcd's semantics, checked by one suite of cases
//! run against a real etcd (`EtcdCoordination`, one server for every case,
//! each case under its own key prefix) and against `MemCoordination`:
//! compare-and-swap creates and updates, one revision per transaction,
//! reads at an old revision, paging through a prefix, leases (keepalive,
//! revoke, expiry: the keys go in one revision), watches from a revision
//! grouped by revision, and an unreachable service answering
//! `Unavailable` within the request timeout rather than hanging.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sediment::clock::MockClock;
use sediment::cluster::coordination::{
    Compare, Coordination, CoordinationError, KeyRange, Op, Txn, WatchEvent, WatchMessage,
    WatchReceiver,
};
use sediment::cluster::{EtcdCoordination, EtcdSettings, MemCoordination};

use crate::broker::etcd::EtcdServer;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// How a case lets a lease run out: real time on etcd, the mock clock here.
trait Expire {
    fn pass(&self, secs: i64);
}

struct RealTime;
impl Expire for RealTime {
    fn pass(&self, _secs: i64) {}
}

struct Mock(Arc<MockClock>, Arc<MemCoordination>);
impl Expire for Mock {
    fn pass(&self, secs: i64) {
        self.0.advance(secs * 1000 + 1);
        self.1.expire_leases();
    }
}

async fn create(c: &dyn Coordination, key: &str, value: &str) -> bool {
    let txn = Txn {
        compares: vec![Compare::CreateRevision(key.into(), 0)],
        success: vec![Op::put(key, value)],
        failure: vec![Op::Get(KeyRange::Key(key.into()))],
    };
    c.txn(txn).await.unwrap().succeeded
}

async fn value_of(c: &dyn Coordination, key: &str) -> Option<String> {
    let r = c.range(KeyRange::Key(key.into()), 0, 0).await.unwrap();
    r.kvs.first().map(|kv| String::from_utf8(kv.value.clone()).unwrap())
}

async fn next_changes(rx: &mut WatchReceiver) -> (i64, Vec<WatchEvent>) {
    let message = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a watch message within 10 s")
        .expect("the watch is open")
        .expect("no error");
    match message {
        WatchMessage::Changes { revision, events } => (revision, events),
        other => panic!("expected changes, got {other:?}"),
    }
}

async fn compare_and_swap(c: &dyn Coordination, p: &str) {
    let key = format!("{p}/controller");
    assert!(create(c, &key, "1").await, "the first create wins");
    let refused = Txn {
        compares: vec![Compare::CreateRevision(key.clone(), 0)],
        success: vec![Op::put(&key, "2")],
        failure: vec![Op::Get(KeyRange::Key(key.clone()))],
    };
    let r = c.txn(refused).await.unwrap();
    assert!(!r.succeeded, "a second create fails");
    let seen = &r.reads[0][0];
    assert_eq!(seen.value, b"1", "the else branch reads what won");
    assert_eq!(seen.version, 1);
    // Update by mod revision: the stale one fails, the current one wins.
    let update = |rev: i64, v: &str| Txn {
        compares: vec![Compare::ModRevision(key.clone(), rev)],
        success: vec![Op::put(&key, v)],
        failure: vec![],
    };
    assert!(!c.txn(update(seen.mod_revision - 1, "stale")).await.unwrap().succeeded);
    assert!(c.txn(update(seen.mod_revision, "3")).await.unwrap().succeeded);
    assert_eq!(value_of(c, &key).await.as_deref(), Some("3"));
    let value = Txn {
        compares: vec![Compare::Value(key.clone(), b"3".to_vec())],
        success: vec![Op::Delete(KeyRange::Key(key.clone()))],
        failure: vec![],
    };
    assert!(c.txn(value).await.unwrap().succeeded);
    assert_eq!(value_of(c, &key).await, None);
}

async fn revisions_and_old_reads(c: &dyn Coordination, p: &str) {
    let (a, b) = (format!("{p}/a"), format!("{p}/b"));
    let both = Txn { success: vec![Op::put(&a, "1"), Op::put(&b, "1")], ..Default::default() };
    let first = c.txn(both).await.unwrap().revision;
    let r = c.range(KeyRange::Prefix(format!("{p}/")), 0, 0).await.unwrap();
    assert_eq!(r.kvs.len(), 2);
    assert!(r.kvs.iter().all(|kv| kv.mod_revision == first), "one revision per txn: {r:?}");
    let second = c.txn(Txn { success: vec![Op::put(&a, "2")], ..Default::default() }).await;
    assert_eq!(second.unwrap().revision, first + 1);
    let old = c.range(KeyRange::Key(a.clone()), first, 0).await.unwrap();
    assert_eq!(old.kvs[0].value, b"1", "a read at the old revision");
    assert_eq!(value_of(c, &a).await.as_deref(), Some("2"));
}

async fn paging(c: &dyn Coordination, p: &str) {
    let prefix = format!("{p}/ids/");
    let puts = (0..7).map(|i| Op::put(format!("{prefix}{i}"), "x")).collect();
    let rev = c.txn(Txn { success: puts, ..Default::default() }).await.unwrap().revision;
    let mut seen = Vec::new();
    let mut from = prefix.clone();
    loop {
        let range = KeyRange::PrefixFrom { prefix: prefix.clone(), from: from.clone() };
        let page = c.range(range, rev, 3).await.unwrap();
        seen.extend(page.kvs.iter().map(|kv| kv.key.clone()));
        if !page.more {
            break;
        }
        from = format!("{}\0", page.kvs.last().unwrap().key);
    }
    let want: Vec<String> = (0..7).map(|i| format!("{prefix}{i}")).collect();
    assert_eq!(seen, want);
}

async fn leases(c: &dyn Coordination, p: &str, expire: &dyn Expire) {
    let prefix = format!("{p}/brokers/");
    let lease = c.grant(2).await.unwrap();
    let on_lease = (1..=2).map(|i| Op::put_on_lease(format!("{prefix}{i}"), "up", lease)).collect();
    let rev = c.txn(Txn { success: on_lease, ..Default::default() }).await.unwrap().revision;
    let mut rx = c.watch(KeyRange::Prefix(prefix.clone()), rev + 1).await.unwrap();
    assert!(c.keep_alive(lease).await.unwrap() >= 1);
    c.revoke(lease).await.unwrap();
    let (_, events) = next_changes(&mut rx).await;
    assert_eq!(events.len(), 2, "both keys go in one revision: {events:?}");
    assert!(events.iter().all(|e| matches!(e, WatchEvent::Delete(_))));
    let gone = c.keep_alive(lease).await;
    assert!(matches!(gone, Err(CoordinationError::LeaseNotFound(_))), "{gone:?}");
    let put = c.txn(Txn {
        success: vec![Op::put_on_lease(format!("{prefix}3"), "x", lease)],
        ..Default::default()
    });
    assert!(put.await.is_err(), "a put on a revoked lease");
    // Expiry: a lease not kept alive takes its key with it.
    let short = c.grant(2).await.unwrap();
    let key = format!("{prefix}4");
    c.txn(Txn { success: vec![Op::put_on_lease(&key, "x", short)], ..Default::default() })
        .await
        .unwrap();
    expire.pass(2);
    let deadline = Instant::now() + Duration::from_secs(15);
    while value_of(c, &key).await.is_some() {
        assert!(Instant::now() < deadline, "the key outlived its lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn watches(c: &dyn Coordination, p: &str) {
    let prefix = format!("{p}/topics/");
    let first =
        c.txn(Txn { success: vec![Op::put(format!("{prefix}a"), "1")], ..Default::default() });
    let first = first.await.unwrap().revision;
    let two = Txn {
        success: vec![Op::put(format!("{prefix}b"), "1"), Op::put(format!("{prefix}c"), "1")],
        ..Default::default()
    };
    let second = c.txn(two).await.unwrap().revision;
    // Another prefix's change is not seen.
    c.txn(Txn { success: vec![Op::put(format!("{p}/other"), "1")], ..Default::default() })
        .await
        .unwrap();
    let mut rx = c.watch(KeyRange::Prefix(prefix.clone()), first).await.unwrap();
    let (r1, e1) = next_changes(&mut rx).await;
    assert_eq!((r1, e1.len()), (first, 1));
    let (r2, e2) = next_changes(&mut rx).await;
    assert_eq!((r2, e2.len()), (second, 2), "a transaction is one message: {e2:?}");
    let del =
        Txn { success: vec![Op::Delete(KeyRange::Prefix(prefix.clone()))], ..Default::default() };
    let third = c.txn(del).await.unwrap().revision;
    let (r3, e3) = next_changes(&mut rx).await;
    assert_eq!(r3, third);
    assert_eq!(e3.len(), 3);
    assert!(e3.iter().all(|e| matches!(e, WatchEvent::Delete(kv) if kv.mod_revision == third)));
}

/// Every case, each under its own prefix of `base`.
async fn suite(c: &dyn Coordination, base: &str, expire: &dyn Expire) {
    compare_and_swap(c, &format!("{base}/cas")).await;
    revisions_and_old_reads(c, &format!("{base}/rev")).await;
    paging(c, &format!("{base}/paging")).await;
    leases(c, &format!("{base}/leases"), expire).await;
    watches(c, &format!("{base}/watches")).await;
}

fn settings(endpoint: String) -> EtcdSettings {
    EtcdSettings {
        endpoints: vec![endpoint],
        connection_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(2),
        user: None,
        tls: None,
    }
}

#[test]
fn etcd_keeps_the_coordination_semantics() {
    let mut etcd = EtcdServer::start();
    let rt = runtime();
    rt.block_on(async {
        let c = EtcdCoordination::connect(&settings(etcd.endpoint())).await.unwrap();
        suite(&c, "/test", &RealTime).await;
        // An etcd that goes away answers Unavailable within the timeout.
        etcd.stop();
        let started = Instant::now();
        let lost = c.range(KeyRange::Key("/test/x".into()), 0, 0).await;
        assert!(matches!(lost, Err(CoordinationError::Unavailable(_))), "{lost:?}");
        assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
        etcd.restart();
        let deadline = Instant::now() + Duration::from_secs(20);
        while c.range(KeyRange::Key("/test/x".into()), 0, 0).await.is_err() {
            assert!(Instant::now() < deadline, "no answer after etcd restarted:\n{}", etcd.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}

#[test]
fn connecting_to_no_etcd_fails_within_the_timeout() {
    let rt = runtime();
    let port = crate::broker::free_port();
    let started = Instant::now();
    let refused =
        rt.block_on(EtcdCoordination::connect(&settings(format!("http://127.0.0.1:{port}"))));
    assert!(matches!(refused, Err(CoordinationError::Unavailable(_))), "{refused:?}");
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
}

#[test]
fn memory_keeps_the_coordination_semantics() {
    let clock = MockClock::new(1_700_000_000_000);
    let c = Arc::new(MemCoordination::new(clock.clone()));
    let expire = Mock(clock, Arc::clone(&c));
    runtime().block_on(async {
        suite(c.as_ref(), "/test", &expire).await;
        // Compaction and outages, which only the stand-in can make on demand.
        let rev = c.txn(Txn { success: vec![Op::put("/c/k", "1")], ..Default::default() }).await;
        let rev = rev.unwrap().revision;
        c.compact(rev);
        let old = c.range(KeyRange::Key("/c/k".into()), rev - 1, 0).await;
        assert!(matches!(old, Err(CoordinationError::Compacted { .. })), "{old:?}");
        let mut rx = c.watch(KeyRange::Prefix("/c/".into()), rev - 1).await.unwrap();
        let compacted = rx.recv().await.unwrap().unwrap();
        assert!(matches!(compacted, WatchMessage::Compacted { .. }), "{compacted:?}");
        let mut open = c.watch(KeyRange::Prefix("/c/".into()), rev + 1).await.unwrap();
        c.set_down(true);
        assert!(open.recv().await.unwrap().is_err(), "a watch ends with the outage");
        let down = c.range(KeyRange::Key("/c/k".into()), 0, 0).await;
        assert!(matches!(down, Err(CoordinationError::Unavailable(_))));
        c.set_down(false);
        assert!(c.range(KeyRange::Key("/c/k".into()), 0, 0).await.is_ok());
    });
}

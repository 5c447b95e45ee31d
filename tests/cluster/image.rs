//! The metadata image (`cluster::image`) follows the namespace: a snapshot
//! read in pages at one revision, then each revision applied whole, and a
//! new snapshot when the watch's history was compacted away; the same over
//! a real etcd with real brokers registering and leaving.

use std::sync::Arc;
use std::time::Duration;

use sediment::clock::{MockClock, SharedClock};
use sediment::cluster::coordination::{Coordination, KeyRange, Op, Txn};
use sediment::cluster::image::{snapshot, ImageWatcher, MetadataImage};
use sediment::cluster::keys::{
    self, broker_state, BrokerRegistration, ClusterKeys, ControllerValue,
};
use sediment::cluster::MemCoordination;

fn registration(port: u16) -> BrokerRegistration {
    BrokerRegistration {
        version: 1,
        incarnation_id: "i".into(),
        directory_id: format!("dir-{port}"),
        rack: None,
        state: broker_state::RUNNING,
        endpoints: vec![keys::EndpointValue {
            listener: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port,
            security_protocol: "PLAINTEXT".into(),
        }],
        inter_broker_listener: "PLAINTEXT".into(),
        software_version: "t".into(),
    }
}

async fn put(c: &dyn Coordination, ops: Vec<Op>) -> i64 {
    c.txn(Txn { success: ops, ..Default::default() }).await.unwrap().revision
}

async fn until(
    w: &ImageWatcher,
    what: &str,
    done: impl Fn(&MetadataImage) -> bool,
) -> Arc<MetadataImage> {
    let mut rx = w.subscribe();
    let wait = async {
        loop {
            let image = Arc::clone(&rx.borrow_and_update());
            if done(&image) {
                return image;
            }
            rx.changed().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait).await.unwrap_or_else(|_| panic!("{what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_follows_the_namespace_whole_revisions_at_a_time() {
    let clock: SharedClock = MockClock::new(1_000_000);
    let c = Arc::new(MemCoordination::new(clock));
    let keys = ClusterKeys::new("/sediment");
    // More brokers than a page, and a key of another namespace.
    let many =
        (0..2500).map(|i| Op::put(keys.broker(i), registration(10_000 + i as u16).to_json()));
    put(c.as_ref(), many.collect()).await;
    put(c.as_ref(), vec![Op::put("/other/brokers/ids/1", b"x".to_vec())]).await;
    let image = snapshot(c.as_ref(), &keys).await.unwrap();
    assert_eq!(image.brokers.len(), 2500, "every page read");
    let dyn_c: Arc<dyn Coordination> = c.clone();
    let w = ImageWatcher::start(dyn_c, keys.clone(), Duration::from_millis(50)).await.unwrap();
    assert_eq!(w.current().brokers.len(), 2500);
    // One transaction: a broker leaves and the controller key appears, together.
    let controller = ControllerValue { version: 1, brokerid: 7, broker_epoch: 3 };
    let rev = put(
        c.as_ref(),
        vec![
            Op::Delete(KeyRange::Key(keys.broker(0))),
            Op::put(keys.controller(), keys::to_json(&controller)),
        ],
    )
    .await;
    let image = w.wait_for(rev).await;
    assert_eq!((image.brokers.len(), image.controller_id()), (2499, 7));
    assert_eq!(
        image.controller.as_ref().unwrap().1,
        rev,
        "the controller epoch is its key's create revision"
    );
    // A value that does not parse is left out, not trusted.
    let rev = put(c.as_ref(), vec![Op::put(keys.broker(1), b"{not json".to_vec())]).await;
    let image = w.wait_for(rev).await;
    assert!(!image.brokers.contains_key(&1));
    // Compaction past the watch: the watcher reads a new snapshot and goes on.
    let rev = put(c.as_ref(), vec![Op::Delete(KeyRange::Key(keys.controller()))]).await;
    w.wait_for(rev).await;
    assert_eq!(w.snapshots(), 1);
    c.compact_past_watchers(rev);
    let rev = put(c.as_ref(), vec![Op::put(keys.broker(2), registration(2).to_json())]).await;
    let image = until(&w, "the image after compaction", |i| {
        i.revision >= rev
            && i.brokers.get(&2).is_some_and(|b| b.registration.endpoints[0].port == 2)
    })
    .await;
    assert_eq!(w.snapshots(), 2, "a new snapshot after the watch was compacted away");
    assert_eq!(image.controller_id(), -1);
    assert_eq!(image.brokers.len(), 2498);
}

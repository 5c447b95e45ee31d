//! The cluster as a broker sees it (docs/design/multi-broker.md, 3.6): a
//! `MetadataImage`, the namespace at one revision, immutable and swapped
//! whole, kept current by an `ImageWatcher`:
//! 1. read the namespace at revision R, in pages of `PAGE` keys, each at R:
//!    one consistent snapshot;
//! 2. watch the prefix from R + 1;
//! 3. apply each revision's changes at once (one transaction is one new
//!    image, never half of one);
//! 4. when the watch reports compaction, or ends with an error, read a new
//!    snapshot and go on from it.
//!
//! The image holds the cluster id, the controller, the brokers'
//! registrations with their broker epochs, and the topics
//! (`topics_image`), and the stores' keys (ACLs, SCRAM credentials,
//! dynamic broker configs) as stored, which `security` and
//! `config::dynamic` parse. Keys it does not know
//! are kept out of it, and a value that does not parse is left out and
//! logged, never trusted. A security map is shared between images until a
//! key of it changes, so a reader can tell a change by `Arc::ptr_eq`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::coordination::{
    Coordination, CoordinationError, KeyRange, KeyValue, WatchEvent, WatchMessage,
};
use super::keys::{
    self, BrokerRegistration, ClusterIdValue, ClusterKeys, ControllerValue, SecurityKey,
};
use super::topics_image::TopicsImage;

/// Keys read per page of a snapshot.
pub const PAGE: usize = 1000;

/// A registered broker: its registration and its broker epoch (the
/// registration's create revision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredBroker {
    pub registration: BrokerRegistration,
    pub epoch: i64,
}

/// The namespace at one revision (module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    pub revision: i64,
    pub cluster_id: Option<String>,
    /// The controller and its epoch (the key's create revision).
    pub controller: Option<(ControllerValue, i64)>,
    pub brokers: BTreeMap<i32, RegisteredBroker>,
    /// Topics, their partitions' states and configs, deleted topics.
    pub topics: TopicsImage,
    /// The ACL keys (one per resource pattern), as stored.
    pub acls: Arc<StoredKeys>,
    /// The users' SCRAM credential keys, as stored.
    pub users: Arc<StoredKeys>,
    /// The dynamic broker config keys (`<default>` and per broker), as stored.
    pub broker_configs: Arc<StoredKeys>,
    /// The dynamic group config keys (one per group), as stored.
    pub group_configs: Arc<StoredKeys>,
}

/// Keys of one kind and their values as etcd holds them.
pub type StoredKeys = BTreeMap<String, StoredValue>;

/// A value as stored, with the revision a compare-and-swap compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredValue {
    pub value: Vec<u8>,
    pub mod_revision: i64,
}

impl MetadataImage {
    /// The controller's node id, -1 for none.
    pub fn controller_id(&self) -> i32 {
        self.controller.as_ref().map_or(-1, |(c, _)| c.brokerid)
    }

    /// The RUNNING brokers with their endpoint on `listener` and their
    /// rack, in node id order (a broker without such a listener is left out).
    pub fn running_on<'a>(
        &'a self,
        listener: &'a str,
    ) -> impl Iterator<Item = (i32, &'a super::keys::EndpointValue, Option<&'a String>)> + 'a {
        self.brokers.iter().filter(|(id, _)| self.is_eligible(**id)).filter_map(move |(id, b)| {
            let e = b.registration.endpoints.iter().find(|e| e.listener == listener)?;
            Some((*id, e, b.registration.rack.as_ref()))
        })
    }

    /// Broker `node_id`'s endpoint on its inter-broker listener, where
    /// other brokers reach it (with their own inter-broker listener's
    /// security, as on Kafka, where every broker names the same listener).
    ///
    /// # Errors
    /// Why there is none: not registered, or no such endpoint.
    pub fn inter_broker_endpoint(&self, node_id: i32) -> Result<(String, u16), String> {
        let b = self
            .brokers
            .get(&node_id)
            .ok_or_else(|| format!("broker {node_id} is not registered"))?;
        let r = &b.registration;
        match r.endpoints.iter().find(|e| e.listener == r.inter_broker_listener) {
            Some(e) => Ok((e.host.clone(), e.port)),
            None => Err(format!("broker {node_id}'s inter-broker listener has no endpoint")),
        }
    }

    /// Whether `node_id` may hold a leadership or an ISR place: registered
    /// and RUNNING (Kafka's unfenced, not shutting down).
    pub fn is_eligible(&self, node_id: i32) -> bool {
        self.brokers
            .get(&node_id)
            .is_some_and(|b| b.registration.state == super::keys::broker_state::RUNNING)
    }

    /// The image with one key's new value (`None`: deleted).
    fn apply(&mut self, keys: &ClusterKeys, key: &str, kv: Option<&KeyValue>) {
        if key == keys.cluster_id() {
            self.cluster_id =
                kv.and_then(|kv| parsed::<ClusterIdValue>(key, &kv.value)).map(|v| v.id);
        } else if key == keys.controller() {
            self.controller = kv.and_then(|kv| {
                parsed::<ControllerValue>(key, &kv.value).map(|v| (v, kv.create_revision))
            });
        } else if let Some(id) = keys.node_id_of(key) {
            match kv.and_then(|kv| parsed::<BrokerRegistration>(key, &kv.value).map(|r| (r, kv))) {
                Some((registration, kv)) => {
                    self.brokers
                        .insert(id, RegisteredBroker { registration, epoch: kv.create_revision });
                }
                None => {
                    self.brokers.remove(&id);
                }
            }
        } else if let Some(kind) = keys.kind_of(key) {
            self.topics.apply(key, kind, kv);
        } else if let Some(kind) = keys.security_kind(key) {
            let map = match kind {
                SecurityKey::Acls => &mut self.acls,
                SecurityKey::User => &mut self.users,
                SecurityKey::BrokerConfig => &mut self.broker_configs,
                SecurityKey::GroupConfig => &mut self.group_configs,
            };
            let map = Arc::make_mut(map);
            match kv {
                Some(kv) => {
                    let stored =
                        StoredValue { value: kv.value.clone(), mod_revision: kv.mod_revision };
                    map.insert(key.to_string(), stored);
                }
                None => {
                    map.remove(key);
                }
            }
        }
    }
}

fn parsed<T: for<'de> serde::Deserialize<'de>>(key: &str, bytes: &[u8]) -> Option<T> {
    let value = keys::parse(bytes);
    if value.is_none() {
        tracing::warn!(key, "a value in etcd does not parse; left out of the image");
    }
    value
}

/// Read the whole namespace at one revision.
///
/// # Errors
/// etcd's errors (a page whose revision was compacted meanwhile: read again).
pub async fn snapshot(
    c: &dyn Coordination,
    keys: &ClusterKeys,
) -> Result<MetadataImage, CoordinationError> {
    let prefix = format!("{}/", keys.namespace());
    let mut image = MetadataImage::default();
    let mut revision = 0;
    let mut from = prefix.clone();
    loop {
        let range = KeyRange::PrefixFrom { prefix: prefix.clone(), from: from.clone() };
        let page = c.range(range, revision, PAGE).await?;
        if revision == 0 {
            revision = page.revision;
        }
        for kv in &page.kvs {
            image.apply(keys, &kv.key, Some(kv));
        }
        match page.kvs.last() {
            Some(last) if page.more => from = format!("{}\0", last.key),
            _ => break,
        }
    }
    image.revision = revision;
    Ok(image)
}

/// Keeps a [`MetadataImage`] current (module doc) and publishes each new
/// one on a `watch` channel.
#[derive(Debug)]
pub struct ImageWatcher {
    images: watch::Receiver<Arc<MetadataImage>>,
    task: tokio::task::JoinHandle<()>,
    /// Snapshots read, the first one included.
    snapshots: Arc<AtomicU64>,
}

impl ImageWatcher {
    /// Read the first snapshot, then follow the namespace in a task.
    ///
    /// # Errors
    /// etcd's errors reading the first snapshot.
    pub async fn start(
        c: Arc<dyn Coordination>,
        keys: ClusterKeys,
        retry: Duration,
    ) -> Result<Self, CoordinationError> {
        let first = snapshot(c.as_ref(), &keys).await?;
        let (tx, images) = watch::channel(Arc::new(first));
        let snapshots = Arc::new(AtomicU64::new(1));
        let task = tokio::spawn(follow(c, keys, tx, retry, Arc::clone(&snapshots)));
        Ok(Self { images, task, snapshots })
    }

    /// Snapshots read so far (1 until the watch had to start over).
    pub fn snapshots(&self) -> u64 {
        self.snapshots.load(Ordering::Relaxed)
    }

    /// The image applied last.
    pub fn current(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.images.borrow())
    }

    /// A receiver of every new image.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.images.clone()
    }

    /// Wait until the image has applied `revision` (an admin write is
    /// answered only once the broker's own reads see it).
    pub async fn wait_for(&self, revision: i64) -> Arc<MetadataImage> {
        let mut rx = self.images.clone();
        loop {
            let image = Arc::clone(&rx.borrow_and_update());
            if image.revision >= revision {
                return image;
            }
            if rx.changed().await.is_err() {
                return image;
            }
        }
    }
}

impl Drop for ImageWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Follow the namespace from the published image's revision on, for ever.
async fn follow(
    c: Arc<dyn Coordination>,
    keys: ClusterKeys,
    tx: watch::Sender<Arc<MetadataImage>>,
    retry: Duration,
    snapshots: Arc<AtomicU64>,
) {
    let prefix = KeyRange::Prefix(format!("{}/", keys.namespace()));
    loop {
        let from = tx.borrow().revision + 1;
        let resnapshot = match c.watch(prefix.clone(), from).await {
            Ok(mut rx) => {
                let resnapshot = apply_stream(&keys, &mut rx, &tx).await;
                if !resnapshot {
                    // The watch ended (etcd lost): not again at once.
                    tokio::time::sleep(retry).await;
                }
                resnapshot
            }
            Err(e) => {
                tracing::warn!("metadata watch: {e}");
                tokio::time::sleep(retry).await;
                false
            }
        };
        if resnapshot {
            match snapshot(c.as_ref(), &keys).await {
                Ok(image) => {
                    snapshots.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(
                        revision = image.revision,
                        "metadata image read anew (etcd compacted the history watched)"
                    );
                    tx.send_replace(Arc::new(image));
                }
                Err(e) => {
                    tracing::warn!("metadata snapshot: {e}");
                    tokio::time::sleep(retry).await;
                }
            }
        }
        if tx.is_closed() {
            return;
        }
    }
}

/// Apply the watch's revisions until it ends; whether a new snapshot is needed.
async fn apply_stream(
    keys: &ClusterKeys,
    rx: &mut super::coordination::WatchReceiver,
    tx: &watch::Sender<Arc<MetadataImage>>,
) -> bool {
    while let Some(message) = rx.recv().await {
        match message {
            Ok(WatchMessage::Changes { revision, events }) => {
                let mut image = MetadataImage::clone(&tx.borrow());
                for e in &events {
                    match e {
                        WatchEvent::Put(kv) => image.apply(keys, &kv.key, Some(kv)),
                        WatchEvent::Delete(kv) => image.apply(keys, &kv.key, None),
                    }
                }
                image.revision = revision;
                tx.send_replace(Arc::new(image));
            }
            Ok(WatchMessage::Compacted { .. }) => return true,
            Err(e) => {
                tracing::warn!("metadata watch ended: {e}");
                return false;
            }
        }
    }
    false
}

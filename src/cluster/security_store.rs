//! The security stores' keys in etcd (docs/design/multi-broker.md, 3.3 and
//! 3.5): ACLs, one key per resource pattern, and SCRAM credentials, one key
//! per user, written by whichever broker serves the admin request and
//! read by every broker from its image.
//!
//! Invariants:
//! * A write compares every key it changes on the `mod_revision` the
//!   writer's image had for it (0: absent), so a change built on a stale
//!   image changes nothing and is reported as [`Written::Raced`]; the
//!   caller rebuilds it from a newer image. A change split over several
//!   transactions (below) that loses after its first one is an error
//!   saying how much was stored, never rebuilt.
//! * A write is answered only once this broker's image has applied it
//!   (the next read here sees it), or with an error after
//!   [`APPLY_TIMEOUT`].
//! * etcd takes at most [`MAX_TXN_OPS`] operations per transaction: a change
//!   of more keys goes in several, each all or nothing, in key order.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;

use super::coordination::{Compare, Coordination, CoordinationError, KeyRange, Op, Txn};
use super::image::{ImageWatcher, MetadataImage, StoredKeys};
use super::keys::ClusterKeys;

/// etcd's default `--max-txn-ops`.
pub const MAX_TXN_OPS: usize = 128;

/// How long a written change may take to reach this broker's image.
pub const APPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a lost race waits for the image to show the winner's change
/// (a deleted key's revision is not known: the retry may race again).
const RACE_WAIT: Duration = Duration::from_secs(1);

/// What a write did.
#[derive(Debug)]
pub enum Written {
    /// Stored, and applied in this image.
    Applied(Arc<MetadataImage>),
    /// A key had changed since the base image (another broker wrote it);
    /// the image has caught up with that change.
    Raced,
}

/// A change of one key: its new value, or `None` to delete it.
pub type KeyChange = (String, Option<Vec<u8>>);

/// ACL and credential keys through etcd (module doc).
#[derive(Debug)]
pub struct ClusterSecurityStore {
    coordination: Arc<dyn Coordination>,
    image: Arc<ImageWatcher>,
    keys: ClusterKeys,
    runtime: Handle,
}

impl ClusterSecurityStore {
    pub fn new(
        coordination: Arc<dyn Coordination>,
        image: Arc<ImageWatcher>,
        keys: ClusterKeys,
        runtime: Handle,
    ) -> Self {
        Self { coordination, image, keys, runtime }
    }

    pub fn keys(&self) -> &ClusterKeys {
        &self.keys
    }

    /// The image applied last.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.current()
    }

    /// Every new image.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.image.subscribe()
    }

    /// Call `install` with every new image while `owner` lives.
    pub fn follow<S: Send + Sync + 'static>(
        &self,
        owner: &Arc<S>,
        install: impl Fn(&S, &ClusterKeys, &MetadataImage) + Send + 'static,
    ) {
        let mut images = self.subscribe();
        let (owner, keys) = (Arc::downgrade(owner), self.keys.clone());
        self.runtime.spawn(async move {
            while images.changed().await.is_ok() {
                let image = Arc::clone(&images.borrow_and_update());
                let Some(owner) = owner.upgrade() else { return };
                install(&owner, &keys, &image);
            }
        });
    }

    /// Write `changes`, each compared on its revision in `base` (module
    /// doc). Blocks: call it off the async workers.
    ///
    /// # Errors
    /// etcd did not answer, refused the write, or the image did not apply
    /// it in time. A change of more than [`MAX_TXN_OPS`] keys may then be
    /// stored in part.
    pub fn write_blocking(
        &self,
        base: &StoredKeys,
        changes: Vec<KeyChange>,
    ) -> Result<Written, CoordinationError> {
        self.runtime.block_on(self.write(base, changes))
    }

    async fn write(
        &self,
        base: &StoredKeys,
        mut changes: Vec<KeyChange>,
    ) -> Result<Written, CoordinationError> {
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        let mut revision = 0;
        for (i, chunk) in changes.chunks(MAX_TXN_OPS).enumerate() {
            let txn = txn_of(base, chunk);
            let answer = self.coordination.txn(txn).await?;
            if answer.succeeded {
                revision = answer.revision;
                continue;
            }
            if i > 0 {
                // Rebuilding it would answer for a state it half made.
                let stored = i * MAX_TXN_OPS;
                return Err(CoordinationError::Unavailable(format!(
                    "another broker changed these keys meanwhile: {stored} of {} stored",
                    changes.len()
                )));
            }
            // The store's revision may be another namespace's, which this
            // image never reaches: wait for the compared keys' own changes.
            let newest = answer.reads.iter().flatten().map(|kv| kv.mod_revision).max();
            let wait = self.image.wait_for(newest.unwrap_or(0));
            let _ = tokio::time::timeout(RACE_WAIT, wait).await;
            return Ok(Written::Raced);
        }
        Ok(Written::Applied(self.applied(revision).await?))
    }

    /// Wait until the image has applied `revision`.
    async fn applied(&self, revision: i64) -> Result<Arc<MetadataImage>, CoordinationError> {
        tokio::time::timeout(APPLY_TIMEOUT, self.image.wait_for(revision))
            .await
            .ok()
            .filter(|image| image.revision >= revision)
            .ok_or_else(|| {
                CoordinationError::Unavailable(format!(
                    "the metadata image did not reach revision {revision} within {APPLY_TIMEOUT:?}"
                ))
            })
    }
}

/// One transaction: each key compared on its revision in `base`, then put
/// or deleted.
fn txn_of(base: &StoredKeys, chunk: &[KeyChange]) -> Txn {
    let compares = chunk
        .iter()
        .map(|(key, _)| {
            Compare::ModRevision(key.clone(), base.get(key).map_or(0, |v| v.mod_revision))
        })
        .collect();
    let success = chunk
        .iter()
        .map(|(key, value)| match value {
            Some(value) => Op::put(key.clone(), value.clone()),
            None => Op::Delete(KeyRange::Key(key.clone())),
        })
        .collect();
    let failure = chunk.iter().map(|(key, _)| Op::Get(KeyRange::Key(key.clone()))).collect();
    Txn { compares, success, failure }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use crate::cluster::MemCoordination;

    async fn store(c: &Arc<MemCoordination>) -> ClusterSecurityStore {
        let keys = ClusterKeys::new("/t");
        let coordination: Arc<dyn Coordination> = Arc::clone(c) as _;
        let image =
            ImageWatcher::start(Arc::clone(&coordination), keys.clone(), Duration::from_millis(10))
                .await
                .expect("image");
        ClusterSecurityStore::new(coordination, Arc::new(image), keys, Handle::current())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_on_a_stale_image_changes_nothing_and_a_large_one_is_split() {
        let c = Arc::new(MemCoordination::new(Arc::new(SystemClock)));
        let (a, b) = (store(&c).await, store(&c).await);
        let key = a.keys().user("alice/eu");
        assert_eq!(key, "/t/config/users/alice%2Feu");
        let base = a.image().users.clone();
        let put = vec![(key.clone(), Some(b"one".to_vec()))];
        let written = a.write(&base, put).await.expect("write");
        assert!(matches!(&written, Written::Applied(i) if i.users[&key].value == b"one"));
        // b has not seen it yet or has: either way its base without the key is stale.
        let raced = b.write(&base, vec![(key.clone(), Some(b"two".to_vec()))]).await;
        assert!(matches!(raced, Ok(Written::Raced)), "{raced:?}");
        assert_eq!(b.image().users[&key].value, b"one", "the race waited for the newer image");
        let fresh = b.image().users.clone();
        let written = b.write(&fresh, vec![(key.clone(), None)]).await.expect("delete");
        assert!(matches!(written, Written::Applied(i) if i.users.is_empty()));

        let many: Vec<KeyChange> = (0..300)
            .map(|i| (a.keys().acl("TOPIC", "PREFIXED", &format!("t{i}")), Some(vec![1])))
            .collect();
        let base = a.image().acls.clone();
        let written = a.write(&base, many).await.expect("300 keys");
        assert!(matches!(written, Written::Applied(i) if i.acls.len() == 300));
        assert!(a.image().acls.contains_key("/t/kafka-acl-extended/prefixed/TOPIC/t7"));
    }
}

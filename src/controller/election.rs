//! Controller election (docs/design/multi-broker.md, 4.1): each broker
//! campaigns by creating `/<ns>/controller` on its session's lease with a
//! compare that the key is absent; the one whose create lands is the
//! controller, its epoch the key's create revision (every controller write
//! compares it). The others watch the key and campaign again once it goes,
//! which happens when the controller's session ends (its lease expired or
//! was revoked at shutdown).

use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::coordination::{
    Compare, CoordinationError, KeyRange, Op, Txn, WatchEvent, WatchMessage,
};
use crate::cluster::keys::{self, ClusterKeys, ControllerValue};
use crate::cluster::session::BrokerSession;

#[derive(Debug)]
pub struct ControllerElection {
    session: Arc<BrokerSession>,
    keys: ClusterKeys,
    node_id: i32,
    broker_epoch: AtomicI64,
    /// The controller key's create revision while this broker holds it, else 0.
    epoch: AtomicI64,
    /// The lease the key was taken on: the role ends with that lease.
    held_on: AtomicI64,
    /// The controller as last read (-1: none known).
    controller_id: AtomicI32,
    /// Told when this broker becomes the controller, so the reconciler
    /// starts at once rather than at its next tick.
    became: tokio::sync::Notify,
    /// Leaders this broker elected from outside the ISR (Kafka's
    /// UncleanLeaderElectionsPerSec): the controller's automatic ones and
    /// those asked of this broker with ElectLeaders UNCLEAN.
    unclean_elections: Arc<AtomicU64>,
}

impl ControllerElection {
    pub fn new(
        session: Arc<BrokerSession>,
        keys: ClusterKeys,
        node_id: i32,
        broker_epoch: i64,
    ) -> Self {
        Self {
            session,
            keys,
            node_id,
            broker_epoch: AtomicI64::new(broker_epoch),
            epoch: AtomicI64::new(0),
            held_on: AtomicI64::new(0),
            controller_id: AtomicI32::new(-1),
            became: tokio::sync::Notify::new(),
            unclean_elections: Arc::new(AtomicU64::new(0)),
        }
    }

    /// This broker's epoch (its registration's create revision).
    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(Ordering::Acquire)
    }

    /// The broker registered anew (its last session expired).
    pub fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch.store(epoch, Ordering::Release);
    }

    /// The count of unclean leader elections this broker wrote.
    pub fn unclean_elections(&self) -> &Arc<AtomicU64> {
        &self.unclean_elections
    }

    /// Whether this broker is the controller now (the module invariant).
    pub fn is_active(&self) -> bool {
        self.epoch.load(Ordering::Acquire) > 0
            && self.held_on.load(Ordering::Acquire) == self.session.lease()
            && self.session.is_live()
    }

    fn hold(&self, epoch: i64, lease: i64) {
        self.held_on.store(lease, Ordering::Release);
        let before = self.epoch.swap(epoch, Ordering::AcqRel);
        self.controller_id.store(self.node_id, Ordering::Release);
        if before != epoch {
            // One waiter (the reconciler); a permit is kept if it is busy.
            self.became.notify_one();
        }
    }

    /// Wait until this broker becomes the controller (again).
    pub async fn became_controller(&self) {
        self.became.notified().await;
    }

    /// The controller epoch while active.
    pub fn epoch(&self) -> Option<i64> {
        self.is_active().then(|| self.epoch.load(Ordering::Acquire))
    }

    /// The controller's node id as last seen (-1: none).
    pub fn controller_id(&self) -> i32 {
        if self.is_active() {
            self.node_id
        } else {
            self.controller_id.load(Ordering::Acquire)
        }
    }

    /// One campaign: take the key if it is free. Returns the revision the
    /// key was read or written at, to watch from.
    ///
    /// # Errors
    /// etcd's errors.
    pub async fn campaign_once(&self) -> Result<i64, CoordinationError> {
        let key = self.keys.controller();
        let lease = self.session.lease();
        let value = ControllerValue {
            version: 1,
            brokerid: self.node_id,
            broker_epoch: self.broker_epoch.load(Ordering::Acquire),
        };
        let txn = Txn {
            compares: vec![Compare::CreateRevision(key.clone(), 0)],
            success: vec![Op::put_on_lease(&key, keys::to_json(&value), lease)],
            failure: vec![Op::Get(KeyRange::Key(key.clone()))],
        };
        let r = self.session.coordination().txn(txn).await?;
        if r.succeeded {
            self.hold(r.revision, lease);
            tracing::info!(
                node_id = self.node_id,
                controller_epoch = r.revision,
                "became the controller"
            );
            return Ok(r.revision);
        }
        let holder = r.reads.first().and_then(|kvs| kvs.first());
        match holder {
            // Ours from before (a campaign whose answer was lost, or etcd
            // back after an outage the lease outlived).
            Some(kv) if kv.lease == lease => self.hold(kv.create_revision, lease),
            Some(kv) => {
                self.epoch.store(0, Ordering::Release);
                let id = keys::parse::<ControllerValue>(&kv.value).map_or(-1, |v| v.brokerid);
                self.controller_id.store(id, Ordering::Release);
            }
            None => self.epoch.store(0, Ordering::Release),
        }
        Ok(r.revision)
    }

    /// Campaign, then watch the key until it goes and campaign again, for
    /// ever (the broker aborts the task at shutdown). Errors are retried
    /// after a heartbeat interval; an unanswered etcd does not end the role
    /// by itself: the session's timer does (`is_active`), and the next
    /// campaign finds whether the key is still ours.
    pub async fn run(self: Arc<Self>) {
        let retry = Duration::from_millis(self.session.config().heartbeat_interval_ms as u64);
        loop {
            let watched = match self.campaign_once().await {
                Ok(revision) => self.wait_until_gone(revision + 1).await,
                Err(e) => Err(e),
            };
            if let Err(e) = watched {
                tracing::debug!("controller election: {e}");
                tokio::time::sleep(retry).await;
            }
        }
    }

    /// Watch the controller key from `from` until it is deleted.
    async fn wait_until_gone(&self, from: i64) -> Result<(), CoordinationError> {
        let key = self.keys.controller();
        let mut rx = self.session.coordination().watch(KeyRange::Key(key), from).await?;
        while let Some(message) = rx.recv().await {
            match message? {
                WatchMessage::Changes { events, .. } => {
                    if events.iter().any(|e| matches!(e, WatchEvent::Delete(_))) {
                        if self.epoch.swap(0, Ordering::AcqRel) > 0 {
                            tracing::warn!(
                                node_id = self.node_id,
                                "no longer the controller: its key is gone"
                            );
                        }
                        self.controller_id.store(-1, Ordering::Release);
                        return Ok(());
                    }
                }
                WatchMessage::Compacted { .. } => return Ok(()),
            }
        }
        Err(CoordinationError::Unavailable("the controller watch ended".into()))
    }
}

//! `MemCoordination`: [`Coordination`] in memory, with etcd's semantics
//! (the module doc of `coordination`), for tests of everything above it:
//! revisions, compare-and-swap, leases judged by an injected clock, watches
//! from any revision not compacted, compaction, and an outage switch that
//! makes every call fail as an unreachable etcd does.
//!
//! Every revision's changes are kept (until [`MemCoordination::compact`]),
//! so a read at an old revision replays them from the compacted snapshot.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::coordination::{
    BoxFuture, Compare, Coordination, CoordinationError, KeyRange, KeyValue, Op, RangeResponse,
    Result, Txn, TxnResponse, WatchEvent, WatchMessage, WatchReceiver,
};
use crate::clock::SharedClock;

const WATCH_BUFFER: usize = 4096;

#[derive(Debug)]
pub struct MemCoordination {
    clock: SharedClock,
    store: Mutex<Store>,
}

#[derive(Debug)]
struct Lease {
    ttl_secs: i64,
    expires_ms: i64,
    keys: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct Store {
    revision: i64,
    kvs: BTreeMap<String, KeyValue>,
    /// The keys at `compacted` and every revision's changes after it.
    base: BTreeMap<String, KeyValue>,
    compacted: i64,
    history: Vec<(i64, Vec<WatchEvent>)>,
    leases: HashMap<i64, Lease>,
    next_lease: i64,
    watchers: Vec<(KeyRange, mpsc::Sender<Result<WatchMessage>>)>,
    down: bool,
}

impl MemCoordination {
    pub fn new(clock: SharedClock) -> Self {
        let store = Store { revision: 1, compacted: 1, next_lease: 0x1000, ..Default::default() };
        Self { clock, store: Mutex::new(store) }
    }

    /// Make the service unreachable (`true`) or back: while down every call
    /// is `Unavailable` and open watches end with that error. Leases keep
    /// expiring meanwhile, as etcd's do while a client cannot reach it.
    pub fn set_down(&self, down: bool) {
        let mut s = self.store.lock();
        s.down = down;
        if down {
            for (_, tx) in s.watchers.drain(..) {
                let _ = tx.try_send(Err(CoordinationError::Unavailable("down".into())));
            }
        }
    }

    /// Drop the history up to `revision`, as etcd's compaction does.
    pub fn compact(&self, revision: i64) {
        let mut s = self.store.lock();
        let revision = revision.min(s.revision);
        let state = s.state_at(revision);
        s.base = state;
        s.history.retain(|(r, _)| *r > revision);
        s.compacted = revision;
    }

    /// Compact to `revision` and end every open watch with `Compacted`, as
    /// etcd ends a watch that fell behind its compaction.
    pub fn compact_past_watchers(&self, revision: i64) {
        self.compact(revision);
        let mut s = self.store.lock();
        let compacted = s.compacted;
        for (_, tx) in s.watchers.drain(..) {
            let _ = tx.try_send(Ok(WatchMessage::Compacted { compact_revision: compacted }));
        }
    }

    /// Expire the leases whose time has come (each call does it first).
    pub fn expire_leases(&self) {
        let now = self.clock.now_ms();
        self.store.lock().expire(now);
    }

    fn call<T>(&self, f: impl FnOnce(&mut Store) -> Result<T>) -> Result<T> {
        let now = self.clock.now_ms();
        let mut s = self.store.lock();
        if s.down {
            return Err(CoordinationError::Unavailable("down".into()));
        }
        s.expire(now);
        f(&mut s)
    }
}

impl Store {
    fn expire(&mut self, now: i64) {
        let due: Vec<i64> =
            self.leases.iter().filter(|(_, l)| l.expires_ms <= now).map(|(&id, _)| id).collect();
        for id in due {
            self.revoke(id);
        }
    }

    fn revoke(&mut self, id: i64) -> bool {
        let Some(lease) = self.leases.remove(&id) else { return false };
        let ops: Vec<Op> = lease.keys.into_iter().map(|k| Op::Delete(KeyRange::Key(k))).collect();
        if !ops.is_empty() {
            let mut changes = Vec::new();
            let revision = self.revision + 1;
            for o in &ops {
                self.apply(o, revision, &mut changes, &mut Vec::new()).expect("deletes apply");
            }
            self.commit(revision, changes);
        }
        true
    }

    fn matches(&self, c: &Compare) -> bool {
        match c {
            Compare::CreateRevision(k, r) => {
                self.kvs.get(k).map_or(0, |kv| kv.create_revision) == *r
            }
            Compare::ModRevision(k, r) => self.kvs.get(k).map_or(0, |kv| kv.mod_revision) == *r,
            Compare::Value(k, v) => self.kvs.get(k).is_some_and(|kv| &kv.value == v),
        }
    }

    fn txn(&mut self, txn: &Txn) -> Result<TxnResponse> {
        let succeeded = txn.compares.iter().all(|c| self.matches(c));
        let ops = if succeeded { &txn.success } else { &txn.failure };
        for o in ops {
            if let Op::Put { lease, .. } = o {
                if *lease != 0 && !self.leases.contains_key(lease) {
                    return Err(CoordinationError::LeaseNotFound(*lease));
                }
            }
        }
        let revision = self.revision + 1;
        let (mut changes, mut reads) = (Vec::new(), Vec::new());
        for o in ops {
            self.apply(o, revision, &mut changes, &mut reads)?;
        }
        if !changes.is_empty() {
            self.commit(revision, changes);
        }
        Ok(TxnResponse { succeeded, revision: self.revision, reads })
    }

    fn apply(
        &mut self,
        o: &Op,
        revision: i64,
        changes: &mut Vec<WatchEvent>,
        reads: &mut Vec<Vec<KeyValue>>,
    ) -> Result<()> {
        match o {
            Op::Put { key, value, lease } => {
                let old = self.kvs.get(key);
                if let Some(old) = old.filter(|o| o.lease != 0 && o.lease != *lease) {
                    let old_lease = old.lease;
                    if let Some(l) = self.leases.get_mut(&old_lease) {
                        l.keys.remove(key);
                    }
                }
                let old = self.kvs.get(key);
                let kv = KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                    create_revision: old.map_or(revision, |o| o.create_revision),
                    mod_revision: revision,
                    version: old.map_or(1, |o| o.version + 1),
                    lease: *lease,
                };
                if *lease != 0 {
                    self.leases.get_mut(lease).expect("checked").keys.insert(key.clone());
                }
                self.kvs.insert(key.clone(), kv.clone());
                changes.push(WatchEvent::Put(kv));
            }
            Op::Delete(range) => {
                let doomed: Vec<String> =
                    self.kvs.keys().filter(|k| range.contains(k)).cloned().collect();
                for key in doomed {
                    let old = self.kvs.remove(&key).expect("listed");
                    if let Some(l) = self.leases.get_mut(&old.lease) {
                        l.keys.remove(&key);
                    }
                    changes.push(WatchEvent::Delete(KeyValue {
                        key,
                        value: Vec::new(),
                        create_revision: 0,
                        mod_revision: revision,
                        version: 0,
                        lease: 0,
                    }));
                }
            }
            Op::Get(range) => {
                reads.push(
                    self.kvs.values().filter(|kv| range.contains(&kv.key)).cloned().collect(),
                );
            }
        }
        Ok(())
    }

    fn commit(&mut self, revision: i64, changes: Vec<WatchEvent>) {
        self.revision = revision;
        self.watchers.retain(|(range, tx)| {
            let events: Vec<WatchEvent> =
                changes.iter().filter(|e| range.contains(&e.kv().key)).cloned().collect();
            events.is_empty() || tx.try_send(Ok(WatchMessage::Changes { revision, events })).is_ok()
        });
        self.history.push((revision, changes));
    }

    fn state_at(&self, revision: i64) -> BTreeMap<String, KeyValue> {
        let mut state = self.base.clone();
        for (_, changes) in self.history.iter().take_while(|(r, _)| *r <= revision) {
            for change in changes {
                match change {
                    WatchEvent::Put(kv) => state.insert(kv.key.clone(), kv.clone()),
                    WatchEvent::Delete(kv) => state.remove(&kv.key),
                };
            }
        }
        state
    }

    fn range(&self, range: &KeyRange, revision: i64, limit: usize) -> Result<RangeResponse> {
        if revision > self.revision {
            return Err(CoordinationError::Refused(format!(
                "revision {revision} is in the future"
            )));
        }
        if revision > 0 && revision < self.compacted {
            return Err(CoordinationError::Compacted {
                requested: revision,
                compacted: self.compacted,
            });
        }
        let at = if revision == 0 || revision == self.revision {
            self.kvs.clone()
        } else {
            self.state_at(revision)
        };
        let mut kvs: Vec<KeyValue> =
            at.into_values().filter(|kv| range.contains(&kv.key)).collect();
        let more = limit > 0 && kvs.len() > limit;
        if limit > 0 {
            kvs.truncate(limit);
        }
        Ok(RangeResponse { kvs, revision: self.revision, more })
    }

    fn watch(&mut self, range: KeyRange, from: i64) -> WatchReceiver {
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        if from > 0 && from <= self.compacted {
            let _ = tx.try_send(Ok(WatchMessage::Compacted { compact_revision: self.compacted }));
            return rx;
        }
        for (revision, changes) in self.history.iter().filter(|(r, _)| *r >= from) {
            let events: Vec<WatchEvent> =
                changes.iter().filter(|e| range.contains(&e.kv().key)).cloned().collect();
            if !events.is_empty() {
                let _ = tx.try_send(Ok(WatchMessage::Changes { revision: *revision, events }));
            }
        }
        self.watchers.push((range, tx));
        rx
    }
}

impl Coordination for MemCoordination {
    fn range(
        &self,
        range: KeyRange,
        revision: i64,
        limit: usize,
    ) -> BoxFuture<'_, Result<RangeResponse>> {
        let answer = self.call(|s| s.range(&range, revision, limit));
        Box::pin(async move { answer })
    }

    fn txn(&self, txn: Txn) -> BoxFuture<'_, Result<TxnResponse>> {
        let answer = self.call(|s| s.txn(&txn));
        Box::pin(async move { answer })
    }

    fn grant(&self, ttl_secs: i64) -> BoxFuture<'_, Result<i64>> {
        let now = self.clock.now_ms();
        let answer = self.call(|s| {
            s.next_lease += 1;
            let id = s.next_lease;
            let lease =
                Lease { ttl_secs, expires_ms: now + ttl_secs * 1000, keys: BTreeSet::new() };
            s.leases.insert(id, lease);
            Ok(id)
        });
        Box::pin(async move { answer })
    }

    fn keep_alive(&self, lease: i64) -> BoxFuture<'_, Result<i64>> {
        let now = self.clock.now_ms();
        let answer = self.call(|s| match s.leases.get_mut(&lease) {
            Some(l) => {
                l.expires_ms = now + l.ttl_secs * 1000;
                Ok(l.ttl_secs)
            }
            None => Err(CoordinationError::LeaseNotFound(lease)),
        });
        Box::pin(async move { answer })
    }

    fn revoke(&self, lease: i64) -> BoxFuture<'_, Result<()>> {
        let answer = self.call(|s| {
            s.revoke(lease);
            Ok(())
        });
        Box::pin(async move { answer })
    }

    fn watch(&self, range: KeyRange, from_revision: i64) -> BoxFuture<'_, Result<WatchReceiver>> {
        let answer = self.call(|s| Ok(s.watch(range, from_revision)));
        Box::pin(async move { answer })
    }
}

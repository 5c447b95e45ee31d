//! `Coordination`: the narrow view of etcd's v3 API the cluster uses (KV
//! ranges at a revision, multi-key compare-and-swap transactions, leases
//! and watches from a revision), in this crate's own types, so that only
//! `etcd` knows the client crate and `memory` can stand in for it in tests.
//!
//! The semantics are etcd's, which both implementations keep:
//! * every change gets the store's next revision; a transaction's changes
//!   share one;
//! * a key's `create_revision` is the revision that created it (0 for an
//!   absent key in a compare), `mod_revision` the last that changed it;
//! * a key put on a lease goes when the lease is revoked or expires, all
//!   of the lease's keys in one revision;
//! * a watch from revision R delivers every change at or after R, grouped
//!   by revision, in order; if R was compacted away it reports
//!   `Compacted` and ends.

use std::future::Future;
use std::pin::Pin;

/// A future of one coordination call.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the coordination service answered, or why it did not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordinationError {
    /// Not reachable, timed out, or failed the request: retry later.
    #[error("coordination service unavailable: {0}")]
    Unavailable(String),
    /// The requested revision is older than the compacted one.
    #[error("revision {requested} is compacted (compacted up to {compacted})")]
    Compacted { requested: i64, compacted: i64 },
    /// The lease does not exist (expired or revoked).
    #[error("lease {0:x} not found")]
    LeaseNotFound(i64),
    /// The request is malformed for the service (too large, too many
    /// operations): retrying does not help.
    #[error("coordination request refused: {0}")]
    Refused(String),
}

pub type Result<T, E = CoordinationError> = std::result::Result<T, E>;

/// A key and its value at some revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    /// Changes since it was created (1 after the create).
    pub version: i64,
    /// The lease it lives on, 0 for none.
    pub lease: i64,
}

/// A consistent read of a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeResponse {
    pub kvs: Vec<KeyValue>,
    /// The store's revision the read saw.
    pub revision: i64,
    /// More keys match than the limit returned.
    pub more: bool,
}

/// A key or every key under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRange {
    Key(String),
    Prefix(String),
    /// Keys `>= from` under `prefix` (paging through a prefix).
    PrefixFrom {
        prefix: String,
        from: String,
    },
}

impl KeyRange {
    pub fn contains(&self, key: &str) -> bool {
        match self {
            KeyRange::Key(k) => k == key,
            KeyRange::Prefix(p) => key.starts_with(p.as_str()),
            KeyRange::PrefixFrom { prefix, from } => {
                key.starts_with(prefix.as_str()) && key >= from.as_str()
            }
        }
    }
}

/// One condition of a transaction, on one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compare {
    /// The key's create revision equals this (0: the key is absent).
    CreateRevision(String, i64),
    /// The key's mod revision equals this (0: the key is absent).
    ModRevision(String, i64),
    /// The key holds exactly this value.
    Value(String, Vec<u8>),
}

/// One operation of a transaction branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Put `value` at `key`, on `lease` (0: none).
    Put { key: String, value: Vec<u8>, lease: i64 },
    /// Delete what the range names.
    Delete(KeyRange),
    /// Read what the range names (answered in `TxnResponse::reads`).
    Get(KeyRange),
}

impl Op {
    pub fn put(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Op::Put { key: key.into(), value: value.into(), lease: 0 }
    }
    pub fn put_on_lease(key: impl Into<String>, value: impl Into<Vec<u8>>, lease: i64) -> Self {
        Op::Put { key: key.into(), value: value.into(), lease }
    }
}

/// A transaction: `success` runs if every compare holds, else `failure`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    pub compares: Vec<Compare>,
    pub success: Vec<Op>,
    pub failure: Vec<Op>,
}

/// What a transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnResponse {
    pub succeeded: bool,
    /// The store's revision after it (its own, if it changed anything).
    pub revision: i64,
    /// The answers of the branch's `Get`s, in order.
    pub reads: Vec<Vec<KeyValue>>,
}

/// A change a watch reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    Put(KeyValue),
    /// The key and the revision of its deletion (`kv.mod_revision`); the
    /// value is empty.
    Delete(KeyValue),
}

impl WatchEvent {
    pub fn kv(&self) -> &KeyValue {
        match self {
            WatchEvent::Put(kv) | WatchEvent::Delete(kv) => kv,
        }
    }
}

/// What a watch delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchMessage {
    /// Every change of one revision (one transaction), never part of one.
    Changes { revision: i64, events: Vec<WatchEvent> },
    /// The watch's start was compacted away (or it fell behind etcd's
    /// compaction): read a new snapshot. The watch has ended.
    Compacted { compact_revision: i64 },
}

/// The receiving end of a watch; dropping it cancels the watch. An error
/// ends it (the service was lost): watch again from the next revision.
pub type WatchReceiver = tokio::sync::mpsc::Receiver<Result<WatchMessage>>;

/// etcd's v3 API as the cluster uses it (module doc).
pub trait Coordination: Send + Sync + std::fmt::Debug {
    /// Read `range` at `revision` (0: the latest), at most `limit` keys
    /// (0: all), in key order.
    fn range(
        &self,
        range: KeyRange,
        revision: i64,
        limit: usize,
    ) -> BoxFuture<'_, Result<RangeResponse>>;

    /// Run `txn` atomically.
    fn txn(&self, txn: Txn) -> BoxFuture<'_, Result<TxnResponse>>;

    /// A new lease of `ttl_secs`; its id.
    fn grant(&self, ttl_secs: i64) -> BoxFuture<'_, Result<i64>>;

    /// Renew `lease` once; the TTL it has again. `LeaseNotFound` when it
    /// expired or was revoked.
    fn keep_alive(&self, lease: i64) -> BoxFuture<'_, Result<i64>>;

    /// Revoke `lease`: its keys go in one revision.
    fn revoke(&self, lease: i64) -> BoxFuture<'_, Result<()>>;

    /// Watch `range` from `from_revision` on.
    fn watch(&self, range: KeyRange, from_revision: i64) -> BoxFuture<'_, Result<WatchReceiver>>;
}

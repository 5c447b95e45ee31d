//! `EtcdCoordination`: [`Coordination`] over a real etcd (v3 API, gRPC),
//! the only importer of the `etcd-client` crate.
//!
//! Every request is bounded by `request_timeout` (a lost etcd answers
//! `Unavailable`, never hangs a caller). A lease's keepalives go on one
//! stream per lease, opened at its first keepalive and reopened after an
//! error. A watch is a task that forwards etcd's responses, regrouped by
//! revision (one response may carry several), and cancels the watch when
//! its receiver is dropped.

use std::collections::HashMap;
use std::time::Duration;

use etcd_client as etcd;
use tokio::sync::{mpsc, Mutex};

use super::coordination::{
    BoxFuture, Compare, Coordination, CoordinationError, KeyRange, KeyValue, Op, RangeResponse,
    Result, Txn, TxnResponse, WatchEvent, WatchMessage, WatchReceiver,
};

/// Messages a watch may hold unread before its task waits for the reader.
const WATCH_BUFFER: usize = 256;

pub struct EtcdCoordination {
    client: etcd::Client,
    endpoints: Vec<String>,
    request_timeout: Duration,
    keepalives: Mutex<HashMap<i64, (etcd::LeaseKeeper, etcd::LeaseKeepAliveStream)>>,
}

impl std::fmt::Debug for EtcdCoordination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCoordination").field("endpoints", &self.endpoints).finish()
    }
}

/// How to reach etcd.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdSettings {
    pub endpoints: Vec<String>,
    pub connection_timeout: Duration,
    pub request_timeout: Duration,
    /// etcd's own authentication.
    pub user: Option<(String, String)>,
    /// TLS, for https endpoints.
    pub tls: Option<EtcdTls>,
}

/// The PEM files of TLS to etcd: the CA its server certificate chains to,
/// and the client certificate and key an etcd with `--client-cert-auth`
/// asks for.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdTls {
    pub ca: Vec<u8>,
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for EtcdTls {
    // The client key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTls").field("client_certificate", &self.identity.is_some()).finish()
    }
}

impl std::fmt::Debug for EtcdSettings {
    // The password never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdSettings")
            .field("endpoints", &self.endpoints)
            .field("connection_timeout", &self.connection_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("user", &self.user.as_ref().map(|(u, _)| u))
            .field("tls", &self.tls.as_ref().map(|t| t.identity.is_some()))
            .finish()
    }
}

impl EtcdCoordination {
    /// Connect to the endpoints (the client balances over them).
    ///
    /// # Errors
    /// `Unavailable` when none answers within the connection timeout.
    pub async fn connect(settings: &EtcdSettings) -> Result<Self> {
        let mut options = etcd::ConnectOptions::new()
            .with_connect_timeout(settings.connection_timeout)
            .with_timeout(settings.request_timeout)
            .with_keep_alive(Duration::from_secs(5), settings.request_timeout);
        if let Some((user, password)) = &settings.user {
            options = options.with_user(user.clone(), password.clone());
        }
        if let Some(tls) = &settings.tls {
            let mut config =
                etcd::TlsOptions::new().ca_certificate(etcd::Certificate::from_pem(&tls.ca));
            if let Some((cert, key)) = &tls.identity {
                config = config.identity(etcd::Identity::from_pem(cert, key));
            }
            options = options.with_tls(config);
        }
        let connecting = etcd::Client::connect(&settings.endpoints, Some(options));
        let client = tokio::time::timeout(settings.connection_timeout, connecting)
            .await
            .map_err(|_| unavailable("connecting timed out"))?
            .map_err(error)?;
        let this = Self {
            client,
            endpoints: settings.endpoints.clone(),
            request_timeout: settings.request_timeout,
            keepalives: Mutex::new(HashMap::new()),
        };
        // A connection is lazy: one read proves an endpoint answers.
        this.range(KeyRange::Key("/".into()), 0, 1).await?;
        Ok(this)
    }

    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, etcd::Error>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.request_timeout, call).await {
            Ok(answer) => answer.map_err(error),
            Err(_) => Err(unavailable("request timed out")),
        }
    }

    async fn keep_alive_once(&self, lease: i64) -> Result<i64> {
        self.keep_alive_stream(lease).await.map_err(|e| of_lease(e, lease))
    }

    async fn keep_alive_stream(&self, lease: i64) -> Result<i64> {
        let mut streams = self.keepalives.lock().await;
        if let std::collections::hash_map::Entry::Vacant(vacant) = streams.entry(lease) {
            let mut client = self.client.clone();
            vacant.insert(self.bounded(client.lease_keep_alive(lease)).await?);
        }
        let (keeper, stream) = streams.get_mut(&lease).expect("inserted above");
        let answered = tokio::time::timeout(self.request_timeout, async {
            keeper.keep_alive().await?;
            stream.message().await
        })
        .await;
        match answered {
            Ok(Ok(Some(r))) if r.ttl() > 0 => Ok(r.ttl()),
            Ok(Ok(Some(_))) => {
                streams.remove(&lease);
                Err(CoordinationError::LeaseNotFound(lease))
            }
            Ok(Ok(None)) => {
                streams.remove(&lease);
                Err(unavailable("keepalive stream ended"))
            }
            Ok(Err(e)) => {
                streams.remove(&lease);
                Err(error(e))
            }
            Err(_) => {
                streams.remove(&lease);
                Err(unavailable("keepalive timed out"))
            }
        }
    }

    async fn watch_from(&self, range: KeyRange, from: i64) -> Result<WatchReceiver> {
        let (key, end) = bounds(&range);
        let mut options = etcd::WatchOptions::new().with_start_revision(from);
        if let Some(end) = end {
            options = options.with_range(end);
        }
        let mut client = self.client.clone();
        let (watcher, stream) = self.bounded(client.watch(key, Some(options))).await?;
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        tokio::spawn(forward_watch(watcher, stream, tx));
        Ok(rx)
    }
}

/// Forward a watch's responses as [`WatchMessage`]s until the reader goes
/// or the watch ends.
async fn forward_watch(
    mut watcher: etcd::Watcher,
    mut stream: etcd::WatchStream,
    tx: mpsc::Sender<Result<WatchMessage>>,
) {
    loop {
        let message = tokio::select! {
            m = stream.message() => m,
            () = tx.closed() => break,
        };
        let response = match message {
            Ok(Some(r)) => r,
            Ok(None) => {
                let _ = tx.send(Err(unavailable("watch stream ended"))).await;
                break;
            }
            Err(e) => {
                let _ = tx.send(Err(error(e))).await;
                break;
            }
        };
        if response.compact_revision() > 0 {
            let compacted =
                WatchMessage::Compacted { compact_revision: response.compact_revision() };
            let _ = tx.send(Ok(compacted)).await;
            break;
        }
        if response.canceled() {
            let reason = response.cancel_reason().to_string();
            let _ = tx.send(Err(unavailable(&format!("watch canceled: {reason}")))).await;
            break;
        }
        for message in group_by_revision(response.events()) {
            if tx.send(Ok(message)).await.is_err() {
                let _ = watcher.cancel().await;
                return;
            }
        }
    }
    let _ = watcher.cancel().await;
}

/// One message per revision, in order.
fn group_by_revision(events: &[etcd::Event]) -> Vec<WatchMessage> {
    let mut out: Vec<WatchMessage> = Vec::new();
    for e in events {
        let Some(kv) = e.kv() else { continue };
        let kv = key_value(kv);
        let revision = kv.mod_revision;
        let event = match e.event_type() {
            etcd::EventType::Put => WatchEvent::Put(kv),
            etcd::EventType::Delete => WatchEvent::Delete(kv),
        };
        match out.last_mut() {
            Some(WatchMessage::Changes { revision: r, events }) if *r == revision => {
                events.push(event)
            }
            _ => out.push(WatchMessage::Changes { revision, events: vec![event] }),
        }
    }
    out
}

impl Coordination for EtcdCoordination {
    fn range(
        &self,
        range: KeyRange,
        revision: i64,
        limit: usize,
    ) -> BoxFuture<'_, Result<RangeResponse>> {
        Box::pin(async move {
            let (key, end) = bounds(&range);
            let mut options =
                etcd::GetOptions::new().with_revision(revision).with_limit(limit as i64);
            if let Some(end) = end {
                options = options.with_range(end);
            }
            let mut client = self.client.clone();
            let response = self.bounded(client.get(key, Some(options))).await?;
            Ok(RangeResponse {
                kvs: response.kvs().iter().map(key_value).collect(),
                revision: response.header().map_or(0, |h| h.revision()),
                more: response.more(),
            })
        })
    }

    fn txn(&self, txn: Txn) -> BoxFuture<'_, Result<TxnResponse>> {
        Box::pin(async move {
            let compares: Vec<etcd::Compare> = txn.compares.iter().map(compare).collect();
            let request = etcd::Txn::new()
                .when(compares)
                .and_then(txn.success.iter().map(op).collect::<Vec<_>>())
                .or_else(txn.failure.iter().map(op).collect::<Vec<_>>());
            let mut client = self.client.clone();
            let response = self.bounded(client.txn(request)).await.map_err(|e| {
                // The only lease a transaction names is a put's.
                let lease = txn.success.iter().chain(&txn.failure).find_map(|o| match o {
                    Op::Put { lease, .. } if *lease != 0 => Some(*lease),
                    _ => None,
                });
                of_lease(e, lease.unwrap_or(-1))
            })?;
            let reads = response
                .op_responses()
                .into_iter()
                .filter_map(|r| match r {
                    etcd::TxnOpResponse::Get(g) => Some(g.kvs().iter().map(key_value).collect()),
                    _ => None,
                })
                .collect();
            Ok(TxnResponse {
                succeeded: response.succeeded(),
                revision: response.header().map_or(0, |h| h.revision()),
                reads,
            })
        })
    }

    fn grant(&self, ttl_secs: i64) -> BoxFuture<'_, Result<i64>> {
        Box::pin(async move {
            let mut client = self.client.clone();
            Ok(self.bounded(client.lease_grant(ttl_secs, None)).await?.id())
        })
    }

    fn keep_alive(&self, lease: i64) -> BoxFuture<'_, Result<i64>> {
        Box::pin(self.keep_alive_once(lease))
    }

    fn revoke(&self, lease: i64) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            self.keepalives.lock().await.remove(&lease);
            let mut client = self.client.clone();
            match self.bounded(client.lease_revoke(lease)).await {
                Ok(_) | Err(CoordinationError::LeaseNotFound(_)) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    fn watch(&self, range: KeyRange, from_revision: i64) -> BoxFuture<'_, Result<WatchReceiver>> {
        Box::pin(self.watch_from(range, from_revision))
    }
}

/// etcd's key and range end for `range` (`None`: the key alone).
fn bounds(range: &KeyRange) -> (Vec<u8>, Option<Vec<u8>>) {
    match range {
        KeyRange::Key(k) => (k.as_bytes().to_vec(), None),
        KeyRange::Prefix(p) => (p.as_bytes().to_vec(), Some(prefix_end(p.as_bytes()))),
        KeyRange::PrefixFrom { prefix, from } => {
            (from.as_bytes().to_vec(), Some(prefix_end(prefix.as_bytes())))
        }
    }
}

/// The first key after every key starting with `prefix` (etcd's rule:
/// the prefix with its last byte below 0xff incremented).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte 0xff (or empty): to the end of the key space.
    vec![0]
}

fn key_value(kv: &etcd::KeyValue) -> KeyValue {
    KeyValue {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        value: kv.value().to_vec(),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        version: kv.version(),
        lease: kv.lease(),
    }
}

fn compare(c: &Compare) -> etcd::Compare {
    let eq = etcd::CompareOp::Equal;
    match c {
        Compare::CreateRevision(k, r) => etcd::Compare::create_revision(k.as_bytes(), eq, *r),
        Compare::ModRevision(k, r) => etcd::Compare::mod_revision(k.as_bytes(), eq, *r),
        Compare::Value(k, v) => etcd::Compare::value(k.as_bytes(), eq, v.clone()),
    }
}

fn op(o: &Op) -> etcd::TxnOp {
    match o {
        Op::Put { key, value, lease } => {
            let options = (*lease != 0).then(|| etcd::PutOptions::new().with_lease(*lease));
            etcd::TxnOp::put(key.as_bytes(), value.clone(), options)
        }
        Op::Delete(range) => {
            let (key, end) = bounds(range);
            etcd::TxnOp::delete(key, end.map(|e| etcd::DeleteOptions::new().with_range(e)))
        }
        Op::Get(range) => {
            let (key, end) = bounds(range);
            etcd::TxnOp::get(key, end.map(|e| etcd::GetOptions::new().with_range(e)))
        }
    }
}

fn unavailable(what: &str) -> CoordinationError {
    CoordinationError::Unavailable(what.to_string())
}

/// The kind of an etcd failure, from its gRPC status (etcd's messages are
/// stable: `etcdserver: mvcc: required revision has been compacted`,
/// `etcdserver: requested lease not found`, `etcdserver: too many
/// operations in txn request`, `etcdserver: request is too large`).
fn error(e: etcd::Error) -> CoordinationError {
    match &e {
        etcd::Error::GRpcStatus(status) => {
            let message = status.message();
            if message.contains("required revision has been compacted") {
                CoordinationError::Compacted { requested: -1, compacted: -1 }
            } else if message.contains("lease not found") {
                CoordinationError::LeaseNotFound(-1)
            } else if message.contains("too many operations")
                || message.contains("request is too large")
                || message.contains("duplicate key")
            {
                CoordinationError::Refused(message.to_string())
            } else {
                CoordinationError::Unavailable(e.to_string())
            }
        }
        etcd::Error::LeaseKeepAliveError(message) if message.contains("lease not found") => {
            CoordinationError::LeaseNotFound(-1)
        }
        _ => CoordinationError::Unavailable(e.to_string()),
    }
}

/// `e`, naming `lease` where it says the lease is gone.
fn of_lease(e: CoordinationError, lease: i64) -> CoordinationError {
    match e {
        CoordinationError::LeaseNotFound(_) => CoordinationError::LeaseNotFound(lease),
        other => other,
    }
}

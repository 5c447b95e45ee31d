//! The composition root: builds the broker's parts, starts their threads and
//! tasks, and stops them in the reverse order.
//!
//! [`run`] starts, each step needing the ones before it:
//! 1. The async runtime (`sediment-net` workers) for the network edge.
//! 2. The `LogManager` over `log.dirs`: every log recovered or, if it cannot
//!    load, taken offline (and logged).
//! 3. The transaction state manager and the group coordinator (built here,
//!    loaded in steps 7 and 8); `meta.properties`; with tiered storage on,
//!    its read side (the read cache under the first log dir and the reader
//!    of what is only in the store; nothing is asked of the store yet).
//! 4. The `LogCleaner` threads, given all three (its collaborators): the
//!    first names the transactional id of an open transaction that holds
//!    cleaning back, the second gives the resurrection guard the groups'
//!    committed offsets, the third shows the store's part of tiered
//!    partitions. Then the log scheduler thread, given the cleaner's control
//!    (retention stops a clean of a log it deletes from).
//! 5. The SCRAM credential store; every Kafka listener of `listeners` is
//!    bound (all or none: a failed bind, or an SSL listener whose key or
//!    trust store does not load, fails the start).
//! 6. With tiered storage on, the store is reached and claimed for this
//!    cluster (a store that does not answer, refuses the credentials or is
//!    another cluster's fails the start) and its manager built with the
//!    store cleaner (which shares the cleaner pool's budget and throttle);
//!    then [`KafkaApis`] is built for the listeners' advertised endpoints
//!    (the producer id block, the ACLs, the transaction coordinator).
//! 7. The `group-loader` thread, rebuilding the groups from
//!    `__consumer_offsets`; group requests answer COORDINATOR_LOAD_IN_PROGRESS
//!    until it is done.
//! 8. The `txn-coordinator` thread (`txn::TxnScheduler`): it loads
//!    `__transaction_state`, completes the transactions found decided, then
//!    runs the transaction timers; transaction requests answer
//!    COORDINATOR_LOAD_IN_PROGRESS until its load is done.
//! 9. The metrics endpoint (when `metrics.listen` is set); "sediment started"
//!    is logged; the group ticker; the server (with a TLS store reloader per
//!    SSL listener), until `shutdown` completes.
//!
//! and stops:
//! 1. The server stops accepting and drains its connections, each finishing the
//!    request it is handling (`server::run`).
//! 2. The ticker and the tiered storage uploader are aborted (an upload cut
//!    short leaves objects the sweep removes) and the metrics endpoint stopped.
//! 3. The `txn-coordinator` thread is stopped and joined (a load or a
//!    timer's round in progress ends first), then the `group-loader` thread. It reads `__consumer_offsets` up to
//!    the end it saw when it started and then returns, so this waits at most
//!    for the rest of that read (long only for a large, uncompacted topic
//!    right after a start).
//! 4. The cleaner threads are stopped and joined; a clean in progress is
//!    cancelled and leaves no output.
//! 5. The log scheduler is joined, every log flushed and the checkpoints and
//!    the clean-shutdown marker written, so the next start skips recovery;
//!    "sediment stopped" is logged.
//!
//! A failed start after the logs loaded closes them cleanly: once the
//! cleaner runs (start step 4), by the stop steps for what it started.
//!
//! [`KafkaApis`] (in `api`) is what every request handler gets: the broker's
//! identity, config and managers, built here once, complete ([`build_apis`]).
//! Every part is built before what needs it and passed to it: the group
//! coordinator, the transaction state and tiered storage's read side before
//! the cleaner (its [`CleanerCollaborators`]), the cleaner before the log
//! scheduler and the store cleaner, the credential store before the SASL
//! listeners, tiered storage before `KafkaApis`. Nothing is patched in
//! after construction.

mod cluster_member;
mod coordinators;
mod group_offsets;
mod isr_writer;
mod metadata_publisher;
mod metrics_endpoint;
mod replication;
mod txn_routing;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::api::KafkaApis;
use crate::cleaner::collaborators::TieredStore;
use crate::cleaner::{CleanerCollaborators, LogCleaner, LogCleanerError, LogCleanerHandle};
use crate::cluster::keys::EndpointValue;
use crate::cluster::peers::BrokerChannels;
use crate::cluster::ClusterConfig;
use crate::config::dynamic::{DynamicBrokerConfig, DynamicConfigError};
use crate::config::{BrokerConfig, ConfigError, Listener};
use crate::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::log::manager::CleaningControl;
use crate::log::meta_properties::MetaProperties;
use crate::log::producer_id_manager::ProducerIdManager;
use crate::log::{LogError, LogManager};
use crate::metrics::access::{AuditAuthorizer, EndpointAccess};
use crate::metrics::{Metrics, MetricsError, RequestMetrics};
use crate::remote::cache::{SegmentCache, CACHE_DIR};
use crate::remote::cleaner_view::TieredStoreView;
use crate::remote::read_stats::RemoteReadStats;
use crate::remote::reader::RemoteLogReader;
use crate::remote::store_cleaner::StoreCleaner;
use crate::remote::{RemoteLogManager, RemoteStats, RemoteStorageConfig};
use crate::replica::fetch_session::{self, FetchSessionCache};
use crate::replica::Leadership;
use crate::replica::ReplicaManager;
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::acl_store::AclStore;
use crate::security::authorizer::{AuthorizationResult, Requester};
use crate::security::credentials::CredentialStore;
use crate::security::store::StoreError;
use crate::security::tls::LiveTlsConfig;
use crate::security::SecurityProtocol;
use crate::server::tls_reloader::TlsWatch;
use crate::server::{BoundListener, ListenerTls};
use crate::txn::{TransactionStateManager, TxnScheduler, TRANSACTION_STATE_TOPIC};
use cluster_member::{ClusterMember, Identity};
use coordinators::{group_coordinator, spawn_group_loader, transaction_coordinator};
use group_offsets::GroupOffsets;
use replication::Replication;

use crate::group::group_config_manager::GroupConfigManager;

fn store_error(e: StoreError) -> LogError {
    match e {
        StoreError::Io { path, source } => LogError::Io { path, source },
        StoreError::Damaged { path, reason } => LogError::Corrupt { path, position: 0, reason },
        // Only a cluster's writes reach etcd; opening a store never does.
        StoreError::Unavailable(reason) => {
            LogError::Offline { partition: "security store".into(), reason }
        }
    }
}

/// What [`build_apis`] is given that the start-up built before it: the
/// parts the cleaner, the listeners or tiered storage needed first.
pub struct ApisParts {
    /// The group coordinator (the cleaner's resurrection guard reads its
    /// offsets, so it is built before the cleaner).
    pub groups: Arc<GroupCoordinator>,
    /// SCRAM credentials (the SASL listeners look users up in it).
    pub scram: Arc<CredentialStore>,
    pub dynamic: Option<Arc<DynamicBrokerConfig>>,
    pub cleaner: Option<Arc<LogCleanerHandle>>,
    pub remote_reader: Option<Arc<RemoteLogReader>>,
    /// In a cluster, the partitions led here (set by the metadata publisher).
    pub leadership: Option<Arc<Leadership>>,
    /// In a cluster, the connections to the other brokers for markers and
    /// verification.
    pub peers: Option<Arc<BrokerChannels>>,
}

/// Build what every handler runs against: the producer id block in the first
/// log dir, the ACL store, the transaction coordinator (over `txn_state`,
/// which the cleaner was given before), the fetch sessions, and `parts`.
/// Nothing is loaded: [`run`] starts the `group-loader` and `txn-coordinator`
/// threads for that.
///
/// # Errors
/// I/O errors reading or creating the producer id file or the ACL store.
pub fn build_apis(
    config: BrokerConfig,
    logs: Arc<LogManager>,
    (cluster_id, advertised): (String, Vec<(String, Listener)>),
    txn_state: Arc<TransactionStateManager>,
    parts: ApisParts,
) -> Result<KafkaApis, LogError> {
    let first = first_log_dir(&config);
    // An id the logs already carry is never issued again, even if the block
    // file was lost.
    let max_pid = logs
        .all_logs()
        .iter()
        .filter_map(|(_, log)| log.read().producer_state().max_producer_id())
        .max()
        .map_or(0, |m| m + 1);
    let producer_ids = ProducerIdManager::load(&first, max_pid)?;
    let acls = match config.authorizer() {
        Some(authorizer) => {
            Some(Arc::new(AclStore::open(&first, authorizer).map_err(store_error)?))
        }
        None => None,
    };
    let producer_ids = Arc::new(Mutex::new(producer_ids));
    let request_metrics = RequestMetrics::new();
    // A session holds at most what one request frame can name.
    let fetch_sessions = FetchSessionCache::new(
        config.max_incremental_fetch_session_cache_slots(),
        fetch_session::EVICTION_MS,
        config.socket_request_max_bytes() / fetch_session::MIN_PARTITION_BYTES,
        request_metrics.fetch_sessions.clone(),
    );
    let replica = ReplicaManager::new(
        Arc::clone(&logs),
        fetch_sessions,
        parts.remote_reader,
        config.num_io_threads(),
    );
    // The throttles' bounds are dynamic: the layers in force now.
    let effective = parts.dynamic.as_ref().map(|d| d.current());
    let replica = replica.with_quotas(effective.as_ref().unwrap_or(&config));
    let replica = Arc::new(replica.with_leadership(parts.leadership));
    let (txn, markers) = transaction_coordinator(
        txn_state,
        &logs,
        &producer_ids,
        (&replica, parts.peers),
        &parts.groups,
    );
    Ok(KafkaApis {
        node_id: config.node_id(),
        config,
        logs,
        cluster_id,
        advertised,
        groups: parts.groups,
        txn,
        markers,
        producer_ids,
        request_metrics,
        scram: parts.scram,
        acls,
        dynamic: parts.dynamic,
        cleaner: parts.cleaner,
        replica,
        cluster: None,
        topics: None,
        replication_control: None,
    })
}

/// [`build_apis`] for a broker with no cleaner, dynamic configs or tiered
/// storage (the fuzz target): `meta.properties` read or created in every log
/// dir, a group coordinator and the credential store built here.
///
/// # Errors
/// I/O errors of `meta.properties`, the stores and the producer id file.
pub fn standalone_apis(
    config: BrokerConfig,
    logs: Arc<LogManager>,
    advertised: Vec<(String, Listener)>,
    txn_state: Arc<TransactionStateManager>,
) -> Result<KafkaApis, LogError> {
    let meta = MetaProperties::load_or_create(&config.log_dirs(), config.node_id())?;
    let groups = group_coordinator(&config, &logs);
    let scram = Arc::new(CredentialStore::open(&first_log_dir(&config)).map_err(store_error)?);
    groups.use_group_configs(open_group_configs(&config)?);
    let parts = ApisParts {
        groups,
        scram,
        dynamic: None,
        cleaner: None,
        remote_reader: None,
        leadership: None,
        peers: None,
    };
    build_apis(config, logs, (meta.cluster_id, advertised), txn_state, parts)
}

/// The first log dir: where the broker-wide files live (producer ids,
/// credentials, ACLs, the tiered storage cache).
/// The groups' own configs, kept in the first log dir (a cluster moves
/// them to etcd once joined).
fn open_group_configs(config: &BrokerConfig) -> Result<Arc<GroupConfigManager>, LogError> {
    let dir = first_log_dir(config);
    Ok(Arc::new(GroupConfigManager::open(&dir, config.group_config()).map_err(store_error)?))
}

fn first_log_dir(config: &BrokerConfig) -> PathBuf {
    config.log_dirs().first().cloned().unwrap_or_else(|| PathBuf::from("data"))
}

/// The authorizer's answer for `/key-audit`: DESCRIBE on the topic, and
/// the internal topics (whose keys name every group and transactional id)
/// to super users only.
#[derive(Debug)]
struct AclAuditAuthorizer(Arc<AclStore>);

impl AuditAuthorizer for AclAuditAuthorizer {
    fn may_audit(&self, principal: &str, peer: std::net::IpAddr, topic: &str) -> bool {
        let Ok(principal) = crate::security::acl::parse_principal(principal) else { return false };
        let authorizer = self.0.authorizer();
        if topic == OFFSETS_TOPIC || topic == TRANSACTION_STATE_TOPIC {
            return authorizer.is_super_user(&principal);
        }
        let requester = Requester::new(principal, peer);
        let describe =
            authorizer.authorize(&requester, AclOperation::Describe, ResourceType::Topic, topic);
        describe == AuthorizationResult::Allowed
    }
}

/// Why the broker could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
    #[error("locking the log dirs")]
    Locked(#[source] crate::log::dir_lock::DirLockError),
    #[error("opening the log dirs")]
    OpenLogs(#[source] LogError),
    #[error("starting the log cleaner")]
    StartCleaner(#[source] LogCleanerError),
    #[error("reading the dynamic broker configs")]
    Dynamic(#[source] DynamicConfigError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("binding {addr}")]
    Bind { addr: String, source: std::io::Error },
    #[error("binding the metrics endpoint {addr} (metrics.listen)")]
    BindMetrics { addr: String, source: std::io::Error },
    #[error("reading the address of a bound listener")]
    LocalAddr(#[source] std::io::Error),
    #[error("initialising the broker")]
    Init(#[source] LogError),
    #[error("starting the {name} thread")]
    Spawn { name: &'static str, source: std::io::Error },
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error("flushing logs on shutdown")]
    Shutdown(#[source] LogError),
    #[error("tiered storage: {0}")]
    Remote(#[source] crate::remote::RemoteError),
    #[error("joining the cluster: {0}")]
    Cluster(#[source] crate::cluster::registration::JoinError),
}

/// Run a broker on `config` until `shutdown` completes, then stop it (the
/// steps are in the module doc).
///
/// # Errors
/// The first start step that failed, else a failure to flush the logs on the
/// way down.
pub fn run(config: BrokerConfig, shutdown: impl Future<Output = ()>) -> Result<(), BrokerError> {
    // Test-only crash points (`FAILPOINTS`), before anything can reach one.
    crate::failpoint::configure_from_env();
    // Declared first so they are released last, after the runtime and every
    // thread that writes the dirs.
    let _locks =
        crate::log::dir_lock::DirLocks::acquire(&config.log_dirs()).map_err(BrokerError::Locked)?;
    // Declared before the logs so it is dropped after every thread that uses it.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sediment-net")
        .build()
        .map_err(BrokerError::Runtime)?;
    let clock = crate::clock::system();
    // The dynamic layers over the file, in force from the start.
    let dynamic =
        Arc::new(DynamicBrokerConfig::open(config.clone()).map_err(BrokerError::Dynamic)?);
    let effective = dynamic.current();
    // Before the logs open: each of their segments holds descriptors.
    let open_files = raise_open_files_limit();
    let mut log_config = effective.log_manager_config();
    log_config.partitions_placed_by_cluster =
        ClusterConfig::from_values(&config).map_err(ConfigError::from)?.is_some();
    let logs =
        Arc::new(LogManager::open(log_config, Arc::clone(&clock)).map_err(BrokerError::OpenLogs)?);
    for (tp, reason) in logs.offline_partitions() {
        tracing::error!(partition = %tp, "partition offline: {reason}");
    }
    log_open_files_needed(&logs, open_files);
    // Built before the cleaner, which names open transactions by it; loaded
    // later, by the `txn-coordinator` thread.
    let txn_state = Arc::new(TransactionStateManager::new(
        config.transaction_config(),
        Arc::clone(&logs),
        Arc::clone(&clock),
    ));
    // Built before the cleaner too: its resurrection guard reads the groups'
    // committed offsets (loaded later, by the `group-loader` thread).
    let groups = group_coordinator(&config, &logs);
    let (meta, tiered) = match identity_and_tiered(&config, &runtime) {
        Ok(parts) => parts,
        Err(e) => {
            // Nothing was written since the logs loaded: close them cleanly.
            if let Err(shut) = logs.shutdown() {
                tracing::error!(error = %shut, "closing the logs after a failed start");
            }
            return Err(e);
        }
    };
    // In a cluster, every coordinator's groups (told of the peers once joined).
    let group_offsets = Arc::new(GroupOffsets::new(groups.clone()));
    let collaborators = CleanerCollaborators {
        producer_ids: Some(txn_state.clone()),
        consumer_offsets: Some(group_offsets.clone()),
        tiered_store: tiered.as_ref().map(|t| t.view.clone()),
    };
    let mut cleaner =
        LogCleaner::start(effective.cleaner_config(), Arc::clone(&logs), clock, collaborators)
            .map_err(BrokerError::StartCleaner)?;
    // Retention stops the cleaner's cleans of a log it deletes from.
    let cleaning: Arc<dyn CleaningControl> = cleaner.handle().manager().clone();
    logs.start_scheduler(Some(cleaning));
    let mut threads = CoordinatorThreads::default();
    let started = Started { meta, coordinators: (txn_state, groups), tiered, group_offsets };
    let served = runtime.block_on(serve(dynamic, &logs, started, &cleaner, &mut threads, shutdown));
    // The server has drained: nothing reads the logs on a client's behalf any more.
    if let Some(txn) = threads.txn {
        txn.shutdown();
    }
    if let Some(loader) = threads.group_loader {
        if loader.join().is_err() {
            tracing::error!("the group-loader thread panicked");
        }
    }
    cleaner.shutdown();
    let shut = logs.shutdown().map_err(BrokerError::Shutdown);
    tracing::info!("sediment stopped");
    served.and(shut)
}

/// Raise the soft limit on open files to the hard one (each segment holds
/// up to four: `.log`, `.index`, `.timeindex`, `.txnindex`, besides the
/// connections); returns the limit in force, and the one before (`None`
/// when it cannot be read).
fn raise_open_files_limit() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit write and read only `limit`, ours.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if got != 0 {
        tracing::warn!("reading the open files limit failed: {}", std::io::Error::last_os_error());
        return None;
    }
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            limit.rlim_cur = before;
        }
    }
    Some((limit.rlim_cur, before))
}

/// Log the open files limit and what the loaded segments need of it, so an
/// operator sees a limit too low before it bites.
fn log_open_files_needed(logs: &LogManager, limit: Option<(u64, u64)>) {
    let Some((limit, before)) = limit else { return };
    let segments: usize = logs.all_logs().iter().map(|(_, log)| log.read().segments().len()).sum();
    let needed = segments.saturating_mul(4) as u64;
    tracing::info!(limit, raised_from = before, segments, segment_files = needed, "open files");
    if limit < needed.saturating_add(1024) {
        tracing::warn!(limit, segment_files = needed, "the open files limit leaves little room for connections beside the segments; raise the hard limit (ulimit -Hn, LimitNOFILE=)");
    }
}

/// `meta.properties` (read, or written on first start) and, with tiered
/// storage on, its read side: both before the cleaner, which shows the
/// store's part of tiered partitions.
fn identity_and_tiered(
    config: &BrokerConfig,
    runtime: &tokio::runtime::Runtime,
) -> Result<(MetaProperties, Option<TieredParts>), BrokerError> {
    let meta = MetaProperties::load_or_create(&config.log_dirs(), config.node_id())
        .map_err(BrokerError::Init)?;
    let _entered = runtime.enter();
    Ok((meta, open_tiered(config)?))
}

/// What [`run`] built before the cleaner that [`serve`] goes on with.
struct Started {
    meta: MetaProperties,
    coordinators: (Arc<TransactionStateManager>, Arc<GroupCoordinator>),
    tiered: Option<TieredParts>,
    /// What the resurrection guard reads.
    group_offsets: Arc<GroupOffsets>,
}

/// The coordinators' threads, stopped by [`run`] after the server drained.
#[derive(Default)]
struct CoordinatorThreads {
    group_loader: Option<JoinHandle<()>>,
    txn: Option<TxnScheduler>,
}

/// Start steps 4 to 7 and stop steps 1 and 2. The coordinator threads, once
/// started, are left in `threads` for the caller to stop, also when a later
/// step fails.
async fn serve(
    dynamic: Arc<DynamicBrokerConfig>,
    logs: &Arc<LogManager>,
    started: Started,
    cleaner: &LogCleaner,
    threads: &mut CoordinatorThreads,
    shutdown: impl Future<Output = ()>,
) -> Result<(), BrokerError> {
    let config = dynamic.static_config().clone();
    // SCRAM exchanges look users up in it: opened before the listeners.
    let scram = CredentialStore::open(&first_log_dir(&config)).map_err(store_error);
    let scram = Arc::new(scram.map_err(BrokerError::Init)?);
    let (bound, advertised) = bind_listeners(&config, &scram).await?;
    let metrics_listen = config.metrics_listen();
    let Started { meta, coordinators: (txn_state, groups), tiered, group_offsets } = started;
    groups.use_group_configs(open_group_configs(&config).map_err(BrokerError::Init)?);
    // Before anything uses the cluster id: a broker without data takes the cluster's.
    let (meta, member) = join_cluster(&config, meta, &advertised, logs).await?;
    // Tiered storage: the store must answer and be this cluster's before anything is served.
    let identity = (meta.cluster_id.as_str(), config.node_id());
    let (remote, remote_reader) = match tiered {
        Some(t) => {
            let reader = Arc::clone(&t.reader);
            (Some(start_remote(t, logs, identity, cleaner.handle()).await?), Some(reader))
        }
        None => (None, None),
    };
    let leadership = member.as_ref().map(|m| m.leadership());
    if let Some(m) = &member {
        group_offsets.use_cluster(config.node_id(), m.peers());
    }
    if let (Some(remote), Some(m)) = (&remote, &member) {
        m.upload_only_led(remote);
    }
    let parts = ApisParts {
        groups,
        scram,
        dynamic: Some(dynamic),
        cleaner: Some(Arc::clone(cleaner.handle())),
        remote_reader,
        leadership: leadership.clone(),
        peers: member.as_ref().map(|m| m.peers()),
    };
    let identity = (meta.cluster_id, advertised.clone());
    let mut broker = build_apis(config, Arc::clone(logs), identity, txn_state, parts)
        .map_err(BrokerError::Init)?;
    if let Some(m) = &member {
        m.attach(&mut broker).map_err(|e| BrokerError::Init(store_error(e)))?;
    }
    let broker = Arc::new(broker);
    let replication = match (&member, leadership) {
        (Some(m), Some(l)) => Some(Replication::start(&broker, m, l, cleaner)),
        _ => None,
    };
    if member.is_none() {
        // In a cluster, shards load as their partitions' leadership comes.
        threads.group_loader = Some(spawn_group_loader(&broker.groups)?);
    }
    threads.txn = Some(
        TxnScheduler::start(Arc::clone(&broker.txn))
            .map_err(|source| BrokerError::Spawn { name: "txn-coordinator", source })?,
    );
    let metrics = match metrics_listen {
        Some(addr) => Some(
            metrics_endpoint::start_metrics(
                &addr,
                &broker,
                cleaner,
                remote.as_ref(),
                member.as_ref(),
            )
            .await?,
        ),
        None => None,
    };
    // The first listener's addresses, as before there were several (scripts
    // and tests read `listening=`); each listener's are in its own line above.
    let (first, first_bound) = (&advertised[0].1, bound[0].1);
    let advertised = format!("{}:{}", first.host, first.port);
    let cluster_id = &broker.cluster_id;
    tracing::info!(listening = %first_bound, %advertised, %cluster_id, "sediment started");
    let ticker = crate::group::spawn_ticker(Arc::clone(&broker.groups));
    let uploader = remote.as_ref().map(|r| Arc::clone(r).spawn());
    let listeners = bound.into_iter().map(|(l, _)| l).collect();
    // A clean stop moves this broker's leaderships away while it still serves.
    let shutdown = async {
        shutdown.await;
        if let Some(m) = &member {
            m.controlled_shutdown().await;
        }
    };
    crate::server::run(listeners, broker, shutdown).await;
    if let Some(member) = &member {
        member.leave().await;
    }
    if let Some(replication) = replication {
        replication.stop();
    }
    ticker.abort();
    // Every step of an upload round is safe to cut (remote module doc).
    if let Some(uploader) = uploader {
        uploader.abort();
    }
    if let Some(remote) = &remote {
        remote.stop();
    }
    if let Some(metrics) = metrics {
        metrics.stop().await;
    }
    Ok(())
}

/// With `sediment.cluster.etcd.endpoints` set, join the cluster (its
/// registration names the advertised endpoints); a single node joins none.
async fn join_cluster(
    config: &BrokerConfig,
    meta: MetaProperties,
    advertised: &[(String, Listener)],
    logs: &LogManager,
) -> Result<(MetaProperties, Option<Arc<ClusterMember>>), BrokerError> {
    let Some(cluster) = ClusterConfig::from_values(config).map_err(ConfigError::from)? else {
        return Ok((meta, None));
    };
    let protocols: std::collections::HashMap<String, SecurityProtocol> =
        config.listeners()?.into_iter().map(|l| (l.name, l.protocol)).collect();
    let endpoints = advertised
        .iter()
        .map(|(name, l)| EndpointValue {
            listener: name.clone(),
            host: l.host.clone(),
            port: l.port,
            security_protocol: protocols.get(name).map_or("PLAINTEXT", |p| p.name()).to_string(),
        })
        .collect();
    let channel_security = config.channel_security()?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let dir = first_log_dir(config);
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let who = Identity {
        node_id: config.node_id(),
        cluster_id: &meta.cluster_id,
        may_adopt: logs.topics().is_empty(),
        directory_id: format!("{}:{}", host.trim(), dir.display()),
        endpoints,
        rack: config
            .get(crate::cluster::config::BROKER_RACK.name)
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty()),
        inter_broker_listener: channel_security.listener.clone(),
        channel_security,
    };
    let member = ClusterMember::join(&cluster, who, Arc::clone(logs.clock()))
        .await
        .map_err(BrokerError::Cluster)?;
    let meta = if member.cluster_id == meta.cluster_id {
        meta
    } else {
        MetaProperties::rewrite(&config.log_dirs(), config.node_id(), &member.cluster_id)
            .map_err(BrokerError::Init)?
    };
    Ok((meta, Some(Arc::new(member))))
}

/// Bind every Kafka listener of `listeners` (all or none), each with its TLS
/// config and SASL settings: the bound listeners with their local addresses,
/// and each one's advertised endpoint.
async fn bind_listeners(
    config: &BrokerConfig,
    scram: &Arc<CredentialStore>,
) -> Result<(Vec<(BoundListener, SocketAddr)>, Vec<(String, Listener)>), BrokerError> {
    let mut bound = Vec::new();
    let mut advertised = Vec::new();
    for l in config.listeners()? {
        // Built before binding: a key store that does not load fails the start.
        let tls = match l.protocol {
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
                let (loaded, settings) = config.tls_config(&l.name)?;
                let (interval, allow_dn_changes, allow_san_changes) = config.ssl_reload(&l.name);
                Some(ListenerTls {
                    live: Arc::new(LiveTlsConfig::new(loaded)),
                    principal_mapper: Arc::new(config.principal_mapper(&l.name)),
                    handshake_timeout: config.ssl_handshake_timeout(&l.name),
                    reload: TlsWatch { settings, interval, allow_dn_changes, allow_san_changes },
                })
            }
            _ => None,
        };
        let sasl = match l.protocol {
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => {
                let mut sasl = config.sasl_listener(&l.name)?;
                sasl.scram = Some(Arc::clone(scram) as _);
                Some(Arc::new(sasl))
            }
            _ => None,
        };
        let addr = config.bind_addr(&l)?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| BrokerError::Bind { addr: addr.to_string(), source })?;
        let local = listener.local_addr().map_err(BrokerError::LocalAddr)?;
        let endpoint = config.advertised(&l, local.port())?;
        let shown = format!("{}:{}", endpoint.host, endpoint.port);
        tracing::info!(listener = %l.name, protocol = %l.protocol, bound = %local, advertised = %shown, "listener bound");
        advertised.push((l.name.clone(), endpoint));
        let (name, protocol) = (l.name, l.protocol);
        bound.push((BoundListener { name, protocol, listener, tls, sasl }, local));
    }
    Ok((bound, advertised))
}

/// Tiered storage's read side, built before the cleaner: the read cache
/// (under the first log dir), the reader of what is only in the store, and
/// the cleaner's view of both.
struct TieredParts {
    config: RemoteStorageConfig,
    stats: Arc<RemoteStats>,
    cache: Arc<SegmentCache>,
    reader: Arc<RemoteLogReader>,
    view: Arc<dyn TieredStore>,
}

/// With tiered storage on, its read side (nothing is asked of the store
/// yet; [`start_remote`] claims it). Called inside the runtime, whose
/// handle the view keeps.
fn open_tiered(config: &BrokerConfig) -> Result<Option<TieredParts>, BrokerError> {
    let Some(rc) = RemoteStorageConfig::from_values(config).map_err(ConfigError::from)? else {
        return Ok(None);
    };
    let store = rc.open().map_err(BrokerError::Remote)?;
    let stats = Arc::new(RemoteStats::default());
    let cache = SegmentCache::open(
        &first_log_dir(config).join(CACHE_DIR),
        rc.cache_bytes,
        store.clone(),
        Arc::clone(&stats),
        RemoteReadStats::default(),
    )
    .map_err(BrokerError::Remote)?;
    let reader = RemoteLogReader::new(store, Arc::clone(&cache))
        .with_fetch_max_wait(std::time::Duration::from_millis(rc.fetch_max_wait_ms))
        .with_list_offsets_timeout(std::time::Duration::from_millis(rc.list_offsets_timeout_ms));
    let reader = Arc::new(reader);
    // cleaner-status, the gauges and the key audit show the store's part.
    let runtime = tokio::runtime::Handle::current();
    let view = Arc::new(TieredStoreView::new(Arc::clone(&stats), Arc::clone(&reader), runtime));
    Ok(Some(TieredParts { config: rc, stats, cache, reader, view }))
}

/// Reach and claim the store, and start the manager that uploads to it;
/// with the cleaner on, it also cleans the store-only segments of compacted
/// topics with the cleaner pool's share of the dedupe budget and its I/O
/// throttle.
async fn start_remote(
    tiered: TieredParts,
    logs: &Arc<LogManager>,
    identity: (&str, i32),
    cleaner: &Arc<LogCleanerHandle>,
) -> Result<Arc<RemoteLogManager>, BrokerError> {
    let store_cleaner = if cleaner.config().enable {
        let store_cleaner = StoreCleaner::new(tiered.cache, Arc::clone(cleaner));
        Some(store_cleaner.map_err(BrokerError::Remote)?)
    } else {
        None
    };
    let logs = Arc::clone(logs);
    RemoteLogManager::start(tiered.config, logs, identity, tiered.stats, store_cleaner)
        .await
        .map_err(BrokerError::Remote)
}

/// The running metrics endpoint and what stops it.
struct MetricsEndpoint {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsEndpoint {
    async fn start(
        addr: &str,
        metrics: Metrics,
        access: EndpointAccess,
    ) -> Result<Self, BrokerError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| BrokerError::BindMetrics { addr: addr.to_string(), source })?;
        let local = listener.local_addr().map_err(BrokerError::LocalAddr)?;
        let metrics_listening = local;
        tracing::info!(%metrics_listening, "metrics endpoint: /metrics and /cleaner-status");
        let (stop, stopped) = oneshot::channel::<()>();
        let stopped = async {
            let _ = stopped.await;
        };
        let task =
            tokio::spawn(crate::metrics::serve(listener, Arc::new(metrics), access, stopped));
        Ok(Self { stop, task })
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

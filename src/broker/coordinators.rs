//! The coordinators a broker runs, built once by the composition root: the
//! group coordinator, the transaction coordinator with its marker writer
//! (in a cluster routed to each partition's leader, `txn_routing`), the
//! listener that hands markers on `__consumer_offsets` to the groups, and
//! the single node's `group-loader` thread.

use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use super::txn_routing::{ClusterMarkerWriter, ClusterTxnVerifier};
use super::BrokerError;
use crate::cluster::peers::BrokerChannels;
use crate::config::BrokerConfig;
use crate::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::log::producer_id_manager::ProducerIdManager;
use crate::log::{LogManager, TopicPartition};
use crate::replica::coordinator_writes::ReplicatedCoordinatorWrites;
use crate::replica::ReplicaManager;
use crate::txn::{
    AppendedHook, LogMarkerWriter, ProducerIdGenerator, TransactionCoordinator,
    TransactionMarkerWriter, TransactionStateManager, TxnCompletionListener,
};

pub(super) fn group_coordinator(
    config: &BrokerConfig,
    logs: &Arc<LogManager>,
) -> Arc<GroupCoordinator> {
    Arc::new(GroupCoordinator::new(config.group_config(), Arc::clone(logs), logs.clock().clone()))
}

/// The transaction coordinator over `state` and `logs`, and the marker
/// writer it writes markers into them with (each marker wakes fetches, as it
/// moves the last stable offset). In a cluster (`peers`) its markers go to
/// each partition's leader and ids coordinated elsewhere are verified
/// there (`txn_routing`).
pub(super) fn transaction_coordinator(
    state: Arc<TransactionStateManager>,
    logs: &Arc<LogManager>,
    producer_ids: &Arc<Mutex<ProducerIdManager>>,
    (replica, peers): (&Arc<ReplicaManager>, Option<Arc<BrokerChannels>>),
    groups: &Arc<GroupCoordinator>,
) -> (Arc<TransactionCoordinator>, Arc<LogMarkerWriter>) {
    let clock = logs.clock().clone();
    let hook: AppendedHook = replica.append_hook();
    let listener: Arc<dyn TxnCompletionListener> = Arc::new(GroupTxnListener(Arc::clone(groups)));
    let markers = Arc::new(LogMarkerWriter::new(Arc::clone(logs), hook).with_listener(listener));
    let ids: Arc<dyn ProducerIdGenerator> = producer_ids.clone();
    let writer: Arc<dyn TransactionMarkerWriter> = match &peers {
        Some(peers) => Arc::new(ClusterMarkerWriter {
            local: Arc::clone(&markers),
            replica: Arc::clone(replica),
            writes: ReplicatedCoordinatorWrites::new(
                Arc::clone(replica),
                MARKER_REPLICATION_TIMEOUT,
                tokio::runtime::Handle::current(),
            ),
            peers: Arc::clone(peers),
        }),
        None => markers.clone(),
    };
    let coordinator = TransactionCoordinator::new(Arc::clone(&state), ids, writer, clock);
    if let Some(peers) = peers {
        coordinator.verify_remotely_with(Arc::new(ClusterTxnVerifier { peers, state }));
    }
    (Arc::new(coordinator), markers)
}

/// How long a marker waits for its partition's ISR before the coordinator
/// retries it (Kafka's markers wait `request.timeout.ms`).
const MARKER_REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Hands the markers landing on `__consumer_offsets` to the group
/// coordinator, which completes the pending transactional offsets there.
struct GroupTxnListener(Arc<GroupCoordinator>);

impl TxnCompletionListener for GroupTxnListener {
    fn on_transaction_completed(&self, partition: &TopicPartition, producer_id: i64, commit: bool) {
        if partition.topic == OFFSETS_TOPIC {
            self.0.on_transaction_completed(partition.partition, producer_id, commit);
        }
    }
}

/// Rebuild the groups from `__consumer_offsets` on a thread of its own, so the
/// server answers (COORDINATOR_LOAD_IN_PROGRESS for groups) while it runs.
pub(super) fn spawn_group_loader(
    groups: &Arc<GroupCoordinator>,
) -> Result<JoinHandle<()>, BrokerError> {
    let loader = Arc::clone(groups);
    std::thread::Builder::new()
        .name("group-loader".into())
        .spawn(move || loader.load())
        .map_err(|source| BrokerError::Spawn { name: "group-loader", source })
}

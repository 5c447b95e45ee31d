//! A cluster member's replication, started after the handlers are built and
//! before the listeners serve, stopped after the server drained and before
//! the logs close: the metadata publisher (what this broker leads and
//! follows, from each image), the replica fetchers of the partitions it
//! follows, and the ISR manager of those it leads.

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::cluster_member::ClusterMember;
use super::metadata_publisher::MetadataPublisher;
use crate::api::KafkaApis;
use crate::cleaner::LogCleaner;
use crate::log::manager::CleaningControl;
use crate::replica::config::replica_lag_time_max;
use crate::replica::fetcher::{FetcherConfig, ReplicaFetcherManager};
use crate::replica::isr_manager::IsrManager;
use crate::replica::Leadership;

pub struct Replication {
    publisher: JoinHandle<()>,
    fetchers: Arc<ReplicaFetcherManager>,
    isr: JoinHandle<()>,
}

impl Replication {
    pub fn start(
        broker: &Arc<KafkaApis>,
        member: &ClusterMember,
        leadership: Arc<Leadership>,
        cleaner: &LogCleaner,
    ) -> Self {
        let cleaning: Arc<dyn CleaningControl> = cleaner.handle().manager().clone();
        let fetchers = Arc::new(ReplicaFetcherManager::new(
            broker.node_id,
            Arc::clone(&broker.logs),
            Some(Arc::clone(&cleaning)),
            (FetcherConfig::from_values(&broker.config), member.channel_security()),
            (
                Arc::clone(&leadership),
                broker.replica.delayed_fetches(),
                Arc::clone(&broker.replica.quotas().follower),
            ),
        ));
        let lag = replica_lag_time_max(&broker.config);
        let writer = Arc::new(member.isr_writer());
        let isr = IsrManager::new(Arc::clone(&leadership), Arc::clone(&broker.logs), writer, lag);
        let isr = tokio::spawn(isr.run());
        let publisher = MetadataPublisher::new(
            broker.node_id,
            Arc::clone(&broker.logs),
            Arc::clone(&broker.replica),
            leadership,
            Some(cleaning),
            (Arc::clone(&fetchers), Arc::clone(&broker.groups), Arc::clone(&broker.txn)),
        );
        let publisher = publisher.spawn(&member.image);
        Self { publisher, fetchers, isr }
    }

    /// Stop applying images, changing ISRs and fetching (the fetcher
    /// threads end within a socket timeout).
    pub fn stop(self) {
        self.publisher.abort();
        self.isr.abort();
        self.fetchers.shutdown();
    }
}

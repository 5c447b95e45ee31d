//! What the cleaner reaches above it, in one place: the traits through which
//! it asks the transaction coordinator, the group coordinator and tiered
//! storage, each implemented up there and handed down, so `cleaner` imports
//! nothing of `txn`, `group` or `remote`.
//!
//! Invariant: every method is called with no lock of the cleaner or of a
//! log held (implementations take their own locks). [`CleanerCollaborators`]
//! is given to [`super::LogCleaner::start`] at construction: tiered storage
//! opens its store before the cleaner starts, so its view is there too.

use std::collections::HashMap;
use std::sync::Arc;

use super::store_segment_source::StoreSegmentSource;
use super::tiered_store::StoreCleanState;
use crate::log::segment::SegmentConfig;
use crate::log::TopicPartition;

/// Who owns a producer id: the transactional id the transaction coordinator
/// has for it. The log knows producer ids only; the broker gives the manager
/// one of these (the coordinator's state), so `cleaner` imports nothing of
/// `txn`. Asked with no lock of the cleaner or of a log held.
pub trait ProducerIdResolver: Send + Sync + std::fmt::Debug {
    /// The transactional id whose producer id (current, else previous) is
    /// `producer_id`, if the coordinator knows one.
    fn transactional_id(&self, producer_id: i64) -> Option<String>;
}

/// The committed offsets of consumer groups, as the group coordinator has them.
pub trait ConsumerOffsets: Send + Sync + std::fmt::Debug {
    /// (group id, committed offset) of every group with an offset committed
    /// on `tp`.
    fn committed(&self, tp: &TopicPartition) -> Vec<(String, i64)>;

    /// The same for every partition with committed offsets, in one pass
    /// over the groups (what a status or a scrape needs).
    fn committed_by_partition(&self) -> HashMap<TopicPartition, Vec<(String, i64)>>;
}

/// What tiered storage knows of a partition that the cleaner's views show.
/// Called with no lock of the cleaner or of a log held.
pub trait TieredStore: Send + Sync + std::fmt::Debug {
    /// The store cleaner's last measure of `tp`, if it measured it.
    fn store_clean_state(&self, tp: &TopicPartition) -> Option<StoreCleanState>;

    /// `tp`'s store segments that hold offsets in `offsets` (from the log
    /// start to the local start), oldest first, by the store's latest
    /// manifest; each is fetched through the broker's read cache when the
    /// caller asks for it (blocking: a key audit's thread calls it).
    ///
    /// # Errors
    /// The store unreachable, the manifest missing or not reaching `offsets.end`.
    fn store_only_segments(
        &self,
        tp: &TopicPartition,
        offsets: std::ops::Range<i64>,
        config: SegmentConfig,
    ) -> Result<Arc<dyn StoreSegmentSource>, String>;
}

/// The collaborators the cleaner is built with; `None`: that view is
/// absent (a cleaner built alone, in tests and tools).
#[derive(Debug, Clone, Default)]
pub struct CleanerCollaborators {
    /// Names the transactional id of an open transaction that holds
    /// cleaning back (`cleaner-status`).
    pub producer_ids: Option<Arc<dyn ProducerIdResolver>>,
    /// The groups' committed offsets, for the resurrection guard and the
    /// at-risk counts.
    pub consumer_offsets: Option<Arc<dyn ConsumerOffsets>>,
    /// Tiered storage's view of the store (`cleaner-status`, the gauges and
    /// the key audit show the store's part of tiered partitions).
    pub tiered_store: Option<Arc<dyn TieredStore>>,
}

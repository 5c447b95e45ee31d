//! What the cleaner's views (`cleaner-status`, the gauges, the key audit)
//! read of tiered storage ([`TieredStore`]): the store cleaner's measure,
//! from the uploader's stats, and the store-only segments, through the read
//! cache.
//!
//! Invariants:
//! * A key audit fetches one store segment at a time and lets it go once
//!   scanned ([`CachedSegments`]), so it holds one segment beside the cache.
//! * The manifest read and each download wait at most the reader's
//!   ListOffsets timeout (`remote.list.offsets.request.timeout.ms`).

use std::sync::Arc;

use super::cached_segments::CachedSegments;
use super::reader::RemoteLogReader;
use super::status::RemoteStats;
use crate::cleaner::store_segments::StoreSegmentSource;
use crate::cleaner::{StoreCleanState, TieredStore};
use crate::log::segment::SegmentConfig;
use crate::log::TopicPartition;

/// Tiered storage as the cleaner's views see it.
#[derive(Debug)]
pub struct TieredStoreView {
    stats: Arc<RemoteStats>,
    reader: Arc<RemoteLogReader>,
    runtime: tokio::runtime::Handle,
}

impl TieredStoreView {
    /// The view of the uploader's `stats` and the `reader`'s store, whose
    /// downloads run on `runtime`.
    pub fn new(
        stats: Arc<RemoteStats>,
        reader: Arc<RemoteLogReader>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self { stats, reader, runtime }
    }
}

impl TieredStore for TieredStoreView {
    fn store_clean_state(&self, tp: &TopicPartition) -> Option<StoreCleanState> {
        self.stats.store_clean_state(tp)
    }

    fn store_only_segments(
        &self,
        tp: &TopicPartition,
        offsets: std::ops::Range<i64>,
        config: SegmentConfig,
    ) -> Result<Arc<dyn StoreSegmentSource>, String> {
        let timeout = self.reader.list_offsets_timeout();
        let listed = self.runtime.block_on(async {
            tokio::time::timeout(timeout, self.reader.entries_holding(tp, offsets)).await
        });
        let entries = listed
            .map_err(|_| format!("the store did not answer within {timeout:?}"))?
            .map_err(|e| e.to_string())?;
        let cache = self.reader.cache();
        let source = CachedSegments::new(cache, tp, &entries, config, self.runtime.clone())
            .with_timeout(timeout);
        Ok(Arc::new(source))
    }
}

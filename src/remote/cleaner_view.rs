//! What the cleaner's views (`cleaner-status`, the gauges, the key audit)
//! read of tiered storage ([`TieredStore`]): the store cleaner's measure,
//! from the uploader's stats, and the store-only segments' files, through
//! the read cache.
//!
//! Invariants:
//! * A key audit holds at most one downloaded segment of the cache at a
//!   time: it keeps an open descriptor of each `.log` (readable after an
//!   eviction unlinks it) and lets the cache evict as it needs to.
//! * A download waits at most the reader's ListOffsets timeout
//!   (`remote.list.offsets.request.timeout.ms`) per segment.

use std::sync::Arc;

use super::reader::RemoteLogReader;
use super::status::RemoteStats;
use crate::cleaner::key_audit::SegmentFile;
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

    async fn files(
        &self,
        tp: &TopicPartition,
        offsets: std::ops::Range<i64>,
        config: SegmentConfig,
    ) -> Result<Vec<SegmentFile>, String> {
        let timeout = self.reader.list_offsets_timeout();
        let entries = tokio::time::timeout(timeout, self.reader.entries_holding(tp, offsets))
            .await
            .map_err(|_| format!("the store did not answer within {timeout:?}"))?
            .map_err(|e| e.to_string())?;
        let cache = self.reader.cache();
        let mut files = Vec::with_capacity(entries.len());
        for entry in &entries {
            let cached = tokio::time::timeout(timeout, cache.get(tp, entry, config))
                .await
                .map_err(|_| format!("the store did not answer within {timeout:?}"))?
                .map_err(|e| e.to_string())?;
            let s = cached.segment();
            let file =
                s.file().try_clone().map_err(|e| format!("{}: {e}", s.log_path().display()))?;
            files.push(SegmentFile {
                path: s.log_path(),
                base_offset: s.base_offset(),
                size: s.size(),
                file,
            });
        }
        cache.release();
        Ok(files)
    }
}

impl TieredStore for TieredStoreView {
    fn store_clean_state(&self, tp: &TopicPartition) -> Option<StoreCleanState> {
        self.stats.store_clean_state(tp)
    }

    fn store_only_segment_files(
        &self,
        tp: &TopicPartition,
        offsets: std::ops::Range<i64>,
        config: SegmentConfig,
    ) -> Result<Vec<SegmentFile>, String> {
        self.runtime.block_on(self.files(tp, offsets, config))
    }
}

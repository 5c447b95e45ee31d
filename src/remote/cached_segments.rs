//! The store-only segments of one clean or key audit, fetched through the
//! read cache as the reader asks for each ([`StoreSegmentSource`]): on a
//! blocking thread, each fetch runs on the runtime and waits.
//!
//! Invariants:
//! * A fetched segment is held (never evicted) only while the reader holds
//!   its [`FetchedSegment`]; once all are let go and the source is dropped
//!   the cache trims back to its cap, so a reader of a store larger than
//!   the cache holds one segment (a clean: one group) beside it.

use std::sync::Arc;
use std::time::Duration;

use super::cache::{CachedSegment, SegmentCache};
use super::manifest::SegmentEntry;
use crate::cleaner::store_segments::{FetchedSegment, StoreSegmentMeta, StoreSegmentSource};
use crate::log::segment::SegmentConfig;
use crate::log::transaction_index::AbortedTxn;
use crate::log::TopicPartition;

/// See the module doc.
#[derive(Debug)]
pub struct CachedSegments {
    cache: Arc<SegmentCache>,
    tp: TopicPartition,
    pub(super) entries: Vec<SegmentEntry>,
    meta: Vec<StoreSegmentMeta>,
    config: SegmentConfig,
    runtime: tokio::runtime::Handle,
    /// How long one fetch may wait for the store (`None`: as long as it takes).
    timeout: Option<Duration>,
}

impl CachedSegments {
    /// `entries` of `tp`, fetched on `runtime`.
    pub fn new(
        cache: &Arc<SegmentCache>,
        tp: &TopicPartition,
        entries: &[SegmentEntry],
        config: SegmentConfig,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        let ext_size = |e: &SegmentEntry, ext: &str| {
            e.files.iter().find(|f| f.ext == ext).map_or(0, |f| f.size as usize)
        };
        let meta = entries
            .iter()
            .map(|e| StoreSegmentMeta {
                base_offset: e.base_offset,
                next_offset: e.next_offset,
                size: e.size(),
                offset_index_bytes: ext_size(e, "index"),
                time_index_bytes: ext_size(e, "timeindex"),
                name: e.log_key().unwrap_or_default().to_string(),
            })
            .collect();
        Self {
            cache: Arc::clone(cache),
            tp: tp.clone(),
            entries: entries.to_vec(),
            meta,
            config,
            runtime,
            timeout: None,
        }
    }

    /// Each fetch gives up after `timeout`.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    fn cached(&self, index: usize) -> Result<Arc<CachedSegment>, String> {
        let get = self.cache.get(&self.tp, &self.entries[index], self.config);
        let got = match self.timeout {
            None => self.runtime.block_on(get),
            Some(t) => self
                .runtime
                .block_on(async { tokio::time::timeout(t, get).await })
                .map_err(|_| format!("the store did not answer within {t:?}"))?,
        };
        got.map_err(|e| e.to_string())
    }
}

impl StoreSegmentSource for CachedSegments {
    fn segments(&self) -> &[StoreSegmentMeta] {
        &self.meta
    }

    fn fetch(&self, index: usize) -> Result<FetchedSegment, String> {
        let cached = self.cached(index)?;
        let s = cached.segment();
        let path = s.log_path();
        let file = s.file().try_clone().map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(FetchedSegment { file, path, hold: Box::new(cached) })
    }

    fn aborted_txns(&self, index: usize) -> Result<Vec<AbortedTxn>, String> {
        let listed = self.entries[index].files.iter().any(|f| f.ext == "txnindex" && f.size > 0);
        if !listed {
            return Ok(Vec::new());
        }
        let cached = self.cached(index)?;
        cached.segment().txn_index().all_aborted_txns().map_err(|e| e.to_string())
    }
}

impl Drop for CachedSegments {
    fn drop(&mut self) {
        // What the reader held while the cache was over its cap goes now.
        self.cache.release();
    }
}

//! The segments only in the object store, as a clean reads them: what
//! tiered storage hands the cleaner ([`StoreSegmentSource`]) and what one
//! fetch gives back. The store's clean itself is in `store_segments.rs`.

use std::fs::File;
use std::path::PathBuf;

use crate::log::transaction_index::AbortedTxn;

/// One segment only in the store, as its manifest entry describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSegmentMeta {
    pub base_offset: i64,
    pub next_offset: i64,
    /// `.log` bytes.
    pub size: u64,
    pub offset_index_bytes: usize,
    pub time_index_bytes: usize,
    /// Names it in errors (its `.log` object's key).
    pub name: String,
}

/// A fetched store segment's `.log`, readable while this is held.
#[derive(Debug)]
pub struct FetchedSegment {
    pub file: File,
    pub path: PathBuf,
    /// What keeps the fetched copy (the read cache's hold on it).
    pub hold: Box<dyn std::any::Any + Send + Sync>,
}

/// The segments only in the store of one clean, fetched as it reads them
/// (tiered storage implements it over its read cache). Called from the
/// clean's blocking thread, never under a log's lock (a fetch may wait for
/// a download).
pub trait StoreSegmentSource: Send + Sync + std::fmt::Debug {
    /// Every store-only segment, in offset order, from the log start.
    fn segments(&self) -> &[StoreSegmentMeta];

    /// Segment `index`, fetched and verified if it is not at hand.
    ///
    /// # Errors
    /// The store's or the cache's error, as text.
    fn fetch(&self, index: usize) -> Result<FetchedSegment, String>;

    /// The aborted transactions of segment `index`'s `.txnindex`.
    ///
    /// # Errors
    /// As [`StoreSegmentSource::fetch`].
    fn aborted_txns(&self, index: usize) -> Result<Vec<AbortedTxn>, String>;
}

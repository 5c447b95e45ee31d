//! What every I/O of one clean goes through: the cooperative stop flag
//! ([`CancellationToken`]), checked before every chunk read or written, and
//! the shared throttle.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::error::CleanerError;
use super::throttler::Throttler;
use crate::log::batch_reader::ChunkHook;
use crate::log::TopicPartition;

/// How far ahead of the clean's reads the kernel is asked to read each
/// segment: enough to keep the disk streaming while the clean hashes and
/// copies, so a cold log is read at close to the disk's sequential rate.
/// Held only in the page cache; larger windows measured no faster.
pub(super) const READAHEAD: u64 = 64 << 20;

/// A cooperative stop flag, checked before every I/O chunk.
#[derive(Debug, Clone, Default)]
pub struct CancellationToken(Arc<AtomicBool>);

impl CancellationToken {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// What every I/O of one clean needs: the shared throttle, the stop flag and
/// the largest batch a buffer may grow to.
pub(super) struct IoContext<'a> {
    pub(super) throttler: &'a Throttler,
    pub(super) cancel: &'a CancellationToken,
    pub(super) partition: &'a TopicPartition,
    /// The largest batch read (and so the most a read buffer grows to).
    pub(super) grow_limit: usize,
}

impl IoContext<'_> {
    /// Before every chunk read or written: stop if cancelled, else throttle.
    ///
    /// # Errors
    /// `Aborted` once the clean is cancelled.
    pub(super) fn before_io(&self, len: usize) -> Result<(), CleanerError> {
        if self.cancel.is_cancelled() {
            return Err(CleanerError::Aborted { partition: self.partition.to_string() });
        }
        self.throttler.maybe_throttle(len as u64);
        Ok(())
    }

    /// The most a batch may inflate to.
    pub(super) fn decompress_limit(&self) -> usize {
        self.grow_limit.saturating_mul(64).min(1 << 30)
    }
}

/// Every chunk the cleaner reads is throttled, and a cancelled clean stops
/// before its next read.
impl ChunkHook for &IoContext<'_> {
    type Error = CleanerError;

    fn before_chunk(&mut self, len: usize) -> Result<(), CleanerError> {
        self.before_io(len)
    }
}

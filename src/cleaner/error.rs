//! `CleanerError`: what a clean can fail with, with the partition and the
//! file position in each; and the points where a test may stop a clean as if
//! the process had died there.

use std::path::PathBuf;

use super::offset_map::OffsetMapError;
use crate::log::batch_reader::BatchReadError;
use crate::log::error::{BatchError, LogError};
use crate::log::SwapStep;

/// Errors of a clean. The partition and the file position are in each.
#[derive(Debug, thiserror::Error)]
pub enum CleanerError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("{path} at position {position}: {source}")]
    Batch { path: PathBuf, position: u64, source: BatchError },
    #[error("{path} at position {position}: batch of {size} bytes is larger than the largest allowed ({limit} bytes)")]
    BatchTooLarge { path: PathBuf, position: u64, size: usize, limit: usize },
    #[error(
        "{partition}: the batch at offset {offset} has {keys} keys but an empty offset map holds only {capacity}; \
         raise log.cleaner.dedupe.buffer.size"
    )]
    MapTooSmall { partition: String, offset: i64, keys: usize, capacity: usize },
    #[error("{0}")]
    OffsetMap(#[from] OffsetMapError),
    #[error("{partition} is not compacted (cleanup.policy has no compact)")]
    NotCompacted { partition: String },
    #[error("cleaning {partition} was aborted")]
    Aborted { partition: String },
    #[error("injected crash at {0:?}")]
    InjectedCrash(CrashPoint),
    /// A segment only in the object store could not be fetched.
    #[error("{0}")]
    Store(String),
}

/// Where a test may stop a clean as if the process had died there: a fail
/// point (`crate::failpoint`) named [`CrashPoint::failpoint`], set for the
/// log's directory (`failpoint::arm(point.failpoint(), dir)`); the clean
/// then ends with [`CleanerError::InjectedCrash`], leaving its files, and
/// the log must be dropped and reopened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Swap step 1 done: the first group's `.cleaned` files are written and fsynced.
    CleanedWritten,
    /// A step of [`Log::replace_segments`] for the first group.
    Swap(SwapStep),
    /// Every group swapped, the kept segments' stale lists not yet written
    /// (`garbage_survey.rs`); not in [`CrashPoint::ALL`], which are the
    /// first group's points.
    StaleListsUnwritten,
}

impl From<BatchReadError> for CleanerError {
    fn from(e: BatchReadError) -> Self {
        match e {
            BatchReadError::TooLarge { path, position, size, limit } => {
                CleanerError::BatchTooLarge { path, position, size, limit }
            }
            BatchReadError::Invalid { path, position, source } => {
                CleanerError::Batch { path, position, source }
            }
            other => CleanerError::Log(other.into()),
        }
    }
}

impl CrashPoint {
    /// Every point, in the order a clean meets them.
    pub const ALL: [CrashPoint; 5] = [
        Self::CleanedWritten,
        Self::Swap(SwapStep::SwapRenamed),
        Self::Swap(SwapStep::FirstDeletedRenamed),
        Self::Swap(SwapStep::DeletedRenamed),
        Self::Swap(SwapStep::SwapStripped),
    ];

    /// The point's fail point name.
    pub fn failpoint(self) -> &'static str {
        match self {
            Self::CleanedWritten => "cleaner-cleaned-written",
            Self::Swap(SwapStep::SwapRenamed) => "cleaner-swap-renamed",
            Self::Swap(SwapStep::FirstDeletedRenamed) => "cleaner-first-deleted-renamed",
            Self::Swap(SwapStep::DeletedRenamed) => "cleaner-deleted-renamed",
            Self::Swap(SwapStep::SwapStripped) => "cleaner-swap-stripped",
            Self::StaleListsUnwritten => "cleaner-stale-lists-unwritten",
        }
    }

    /// The first point configured for the log in `dir`, if any.
    pub(super) fn configured(dir: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| crate::failpoint::fires_in(p.failpoint(), dir))
    }
}

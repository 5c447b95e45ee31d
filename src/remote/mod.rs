//! Tiered storage: a copy of every closed segment of the topics with
//! `remote.storage.enable=true` in an object store (S3 or an S3-compatible
//! server, or a local directory for development), mirroring the cleaner, and
//! the restore of a fresh data dir from it.
//!
//! Layout under the store URL's prefix:
//! ```text
//! sediment-store.json                         the store's owner: cluster id (create-only)
//! topics/<topic>-<partition>/manifest/<20-digit seq>.json
//! topics/<topic>-<partition>/segments/<base20>-<crc32c hex>-<size>.<log|index|timeindex|txnindex>
//! ```
//!
//! Invariants:
//! * An object's key names its content (base offset, CRC32C, size), so one
//!   key only ever holds one content: a re-upload after a crash rewrites the
//!   same bytes, and a cleaned replacement of a segment (same base offset,
//!   other bytes) gets new keys and never overwrites what a manifest lists.
//! * A manifest lists only objects uploaded and read back (size and CRC32C)
//!   before it was written. Manifests are written create-only
//!   (`PutMode::Create`) under the next sequence number, so of two writers
//!   only one can win a number; a reader takes the highest.
//! * A manifest lists the previous manifest's segments wholly below the
//!   local log start (their local copies were deleted by local retention;
//!   carried over as they are, minus those wholly below the log start) and
//!   then exactly the partition's local closed segments below the last
//!   stable offset at one instant (one read lock of the log): what the
//!   cleaner replaced locally is replaced in the next manifest. A manifest
//!   that would lose offsets the previous one lists is refused
//!   (`manifest::regression`).
//! * The log learns the last offset each manifest read or written lists
//!   (`Log::set_highest_offset_in_remote_storage`); its local retention
//!   deletes only segments at or below it, so nothing not in the store is
//!   deleted locally.
//! * An object is deleted only when no manifest current within
//!   `sediment.remote.storage.delete.delay.ms` lists it and it is itself older
//!   than the delay, both on the store's clock ([`sweep`]); a manifest that
//!   cannot be read stops the sweep, it never counts as listing nothing. The
//!   latest manifest is never deleted, except a retired one (below).
//! * Manifests are validated when read ([`manifest`]): the uploader never
//!   writes past an invalid latest one; readers fall back to the newest valid.
//! * A partition whose topic is deleted or whose remote storage is disabled
//!   is retired (`retire`): one more manifest, `retired: true`, listing
//!   nothing. Restore skips it; the sweep deletes its objects and older
//!   manifests after the delay, and the retired manifest itself last, only
//!   when it is the partition's only manifest, no object is left, and it is
//!   older than the delay. Deleted earlier, an older manifest would be the
//!   latest again (the topic back on a restore) or objects would be left
//!   with no manifest to lead a sweep to them; while a newer manifest exists
//!   (the topic created again, numbered after it) it is an ordinary old one.
//! * A store whose `sediment-store.json` names another cluster is refused.
//! * Store errors show the HTTP status, the S3 error code and the key, never
//!   a response body or a request header (`StoreFailure`).
//!
//! One upload round for a partition ([`remote_log_manager`]), with what a crash at each
//! step leaves:
//! 1. Snapshot the closed segments (files opened under the log's read lock,
//!    so a clean's swap cannot change them under the upload). Crash: nothing.
//! 2. Upload each file not in the latest manifest and read it back, both
//!    streamed (`store`: multipart above a part, ranged GETs, at most two
//!    parts in memory whatever the segment's size). Crash: objects no
//!    manifest lists; the sweep deletes them after the delay (or a restart's
//!    upload rewrites the same keys with the same bytes first). A crash
//!    inside a multipart upload leaves an incomplete upload, no object: the
//!    store's lifecycle rule (`AbortIncompleteMultipartUpload`) expires it;
//!    one that fails is aborted.
//! 3. Check the task's last manifest is still the store's latest (a higher
//!    one: another writer, stop; none: the store lost it, read the store
//!    again), then write manifest `seq + 1` create-only. Crash before: as 2;
//!    after: done.
//! 4. Sweep objects and manifests out of date for longer than the delay.
//!    Crash: some left, removed by a later sweep.
//!
//! Before the partitions, each round retires what went away since the last
//! (`retire`). `crash_point` (test-only fail points, `crate::failpoint`)
//! kill the process before and after step 3's write, and inside step 4.
//!
//! Reads ([`reader`] through [`cache`]): Fetch and ListOffsets below a
//! partition's local log start are answered from the segments its latest
//! manifest lists, downloaded whole (in ranged GETs) into a bounded cache
//! under the first log dir and opened with `log::segment`. Every object is checked against the
//! manifest's size and CRC32C before it is used: one that fails is an error
//! naming its key, counted as `corrupt`, never served.
//!
//! Nothing in `log/` or `cleaner/` knows this module: it reads the logs
//! through `LogManager`'s public surface and hands each log two numbers, the
//! highest offset in the store and (raising a stale one) the store's log
//! start.

pub mod cache;
pub mod cached_segments;
pub mod cleaner_view;
pub mod config;
pub mod crash_point;
pub mod manifest;
pub mod read_stats;
pub mod reader;
pub mod remote_log_manager;
pub mod restore;
mod retire;
mod snapshot;
pub mod status;
pub mod store;
pub mod store_cleaner;
pub mod sweep;

pub use config::RemoteStorageConfig;
pub use remote_log_manager::RemoteLogManager;
pub use status::RemoteStats;
pub use store::RemoteStore;

use std::path::PathBuf;

/// Errors of the tiered storage layer.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("{0}")]
    Store(Box<StoreFailure>),
    #[error("object {key} read back as {got_size} bytes with CRC32C {got_crc:08x}; {size} bytes with CRC32C {crc:08x} were uploaded")]
    Verify { key: String, size: u64, crc: u32, got_size: u64, got_crc: u32 },
    #[error("segment {key} does not read back as the segment the manifest lists: {reason}")]
    CorruptSegment { key: String, reason: String },
    #[error("object {key} is {size} bytes, more than the {max} allowed")]
    TooLarge { key: String, size: u64, max: u64 },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("manifest {key}: {reason}")]
    Manifest { key: String, reason: String },
    #[error("manifest {key} is invalid ({reason}): uploads of this partition wait until it is removed or fixed; readers use the newest valid manifest below it")]
    Corrupt { key: String, reason: String },
    #[error("the store at {url} belongs to sediment cluster {found}, this broker is cluster {ours}: refusing to write to it")]
    ForeignStore { url: String, found: String, ours: String },
    #[error("manifest {key} already exists: another writer is uploading this partition; uploads of it stop until a restart")]
    Conflict { key: String },
    #[error("the local log of {partition} lacks what the store's latest manifest lists ({reason}); it is kept, not replaced, and uploads of this partition stop until a restart (restore the partition from the store, or remove its manifests to start over)")]
    Regressed { partition: String, reason: String },
    #[error("opening the store {url}: {reason}")]
    Open { url: String, reason: String },
    #[error(transparent)]
    Log(#[from] crate::log::LogError),
    #[error("restore into {dir}: {reason}")]
    Restore { dir: PathBuf, reason: String },
    #[error("a blocking task failed: {0}")]
    Join(String),
    #[error("cleaning the store's segments of {partition}: {reason}")]
    StoreClean { partition: String, reason: String },
    /// An error shared by the callers of one cache download.
    #[error(transparent)]
    Shared(std::sync::Arc<RemoteError>),
}

/// A failed store request, with a hint at the cause: only the HTTP status,
/// the S3 error code and the key are kept, never the response body or the
/// request (an error body can echo the access key id, a presigned URL's
/// session token or the string that was signed), so logs and
/// `sediment check-config` never show them.
#[derive(Debug, thiserror::Error)]
#[error("object store {url}: {hint} ({op} {key}{})", store::detail(*.status, .code.as_deref()))]
pub struct StoreFailure {
    pub url: String,
    pub op: &'static str,
    pub key: String,
    pub hint: &'static str,
    pub kind: &'static str,
    /// The HTTP status, when the store answered.
    pub status: Option<u16>,
    /// S3's `<Code>` (`SignatureDoesNotMatch`, `NoSuchBucket`, ...).
    pub code: Option<String>,
    /// The store said the object (or bucket) does not exist.
    pub not_found: bool,
}

impl RemoteError {
    /// The `kind` label of `sediment_remote_store_errors_total`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Store(f) => f.kind,
            Self::Verify { .. }
            | Self::TooLarge { .. }
            | Self::Corrupt { .. }
            | Self::CorruptSegment { .. } => "corrupt",
            Self::Io { .. } | Self::Log(_) | Self::Join(_) | Self::StoreClean { .. } => "local",
            Self::Shared(e) => e.kind(),
            Self::Manifest { .. } => "manifest",
            Self::ForeignStore { .. } | Self::Conflict { .. } | Self::Regressed { .. } => {
                "conflict"
            }
            Self::Open { .. } | Self::Restore { .. } => "config",
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }
}

/// Run blocking file work off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, RemoteError> + Send + 'static,
) -> Result<T, RemoteError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| RemoteError::Join(e.to_string()))?
}

/// Milliseconds since the epoch, the time the store's `last_modified` uses.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

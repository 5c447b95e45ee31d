//! The small JSON files the security layer keeps in the first log dir
//! (`sediment-scram-credentials.json`, `sediment-acls.json`): how they are
//! read and how a change is made durable. (In a cluster etcd holds both
//! instead: `cluster::security_store`.)
//!
//! Invariants:
//! * A file over 64 MiB is refused before it is read; a missing file reads
//!   as `None` (an empty store).
//! * A write goes to `<file>.tmp` (created with the caller's mode), is
//!   fsynced, renamed over the file and the directory fsynced, so a crash
//!   leaves either the old or the new file whole; a leftover `.tmp` is never
//!   read.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cluster::image::{MetadataImage, StoredKeys};
use crate::cluster::keys::ClusterKeys;
use crate::cluster::security_store::{ClusterSecurityStore, KeyChange, Written};
use crate::log::checkpoint::fsync_dir;

/// How many times a change lost to another broker's is rebuilt.
const WRITE_ATTEMPTS: usize = 10;

const MAX_FILE_BYTES: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {reason}")]
    Damaged { path: PathBuf, reason: String },
    /// In a cluster: etcd did not take the change (unreachable, or the
    /// keys kept changing under it).
    #[error("etcd: {0}")]
    Unavailable(String),
}

/// The bytes of `path`, or `None` when it does not exist.
///
/// # Errors
/// I/O errors, or a file larger than 64 MiB.
pub fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    let io = |source| StoreError::Io { path: path.to_path_buf(), source };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(e)),
        Ok(m) if m.len() > MAX_FILE_BYTES => Err(StoreError::Damaged {
            path: path.to_path_buf(),
            reason: format!("{} bytes, more than the {MAX_FILE_BYTES} allowed", m.len()),
        }),
        Ok(_) => std::fs::read(path).map(Some).map_err(io),
    }
}

/// How a store's set is kept in etcd: which keys of the image hold it, how
/// they read, and which keys a change rewrites.
pub(super) struct ClusterForm<V> {
    pub stored: fn(&MetadataImage) -> &Arc<StoredKeys>,
    pub read: fn(&ClusterKeys, &StoredKeys) -> Result<V, StoreError>,
    pub changed: fn(&ClusterKeys, &V, &V) -> Vec<KeyChange>,
}

/// A store's `update` in a cluster: `change` applied to the set of the
/// newest image, the keys it changed written by CAS, rebuilt on a lost race
/// (`cluster::security_store`); the answer and the image that applied it.
///
/// # Errors
/// etcd did not take it, the keys kept changing, or `form.read` refused
/// the image's set.
pub(super) fn update_in_cluster<V: Clone, T>(
    cluster: &ClusterSecurityStore,
    form: &ClusterForm<V>,
    mut change: impl FnMut(&mut V) -> (T, bool),
) -> Result<(T, Option<Arc<MetadataImage>>), StoreError> {
    let keys = cluster.keys();
    for _ in 0..WRITE_ATTEMPTS {
        let image = cluster.image();
        let stored = (form.stored)(&image);
        let current = (form.read)(keys, stored)?;
        let mut next = current.clone();
        let (answer, changed) = change(&mut next);
        if !changed {
            return Ok((answer, None));
        }
        match cluster.write_blocking(stored, (form.changed)(keys, &current, &next)) {
            Ok(Written::Applied(image)) => return Ok((answer, Some(image))),
            Ok(Written::Raced) => continue,
            Err(e) => return Err(StoreError::Unavailable(e.to_string())),
        }
    }
    Err(StoreError::Unavailable(format!(
        "the keys changed under {WRITE_ATTEMPTS} attempts in a row"
    )))
}

/// Replace `path` with `bytes` atomically (tmp, fsync, rename, fsync dir).
///
/// # Errors
/// Any step failed; the old file is then still in place.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> Result<(), StoreError> {
    let tmp = path.with_extension("json.tmp");
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Io { path, source }
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io(path))?;
    if let Some(dir) = path.parent() {
        fsync_dir(dir).map_err(|e| StoreError::Damaged {
            path: dir.to_path_buf(),
            reason: format!("fsync of the directory failed: {e}"),
        })?;
    }
    Ok(())
}

//! `.lock` in every log dir (Kafka's file name), held with an exclusive
//! `flock` for as long as a process writes the dir: the broker from before
//! it opens the logs until it has stopped, and offline tools
//! (`sediment add-scram`) while they write.
//!
//! Invariants:
//! * Two brokers never run on one data dir: the second fails at start,
//!   naming the dir, before it reads or writes anything in it.
//! * The lock belongs to the open file: it is released when the holder
//!   exits, also on SIGKILL, so a crashed broker never leaves a stale lock
//!   (the file itself stays and is harmless).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

pub const LOCK_FILE: &str = ".lock";

#[derive(Debug, thiserror::Error)]
pub enum DirLockError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{dir} is in use by another process (a broker running on it holds {LOCK_FILE})")]
    Held { dir: PathBuf },
}

/// The locks of a set of log dirs, released when dropped.
#[derive(Debug)]
pub struct DirLocks {
    _files: Vec<File>,
}

fn lock_one(dir: &Path) -> Result<File, DirLockError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DirLockError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io(&path))?;
    // SAFETY: flock on a descriptor this function owns; no memory is shared.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(file);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Err(DirLockError::Held { dir: dir.to_path_buf() });
    }
    Err(DirLockError::Io { path, source: err })
}

impl DirLocks {
    /// Lock every dir of `dirs` (creating missing ones), or none.
    ///
    /// # Errors
    /// A dir another process holds, or an I/O error, naming the dir.
    pub fn acquire(dirs: &[PathBuf]) -> Result<Self, DirLockError> {
        let files = dirs.iter().map(|d| lock_one(d)).collect::<Result<_, _>>()?;
        Ok(Self { _files: files })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dir_is_held_by_one_holder_at_a_time() {
        let a = tempfile::tempdir().expect("tmp");
        let b = tempfile::tempdir().expect("tmp");
        let dirs = vec![a.path().to_path_buf(), b.path().join("new")];
        let held = DirLocks::acquire(&dirs).expect("first");
        assert!(b.path().join("new").join(LOCK_FILE).exists());
        // flock locks belong to open file descriptions: a second open in
        // this process conflicts as another process would.
        let err = DirLocks::acquire(&[b.path().join("new")]).expect_err("held");
        assert!(matches!(&err, DirLockError::Held { dir } if dir.ends_with("new")), "{err}");
        drop(held);
        DirLocks::acquire(&dirs).expect("released");
    }
}

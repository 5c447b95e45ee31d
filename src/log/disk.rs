//! The size of the file system holding a log dir (`statvfs(3)`), as Kafka's
//! DescribeLogDirs reports it (v4+) and the metrics export it.
//!
//! "Usable" is what an unprivileged process may still write (`f_bavail`), not
//! the free blocks reserved for root, matching Java's `FileStore.getUsableSpace`.

use std::path::Path;

/// `(total, usable)` bytes of the file system holding `path`; `None` when the
/// path cannot be examined (missing, holding a NUL byte, not permitted).
pub fn disk_space(path: &Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statvfs` is a plain C struct of integers, for which all zeroes is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return None;
    }
    let frag = st.f_frsize as i64;
    Some((st.f_blocks as i64 * frag, st.f_bavail as i64 * frag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_dir_has_a_size() {
        let dir = tempfile::tempdir().unwrap();
        let (total, usable) = disk_space(dir.path()).unwrap();
        assert!(total > 0);
        assert!((0..=total).contains(&usable));
    }

    #[test]
    fn a_missing_dir_has_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(disk_space(&dir.path().join("missing")), None);
    }
}

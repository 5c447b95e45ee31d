//! What several targets share: a scratch directory for the formats that are
//! read from files, and a way to cut one input into the fields of a target.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A directory that lives as long as the process, in memory where the
/// machine has `/dev/shm` (a target that writes files then costs no disk I/O).
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
        dir.expect("a scratch directory")
    })
    .path()
}

/// A fresh, empty subdirectory `name` of the scratch directory.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = scratch_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a fresh directory");
    dir
}

/// Reads an input front to back: fixed-size fields, then length-prefixed
/// parts. Reads past the end give zeros and empty parts, so every input is
/// some case.
pub struct Fields<'a>(pub &'a [u8]);

impl<'a> Fields<'a> {
    pub fn u8(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        b
    }

    pub fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = N.min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }

    pub fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.bytes())
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.bytes())
    }

    /// A part of at most `max` bytes: a 4-byte big-endian length (taken
    /// modulo `max + 1`), then that many bytes, or what is left.
    pub fn part(&mut self, max: usize) -> &'a [u8] {
        let len = (self.u32() as usize) % (max + 1);
        let n = len.min(self.0.len());
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        head
    }

    /// Everything not read yet.
    pub fn rest(self) -> &'a [u8] {
        self.0
    }
}

/// The inverse of [`Fields::part`], for writing seeds: `part` with its length.
pub fn part(bytes: &[u8]) -> Vec<u8> {
    let mut out = (bytes.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

//! `FileRegion`: whole batches of a segment file, by position, that a fetch
//! sends without reading them into the broker's memory.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

/// Whole batches of a segment file, by position, not yet read: a fetch
/// response sends them with `sendfile` (page cache to socket, no copy through
/// the broker's memory), like Kafka's `FileRecords`. The region holds the file
/// open, so it stays readable if the segment is cleaned, retained or deleted
/// before it is sent; segment files only ever change past their valid size,
/// so the bytes are those the fetch chose.
#[derive(Debug, Clone)]
pub struct FileRegion {
    file: Arc<File>,
    position: u64,
    len: usize,
}

impl FileRegion {
    pub fn new(file: Arc<File>, position: u64, len: usize) -> Self {
        Self { file, position, len }
    }
    pub fn file(&self) -> &File {
        &self.file
    }
    pub fn position(&self) -> u64 {
        self.position
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The region's bytes, read into memory.
    ///
    /// # Errors
    /// I/O errors, and `UnexpectedEof` if the file is shorter than the region.
    pub fn read_to_bytes(&self) -> std::io::Result<Bytes> {
        let mut buf = BytesMut::zeroed(self.len);
        self.file.read_exact_at(&mut buf, self.position)?;
        Ok(buf.freeze())
    }
}

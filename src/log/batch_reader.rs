//! `BatchReader`: the one sequential reader of whole record batches from a
//! segment file. Recovery, timestamp search, `dump-log` and the cleaner all
//! walk batches through it, so a batch read back from disk is framed and
//! checked the same way everywhere.
//!
//! Invariants:
//! * A batch is returned only whole and checked: its length covers at least a
//!   batch header, it ends inside the range, it is no larger than the limit,
//!   and its magic and CRC are valid. Only a reader built with
//!   [`BatchReader::deferring_crc`] skips the CRC, and its caller checks it
//!   whenever the bytes were not checked before (the cleaner). Anything else is an error naming the
//!   file and the batch's position, and the reader returns nothing after it.
//! * Memory is bounded before it is allocated: a declared size is compared
//!   with the limit and with the rest of the range before the buffer grows.
//! * The buffer is the caller's. Its length is the read chunk; a batch larger
//!   than it grows it to exactly that batch's size ([`BatchReader::grew`]),
//!   and shrinking it back is the caller's choice (the cleaner does). An empty
//!   buffer is first sized to [`READ_CHUNK`], or to the range or the batch
//!   limit when smaller, so it never exceeds the limit either.
//! * The [`ChunkHook`] runs before every read from the file. An error from it
//!   stops the reader and is returned as it is: the cleaner throttles its I/O
//!   and notices cancellation there, once per chunk.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::error::{BatchError, LogError};
use super::record_batch::{self, LOG_OVERHEAD};

/// Bytes read per I/O when the caller's buffer starts empty.
pub const READ_CHUNK: usize = 1 << 20;

/// Why the next batch could not be returned. Each names the file, and each
/// but `Io` the position of the batch.
#[derive(Debug, thiserror::Error)]
pub enum BatchReadError {
    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// The bytes do not frame a batch: a length below the header size, or a
    /// header or batch cut off by the end of the range or the file.
    #[error("corrupt data in {path} at position {position}: {source}")]
    Framing { path: PathBuf, position: u64, source: BatchError },
    /// The declared size is over the limit; nothing was allocated for it.
    #[error("corrupt data in {path} at position {position}: record batch of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge { path: PathBuf, position: u64, size: usize, limit: usize },
    /// Framed, but the batch fails its check (magic, CRC).
    #[error("corrupt data in {path} at position {position}: {source}")]
    Invalid { path: PathBuf, position: u64, source: BatchError },
}

impl From<BatchReadError> for LogError {
    fn from(e: BatchReadError) -> Self {
        match e {
            BatchReadError::Io { path, source } => LogError::Io { path, source },
            BatchReadError::Framing { path, position, source }
            | BatchReadError::Invalid { path, position, source } => {
                LogError::Corrupt { path, position, reason: source.to_string() }
            }
            BatchReadError::TooLarge { path, position, size, limit } => LogError::Corrupt {
                path,
                position,
                reason: BatchError::TooLarge { size, limit }.to_string(),
            },
        }
    }
}

/// Called before each chunk is read from disk, with the number of bytes about
/// to be asked for.
pub trait ChunkHook {
    /// What [`BatchReader::next_batch`] returns: the hook's own errors and the reader's.
    type Error: From<BatchReadError>;

    /// # Errors
    /// Whatever should stop the reader before this read (a cancelled clean).
    fn before_chunk(&mut self, len: usize) -> Result<(), Self::Error>;
}

/// The hook of plain readers: nothing happens between reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHook;

impl ChunkHook for NoHook {
    type Error = BatchReadError;

    fn before_chunk(&mut self, _len: usize) -> Result<(), BatchReadError> {
        Ok(())
    }
}

/// Reads the batches of `file` in a byte range, in order, each with its position.
pub struct BatchReader<'a, H = NoHook> {
    file: &'a File,
    path: PathBuf,
    buf: &'a mut Vec<u8>,
    /// `buf[start..end]` holds unread file bytes, the first at `position`.
    start: usize,
    end: usize,
    position: u64,
    range_end: u64,
    max_batch_size: usize,
    bytes_read: u64,
    grew: bool,
    check_crc: bool,
    readahead: Option<Readahead>,
    hook: H,
}

/// How far ahead of its reads a reader asks the kernel to read the file.
#[derive(Debug, Clone, Copy)]
struct Readahead {
    window: u64,
    /// The file is advised up to here.
    advised: u64,
}

impl<'a> BatchReader<'a> {
    /// Batches of `file` (named `path` in errors) from `range.start`, which
    /// must be a batch start, to `range.end`, none larger than `max_batch_size`.
    pub fn new(
        file: &'a File,
        path: impl Into<PathBuf>,
        range: Range<u64>,
        max_batch_size: usize,
        buf: &'a mut Vec<u8>,
    ) -> Self {
        Self {
            file,
            path: path.into(),
            buf,
            start: 0,
            end: 0,
            position: range.start,
            range_end: range.end,
            max_batch_size,
            bytes_read: 0,
            grew: false,
            check_crc: true,
            readahead: None,
            hook: NoHook,
        }
    }

    /// The same reader, calling `hook` before each chunk it reads.
    pub fn with_hook<H: ChunkHook>(self, hook: H) -> BatchReader<'a, H> {
        BatchReader {
            file: self.file,
            path: self.path,
            buf: self.buf,
            start: self.start,
            end: self.end,
            position: self.position,
            range_end: self.range_end,
            max_batch_size: self.max_batch_size,
            bytes_read: self.bytes_read,
            grew: self.grew,
            check_crc: self.check_crc,
            readahead: self.readahead,
            hook,
        }
    }
}

impl<H: ChunkHook> BatchReader<'_, H> {
    /// The same reader, checking each batch's framing and magic but not its
    /// CRC: the caller checks it ([`record_batch::check_batch`]) for every
    /// batch whose bytes it has not checked before.
    #[must_use]
    pub fn deferring_crc(mut self) -> Self {
        self.check_crc = false;
        self
    }

    /// The same reader, keeping the kernel reading up to `window` bytes
    /// of the range ahead of each chunk it reads (`POSIX_FADV_WILLNEED`,
    /// renewed every half window). The disk then works while the caller
    /// computes, instead of waiting for each chunk's read: a cold log is read
    /// at the disk's streaming rate. Only the page cache holds the bytes read
    /// ahead, and at most `window` of them are not yet consumed.
    #[must_use]
    pub fn with_readahead(mut self, window: u64) -> Self {
        self.readahead = Some(Readahead { window, advised: self.position });
        self
    }

    /// Position of the next batch.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Bytes read from the file so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The buffer grew past its starting length for a batch larger than it.
    pub fn grew(&self) -> bool {
        self.grew
    }

    /// Move forward to `position`, which the caller knows to be a batch
    /// start (or the range's end), without reading what lies before it.
    /// Bytes already in the buffer are passed over; the next chunk is read
    /// from `position`. A position behind the reader or past the range's
    /// end leaves it where it is and returns `false`.
    pub fn skip_to(&mut self, position: u64) -> bool {
        if position < self.position || position > self.range_end {
            return false;
        }
        let ahead = position - self.position;
        let buffered = (self.end - self.start) as u64;
        if ahead <= buffered {
            self.start += ahead as usize;
        } else {
            (self.start, self.end) = (0, 0);
        }
        self.position = position;
        true
    }

    /// The next whole, checked batch and its position; `None` at the end of the range.
    ///
    /// # Errors
    /// A [`BatchReadError`] (converted) for bytes that are not a valid batch
    /// or an I/O error; the hook's error when it stops the reader.
    pub fn next_batch(&mut self) -> Result<Option<(u64, &[u8])>, H::Error> {
        let position = self.position;
        if position >= self.range_end {
            return Ok(None);
        }
        let rest = usize::try_from(self.range_end - position).unwrap_or(usize::MAX);
        if !self.fill(LOG_OVERHEAD)? {
            let available = self.end - self.start;
            return Err(self.framing(BatchError::Truncated { needed: LOG_OVERHEAD, available }));
        }
        let head = &self.buf[self.start..self.start + LOG_OVERHEAD];
        let size = match record_batch::framed_batch_size(head) {
            Ok(size) => size,
            Err(e) => return Err(self.framing(e)),
        };
        if size > self.max_batch_size {
            let (path, limit) = (self.path.clone(), self.max_batch_size);
            return Err(BatchReadError::TooLarge { path, position, size, limit }.into());
        }
        if size > rest {
            return Err(self.framing(BatchError::Truncated { needed: size, available: rest }));
        }
        if !self.fill(size)? {
            let available = self.end - self.start;
            return Err(self.framing(BatchError::Truncated { needed: size, available }));
        }
        let batch = self.start..self.start + size;
        let bytes = &self.buf[batch.clone()];
        let checked = if self.check_crc {
            record_batch::check_batch(bytes, self.max_batch_size)
        } else {
            record_batch::BatchHeader::parse(bytes)
        };
        if let Err(source) = checked {
            let path = self.path.clone();
            return Err(BatchReadError::Invalid { path, position, source }.into());
        }
        self.start += size;
        self.position += size as u64;
        Ok(Some((position, &self.buf[batch])))
    }

    /// Renew the readahead advice for a read at `file_pos`, in steps of half
    /// a window (so one call per that many bytes read).
    fn advise_ahead(&mut self, file_pos: u64) {
        let Some(ra) = &mut self.readahead else { return };
        let want = file_pos.saturating_add(ra.window).min(self.range_end);
        let from = ra.advised.max(file_pos);
        if want > from && (want - from >= ra.window / 2 || want == self.range_end) {
            use std::os::unix::io::AsRawFd;
            let (Ok(offset), Ok(len)) =
                (libc::off_t::try_from(from), libc::off_t::try_from(want - from))
            else {
                return;
            };
            // SAFETY: posix_fadvise reads no memory of ours; the descriptor
            // is open (borrowed for the reader's life). Advice only: a
            // failure changes nothing but speed, so it is ignored.
            let _ = unsafe {
                libc::posix_fadvise(self.file.as_raw_fd(), offset, len, libc::POSIX_FADV_WILLNEED)
            };
            ra.advised = want;
        }
    }

    fn framing(&self, source: BatchError) -> H::Error {
        BatchReadError::Framing { path: self.path.clone(), position: self.position, source }.into()
    }

    /// Make at least `need` unread bytes available; `false` when the range or
    /// the file ends first.
    fn fill(&mut self, need: usize) -> Result<bool, H::Error> {
        if self.end - self.start >= need {
            return Ok(true);
        }
        // Move the unread bytes to the front, then read behind them.
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.buf.is_empty() {
            let rest = usize::try_from(self.range_end - self.position).unwrap_or(usize::MAX);
            self.buf.resize(need.max(READ_CHUNK.min(rest).min(self.max_batch_size)), 0);
        } else if self.buf.len() < need {
            self.buf.resize(need, 0);
            self.grew = true;
        }
        while self.end < need {
            let file_pos = self.position + self.end as u64;
            if file_pos >= self.range_end {
                return Ok(false);
            }
            let len = usize::try_from(self.range_end - file_pos)
                .unwrap_or(usize::MAX)
                .min(self.buf.len() - self.end);
            self.advise_ahead(file_pos);
            self.hook.before_chunk(len)?;
            let n = self
                .file
                .read_at(&mut self.buf[self.end..self.end + len], file_pos)
                .map_err(|source| BatchReadError::Io { path: self.path.clone(), source })?;
            if n == 0 {
                return Ok(false);
            }
            self.end += n;
            self.bytes_read += n as u64;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::log::compression::Compression;
    use crate::log::record_batch::BatchBuilder;
    use crate::log::segment::LogSegment;

    /// A batch of one record whose value is `value_len` bytes, at `base_offset`.
    fn batch(base_offset: i64, value_len: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None, 1_000);
        b.append(1_000, Some(b"k"), Some(&vec![b'v'; value_len]));
        let mut batch = b.build();
        record_batch::set_base_offset(&mut batch, base_offset);
        batch
    }

    /// A file holding `sizes.len()` batches (value lengths `sizes`), plus
    /// `tail`; returns it, its bytes and the batch start positions.
    fn file_of(sizes: &[usize], tail: &[u8]) -> (tempfile::NamedTempFile, Vec<u8>, Vec<u64>) {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for (i, size) in sizes.iter().enumerate() {
            starts.push(bytes.len() as u64);
            bytes.extend_from_slice(&batch(i as i64, *size));
        }
        bytes.extend_from_slice(tail);
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&bytes).unwrap();
        (file, bytes, starts)
    }

    /// Each batch read, with its position.
    type Batches = Vec<(u64, Vec<u8>)>;

    /// Every batch up to the end or the first error.
    fn read_all<H: ChunkHook>(reader: &mut BatchReader<'_, H>) -> (Batches, Option<H::Error>) {
        let mut batches = Vec::new();
        loop {
            match reader.next_batch() {
                Ok(Some((pos, b))) => batches.push((pos, b.to_vec())),
                Ok(None) => return (batches, None),
                Err(e) => return (batches, Some(e)),
            }
        }
    }

    #[test]
    fn frames_every_batch_of_a_range_with_its_position() {
        let (file, bytes, starts) = file_of(&[10, 700, 3, 2_000, 50], &[]);
        let len = bytes.len() as u64;
        for buffer in [0usize, 64, 100, 5_000] {
            let mut buf = vec![0; buffer];
            let mut reader =
                BatchReader::new(file.as_file(), file.path(), 0..len, 1 << 20, &mut buf);
            let (batches, err) = read_all(&mut reader);
            assert!(err.is_none(), "{err:?}");
            let positions: Vec<u64> = batches.iter().map(|b| b.0).collect();
            assert_eq!(positions, starts, "buffer {buffer}");
            for (pos, b) in &batches {
                assert_eq!(&bytes[*pos as usize..*pos as usize + b.len()], &b[..]);
            }
            assert_eq!(reader.position(), len);
            assert_eq!(reader.bytes_read(), len, "every byte read once");
        }
        // From a batch start in the middle to another batch start.
        let mut buf = Vec::new();
        let mut reader =
            BatchReader::new(file.as_file(), file.path(), starts[1]..starts[4], 1 << 20, &mut buf);
        let (batches, err) = read_all(&mut reader);
        assert!(err.is_none());
        assert_eq!(batches.iter().map(|b| b.0).collect::<Vec<_>>(), starts[1..4]);
    }

    #[test]
    fn a_truncated_tail_is_an_error_at_its_position_after_the_whole_batches() {
        let whole = batch(9, 40);
        for cut in [5, LOG_OVERHEAD, 30, whole.len() - 1] {
            let (file, bytes, starts) = file_of(&[10, 20], &whole[..cut]);
            let mut buf = Vec::new();
            let len = bytes.len() as u64;
            let mut reader =
                BatchReader::new(file.as_file(), file.path(), 0..len, 1 << 20, &mut buf);
            let (batches, err) = read_all(&mut reader);
            assert_eq!(batches.len(), 2, "cut {cut}");
            let tail = starts[1] + batch(1, 20).len() as u64;
            match err {
                Some(BatchReadError::Framing { position, source, ref path }) => {
                    assert_eq!(position, tail, "cut {cut}");
                    assert_eq!(path, file.path());
                    assert!(matches!(source, BatchError::Truncated { .. }), "{source:?}");
                }
                other => panic!("cut {cut}: {other:?}"),
            }
            assert!(LogError::from(reader.next_batch().unwrap_err())
                .to_string()
                .contains("position"));
        }
        // A range that ends inside a batch is cut off the same way, and so is a
        // range that runs past the end of the file.
        let (file, bytes, starts) = file_of(&[10, 20], &[]);
        for end in [starts[1] + 20, bytes.len() as u64 + 100] {
            let mut buf = Vec::new();
            let tail = if end > bytes.len() as u64 { bytes.len() as u64 } else { starts[1] };
            let mut reader =
                BatchReader::new(file.as_file(), file.path(), 0..end, 1 << 20, &mut buf);
            let (_, err) = read_all(&mut reader);
            assert!(
                matches!(err, Some(BatchReadError::Framing { position, .. }) if position == tail),
                "end {end}: {err:?}"
            );
        }
    }

    #[test]
    fn an_oversize_or_undersize_length_is_refused_before_allocating() {
        let limit = 1_000;
        let mut huge = batch(0, 10);
        huge[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        let mut small = batch(0, 10);
        small[8..12].copy_from_slice(&10i32.to_be_bytes());
        for (bytes, max) in [(&huge, limit), (&huge, usize::MAX), (&small, limit)] {
            let mut file = tempfile::NamedTempFile::new().unwrap();
            file.write_all(bytes).unwrap();
            let mut buf = vec![0; 64];
            let len = bytes.len() as u64;
            let mut reader = BatchReader::new(file.as_file(), file.path(), 0..len, max, &mut buf);
            let err = reader.next_batch().unwrap_err();
            match (&err, max) {
                (BatchReadError::TooLarge { position: 0, size, limit: l, .. }, 1_000) => {
                    assert_eq!((*size, *l), (i32::MAX as usize + LOG_OVERHEAD, limit));
                }
                (BatchReadError::Framing { source: BatchError::Truncated { .. }, .. }, _) => {
                    assert_eq!(max, usize::MAX, "past the end of the range: {err}");
                }
                (BatchReadError::Framing { source: BatchError::InvalidLength(10), .. }, _) => {}
                _ => panic!("max {max}: {err:?}"),
            }
            assert!(!reader.grew());
            assert_eq!(buf.len(), 64, "nothing allocated for the declared size");
        }
        // A batch larger than the buffer but within the limit grows it to its size.
        let (file, bytes, starts) = file_of(&[10, 3_000, 10], &[]);
        let mut buf = vec![0; 256];
        let len = bytes.len() as u64;
        let mut reader = BatchReader::new(file.as_file(), file.path(), 0..len, 1 << 20, &mut buf);
        assert_eq!(read_all(&mut reader).0.len(), 3);
        assert!(reader.grew());
        assert_eq!(buf.len() as u64, starts[2] - starts[1]);
    }

    #[test]
    fn a_corrupt_batch_is_invalid_at_its_position() {
        let (file, mut bytes, starts) = file_of(&[10, 20, 30], &[]);
        let at = starts[1] as usize + record_batch::RECORD_BATCH_OVERHEAD + 3;
        bytes[at] ^= 0xff;
        file.as_file().write_all_at(&bytes, 0).unwrap();
        let mut buf = Vec::new();
        let len = bytes.len() as u64;
        let mut reader = BatchReader::new(file.as_file(), file.path(), 0..len, 1 << 20, &mut buf);
        let (batches, err) = read_all(&mut reader);
        assert_eq!(batches.len(), 1);
        match err {
            Some(BatchReadError::Invalid { position, source, .. }) => {
                assert_eq!(position, starts[1]);
                assert!(matches!(source, BatchError::CrcMismatch { .. }), "{source:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// Counts chunks and stops after `stop_after` of them.
    struct Counting {
        calls: Vec<usize>,
        stop_after: usize,
    }

    #[derive(Debug)]
    enum Stop {
        Stopped,
        Read(BatchReadError),
    }

    impl From<BatchReadError> for Stop {
        fn from(e: BatchReadError) -> Self {
            Stop::Read(e)
        }
    }

    impl ChunkHook for &mut Counting {
        type Error = Stop;
        fn before_chunk(&mut self, len: usize) -> Result<(), Stop> {
            if self.calls.len() == self.stop_after {
                return Err(Stop::Stopped);
            }
            self.calls.push(len);
            Ok(())
        }
    }

    #[test]
    fn the_hook_runs_before_every_chunk_and_can_stop_the_reader() {
        let (file, bytes, _) = file_of(&[100; 20], &[]);
        let len = bytes.len() as u64;
        let chunk = 500;
        let mut hook = Counting { calls: Vec::new(), stop_after: usize::MAX };
        let mut buf = vec![0; chunk];
        let mut reader = BatchReader::new(file.as_file(), file.path(), 0..len, 1 << 20, &mut buf)
            .with_hook(&mut hook);
        let (batches, err) = read_all(&mut reader);
        if let Some(Stop::Read(e)) = &err {
            panic!("{e}");
        }
        assert!(err.is_none(), "{err:?}");
        assert_eq!(batches.len(), 20);
        let read = reader.bytes_read();
        assert_eq!(read, len);
        assert_eq!(hook.calls.iter().sum::<usize>() as u64, read, "one call per chunk, its size");
        assert!(hook.calls.iter().all(|&c| c <= chunk));
        assert!(hook.calls.len() as u64 >= len / chunk as u64);

        // Stopped before the third chunk: the hook's error, and no more reading.
        let mut hook = Counting { calls: Vec::new(), stop_after: 2 };
        let mut buf = vec![0; chunk];
        let mut reader = BatchReader::new(file.as_file(), file.path(), 0..len, 1 << 20, &mut buf)
            .with_hook(&mut hook);
        let (batches, err) = read_all(&mut reader);
        assert!(matches!(err, Some(Stop::Stopped)), "{err:?}");
        assert!(!batches.is_empty() && batches.len() < 20);
        let read = reader.bytes_read();
        assert_eq!(hook.calls.len(), 2);
        assert_eq!(read, hook.calls.iter().sum::<usize>() as u64, "nothing read after the stop");
    }

    #[test]
    fn skipping_to_a_batch_start_reads_on_from_there_and_not_what_was_skipped() {
        let (file, bytes, starts) = file_of(&[10, 700, 3, 2_000, 50, 400], &[]);
        let len = bytes.len() as u64;
        // A buffer holding a few batches (skips within it) and one smaller
        // than the skipped span (skips past it: nothing of it is read).
        for buffer in [4_000usize, 200] {
            let mut buf = vec![0; buffer];
            let mut reader =
                BatchReader::new(file.as_file(), file.path(), 0..len, 1 << 20, &mut buf);
            let (pos, _) = reader.next_batch().unwrap().unwrap();
            assert_eq!(pos, starts[0]);
            assert!(!reader.skip_to(0), "behind the reader");
            assert!(!reader.skip_to(len + 1), "past the range");
            assert!(reader.skip_to(starts[4]));
            let (pos, b) = reader.next_batch().unwrap().unwrap();
            assert_eq!(pos, starts[4]);
            assert_eq!(record_batch::BatchHeader::parse(b).unwrap().base_offset, 4);
            if buffer == 200 {
                let skipped = starts[4] - starts[1];
                // At most the first chunk overlaps the skipped batches.
                let most = len - skipped + buffer as u64;
                assert!(reader.bytes_read() <= most, "{} > {most}", reader.bytes_read());
            }
            assert!(reader.skip_to(starts[5]));
            assert_eq!(reader.next_batch().unwrap().unwrap().0, starts[5]);
            assert!(reader.skip_to(len));
            assert!(reader.next_batch().unwrap().is_none());
        }
    }

    #[test]
    fn reads_a_segment_from_a_position_to_an_end() {
        use crate::log::segment::SegmentConfig;
        let dir = tempfile::tempdir().unwrap();
        let config = SegmentConfig {
            index_interval_bytes: 0,
            max_index_size: 1 << 20,
            max_batch_size: 1 << 20,
        };
        let mut seg = LogSegment::create(dir.path(), 0, config, "", 0).unwrap();
        let mut starts = Vec::new();
        for i in 0..5 {
            starts.push(seg.size());
            seg.append(&batch(i, 30 * i as usize)).unwrap();
        }
        let mut buf = Vec::new();
        let mut reader = seg.batches(starts[2]..seg.size(), &mut buf);
        let mut offsets = Vec::new();
        while let Some((pos, b)) = reader.next_batch().unwrap() {
            offsets.push((pos, record_batch::BatchHeader::parse(b).unwrap().base_offset));
        }
        assert_eq!(offsets, vec![(starts[2], 2), (starts[3], 3), (starts[4], 4)]);
    }
}

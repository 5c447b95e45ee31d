//! Any bytes as a segment file read through the one `BatchReader` that
//! recovery, timestamp search, `dump-log` and the cleaner use, with any
//! range, batch limit, starting buffer and skips: it never panics, never
//! grows its buffer past the batch limit (or the buffer it was given), and
//! every batch it returns is the file's bytes at its position, contiguous
//! with the one before (or at the skip), inside the range, within the limit,
//! and whole and checked (its CRC too unless it defers the CRC). After an
//! error it returns no batch.
//!
//! Input: a flags byte (defer the CRC; skip to an offset after the first
//! batch; with readahead), the batch limit (4 bytes, bounded), the starting
//! buffer's length (2), the range's start and end (4 each), the skip
//! target (4), then the file.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sediment::log::batch_reader::BatchReader;
use sediment::log::record_batch::{check_batch, BatchHeader, LOG_OVERHEAD};

fuzz_target!(|data: &[u8]| {
    let mut f = common::Fields(data);
    let flags = f.u8();
    let max_batch = (f.u32() as usize) % (1 << 20);
    let initial = u16::from_be_bytes(f.bytes()) as usize % 4096;
    let (start, end, skip) =
        (f.u32() as u64 % 70_000, f.u32() as u64 % 70_000, f.u32() as u64 % 70_000);
    let file_bytes = f.rest();
    let path = common::scratch_dir().join("00000000000000000000.log");
    std::fs::write(&path, file_bytes).expect("write");
    let file = std::fs::File::open(&path).expect("open");
    let mut buf = vec![0u8; initial];
    let mut reader = BatchReader::new(&file, &path, start..end, max_batch, &mut buf);
    if flags & 1 != 0 {
        reader = reader.deferring_crc();
    }
    if flags & 4 != 0 {
        reader = reader.with_readahead(4096);
    }
    let mut expected = start;
    let mut batches = 0;
    loop {
        match reader.next_batch() {
            Ok(None) => break,
            Ok(Some((position, batch))) => {
                assert_eq!(position, expected);
                let at = position as usize;
                assert!(position + batch.len() as u64 <= end, "past the range");
                assert!(batch.len() <= max_batch, "over the limit");
                assert_eq!(batch, &file_bytes[at..at + batch.len()]);
                let header = if flags & 1 != 0 {
                    BatchHeader::parse(batch).expect("framed")
                } else {
                    check_batch(batch, max_batch).expect("checked")
                };
                assert_eq!(header.size_in_bytes(), batch.len());
                expected = position + batch.len() as u64;
                batches += 1;
                if batches == 1 && flags & 2 != 0 && reader.skip_to(skip) {
                    expected = skip;
                }
            }
            Err(_) => {
                assert!(!matches!(reader.next_batch(), Ok(Some(_))), "a batch after an error");
                break;
            }
        }
        assert_eq!(reader.position(), expected);
    }
    drop(reader);
    assert!(buf.len() <= initial.max(max_batch).max(LOG_OVERHEAD), "buffer of {} bytes", buf.len());
});

//! Producer state snapshots (Kafka's `ProducerSnapshot` v1 file, written and
//! read by its `ProducerStateManager`): `<offset, 20 digits>.snapshot` in the
//! partition directory, where offset is the first offset the state does not
//! cover. Layout (big-endian, not flexible):
//!
//! ```text
//! offset size  field
//!      0    2  version i16 = 1
//!      2    4  crc u32 = CRC32C of bytes [6, end)
//!      6    4  entry count i32
//!     10   46  per producer: producer_id i64, epoch i16, last_sequence i32,
//!              last_offset i64 (-1: no batch cached), offset_delta i32
//!              (last offset - first offset of the last batch), timestamp i64,
//!              coordinator_epoch i32, current_txn_first_offset i64 (-1: none)
//! ```
//!
//! Invariants:
//! * a file under its real name is whole: it is written through a fsynced
//!   temporary file and a rename (`checkpoint::write_atomically`);
//! * a reader accepts a file only if its version is 1, its length is exactly
//!   the header plus `count` entries (count bounded before anything is
//!   allocated) and its CRC matches; anything else is `Corrupt`, which the
//!   loader treats as a missing snapshot;
//! * entries are written in producer id order, so equal states give equal bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checkpoint::write_atomically;
use super::error::{LogError, Result};

/// File name suffix of a snapshot.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// The only version Kafka writes and reads.
pub const SNAPSHOT_VERSION: i16 = 1;
const CRC_OFFSET: usize = 2;
const ENTRIES_OFFSET: usize = 6;
const HEADER_SIZE: usize = 10;
/// Bytes per producer entry.
pub const ENTRY_SIZE: usize = 46;
/// Most entries read from one file (about 96 MiB); far above the producers
/// one partition can hold in memory.
pub const MAX_SNAPSHOT_ENTRIES: usize = 1 << 21;

/// One producer of a snapshot (Kafka's `ProducerSnapshot.ProducerEntry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SnapshotEntry {
    pub producer_id: i64,
    pub epoch: i16,
    /// Last sequence of the last cached batch, -1 if none.
    pub last_sequence: i32,
    /// Last offset of the last cached batch, -1 if none.
    pub last_offset: i64,
    /// Last offset minus first offset of that batch, 0 if none.
    pub offset_delta: i32,
    /// The producer's last timestamp.
    pub timestamp: i64,
    pub coordinator_epoch: i32,
    /// First offset of the open transaction, -1 if none.
    pub current_txn_first_offset: i64,
}

/// The path of the snapshot at `offset` in `dir`.
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

/// The bytes of a snapshot of `entries` (sorted by producer id).
pub fn encode(entries: &[SnapshotEntry]) -> Vec<u8> {
    let mut sorted = entries.to_vec();
    sorted.sort_unstable();
    let mut out = Vec::with_capacity(HEADER_SIZE + sorted.len() * ENTRY_SIZE);
    out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    // Never more than i32::MAX producers: each costs far more memory than that allows.
    out.extend_from_slice(&(sorted.len() as i32).to_be_bytes());
    for e in &sorted {
        out.extend_from_slice(&e.producer_id.to_be_bytes());
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&e.last_sequence.to_be_bytes());
        out.extend_from_slice(&e.last_offset.to_be_bytes());
        out.extend_from_slice(&e.offset_delta.to_be_bytes());
        out.extend_from_slice(&e.timestamp.to_be_bytes());
        out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        out.extend_from_slice(&e.current_txn_first_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out[ENTRIES_OFFSET..]);
    out[CRC_OFFSET..ENTRIES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    out
}

fn be<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&bytes[at..at + N]);
    a
}

/// Parse the bytes of a snapshot; `Err(reason)` for anything not whole.
pub fn decode(bytes: &[u8]) -> std::result::Result<Vec<SnapshotEntry>, String> {
    if bytes.len() < HEADER_SIZE {
        return Err(format!("{} bytes is shorter than the header", bytes.len()));
    }
    let version = i16::from_be_bytes(be(bytes, 0));
    if version != SNAPSHOT_VERSION {
        return Err(format!("unknown snapshot version {version}"));
    }
    let count = i32::from_be_bytes(be(bytes, ENTRIES_OFFSET));
    let count = usize::try_from(count)
        .ok()
        .filter(|&c| c <= MAX_SNAPSHOT_ENTRIES)
        .ok_or_else(|| format!("entry count {count} out of range"))?;
    let expected = HEADER_SIZE + count * ENTRY_SIZE;
    if bytes.len() != expected {
        return Err(format!("{} bytes for {count} entries ({expected} expected)", bytes.len()));
    }
    let stored = u32::from_be_bytes(be(bytes, CRC_OFFSET));
    let computed = crc32c::crc32c(&bytes[ENTRIES_OFFSET..]);
    if stored != computed {
        return Err(format!("CRC mismatch: stored {stored}, computed {computed}"));
    }
    let entries = bytes[HEADER_SIZE..]
        .chunks_exact(ENTRY_SIZE)
        .map(|c| SnapshotEntry {
            producer_id: i64::from_be_bytes(be(c, 0)),
            epoch: i16::from_be_bytes(be(c, 8)),
            last_sequence: i32::from_be_bytes(be(c, 10)),
            last_offset: i64::from_be_bytes(be(c, 14)),
            offset_delta: i32::from_be_bytes(be(c, 22)),
            timestamp: i64::from_be_bytes(be(c, 26)),
            coordinator_epoch: i32::from_be_bytes(be(c, 34)),
            current_txn_first_offset: i64::from_be_bytes(be(c, 38)),
        })
        .collect();
    Ok(entries)
}

/// Write the snapshot at `offset` atomically (replacing one already there).
///
/// # Errors
/// I/O errors; a file of the same name is then left as it was.
pub fn write(dir: &Path, offset: i64, entries: &[SnapshotEntry]) -> Result<PathBuf> {
    let path = snapshot_path(dir, offset);
    write_atomically(&path, &encode(entries))?;
    Ok(path)
}

/// Read the snapshot at `path`.
///
/// # Errors
/// I/O errors, and `Corrupt` for a file that is not a whole snapshot.
pub fn read(path: &Path) -> Result<Vec<SnapshotEntry>> {
    let corrupt = |reason: String| LogError::Corrupt { path: path.into(), position: 0, reason };
    let len = std::fs::metadata(path).map_err(LogError::io(path))?.len();
    if len > (HEADER_SIZE + MAX_SNAPSHOT_ENTRIES * ENTRY_SIZE) as u64 {
        return Err(corrupt(format!("{len} bytes is too large")));
    }
    let bytes = std::fs::read(path).map_err(LogError::io(path))?;
    decode(&bytes).map_err(corrupt)
}

/// The snapshots in `dir`, by offset. Temporary files are not listed.
///
/// # Errors
/// I/O errors listing the directory.
pub fn list(dir: &Path) -> Result<BTreeMap<i64, PathBuf>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(LogError::io(dir))? {
        let entry = entry.map_err(LogError::io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(SNAPSHOT_SUFFIX) else { continue };
        if stem.len() != 20 {
            continue;
        }
        if let Ok(offset) = stem.parse::<i64>() {
            out.insert(offset, entry.path());
        }
    }
    Ok(out)
}

/// Delete the temporary files of snapshot writes a crash interrupted
/// (`<offset>.tmp`: `write_atomically` names its temporary file so, and no
/// other file of a partition directory is written through one). Returns
/// how many went.
///
/// # Errors
/// I/O errors.
pub fn remove_unfinished(dir: &Path) -> Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).map_err(LogError::io(dir))? {
        let entry = entry.map_err(LogError::io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".tmp") else { continue };
        if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(LogError::io(&path))?;
            n += 1;
        }
    }
    Ok(n)
}

/// Delete the snapshot at `offset`, if any.
///
/// # Errors
/// I/O errors other than the file being absent.
pub fn delete(dir: &Path, offset: i64) -> Result<()> {
    let path = snapshot_path(dir, offset);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io(&path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i64) -> SnapshotEntry {
        SnapshotEntry {
            producer_id: pid,
            epoch: 3,
            last_sequence: 9,
            last_offset: 41,
            offset_delta: 4,
            timestamp: 1_700_000_000_000,
            coordinator_epoch: 7,
            current_txn_first_offset: -1,
        }
    }

    #[test]
    fn golden_bytes() {
        let e = SnapshotEntry { current_txn_first_offset: 37, ..entry(1000) };
        let bytes = encode(&[e]);
        let mut expected = vec![0x00, 0x01, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0x01];
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x03, 0xe8]); // producer id 1000
        expected.extend_from_slice(&[0x00, 0x03]); // epoch
        expected.extend_from_slice(&[0, 0, 0, 0x09]); // last sequence
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x29]); // last offset 41
        expected.extend_from_slice(&[0, 0, 0, 0x04]); // offset delta
        expected.extend_from_slice(&[0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00]); // timestamp
        expected.extend_from_slice(&[0, 0, 0, 0x07]); // coordinator epoch
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x25]); // txn first offset 37
        let crc = crc32c::crc32c(&expected[6..]);
        expected[2..6].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(bytes.len(), HEADER_SIZE + ENTRY_SIZE);
        assert_eq!(decode(&bytes).unwrap(), vec![e]);
        // The empty snapshot: version, CRC of a zero count, count.
        let empty = encode(&[]);
        let crc = crc32c::crc32c(&[0, 0, 0, 0]).to_be_bytes();
        assert_eq!(empty, [&[0, 1][..], &crc, &[0, 0, 0, 0]].concat());
    }

    #[test]
    fn sorted_by_producer_id() {
        let bytes = encode(&[entry(9), entry(2), entry(5)]);
        let pids: Vec<i64> = decode(&bytes).unwrap().iter().map(|e| e.producer_id).collect();
        assert_eq!(pids, vec![2, 5, 9]);
    }

    #[test]
    fn damage_is_refused() {
        let good = encode(&[entry(1), entry(2)]);
        assert!(decode(&good[..good.len() - 1]).unwrap_err().contains("expected"));
        assert!(decode(&good[..5]).unwrap_err().contains("header"));
        let mut flipped = good.clone();
        flipped[20] ^= 1;
        assert!(decode(&flipped).unwrap_err().contains("CRC"));
        let mut version = good.clone();
        version[1] = 2;
        assert!(decode(&version).unwrap_err().contains("version"));
        let mut count = good.clone();
        count[6..10].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decode(&count).unwrap_err().contains("out of range"));
        let mut huge = good;
        huge[6..10].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode(&huge).unwrap_err().contains("out of range"));
    }

    #[test]
    fn write_read_list_delete() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), 120, &[entry(4)]).unwrap();
        assert!(path.ends_with("00000000000000000120.snapshot"));
        write(dir.path(), 7, &[]).unwrap();
        std::fs::write(dir.path().join("00000000000000000120.log"), b"").unwrap();
        let listed = list(dir.path()).unwrap();
        assert_eq!(listed.keys().copied().collect::<Vec<_>>(), vec![7, 120]);
        assert_eq!(read(&path).unwrap(), vec![entry(4)]);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(matches!(read(&path), Err(LogError::Corrupt { .. })));
        delete(dir.path(), 120).unwrap();
        delete(dir.path(), 120).unwrap();
        assert_eq!(list(dir.path()).unwrap().len(), 1);
        // A write interrupted before its rename leaves a temporary file.
        std::fs::write(dir.path().join("00000000000000000130.tmp"), b"\0\x01").unwrap();
        std::fs::write(dir.path().join("partition.tmp"), b"").unwrap();
        assert_eq!(remove_unfinished(dir.path()).unwrap(), 1);
        assert!(dir.path().join("partition.tmp").exists());
        assert_eq!(list(dir.path()).unwrap().len(), 1);
    }
}

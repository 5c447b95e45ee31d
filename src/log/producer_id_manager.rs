//! Kafka's ProducerIdManager for one broker: producer ids are handed out from
//! blocks whose end is persisted in the first log dir, so an id is never issued
//! twice, even across restarts and crashes.
//!
//! The file `sediment-producer-id-block` holds one decimal number, the end of
//! the current block: every id below it may have been issued, none at or above
//! it has. Invariants:
//! * No id is issued from a block before that block's end is durable.
//! * On load, issuing resumes at the larger of the stored end and a floor the
//!   caller derives from the logs (one above the largest producer id in any
//!   partition's producer state), so a lost or damaged file cannot lead to an
//!   id that data on disk already carries.
//!
//! Taking a new block, step by step:
//! 1. Write the new end to `<file>.tmp`, fsync it, rename it over the file and
//!    fsync the dir ([`write_atomically`]). A crash before the rename leaves
//!    the old end, and no id of the new block has been issued yet; a crash
//!    after it makes the restart skip the rest of the new block (at most
//!    [`PRODUCER_ID_BLOCK_SIZE`] ids), never reissue one. A leftover `.tmp`
//!    is never read.
//! 2. Issue ids from the block in memory until it is used up.
//!
//! A stored end (or a floor) so close to `i64::MAX` that no whole block
//! fits after it issues no id: every call is an error (only a damaged file
//! holds such a number; Kafka's ids would run out the same way).
//!
//! In a cluster the blocks come from the cluster instead
//! ([`ProducerIdBlocks`], the brokers' shared key in etcd, as ZooKeeper-mode
//! brokers shared theirs), so no two brokers issue the same id; the file is
//! then not written.

use std::path::{Path, PathBuf};

use super::checkpoint::write_atomically;
use super::error::{LogError, Result};

/// Ids reserved on disk per write.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
/// The block file, in the first log dir.
pub const PRODUCER_ID_BLOCK_FILE: &str = "sediment-producer-id-block";

/// Where a cluster's brokers reserve blocks of producer ids (implemented
/// above this layer, over etcd).
pub trait ProducerIdBlocks: Send + Sync + std::fmt::Debug {
    /// Reserve the next block of the cluster that starts at or after
    /// `at_least`: its first id and the id after its last.
    ///
    /// # Errors
    /// The cluster could not be reached or the block not reserved; nothing
    /// is issued.
    fn next_block(&self, at_least: i64) -> Result<(i64, i64)>;
}

/// Issues producer ids; one per broker, behind the broker's lock.
#[derive(Debug)]
pub struct ProducerIdManager {
    path: PathBuf,
    next: i64,
    /// First id of the next block; ids below it are reserved on disk.
    block_end: i64,
    /// In a cluster, where blocks are reserved instead of the file.
    blocks: Option<std::sync::Arc<dyn ProducerIdBlocks>>,
}

impl ProducerIdManager {
    /// Read the block file in `dir`; issuing starts at its end or at
    /// `at_least`, whichever is larger. A missing file is a fresh broker; a
    /// file that is not a number counts as missing (the floor still applies).
    ///
    /// # Errors
    /// I/O errors reading the file, other than its absence.
    pub fn load(dir: &Path, at_least: i64) -> Result<Self> {
        let path = dir.join(PRODUCER_ID_BLOCK_FILE);
        let stored = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<i64>().unwrap_or_else(|_| {
                let path = path.display();
                tracing::warn!(%path, "producer id block is not a number; ignored");
                0
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(LogError::io(&path)(e)),
        };
        let next = stored.max(at_least);
        Ok(Self { path, next, block_end: next, blocks: None })
    }

    /// Take blocks from the cluster from now on; the rest of the current
    /// block (reserved by this broker's file) is dropped.
    pub fn use_cluster_blocks(&mut self, blocks: std::sync::Arc<dyn ProducerIdBlocks>) {
        self.blocks = Some(blocks);
        self.block_end = self.next;
    }

    /// Issue no id below `floor` from now on: ids found where the loader of
    /// `ProducerIdManager::load` cannot see them (`__transaction_state`
    /// values). Raising `next` past the block end only makes the next call
    /// persist a block starting there.
    pub fn raise_floor(&mut self, floor: i64) {
        self.next = self.next.max(floor);
    }

    /// The next producer id, taking (and persisting) a new block first when the
    /// current one is used up.
    ///
    /// # Errors
    /// The new block could not be persisted; no id is issued, and the next call
    /// tries again. No block fits below `i64::MAX` (`Corrupt`).
    pub fn generate_producer_id(&mut self) -> Result<i64> {
        if let Some(blocks) = self.blocks.as_ref().filter(|_| self.next >= self.block_end) {
            let (start, end) = blocks.next_block(self.next)?;
            if start < self.next || end <= start {
                return Err(LogError::Corrupt {
                    path: self.path.clone(),
                    position: 0,
                    reason: format!("the cluster gave block {start}..{end} below {}", self.next),
                });
            }
            (self.next, self.block_end) = (start, end);
        }
        if self.next >= self.block_end {
            let end =
                self.next.checked_add(PRODUCER_ID_BLOCK_SIZE).ok_or_else(|| LogError::Corrupt {
                    path: self.path.clone(),
                    position: 0,
                    reason: format!("no producer id block fits after {}", self.next),
                })?;
            write_atomically(&self.path, format!("{end}\n").as_bytes())?;
            self.block_end = end;
        }
        let id = self.next;
        self.next += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(dir: &Path) -> String {
        std::fs::read_to_string(dir.join(PRODUCER_ID_BLOCK_FILE)).unwrap()
    }

    #[test]
    fn ids_are_consecutive_and_the_block_end_is_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerIdManager::load(dir.path(), 0).unwrap();
        assert!(!dir.path().join(PRODUCER_ID_BLOCK_FILE).exists());
        assert_eq!(m.generate_producer_id().unwrap(), 0);
        assert_eq!(m.generate_producer_id().unwrap(), 1);
        assert_eq!(stored(dir.path()), format!("{PRODUCER_ID_BLOCK_SIZE}\n"));
    }

    /// Hands out the blocks it was given, recording what it was asked.
    type Given = Vec<(i64, i64)>;
    #[derive(Debug)]
    struct Blocks(parking_lot::Mutex<(Given, Vec<i64>)>);
    impl ProducerIdBlocks for Blocks {
        fn next_block(&self, at_least: i64) -> Result<(i64, i64)> {
            let mut s = self.0.lock();
            s.1.push(at_least);
            Ok(s.0.remove(0))
        }
    }

    #[test]
    fn a_cluster_hands_out_the_blocks_and_the_file_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerIdManager::load(dir.path(), 7).unwrap();
        let given = vec![(3000, 3002), (5000, 5001), (10, 20)];
        let blocks = std::sync::Arc::new(Blocks(parking_lot::Mutex::new((given, vec![]))));
        m.use_cluster_blocks(blocks.clone());
        let ids: Vec<i64> = (0..3).map(|_| m.generate_producer_id().unwrap()).collect();
        assert_eq!(ids, vec![3000, 3001, 5000]);
        assert!(m.generate_producer_id().is_err(), "a block below what was issued is refused");
        assert_eq!(blocks.0.lock().1, vec![7, 3002, 5001], "each asked past what was issued");
        assert!(!dir.path().join(PRODUCER_ID_BLOCK_FILE).exists());
    }

    /// Found by the checkpoints fuzz target: a block end near `i64::MAX`
    /// overflowed (and, without overflow checks, went on to issue negative ids).
    #[test]
    fn no_id_is_issued_past_the_last_whole_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PRODUCER_ID_BLOCK_FILE);
        std::fs::write(&path, format!("{}\n", i64::MAX - PRODUCER_ID_BLOCK_SIZE)).unwrap();
        let mut m = ProducerIdManager::load(dir.path(), 0).unwrap();
        assert_eq!(m.generate_producer_id().unwrap(), i64::MAX - PRODUCER_ID_BLOCK_SIZE);
        std::fs::write(&path, "9223372036854775000\n").unwrap();
        let mut m = ProducerIdManager::load(dir.path(), 0).unwrap();
        assert!(matches!(m.generate_producer_id(), Err(LogError::Corrupt { .. })));
        assert!(m.generate_producer_id().is_err(), "still none");
        assert_eq!(stored(dir.path()), "9223372036854775000\n", "nothing written");
    }

    #[test]
    fn an_id_is_never_reissued_after_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerIdManager::load(dir.path(), 0).unwrap();
        let issued: Vec<i64> = (0..3).map(|_| m.generate_producer_id().unwrap()).collect();
        drop(m);
        let mut m = ProducerIdManager::load(dir.path(), 0).unwrap();
        let next = m.generate_producer_id().unwrap();
        assert_eq!(next, PRODUCER_ID_BLOCK_SIZE);
        assert!(issued.iter().all(|id| *id < next));
        assert_eq!(stored(dir.path()), format!("{}\n", 2 * PRODUCER_ID_BLOCK_SIZE));
    }

    #[test]
    fn a_used_up_block_is_followed_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerIdManager::load(dir.path(), 0).unwrap();
        for expected in 0..=PRODUCER_ID_BLOCK_SIZE {
            assert_eq!(m.generate_producer_id().unwrap(), expected);
        }
        assert_eq!(stored(dir.path()), format!("{}\n", 2 * PRODUCER_ID_BLOCK_SIZE));
    }

    #[test]
    fn an_existing_file_is_kept_until_its_block_is_needed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(PRODUCER_ID_BLOCK_FILE), "5000\n").unwrap();
        let mut m = ProducerIdManager::load(dir.path(), 0).unwrap();
        assert_eq!(stored(dir.path()), "5000\n");
        assert_eq!(m.generate_producer_id().unwrap(), 5000);
        assert_eq!(stored(dir.path()), "6000\n");
    }

    #[test]
    fn the_floor_from_the_logs_wins_over_an_older_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(PRODUCER_ID_BLOCK_FILE), "1000\n").unwrap();
        let mut m = ProducerIdManager::load(dir.path(), 4321).unwrap();
        assert_eq!(m.generate_producer_id().unwrap(), 4321);
        let mut m = ProducerIdManager::load(dir.path(), 10).unwrap();
        assert_eq!(m.generate_producer_id().unwrap(), 4321 + PRODUCER_ID_BLOCK_SIZE);
    }

    #[test]
    fn a_damaged_file_falls_back_on_the_floor() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(PRODUCER_ID_BLOCK_FILE), "not a number").unwrap();
        let mut m = ProducerIdManager::load(dir.path(), 77).unwrap();
        assert_eq!(m.generate_producer_id().unwrap(), 77);
    }

    #[test]
    fn a_crash_before_the_rename_leaves_the_old_end() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(PRODUCER_ID_BLOCK_FILE), "2000\n").unwrap();
        // Step 1 died after writing the temporary file: it is not read.
        std::fs::write(dir.path().join(format!("{PRODUCER_ID_BLOCK_FILE}.tmp")), "3000\n").unwrap();
        let mut m = ProducerIdManager::load(dir.path(), 0).unwrap();
        assert_eq!(m.generate_producer_id().unwrap(), 2000);
        assert_eq!(stored(dir.path()), "3000\n");
    }

    #[test]
    fn a_failed_block_write_issues_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let mut m = ProducerIdManager::load(&gone, 0).unwrap();
        std::fs::remove_dir(&gone).unwrap();
        assert!(m.generate_producer_id().is_err());
        std::fs::create_dir(&gone).unwrap();
        assert_eq!(m.generate_producer_id().unwrap(), 0);
    }
}

//! The names of a partition directory's files (Kafka's `LogFileUtils`): a
//! segment's files are its base offset in 20 digits, an extension, and while
//! the cleaner or retention owns them a suffix (`.cleaned`, `.swap`,
//! `.deleted`).

use std::path::{Path, PathBuf};

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
pub const CLEANED_SUFFIX: &str = ".cleaned";
pub const SWAP_SUFFIX: &str = ".swap";
pub const DELETED_SUFFIX: &str = ".deleted";

/// Kafka's 20-digit file name prefix for a base offset.
pub fn filename_prefix(offset: i64) -> String {
    format!("{offset:020}")
}

pub fn log_file(dir: &Path, offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{}{LOG_SUFFIX}{suffix}", filename_prefix(offset)))
}
pub fn index_file(dir: &Path, offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{}{INDEX_SUFFIX}{suffix}", filename_prefix(offset)))
}
pub fn time_index_file(dir: &Path, offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{}{TIME_INDEX_SUFFIX}{suffix}", filename_prefix(offset)))
}
pub fn txn_index_file(dir: &Path, offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{}{TXN_INDEX_SUFFIX}{suffix}", filename_prefix(offset)))
}

/// Every file a segment may have, the `.log` first.
pub fn segment_files(dir: &Path, base: i64, suffix: &str) -> [PathBuf; 4] {
    [
        log_file(dir, base, suffix),
        index_file(dir, base, suffix),
        time_index_file(dir, base, suffix),
        txn_index_file(dir, base, suffix),
    ]
}

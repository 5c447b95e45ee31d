//! The cleaner's broker keys (`log.cleaner.*`, Kafka's `CleanerConfig`)
//! and the settings built from them. The per-topic knobs of compaction
//! (`min.cleanable.dirty.ratio`, the compaction lags, `delete.retention.ms`)
//! are topic keys, in `log::config`.

use super::cleaner::{CleanerConfig, CleanerError};
use crate::config_def::{broker_key, ConfigDef, ConfigTable, ConfigValues};

pub const LOG_CLEANER_ENABLE: ConfigDef = broker_key!(
    "log.cleaner.enable",
    Boolean,
    "true",
    None,
    "run the log cleaner threads (compacted topics are only compacted when true)"
);
pub const LOG_CLEANER_THREADS: ConfigDef = broker_key!(
    "log.cleaner.threads",
    Int,
    "1",
    Some(0.0),
    "cleaner threads; they share the dedupe buffer and the I/O limit"
);
pub const LOG_CLEANER_DEDUPE_BUFFER_SIZE: ConfigDef =
    broker_key!("log.cleaner.dedupe.buffer.size", Long, "134217728", Some(0.0),
    "bytes of offset map (24 per key) for all cleaner threads together, split evenly among them");
pub const LOG_CLEANER_IO_BUFFER_SIZE: ConfigDef = broker_key!("log.cleaner.io.buffer.size", Int, "524288", Some(0.0),
    "bytes of read plus write buffer for all cleaner threads together (each thread starts with its share, halved per buffer)");
pub const LOG_CLEANER_IO_BUFFER_LOAD_FACTOR: ConfigDef = broker_key!(
    "log.cleaner.io.buffer.load.factor",
    Double,
    "0.9",
    Some(0.0),
    "share of the offset map's slots that may be filled (above 0, at most 1)"
);
pub const LOG_CLEANER_IO_MAX_BYTES_PER_SECOND: ConfigDef = broker_key!(
    "log.cleaner.io.max.bytes.per.second",
    Double,
    "1.7976931348623157E308",
    Some(0.0),
    "read plus write bytes per second all cleaner threads together may use"
);
pub const LOG_CLEANER_BACKOFF_MS: ConfigDef = broker_key!(
    "log.cleaner.backoff.ms",
    Long,
    "15000",
    Some(0.0),
    "how long a cleaner thread sleeps when no log is eligible"
);
pub const LOG_CLEANER_UNCLEANABLE_RETRY_BACKOFF_MS: ConfigDef = broker_key!("log.cleaner.uncleanable.retry.backoff.ms", Long, "300000", Some(0.0),
    "sediment: how long a partition that failed to clean stays uncleanable before it is tried again (Kafka: until restart)");

/// The cleaner's keys, as the template and the reference show them.
pub const CLEANER_CONFIGS: ConfigTable = ConfigTable {
    title: "Log cleaner",
    note: "The cleaner threads. The per-topic knobs of compaction (min.cleanable.dirty.ratio,\n# min/max.compaction.lag.ms, delete.retention.ms) are topic defaults, below.",
    keys: &[&LOG_CLEANER_ENABLE, &LOG_CLEANER_THREADS, &LOG_CLEANER_DEDUPE_BUFFER_SIZE, &LOG_CLEANER_IO_BUFFER_SIZE, &LOG_CLEANER_IO_BUFFER_LOAD_FACTOR, &LOG_CLEANER_IO_MAX_BYTES_PER_SECOND, &LOG_CLEANER_BACKOFF_MS, &LOG_CLEANER_UNCLEANABLE_RETRY_BACKOFF_MS],
};

/// The keys a broker's dynamic config may change without a restart (Kafka's
/// `LogCleaner.ReconfigurableConfigs`); [`super::LogCleanerHandle::reconfigure`]
/// applies them.
pub const RECONFIGURABLE: &[&ConfigDef] = &[
    &LOG_CLEANER_THREADS,
    &LOG_CLEANER_DEDUPE_BUFFER_SIZE,
    &LOG_CLEANER_IO_BUFFER_SIZE,
    &LOG_CLEANER_IO_BUFFER_LOAD_FACTOR,
    &LOG_CLEANER_IO_MAX_BYTES_PER_SECOND,
    &LOG_CLEANER_BACKOFF_MS,
];

/// The broker's `log.cleaner.*` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LogCleanerConfig {
    pub enable: bool,
    pub num_threads: usize,
    pub dedupe_buffer_size: u64,
    pub io_buffer_size: usize,
    pub io_buffer_load_factor: f64,
    pub max_io_bytes_per_second: f64,
    pub backoff_ms: i64,
    pub uncleanable_retry_backoff_ms: i64,
    /// `message.max.bytes`: the largest batch a buffer may grow to.
    pub max_message_size: usize,
    /// Tiered storage is on, so the cleaner of store-only segments
    /// (`remote/store_cleaner.rs`) runs beside the threads: the budget is
    /// split into one share more, and the sum of all maps stays within it.
    pub store_share: bool,
}

impl Default for LogCleanerConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        Self {
            enable: true,
            num_threads: 1,
            dedupe_buffer_size: 128 << 20,
            io_buffer_size: 512 << 10,
            io_buffer_load_factor: 0.9,
            max_io_bytes_per_second: f64::MAX,
            backoff_ms: 15_000,
            uncleanable_retry_backoff_ms: 300_000,
            max_message_size: 1_048_588,
            store_share: false,
        }
    }
}

impl LogCleanerConfig {
    /// Whether `other` needs a new pool of threads (the count or a per-thread
    /// budget differs); the I/O limit and the backoff do not.
    pub(super) fn reshapes_pool(&self, other: &Self) -> bool {
        self.enable != other.enable
            || self.num_threads != other.num_threads
            || self.per_thread() != other.per_thread()
    }

    /// Whether each thread's share can hold an offset map (at least one
    /// entry, a load factor in (0, 1]), without allocating it.
    ///
    /// # Errors
    /// The offset map's refusal.
    pub fn validate(&self) -> Result<(), CleanerError> {
        let share = self.per_thread();
        super::offset_map::OffsetMap::check_budget(share.dedupe_buffer_size, share.load_factor)?;
        Ok(())
    }

    /// One thread's share (Kafka caps the map at 2 GiB per thread); the
    /// store cleaner, when there is one, gets the same share.
    pub fn per_thread(&self) -> CleanerConfig {
        let threads = self.num_threads.max(1) + usize::from(self.store_share);
        CleanerConfig {
            dedupe_buffer_size: (self.dedupe_buffer_size / threads as u64).min(i32::MAX as u64)
                as usize,
            load_factor: self.io_buffer_load_factor,
            io_buffer_size: (self.io_buffer_size / threads / 2).max(1),
            max_message_size: self.max_message_size,
        }
    }
}

impl LogCleanerConfig {
    /// The settings of `values`; `max_message_size` is the broker's
    /// `message.max.bytes` (a topic default) and `store_share` whether tiered
    /// storage is on (a key of `remote`).
    pub fn from_values(
        values: &dyn ConfigValues,
        max_message_size: usize,
        store_share: bool,
    ) -> Self {
        Self {
            enable: values.boolean(&LOG_CLEANER_ENABLE),
            num_threads: values.int(&LOG_CLEANER_THREADS).max(0) as usize,
            dedupe_buffer_size: values.int(&LOG_CLEANER_DEDUPE_BUFFER_SIZE).max(0) as u64,
            io_buffer_size: values.int(&LOG_CLEANER_IO_BUFFER_SIZE).max(0) as usize,
            io_buffer_load_factor: values.double(&LOG_CLEANER_IO_BUFFER_LOAD_FACTOR),
            max_io_bytes_per_second: values.double(&LOG_CLEANER_IO_MAX_BYTES_PER_SECOND),
            backoff_ms: values.int(&LOG_CLEANER_BACKOFF_MS).max(0),
            uncleanable_retry_backoff_ms: values
                .int(&LOG_CLEANER_UNCLEANABLE_RETRY_BACKOFF_MS)
                .max(0),
            max_message_size,
            store_share,
        }
    }
}

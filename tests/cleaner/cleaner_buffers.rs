//! The cleaner's I/O buffers start at `io_buffer_size`, grow for a batch that
//! does not fit (up to the largest allowed batch), shrink back afterwards, and
//! a batch larger than any allowed one is an error naming file and position.

use crate::common;

use std::sync::Arc;

use parking_lot::RwLock;

use crate::common::{append, clean_once, open_log, read_all};
use sediment::cleaner::{
    CancellationToken, Cleaner, CleanerConfig, CleanerError, LogToClean, Throttler,
};
use sediment::clock::MockClock;
use sediment::log::compression::Compression;

const NOW: i64 = 1_700_000_000_000;

#[test]
fn buffers_grow_for_a_large_batch_and_large_batches_beyond_the_limit_fail() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let mut log = open_log(
        dir.path(),
        "big",
        &[("cleanup.policy", "compact"), ("max.message.bytes", "300000")],
        clock.clone(),
    );
    let big = vec![b'x'; 200_000];
    append(&mut log, Compression::None, &[(NOW, Some(b"a"), Some(&big[..]))]);
    append(
        &mut log,
        Compression::Zstd,
        &[(NOW, Some(b"b"), Some(&big[..])), (NOW, Some(b"a"), Some(b"small"))],
    );
    append(&mut log, Compression::None, &[(NOW, Some(b"c"), Some(b"1"))]);
    append(&mut log, Compression::None, &[(NOW, Some(b"z"), Some(&big[..]))]);
    log.roll_if_not_empty().unwrap();
    let log = RwLock::new(log);

    let config = CleanerConfig {
        dedupe_buffer_size: 1 << 16,
        io_buffer_size: 4096,
        max_message_size: 300_000,
        ..CleanerConfig::default()
    };
    let mut c = Cleaner::new(
        0,
        config.clone(),
        Arc::new(Throttler::unlimited(clock.clone())),
        clock.clone(),
    )
    .unwrap();
    let r = clean_once(&mut c, &log, 0, NOW);
    assert!(r.stats.buffer_grows > 0, "{:?}", r.stats);
    let records = read_all(&log.read(), 0, 1 << 20);
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![1, 2, 3, 4], "the big first value of a was superseded");
    assert_eq!(records[0].value.as_deref(), Some(&big[..]));

    // The same log with a cleaner that may not grow that far (and a log whose
    // limit was lowered afterwards): the batch is refused, naming the file.
    let mut lowered = (**log.read().config()).clone();
    lowered.max_message_bytes = 10_000;
    log.write().update_config(Arc::new(lowered));
    let small = CleanerConfig { max_message_size: 10_000, ..config };
    let mut c =
        Cleaner::new(0, small, Arc::new(Throttler::unlimited(clock.clone())), clock.clone())
            .unwrap();
    let to_clean = LogToClean::new(&log.read(), 0, 5);
    match c.clean(&log, &to_clean, NOW, &CancellationToken::new()) {
        Err(e @ CleanerError::BatchTooLarge { .. }) => {
            assert!(e.to_string().contains(".log"), "{e}")
        }
        other => panic!("expected BatchTooLarge, got {other:?}"),
    }
    assert!(common::stray_files(dir.path()).iter().all(|f| f.ends_with(".deleted")));
}

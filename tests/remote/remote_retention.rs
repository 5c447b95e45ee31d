//! Local retention of a remote-enabled topic against moto's S3 server: a
//! compacted topic with `local.retention.ms=0` loses its local closed
//! segments only once the store's manifest lists them, its log start stays 0
//! (the store's offsets count) across a restart while EARLIEST_LOCAL moves
//! up, the manifests keep listing the segments only in the store so a
//! restore holds every offset, and with the store unreachable nothing more
//! is deleted locally until it answers again. And the cleaner keeps
//! tombstones while older segments are only in the store, where no clean
//! reaches the copies they delete.

use crate::broker;
use crate::common;

use std::path::Path;

use crate::broker::remote::*;
use crate::broker::{create_topic, kcat, TestBroker};
use sediment::log::TopicPartition;

const TOPIC: &str = "state";

/// (EARLIEST, EARLIEST_LOCAL) offsets of `state-0`.
fn earliest_offsets(b: &TestBroker) -> (i64, i64) {
    let ask = |timestamp: i64| {
        let (code, offset) = list_offset(b.port, TOPIC, timestamp);
        assert_eq!(code, 0, "ListOffsets {timestamp}");
        offset
    };
    (ask(-2), ask(-4))
}

/// The base of the first `.log` of a partition dir.
fn first_local_base(dir: &Path) -> i64 {
    *local_segments(dir).keys().next().expect("a segment")
}

/// Whether the store's latest manifest of `tp` lists every offset from 0 up
/// to `below` (the local copies of those may be gone), from offset 0.
fn store_covers(store: &sediment::remote::RemoteStore, tp: &TopicPartition, below: i64) -> bool {
    latest(store, tp).is_some_and(|(_, m)| {
        let from_zero = m.segments.first().is_some_and(|s| s.base_offset == 0);
        let contiguous = m.segments.windows(2).all(|w| w[0].next_offset == w[1].base_offset);
        m.log_start_offset == 0 && from_zero && contiguous && m.end_offset >= below
    })
}

/// Watch the partition until every closed segment has left local disk,
/// checking at each look that what left is listed in the store: the local
/// dir is read first, then the manifest, and manifests only grow, so a
/// segment deleted before its listing would be caught.
fn watch_local_deletion(b: &TestBroker, store: &sediment::remote::RemoteStore, dir: &Path) -> i64 {
    let tp = TopicPartition::new(TOPIC, 0);
    wait_logged(b, 90, "every closed segment to leave local disk", || {
        let first = first_local_base(dir);
        assert!(
            first == 0 || store_covers(store, &tp, first),
            "offsets below {first} left local disk before the store listed them"
        );
        (first > 0 && first == local_active_base(dir)).then_some(first)
    })
}

/// Every offset kcat reads from the beginning.
fn kcat_offsets(b: &TestBroker) -> Vec<i64> {
    let (ok, out, err) = kcat(
        &["-b", &b.bootstrap(), "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%o\\n"],
        "",
    );
    assert!(ok, "kcat: {err}");
    out.lines().map(|l| l.parse().expect("offset")).collect()
}

#[test]
fn local_copies_go_only_once_listed_and_the_store_keeps_every_offset() {
    let port = broker::free_port();
    let moto = Moto::start_on(&[], port);
    moto.create_bucket("bucket-retention");
    let url = "s3://bucket-retention/c";
    let store = open_store(url, Some(moto.endpoint()));
    let tp = TopicPartition::new(TOPIC, 0);
    let mut overrides = remote_overrides(url, &moto.endpoint(), 60_000);
    overrides
        .extend(["log.cleaner.enable=false".into(), "log.retention.check.interval.ms=200".into()]);
    let mut b = start(&overrides);
    let mut config = TOPIC_CONFIG.to_vec();
    config.push(("local.retention.ms", "0"));
    create_topic(b.port, TOPIC, 1, &config);
    let expected = produce_keyed(&b, TOPIC);
    let dir = b.data_dir().join("state-0");

    // Local copies go once listed; the log start stays 0, the local one moves.
    let local_start = watch_local_deletion(&b, &store, &dir);
    let (_, m) = latest(&store, &tp).expect("manifest");
    assert!(m.segments.len() >= 5, "{} segments listed", m.segments.len());
    assert_eq!(earliest_offsets(&b), (0, local_start));
    let store_only: f64 = m.segments.iter().map(|s| s.size() as f64).sum();
    wait_logged(&b, 30, "the store-only bytes gauge", || {
        let series = "sediment_remote_partition_store_only_bytes{partition=\"0\",topic=\"state\"}";
        (b.metric(series)? == store_only).then_some(())
    });

    // A restart keeps the log start (the checkpoint, not the first local base).
    b.stop();
    b.restart();
    assert_eq!(earliest_offsets(&b), (0, local_start));
    wait_logged(&b, 60, "the restarted broker to write a manifest from 0", || {
        store_covers(&store, &tp, local_start).then_some(())
    });

    // The store holds every offset: a restore serves them all, from 0. The
    // restored broker runs without tiered storage, so nothing leaves its disk.
    b.stop();
    let kept = b.data_dir().with_extension("kept");
    std::fs::rename(b.data_dir(), &kept).expect("set the data dir aside");
    let (ok, out, err) = restore(&moto, url, &b.data_dir());
    assert!(ok, "restore failed: {out}{err}");
    let plain: Vec<&str> = overrides
        .iter()
        .map(String::as_str)
        .filter(|o| !o.starts_with("remote.log.storage.system.enable"))
        .collect();
    b.set_overrides(&plain);
    b.restart();
    assert_eq!(earliest_offsets(&b), (0, 0));
    let offsets = kcat_offsets(&b);
    assert_eq!(offsets.first(), Some(&0));
    assert!(offsets.windows(2).all(|w| w[1] == w[0] + 1), "a gap in the restored offsets");
    assert!(*offsets.last().expect("records") + 1 >= local_start);
    let mut got = kcat_latest(&b, TOPIC);
    got.remove("filler");
    assert_eq!(got, expected, "every key's latest value after the restore");
    b.stop();
    std::fs::remove_dir_all(b.data_dir()).expect("remove the restored dir");
    std::fs::rename(&kept, b.data_dir()).expect("put the data dir back");
    b.set_overrides(&overrides.iter().map(String::as_str).collect::<Vec<_>>());
    b.restart();

    // The store goes away: segments roll, nothing leaves local disk.
    drop(moto);
    produce_keyed(&b, TOPIC);
    let errors = |b: &TestBroker| {
        b.metric("sediment_remote_store_errors_total{kind=\"unreachable\"}").unwrap_or(0.0)
    };
    let before = errors(&b);
    wait_logged(&b, 60, "several failed upload rounds", || {
        let lag = b.metric("sediment_remote_upload_lag_bytes{topic=\"state\"}")?;
        (lag > 0.0 && errors(&b) >= before + 3.0).then_some(())
    });
    assert_eq!(
        first_local_base(&dir),
        local_start,
        "a local segment went while the store was away"
    );
    assert!(local_active_base(&dir) > local_start, "no segment rolled during the outage");

    // It comes back (empty: moto keeps nothing); the broker uploads its
    // local segments again and deletes them once they are listed.
    let moto = Moto::start_on(&[], port);
    moto.create_bucket("bucket-retention");
    let tp2 = tp.clone();
    wait_logged(&b, 120, "deletion to resume", || {
        let first = first_local_base(&dir);
        if first > local_start {
            let (_, m) = latest(&store, &tp2).expect("a manifest before any deletion");
            assert!(m.end_offset >= first, "offsets below {first} left before being listed");
        }
        (first > local_start && first == local_active_base(&dir)).then_some(())
    });
    assert_eq!(earliest_offsets(&b).0, 0, "the log start stays");
    b.stop();
}

/// The records of key `k` left in a compacted, remote-enabled log after a
/// tombstone's horizon passed, with its oldest segment (`k`'s first value)
/// deleted locally (`in_store_only`) or still local.
fn key_after_horizon(in_store_only: bool) -> Vec<common::Rec> {
    use parking_lot::RwLock;
    use sediment::clock::MockClock;
    use sediment::log::compression::Compression;
    const NOW: i64 = 1_700_000_000_000;
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let pairs = [
        ("cleanup.policy", "compact"),
        ("remote.storage.enable", "true"),
        ("local.retention.ms", "0"),
        ("delete.retention.ms", "1000"),
    ];
    let mut log = common::open_log(dir.path(), "t", &pairs, clock.clone());
    // 0: k=v1 | 1: k=tombstone, 2: other | 3: other (active after the roll)
    common::append(&mut log, Compression::None, &[(NOW - 10, Some(b"k"), Some(b"v1"))]);
    log.roll_if_not_empty().unwrap();
    common::append(&mut log, Compression::None, &[(NOW - 10, Some(b"k"), None)]);
    common::append(&mut log, Compression::None, &[(NOW - 10, Some(b"o"), Some(b"x"))]);
    log.roll_if_not_empty().unwrap();
    common::append(&mut log, Compression::None, &[(NOW - 10, Some(b"o"), Some(b"y"))]);
    log.roll_if_not_empty().unwrap();
    if in_store_only {
        log.set_highest_offset_in_remote_storage(0);
        assert_eq!(log.delete_old_segments().unwrap(), 1);
        assert_eq!((log.log_start_offset(), log.local_log_start_offset()), (0, 1));
    }
    let log = RwLock::new(log);
    let mut cleaner = common::cleaner(1 << 20, clock.clone());
    // The first clean stamps the tombstone's horizon; the second is past it.
    let checkpoint = common::clean_fully(&mut cleaner, &log, 0, NOW);
    clock.advance(5000);
    common::clean_once(&mut cleaner, &log, checkpoint, NOW + 5000);
    let log = log.read();
    let start = log.local_log_start_offset();
    common::read_all(&log, start, 1 << 20)
        .into_iter()
        .filter(|r| r.key.as_deref() == Some(b"k"))
        .collect()
}

#[test]
fn tombstones_stay_while_older_segments_are_only_in_the_store() {
    // All local: the clean removed v1, then the tombstone past its horizon.
    assert_eq!(key_after_horizon(false), vec![]);
    // v1 only in the store: the tombstone stays, or a reader from offset 0
    // would end with k=v1.
    let kept = key_after_horizon(true);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!((kept[0].offset, kept[0].value.as_deref()), (1, None));
}

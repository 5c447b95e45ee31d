//! Total retention of a delete-policy remote topic against moto's S3
//! server: with `local.retention.bytes` small and `retention.bytes` a bit
//! larger, the segments only in the store beyond `retention.bytes` (measured
//! over the whole log, store-only bytes included) leave the manifest, their
//! objects are swept after the delete delay, ListOffsets EARLIEST moves to
//! the new log start (kept across a restart), and a consumer from the
//! beginning reads from there to the end with nothing missing.

use crate::broker;

use crate::broker::remote::*;
use crate::broker::{create_topic, kcat, TestBroker};
use sediment::log::TopicPartition;

const TOPIC: &str = "events";
const RETENTION_BYTES: u64 = 12_288;

/// ListOffsets of `events-0` at `timestamp` (-2 EARLIEST, -1 LATEST).
fn list_offset(b: &TestBroker, timestamp: i64) -> i64 {
    let (code, offset) = broker::remote::list_offset(b.port, TOPIC, timestamp);
    assert_eq!(code, 0, "ListOffsets {timestamp}");
    offset
}

#[test]
fn store_only_segments_beyond_retention_bytes_expire() {
    let moto = Moto::start(&[]);
    moto.create_bucket("bucket-expiry");
    let url = "s3://bucket-expiry/e";
    let store = open_store(url, Some(moto.endpoint()));
    let tp = TopicPartition::new(TOPIC, 0);
    let mut overrides = remote_overrides(url, &moto.endpoint(), 500);
    overrides.push("log.retention.check.interval.ms=200".into());
    let mut b = start(&overrides);
    let retention = RETENTION_BYTES.to_string();
    let config = [
        ("cleanup.policy", "delete"),
        ("segment.bytes", "4096"),
        ("remote.storage.enable", "true"),
        ("local.retention.bytes", "4096"),
        ("retention.bytes", retention.as_str()),
    ];
    create_topic(b.port, TOPIC, 1, &config);
    produce_keyed(&b, TOPIC);
    let end = list_offset(&b, -1);

    // Retention stops when dropping the oldest listed segment would take the
    // whole log (the listed segments and the active one) under the limit.
    let m = wait_logged(&b, 90, "the store-only segments beyond retention.bytes to expire", || {
        let (_, m) = latest(&store, &tp)?;
        let listed: u64 = m.segments.iter().map(|s| s.size()).sum();
        let first = m.segments.first()?.size();
        (m.log_start_offset > 0 && listed - first < RETENTION_BYTES).then_some(m)
    });
    let listed: u64 = m.segments.iter().map(|s| s.size()).sum();
    assert!(listed > RETENTION_BYTES / 2, "kept {listed} bytes: more than needed expired");
    assert_eq!(
        m.segments[0].base_offset, m.log_start_offset,
        "the manifest starts at the log start"
    );
    assert!(m.segments.iter().all(|s| s.max_timestamp > 0), "largest timestamps recorded");
    // The log start never goes past what the store held: some listed
    // segments are only in the store.
    let dir = b.data_dir().join(format!("{TOPIC}-0"));
    let local_first = *local_segments(&dir).keys().next().expect("a local segment");
    assert!(m.log_start_offset < local_first, "store-only segments kept below {local_first}");
    assert_eq!(list_offset(&b, -2), m.log_start_offset, "EARLIEST is the new log start");

    // The dropped segments' objects go after the delete delay.
    wait_logged(&b, 60, "the expired segments' objects to be swept", || {
        let (_, m) = latest(&store, &tp)?;
        let keys: std::collections::BTreeSet<String> = m.keys().map(str::to_string).collect();
        segment_objects(&store, &tp).is_subset(&keys).then_some(())
    });

    // From the beginning: the new log start to the end, nothing missing.
    let start = list_offset(&b, -2);
    let (ok, out, err) = kcat(
        &["-b", &b.bootstrap(), "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%o\\n"],
        "",
    );
    assert!(ok, "kcat: {err}");
    let offsets: Vec<i64> = out.lines().map(|l| l.parse().expect("offset")).collect();
    assert_eq!(offsets.first(), Some(&start));
    assert_eq!(offsets.last(), Some(&(end - 1)));
    assert!(offsets.windows(2).all(|w| w[1] == w[0] + 1), "a gap in the offsets read");

    // The moved log start survives a restart (its checkpoint; the store's
    // manifest agrees).
    b.stop();
    b.restart();
    assert_eq!(list_offset(&b, -2), start, "EARLIEST after a restart");
    b.stop();
}

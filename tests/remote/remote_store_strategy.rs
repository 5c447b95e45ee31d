//! A header-versioned topic (`sediment.compaction.strategy=header`) cleaned
//! in the object store, against moto's S3 server. Two kcat producers write
//! four versions of 40 rows out of order (versions 3, 1, 4, 2, in a
//! `version` header) while the topic is `cleanup.policy=delete`, so every
//! copy reaches the store and leaves local disk; turned to `compact` with
//! the header strategy, the store's segments are cleaned where they are and
//! a reader from offset 0 sees each row's version 4 — not its last write,
//! version 2, which the offset rule would keep.

use std::collections::BTreeMap;

use super::remote_store_compaction::{read_topic, stage_in_store, start_for_store_clean};
use crate::broker::remote::*;
use crate::broker::{kcat, produce, TestBroker, Wire};
use sediment::log::TopicPartition;

const TOPIC: &str = "tiered-cdc";
/// The order versions are written in, and the producer writing each.
const ROUNDS: [(u32, &str); 4] = [(3, "a"), (1, "b"), (4, "a"), (2, "b")];

/// Each row's versions, one kcat run per version (each its own producer).
fn write_versions(b: &TestBroker) {
    for (version, producer) in ROUNDS {
        let input: String = (0..40)
            .map(|k| format!("row{k:02}=v{version}-{producer}-{k:02}-{}\n", "x".repeat(150)))
            .collect();
        let header = format!("version={version}");
        let args = ["-b", &b.bootstrap(), "-P", "-t", TOPIC, "-p", "0", "-K", "=", "-H", &header];
        let (ok, _, err) = kcat(&args, &input);
        assert!(ok, "kcat producer {producer}, version {version}: {err}");
    }
    // Filler rolls the data out of the active segment, and fills a few
    // segments more: a store clean maps the store's last segment but never
    // rewrites it, so no version may be left there.
    let dir = b.data_dir().join(format!("{TOPIC}-0"));
    let mut w = Wire::connect(b.port);
    let now = crate::broker::now_ms();
    while local_active_base(&dir) < 190 {
        produce(&mut w, TOPIC, 0, now, &[("filler".into(), Some("f".repeat(500)))]);
    }
}

/// The rows' offsets, keys and values read from offset 0 (no filler).
fn read_all(b: &TestBroker) -> Vec<(i64, String, String)> {
    let rows = read_topic(b, TOPIC).into_iter();
    rows.filter(|(_, k, _)| k.starts_with("row")).collect()
}

#[test]
fn the_store_clean_keeps_the_highest_header_version() {
    let (moto, url, store, mut b) = start_for_store_clean("bucket-store-strategy");
    let tp = TopicPartition::new(TOPIC, 0);
    let staged = stage_in_store(&b, &store, TOPIC, write_versions);
    let before = read_all(&b);
    assert_eq!(before.len(), 160, "every version is in the store before the clean");

    let strategy = [
        ("cleanup.policy", "compact"),
        ("sediment.compaction.strategy", "header"),
        ("sediment.compaction.strategy.header", "version"),
    ];
    assert_eq!(alter_topic(b.port, TOPIC, &strategy), 0);
    let after = wait_logged(&b, 60, "one copy of each row after store cleans", || {
        let (_, m) = latest(&store, &tp)?;
        let after = read_all(&b);
        (m.store_clean_offset.is_some() && after.len() == 40).then_some(after)
    });
    let latest_manifest = latest(&store, &tp).expect("a manifest").1;
    assert!(latest_manifest.segments.len() < staged.segments.len(), "the store was rewritten");
    let mut rows: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, k, v) in &after {
        rows.entry(k.clone()).or_default().push(v.clone());
    }
    assert_eq!(rows.len(), 40, "every row is still there");
    for (k, values) in &rows {
        assert_eq!(values.len(), 1, "{k}: one copy after the store clean: {values:?}");
        assert!(values[0].starts_with("v4-a-"), "{k}: the highest version stays: {}", values[0]);
    }

    // A restore from the cleaned store serves the same.
    b.stop();
    std::fs::remove_dir_all(b.data_dir()).expect("remove the data dir");
    let (ok, out, err) = restore(&moto, &url, &b.data_dir());
    assert!(ok, "restore failed: {out}{err}");
    b.restart();
    assert_eq!(read_all(&b), after, "the restored log reads as the cleaned one");
    b.stop();
}

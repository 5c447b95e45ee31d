//! A compacted, remote-enabled topic read from the beginning when its
//! store-only segments were cleaned first, against moto's S3 server: the last
//! record of each of the two oldest segments is superseded and cleaned away,
//! then local retention leaves those two segments in the store only. The
//! offset after the second one's last record is in no store segment and
//! below the local start (a compaction gap at the boundary): a consumer that
//! reaches it must go on from the local start, as Kafka does, not get
//! OFFSET_OUT_OF_RANGE (which would send it to the end and lose keys).

use std::collections::BTreeMap;
use std::path::Path;

use crate::broker::remote::*;
use crate::broker::{create_topic, now_ms, produce, Wire};
use sediment::log::TopicPartition;

const TOPIC: &str = "gapped";

/// Base offsets and sizes of the partition's `.log` files.
fn segments(dir: &Path) -> BTreeMap<i64, u64> {
    std::fs::read_dir(dir)
        .expect("partition dir")
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().to_string_lossy().into_owned();
            let base = name.strip_suffix(".log")?.parse().ok()?;
            Some((base, e.metadata().ok()?.len()))
        })
        .collect()
}

#[test]
fn a_compaction_gap_at_the_local_start_is_read_past_by_every_consumer() {
    let moto = Moto::start(&[]);
    moto.create_bucket("bucket-gap");
    let url = "s3://bucket-gap/c";
    let store = open_store(url, Some(moto.endpoint()));
    let tp = TopicPartition::new(TOPIC, 0);
    let mut overrides = remote_overrides(url, &moto.endpoint(), 60_000);
    overrides.push("log.retention.check.interval.ms=200".into());
    let b = start(&overrides);
    let config = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "4096"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("remote.storage.enable", "true"),
        ("retention.ms", "-1"),
        ("local.retention.ms", "-1"),
    ];
    create_topic(b.port, TOPIC, 1, &config);
    let dir = b.data_dir().join(format!("{TOPIC}-0"));
    let mut w = Wire::connect(b.port);
    let mut latest_values = BTreeMap::new();
    let mut put = |w: &mut Wire, key: String, round: u32| {
        let value = format!("{key}-v{round}-{}", "x".repeat(300));
        latest_values.insert(key.clone(), value.clone());
        produce(w, TOPIC, 0, now_ms(), &[(key, Some(value))]);
    };
    // One record per batch until three segments are closed.
    let mut i = 0;
    while segments(&dir).len() < 4 {
        put(&mut w, format!("k{i:03}"), 0);
        i += 1;
    }
    let bases: Vec<i64> = segments(&dir).keys().copied().collect();
    let (second, third) = (bases[1], bases[2]);
    // Supersede the last record of the first two segments, then fill until
    // those updates are in a closed segment the cleaner maps.
    put(&mut w, format!("k{:03}", second - 1), 1);
    put(&mut w, format!("k{:03}", third - 1), 1);
    let updated_at = i64::from(i) + 1;
    while *segments(&dir).keys().last().expect("a segment") <= updated_at {
        put(&mut w, format!("k{i:03}"), 0);
        i += 1;
    }

    // Cleaned, and the store lists the cleaned segments.
    wait_logged(&b, 60, "a clean past the updates, mirrored in the store", || {
        latest(&store, &tp).filter(|(_, m)| {
            m.clean_offset.is_some_and(|c| c > updated_at) && mirrors(&store, &tp, m, &dir)
        })
    });
    // Local retention keeps the third segment on: the first two are store-only.
    let kept: u64 = segments(&dir).range(third..).map(|(_, size)| size).sum();
    let retention = [("local.retention.bytes", kept.to_string())];
    let retention: Vec<(&str, &str)> = retention.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(alter_topic(b.port, TOPIC, &retention), 0);
    wait_logged(&b, 60, "the first two segments to leave local disk", || {
        let local = segments(&dir);
        (!local.contains_key(&0) && !local.contains_key(&second)).then_some(())
    });
    assert!(segments(&dir).contains_key(&third), "the third segment went too");
    let (_, m) = latest(&store, &tp).expect("manifest");
    let last_store_only = m.segments.iter().find(|s| s.base_offset == second).expect("listed");
    assert!(
        last_store_only.next_offset < third,
        "the cleaned segment should end before {third} (a gap): {last_store_only:?}"
    );

    // kcat (librdkafka) from the beginning reads every key's latest value.
    let got = kcat_latest(&b, TOPIC);
    let wrong: Vec<&String> =
        latest_values.iter().filter(|(k, v)| got.get(*k) != Some(v)).map(|(k, _)| k).collect();
    assert!(wrong.is_empty(), "{} keys missing or stale, from {:?}", wrong.len(), wrong.first());
    assert_eq!(got.len(), latest_values.len(), "keys never written");
}

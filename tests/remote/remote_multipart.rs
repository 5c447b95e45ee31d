//! Multipart uploads against moto's S3 server: a topic whose segments are
//! larger than `store::PART_BYTES` is uploaded in parts (the object's ETag
//! says how many), listed by its manifest only once read back, and restored
//! byte for byte.

use crate::broker;

use crate::broker::remote::*;
use crate::broker::{create_topic, produce, Wire};
use sediment::log::TopicPartition;
use sediment::remote::store::PART_BYTES;

const SEGMENT_BYTES: u64 = 40 << 20;

/// The broker's peak resident set (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn segments_larger_than_a_part_go_up_in_parts_and_restore_byte_identical() {
    let moto = Moto::start(&[]);
    moto.create_bucket("bucket-multipart");
    let url = "s3://bucket-multipart/cluster";
    let store = open_store(url, Some(moto.endpoint()));
    let tp = TopicPartition::new("big", 0);
    let mut overrides = remote_overrides(url, &moto.endpoint(), 60_000);
    overrides.push("log.cleaner.enable=false".into());
    let mut b = start(&overrides);
    let segment_bytes = SEGMENT_BYTES.to_string();
    create_topic(
        b.port,
        "big",
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", &segment_bytes),
            ("remote.storage.enable", "true"),
        ],
    );
    // Big batches of distinct keys until the first segment rolls.
    let dir = b.data_dir().join("big-0");
    let mut w = Wire::connect(b.port);
    let now = broker::now_ms();
    let mut n = 0u64;
    while local_active_base(&dir) == 0 {
        let records: Vec<(String, Option<String>)> = (0..100)
            .map(|_| {
                n += 1;
                let value = format!("{n:016x}").repeat(500);
                (format!("k{n}"), Some(value))
            })
            .collect();
        produce(&mut w, "big", 0, now, &records);
    }

    let (_, m) = wait_logged(&b, 120, "the manifest to list the closed segment", || {
        latest(&store, &tp).filter(|(_, m)| !m.segments.is_empty())
    });
    let log = m.segments[0].files.iter().find(|f| f.ext == "log").expect("a .log");
    assert!(log.size > 2 * PART_BYTES, "a {} byte segment is not several parts", log.size);
    let parts = log.size.div_ceil(PART_BYTES);
    let (objects, _) = rt().block_on(store.list(&format!("topics/{tp}/segments"))).expect("list");
    let object = objects
        .iter()
        .find(|o| o.location.filename() == log.key.strip_prefix("segments/"))
        .expect("the .log object listed");
    assert_eq!(object.size, log.size);
    let etag = object.e_tag.clone().unwrap_or_default();
    assert!(etag.trim_matches('"').ends_with(&format!("-{parts}")), "not {parts} parts: {etag}");
    if let Some(kib) = peak_rss_kib(b.pid()) {
        eprintln!(
            "broker peak RSS (VmHWM) after a {} MiB upload: {} MiB",
            log.size >> 20,
            kib >> 10
        );
    }
    b.stop();

    // Restored byte for byte, from the store alone.
    let restored = b.dir.path().join("restored");
    let (ok, out, err) = restore(&moto, url, &restored);
    assert!(ok, "restore failed: {out}{err}");
    let mut restored_segments = local_segments(&restored.join("big-0"));
    restored_segments.pop_last();
    let local = local_closed(&dir);
    assert_eq!(restored_segments.keys().collect::<Vec<_>>(), local.keys().collect::<Vec<_>>());
    assert!(restored_segments == local, "restored segments differ from the local ones");
}

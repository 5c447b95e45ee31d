//! Compaction in the store, against moto's S3 server. A topic's closed
//! segments are uploaded and leave local disk (`local.retention.bytes`)
//! while it is `cleanup.policy=delete`, so the store holds every version of
//! every key and nothing is cleaned; turned to `compact`, the store's
//! segments are cleaned where they are: fewer bytes and objects in the
//! bucket, every key's latest value still read from the beginning, and a
//! SIGKILL before or after the clean's manifest switch loses, duplicates and
//! leaves behind nothing.

use std::collections::{BTreeMap, BTreeSet};

use crate::broker::remote::*;
use crate::broker::{create_topic, http_get, kcat, TestBroker};
use sediment::failpoint;
use sediment::log::TopicPartition;
use sediment::remote::crash_point::{STORE_CLEAN_AFTER_MANIFEST, STORE_CLEAN_BEFORE_MANIFEST};
use sediment::remote::manifest::{self, Manifest};
use sediment::remote::RemoteStore;
use serde_json::Value;

const TOPIC: &str = "tiered";

fn listed_bytes(m: &Manifest) -> u64 {
    m.segments.iter().map(|s| s.size()).sum()
}

fn log_objects(store: &RemoteStore, tp: &TopicPartition) -> usize {
    segment_objects(store, tp).iter().filter(|k| k.ends_with(".log")).count()
}

/// What the store held before any clean.
struct Staged {
    latest: BTreeMap<String, String>,
    bytes: u64,
    log_objects: usize,
}

/// moto with `bucket`, the store's URL in it, the store, and a broker
/// uploading there that checks retention every 200 ms.
pub(super) fn start_for_store_clean(bucket: &str) -> (Moto, String, RemoteStore, TestBroker) {
    let moto = Moto::start(&[]);
    moto.create_bucket(bucket);
    let url = format!("s3://{bucket}/c");
    let store = open_store(&url, Some(moto.endpoint()));
    let mut overrides = remote_overrides(&url, &moto.endpoint(), 1500);
    overrides.push("log.retention.check.interval.ms=200".into());
    let b = start(&overrides);
    (moto, url, store, b)
}

/// Partition 0 of `topic` created under `cleanup.policy=delete`, written
/// by `write`, and waited for until every closed segment is in the store
/// only: the store's manifest then.
pub(super) fn stage_in_store(
    b: &TestBroker,
    store: &RemoteStore,
    topic: &str,
    write: impl FnOnce(&TestBroker),
) -> Manifest {
    let config = [
        ("cleanup.policy", "delete"),
        ("segment.bytes", "4096"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("remote.storage.enable", "true"),
        ("retention.ms", "-1"),
        ("local.retention.bytes", "1"),
    ];
    create_topic(b.port, topic, 1, &config);
    write(b);
    let tp = TopicPartition::new(topic, 0);
    let dir = b.data_dir().join(tp.to_string());
    wait_logged(b, 60, "every closed segment in the store only", || {
        let active = local_active_base(&dir);
        let (_, m) = latest_manifest(store, &tp)?;
        (local_segments(&dir).len() == 1 && m.end_offset == active).then_some(m)
    })
}

/// Four versions of 40 keys (and filler) under `cleanup.policy=delete`,
/// waited for until every closed segment is in the store only.
fn stage(b: &TestBroker, store: &RemoteStore, tp: &TopicPartition) -> Staged {
    let mut latest = BTreeMap::new();
    let m = stage_in_store(b, store, TOPIC, |b| latest = produce_keyed(b, TOPIC));
    latest.remove("filler");
    assert!(m.segments.len() >= 6, "a small store: {} segments", m.segments.len());
    Staged { latest, bytes: listed_bytes(&m), log_objects: log_objects(store, tp) }
}

fn latest_manifest(store: &RemoteStore, tp: &TopicPartition) -> Option<(u64, Manifest)> {
    latest(store, tp)
}

/// The store cleaned: under half the bytes, the clean point set.
fn cleaned(store: &RemoteStore, tp: &TopicPartition, before: &Staged) -> Option<Manifest> {
    let (_, m) = latest_manifest(store, tp)?;
    (m.store_clean_offset.is_some() && listed_bytes(&m) * 2 < before.bytes).then_some(m)
}

/// Offsets and key=value of the topic as kcat reads it from the beginning.
fn read_all(b: &TestBroker) -> Vec<(i64, String, String)> {
    read_topic(b, TOPIC)
}

/// Offsets and key=value of `topic` as kcat reads it from the beginning.
pub(super) fn read_topic(b: &TestBroker, topic: &str) -> Vec<(i64, String, String)> {
    let (ok, out, err) = kcat(
        &[
            "-b",
            &b.bootstrap(),
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o %k=%s\\n",
        ],
        "",
    );
    assert!(ok, "kcat: {err}");
    out.lines()
        .filter_map(|l| {
            let (offset, kv) = l.split_once(' ')?;
            let (k, v) = kv.split_once('=')?;
            Some((offset.parse().ok()?, k.to_string(), v.to_string()))
        })
        .collect()
}

/// Every key's latest value, each offset once and in order.
fn assert_latest_values(b: &TestBroker, expected: &BTreeMap<String, String>, what: &str) {
    let read = read_all(b);
    assert!(
        read.windows(2).all(|w| w[0].0 < w[1].0),
        "{what}: an offset read twice or out of order"
    );
    let mut got: BTreeMap<String, String> = read.into_iter().map(|(_, k, v)| (k, v)).collect();
    got.remove("filler");
    assert_eq!(got.len(), expected.len(), "{what}: keys missing");
    let stale: Vec<&String> =
        expected.iter().filter(|(k, v)| got.get(*k) != Some(v)).map(|(k, _)| k).collect();
    assert!(stale.is_empty(), "{what}: {} keys stale, from {:?}", stale.len(), stale.first());
}

/// Past the delete delay: the bucket holds what the latest manifest lists,
/// no more, and older manifests are gone.
fn wait_swept(b: &TestBroker, store: &RemoteStore, tp: &TopicPartition) -> Manifest {
    wait_logged(b, 60, "replaced objects and old manifests to be swept", || {
        let (_, m) = latest_manifest(store, tp)?;
        let listed: BTreeSet<String> = m.keys().map(str::to_string).collect();
        let manifests = rt().block_on(manifest::list_manifests(store, tp)).ok()?;
        (segment_objects(store, tp) == listed && manifests.len() == 1).then_some(m)
    })
}

/// The tiered partition's entry in `/cleaner-status`.
fn cleaner_status(b: &TestBroker) -> Value {
    let (code, body) = http_get(b.metrics_port, "/cleaner-status");
    assert_eq!(code, 200, "{body}");
    let doc: Value = serde_json::from_str(&body).expect("cleaner-status JSON");
    let partitions = doc["manager"]["partitions"].as_array().cloned().unwrap_or_default();
    partitions.into_iter().find(|p| p["topic"] == TOPIC).unwrap_or(Value::Null)
}

/// `/key-audit` of `key` in the topic.
fn key_audit(b: &TestBroker, key: &str) -> Value {
    let (code, body) = http_get(b.metrics_port, &format!("/key-audit?topic={TOPIC}&key={key}"));
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("key-audit JSON")
}

/// Before any store clean: the store measured fully dirty, counted by
/// max-dirty-percent and `sediment cleaner-status`; the four versions of a
/// key in the store's segments, with no guarantee while the ratio holds.
fn views_show_the_uncleaned_store(b: &TestBroker) {
    let store = wait_logged(b, 60, "the store measured in cleaner-status", || {
        let p = cleaner_status(b);
        p["store"]["cleaning"].is_object().then(|| p["store"].clone())
    });
    assert_eq!(store["cleaning"]["dirty_ratio"], 1.0, "{store}");
    assert_eq!(store["tiered_dirty_ratio"], 1.0, "{store}");
    assert!(store["store_only_segments"].as_u64() >= Some(6), "{store}");
    assert_eq!(store["store_only_bytes"], store["remote_bytes"], "{store}");
    assert_eq!(b.metric("kafka_log_logcleanermanager_max_dirty_percent"), Some(100.0));
    let metrics = format!("127.0.0.1:{}", b.metrics_port);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(["cleaner-status", "--metrics", &metrics])
        .output()
        .expect("sediment cleaner-status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("store dirty ratio 1.000"), "{text}");

    let audit = key_audit(b, "k07");
    let copies = audit["copies"].as_array().cloned().unwrap_or_default();
    assert_eq!(copies.len(), 4, "{audit:#}");
    assert!(copies.iter().all(|c| c["region"] == "store"), "{audit:#}");
    let why = copies[0]["no_guarantee"].as_str().unwrap_or_default();
    assert!(why.contains("not above min.cleanable.dirty.ratio"), "{audit:#}");
    assert_eq!(audit["verdict"], "pending");
    assert!(audit["store"]["segments_read"].as_u64() >= Some(6), "{audit:#}");
}

/// After the store clean: one copy of the key left in the store, and the
/// clean in the store's status.
fn views_show_the_cleaned_store(b: &TestBroker) {
    let audit = key_audit(b, "k07");
    let copies = audit["copies"].as_array().cloned().unwrap_or_default();
    assert_eq!(copies.len(), 1, "{audit:#}");
    assert_eq!((&copies[0]["region"], &audit["verdict"]), (&"store".into(), &"live".into()));
    let store = cleaner_status(b)["store"].clone();
    let cleaning = &store["cleaning"];
    assert_eq!(cleaning["dirty_ratio"], 0.0, "{store}");
    assert!(cleaning["clean_offset"].as_i64() > Some(0), "{store}");
    assert!(cleaning["last_clean"]["bytes_read"].as_u64() > Some(0), "{store}");
    assert!(cleaning["last_error"].is_null(), "{store}");
}

/// `sediment key-audit --data-dir` of a stopped broker: the key's copies
/// are all in the store, which it does not read, so no verdict but
/// `incomplete`, and says why.
fn offline_audit_says_the_store_was_not_read(b: &TestBroker) {
    let data = b.data_dir();
    let args =
        ["key-audit", "--data-dir", data.to_str().unwrap(), "--topic", TOPIC, "--key", "k07"];
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(args)
        .output()
        .expect("sediment key-audit");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("verdict: incomplete"), "{text}");
    assert!(text.contains("only in the object store and were not read"), "{text}");
}

#[test]
fn segments_only_in_the_store_are_compacted_there() {
    let (moto, url, store, mut b) = start_for_store_clean("bucket-store-clean");
    let url = url.as_str();
    let tp = TopicPartition::new(TOPIC, 0);
    let before = stage(&b, &store, &tp);
    assert_latest_values(&b, &before.latest, "before the clean");

    // Compacted, with no clean allowed yet (a ratio is never above 1): the
    // cleaner's views show the store's part and every version in it.
    let hold = [("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "1")];
    assert_eq!(alter_topic(b.port, TOPIC, &hold), 0);
    views_show_the_uncleaned_store(&b);
    assert_eq!(alter_topic(b.port, TOPIC, &[("min.cleanable.dirty.ratio", "0.01")]), 0);
    let m = wait_logged(&b, 60, "the store's segments cleaned", || cleaned(&store, &tp, &before));
    assert_eq!(m.log_start_offset, 0, "the log start moved");
    let m = wait_swept(&b, &store, &tp);
    let after = log_objects(&store, &tp);
    assert!(
        after < before.log_objects && listed_bytes(&m) * 2 < before.bytes,
        "objects {} -> {after}, bytes {} -> {}",
        before.log_objects,
        before.bytes,
        listed_bytes(&m)
    );
    assert!(b.log().contains("segments in the store cleaned"), "{}", b.log());
    let cleans = b.metric("sediment_remote_store_cleans_total").unwrap_or(0.0);
    let removed = b.metric("sediment_remote_store_clean_removed_bytes_total").unwrap_or(0.0);
    assert!(cleans >= 1.0 && removed > 0.0, "{cleans} cleans removed {removed} bytes");
    let ratio = r#"sediment_remote_partition_store_dirty_ratio{partition="0",topic="tiered"}"#;
    assert_eq!(b.metric(ratio), Some(0.0), "nothing dirty in the store after the clean");
    assert_latest_values(&b, &before.latest, "after the clean");
    views_show_the_cleaned_store(&b);
    b.stop();
    offline_audit_says_the_store_was_not_read(&b);

    // A restore from the cleaned store serves every latest value.
    std::fs::remove_dir_all(b.data_dir()).expect("remove the data dir");
    let (ok, out, err) = restore(&moto, url, &b.data_dir());
    assert!(ok, "restore failed: {out}{err}");
    b.restart();
    assert_latest_values(&b, &before.latest, "after a restore");
    b.stop();
}

/// Stage, turn compaction on with the broker set to SIGKILL itself at
/// `point` of the store clean, restart it and check the store.
fn crash_at(moto: &Moto, point: &str) {
    let bucket = format!("bucket-{point}");
    moto.create_bucket(&bucket);
    let url = format!("s3://{bucket}/c");
    let store = open_store(&url, Some(moto.endpoint()));
    let tp = TopicPartition::new(TOPIC, 0);
    let mut overrides = remote_overrides(&url, &moto.endpoint(), 1500);
    overrides.push("log.retention.check.interval.ms=200".into());
    let o: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let mut env: Vec<(&str, &str)> = CREDS.to_vec();
    let setting = failpoint::setting(point, None);
    env.push((failpoint::ENV, setting.as_str()));
    let mut b = TestBroker::start_with_env(&o, &env);
    let before = stage(&b, &store, &tp);

    assert_eq!(alter_topic(b.port, TOPIC, &[("cleanup.policy", "compact")]), 0);
    let status = b.wait_exit(60);
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{point}");
    // (The config change itself may have been written in a manifest first.)
    let (_, m) = latest_manifest(&store, &tp).expect("manifest");
    let listed: BTreeSet<String> = m.keys().map(str::to_string).collect();
    if point == STORE_CLEAN_BEFORE_MANIFEST {
        assert!(m.store_clean_offset.is_none(), "{point}: the clean's manifest was written");
        assert!(!segment_objects(&store, &tp).is_subset(&listed), "{point}: nothing uploaded");
    } else {
        assert!(m.store_clean_offset.is_some(), "{point}: no clean's manifest: {m:?}");
    }

    b.set_env(CREDS);
    b.restart();
    wait_logged(&b, 60, "the store's segments cleaned", || cleaned(&store, &tp, &before));
    let m = wait_swept(&b, &store, &tp);
    let bases: BTreeSet<i64> = m.segments.iter().map(|s| s.base_offset).collect();
    assert_eq!(bases.len(), m.segments.len(), "{point}: a segment listed twice");
    assert_latest_values(&b, &before.latest, point);
    b.stop();
}

#[test]
fn a_sigkill_at_each_step_of_a_store_clean_loses_and_leaves_nothing() {
    let moto = Moto::start(&[]);
    for point in [STORE_CLEAN_BEFORE_MANIFEST, STORE_CLEAN_AFTER_MANIFEST] {
        crash_at(&moto, point);
    }
}

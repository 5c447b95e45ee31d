//! Tiered storage under faults, against moto's S3 server: deleted topics are
//! retired from the store (restore skips them, the sweep empties them, a
//! topic created again under the name goes on after them), store errors
//! never show credentials, and a SIGKILL at each step of the manifest switch
//! loses, duplicates and leaves behind nothing.

use std::collections::BTreeSet;
use std::process::Command;

use crate::broker::remote::*;
use crate::broker::{create_topic, run, TestBroker, Wire};
use sediment::failpoint;
use sediment::log::TopicPartition;
use sediment::remote::crash_point::{AFTER_MANIFEST, BEFORE_MANIFEST, MID_SWEEP};
use sediment::remote::manifest;
use sediment::remote::RemoteStore;

fn delete_topic(port: u16, name: &str) {
    use kafka_protocol::messages::{DeleteTopicsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let r = Wire::connect(port).call(
        4,
        &DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(StrBytes::from_string(name.into()))])
            .with_timeout_ms(10_000),
    );
    assert_eq!(r.responses[0].error_code, 0, "delete {name}");
}

/// The manifest numbers of `tp` in the store, in order.
fn manifest_seqs(store: &RemoteStore, tp: &TopicPartition) -> Vec<u64> {
    let listed = rt().block_on(manifest::list_manifests(store, tp)).expect("list manifests");
    listed.into_iter().map(|(seq, _)| seq).collect()
}

/// Whether the store holds nothing of `tp` any more.
fn swept(store: &RemoteStore, tp: &TopicPartition) -> bool {
    segment_objects(store, tp).is_empty() && manifest_count(store, tp) == 0
}

#[test]
fn deleted_and_disabled_topics_are_retired_swept_and_not_restored_and_a_new_one_goes_on() {
    let moto = Moto::start(&[]);
    moto.create_bucket("bucket-retire");
    let url = "s3://bucket-retire/c";
    let store = open_store(url, Some(moto.endpoint()));
    let mut overrides = remote_overrides(url, &moto.endpoint(), 1500);
    overrides.push("log.cleaner.enable=false".into());
    let mut b = start(&overrides);
    let [again, dropped, off] = ["again", "dropped", "off"].map(|t| TopicPartition::new(t, 0));
    for tp in [&again, &dropped, &off] {
        create_topic(b.port, &tp.topic, 1, TOPIC_CONFIG);
        produce_keyed(&b, &tp.topic);
        let dir = b.data_dir().join(tp.to_string());
        wait_logged(&b, 60, "the first manifest", || {
            latest(&store, tp).filter(|(_, m)| mirrors(&store, tp, m, &dir))
        });
    }
    let (old_seq, old) = latest(&store, &again).expect("manifest");

    // Deleted, created again at once (most likely within one upload round),
    // and another disabled: each gets one more manifest, retired.
    delete_topic(b.port, "again");
    delete_topic(b.port, "dropped");
    create_topic(b.port, "again", 1, TOPIC_CONFIG);
    // Turning remote storage off needs remote.log.delete.on.disable (Kafka's
    // rule: the store's copy is deleted); alone it is refused (INVALID_CONFIG).
    assert_eq!(alter_topic(b.port, "off", &[("remote.storage.enable", "false")]), 40);
    let off_and_delete =
        [("remote.storage.enable", "false"), ("remote.log.delete.on.disable", "true")];
    assert_eq!(alter_topic(b.port, "off", &off_and_delete), 0);
    wait_logged(&b, 60, "the retired manifests", || {
        let retired = |tp: &TopicPartition| latest(&store, tp).is_some_and(|(_, m)| m.retired);
        let again_retired = b.log().lines().any(|l| {
            l.contains("partition retired in the store")
                && l.contains("partition=again-0")
                && l.contains(&format!("seq={}", old_seq + 1))
        });
        // A retired manifest is swept sediment.remote.storage.delete.delay.ms
        // later: either state shows the retirement happened.
        let gone = |tp: &TopicPartition| retired(tp) || swept(&store, tp);
        (again_retired && gone(&off) && gone(&dropped)).then_some(())
    });

    // The topic created again goes on after the retired manifest: a new
    // topic id, no regression refusal.
    let expected = produce_keyed(&b, "again");
    let dir = b.data_dir().join("again-0");
    let (new_seq, new) = wait_logged(&b, 60, "the new topic's manifest", || {
        latest(&store, &again).filter(|(_, m)| !m.retired && mirrors(&store, &again, m, &dir))
    });
    assert!(new_seq > old_seq + 1, "{new_seq} after the retired {}", old_seq + 1);
    assert_ne!(new.partition_metadata, old.partition_metadata, "the same topic id");
    assert!(!b.log().contains("lacks what the store"), "refused as a regression:\n{}", b.log());

    // Past the delay the retired partitions are gone from the store, and so
    // are the old topic's objects the new one does not list.
    wait_logged(&b, 60, "the retired partitions and old objects to be swept", || {
        let (_, m) = latest(&store, &again)?;
        let listed: BTreeSet<String> = m.keys().map(str::to_string).collect();
        (swept(&store, &dropped)
            && swept(&store, &off)
            && segment_objects(&store, &again) == listed)
            .then_some(())
    });
    b.stop();

    // A restore brings back the new topic only.
    let restored = b.dir.path().join("restored");
    let (ok, out, err) = restore(&moto, url, &restored);
    assert!(ok, "restore failed: {out}{err}");
    assert!(out.contains("restored 1 partition(s)"), "{out}");
    assert!(!restored.join("dropped-0").exists(), "a deleted topic came back");
    let metadata = std::fs::read_to_string(restored.join("again-0/partition.metadata"))
        .expect("the new topic restored");
    assert_eq!(metadata, new.partition_metadata);
    assert!(!expected.is_empty());
}

#[test]
fn a_store_refusing_the_credentials_prints_one_line_without_them() {
    let key_id = "AKIDSEDIMENTFAULTS01";
    let secret = "wrong-secret-sediment-faults-0042";
    let env = [
        ("AWS_ACCESS_KEY_ID", key_id),
        ("AWS_SECRET_ACCESS_KEY", secret),
        ("AWS_REGION", "us-east-1"),
    ];
    // moto checking signatures, with no user: the key id is unknown.
    let strict = Moto::start(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("server.toml");
    std::fs::write(&file, "").expect("config file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sediment"));
    cmd.arg("check-config").arg(&file).envs(env);
    for o in remote_overrides("s3://bucket-auth/p", &strict.endpoint(), 1000) {
        cmd.arg("--override").arg(o);
    }
    let (ok, out, err) = run(&mut cmd);
    assert!(!ok, "{out}{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    let line = lines[0];
    assert!(line.contains("refused the credentials") && line.contains("HTTP 403"), "{line}");
    assert!(line.contains("sediment-store.json"), "the key: {line}");
    for leaked in [key_id, secret, "<Error>", "Signature", "Authorization"] {
        assert!(!format!("{out}{err}").contains(leaked), "{leaked} printed: {out}{err}");
    }
}

/// Run the keyed workload on a broker that SIGKILLs itself at `point`, then
/// restart it without the crash point and check the store.
fn crash_at(moto: &Moto, point: &str) {
    let bucket = format!("bucket-crash-{point}");
    moto.create_bucket(&bucket);
    let url = format!("s3://{bucket}/c");
    let store = open_store(&url, Some(moto.endpoint()));
    let tp = TopicPartition::new("state", 0);
    let mut overrides = remote_overrides(&url, &moto.endpoint(), 1500);
    if point != MID_SWEEP {
        // Without a clean the sweep has little to do; mid-sweep needs one.
        overrides.push("log.cleaner.enable=false".into());
    }
    let o: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let mut env: Vec<(&str, &str)> = CREDS.to_vec();
    let setting = failpoint::setting(point, None);
    env.push((failpoint::ENV, setting.as_str()));
    let mut b = TestBroker::start_with_env(&o, &env);
    // mid-sweep: no clean until the uncleaned segments are in the store, so
    // the clean replaces uploaded objects and the sweep has them to delete.
    let mut config = TOPIC_CONFIG.to_vec();
    if point == MID_SWEEP {
        config.push(("min.compaction.lag.ms", "3600000"));
    }
    create_topic(b.port, "state", 1, &config);
    let produced =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| produce_keyed(&b, "state")));
    if point == MID_SWEEP {
        let dir = b.data_dir().join("state-0");
        wait_logged(&b, 60, "the uncleaned segments' manifest", || {
            latest(&store, &tp).filter(|(_, m)| mirrors(&store, &tp, m, &dir))
        });
        assert_eq!(alter_topic(b.port, "state", &[("min.compaction.lag.ms", "0")]), 0);
    }
    let status = b.wait_exit(60);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "{point}: {status}"
    );
    let seqs = manifest_seqs(&store, &tp);
    match point {
        BEFORE_MANIFEST => assert!(seqs.is_empty() && !segment_objects(&store, &tp).is_empty()),
        AFTER_MANIFEST => assert_eq!(seqs, vec![1]),
        _ => assert!(seqs.len() >= 2, "{point}: manifests {seqs:?} left by the sweep"),
    }
    let last_before = seqs.last().copied().unwrap_or(0);
    b.set_env(CREDS);
    b.restart();
    if produced.is_err() {
        produce_keyed(&b, "state");
    }
    let dir = b.data_dir().join("state-0");
    let (seq, m) = wait_logged(&b, 60, "the manifest to list every closed segment", || {
        latest(&store, &tp).filter(|(_, m)| mirrors(&store, &tp, m, &dir))
    });
    assert!(
        seq > last_before || (seq == last_before && seq > 0),
        "{point}: {seq} after {last_before}"
    );
    let bases: BTreeSet<i64> = m.segments.iter().map(|s| s.base_offset).collect();
    assert_eq!(bases.len(), m.segments.len(), "{point}: a segment listed twice");
    wait_logged(&b, 60, "orphans and old manifests to be swept", || {
        let seqs = manifest_seqs(&store, &tp);
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{point}: a gap in {seqs:?}");
        let (_, m) = latest(&store, &tp)?;
        let listed: BTreeSet<String> = m.keys().map(str::to_string).collect();
        (segment_objects(&store, &tp) == listed && seqs.len() == 1).then_some(())
    });
    let mut got = kcat_latest(&b, "state");
    got.remove("filler");
    assert_eq!(got.len(), 40, "{point}: every key readable");
    b.stop();
}

#[test]
fn a_sigkill_at_each_step_of_the_manifest_switch_loses_and_leaves_nothing() {
    let moto = Moto::start(&[]);
    for point in [BEFORE_MANIFEST, AFTER_MANIFEST, MID_SWEEP] {
        crash_at(&moto, point);
    }
}

#[test]
fn an_invalid_latest_manifest_stops_uploads_and_a_restore_uses_the_one_below() {
    let moto = Moto::start(&[]);
    moto.create_bucket("bucket-corrupt");
    let url = "s3://bucket-corrupt/c";
    let store = open_store(url, Some(moto.endpoint()));
    let tp = TopicPartition::new("state", 0);
    let mut overrides = remote_overrides(url, &moto.endpoint(), 60_000);
    overrides.push("log.cleaner.enable=false".into());
    let mut b = start(&overrides);
    create_topic(b.port, "state", 1, TOPIC_CONFIG);
    produce_keyed(&b, "state");
    let dir = b.data_dir().join("state-0");
    let (first, _) = wait_logged(&b, 60, "the first manifest", || {
        latest(&store, &tp).filter(|(_, m)| mirrors(&store, &tp, m, &dir))
    });
    produce_keyed(&b, "state");
    let (seq, _) = wait_logged(&b, 60, "the next manifest", || {
        latest(&store, &tp).filter(|(seq, m)| *seq > first && mirrors(&store, &tp, m, &dir))
    });
    b.stop();
    // The latest manifest is broken (another writer, a bad edit): its key
    // names other content than it lists.
    let key = manifest::manifest_key(&tp, seq);
    let text = rt().block_on(store.get_bounded(&store.key(&key), 1 << 20)).expect("manifest");
    let broken = String::from_utf8_lossy(&text).replacen("\"size\": ", "\"size\": 1", 1);
    rt().block_on(store.put_verified(&store.key(&key), broken.into_bytes().into())).expect("put");

    b.restart();
    produce_keyed(&b, "state");
    wait_logged(&b, 60, "the corrupt manifest to be reported", || {
        (b.metric("sediment_remote_store_errors_total{kind=\"corrupt\"}")? > 0.0).then_some(())
    });
    assert!(b.log().contains(&key), "the manifest's key is not in the log");
    assert_eq!(manifest_seqs(&store, &tp).last(), Some(&seq), "written past the invalid manifest");
    b.stop();

    let restored = b.dir.path().join("restored");
    let (ok, out, err) = restore(&moto, url, &restored);
    assert!(ok && out.contains("restored 1 partition(s)"), "{out}{err}");
    assert!(err.contains(&key), "the restore does not say it skipped {key}: {err}");
}

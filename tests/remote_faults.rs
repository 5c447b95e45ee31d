//! Tiered storage under faults, against moto's S3 server: deleted topics are
//! retired from the store (restore skips them, the sweep empties them, a
//! topic created again under the name goes on after them), store errors
//! never show credentials, and a SIGKILL at each step of the manifest switch
//! loses, duplicates and leaves behind nothing.

mod broker;

use std::collections::BTreeSet;
use std::process::Command;

use broker::remote::*;
use broker::{create_topic, run, TestBroker, Wire};
use sediment::log::TopicPartition;
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

#[test]
fn deleted_topics_are_retired_swept_and_not_restored_and_a_new_one_goes_on_after() {
    let moto = Moto::start(&[]);
    moto.create_bucket("bucket-retire");
    let url = "s3://bucket-retire/c";
    let store = open_store(url, Some(moto.endpoint()));
    let mut overrides = remote_overrides(url, &moto.endpoint(), 1500);
    overrides.push("log.cleaner.enable=false".into());
    let mut b = start(&overrides);
    let (again, dropped) = (TopicPartition::new("again", 0), TopicPartition::new("dropped", 0));
    for tp in [&again, &dropped] {
        create_topic(b.port, &tp.topic, 1, TOPIC_CONFIG);
        produce_keyed(&b, &tp.topic);
        let dir = b.data_dir().join(tp.to_string());
        wait_logged(&b, 60, "the first manifest", || {
            latest(&store, tp).filter(|(_, m)| mirrors(&store, tp, m, &dir))
        });
    }
    let (old_seq, old) = latest(&store, &again).expect("manifest");

    // Deleted: one more manifest, retired, numbered next.
    delete_topic(b.port, "again");
    delete_topic(b.port, "dropped");
    let (seq, retired) = wait_logged(&b, 60, "the retired manifest", || {
        latest(&store, &again).filter(|m| m.1.retired)
    });
    assert_eq!(seq, old_seq + 1);
    assert!(retired.segments.is_empty());

    // Created again under the name: a new topic id, numbered after the retired one.
    create_topic(b.port, "again", 1, TOPIC_CONFIG);
    let expected = produce_keyed(&b, "again");
    let dir = b.data_dir().join("again-0");
    let (new_seq, new) = wait_logged(&b, 60, "the new topic's manifest", || {
        latest(&store, &again).filter(|(_, m)| !m.retired && mirrors(&store, &again, m, &dir))
    });
    assert!(new_seq > seq, "{new_seq} after {seq}");
    assert_ne!(new.partition_metadata, old.partition_metadata, "the same topic id");
    assert!(!b.log().contains("lacks what the store"), "refused as a regression:\n{}", b.log());

    // Past the delay the dropped topic is gone from the store entirely, and
    // the old topic's objects that the new one does not list too.
    wait_logged(&b, 60, "the dropped topic to be swept", || {
        (segment_objects(&store, &dropped).is_empty() && manifest_count(&store, &dropped) == 0)
            .then_some(())
    });
    wait_logged(&b, 60, "the old topic's objects to be swept", || {
        let (_, m) = latest(&store, &again)?;
        let listed: BTreeSet<String> = m.keys().map(str::to_string).collect();
        (segment_objects(&store, &again) == listed).then_some(())
    });
    b.stop();

    // A restore brings back the new topic only.
    let restored = b.dir.path().join("restored");
    let (ok, out, err) = run(Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(["restore", "--from", url, "--endpoint", &moto.endpoint(), "--data-dir"])
        .arg(&restored)
        .envs(CREDS.iter().copied()));
    assert!(ok, "restore failed: {out}{err}");
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
    if point != "mid-sweep" {
        // Without a clean the sweep has little to do; mid-sweep needs one.
        overrides.push("log.cleaner.enable=false".into());
    }
    let o: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let mut env: Vec<(&str, &str)> = CREDS.to_vec();
    env.push(("SEDIMENT_REMOTE_CRASH_POINT", point));
    let mut b = TestBroker::start_with_env(&o, &env);
    create_topic(b.port, "state", 1, TOPIC_CONFIG);
    let produced =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| produce_keyed(&b, "state")));
    let status = b.wait_exit(60);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "{point}: {status}"
    );
    let seqs = manifest_seqs(&store, &tp);
    match point {
        "before-manifest" => assert!(seqs.is_empty() && !segment_objects(&store, &tp).is_empty()),
        "after-manifest" => assert_eq!(seqs, vec![1]),
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
    for point in ["before-manifest", "after-manifest", "mid-sweep"] {
        crash_at(&moto, point);
    }
}

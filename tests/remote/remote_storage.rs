//! Tiered storage against a real S3 API server process on loopback (moto's
//! server from target/pyenv, which scripts/python-env.sh installs): the
//! store mirrors a compacted topic's closed segments and its cleaning, a
//! restore from it serves every latest value, a SIGKILL during uploads leaves
//! neither duplicates nor orphans, and bad stores give clear errors.

use crate::broker;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use crate::broker::remote::*;
use crate::broker::{create_topic, free_port, produce, run, run_python_script, TestBroker, Wire};
use sediment::log::TopicPartition;

#[test]
fn the_store_mirrors_uploads_and_cleans_and_a_restore_serves_every_latest_value() {
    let moto = Moto::start(&[]);
    moto.create_bucket("bucket-mirror");
    let url = "s3://bucket-mirror/cluster";
    let store = open_store(url, Some(moto.endpoint()));
    let tp = TopicPartition::new("state", 0);
    let mut overrides = remote_overrides(url, &moto.endpoint(), 2000);
    // Every topic in the store, __consumer_offsets too, in small segments.
    overrides.extend([
        "remote.storage.enable=true".into(),
        "offsets.topic.num.partitions=1".into(),
        "offsets.topic.segment.bytes=1024".into(),
    ]);
    overrides.push("log.cleaner.enable=false".into());
    let mut b = start(&overrides);
    create_topic(b.port, "state", 1, TOPIC_CONFIG);
    let expected = produce_keyed(&b, "state");
    let dir = b.data_dir().join("state-0");
    run_python_script(&b, "remote_offsets_confluent.py", &["commit"], "done");
    let offsets_tp = TopicPartition::new("__consumer_offsets", 0);
    let offsets_dir = b.data_dir().join("__consumer_offsets-0");
    wait_logged(&b, 60, "__consumer_offsets in the store", || {
        latest(&store, &offsets_tp).filter(|(_, m)| mirrors(&store, &offsets_tp, m, &offsets_dir))
    });

    // Every closed segment is uploaded, byte for byte.
    let (seq1, first) = wait_logged(&b, 60, "the manifest to list every closed segment", || {
        latest(&store, &tp).filter(|(_, m)| mirrors(&store, &tp, m, &dir))
    });
    assert!(first.segments.len() >= 5, "{} segments", first.segments.len());
    let listed = first.segments.len() as f64;
    wait_for(30, "the remote gauges", || {
        let series = b.metric("sediment_remote_log_segments{topic=\"state\"}")?;
        let lag = b.metric("sediment_remote_upload_lag_bytes{topic=\"state\"}")?;
        (series == listed && lag == 0.0).then_some(())
    });
    assert!(b.metric("sediment_remote_uploads_total").unwrap_or(0.0) >= listed);

    // The cleaner runs: the next manifests list the cleaned segments, and the
    // replaced objects go once the delete delay has passed.
    b.stop();
    overrides.pop();
    b.set_overrides(&overrides.iter().map(String::as_str).collect::<Vec<_>>());
    b.restart();
    let (_, cleaned) = wait_logged(&b, 60, "the manifest to list the cleaned segments", || {
        latest(&store, &tp).filter(|(seq, m)| {
            *seq > seq1 && m.clean_offset.is_some() && mirrors(&store, &tp, m, &dir)
        })
    });
    let (before, after): (u64, u64) = (
        first.segments.iter().map(|s| s.files[0].size).sum(),
        cleaned.segments.iter().map(|s| s.files[0].size).sum(),
    );
    assert!(after < before, "cleaned {after} bytes, uploaded {before} before the clean");
    let replaced: BTreeSet<String> =
        first.keys().filter(|k| !cleaned.keys().any(|c| c == *k)).map(str::to_string).collect();
    assert!(!replaced.is_empty(), "the clean replaced no object");
    wait_for(60, "the replaced objects to be deleted", || {
        let objects = segment_objects(&store, &tp);
        replaced.iter().all(|k| !objects.contains(k)).then_some(())
    });
    let (_, cleaned) = latest(&store, &tp).expect("manifest");
    let objects = segment_objects(&store, &tp);
    assert!(cleaned.keys().all(|k| objects.contains(k)), "a listed object is missing");

    // Disaster: the data dir is lost; restore it from the store and serve it.
    b.stop();
    std::fs::remove_dir_all(b.data_dir()).expect("remove data dir");
    let (ok, out, err) = restore(&moto, url, &b.data_dir());
    assert!(ok, "restore failed: {out}{err}");
    assert!(out.contains("restored 2 partition(s)"), "{out}");
    assert_eq!(
        broker::cleaner_checkpoint(&b.data_dir(), "state", 0),
        cleaned.clean_offset,
        "the cleaner's clean point is restored"
    );
    // A second restore into the now non-empty dir is refused.
    let (ok, _, err) = restore(&moto, url, &b.data_dir());
    assert!(!ok && err.contains("not empty"), "{err}");
    b.restart();
    // The restored broker goes on with the same store and drops nothing from it.
    let dir = b.data_dir().join("state-0");
    let (_, after_restore) = wait_for(60, "the restored broker to mirror the store", || {
        latest(&store, &tp).filter(|(_, m)| mirrors(&store, &tp, m, &dir))
    });
    assert_eq!(after_restore.segments, cleaned.segments);
    let mut got = kcat_latest(&b, "state");
    got.remove("filler");
    assert_eq!(got, expected, "every key's latest value after the restore");
    let out = run_python_script(&b, "remote_offsets_confluent.py", &["read"], "done");
    assert!(out.contains("offset=123"), "the committed offset after the restore: {out}");
    b.stop();
}

#[test]
fn a_sigkill_during_uploads_leaves_no_duplicate_and_no_orphan_past_the_delay() {
    let moto = Moto::start(&[]);
    moto.create_bucket("bucket-kill");
    let url = "s3://bucket-kill/c";
    let store = open_store(url, Some(moto.endpoint()));
    let tp = TopicPartition::new("state", 0);
    let mut overrides = remote_overrides(url, &moto.endpoint(), 1500);
    overrides.push("log.cleaner.enable=false".into());
    let mut b = start(&overrides);
    create_topic(b.port, "state", 1, TOPIC_CONFIG);
    // Uploads run while the records arrive; kill the broker as soon as the
    // first object is in the store.
    let producer = {
        let port = b.port;
        std::thread::spawn(move || {
            let mut w = Wire::connect(port);
            for i in 0..200 {
                let r = vec![(format!("k{}", i % 50), Some("v".repeat(300)))];
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    produce(&mut w, "state", 0, broker::now_ms(), &r)
                }))
                .is_err()
                {
                    return;
                }
            }
        })
    };
    wait_for(60, "the first object", || (!segment_objects(&store, &tp).is_empty()).then_some(()));
    b.kill();
    let _ = producer.join();
    b.restart();
    let dir = b.data_dir().join("state-0");
    let (_, m) = wait_logged(&b, 60, "the manifest to list every closed segment", || {
        latest(&store, &tp).filter(|(_, m)| mirrors(&store, &tp, m, &dir))
    });
    let bases: BTreeSet<i64> = m.segments.iter().map(|s| s.base_offset).collect();
    assert_eq!(bases.len(), m.segments.len(), "a segment listed twice");
    // Past the delay only what the latest manifest lists is left.
    wait_logged(&b, 60, "orphans and old manifests to be swept", || {
        let (_, m) = latest(&store, &tp)?;
        let listed: BTreeSet<String> = m.keys().map(str::to_string).collect();
        (segment_objects(&store, &tp) == listed && manifest_count(&store, &tp) == 1).then_some(())
    });
    b.stop();
}

#[test]
fn an_unreachable_store_holds_uploads_back_not_produce_and_they_resume() {
    let port = free_port();
    let moto = Moto::start_on(&[], port);
    moto.create_bucket("bucket-outage");
    let url = "s3://bucket-outage/c";
    let mut overrides = remote_overrides(url, &moto.endpoint(), 1000);
    overrides.push("log.cleaner.enable=false".into());
    let mut b = start(&overrides);
    create_topic(b.port, "state", 1, TOPIC_CONFIG);
    produce_keyed(&b, "state");
    let tp = TopicPartition::new("state", 0);
    let dir = b.data_dir().join("state-0");
    let store = open_store(url, Some(moto.endpoint()));
    wait_logged(&b, 60, "the first uploads", || {
        latest(&store, &tp).filter(|(_, m)| mirrors(&store, &tp, m, &dir))
    });
    // The store goes away; every produce still succeeds (produce_keyed asserts it).
    drop(moto);
    produce_keyed(&b, "state");
    wait_logged(&b, 60, "the upload lag and the store errors", || {
        let lag = b.metric("sediment_remote_upload_lag_bytes{topic=\"state\"}")?;
        let errors = b.metric("sediment_remote_store_errors_total{kind=\"unreachable\"}")?;
        (lag > 0.0 && errors > 0.0).then_some(())
    });
    // It comes back empty (moto keeps nothing): the broker notices its
    // manifest is gone and uploads everything again instead of listing
    // objects the store does not have.
    let moto = Moto::start_on(&[], port);
    moto.create_bucket("bucket-outage");
    wait_logged(&b, 120, "the uploads to resume", || {
        latest(&store, &tp).filter(|(_, m)| mirrors(&store, &tp, m, &dir))
    });
    wait_logged(&b, 30, "the lag to drop to 0", || {
        (b.metric("sediment_remote_upload_lag_bytes{topic=\"state\"}")? == 0.0).then_some(())
    });
    b.stop();
}

fn check_config(overrides: &[String], env: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("server.toml");
    std::fs::write(&file, "").expect("config file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sediment"));
    cmd.arg("check-config").arg(&file).envs(env.iter().copied());
    for o in overrides {
        cmd.arg("--override").arg(o);
    }
    let (ok, out, err) = run(&mut cmd);
    (ok, format!("{out}{err}"))
}

#[test]
fn bad_stores_are_refused_clearly_and_the_file_store_restores() {
    let secret = "sediment-test-secret-0042";
    // moto checking signatures, with no user: every key is wrong.
    let strict = Moto::start(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]);
    let (ok, out) =
        check_config(&remote_overrides("s3://bucket-auth/p", &strict.endpoint(), 1000), CREDS);
    assert!(!ok && out.contains("refused the credentials"), "{out}");
    assert!(!out.contains(secret), "the secret was printed: {out}");
    let dead = format!("http://127.0.0.1:{}", free_port());
    let (ok, out) = check_config(&remote_overrides("s3://bucket-dead/p", &dead, 1000), CREDS);
    assert!(!ok && out.contains("cannot be reached"), "{out}");
    let moto = Moto::start(&[]);
    let (ok, out) =
        check_config(&remote_overrides("s3://no-such-bucket/p", &moto.endpoint(), 1000), CREDS);
    assert!(!ok && out.contains("bucket"), "{out}");
    moto.create_bucket("bucket-fine");
    let (ok, out) =
        check_config(&remote_overrides("s3://bucket-fine/p", &moto.endpoint(), 1000), CREDS);
    assert!(ok && out.contains("answers"), "{out}");
    assert!(!out.contains(secret), "the secret was printed: {out}");

    // Without the system key, a topic cannot enable remote storage (Kafka's INVALID_CONFIG).
    let plain = TestBroker::start(&[]);
    refused_with_invalid_config(plain.port);
    drop(plain);

    // A local directory as the store, end to end.
    let store_dir = tempfile::tempdir().expect("tempdir");
    let url = format!("file://{}", store_dir.path().display());
    let mut b = start(&[
        "remote.log.storage.system.enable=true".into(),
        format!("sediment.remote.storage.url={url}"),
        "sediment.remote.storage.upload.interval.ms=100".into(),
        "log.cleaner.enable=false".into(),
    ]);
    create_topic(b.port, "state", 1, TOPIC_CONFIG);
    let expected = produce_keyed(&b, "state");
    let store = open_store(&url, None);
    let tp = TopicPartition::new("state", 0);
    let dir = b.data_dir().join("state-0");
    wait_for(60, "the manifest in the directory store", || {
        latest(&store, &tp).filter(|(_, m)| mirrors(&store, &tp, m, &dir))
    });
    b.stop();
    // Another cluster's broker (a fresh data dir: a new cluster id) is refused the store.
    let other = tempfile::tempdir().expect("tempdir");
    let (ok, out, err) =
        run(Command::new("timeout").args(["60", env!("CARGO_BIN_EXE_sediment"), "serve"]).args([
            "--override".to_string(),
            "listeners=PLAINTEXT://127.0.0.1:0".into(),
            "--override".into(),
            format!("log.dirs={}", other.path().display()),
            "--override".into(),
            "metrics.listen=".into(),
            "--override".into(),
            "remote.log.storage.system.enable=true".into(),
            "--override".into(),
            format!("sediment.remote.storage.url={url}"),
        ]));
    assert!(!ok && err.contains("belongs to sediment cluster"), "{out}{err}");
    let restored: PathBuf = b.dir.path().join("restored");
    let (ok, out, err) = run(Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(["restore", "--from", &url, "--data-dir"])
        .arg(&restored));
    assert!(ok, "{out}{err}");
    // The restored dir holds the closed segments and an empty active one after them.
    let mut restored_segments = local_segments(&restored.join("state-0"));
    let (active, files) = restored_segments.pop_last().expect("an active segment");
    assert_eq!(files.get("log").map(Vec::len), Some(0), "the active segment is empty");
    assert_eq!(Some(active), local_closed(&dir).keys().last().map(|_| local_active_base(&dir)));
    assert_eq!(restored_segments, local_closed(&dir), "restored segments differ");
    assert!(!expected.is_empty());
}

fn refused_with_invalid_config(port: u16) {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string("tiered".into())))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_string("remote.storage.enable".into()))
            .with_value(Some(StrBytes::from_string("true".into())))]);
    let r = Wire::connect(port)
        .call(7, &CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000));
    assert_eq!(r.topics[0].error_code, 40, "{:?}", r.topics[0].error_message);
    let message = r.topics[0].error_message.as_deref().unwrap_or_default().to_string();
    assert!(message.contains("remote.log.storage.system.enable"), "{message}");
}

//! Helpers of the tiered-storage tests: moto's S3 server, the store as a
//! test reads it, a broker with the remote keys, and a keyed workload.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, kcat, produce, python, Reaper, TestBroker, Wire};
use sediment::log::TopicPartition;
use sediment::remote::manifest::{self, Manifest};
use sediment::remote::{RemoteStorageConfig, RemoteStore};

pub const CREDS: &[(&str, &str)] = &[
    ("AWS_ACCESS_KEY_ID", "sediment-test"),
    ("AWS_SECRET_ACCESS_KEY", "sediment-test-secret-0042"),
    ("AWS_REGION", "us-east-1"),
];

/// moto's S3 server on a free loopback port, killed when dropped.
pub struct Moto {
    _child: Reaper,
    pub port: u16,
}

impl Moto {
    pub fn start(env: &[(&str, &str)]) -> Self {
        Self::start_on(env, free_port())
    }

    /// A fresh (empty) server on `port`.
    pub fn start_on(env: &[(&str, &str)], port: u16) -> Self {
        let bin = python().parent().expect("venv bin").join("moto_server");
        let child = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server (scripts/python-env.sh installs it)");
        let moto = Self { _child: Reaper(child), port };
        wait_for(60, "moto to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ())
        });
        moto
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Create a bucket (moto accepts an unsigned PUT).
    pub fn create_bucket(&self, name: &str) {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        let req = format!(
            "PUT /{name} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        );
        s.write_all(req.as_bytes()).expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        assert!(out.starts_with("HTTP/1.1 200"), "create bucket {name}: {out}");
    }
}

pub fn set_test_credentials() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (k, v) in CREDS {
            std::env::set_var(k, v);
        }
    });
}

pub fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {secs}s waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// [`wait_for`], with the broker's log in the failure message.
pub fn wait_logged<T>(b: &TestBroker, secs: u64, what: &str, f: impl FnMut() -> Option<T>) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wait_for(secs, what, f))) {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}; the broker's log:\n{}", b.log()),
    }
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

pub fn open_store(url: &str, endpoint: Option<String>) -> RemoteStore {
    set_test_credentials();
    RemoteStorageConfig::for_tool(url, endpoint, None).open().expect("store")
}

pub fn latest(store: &RemoteStore, tp: &TopicPartition) -> Option<(u64, Manifest)> {
    rt().block_on(manifest::latest(store, tp)).expect("latest manifest")
}

/// (name, size) of every segment object of `tp` in the store.
pub fn segment_objects(store: &RemoteStore, tp: &TopicPartition) -> BTreeSet<String> {
    let (objects, _) =
        rt().block_on(store.list(&format!("topics/{tp}/segments"))).expect("list segments");
    objects.iter().filter_map(|o| o.location.filename().map(|f| format!("segments/{f}"))).collect()
}

pub fn manifest_count(store: &RemoteStore, tp: &TopicPartition) -> usize {
    rt().block_on(manifest::list_manifests(store, tp)).expect("list manifests").len()
}

/// The closed segments' files of a partition dir: base offset → (ext → bytes).
pub fn local_closed(dir: &Path) -> BTreeMap<i64, BTreeMap<String, Vec<u8>>> {
    let mut all = local_segments(dir);
    all.pop_last(); // the active segment
    all
}

/// Every segment's files of a partition dir.
pub fn local_segments(dir: &Path) -> BTreeMap<i64, BTreeMap<String, Vec<u8>>> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .expect("partition dir")
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
        .into_iter()
        .map(|base| {
            let files = ["log", "index", "timeindex", "txnindex"]
                .iter()
                .filter_map(|ext| {
                    let bytes = std::fs::read(dir.join(format!("{base:020}.{ext}"))).ok()?;
                    Some((ext.to_string(), bytes))
                })
                .collect();
            (base, files)
        })
        .collect()
}

/// Whether `m` lists exactly the local closed segments, each object in the
/// store holding the local file's bytes.
pub fn mirrors(store: &RemoteStore, tp: &TopicPartition, m: &Manifest, dir: &Path) -> bool {
    let local = local_closed(dir);
    if local.is_empty() || m.segments.iter().map(|s| s.base_offset).ne(local.keys().copied()) {
        return false;
    }
    for seg in &m.segments {
        let files = &local[&seg.base_offset];
        if seg.files.len() != files.len() {
            return false;
        }
        for f in &seg.files {
            let key = store.key(&format!("topics/{tp}/{}", f.key));
            let Ok(remote) = rt().block_on(store.get_bounded(&key, 1 << 30)) else { return false };
            if files.get(&f.ext).map(Vec::as_slice) != Some(&remote[..]) {
                return false;
            }
        }
    }
    true
}

pub fn remote_overrides(url: &str, endpoint: &str, delay_ms: u64) -> Vec<String> {
    vec![
        "remote.log.storage.system.enable=true".into(),
        format!("sediment.remote.storage.url={url}"),
        format!("sediment.remote.storage.endpoint={endpoint}"),
        "sediment.remote.storage.upload.interval.ms=100".into(),
        format!("sediment.remote.storage.delete.delay.ms={delay_ms}"),
        "log.cleaner.backoff.ms=100".into(),
    ]
}

pub fn start(overrides: &[String]) -> TestBroker {
    let o: Vec<&str> = overrides.iter().map(String::as_str).collect();
    TestBroker::start_with_env(&o, CREDS)
}

pub const TOPIC_CONFIG: &[(&str, &str)] = &[
    ("cleanup.policy", "compact"),
    ("segment.bytes", "4096"),
    ("min.cleanable.dirty.ratio", "0.01"),
    ("remote.storage.enable", "true"),
];

/// Produce 4 versions of 40 keys in batches of 5, then filler until the
/// active segment holds nothing else; the latest value of each key.
pub fn produce_keyed(b: &TestBroker, topic: &str) -> BTreeMap<String, String> {
    let mut w = Wire::connect(b.port);
    let mut latest = BTreeMap::new();
    let now = super::now_ms();
    for round in 0..4 {
        for chunk in (0..40).collect::<Vec<_>>().chunks(5) {
            let records: Vec<(String, Option<String>)> = chunk
                .iter()
                .map(|k| {
                    let (key, value) =
                        (format!("k{k:02}"), format!("v{round}-{k:02}-{}", "x".repeat(150)));
                    latest.insert(key.clone(), value.clone());
                    (key, Some(value))
                })
                .collect();
            produce(&mut w, topic, 0, now, &records);
        }
    }
    let dir = b.data_dir().join(format!("{topic}-0"));
    let end = 160;
    while local_active_base(&dir) < end {
        produce(&mut w, topic, 0, now, &[("filler".into(), Some("f".repeat(500)))]);
    }
    latest
}

pub fn local_active_base(dir: &Path) -> i64 {
    std::fs::read_dir(dir)
        .expect("partition dir")
        .filter_map(|e| e.ok()?.file_name().to_string_lossy().strip_suffix(".log")?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// Every key's last value as kcat reads the topic from the beginning.
pub fn kcat_latest(b: &TestBroker, topic: &str) -> BTreeMap<String, String> {
    let (ok, out, err) = kcat(
        &["-b", &b.bootstrap(), "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k=%s\\n"],
        "",
    );
    assert!(ok, "kcat: {err}");
    out.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.into(), v.into())).collect()
}

/// IncrementalAlterConfigs SET of topic keys; the error code.
pub fn alter_topic(port: u16, topic: &str, set: &[(&str, &str)]) -> i16 {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.into()))
            .with_configs(
                set.iter()
                    .map(|(key, value)| {
                        AlterableConfig::default()
                            .with_name(StrBytes::from_string(key.to_string()))
                            .with_config_operation(0)
                            .with_value(Some(StrBytes::from_string(value.to_string())))
                    })
                    .collect(),
            ),
    ]);
    let response = Wire::connect(port).call(1, &request);
    response.responses[0].error_code
}

/// `sediment restore --from url --endpoint <moto> --data-dir dir` with the
/// test credentials: (success, stdout, stderr).
pub fn restore(moto: &Moto, url: &str, dir: &Path) -> (bool, String, String) {
    super::run(
        Command::new(env!("CARGO_BIN_EXE_sediment"))
            .args(["restore", "--from", url, "--endpoint", &moto.endpoint(), "--data-dir"])
            .arg(dir)
            .envs(CREDS.iter().copied()),
    )
}

/// ListOffsets v8 of partition 0 of `topic` at `timestamp` (-2 EARLIEST,
/// -1 LATEST, -4 EARLIEST_LOCAL): (error code, offset).
pub fn list_offset(port: u16, topic: &str, timestamp: i64) -> (i16, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let r = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)]),
    ]);
    let p = &Wire::connect(port).call(8, &r).topics[0].partitions[0];
    (p.error_code, p.offset)
}

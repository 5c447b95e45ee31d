//! The broker config: parsing, validation, key families, layering.
use super::*;

#[test]
fn consumer_group_keys_have_kafkas_defaults_and_bounds() {
    let g = checked(&[]).expect("defaults").group_config();
    assert!(g.consumer_protocol_enabled);
    assert_eq!((g.consumer_session_timeout_ms, g.consumer_heartbeat_interval_ms), (45_000, 5000));
    assert_eq!(g.consumer_assignors, ["uniform", "range"]);
    assert_eq!(g.consumer_migration_policy, crate::group::config::MigrationPolicy::Bidirectional);
    let upgrade = checked(&["group.consumer.migration.policy=upgrade"]).expect("upgrade");
    let upgrade = upgrade.group_config().consumer_migration_policy;
    assert!(upgrade.upgrades() && !upgrade.downgrades());
    let g = checked(&[
        "group.consumer.assignors=org.apache.kafka.coordinator.group.assignor.RangeAssignor",
    ])
    .expect("class names")
    .group_config();
    assert_eq!(g.consumer_assignors, ["range"]);
    let off = checked(&["group.coordinator.rebalance.protocols=classic"]).expect("classic only");
    assert!(!off.group_config().consumer_protocol_enabled);
    for bad in [
        "group.coordinator.rebalance.protocols=consumer",
        "group.coordinator.rebalance.protocols=classic,share",
        "group.consumer.session.timeout.ms=30000",
        "group.consumer.session.timeout.ms=70000",
        "group.consumer.heartbeat.interval.ms=4000",
        "group.consumer.min.heartbeat.interval.ms=6000",
        "group.consumer.assignors=roundrobin",
        "group.consumer.migration.policy=sideways",
    ] {
        assert!(checked(&[bad]).is_err(), "{bad} accepted");
    }
    // Widened bounds let the values move, but the interval stays below the session.
    assert!(checked(&[
        "group.consumer.min.session.timeout.ms=1000",
        "group.consumer.session.timeout.ms=3000",
        "group.consumer.min.heartbeat.interval.ms=500",
        "group.consumer.heartbeat.interval.ms=1000"
    ])
    .is_ok());
    assert!(checked(&[
        "group.consumer.min.session.timeout.ms=1000",
        "group.consumer.session.timeout.ms=5000",
    ])
    .is_err());
}

#[test]
fn dotted_keys_flatten_and_validate() {
    let text = "listeners = \"PLAINTEXT://127.0.0.1:0\"\nlog.dirs = \"/tmp/x\"\nnum.partitions = 3\nlog.cleanup.policy = \"compact\"\n[log.segment]\nbytes = 2048\n";
    let c = BrokerConfig::from_toml(text, Path::new("t.toml")).unwrap();
    assert_eq!(c.num_partitions(), 3);
    assert_eq!(c.log_dirs(), vec![PathBuf::from("/tmp/x")]);
    let d = c.topic_defaults();
    assert_eq!(d["cleanup.policy"], "compact");
    assert_eq!(d["segment.bytes"], "2048");
    let l = &c.listeners().unwrap()[0];
    assert_eq!((l.name.as_str(), l.host.as_str(), l.port), ("PLAINTEXT", "127.0.0.1", 0));
}

#[test]
fn errors_name_the_key() {
    for (text, key) in [
        ("no.such.key = 1", "no.such.key"),
        ("num.partitions = \"many\"", "num.partitions"),
        ("num.partitions = 0", "num.partitions"),
        ("log.cleanup.policy = \"shred\"", "log.cleanup.policy"),
        ("log.segment.bytes = 3", "log.segment.bytes"),
    ] {
        match BrokerConfig::from_toml(text, Path::new("t.toml")) {
            Err(e) => assert_eq!(e.key(), Some(key), "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn cleaner_keys_have_kafkas_defaults() {
    let c = BrokerConfig::default().cleaner_config();
    assert!(c.enable);
    assert_eq!(
        (c.num_threads, c.dedupe_buffer_size, c.io_buffer_size, c.backoff_ms),
        (1, 134_217_728, 524_288, 15_000)
    );
    assert_eq!(c.io_buffer_load_factor, 0.9);
    assert_eq!(c.max_io_bytes_per_second, f64::MAX);
    assert_eq!(BrokerConfig::default().metrics_listen().as_deref(), Some("127.0.0.1:9404"));
    let mut b = BrokerConfig::default();
    b.apply_overrides(["metrics.listen=", "log.cleaner.threads=2"]).unwrap();
    assert_eq!(b.metrics_listen(), None);
    assert_eq!(b.cleaner_config().num_threads, 2);
    for bad in [
        "log.cleaner.io.buffer.load.factor=0",
        "log.cleaner.io.buffer.load.factor=1.5",
        "log.cleaner.threads=-1",
        "log.cleaner.io.max.bytes.per.second=-5",
        "metrics.listen=nowhere",
    ] {
        match b.apply_overrides([bad]) {
            Err(ConfigError::Invalid { key, .. }) => {
                assert_eq!(key, bad.split('=').next().unwrap())
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn defaults_and_overrides() {
    let mut c = BrokerConfig::default();
    let l = c.listeners().unwrap().remove(0);
    assert_eq!(l.port, 9092);
    assert_eq!(c.socket_request_max_bytes(), 104_857_600);
    c.apply_overrides(["log.retention.hours=1", "auto.create.topics.enable=false"]).unwrap();
    assert_eq!(c.topic_defaults()["retention.ms"], "3600000");
    assert!(!c.auto_create_topics());
    assert!(c.apply_overrides(["novalue"]).is_err());
    assert_eq!(c.advertised(&l, 1234).unwrap(), Listener { host: "localhost".into(), port: 1234 });
}

#[test]
fn retention_ms_beats_minutes_beats_hours() {
    let ms = |pairs: &[&str]| {
        let mut c = BrokerConfig::default();
        c.apply_overrides(pairs.iter().copied()).unwrap();
        c.topic_defaults().get("retention.ms").cloned()
    };
    assert_eq!(ms(&[]), None);
    assert_eq!(ms(&["log.retention.hours=2"]).as_deref(), Some("7200000"));
    assert_eq!(
        ms(&["log.retention.hours=2", "log.retention.minutes=3"]).as_deref(),
        Some("180000")
    );
    assert_eq!(
        ms(&["log.retention.ms=5", "log.retention.hours=2", "log.retention.minutes=3"]).as_deref(),
        Some("5")
    );
    assert_eq!(ms(&["log.retention.hours=-1"]).as_deref(), Some("-1"));
}

#[test]
fn a_kafka_server_properties_is_read_with_its_foreign_keys_ignored() {
    let text = b"process.roles=broker,controller\nnode.id=1\ncontroller.quorum.bootstrap.servers=localhost:9093\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\ninter.broker.listener.name=PLAINTEXT\nadvertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093\ncontroller.listener.names=CONTROLLER\nlistener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\nnum.network.threads=3\nsocket.send.buffer.bytes=102400\nlog.dirs=/tmp/k\nlog.retention.hours=1\n";
    let c = BrokerConfig::from_properties(text, Path::new("server.properties")).unwrap();
    c.check().unwrap();
    let names: Vec<String> = c.listeners().unwrap().into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["PLAINTEXT"]);
    assert_eq!(c.topic_defaults()["retention.ms"], "3600000");
    let w = c.ignored_warning().unwrap();
    for key in [
        "process.roles (kraft)",
        "num.network.threads (threads)",
        "socket.send.buffer.bytes (sockets)",
        "controller listener(s) CONTROLLER not opened",
    ] {
        assert!(w.contains(key), "{w}");
    }
    // inter.broker.listener.name is served (a cluster's brokers reach each
    // other on it), so five keys remain ignored.
    assert_eq!(c.ignored_keys().len(), 5);
    let (listener, _) = c.inter_broker_listener().unwrap();
    assert_eq!(listener, "PLAINTEXT");
    let typo = BrokerConfig::from_properties(b"log.retension.hours=1\n", Path::new("s.properties"));
    assert_eq!(
        typo.unwrap_err().to_string(),
        "unknown config key log.retension.hours; did you mean log.retention.hours?"
    );
    let toml = BrokerConfig::from_toml("log.retension.hours = 1", Path::new("s.toml"));
    assert!(toml.unwrap_err().to_string().ends_with("did you mean log.retention.hours?"));
}

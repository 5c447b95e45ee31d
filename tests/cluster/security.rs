//! ACLs and SCRAM credentials are the cluster's, kept in etcd
//! (docs/design/multi-broker.md, 3.3): three brokers with an authorizer and
//! a SASL_PLAINTEXT listener (SCRAM-SHA-256) beside the PLAINTEXT one
//! brokers and the admin use (`super.users=User:ANONYMOUS`). A user added
//! with Kafka's `kafka-configs` through broker 1 and an ACL added with
//! `kafka-acls` through broker 2 let kcat, as that user, produce through
//! broker 3 to partitions led by all three, and nothing else (the read is
//! refused); a SIGKILLed broker comes back with them although its own
//! files hold none; the ACL removed through broker 3 is enforced by every
//! leader, and the user deleted through broker 2 no longer authenticates
//! until `sediment add-scram` with the cluster's endpoints adds her again.
//! Dynamic broker configs are the cluster's too: a cluster default set
//! through broker 1 is in force on every broker (topics inherit it) and a
//! per-broker value only on its broker, both kept across a restart; so are
//! a group's own configs (`--entity-type groups`), described alike by all.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    DescribeAclsRequest, DescribeConfigsRequest, DescribeUserScramCredentialsRequest,
};

use crate::broker::etcd::EtcdServer;
use crate::broker::{kafka_tool, kcat, TestBroker, Wire};
use crate::support::{create_topic, placement, start_cluster_with};

const CONFIGS: &str = "kafka.admin.ConfigCommand";
const ACLS: &str = "org.apache.kafka.tools.AclCommand";
const ALICE_PW: &str = "alice-Cluster-Secret-7";
const SETTINGS: [&str; 5] = [
    "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms=SCRAM-SHA-256",
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:ANONYMOUS",
    "allow.everyone.if.no.acl.found=false",
];

fn tool(b: &TestBroker, class: &str, args: &[&str]) -> String {
    let bootstrap = b.bootstrap();
    let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
    all.extend_from_slice(args);
    kafka_tool(b, class, &all, None)
}

/// (ACLs, SCRAM users) as broker `b` answers them.
fn known_to(b: &TestBroker) -> (usize, Vec<String>) {
    let mut w = Wire::connect(b.port);
    let acls = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_pattern_type_filter(1)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let acls = w.call(3, &acls);
    assert_eq!(acls.error_code, 0, "{:?}", acls.error_message);
    let count = acls.resources.iter().map(|r| r.acls.len()).sum();
    let users = w.call(0, &DescribeUserScramCredentialsRequest::default().with_users(None));
    (count, users.results.iter().map(|r| r.user.to_string()).collect())
}

/// Kafka's `ConfigSource` codes.
const DYNAMIC_BROKER: i8 = 2;
const DYNAMIC_DEFAULT_BROKER: i8 = 3;
const GROUP_CONFIG: i8 = 8;

/// `key` of resource `(kind, name)` as broker `b` describes it: (value, source).
fn described(b: &TestBroker, kind: i8, name: &str, key: &str) -> (Option<String>, i8) {
    let resource = DescribeConfigsResource::default()
        .with_resource_type(kind)
        .with_resource_name(kafka_protocol::protocol::StrBytes::from_string(name.into()))
        .with_configuration_keys(Some(vec![kafka_protocol::protocol::StrBytes::from_string(
            key.into(),
        )]));
    let r = Wire::connect(b.port)
        .call(4, &DescribeConfigsRequest::default().with_resources(vec![resource]));
    let result = &r.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    let entry = result.configs.iter().find(|c| c.name.as_str() == key).expect("the key");
    (entry.value.as_ref().map(|v| v.to_string()), entry.config_source)
}

/// Wait until broker `b` describes `key` of `(kind, name)` as `want`.
fn described_as(b: &TestBroker, kind: i8, name: &str, key: &str, want: (Option<&str>, i8)) {
    b.wait_for(20, "the dynamic config in force", || {
        let (v, source) = described(b, kind, name, key);
        (v.as_deref() == want.0 && source == want.1).then_some(())
    });
}

/// Wait until every broker answers `expected`.
fn known_everywhere(brokers: &[TestBroker], expected: (usize, &[&str])) {
    for b in brokers {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let now = known_to(b);
            if now.0 == expected.0 && now.1 == expected.1 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "broker on {} answers {now:?}, not {expected:?}:\n{}",
                b.port,
                b.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// kcat as alice through `b`'s SASL listener, with `mode`'s arguments.
fn as_alice(b: &TestBroker, mode: &[&str], stdin: &str) -> (bool, String, String) {
    let broker = format!("127.0.0.1:{}", b.listener_port("SASL_PLAINTEXT"));
    let mut args = vec![
        "-b",
        &broker,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-256",
        "-X",
        "sasl.username=alice",
    ];
    let password = format!("sasl.password={ALICE_PW}");
    args.extend(["-X", &password]);
    args.extend_from_slice(mode);
    kcat(&args, stdin)
}

const PRODUCE: [&str; 7] = ["-P", "-t", "orders", "-K:", "-X", "request.required.acks=-1", "-c"];

fn produce(b: &TestBroker, from: usize) -> (bool, String, String) {
    let lines: String = (from..from + 12).map(|i| format!("k{i}:v{i}\n")).collect();
    let mut mode = PRODUCE.to_vec();
    mode.push("12");
    as_alice(b, &mode, &lines)
}

/// Partitions of `orders` holding records, and how many records, read as
/// the super user.
fn written(b: &TestBroker) -> (std::collections::BTreeSet<String>, usize) {
    let broker = format!("127.0.0.1:{}", b.port);
    let (ok, out, err) = kcat(&["-b", &broker, "-C", "-t", "orders", "-e", "-f", "%p\n"], "");
    assert!(ok, "{err}");
    (out.lines().map(str::to_string).collect(), out.lines().count())
}

#[test]
fn acls_and_scram_users_are_the_clusters() {
    let etcd = EtcdServer::start();
    let mut brokers = start_cluster_with(&etcd, 3, &SETTINGS);
    create_topic(&brokers[0], "orders", 3, &["--replication-factor", "3"]);
    brokers[0].wait_for(30, "orders led by all three brokers", || {
        let leaders: std::collections::BTreeSet<i32> =
            placement(brokers[0].port, "orders").values().map(|p| p.0).collect();
        (leaders.len() == 3 && !leaders.contains(&-1)).then_some(())
    });

    let user = ["--entity-type", "users", "--entity-name", "alice"];
    let add = format!("SCRAM-SHA-256=[iterations=4096,password={ALICE_PW}]");
    tool(&brokers[0], CONFIGS, &[&["--alter"], &user[..], &["--add-config", &add]].concat());
    let allow = ["--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders"];
    tool(&brokers[1], ACLS, &[&["--add"], &allow[..]].concat());
    known_everywhere(&brokers, (1, &["alice"]));

    let (ok, _, err) = produce(&brokers[2], 0);
    assert!(ok, "alice produces through broker 3: {err}");
    let (partitions, count) = written(&brokers[0]);
    assert_eq!((partitions.len(), count), (3, 12), "to every leader");
    let (ok, _, err) = as_alice(&brokers[2], &["-C", "-t", "orders", "-e"], "");
    assert!(!ok && err.contains("authoriz"), "no READ ACL: {err}");

    // A cluster default through broker 1; a per-broker value on broker 3.
    let default = ["--entity-type", "brokers", "--entity-default"];
    tool(
        &brokers[0],
        CONFIGS,
        &[&["--alter"], &default[..], &["--add-config", "log.retention.ms=3600000"]].concat(),
    );
    let third = ["--entity-type", "brokers", "--entity-name", "3"];
    tool(
        &brokers[0],
        CONFIGS,
        &[&["--alter"], &third[..], &["--add-config", "log.cleaner.backoff.ms=2500"]].concat(),
    );
    // A group's own config through broker 1.
    let group = ["--entity-type", "groups", "--entity-name", "orders-app"];
    tool(
        &brokers[0],
        CONFIGS,
        &[&["--alter"], &group[..], &["--add-config", "consumer.heartbeat.interval.ms=6000"]]
            .concat(),
    );
    let dynamic_everywhere = |brokers: &[TestBroker]| {
        for (i, b) in brokers.iter().enumerate() {
            let id = (i + 1).to_string();
            let interval = (Some("6000"), GROUP_CONFIG);
            described_as(b, 32, "orders-app", "consumer.heartbeat.interval.ms", interval);
            let retention = (Some("3600000"), DYNAMIC_DEFAULT_BROKER);
            described_as(b, 4, &id, "log.retention.ms", retention);
            // A topic without its own value inherits the broker's default.
            assert_eq!(described(b, 2, "orders", "retention.ms").0.as_deref(), Some("3600000"));
            let (backoff, source) = described(b, 4, &id, "log.cleaner.backoff.ms");
            if id == "3" {
                assert_eq!((backoff.as_deref(), source), (Some("2500"), DYNAMIC_BROKER));
            } else {
                assert_ne!(backoff.as_deref(), Some("2500"), "broker {id} keeps its own");
            }
        }
    };
    dynamic_everywhere(&brokers);

    // Broker 2's own files hold none of it: it reads them from etcd.
    brokers[1].kill();
    brokers[1].restart();
    dynamic_everywhere(&brokers);
    for file in [
        "sediment-acls.json",
        "sediment-scram-credentials.json",
        "sediment-dynamic-broker-configs.json",
        "sediment-group-configs.json",
    ] {
        assert!(!brokers[1].data_dir().join(file).exists(), "{file} written in a cluster");
        assert!(!brokers[0].data_dir().join(file).exists(), "{file} written by the writer");
    }
    known_everywhere(&brokers, (1, &["alice"]));
    brokers[0].wait_for(30, "broker 2 back in every ISR", || {
        placement(brokers[0].port, "orders").values().all(|p| p.3.len() == 3).then_some(())
    });
    let (ok, _, err) = produce(&brokers[1], 12);
    assert!(ok, "alice produces through the restarted broker: {err}");

    tool(&brokers[2], ACLS, &[&["--remove", "--force"], &allow[..]].concat());
    known_everywhere(&brokers, (0, &["alice"]));
    let (ok, _, err) = produce(&brokers[0], 24);
    assert!(!ok && err.contains("authoriz"), "the ACL is gone on every leader: {err}");
    assert_eq!(written(&brokers[0]).1, 24, "nothing written without the ACL");

    tool(
        &brokers[1],
        CONFIGS,
        &[&["--alter"], &user[..], &["--delete-config", "SCRAM-SHA-256"]].concat(),
    );
    known_everywhere(&brokers, (0, &[]));
    let (ok, _, err) = as_alice(&brokers[0], &["-L"], "");
    assert!(!ok && err.contains("Authentication failed"), "alice is gone: {err}");

    // `sediment add-scram` with the cluster's endpoints writes etcd, with
    // the brokers running: every one of them authenticates her again.
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(["add-scram", "--override"])
        .arg(format!("sediment.cluster.etcd.endpoints={}", etcd.endpoint()))
        .arg("--override")
        .arg(format!("log.dirs={}", dir.path().display()))
        .arg(format!("SCRAM-SHA-256=[name=alice,password={ALICE_PW}]"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    known_everywhere(&brokers, (0, &["alice"]));
    for b in &brokers {
        let (ok, _, err) = as_alice(b, &["-L"], "");
        assert!(ok, "alice authenticates again: {err}");
    }
    assert!(!dir.path().join("sediment-scram-credentials.json").exists(), "the file was written");
}

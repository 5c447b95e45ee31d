//! The ACL admin APIs against Kafka 4.1.2's `kafka-acls`
//! (`org.apache.kafka.tools.AclCommand`) and a raw wire client, on a broker
//! with a SASL_PLAINTEXT listener (PLAIN users `admin` and `alice`),
//! `authorizer.class.name=...StandardAuthorizer` and `super.users=User:admin`:
//! `--add` / `--list` / `--remove --force` with `--command-config` as admin;
//! alice (no cluster ACL) gets CLUSTER_AUTHORIZATION_FAILED, and her denied
//! CreateAcls is counted in `sediment_authorization_denials_total` without
//! her name and logged once; the wire cases of CreateAcls/DescribeAcls/
//! DeleteAcls validation; an added ACL survives a restart (a leftover
//! `.tmp` ignored) and a damaged `sediment-acls.json` stops the start with
//! the file and the entry named. Without an authorizer `kafka-acls --list`
//! fails with Kafka's SecurityDisabledException.

use crate::broker;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::broker::{kafka_tool, kafka_tool_output, TestBroker, Wire};
use bytes::Bytes;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;

const ADMIN_PW: &str = "admin-Acl-Secret-1";
const ALICE_PW: &str = "alice-Acl-Secret-1";
const AUTHORIZER: &str =
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn overrides() -> Vec<String> {
    let users = format!(
        "org.apache.kafka.common.security.plain.PlainLoginModule required \
         user_admin=\"{ADMIN_PW}\" user_alice=\"{ALICE_PW}\";"
    );
    vec![
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0".into(),
        "sasl.enabled.mechanisms=PLAIN".into(),
        format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={users}"),
        AUTHORIZER.into(),
        "super.users=User:admin".into(),
    ]
}

fn start_secured() -> TestBroker {
    let o = overrides();
    TestBroker::start(&o.iter().map(String::as_str).collect::<Vec<_>>())
}

/// A client properties file for `user` on the SASL_PLAINTEXT listener.
fn command_config(dir: &std::path::Path, user: &str, password: &str) -> String {
    let path = dir.join(format!("{user}.properties"));
    let text = format!(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"{user}\" password=\"{password}\";\n"
    );
    std::fs::write(&path, text).expect("write");
    path.display().to_string()
}

/// `kafka-acls` against `port` with `config`: (success, stdout + stderr).
fn kafka_acls(port: u16, config: Option<&str>, args: &[&str]) -> (bool, String) {
    let bootstrap = format!("127.0.0.1:{port}");
    let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
    if let Some(c) = config {
        all.extend(["--command-config", c]);
    }
    all.extend_from_slice(args);
    let (ok, out, err) = kafka_tool_output("org.apache.kafka.tools.AclCommand", &all, None);
    (ok, format!("{out}{err}"))
}

const ORDERS_ACL: &str = "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)";
const ORDERS_RESOURCE: &str =
    "ResourcePattern(resourceType=TOPIC, name=orders-, patternType=PREFIXED)";

/// A connection to the SASL_PLAINTEXT listener authenticated as `user`.
fn authenticated(port: u16, user: &str, password: &str) -> Wire {
    let mut w = Wire::connect(port);
    assert_eq!(w.call(3, &ApiVersionsRequest::default()).error_code, 0);
    let hs = w.call(1, &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")));
    assert_eq!(hs.error_code, 0);
    let token = Bytes::from(format!("\0{user}\0{password}"));
    let r = w.call(2, &SaslAuthenticateRequest::default().with_auth_bytes(token));
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    w
}

fn creation(rt: i8, name: &str, principal: &str) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(s(name))
        .with_resource_pattern_type(3)
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(3)
        .with_permission_type(3)
}

fn create(w: &mut Wire, creations: Vec<AclCreation>) -> Vec<(i16, String)> {
    let r = w.call(3, &CreateAclsRequest::default().with_creations(creations));
    r.results
        .iter()
        .map(|c| (c.error_code, c.error_message.as_ref().map_or("", |m| m.as_str()).to_string()))
        .collect()
}

/// Topic ACLs named `name` (LITERAL), any principal: (principal, operation) pairs.
fn described(w: &mut Wire, name: &str) -> Vec<(String, i8)> {
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(s(name)))
        .with_pattern_type_filter(3)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let r = w.call(3, &request);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    r.resources
        .iter()
        .flat_map(|res| res.acls.iter().map(|a| (a.principal.to_string(), a.operation)))
        .collect()
}

fn wire_cases(port: u16) {
    let mut w = authenticated(port, "admin", ADMIN_PW);
    // A resource type Kafka does not know reads as UNKNOWN: 42 for that creation only.
    let results = create(&mut w, vec![creation(99, "t", "User:bob"), creation(2, "w1", "bob")]);
    assert_eq!(
        results,
        [
            (42, "Invalid resourceType UNKNOWN".to_string()),
            (42, "expected a string in format principalType:principalName but got bob".into()),
        ]
    );
    // A duplicate creation, in one request and again in a second: success, one ACL.
    let twice = vec![creation(2, "w2", "User:bob"), creation(2, "w2", "User:bob")];
    assert_eq!(create(&mut w, twice), [(0, String::new()), (0, String::new())]);
    assert_eq!(create(&mut w, vec![creation(2, "w2", "User:bob")]), [(0, String::new())]);
    assert_eq!(described(&mut w, "w2"), [("User:bob".to_string(), 3)]);
    // Two DeleteAcls filters selecting one binding: listed under both, removed once.
    let filter = DeleteAclsFilter::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(s("w2")))
        .with_pattern_type_filter(1)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let by_principal = filter.clone().with_principal_filter(Some(s("User:bob")));
    let r = w.call(3, &DeleteAclsRequest::default().with_filters(vec![filter, by_principal]));
    let listed: Vec<(i16, Vec<String>)> = r
        .filter_results
        .iter()
        .map(|f| {
            let names = f.matching_acls.iter().map(|m| m.resource_name.to_string()).collect();
            (f.error_code, names)
        })
        .collect();
    assert_eq!(listed, [(0, vec!["w2".to_string()]), (0, vec!["w2".to_string()])]);
    assert!(described(&mut w, "w2").is_empty());
    // The code 0 (UNKNOWN) fails Kafka's request parsing: the connection closes.
    w.send(3, &CreateAclsRequest::default().with_creations(vec![creation(0, "t", "User:bob")]));
    assert!(w.is_closed(), "a CreateAcls naming code 0 closes the connection");
}

fn denial_series() -> &'static str {
    r#"sediment_authorization_denials_total{api="CreateAcls",operation="ALTER",resource_type="CLUSTER"}"#
}

fn alice_cases(b: &TestBroker, port: u16, alice_config: &str) {
    let (ok, out) = kafka_acls(port, Some(alice_config), &["--list"]);
    assert!(!ok && out.contains("ClusterAuthorizationException"), "{out}");
    let mut w = authenticated(port, "alice", ALICE_PW);
    for _ in 0..2 {
        assert_eq!(create(&mut w, vec![creation(2, "mine", "User:alice")]), [(31, String::new())]);
    }
    let metrics = b.metrics();
    assert_eq!(broker::metric_value(&metrics, denial_series()), Some(2.0), "{metrics}");
    let denials: Vec<&str> =
        metrics.lines().filter(|l| l.starts_with("sediment_authorization_denials_total")).collect();
    assert!(!denials.is_empty() && denials.iter().all(|l| !l.contains("alice")), "{denials:?}");
    // Logged once for the two denials (the next line is due a minute later).
    let log = b.log();
    let lines = log
        .lines()
        .filter(|l| l.contains("authorization denied") && l.contains("CreateAcls"))
        .collect::<Vec<_>>();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("User:alice") && lines[0].contains("CLUSTER:kafka-cluster"));
}

/// `sediment serve` on `b`'s data dir must fail: its stderr.
fn serve_fails(b: &TestBroker) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sediment"));
    cmd.arg("serve")
        .arg("--override")
        .arg(format!("log.dirs={}", b.data_dir().display()))
        .arg("--override")
        .arg("metrics.listen=127.0.0.1:0");
    for o in overrides() {
        cmd.arg("--override").arg(o);
    }
    let mut child =
        cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn sediment");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sediment serve did not stop on a damaged ACL file");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("read");
    assert!(!status.success(), "{err}");
    err
}

#[test]
fn kafka_acls_adds_lists_and_removes_acls_that_survive_a_restart() {
    let mut b = start_secured();
    let dir = tempfile::tempdir().expect("tmp");
    let admin = command_config(dir.path(), "admin", ADMIN_PW);
    let alice = command_config(dir.path(), "alice", ALICE_PW);
    let port = b.listener_port("SASL_PLAINTEXT");
    let add = [
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "orders-",
        "--resource-pattern-type",
        "prefixed",
    ];
    let bs = format!("127.0.0.1:{port}");
    let tool = |args: &[&str]| {
        let mut all = vec!["--bootstrap-server", bs.as_str(), "--command-config", admin.as_str()];
        all.extend_from_slice(args);
        kafka_tool(&b, "org.apache.kafka.tools.AclCommand", &all, None)
    };
    tool(&add);
    let listed = tool(&["--list"]);
    assert!(listed.contains(ORDERS_RESOURCE) && listed.contains(ORDERS_ACL), "{listed}");

    wire_cases(port);
    alice_cases(&b, port, &alice);

    let mut remove = add.to_vec();
    remove[0] = "--remove";
    remove.push("--force");
    tool(&remove);
    let listed = tool(&["--list"]);
    assert!(!listed.contains(ORDERS_ACL), "{listed}");

    // Added again, then the broker restarts with a leftover .tmp beside the file.
    tool(&add);
    assert_eq!(b.stop().code(), Some(0));
    let file = b.data_dir().join("sediment-acls.json");
    let good = std::fs::read_to_string(&file).expect("the ACL file");
    std::fs::write(b.data_dir().join("sediment-acls.json.tmp"), "{half").expect("write");
    b.restart();
    let port = b.listener_port("SASL_PLAINTEXT");
    let (ok, listed) = kafka_acls(port, Some(&admin), &["--list"]);
    assert!(ok && listed.contains(ORDERS_ACL), "{listed}\n{}", b.log());
    assert_eq!(b.stop().code(), Some(0));

    // A damaged file stops the start, naming the file and the entry.
    std::fs::write(&file, good.replace("User:alice", "alice")).expect("write");
    let err = serve_fails(&b);
    assert!(
        err.contains("sediment-acls.json") && err.contains("entry 0 (TOPIC \"orders-\" for alice)"),
        "{err}"
    );
    std::fs::write(&file, &good[..good.len() / 2]).expect("write");
    let err = serve_fails(&b);
    assert!(err.contains("sediment-acls.json"), "{err}");
    for secret in [ADMIN_PW, ALICE_PW] {
        assert!(!b.log().contains(secret), "a password in the log");
    }
}

#[test]
fn without_an_authorizer_kafka_acls_reports_security_disabled() {
    let b = TestBroker::start(&[]);
    let (ok, out) = kafka_acls(b.port, None, &["--list"]);
    assert!(
        !ok && out.contains("SecurityDisabledException")
            && out.contains("No Authorizer is configured on the broker"),
        "{out}"
    );
    let (ok, out) = kafka_acls(
        b.port,
        None,
        &["--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"],
    );
    assert!(!ok && out.contains("SecurityDisabledException"), "{out}");
}

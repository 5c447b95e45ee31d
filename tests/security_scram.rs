//! SCRAM credentials through Kafka 4.1.2's `kafka-configs` (ConfigCommand):
//! `--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`,
//! `--describe` (DescribeClientQuotas + DescribeUserScramCredentials) and
//! `--delete-config`; a restart keeps the credential; the store file holds
//! salted keys, never the password, and is readable by its owner only.

mod broker;

use broker::{kafka_tool, kafka_tool_output, TestBroker};

const CONFIGS: &str = "kafka.admin.ConfigCommand";
const ALICE_PW: &str = "alice-Scram-Secret-1";
const BOB_PW: &str = "bob-Scram-Secret-2";

fn configs(b: &TestBroker, args: &[&str]) -> String {
    let bootstrap = b.bootstrap();
    let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
    all.extend_from_slice(args);
    kafka_tool(b, CONFIGS, &all, None)
}

fn describe(b: &TestBroker, user: &str) -> String {
    configs(b, &["--describe", "--entity-type", "users", "--entity-name", user])
}

#[test]
fn kafka_configs_adds_describes_and_deletes_scram_users_durably() {
    let mut b = TestBroker::start(&[]);
    let add = |b: &TestBroker, user: &str, config: &str| {
        configs(
            b,
            &["--alter", "--entity-type", "users", "--entity-name", user, "--add-config", config],
        )
    };
    add(&b, "alice", &format!("SCRAM-SHA-256=[iterations=8192,password={ALICE_PW}]"));
    add(&b, "alice", &format!("SCRAM-SHA-512=[password={ALICE_PW}]"));
    add(&b, "bob", &format!("SCRAM-SHA-512=[iterations=4096,password={BOB_PW}]"));
    let out = describe(&b, "alice");
    assert!(out.contains("SCRAM-SHA-256=iterations=8192"), "{out}");
    assert!(out.contains("SCRAM-SHA-512=iterations=4096"), "{out}");

    // Kafka's bounds: fewer than 4096 iterations is refused by the broker.
    let bootstrap = b.bootstrap();
    let (ok, stdout, stderr) = kafka_tool_output(
        CONFIGS,
        &[
            "--bootstrap-server",
            &bootstrap,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "carol",
            "--add-config",
            "SCRAM-SHA-256=[iterations=100,password=x]",
        ],
        None,
    );
    assert!(
        !ok || stderr.contains("iterations") || stdout.contains("iterations"),
        "{stdout}{stderr}"
    );
    assert!(!describe(&b, "carol").contains("SCRAM"), "carol must have no credential");

    let file = b.data_dir().join("sediment-scram-credentials.json");
    let text = std::fs::read_to_string(&file).expect("the credential file");
    for secret in [ALICE_PW, BOB_PW] {
        assert!(!text.contains(secret), "{secret} stored:\n{text}");
    }
    assert!(text.contains("\"stored_key\"") && text.contains("\"alice\""), "{text}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&file).expect("metadata").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    b.stop();
    b.restart();
    let out = describe(&b, "alice");
    assert!(out.contains("SCRAM-SHA-256=iterations=8192"), "after restart: {out}");
    configs(
        &b,
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--delete-config",
            "SCRAM-SHA-256",
        ],
    );
    let out = describe(&b, "alice");
    assert!(
        !out.contains("SCRAM-SHA-256") && out.contains("SCRAM-SHA-512=iterations=4096"),
        "{out}"
    );
    let out = configs(&b, &["--describe", "--entity-type", "users"]);
    assert!(out.contains("bob") && out.contains("alice"), "{out}");
    for secret in [ALICE_PW, BOB_PW] {
        assert!(!b.log().contains(secret), "{secret} logged");
    }
}

#[test]
fn a_damaged_credential_file_stops_the_start_naming_the_entry() {
    let mut b = TestBroker::start(&[]);
    configs(
        &b,
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--add-config",
            &format!("SCRAM-SHA-256=[password={ALICE_PW}]"),
        ],
    );
    b.stop();
    let file = b.data_dir().join("sediment-scram-credentials.json");
    let text = std::fs::read_to_string(&file).expect("file");
    std::fs::write(&file, text.replace("\"iterations\": 4096", "\"iterations\": 10"))
        .expect("write");
    let out = std::process::Command::new("timeout")
        .args(["60", env!("CARGO_BIN_EXE_sediment"), "serve", "--override"])
        .arg(format!("log.dirs={}", b.data_dir().display()))
        .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
        .output()
        .expect("run sediment");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.status.code() != Some(124), "{log}");
    assert!(
        log.contains("sediment-scram-credentials.json") && log.contains("user \"alice\""),
        "{log}"
    );
}

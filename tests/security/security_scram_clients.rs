//! Real clients authenticate with SCRAM-SHA-256 and SCRAM-SHA-512 on a
//! SASL_PLAINTEXT listener with a user made by `kafka-configs` on the
//! PLAINTEXT listener: kcat produces and consumes; Kafka 4.1.2's console
//! producer and `kafka-topics` with `--producer.config`/`--command-config`;
//! a wrong password fails with an authentication error, and no password
//! reaches the log. Over SASL_SSL (PEM key store made with rcgen) and
//! SASL_PLAINTEXT: kcat, confluent-kafka-python and kafka-python with
//! SCRAM-SHA-256 and SCRAM-SHA-512, and both Python clients' wrong-password
//! errors carrying the broker's message.

use std::process::Command;

use crate::broker::{
    create_topic, kafka_tool, kafka_tool_output, kcat, python, repo_root, TestBroker,
};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair,
};

const ALICE_PW: &str = "alice-Scram-Secret-1";

fn configs(b: &TestBroker, args: &[&str]) -> String {
    let bootstrap = b.bootstrap();
    let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
    all.extend_from_slice(args);
    kafka_tool(b, "kafka.admin.ConfigCommand", &all, None)
}

fn kcat_args(port: u16, mechanism: &str, password: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> =
        ["-b", &format!("127.0.0.1:{port}"), "-X", "security.protocol=sasl_plaintext"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    a.extend(["-X".into(), format!("sasl.mechanisms={mechanism}")]);
    a.extend(["-X".into(), "sasl.username=alice".into()]);
    a.extend(["-X".into(), format!("sasl.password={password}")]);
    a.extend(extra.iter().map(|e| e.to_string()));
    a
}

#[test]
fn kcat_and_java_clients_authenticate_with_scram_sha_256_and_512() {
    let b = TestBroker::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
    ]);
    let sasl = b.listener_port("SASL_PLAINTEXT");
    for m in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        configs(
            &b,
            &[
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                "alice",
                "--add-config",
                &format!("{m}=[iterations=8192,password={ALICE_PW}]"),
            ],
        );
    }
    create_topic(b.port, "scram-t", 1, &[]);
    for m in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let (ok, _, err) = kcat(
            &kcat_args(sasl, m, ALICE_PW, &["-P", "-t", "scram-t"]),
            &format!("{m}-a\n{m}-b\n"),
        );
        assert!(ok, "kcat {m} produce: {err}\n{}", b.log());
        let (bad, _, err) = kcat(&kcat_args(sasl, m, "wrong-pw", &["-L"]), "");
        assert!(!bad && err.contains("uthentication"), "kcat {m} with a wrong password: {err}");
    }
    let (ok, out, err) = kcat(
        &kcat_args(
            sasl,
            "SCRAM-SHA-512",
            ALICE_PW,
            &["-C", "-t", "scram-t", "-o", "beginning", "-e", "-c", "4"],
        ),
        "",
    );
    assert!(ok, "kcat consume: {err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, ["SCRAM-SHA-256-a", "SCRAM-SHA-256-b", "SCRAM-SHA-512-a", "SCRAM-SHA-512-b"]);

    let dir = tempfile::tempdir().expect("tmp");
    let client_config = |m: &str, password: &str| {
        let path = dir.path().join(format!("{m}-{password}.properties"));
        let text = format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism={m}\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"{password}\";\n"
        );
        std::fs::write(&path, text).expect("write");
        path.display().to_string()
    };
    let bs = format!("127.0.0.1:{sasl}");
    for m in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let cfg = client_config(m, ALICE_PW);
        kafka_tool(
            &b,
            "org.apache.kafka.tools.ConsoleProducer",
            &["--bootstrap-server", &bs, "--topic", "scram-t", "--producer.config", &cfg],
            Some("java-1\n"),
        );
        let listed = kafka_tool(
            &b,
            "org.apache.kafka.tools.TopicCommand",
            &["--bootstrap-server", &bs, "--command-config", &cfg, "--list"],
            None,
        );
        assert!(listed.lines().any(|l| l == "scram-t"), "{listed}");
        let bad = client_config(m, "wrong-pw");
        let (ok, out, err) = kafka_tool_output(
            "org.apache.kafka.tools.TopicCommand",
            &["--bootstrap-server", &bs, "--command-config", &bad, "--list"],
            None,
        );
        assert!(!ok && format!("{out}{err}").contains("SaslAuthenticationException"), "{out}{err}");
    }
    let (ok, out, err) = kcat(
        &kcat_args(
            sasl,
            "SCRAM-SHA-256",
            ALICE_PW,
            &["-C", "-t", "scram-t", "-o", "beginning", "-e", "-c", "6"],
        ),
        "",
    );
    assert!(ok && out.lines().filter(|l| *l == "java-1").count() == 2, "{out}{err}");
    for secret in [ALICE_PW, "wrong-pw"] {
        assert!(!b.log().contains(secret), "{secret} logged");
    }
}

/// ca.pem and server.pem (PKCS#8 key + chain for 127.0.0.1 and localhost).
fn make_pki() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, "sediment SCRAM test CA");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("ca");
    std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("write");
    let key = KeyPair::generate().expect("key");
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let mut params = CertificateParams::new(names).expect("params");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca).expect("cert");
    let pem = format!("{}{}", key.serialize_pem(), cert.pem());
    std::fs::write(dir.path().join("server.pem"), pem).expect("write");
    dir
}

/// One Python client script against one listener with one mechanism.
struct Py<'a> {
    b: &'a TestBroker,
    port: u16,
    protocol: &'a str,
    mechanism: &'a str,
    ca: &'a str,
}

impl Py<'_> {
    fn run(&self, script: &str, topic: &str, password: &str, mode: &str) {
        let out = Command::new("timeout")
            .args(["--kill-after=5", "90"])
            .arg(python())
            .arg(repo_root().join("tests/python").join(script))
            .arg(format!("127.0.0.1:{}", self.port))
            .args([topic, self.protocol, "alice", password, self.ca, mode, self.mechanism])
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("python");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("done"),
            "{script} {} {} {mode}\n{stdout}\n{}\nbroker:\n{}",
            self.protocol,
            self.mechanism,
            String::from_utf8_lossy(&out.stderr),
            self.b.log()
        );
    }
}

#[test]
fn python_clients_and_kcat_use_scram_over_sasl_ssl_and_sasl_plaintext() {
    let pki = make_pki();
    let b = TestBroker::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
        "ssl.keystore.type=PEM",
        &format!("ssl.keystore.location={}", pki.path().join("server.pem").display()),
    ]);
    let (sasl, sasl_ssl) = (b.listener_port("SASL_PLAINTEXT"), b.listener_port("SASL_SSL"));
    let ca = pki.path().join("ca.pem").display().to_string();
    for m in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        configs(
            &b,
            &[
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                "alice",
                "--add-config",
                &format!("{m}=[password={ALICE_PW}]"),
            ],
        );
    }
    let mut args = kcat_args(sasl_ssl, "SCRAM-SHA-512", ALICE_PW, &["-L"]);
    args[3] = "security.protocol=sasl_ssl".into();
    args.extend(["-X".into(), format!("ssl.ca.location={ca}")]);
    let (ok, out, err) = kcat(&args, "");
    assert!(ok && out.contains("broker"), "kcat SASL_SSL SCRAM-SHA-512: {out}{err}");
    let cases = [
        ("sasl_confluent.py", "SCRAM-SHA-256", true),
        ("sasl_confluent.py", "SCRAM-SHA-512", false),
        ("sasl_kafka_python.py", "SCRAM-SHA-512", true),
        ("sasl_kafka_python.py", "SCRAM-SHA-256", false),
    ];
    for (i, (script, m, ssl)) in cases.into_iter().enumerate() {
        let (port, protocol) = if ssl { (sasl_ssl, "SASL_SSL") } else { (sasl, "SASL_PLAINTEXT") };
        let topic = format!("scram-py-{i}");
        create_topic(b.port, &topic, 1, &[]);
        let py = Py { b: &b, port, protocol, mechanism: m, ca: &ca };
        py.run(script, &topic, ALICE_PW, "good");
        py.run(script, &topic, "wrong-pw", "bad");
    }
    for secret in [ALICE_PW, "wrong-pw"] {
        assert!(!b.log().contains(secret), "{secret} logged");
    }
}

#[test]
fn add_scram_bootstraps_a_user_only_while_the_broker_is_stopped() {
    let mut b = TestBroker::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
    ]);
    let sediment = env!("CARGO_BIN_EXE_sediment");
    let dirs = format!("log.dirs={}", b.data_dir().display());
    let add = || {
        let arg = format!("SCRAM-SHA-512=[name=alice,password={ALICE_PW},iterations=8192]");
        let out = Command::new(sediment)
            .args(["add-scram", "--override", &dirs, &arg])
            .env_remove("SEDIMENT_CONFIG")
            .output()
            .expect("sediment add-scram");
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // While the broker runs: refused, pointing at kafka-configs.
    let (ok, stderr) = add();
    assert!(!ok && stderr.contains("kafka-configs"), "{stderr}");
    // A second broker on the same data dir stops before touching it.
    let out = Command::new(sediment)
        .args(["serve", "--override", &dirs, "--override", "listeners=PLAINTEXT://127.0.0.1:0"])
        .args(["--override", "metrics.listen="])
        .env_remove("SEDIMENT_CONFIG")
        .output()
        .expect("sediment serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("in use by another process"), "{stderr}");

    assert!(b.stop().success());
    let (ok, stderr) = add();
    assert!(ok, "{stderr}");
    let store = std::fs::read_to_string(b.data_dir().join("sediment-scram-credentials.json"))
        .expect("store");
    assert!(store.contains("\"alice\"") && !store.contains(ALICE_PW), "{store}");
    b.restart();
    let sasl = b.listener_port("SASL_PLAINTEXT");
    create_topic(b.port, "bootstrapped", 1, &[]);
    let (ok, _, err) =
        kcat(&kcat_args(sasl, "SCRAM-SHA-512", ALICE_PW, &["-P", "-t", "bootstrapped"]), "hello\n");
    assert!(ok, "kcat as the bootstrapped user: {err}\n{}", b.log());
    let (bad, _, err) = kcat(&kcat_args(sasl, "SCRAM-SHA-512", "wrong-pw", &["-L"]), "");
    assert!(!bad && err.contains("uthentication"), "{err}");
}

//! SSL listeners with PEM key and trust stores, certificates made at test
//! time with rcgen (a CA, a server certificate for 127.0.0.1 and localhost,
//! a client certificate with an awkward subject, and a client certificate
//! from another CA). One broker has a PLAINTEXT listener, an SSL listener
//! with `ssl.client.auth=requested` and an `MTLS` listener mapped to SSL with
//! `listener.name.mtls.ssl.client.auth=required`.
//!
//! Real clients produce and consume over SSL, with and without client
//! certificates: kcat, confluent-kafka-python, kafka-python, and Kafka 4.1.2's console
//! producer and consumer with `--producer.config`/`--consumer.config`. The
//! mTLS principal is the subject in RFC 2253 form (from the connection's
//! debug log line). A multi-MB fetch over TLS is byte-identical to the same
//! fetch over PLAINTEXT. Bad input (plaintext on the TLS port, TLS on the
//! plaintext port, half a ClientHello then silence, a certificate from
//! another CA or none where one is required) each ends only that connection
//! while a TLS client on another connection keeps producing and fetching.

use crate::broker;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::broker::{create_topic, kafka_tool, kcat, python, repo_root, TestBroker, Wire};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiVersionsRequest, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// The subject of the client certificate, as Java's X500Principal prints it.
const ALICE_DN: &str = "CN=alice,O=Acme\\, Inc.,C=DE";

struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn s(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// Write ca.pem, server.pem (PKCS#8 key + chain), client.{crt,key,pem} and
/// rogue.{crt,key} (a client of another CA).
fn make_pki() -> Pki {
    let pki = Pki { dir: tempfile::tempdir().unwrap() };
    let ca = ca("sediment test CA");
    std::fs::write(pki.path("ca.pem"), ca.pem()).unwrap();

    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca).unwrap();
    std::fs::write(pki.path("server.pem"), format!("{}{}", key.serialize_pem(), cert.pem()))
        .unwrap();

    let client = |name: &str, issuer: &CertifiedIssuer<'static, KeyPair>, dn: &[(DnType, &str)]| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        for (t, v) in dn {
            params.distinguished_name.push(t.clone(), *v);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, issuer).unwrap();
        std::fs::write(pki.path(&format!("{name}.crt")), cert.pem()).unwrap();
        std::fs::write(pki.path(&format!("{name}.key")), key.serialize_pem()).unwrap();
        std::fs::write(
            pki.path(&format!("{name}.pem")),
            format!("{}{}", key.serialize_pem(), cert.pem()),
        )
        .unwrap();
    };
    client(
        "client",
        &ca,
        &[
            (DnType::CountryName, "DE"),
            (DnType::OrganizationName, "Acme, Inc."),
            (DnType::CommonName, "alice"),
        ],
    );
    client("rogue", &self::ca("another CA"), &[(DnType::CommonName, "mallory")]);
    client("bob", &ca, &[(DnType::CommonName, "bob")]);
    pki
}

/// (broker, plaintext port, SSL port, MTLS port).
fn start(pki: &Pki) -> (TestBroker, u16, u16, u16) {
    // The principal and the handshake failures are logged at debug.
    let b = TestBroker::start_with_env(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,MAPPED://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,MAPPED:SSL",
        "listener.name.mapped.ssl.client.auth=required",
        // Only subjects with an O get a principal, their CN upper-cased.
        "listener.name.mapped.ssl.principal.mapping.rules=RULE:^CN=([^,]*),O=.*$/$1/U",
        "listener.name.mapped.ssl.cipher.suites=TLS_CHACHA20_POLY1305_SHA256",
        "ssl.keystore.type=PEM",
        &format!("ssl.keystore.location={}", pki.s("server.pem")),
        "ssl.truststore.type=PEM",
        &format!("ssl.truststore.location={}", pki.s("ca.pem")),
        "ssl.client.auth=requested",
        "listener.name.mtls.ssl.client.auth=required",
        "ssl.handshake.timeout.ms=1500",
    ], &[("SEDIMENT_TEST_LOG", "info,sediment::server=debug")]);
    let port = |name: &str| b.listener_port(name);
    let (plain, ssl, mtls) = (port("PLAINTEXT"), port("SSL"), port("MTLS"));
    (b, plain, ssl, mtls)
}

fn client_config(pki: &Pki, cert: Option<&str>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for c in CertificateDer::pem_file_iter(pki.path("ca.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match cert {
        None => builder.with_no_client_auth(),
        Some(name) => {
            let chain: Vec<_> = CertificateDer::pem_file_iter(pki.path(&format!("{name}.crt")))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{name}.key"))).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    })
}

/// A Kafka client speaking through rustls (blocking).
struct TlsWire {
    s: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    next: i32,
}

impl TlsWire {
    fn connect(config: Arc<rustls::ClientConfig>, port: u16) -> std::io::Result<Self> {
        let tcp = TcpStream::connect(("127.0.0.1", port))?;
        tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let conn = rustls::ClientConnection::new(config, name).unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock)?;
        }
        Ok(Self { s, next: 1 })
    }

    fn try_call<R: kafka_protocol::protocol::Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> std::io::Result<R::Response> {
        self.next += 1;
        broker::call_over(&mut self.s, self.next - 1, version, request)
    }

    fn call<R: kafka_protocol::protocol::Request>(&mut self, v: i16, r: &R) -> R::Response {
        self.try_call(v, r).expect("TLS request")
    }

    /// ApiVersions answers: the connection is alive.
    fn alive(&mut self) {
        let r = self.call(3, &ApiVersionsRequest::default());
        assert_eq!(r.error_code, 0);
    }
}

fn fetch_request(topic: &str, max: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(max)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(max)])])
}

fn kcat_ssl(pki: &Pki, port: u16, cert: bool) -> Vec<String> {
    let mut args = vec![
        "-b".to_string(),
        format!("127.0.0.1:{port}"),
        "-X".into(),
        "security.protocol=ssl".into(),
        "-X".into(),
        format!("ssl.ca.location={}", pki.s("ca.pem")),
    ];
    if cert {
        args.extend([
            "-X".into(),
            format!("ssl.certificate.location={}", pki.s("client.crt")),
            "-X".into(),
            format!("ssl.key.location={}", pki.s("client.key")),
        ]);
    }
    args
}

fn run_kcat(b: &TestBroker, base: &[String], extra: &[&str], stdin: &str) -> String {
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend_from_slice(extra);
    let (ok, stdout, stderr) = kcat(&args, stdin);
    assert!(ok, "kcat {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}\nbroker:\n{}", b.log());
    stdout
}

fn python_tls(b: &TestBroker, script: &str, port: u16, topic: &str, args: &[String]) {
    let out = Command::new("timeout")
        .args(["--kill-after=5", "90"])
        .arg(python())
        .arg(repo_root().join("tests/python").join(script))
        .arg(format!("127.0.0.1:{port}"))
        .arg(topic)
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("done"),
        "{script} {topic}\n{stdout}\n{}\nbroker:\n{}",
        String::from_utf8_lossy(&out.stderr),
        b.log()
    );
}

fn write_properties(path: &Path, lines: &[String]) -> String {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
    path.display().to_string()
}

#[test]
fn real_clients_over_ssl_with_and_without_client_certificates() {
    let pki = make_pki();
    let (b, plain, ssl, mtls) = start(&pki);

    // kcat: produce over SSL without a certificate, consume over mTLS.
    let no_cert = kcat_ssl(&pki, ssl, false);
    let with_cert = kcat_ssl(&pki, mtls, true);
    run_kcat(&b, &no_cert, &["-P", "-t", "tls-kcat", "-K:"], "a:1\nb:2\n");
    let got = run_kcat(
        &b,
        &with_cert,
        &["-C", "-t", "tls-kcat", "-o", "beginning", "-c", "2", "-e", "-f", "%k=%s\n"],
        "",
    );
    assert_eq!(got, "a=1\nb=2\n");
    let meta = run_kcat(&b, &with_cert, &["-L"], "");
    assert!(meta.contains(&format!("broker 1 at 127.0.0.1:{mtls}")), "{meta}");
    // The mTLS client's principal is its subject, as Kafka would name it.
    let log = b.log();
    assert!(log.contains(&format!("principal=User:{ALICE_DN}")), "{log}");
    assert!(log.contains("principal=User:ANONYMOUS"), "{log}");
    principal_mapping_rules(&b, &pki);

    // confluent-kafka-python and kafka-python, with and without a client certificate.
    let ca_only = [pki.s("ca.pem")];
    let with_client = [pki.s("ca.pem"), pki.s("client.crt"), pki.s("client.key")];
    python_tls(&b, "tls_confluent.py", ssl, "tls-confluent", &ca_only);
    python_tls(&b, "tls_confluent.py", mtls, "tls-confluent-mtls", &with_client);
    python_tls(&b, "tls_kafka_python.py", ssl, "tls-kafka-python", &ca_only);
    python_tls(&b, "tls_kafka_python.py", mtls, "tls-kafka-python-mtls", &with_client);

    // Kafka's console tools with PEM stores in their config files.
    let common = |keystore: bool| {
        let mut l = vec![
            "security.protocol=SSL".to_string(),
            "ssl.truststore.type=PEM".into(),
            format!("ssl.truststore.location={}", pki.s("ca.pem")),
        ];
        if keystore {
            l.push("ssl.keystore.type=PEM".into());
            l.push(format!("ssl.keystore.location={}", pki.s("client.pem")));
        }
        l
    };
    let producer_config = write_properties(&pki.path("producer.properties"), &common(false));
    let consumer_config = write_properties(&pki.path("consumer.properties"), &common(true));
    kafka_tool(
        &b,
        "org.apache.kafka.tools.ConsoleProducer",
        &[
            "--bootstrap-server",
            &format!("127.0.0.1:{ssl}"),
            "--topic",
            "tls-java",
            "--producer.config",
            &producer_config,
        ],
        Some("j1\nj2\nj3\n"),
    );
    let consumed = kafka_tool(
        &b,
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server",
            &format!("127.0.0.1:{mtls}"),
            "--topic",
            "tls-java",
            "--from-beginning",
            "--max-messages",
            "3",
            "--timeout-ms",
            "30000",
            crate::broker::consumer_config_flag(),
            &consumer_config,
        ],
        None,
    );
    assert_eq!(consumed.lines().collect::<Vec<_>>(), ["j1", "j2", "j3"]);

    // A fetch of several MB: the same bytes over TLS (read and written
    // through the stream) as over PLAINTEXT (sendfile).
    create_topic(plain, "big", 1, &[]);
    let mut w = Wire::connect(plain);
    let value = "x".repeat(100_000);
    for batch in 0..40 {
        let records: Vec<(String, Option<String>)> =
            (0..1).map(|i| (format!("k{batch}-{i}"), Some(value.clone()))).collect();
        broker::produce(&mut w, "big", 0, broker::now_ms(), &records);
    }
    let over_plain = w.call(12, &fetch_request("big", 16 << 20));
    let mut t = TlsWire::connect(client_config(&pki, None), ssl).unwrap();
    let over_tls = t.call(12, &fetch_request("big", 16 << 20));
    let plain_bytes = over_plain.responses[0].partitions[0].records.clone().unwrap();
    let tls_bytes = over_tls.responses[0].partitions[0].records.clone().unwrap();
    assert!(plain_bytes.len() > 3_900_000, "{}", plain_bytes.len());
    assert!(plain_bytes == tls_bytes, "TLS fetch differs from PLAINTEXT");
}

/// `ssl.principal.mapping.rules` of the MAPPED listener: alice's subject
/// maps to `ALICE`; bob's has no O, no rule applies, and the connection is
/// closed after the handshake (Kafka fails its authentication).
fn principal_mapping_rules(b: &TestBroker, pki: &Pki) {
    let port = b.listener_port("MAPPED");
    let mut alice = TlsWire::connect(client_config(pki, Some("client")), port).unwrap();
    alice.alive();
    wait_for_log(b, "principal=User:ALICE");
    // The listener's ssl.cipher.suites is what was negotiated.
    let suite = alice.s.conn.negotiated_cipher_suite().map(|c| c.suite());
    assert_eq!(suite, Some(rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256));
    let refused = TlsWire::connect(client_config(pki, Some("bob")), port)
        .and_then(|mut w| w.try_call(3, &ApiVersionsRequest::default()));
    assert!(refused.is_err(), "bob has no principal on MAPPED: {refused:?}");
    let series =
        "sediment_tls_handshake_failures_total{listener=\"MAPPED\",reason=\"no_principal_rule\"}";
    assert_eq!(b.metric(series), Some(1.0), "{}", b.metrics());
}

/// Wait (up to 10 s) until the broker's log holds `text`.
fn wait_for_log(b: &TestBroker, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !b.log().contains(text) {
        assert!(Instant::now() < deadline, "{text:?} not logged:\n{}", b.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first bytes a TLS client sends: its ClientHello.
fn client_hello(pki: &Pki) -> Vec<u8> {
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut conn = rustls::ClientConnection::new(client_config(pki, None), name).unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    out
}

fn closed_within(stream: &mut TcpStream, limit: Duration) -> Duration {
    stream.set_read_timeout(Some(limit)).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return started.elapsed(),
            Ok(_) => {} // an alert before the close
            Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => {
                return started.elapsed()
            }
            Err(e) => panic!("not closed within {limit:?}: {e}"),
        }
    }
}

#[test]
fn bad_input_on_tls_ports_ends_only_that_connection() {
    let pki = make_pki();
    let (b, plain, ssl, mtls) = start(&pki);
    create_topic(plain, "steady", 1, &[]);
    let mut good = TlsWire::connect(client_config(&pki, Some("client")), mtls).unwrap();
    let mut round = 0;
    let mut still_working = |good: &mut TlsWire| {
        round += 1;
        good.alive();
        let mut w = Wire::connect(plain);
        broker::produce(
            &mut w,
            "steady",
            0,
            broker::now_ms(),
            &[(format!("r{round}"), Some("v".into()))],
        );
        let f = good.call(12, &fetch_request("steady", 1 << 20));
        assert_eq!(f.responses[0].partitions[0].error_code, 0);
        assert_eq!(f.responses[0].partitions[0].high_watermark, round);
    };
    still_working(&mut good);

    // Plaintext Kafka bytes on the TLS port: closed.
    // (rustls answers with an alert first.)
    let mut w = Wire::connect(ssl);
    w.send(3, &ApiVersionsRequest::default());
    closed_within(&mut w.stream, Duration::from_secs(10));
    still_working(&mut good);

    // A TLS ClientHello on the plaintext port: closed, with a hint in the log.
    let mut s = TcpStream::connect(("127.0.0.1", plain)).unwrap();
    s.write_all(&client_hello(&pki)).unwrap();
    closed_within(&mut s, Duration::from_secs(10));
    still_working(&mut good);
    wait_for_log(&b, "looks like TLS on a PLAINTEXT listener");

    // Half a ClientHello, then silence: closed at ssl.handshake.timeout.ms (1.5 s).
    let hello = client_hello(&pki);
    let mut s = TcpStream::connect(("127.0.0.1", ssl)).unwrap();
    s.write_all(&hello[..hello.len() / 2]).unwrap();
    let after = closed_within(&mut s, Duration::from_secs(15));
    assert!(after >= Duration::from_millis(1000), "closed after {after:?}");
    still_working(&mut good);

    // Where a certificate is required: one from another CA, or none, fails.
    for cert in [Some("rogue"), None] {
        let refused = TlsWire::connect(client_config(&pki, cert), mtls)
            .and_then(|mut t| t.try_call(3, &ApiVersionsRequest::default()).map(|_| ()));
        assert!(refused.is_err(), "{cert:?} accepted where a certificate is required");
        still_working(&mut good);
    }
    // The requested listener takes a client without one, and one with a good one.
    TlsWire::connect(client_config(&pki, None), ssl).unwrap().alive();
    TlsWire::connect(client_config(&pki, Some("client")), ssl).unwrap().alive();
    // But not a certificate from another CA.
    let rogue = TlsWire::connect(client_config(&pki, Some("rogue")), ssl)
        .and_then(|mut t| t.try_call(3, &ApiVersionsRequest::default()).map(|_| ()));
    assert!(rogue.is_err(), "a certificate that does not verify must be refused");
    still_working(&mut good);
    // Each failure counted by listener and reason.
    let count = |listener: &str, reason: &str| {
        let series = format!(
            "sediment_tls_handshake_failures_total{{listener=\"{listener}\",reason=\"{reason}\"}}"
        );
        b.metric(&series).unwrap_or(0.0)
    };
    // (A client may see the alert before the broker's task counts it.)
    for (listener, reason, n) in [
        ("SSL", "not_tls", 1.0),
        ("SSL", "timeout", 1.0),
        ("MTLS", "bad_certificate", 2.0),
        ("SSL", "bad_certificate", 1.0),
    ] {
        b.wait_for(10, &format!("{n} {listener} {reason} failures"), || {
            (count(listener, reason) == n).then_some(())
        });
    }
    assert!(!b.log().contains("panicked"), "{}", b.log());
}

#[test]
fn check_config_loads_the_key_store() {
    let pki = make_pki();
    let sediment = env!("CARGO_BIN_EXE_sediment");
    let dev = repo_root().join("config/dev.toml").display().to_string();
    let base = [
        "listeners=SSL://127.0.0.1:9093".to_string(),
        "ssl.keystore.type=PEM".into(),
        "ssl.truststore.type=PEM".into(),
    ];
    let run = |extra: &[String]| {
        let mut cmd = Command::new(sediment);
        cmd.args(["check-config", &dev]);
        for o in base.iter().chain(extra) {
            cmd.args(["--override", o]);
        }
        let out = cmd.output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // The README's example, with its two files made here.
    let readme =
        std::fs::read_to_string(repo_root().join("docs/operating/configuration.md")).unwrap();
    let example = readme
        .split("Several listeners, one of them TLS")
        .nth(1)
        .and_then(|rest| rest.split("```toml\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("the README's listener example");
    let example = example
        .replace("/etc/sediment/broker.pem", &pki.s("server.pem"))
        .replace("/etc/sediment/clients-ca.pem", &pki.s("ca.pem"));
    std::fs::write(pki.path("example.toml"), example).unwrap();
    let out =
        Command::new(sediment).args(["check-config", &pki.s("example.toml")]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ks = format!("ssl.keystore.location={}", pki.s("server.pem"));
    let (ok, stderr) = run(std::slice::from_ref(&ks));
    assert!(ok, "{stderr}");
    // A PKCS#1 key, a key that is not the certificate's, a missing trust store.
    let pem = std::fs::read_to_string(pki.path("server.pem")).unwrap();
    let pkcs1 = pem
        .replace("BEGIN PRIVATE KEY", "BEGIN RSA PRIVATE KEY")
        .replace("END PRIVATE KEY", "END RSA PRIVATE KEY");
    std::fs::write(pki.path("pkcs1.pem"), pkcs1).unwrap();
    let other_key = std::fs::read_to_string(pki.path("client.key")).unwrap();
    let cert_part = &pem[pem.find("-----BEGIN CERTIFICATE").unwrap()..];
    std::fs::write(pki.path("mismatch.pem"), format!("{other_key}{cert_part}")).unwrap();
    for (extra, expect) in [
        (vec![format!("ssl.keystore.location={}", pki.s("pkcs1.pem"))], "openssl pkcs8 -topk8"),
        (vec![format!("ssl.keystore.location={}", pki.s("mismatch.pem"))], "do not work together"),
        (vec![ks.clone(), "ssl.client.auth=required".into()], "needs a trust store"),
        (vec![format!("ssl.keystore.location={}", pki.s("nope.pem"))], "cannot read"),
    ] {
        let (ok, stderr) = run(&extra);
        assert!(!ok && stderr.contains(expect), "{extra:?}: {stderr}");
    }
    encrypted_keys(&pki, &run, &pem, cert_part);
    let (ok, stderr) = run(&[
        ks.clone(),
        "ssl.cipher.suites=TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384".into(),
    ]);
    assert!(ok, "{stderr}");
    let (ok, stderr) = run(&[ks.clone(), "ssl.cipher.suites=TLS_RSA_WITH_RC4_128_MD5".into()]);
    assert!(
        !ok && stderr.contains("ssl.cipher.suites") && stderr.contains("TLS_AES_256_GCM_SHA384"),
        "{stderr}"
    );
    let (ok, stderr) = run(&[ks, "ssl.principal.mapping.rules=RULE:(a)\\1/x/".into()]);
    assert!(!ok && stderr.contains("ssl.principal.mapping.rules"), "{stderr}");
}

/// The key store's key encrypted by openssl (PBES2, AES-256-CBC), as Kafka
/// operators keep PEM key stores with `ssl.key.password`.
fn encrypted_keys(pki: &Pki, run: &dyn Fn(&[String]) -> (bool, String), pem: &str, cert: &str) {
    let key = &pem[..pem.find("-----BEGIN CERTIFICATE").unwrap()];
    std::fs::write(pki.path("plain.key"), key).unwrap();
    let out = Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout", "pass:key-Secret-9", "-in"])
        .arg(pki.path("plain.key"))
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let encrypted = String::from_utf8(out.stdout).unwrap();
    assert!(encrypted.contains("BEGIN ENCRYPTED PRIVATE KEY"), "{encrypted}");
    std::fs::write(pki.path("encrypted.pem"), format!("{encrypted}{cert}")).unwrap();
    let enc = format!("ssl.keystore.location={}", pki.s("encrypted.pem"));
    let plain = format!("ssl.keystore.location={}", pki.s("server.pem"));
    let (ok, stderr) = run(&[enc.clone(), "ssl.key.password=key-Secret-9".into()]);
    assert!(ok, "{stderr}");
    for (extra, expect) in [
        (vec![enc.clone(), "ssl.key.password=wrong".into()], "could not decrypt"),
        (vec![enc.clone()], "set ssl.key.password"),
        (vec![plain, "ssl.key.password=key-Secret-9".into()], "not encrypted"),
    ] {
        let (ok, stderr) = run(&extra);
        assert!(!ok && stderr.contains(expect), "{extra:?}: {stderr}");
        assert!(!stderr.contains("key-Secret-9"), "the password leaked: {stderr}");
    }
}

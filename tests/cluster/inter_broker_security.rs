//! Brokers reach each other over a SASL_SSL listener
//! (`inter.broker.listener.name`, `sasl.mechanism.inter.broker.protocol`):
//! three brokers whose BROKER listener takes only TLS (a certificate for
//! 127.0.0.1 from the test's CA, the host name checked) with SCRAM-SHA-512,
//! under an authorizer where only `User:broker` (and the PLAINTEXT
//! listener's clients) are super users. The brokers' own SCRAM user is put
//! in etcd with `sediment add-scram` before any broker starts. Followers
//! replicate, and `acks=all` at `min.insync.replicas=3` succeeds, only if
//! every follower fetched over SASL_SSL as `User:broker`. A follower
//! restarted with a wrong password cannot authenticate, says so in its
//! log and stays out of the ISR; with the right one it catches up.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
};

use crate::broker::etcd::EtcdServer;
use crate::broker::{kcat, TestBroker};
use crate::support::{create_topic, overrides, placement, start_cluster_with, wait_leaders};

const PASSWORD: &str = "broker-Secret-1";

/// The CA's PEM (the trust store) and a key store for 127.0.0.1 it signed.
fn stores(dir: &Path) -> (String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name.push(DnType::CommonName, "sediment test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    server.distinguished_name = DistinguishedName::new();
    server.distinguished_name.push(DnType::CommonName, "broker");
    let cert = server.signed_by(&key, &ca).unwrap();
    let (trust, keystore) = (dir.join("ca.pem"), dir.join("broker.pem"));
    std::fs::write(&trust, ca.pem()).unwrap();
    std::fs::write(&keystore, format!("{}{}", key.serialize_pem(), cert.pem())).unwrap();
    (trust.display().to_string(), keystore.display().to_string())
}

/// The keys every broker gets, with `password` in its JAAS config.
fn settings(trust: &str, keystore: &str, password: &str) -> Vec<String> {
    let jaas = format!(
        "listener.name.broker.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.\
         scram.ScramLoginModule required username=\"broker\" password=\"{password}\";"
    );
    vec![
        "listeners=PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0".into(),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,BROKER:SASL_SSL".into(),
        "inter.broker.listener.name=BROKER".into(),
        "listener.name.broker.sasl.enabled.mechanisms=SCRAM-SHA-512".into(),
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512".into(),
        jaas,
        "listener.name.broker.ssl.keystore.type=PEM".into(),
        format!("listener.name.broker.ssl.keystore.location={keystore}"),
        "listener.name.broker.ssl.truststore.type=PEM".into(),
        format!("listener.name.broker.ssl.truststore.location={trust}"),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".into(),
        "super.users=User:broker;User:ANONYMOUS".into(),
        "allow.everyone.if.no.acl.found=false".into(),
        "replica.lag.time.max.ms=3000".into(),
    ]
}

/// kcat producing 50 records at `acks=all` through `b`, giving up on a
/// record after 8 s, with `extra` settings.
fn produce_all(b: &TestBroker, from: usize, extra: &[&str]) -> (bool, String, String) {
    let lines: String = (from..from + 50).map(|i| format!("k{i}:v{i}\n")).collect();
    let broker = format!("127.0.0.1:{}", b.port);
    let acks = ["-X", "request.required.acks=-1", "-X", "message.timeout.ms=8000"];
    let args = [&["-b", &broker, "-P", "-t", "t", "-K:"][..], &acks[..], extra].concat();
    kcat(&args, &lines)
}

#[test]
fn brokers_replicate_over_sasl_ssl_as_their_own_user() {
    let etcd = EtcdServer::start();
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sediment"))
        .args(["add-scram", "--override"])
        .arg(format!("sediment.cluster.etcd.endpoints={}", etcd.endpoint()))
        .arg("--override")
        .arg(format!("log.dirs={}", dir.path().join("scram").display()))
        .arg(format!("SCRAM-SHA-512=[name=broker,password={PASSWORD}]"))
        .output()
        .unwrap();
    assert!(out.status.success(), "add-scram: {}", String::from_utf8_lossy(&out.stderr));
    let (trust, keystore) = stores(dir.path());
    let good = settings(&trust, &keystore, PASSWORD);
    let good: Vec<&str> = good.iter().map(String::as_str).collect();
    let mut brokers = start_cluster_with(&etcd, 3, &good);

    let rf3 = ["--replication-factor", "3", "--config", "min.insync.replicas=3"];
    create_topic(&brokers[0], "t", 1, &rf3);
    wait_leaders(&brokers, "t", 1);
    let (ok, _, err) = produce_all(&brokers[0], 0, &[]);
    assert!(ok, "acks=all with every follower over SASL_SSL: {err}\n{}", brokers[1].log());

    // A follower with the wrong password: refused, out of the ISR.
    let leader = placement(brokers[0].port, "t")[&0].0;
    let follower = (1..=3).find(|n| *n != leader).unwrap();
    let f = follower as usize - 1;
    let wrong = settings(&trust, &keystore, "not-the-password");
    let wrong: Vec<&str> = wrong.iter().map(String::as_str).collect();
    brokers[f].kill();
    brokers[f].set_overrides(
        &overrides(&etcd, follower, &wrong).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    brokers[f].restart();
    let at_leader = brokers[leader as usize - 1].port;
    // New records at the leader: a follower that fetches none of them
    // falls behind and leaves the ISR after replica.lag.time.max.ms.
    let broker = format!("127.0.0.1:{at_leader}");
    let (ok, _, err) =
        kcat(&["-b", &broker, "-P", "-t", "t", "-X", "request.required.acks=1"], "x\n");
    assert!(ok, "acks=1 to the leader: {err}");
    brokers[leader as usize - 1].wait_for(30, "the follower refused and out of the ISR", || {
        let refused = brokers[f].log().contains("authenticating to broker");
        let isr = &placement(at_leader, "t")[&0].3;
        (refused && !isr.contains(&follower)).then_some(())
    });
    // Not retried, so the broker's answer is what kcat reports.
    let (_, _, err) = produce_all(&brokers[0], 50, &["-X", "message.send.max.retries=0"]);
    assert!(
        err.contains("Not enough in-sync replicas"),
        "acks=all at min.insync.replicas=3 without the refused follower: {err}\nleader's log:\n{}",
        brokers[leader as usize - 1].log()
    );

    // The right password: it catches up and is back in the ISR.
    brokers[f].kill();
    brokers[f].set_overrides(
        &overrides(&etcd, follower, &good).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    brokers[f].restart();
    brokers[f].wait_for(30, "the follower back in the ISR", || {
        (placement(at_leader, "t")[&0].3.len() == 3).then_some(())
    });
    let (ok, _, err) = produce_all(&brokers[0], 100, &[]);
    assert!(ok, "acks=all once every follower is back: {err}");
}

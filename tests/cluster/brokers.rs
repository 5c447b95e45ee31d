//! Real sediment processes joining a cluster through a real etcd, started as
//! a user starts them (`sediment serve` with `sediment.cluster.etcd.endpoints`):
//! each registers with its listener's endpoint, brokers without data take
//! the cluster's id, exactly one reads `ActiveControllerCount` 1; after a
//! SIGKILL of the controller another takes over once its session expires;
//! a clean stop revokes the session (registration and controller key gone
//! when the process has exited); a second broker with a live `node.id`
//! exits with DUPLICATE_BROKER_REGISTRATION. Every broker's DescribeCluster
//! lists the same brokers and controller, from its image of etcd, and
//! their InitProducerId answers come from disjoint blocks of the cluster. A broker restarted on its own
//! data dir takes its node id back from its dead predecessor.

use std::process::Command;
use std::time::{Duration, Instant};

use sediment::cluster::coordination::{Coordination, KeyRange};
use sediment::cluster::keys::{parse, BrokerRegistration, ClusterIdValue, ClusterKeys};
use sediment::cluster::EtcdCoordination;

use crate::broker::etcd::EtcdServer;
use crate::broker::TestBroker;

const CONTROLLER: &str = "kafka_controller_kafkacontroller_activecontrollercount";

fn overrides(etcd: &EtcdServer, node_id: i32) -> Vec<String> {
    vec![
        format!("sediment.cluster.etcd.endpoints={}", etcd.endpoint()),
        format!("node.id={node_id}"),
        "broker.session.timeout.ms=6000".into(),
        "broker.heartbeat.interval.ms=1000".into(),
    ]
}

/// `sediment serve` on a fresh data dir with `extra` overrides, run until it
/// exits (a broker expected to refuse to start).
fn serve_until_exit(extra: &[String]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sediment"));
    cmd.arg("serve")
        .arg("--override")
        .arg("listeners=PLAINTEXT://127.0.0.1:0")
        .arg("--override")
        .arg(format!("log.dirs={}", dir.path().join("data").display()));
    for o in extra {
        cmd.arg("--override").arg(o);
    }
    cmd.output().expect("run sediment")
}

fn start(etcd: &EtcdServer, node_id: i32) -> TestBroker {
    let o = overrides(etcd, node_id);
    TestBroker::start(&o.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The brokers (by index) reading ActiveControllerCount 1; a stopped one counts as 0.
fn controllers(brokers: &[Option<TestBroker>]) -> Vec<usize> {
    brokers
        .iter()
        .enumerate()
        .filter(|(_, b)| b.as_ref().is_some_and(|b| b.metric(CONTROLLER) == Some(1.0)))
        .map(|(i, _)| i)
        .collect()
}

fn wait_for_one_controller(
    brokers: &[Option<TestBroker>],
    not: Option<usize>,
    what: &str,
) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = controllers(brokers);
        if now.len() == 1 && Some(now[0]) != not {
            return now[0];
        }
        assert!(Instant::now() < deadline, "{what}: controllers {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct Etcd {
    rt: tokio::runtime::Runtime,
    c: EtcdCoordination,
    keys: ClusterKeys,
}

impl Etcd {
    fn connect(etcd: &EtcdServer) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let settings = crate::support::etcd_settings(etcd);
        let c = rt.block_on(EtcdCoordination::connect(&settings)).unwrap();
        Self { rt, c, keys: ClusterKeys::new("/sediment") }
    }

    fn registrations(&self) -> Vec<(i32, BrokerRegistration)> {
        let range = KeyRange::Prefix(self.keys.broker_ids());
        let r = self.rt.block_on(self.c.range(range, 0, 0)).unwrap();
        r.kvs
            .iter()
            .map(|kv| (self.keys.node_id_of(&kv.key).unwrap(), parse(&kv.value).unwrap()))
            .collect()
    }

    fn cluster_id(&self) -> String {
        let r = self.rt.block_on(self.c.range(KeyRange::Key(self.keys.cluster_id()), 0, 0));
        parse::<ClusterIdValue>(&r.unwrap().kvs[0].value).unwrap().id
    }
}

/// DescribeCluster v1 of `endpoint_type`: the controller id and the brokers (id, port).
fn describe_cluster(port: u16, endpoint_type: i8) -> (i32, Vec<(i32, i32)>) {
    use kafka_protocol::messages::DescribeClusterRequest;
    let request = DescribeClusterRequest::default().with_endpoint_type(endpoint_type);
    let r = crate::broker::Wire::connect(port).call(1, &request);
    assert_eq!(r.error_code, 0, "{r:?}");
    let mut brokers: Vec<(i32, i32)> = r.brokers.iter().map(|b| (b.broker_id.0, b.port)).collect();
    brokers.sort();
    (r.controller_id.0, brokers)
}

/// An idempotent producer's id from InitProducerId v4.
fn init_producer_id(port: u16) -> i64 {
    use kafka_protocol::messages::InitProducerIdRequest;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(kafka_protocol::messages::ProducerId(-1))
        .with_producer_epoch(-1);
    let r = crate::broker::Wire::connect(port).call(4, &request);
    assert_eq!(r.error_code, 0, "{r:?}");
    r.producer_id.0
}

fn meta_cluster_id(b: &TestBroker) -> String {
    let text = std::fs::read_to_string(b.data_dir().join("meta.properties")).unwrap();
    text.lines().find_map(|l| l.strip_prefix("cluster.id=")).unwrap().to_string()
}

#[test]
fn three_brokers_elect_one_controller_and_hand_over() {
    let etcd = EtcdServer::start();
    let mut brokers: Vec<Option<TestBroker>> = (1..=3).map(|id| Some(start(&etcd, id))).collect();
    let view = Etcd::connect(&etcd);
    let first = wait_for_one_controller(&brokers, None, "a controller");

    // Every broker is registered with its listener, and all share one id.
    let regs = view.registrations();
    assert_eq!(regs.iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![1, 2, 3]);
    for (id, reg) in &regs {
        let b = brokers[*id as usize - 1].as_ref().unwrap();
        assert_eq!(reg.endpoints[0].port, b.port, "broker {id}: {reg:?}");
        assert_eq!(reg.endpoints[0].listener, "PLAINTEXT");
        assert_eq!(meta_cluster_id(b), view.cluster_id(), "broker {id} took the cluster's id");
    }
    for b in brokers.iter().flatten() {
        assert_eq!(b.metric("sediment_cluster_session_live"), Some(1.0));
        // Each image follows etcd's watch: wait for it to apply them.
        b.wait_for(20, "the image applied the three registrations", || {
            let applied = b.metric("sediment_cluster_metadata_applied_revision")?;
            (applied >= 4.0).then_some(())
        });
    }
    // Every broker describes the same cluster: all three, one controller.
    let ports: Vec<(i32, i32)> = brokers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, b)| (i as i32 + 1, i32::from(b.port)))
        .collect();
    for b in brokers.iter().flatten() {
        // Each image follows etcd's watch: wait for it to have applied all three.
        let want = (first as i32 + 1, ports.clone());
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = describe_cluster(b.port, 1);
        while seen != want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            seen = describe_cluster(b.port, 1);
        }
        assert_eq!(seen, want, "DescribeCluster from {}", b.port);
        let (_, controllers) = describe_cluster(b.port, 2);
        assert_eq!(controllers, vec![ports[first]], "endpoint type 2: the controller");
    }

    // Producer ids come from the cluster's blocks: no two brokers issue one twice.
    let mut ids = std::collections::BTreeSet::new();
    for round in 0..3 {
        for b in brokers.iter().flatten() {
            let id = init_producer_id(b.port);
            assert!(ids.insert(id), "producer id {id} issued twice (round {round})");
        }
    }
    let starts: std::collections::BTreeSet<i64> = ids.iter().map(|id| id / 1000).collect();
    assert_eq!(starts.len(), 3, "one block of 1000 per broker: {ids:?}");

    // SIGKILL: the session expires (6 s) and another broker takes over.
    let mut dead = brokers[first].take().unwrap();
    dead.kill();
    let second = wait_for_one_controller(&brokers, Some(first), "a controller after the SIGKILL");
    let gone = first as i32 + 1;
    assert!(
        view.registrations().iter().all(|(id, _)| *id != gone),
        "the dead broker's registration expired"
    );

    // The dead broker restarts on its own data dir: it registers again.
    dead.restart();
    brokers[first] = Some(dead);
    let deadline = Instant::now() + Duration::from_secs(20);
    while view.registrations().len() != 3 {
        assert!(Instant::now() < deadline, "the restarted broker did not register again");
        std::thread::sleep(Duration::from_millis(100));
    }

    // A clean stop revokes the session: by the time the process exited its
    // registration is gone, long before the lease could have expired.
    let mut leaving = brokers[second].take().unwrap();
    let status = leaving.stop();
    assert!(status.success(), "{status:?}\n{}", leaving.log());
    let stopped = second as i32 + 1;
    assert!(
        view.registrations().iter().all(|(id, _)| *id != stopped),
        "registration left after a clean stop"
    );
    let third =
        wait_for_one_controller(&brokers, Some(second), "a controller after the clean stop");
    assert_ne!(third, second);
    for b in brokers.iter().flatten() {
        assert!(!b.log().contains("panicked"), "{}", b.log());
    }
}

#[test]
fn a_second_broker_with_a_live_node_id_is_refused() {
    let etcd = EtcdServer::start();
    let live = start(&etcd, 5);
    let out = serve_until_exit(&overrides(&etcd, 5));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a duplicate node.id started:\n{stderr}");
    assert!(stderr.contains("DUPLICATE_BROKER_REGISTRATION"), "{stderr}");
    assert_eq!(live.metric("sediment_cluster_session_live"), Some(1.0), "the live broker goes on");
}

/// The controller key's create revision (the controller epoch), if any.
fn controller_epoch(view: &Etcd) -> Option<i64> {
    let r = view.rt.block_on(view.c.range(KeyRange::Key(view.keys.controller()), 0, 0)).ok()?;
    r.kvs.first().map(|kv| kv.create_revision)
}

#[test]
fn an_etcd_outage_stops_leading_and_its_end_resumes_without_an_election() {
    let mut etcd = EtcdServer::start();
    let b = start(&etcd, 1);
    b.wait_for(20, "the controller role", || (b.metric(CONTROLLER) == Some(1.0)).then_some(()));
    let epoch = controller_epoch(&Etcd::connect(&etcd)).expect("a controller key");
    etcd.stop();
    // The timer runs out (6 s session, 1 s margin) before etcd could expire the lease.
    b.wait_for(20, "the session lost", || {
        (b.metric("sediment_cluster_session_live") == Some(0.0)).then_some(())
    });
    assert_eq!(b.metric(CONTROLLER), Some(0.0), "no controller without a session");
    // Logged by the keepalive round that finds the timer out (within a heartbeat).
    b.wait_for(10, "the session-lost line", || {
        b.log().contains("session lost: leading nothing until etcd answers").then_some(())
    });
    // The broker still serves its own partitions meanwhile.
    assert_eq!(describe_cluster(b.port, 1).1.len(), 1);
    etcd.restart();
    b.wait_for(30, "the session back", || {
        (b.metric("sediment_cluster_session_live") == Some(1.0)
            && b.metric(CONTROLLER) == Some(1.0))
        .then_some(())
    });
    assert_eq!(b.metric("sediment_cluster_session_lost_total"), Some(1.0));
    let view = Etcd::connect(&etcd);
    assert_eq!(
        controller_epoch(&view),
        Some(epoch),
        "the same lease and controller key: no election"
    );
    assert_eq!(view.registrations().len(), 1);
}

#[test]
fn brokers_authenticate_to_etcd_as_their_user() {
    const PASSWORD: &str = "etcd-Root-Secret-4";
    let etcd = EtcdServer::start();
    // etcd's authentication on, with its root user.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = etcd_client::Client::connect([etcd.endpoint()], None).await.unwrap();
        c.user_add("root", PASSWORD, None).await.unwrap();
        c.user_grant_role("root", "root").await.unwrap();
        c.auth_enable().await.unwrap();
    });
    let with = |password: &str| {
        let mut o = overrides(&etcd, 1);
        o.push("sediment.cluster.etcd.user=root".into());
        o.push(format!("sediment.cluster.etcd.password={password}"));
        o.push("initial.broker.registration.timeout.ms=5000".into());
        o
    };

    // A wrong password: the broker does not start, and says why.
    let out = serve_until_exit(&with("not-the-password"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started with a wrong etcd password:\n{stderr}");
    assert!(stderr.contains("authentication failed"), "{stderr}");
    assert!(!stderr.contains("not-the-password"), "the password was logged:\n{stderr}");

    // The right one: it joins, and stays in (its lease renewed as root).
    let o = with(PASSWORD);
    let b = TestBroker::start(&o.iter().map(String::as_str).collect::<Vec<_>>());
    b.wait_for(20, "the session live", || {
        (b.metric("sediment_cluster_session_live") == Some(1.0)).then_some(())
    });
    // The election (through etcd, as root too) follows the registration.
    b.wait_for(20, "broker 1 the controller", || {
        let (controller, brokers) = describe_cluster(b.port, 1);
        (controller == 1 && brokers.len() == 1).then_some(())
    });
    assert!(!b.log().contains(PASSWORD), "the password was logged");
}

/// The test CA's PEM, a server certificate for 127.0.0.1 and a client
/// certificate it signed, written under `dir`: (CA, server cert and key,
/// client cert and key).
fn etcd_pki(dir: &std::path::Path) -> (crate::broker::etcd::EtcdTls, (String, String)) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
        ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name.push(DnType::CommonName, "etcd test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let leaf = |sans: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose, name: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &ca).unwrap();
        let (c, k) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    };
    let (cert, key) =
        leaf(vec!["127.0.0.1".into()], "etcd", ExtendedKeyUsagePurpose::ServerAuth, "server");
    let (client_cert, client_key) =
        leaf(vec![], "broker", ExtendedKeyUsagePurpose::ClientAuth, "client");
    let ca_path = dir.join("ca.crt");
    std::fs::write(&ca_path, ca.pem()).unwrap();
    let show = |p: std::path::PathBuf| p.display().to_string();
    (crate::broker::etcd::EtcdTls { ca: ca_path, cert, key }, (show(client_cert), show(client_key)))
}

/// etcd serving clients over TLS with client certificates required:
/// brokers given its CA and a client certificate join it and elect a
/// controller; one without a client certificate, or trusting another CA,
/// does not start and says it could not reach etcd.
#[test]
fn brokers_reach_etcd_over_tls_with_client_certificates() {
    let pki = tempfile::tempdir().unwrap();
    let (tls, (cert, key)) = etcd_pki(pki.path());
    let ca = tls.ca.display().to_string();
    let etcd = EtcdServer::start_tls(tls);
    let with = |extra: &[String]| {
        let mut o = overrides(&etcd, 1);
        o.push("initial.broker.registration.timeout.ms=4000".into());
        o.extend_from_slice(extra);
        o
    };
    let ca_key = format!("sediment.cluster.etcd.ssl.ca.location={ca}");
    let cert_key = format!("sediment.cluster.etcd.ssl.certificate.location={cert}");
    let key_key = format!("sediment.cluster.etcd.ssl.key.location={key}");

    // No client certificate: etcd refuses the handshake.
    let out = serve_until_exit(&with(std::slice::from_ref(&ca_key)));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "joined without a client certificate:\n{stderr}");
    assert!(stderr.contains("etcd"), "{stderr}");
    // Its own certificate as the only trusted CA: etcd's is not trusted.
    let wrong_ca = format!("sediment.cluster.etcd.ssl.ca.location={cert}");
    let out = serve_until_exit(&with(&[wrong_ca, cert_key.clone(), key_key.clone()]));
    assert!(!out.status.success(), "trusted etcd signed by an unknown CA");
    // https without a CA is refused before anything is tried.
    let out = serve_until_exit(&with(&[]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sediment.cluster.etcd.ssl.ca.location"), "{stderr}");

    let tls = [ca_key.as_str(), cert_key.as_str(), key_key.as_str()];
    let brokers: Vec<TestBroker> = (1..=2)
        .map(|id| {
            let mut o = overrides(&etcd, id);
            o.extend(tls.iter().map(|s| s.to_string()));
            TestBroker::start(&o.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .collect();
    brokers[1].wait_for(20, "both registered over TLS, one controller", || {
        let (controller, listed) = describe_cluster(brokers[1].port, 1);
        (controller > 0 && listed.len() == 2).then_some(())
    });
}

//! Reload of SSL listeners' key and trust stores when their files change,
//! with certificates made at test time by rcgen. One broker: a PLAINTEXT
//! listener, an `SSL` listener (`ssl.client.auth=requested`, a trust store)
//! and a `DNOK` listener mapped to SSL with its own key store and
//! `listener.name.dnok.ssl.allow.dn.changes=true`; `ssl.reload.interval.ms`
//! is 100.
//!
//! In order, on the same broker: a key store replaced by rename is served to
//! new connections (its serial) while a connection opened before keeps
//! producing and fetching on its old session; a garbage file and a half
//! written one and a key that is not the certificate's keep the old
//! certificate and count a failure each, and the next good file is loaded; a trust store that adds a second CA makes that
//! CA's client certificate accepted on new connections; a certificate with
//! another subject DN is refused on `SSL` and accepted on `DNOK`. Every wait
//! polls a metric or a handshake.

use crate::broker;

use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::broker::{create_topic, TestBroker};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, SerialNumber,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

type Ca = CertifiedIssuer<'static, KeyPair>;

fn ca(name: &str) -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A server key store (PKCS#8 key + certificate) for 127.0.0.1 and localhost.
fn server_pem(ca: &Ca, cn: &str, serial: u64) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.serial_number = Some(SerialNumber::from(serial));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, ca).unwrap();
    format!("{}{}", key.serialize_pem(), cert.pem())
}

/// A client certificate and key (PEM) from `ca`.
fn client_pem(ca: &Ca, cn: &str) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    (params.signed_by(&key, ca).unwrap().pem(), key.serialize_pem())
}

/// Replace `path` the way operators and cert-manager do: write a sibling, rename over.
fn replace(path: &PathBuf, content: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn client_config(server_ca: &Ca, client: Option<&(String, String)>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(server_ca.der().clone()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()];
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    })
}

/// A Kafka client over rustls (blocking).
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
        let mut w = Self { s, next: 1 };
        // TLS 1.3 checks a client certificate after the client's handshake
        // ends: a refusal shows at the first exchange.
        w.try_call(3, &kafka_protocol::messages::ApiVersionsRequest::default())?;
        Ok(w)
    }

    /// The serial and subject of the server's certificate on this session.
    fn server_certificate(&self) -> (Vec<u8>, String) {
        use x509_parser::prelude::{FromDer, X509Certificate};
        let der = &self.s.conn.peer_certificates().unwrap()[0];
        let (_, cert) = X509Certificate::from_der(der).unwrap();
        let serial = cert.raw_serial().iter().copied().skip_while(|b| *b == 0).collect();
        (serial, cert.subject().to_string())
    }

    fn try_call<R: kafka_protocol::protocol::Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> std::io::Result<R::Response> {
        self.next += 1;
        broker::call_over(&mut self.s, self.next - 1, version, request)
    }

    /// Produce one record and fetch the partition back: the high watermark
    /// is `expected` and the records are there.
    fn produce_and_fetch(&mut self, topic: &str, expected: i64) {
        let name = TopicName(StrBytes::from_string(topic.into()));
        let mut b = sediment::log::record_batch::BatchBuilder::new(
            sediment::log::compression::Compression::None,
            broker::now_ms(),
        );
        b.append(broker::now_ms(), Some(b"k"), Some(format!("v{expected}").as_bytes()));
        let produce = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name.clone())
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(bytes::Bytes::from(b.build())))])]);
        let r = self.try_call(9, &produce).expect("produce on the open connection");
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        let fetch = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default().with_topic(name).with_partitions(vec![
                FetchPartition::default().with_partition(0).with_partition_max_bytes(1 << 20),
            ])]);
        let r = self.try_call(12, &fetch).expect("fetch on the open connection");
        let p = &r.responses[0].partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (0, expected));
        assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()));
    }
}

fn reloads(b: &TestBroker, listener: &str, result: &str) -> f64 {
    let series =
        format!("sediment_tls_reloads_total{{listener=\"{listener}\",result=\"{result}\"}}");
    b.metric(&series).unwrap_or(0.0)
}

/// Wait until `reloads(listener, result)` reaches `n`.
fn wait_reloads(b: &TestBroker, listener: &str, result: &str, n: f64) {
    b.wait_for(20, &format!("{n} {result} reloads of {listener}"), || {
        (reloads(b, listener, result) >= n).then_some(())
    });
}

fn serial_seen(config: &Arc<rustls::ClientConfig>, port: u16) -> Vec<u8> {
    TlsWire::connect(Arc::clone(config), port).expect("TLS connection").server_certificate().0
}

#[test]
fn key_and_trust_stores_reload_without_dropping_connections() {
    let dir = tempfile::tempdir().unwrap();
    let (keystore, truststore, dnok_store) =
        (dir.path().join("server.pem"), dir.path().join("ca.pem"), dir.path().join("dnok.pem"));
    let (server_ca, other_ca) = (ca("server and client CA"), ca("second client CA"));
    std::fs::write(&keystore, server_pem(&server_ca, "broker", 1)).unwrap();
    std::fs::write(&dnok_store, server_pem(&server_ca, "broker", 1)).unwrap();
    std::fs::write(&truststore, server_ca.pem()).unwrap();
    let b = TestBroker::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,DNOK://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,DNOK:SSL",
        "ssl.keystore.type=PEM",
        &format!("ssl.keystore.location={}", keystore.display()),
        &format!("listener.name.dnok.ssl.keystore.location={}", dnok_store.display()),
        "listener.name.dnok.ssl.allow.dn.changes=true",
        "ssl.truststore.type=PEM",
        &format!("ssl.truststore.location={}", truststore.display()),
        "ssl.client.auth=requested",
        "ssl.reload.interval.ms=100",
    ]);
    let (plain, ssl, dnok) =
        (b.listener_port("PLAINTEXT"), b.listener_port("SSL"), b.listener_port("DNOK"));
    create_topic(plain, "reload", 1, &[]);
    let anonymous = client_config(&server_ca, None);
    let not_after = "sediment_tls_certificate_not_after_seconds{listener=\"SSL\"}";
    assert!(b.metric(not_after).unwrap() > broker::now_ms() as f64 / 1000.0);

    // An open connection on the first certificate.
    let mut open = TlsWire::connect(Arc::clone(&anonymous), ssl).unwrap();
    assert_eq!(open.server_certificate().0, [1]);
    open.produce_and_fetch("reload", 1);

    // Replaced by rename: new connections get serial 2, the open one goes on.
    replace(&keystore, &server_pem(&server_ca, "broker", 2));
    b.wait_for(20, "serial 2 on a new connection", || {
        (serial_seen(&anonymous, ssl) == [2]).then_some(())
    });
    wait_reloads(&b, "SSL", "success", 1.0);
    assert_eq!(reloads(&b, "SSL", "success"), 1.0);
    open.produce_and_fetch("reload", 2);
    assert_eq!(open.server_certificate().0, [1]);

    // Garbage, then a file cut in the middle: each keeps serial 2 and counts one failure.
    replace(&keystore, "this is not a key store\n");
    wait_reloads(&b, "SSL", "failure", 1.0);
    assert_eq!(serial_seen(&anonymous, ssl), [2]);
    let good = server_pem(&server_ca, "broker", 3);
    replace(&keystore, &good[..good.len() - 200]);
    wait_reloads(&b, "SSL", "failure", 2.0);
    assert_eq!(serial_seen(&anonymous, ssl), [2]);
    assert!(b.log().contains("not reloaded, the previous one stays in use"), "{}", b.log());
    // A private key that is not the certificate's: refused too.
    let other_key = KeyPair::generate().unwrap().serialize_pem();
    let cert_only = &good[good.find("-----BEGIN CERTIFICATE-----").unwrap()..];
    replace(&keystore, &format!("{other_key}{cert_only}"));
    wait_reloads(&b, "SSL", "failure", 3.0);
    assert_eq!(serial_seen(&anonymous, ssl), [2]);
    assert!(b.log().contains("do not work together"), "{}", b.log());
    // The next change is tried again.
    replace(&keystore, &good);
    wait_reloads(&b, "SSL", "success", 2.0);
    assert_eq!(serial_seen(&anonymous, ssl), [3]);
    assert_eq!(reloads(&b, "SSL", "failure"), 3.0);
    open.produce_and_fetch("reload", 3);

    // A client of the second CA is refused until the trust store adds that CA.
    let stranger = client_config(&server_ca, Some(&client_pem(&other_ca, "stranger")));
    assert!(TlsWire::connect(Arc::clone(&stranger), ssl).is_err());
    replace(&truststore, &format!("{}{}", server_ca.pem(), other_ca.pem()));
    b.wait_for(20, "the second CA's client accepted", || {
        TlsWire::connect(Arc::clone(&stranger), ssl).ok()
    })
    .produce_and_fetch("reload", 4);
    wait_reloads(&b, "SSL", "success", 3.0);
    assert_eq!(reloads(&b, "SSL", "success"), 3.0);
    // DNOK shares the trust store: it reloaded too.
    wait_reloads(&b, "DNOK", "success", 1.0);

    // Another subject DN: refused on SSL (ssl.allow.dn.changes=false) ...
    replace(&keystore, &server_pem(&server_ca, "impostor", 5));
    wait_reloads(&b, "SSL", "failure", 4.0);
    assert_eq!(serial_seen(&anonymous, ssl), [3]);
    assert!(b.log().contains("ssl.allow.dn.changes"), "{}", b.log());
    // ... and accepted on DNOK, which allows it.
    replace(&dnok_store, &server_pem(&server_ca, "renamed", 6));
    wait_reloads(&b, "DNOK", "success", 2.0);
    assert_eq!(reloads(&b, "DNOK", "failure"), 0.0);
    let renamed = TlsWire::connect(Arc::clone(&anonymous), dnok).unwrap();
    assert_eq!(renamed.server_certificate(), (vec![6], "CN=renamed".to_string()));
    open.produce_and_fetch("reload", 5);
}

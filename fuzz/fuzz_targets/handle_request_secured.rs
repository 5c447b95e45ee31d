//! Any bytes as what a client sends on a SASL_PLAINTEXT connection to a
//! broker with the standard authorizer (ACLs loaded, a super user, no
//! access where no ACL is found): size-prefixed frames, read as the
//! connection reads them. Until the client authenticates, frames go to the
//! SASL authenticator (PLAIN for users of the JAAS config, SCRAM-SHA-256
//! for the credential store's); once it has, to the API handlers with the
//! authenticated principal, and a SaslHandshake re-authenticates (PLAIN
//! sessions expire, so they may). Never a panic; a connection is
//! authenticated only as a configured PLAIN user with its password (no
//! input knows a SCRAM password), and a re-authentication never changes the
//! principal.
//!
//! Input: a mode byte (0: authenticate on the stream; 1, 2, 3: a session
//! already authenticated as alice, who has ACLs, the super user admin, or
//! bob, who has none), then the frames.
#![no_main]

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Buf, Bytes};
use libfuzzer_sys::fuzz_target;
use sediment::api::KafkaApis;
use sediment::config::{BrokerConfig, Listener};
use sediment::log::LogManager;
use sediment::security::acl::{
    AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType,
};
use sediment::security::sasl::scram_credential::ScramCredential;
use sediment::security::sasl::{SaslListener, ScramMechanism};
use sediment::security::{KafkaPrincipal, SecurityProtocol, Session};
use sediment::server::authenticator::{AuthStep, Authenticator};

const LISTENER: &str = "SASL_PLAINTEXT";
const USERS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-pw\" user_admin=\"admin-pw\" user_bob=\"bob-pw\";";

struct Env {
    runtime: tokio::runtime::Runtime,
    broker: Arc<KafkaApis>,
    sasl: Arc<SaslListener>,
    _dir: tempfile::TempDir,
}

fn acl(
    rt: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    op: AclOperation,
    p: AclPermissionType,
) -> AclBinding {
    AclBinding::new(rt, name, pattern, principal, "*", op, p).expect("a valid binding")
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        use AclOperation::*;
        use AclPermissionType::{Allow, Deny};
        use PatternType::{Literal, Prefixed};
        let dir = tempfile::tempdir().unwrap();
        let mut config = BrokerConfig::default();
        let jaas = format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={USERS}");
        config
            .apply_overrides([
                format!("log.dirs={}", dir.path().display()).as_str(),
                "listeners=SASL_PLAINTEXT://:9093",
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
                &jaas,
                "listener.name.sasl_plaintext.plain.connections.max.reauth.ms=3600000",
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users=User:admin",
                "allow.everyone.if.no.acl.found=false",
            ])
            .unwrap();
        let logs = Arc::new(
            LogManager::open(config.log_manager_config(), sediment::clock::system()).unwrap(),
        );
        logs.create_topic("t", 2, BTreeMap::new()).unwrap();
        logs.create_topic("pub-x", 1, BTreeMap::new()).unwrap();
        let txn_state = Arc::new(sediment::txn::TransactionStateManager::new(
            config.transaction_config(),
            Arc::clone(&logs),
            sediment::clock::system(),
        ));
        let advertised = vec![(LISTENER.into(), Listener { host: "localhost".into(), port: 9093 })];
        let broker = Arc::new(
            sediment::broker::standalone_apis(config.clone(), logs, advertised, txn_state).unwrap(),
        );
        broker.groups.load();
        let store = broker.acls.as_ref().expect("the authorizer's store");
        let bindings = [
            acl(ResourceType::Topic, "t", Literal, "User:alice", All, Allow),
            acl(ResourceType::Topic, "pub-", Prefixed, "User:*", Read, Allow),
            acl(ResourceType::Topic, "pub-", Prefixed, "User:bob", Describe, Deny),
            acl(ResourceType::Group, "g", Literal, "User:alice", Read, Allow),
            acl(ResourceType::TransactionalId, "tx", Prefixed, "User:alice", Write, Allow),
            acl(
                ResourceType::Cluster,
                "kafka-cluster",
                Literal,
                "User:alice",
                IdempotentWrite,
                Allow,
            ),
        ];
        store
            .update(|acls| {
                ((), bindings.iter().cloned().fold(false, |changed, b| acls.add(b) | changed))
            })
            .unwrap();
        let n = NonZeroU32::new(4096).unwrap();
        let carol = ScramCredential::from_password(
            ScramMechanism::Sha256,
            "carol-pw-not-in-any-input",
            b"salt".to_vec(),
            n,
        );
        broker
            .scram
            .update(|m| {
                let carol = carol.clone();
                ((), m.entry("carol".into()).or_default().insert(carol.mechanism, carol).is_none())
            })
            .unwrap();
        let mut sasl = config.sasl_listener(LISTENER).unwrap();
        sasl.scram = Some(Arc::clone(&broker.scram) as _);
        sasl.failed_authentication_delay = Duration::ZERO;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        Env { runtime, broker, sasl: Arc::new(sasl), _dir: dir }
    })
}

/// The next frame of the stream, as the connection frames it: `None` at the
/// end or for a size the connection refuses (it closes).
fn next_frame(stream: &mut &[u8], max: usize) -> Option<Bytes> {
    if stream.len() < 4 {
        return None;
    }
    let size = stream.get_i32();
    let size = usize::try_from(size).ok().filter(|&s| s <= max && s <= stream.len())?;
    let frame = Bytes::copy_from_slice(&stream[..size]);
    stream.advance(size);
    Some(frame)
}

fn user(name: &str) -> KafkaPrincipal {
    KafkaPrincipal { principal_type: "User".into(), name: name.into() }
}

/// Run `auth` over the stream until it ends: the principal and mechanism
/// when it authenticates.
fn exchange(
    auth: &mut Authenticator,
    stream: &mut &[u8],
    max: usize,
    first: Option<Bytes>,
) -> Option<(KafkaPrincipal, &'static str)> {
    let mut next = first;
    loop {
        let frame = next.take().or_else(|| next_frame(stream, max))?;
        match auth.on_frame(frame) {
            AuthStep::Reply(_) => {}
            AuthStep::Done { principal, mechanism, .. } => return Some((principal, mechanism)),
            AuthStep::Fail { .. } | AuthStep::Close(_) => return None,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut stream)) = data.split_first() else { return };
    let env = env();
    let mut session = Session::plaintext(LISTENER, std::net::Ipv4Addr::LOCALHOST.into());
    session.protocol = SecurityProtocol::SaslPlaintext;
    let max_auth = env.sasl.max_receive_size;
    let (principal, mechanism) = match mode % 4 {
        0 => {
            let mut auth = Authenticator::new(Arc::clone(&env.sasl));
            let Some(done) = exchange(&mut auth, &mut stream, max_auth, None) else { return };
            assert!(
                ["alice", "admin", "bob"].contains(&done.0.name.as_str()),
                "authenticated as {}",
                done.0
            );
            assert_eq!(done.1, "PLAIN", "{} authenticated without a password", done.0);
            done
        }
        1 => (user("alice"), "PLAIN"),
        2 => (user("admin"), "PLAIN"),
        _ => (user("bob"), "PLAIN"),
    };
    session.principal = principal.clone();
    let max = env.broker.config.socket_request_max_bytes();
    while let Some(frame) = next_frame(&mut stream, max) {
        if frame.len() >= 2 && frame[..2] == [0, 17] {
            // A SaslHandshake on an expiring session starts a re-authentication.
            let mut auth =
                Authenticator::reauthenticate(Arc::clone(&env.sasl), principal.clone(), mechanism);
            match exchange(&mut auth, &mut stream, max_auth, Some(frame)) {
                Some((again, _)) => {
                    assert_eq!(again, principal, "re-authentication changed the principal")
                }
                None => return,
            }
            continue;
        }
        let broker = Arc::clone(&env.broker);
        let session = session.clone();
        let closed = env.runtime.block_on(async move {
            let mut out = bytes::BytesMut::new();
            let handled = sediment::server::handle_frame(&broker, frame, &mut out, &session);
            // Keep long polls short: a fetch may otherwise wait its max_wait_ms.
            matches!(tokio::time::timeout(Duration::from_millis(50), handled).await, Ok(Err(_)))
        });
        if closed {
            return;
        }
    }
});

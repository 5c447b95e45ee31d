//! `sediment add-scram`: SCRAM credentials written into a stopped broker's
//! credential store, the bootstrap of the first (admin) user, as Kafka's
//! `kafka-storage format --add-scram` does before a KRaft node starts.
//!
//! The argument form is Kafka's: `SCRAM-SHA-512=[name=admin,password=admin-secret]`
//! with optional `iterations=` (default 4096, as Kafka's tool), or
//! `salt=<base64>,saltedpassword=<base64>` instead of a password. Values may
//! be double-quoted. The tool holds the log dirs' `.lock` while it writes,
//! so it refuses to run beside a broker (which would not see the change):
//! with the broker up, use `kafka-configs --alter --entity-type users`.
//!
//! With `sediment.cluster.etcd.endpoints` in the config, the credentials
//! go to the cluster's etcd instead ([`run_in_cluster`]), as
//! `kafka-configs` through a broker would write them: every broker of the
//! cluster authenticates with them at once, whether it runs or not, so no
//! lock is taken. This is how the first user of a cluster with SASL only
//! is made.

use std::num::NonZeroU32;
use std::path::PathBuf;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use crate::log::dir_lock::{DirLockError, DirLocks};
use crate::security::credentials::CredentialStore;
use crate::security::sasl::scram_credential::{
    ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS,
};

/// Kafka's default iteration count for `--add-scram`.
const DEFAULT_ITERATIONS: u32 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum AddScramError {
    #[error("etcd: {0}")]
    Cluster(#[from] crate::cluster::CoordinationError),
    #[error("{arg:?}: {reason}")]
    Argument { arg: String, reason: String },
    #[error("the broker is running on this data dir: use kafka-configs --alter --entity-type users ({0})")]
    BrokerRunning(DirLockError),
    #[error(transparent)]
    Lock(DirLockError),
    #[error(transparent)]
    Store(#[from] crate::security::credentials::StoreError),
}

/// One parsed argument: the user and the credential to store.
pub struct ScramArgument {
    pub user: String,
    pub credential: ScramCredential,
}

fn unquote(v: &str) -> &str {
    v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(v)
}

fn random_salt() -> Vec<u8> {
    use ring::rand::SecureRandom;
    let mut salt = vec![0u8; 32];
    // The system RNG does not fail on Linux once booted; a zero salt would
    // still be a valid (if weaker) credential, never a wrong one.
    let _ = ring::rand::SystemRandom::new().fill(&mut salt);
    salt
}

/// Parse `MECHANISM=[key=value,...]`.
///
/// # Errors
/// The argument named with what is wrong (never echoing a password).
pub fn parse(arg: &str) -> Result<ScramArgument, AddScramError> {
    let bad = |reason: &str| AddScramError::Argument {
        arg: arg.split('[').next().unwrap_or_default().to_string(),
        reason: reason.to_string(),
    };
    let (mechanism, rest) = arg.split_once('=').ok_or_else(|| bad("expected MECHANISM=[...]"))?;
    let mechanism = ScramMechanism::from_name(mechanism.trim())
        .ok_or_else(|| bad("the mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512"))?;
    let body = rest
        .trim()
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .ok_or_else(|| bad("expected [key=value,...] after the mechanism"))?;
    let (mut name, mut password, mut salt, mut salted, mut iterations) =
        (None, None, None, None, DEFAULT_ITERATIONS);
    for pair in body.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| bad("expected key=value"))?;
        let value = unquote(value.trim());
        match key.trim() {
            "name" => name = Some(value.to_string()),
            "password" => password = Some(value.to_string()),
            "salt" => salt = Some(B64.decode(value).map_err(|_| bad("salt is not base64"))?),
            "saltedpassword" => {
                salted = Some(B64.decode(value).map_err(|_| bad("saltedpassword is not base64"))?)
            }
            "iterations" => {
                iterations = value.parse().map_err(|_| bad("iterations is not a number"))?
            }
            other => return Err(bad(&format!("unknown key {other:?}"))),
        }
    }
    let user = name.filter(|n| !n.is_empty()).ok_or_else(|| bad("name= is required"))?;
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        return Err(bad(&format!("iterations must be in {MIN_ITERATIONS}..={MAX_ITERATIONS}")));
    }
    let credential = match (password, salt, salted) {
        (Some(pw), salt, None) => {
            let n = NonZeroU32::new(iterations).ok_or_else(|| bad("iterations must be above 0"))?;
            ScramCredential::from_password(mechanism, &pw, salt.unwrap_or_else(random_salt), n)
        }
        (None, Some(salt), Some(salted)) if salted.len() == mechanism.key_len() => {
            ScramCredential::from_salted_password(mechanism, salt, &salted, iterations)
        }
        (None, Some(_), Some(_)) => return Err(bad("saltedpassword has the wrong length")),
        _ => return Err(bad("give password=, or salt= with saltedpassword=")),
    };
    Ok(ScramArgument { user, credential })
}

/// Store `args` in the credential store of `dirs` (the first dir holds it),
/// holding the dirs' locks.
///
/// # Errors
/// A running broker, a damaged store, an I/O error.
pub fn run(dirs: &[PathBuf], args: Vec<ScramArgument>) -> Result<usize, AddScramError> {
    let _locks = DirLocks::acquire(dirs).map_err(|e| match e {
        DirLockError::Held { .. } => AddScramError::BrokerRunning(e),
        other => AddScramError::Lock(other),
    })?;
    let first = dirs.first().cloned().unwrap_or_else(|| PathBuf::from("data"));
    let store = CredentialStore::open(&first)?;
    store_all(&store, &args)
}

/// Store `args` in the cluster's etcd (module doc), through the credential
/// store of a cluster member (compare-and-swap per user key); `dir` is the
/// broker's first log dir, whose own file is then not used.
///
/// # Errors
/// etcd unreachable or refusing the write, a damaged key.
pub fn run_in_cluster(
    cluster: &crate::cluster::ClusterConfig,
    dir: &std::path::Path,
    args: Vec<ScramArgument>,
) -> Result<usize, AddScramError> {
    use std::sync::Arc;

    use crate::cluster::image::ImageWatcher;
    use crate::cluster::keys::ClusterKeys;
    use crate::cluster::security_store::ClusterSecurityStore;
    use crate::cluster::{Coordination, EtcdCoordination};

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| crate::cluster::CoordinationError::Unavailable(e.to_string()))?;
    let keys = ClusterKeys::new(&cluster.namespace);
    let (coordination, image) = runtime.block_on(async {
        let c: Arc<dyn Coordination> = Arc::new(EtcdCoordination::connect(&cluster.etcd).await?);
        let retry = std::time::Duration::from_secs(1);
        let image = ImageWatcher::start(Arc::clone(&c), keys.clone(), retry).await?;
        Ok::<_, crate::cluster::CoordinationError>((c, Arc::new(image)))
    })?;
    let security =
        Arc::new(ClusterSecurityStore::new(coordination, image, keys, runtime.handle().clone()));
    let store = Arc::new(CredentialStore::open(dir)?);
    store.use_cluster(security);
    store_all(&store, &args)
}

/// Add every credential of `args` to `store` in one change; how many.
fn store_all(store: &CredentialStore, args: &[ScramArgument]) -> Result<usize, AddScramError> {
    store.update(|map| {
        for a in args {
            let c = a.credential.clone();
            map.entry(a.user.clone()).or_default().insert(c.mechanism, c);
        }
        ((), true)
    })?;
    Ok(args.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::CredentialLookup;

    #[test]
    fn kafka_storage_argument_forms() {
        let a = parse("SCRAM-SHA-512=[name=admin,password=admin-secret]").expect("plain");
        assert_eq!((a.user.as_str(), a.credential.iterations), ("admin", 4096));
        let a =
            parse(r#"SCRAM-SHA-256=[name="alice",password="pw",iterations=8192]"#).expect("quoted");
        assert_eq!((a.user.as_str(), a.credential.iterations), ("alice", 8192));
        // Kafka's documented salted form gives the same keys as the password.
        let salt = b"salty".to_vec();
        let n = NonZeroU32::new(4096).expect("n");
        let salted = ScramMechanism::Sha256.salted_password(b"pw", &salt, n);
        let arg = format!(
            "SCRAM-SHA-256=[name=bob,salt={},saltedpassword={},iterations=4096]",
            B64.encode(&salt),
            B64.encode(&salted)
        );
        let from_salted = parse(&arg).expect("salted").credential;
        let from_password = ScramCredential::from_password(ScramMechanism::Sha256, "pw", salt, n);
        assert_eq!(from_salted, from_password);
        for bad in [
            "SCRAM-MD5=[name=a,password=b]",
            "SCRAM-SHA-256=[password=b]",
            "SCRAM-SHA-256=[name=a]",
            "SCRAM-SHA-256=[name=a,password=b,iterations=10]",
            "SCRAM-SHA-256=name=a",
            "SCRAM-SHA-256=[name=a,pass=b]",
        ] {
            let err = parse(bad).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(!err.is_empty() && !err.contains("=b"), "{bad}: {err}");
        }
    }

    #[test]
    fn refuses_a_running_broker_and_writes_otherwise() {
        let dir = tempfile::tempdir().expect("tmp");
        let dirs = vec![dir.path().to_path_buf()];
        let held = DirLocks::acquire(&dirs).expect("lock");
        let arg = || parse("SCRAM-SHA-512=[name=admin,password=admin-secret]").expect("arg");
        let err = run(&dirs, vec![arg()]).expect_err("locked");
        assert!(err.to_string().contains("kafka-configs"), "{err}");
        drop(held);
        assert_eq!(run(&dirs, vec![arg()]).expect("written"), 1);
        let store = CredentialStore::open(dir.path()).expect("open");
        assert!(store.lookup("admin", ScramMechanism::Sha512).is_some());
        let text = std::fs::read_to_string(store.path()).expect("read");
        assert!(!text.contains("admin-secret"));
    }
}

//! The durable SCRAM credential store: `sediment-scram-credentials.json`
//! (mode 0600) in the first log dir, next to `sediment-producer-id-block`.
//!
//! Invariants:
//! * The file holds salts, StoredKeys, ServerKeys and iterations: never a
//!   password or a SaltedPassword.
//! * A change is written atomically (tmp, fsync, rename, fsync dir) under the
//!   writer mutex **before** the in-memory snapshot is swapped and before the
//!   request is answered; a failed write leaves memory unchanged. Readers
//!   clone an `Arc` snapshot and hold no lock afterwards.
//! * Loading refuses (and so stops the start) a file that does not parse,
//!   has a version other than 1, an unknown field, a duplicate entry, an
//!   unknown mechanism, iterations outside 4096..=16384 or keys of the wrong
//!   length, naming the entry. A missing file is an empty store; a leftover
//!   `.tmp` is never read. A file over 64 MiB is refused before it is read.
//! * In a cluster ([`CredentialStore::use_cluster`]) etcd holds the
//!   credentials instead, one key per user in the file's form
//!   (`cluster::security_store`); the file is not read or written again.
//!   A change is built on the newest image's credentials, written by
//!   compare-and-swap and answered once the image applied it; lookups see
//!   the newest image installed, never an older one. A key that does not
//!   parse is left out and logged (that user cannot authenticate).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use super::sasl::scram_credential::{
    CredentialLookup, ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS,
};
pub use super::store::StoreError;
use super::store::{read_bounded, update_in_cluster, write_atomically, ClusterForm};
use crate::cluster::image::{MetadataImage, StoredKeys};
use crate::cluster::keys::ClusterKeys;
use crate::cluster::security_store::{ClusterSecurityStore, KeyChange};

pub const SCRAM_CREDENTIALS_FILE: &str = "sediment-scram-credentials.json";

/// user → mechanism → credential.
pub type CredentialMap = BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileForm {
    version: u32,
    credentials: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    user: String,
    mechanism: String,
    salt: String,
    stored_key: String,
    server_key: String,
    iterations: u32,
}

pub struct CredentialStore {
    path: PathBuf,
    current: RwLock<Arc<CredentialMap>>,
    writer: Mutex<()>,
    cluster: OnceLock<Arc<ClusterSecurityStore>>,
    /// In a cluster, the image revision and keys `current` came from.
    installed: Mutex<Option<(i64, Arc<StoredKeys>)>>,
}

/// The credentials in etcd: one key per user.
const CLUSTER_FORM: ClusterForm<CredentialMap> = ClusterForm {
    stored: |image| &image.users,
    read: |keys, stored| Ok(credentials_of(keys, stored)),
    changed: changed_users,
};

/// The credentials of an image's keys; a key that does not parse, or names
/// another user, is left out and logged.
fn credentials_of(keys: &ClusterKeys, stored: &StoredKeys) -> CredentialMap {
    let mut map = CredentialMap::new();
    for (key, v) in stored {
        match parse(&v.value) {
            Ok(one) if one.keys().all(|user| keys.user(user) == *key) => map.extend(one),
            Ok(_) => tracing::error!(key, "SCRAM credentials in etcd name another user; left out"),
            Err(reason) => {
                tracing::error!(key, reason, "SCRAM credentials in etcd do not parse; left out")
            }
        }
    }
    map
}

/// The users whose credentials differ between `from` and `to`, as key
/// changes.
fn changed_users(keys: &ClusterKeys, from: &CredentialMap, to: &CredentialMap) -> Vec<KeyChange> {
    let users: std::collections::BTreeSet<&String> = from.keys().chain(to.keys()).collect();
    users
        .into_iter()
        .filter(|u| from.get(*u) != to.get(*u))
        .map(|u| {
            let value = to.get(u).filter(|m| !m.is_empty()).map(|m| {
                let one = CredentialMap::from([(u.clone(), m.clone())]);
                render(&one)
            });
            (keys.user(u), value)
        })
        .collect()
}

impl std::fmt::Debug for CredentialStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CredentialStore({})", self.path.display())
    }
}

fn entry_to_credential(e: &Entry) -> Result<ScramCredential, String> {
    let mechanism = ScramMechanism::from_name(&e.mechanism)
        .ok_or_else(|| format!("unknown mechanism {:?}", e.mechanism))?;
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&e.iterations) {
        return Err(format!(
            "iterations {} outside {MIN_ITERATIONS}..={MAX_ITERATIONS}",
            e.iterations
        ));
    }
    let decode = |field: &str, v: &str| B64.decode(v).map_err(|err| format!("{field}: {err}"));
    let salt = decode("salt", &e.salt)?;
    if salt.is_empty() {
        return Err("empty salt".into());
    }
    ScramCredential::from_keys(
        mechanism,
        salt,
        decode("stored_key", &e.stored_key)?,
        decode("server_key", &e.server_key)?,
        e.iterations,
    )
}

/// Parse the file's text into the map.
fn parse(text: &[u8]) -> Result<CredentialMap, String> {
    let form: FileForm = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    if form.version != 1 {
        return Err(format!("version {} (only 1 is known)", form.version));
    }
    let mut map = CredentialMap::new();
    for (i, e) in form.credentials.iter().enumerate() {
        let name = || format!("entry {i} (user {:?}, {})", e.user, e.mechanism);
        if e.user.is_empty() {
            return Err(format!("{}: empty user name", name()));
        }
        let c = entry_to_credential(e).map_err(|r| format!("{}: {r}", name()))?;
        if map.entry(e.user.clone()).or_default().insert(c.mechanism, c).is_some() {
            return Err(format!("{}: duplicate", name()));
        }
    }
    Ok(map)
}

fn render(map: &CredentialMap) -> Vec<u8> {
    let credentials = map
        .iter()
        .flat_map(|(user, by_mech)| {
            by_mech.values().map(move |c| Entry {
                user: user.clone(),
                mechanism: c.mechanism.name().to_string(),
                salt: B64.encode(&c.salt),
                stored_key: B64.encode(&c.stored_key),
                server_key: B64.encode(&c.server_key),
                iterations: c.iterations,
            })
        })
        .collect();
    let mut out =
        serde_json::to_vec_pretty(&FileForm { version: 1, credentials }).unwrap_or_default();
    out.push(b'\n');
    out
}

impl CredentialStore {
    /// Load the store of `dir` (empty when the file does not exist).
    ///
    /// # Errors
    /// I/O errors, or a damaged file (the entry named).
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join(SCRAM_CREDENTIALS_FILE);
        let map = match read_bounded(&path)? {
            None => CredentialMap::new(),
            Some(text) => {
                parse(&text).map_err(|reason| StoreError::Damaged { path: path.clone(), reason })?
            }
        };
        Ok(Self {
            path,
            current: RwLock::new(Arc::new(map)),
            writer: Mutex::new(()),
            cluster: OnceLock::new(),
            installed: Mutex::new(None),
        })
    }

    /// Keep the credentials in etcd from now on (module doc): install the
    /// image's and follow every new one. The file's, if any, are not used.
    pub fn use_cluster(self: &Arc<Self>, cluster: Arc<ClusterSecurityStore>) {
        let local = self.snapshot().len();
        if local > 0 {
            tracing::warn!(
                path = %self.path.display(),
                users = local,
                "the SCRAM credential file is not used in a cluster: etcd holds the cluster's credentials"
            );
        }
        self.install(cluster.keys(), &cluster.image());
        cluster.follow(self, Self::install);
        let _ = self.cluster.set(cluster);
    }

    /// Make `image`'s credentials current, unless a newer image's are.
    fn install(&self, keys: &ClusterKeys, image: &MetadataImage) {
        let mut installed = self.installed.lock();
        if let Some((revision, users)) = installed.as_ref() {
            if *revision >= image.revision || Arc::ptr_eq(users, &image.users) {
                return;
            }
        }
        *self.current.write() = Arc::new(credentials_of(keys, &image.users));
        *installed = Some((image.revision, Arc::clone(&image.users)));
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn snapshot(&self) -> Arc<CredentialMap> {
        Arc::clone(&self.current.read())
    }

    /// Apply `change` to a copy of the current map, write it durably, then
    /// make it current. `change` returns what the caller answers; nothing is
    /// written when it reports no change (`false`).
    ///
    /// # Errors
    /// The write failed; memory is unchanged.
    pub fn update<T>(
        &self,
        mut change: impl FnMut(&mut CredentialMap) -> (T, bool),
    ) -> Result<T, StoreError> {
        let _writer = self.writer.lock();
        if let Some(cluster) = self.cluster.get() {
            let (answer, image) = update_in_cluster(cluster, &CLUSTER_FORM, change)?;
            if let Some(image) = image {
                self.install(cluster.keys(), &image);
            }
            return Ok(answer);
        }
        let mut next = (**self.current.read()).clone();
        let (answer, changed) = change(&mut next);
        if changed {
            write_atomically(&self.path, &render(&next), 0o600)?;
            *self.current.write() = Arc::new(next);
        }
        Ok(answer)
    }
}

impl CredentialLookup for CredentialStore {
    fn lookup(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.current.read().get(user)?.get(&mechanism).cloned()
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;

    fn cred(m: ScramMechanism, password: &str, iterations: u32) -> ScramCredential {
        let n = NonZeroU32::new(iterations).expect("non-zero");
        ScramCredential::from_password(m, password, b"salty".to_vec(), n)
    }

    #[test]
    fn a_change_survives_reopening_and_the_file_holds_no_password() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = CredentialStore::open(dir.path()).expect("open");
        assert!(store.snapshot().is_empty());
        let c = cred(ScramMechanism::Sha256, "alice-secret", 8192);
        store
            .update(|m| {
                m.entry("alice".into()).or_default().insert(c.mechanism, c.clone());
                ((), true)
            })
            .expect("write");
        assert_eq!(store.lookup("alice", ScramMechanism::Sha256), Some(c.clone()));
        let text = std::fs::read_to_string(store.path()).expect("read");
        assert!(!text.contains("alice-secret"), "{text}");
        let mode = std::fs::metadata(store.path()).expect("meta").permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
        let again = CredentialStore::open(dir.path()).expect("reopen");
        assert_eq!(again.lookup("alice", ScramMechanism::Sha256), Some(c));
        assert_eq!(again.lookup("alice", ScramMechanism::Sha512), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_a_cluster_a_user_added_through_one_broker_authenticates_on_another() {
        use crate::security::acl_store::tests::{cluster_view, eventually};
        let c = Arc::new(crate::cluster::MemCoordination::new(Arc::new(crate::clock::SystemClock)));
        let (dir_a, dir_b) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
        let a = Arc::new(CredentialStore::open(dir_a.path()).expect("a"));
        let b = Arc::new(CredentialStore::open(dir_b.path()).expect("b"));
        a.use_cluster(cluster_view(&c).await);
        b.use_cluster(cluster_view(&c).await);
        let (c256, c512) =
            (cred(ScramMechanism::Sha256, "x", 4096), cred(ScramMechanism::Sha512, "y", 4096));
        let add = |store: &CredentialStore, c: &ScramCredential| {
            store
                .update(|m| {
                    m.entry("alice/eu".into()).or_default().insert(c.mechanism, c.clone());
                    ((), true)
                })
                .expect("write");
        };
        tokio::task::block_in_place(|| {
            add(&a, &c256);
            add(&b, &c512);
        });
        assert_eq!(b.lookup("alice/eu", ScramMechanism::Sha256), Some(c256.clone()));
        assert_eq!(b.lookup("alice/eu", ScramMechanism::Sha512), Some(c512.clone()));
        eventually(|| a.lookup("alice/eu", ScramMechanism::Sha512).is_some()).await;
        assert!(!a.path().exists(), "no file is written in a cluster");
        tokio::task::block_in_place(|| {
            a.update(|m| ((), m.remove("alice/eu").is_some())).expect("delete");
        });
        eventually(|| b.snapshot().is_empty()).await;
    }

    #[test]
    fn a_leftover_tmp_is_ignored() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("sediment-scram-credentials.json.tmp"), "junk")
            .expect("write");
        assert!(CredentialStore::open(dir.path()).expect("open").snapshot().is_empty());
    }

    #[test]
    fn a_damaged_file_stops_the_load_naming_the_entry() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = CredentialStore::open(dir.path()).expect("open");
        let c = cred(ScramMechanism::Sha512, "pw", 4096);
        store
            .update(|m| {
                m.entry("bob".into()).or_default().insert(c.mechanism, c.clone());
                ((), true)
            })
            .expect("write");
        let good = std::fs::read_to_string(store.path()).expect("read");
        let cases = [
            (good.replace("\"iterations\": 4096", "\"iterations\": 100"), "entry 0 (user \"bob\""),
            (good.replace("SCRAM-SHA-512", "SCRAM-MD5"), "unknown mechanism"),
            (good.replace("\"version\": 1", "\"version\": 2"), "version 2"),
            (good.replace("\"user\"", "\"extra\": 1, \"user\""), "unknown field"),
            (good[..good.len() / 2].to_string(), "EOF"),
        ];
        for (text, expected) in cases {
            std::fs::write(store.path(), &text).expect("write");
            let err = CredentialStore::open(dir.path()).expect_err("damaged").to_string();
            assert!(err.contains(expected) && err.contains(SCRAM_CREDENTIALS_FILE), "{err}");
        }
        // Keys of the wrong length.
        let short = good.replace(&B64.encode(&c.stored_key), &B64.encode(&c.stored_key[..32]));
        std::fs::write(store.path(), short).expect("write");
        let err = CredentialStore::open(dir.path()).expect_err("short key").to_string();
        assert!(err.contains("64 bytes"), "{err}");
    }

    #[test]
    fn no_change_writes_nothing() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = CredentialStore::open(dir.path()).expect("open");
        store.update(|_| ((), false)).expect("noop");
        assert!(!store.path().exists());
    }
}

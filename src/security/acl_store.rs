//! The durable ACL store, `sediment-acls.json` in the first log dir, and the
//! authorizer it feeds (docs/design/security.md, "sediment: two files, and why not a topic").
//!
//! Invariants:
//! * The file and the authorizer's ACLs are the same set: a change is built
//!   on a copy under the writer mutex, written atomically
//!   (`store::write_atomically`) and only then installed in the authorizer
//!   and answered; a failed write changes nothing.
//! * Every entry of the file is a binding CreateAcls would have stored
//!   (`AclBinding::new`). A file that does not parse, has a version other
//!   than 1, an unknown field, a duplicate or an invalid entry stops the
//!   start with the entry named: a damaged file must never load as "no
//!   ACLs", which with `allow.everyone.if.no.acl.found=true` opens everything.
//!   A missing file is no ACLs.
//! * In a cluster ([`AclStore::use_cluster`]) etcd holds the ACLs instead,
//!   one key per resource pattern in the file's form
//!   (`cluster::security_store`), and the file is not read or written
//!   again. A change is built on the ACLs of the broker's newest image,
//!   written by compare-and-swap and answered once the image applied it;
//!   a lost race is rebuilt from the newer image. The authorizer follows
//!   every image: the ACLs in force are those of the newest image
//!   installed, never an older one. A key that does not parse (or names
//!   another pattern) keeps the ACLs in force as they were, stops a start,
//!   and refuses changes until an operator repairs it: dropping it could
//!   drop a DENY.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::acl::{AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType};
use super::acl_cache::AclCache;
use super::authorizer::StandardAuthorizer;
use super::store::{read_bounded, update_in_cluster, write_atomically, ClusterForm, StoreError};
use crate::cluster::image::{MetadataImage, StoredKeys};
use crate::cluster::keys::ClusterKeys;
use crate::cluster::security_store::{ClusterSecurityStore, KeyChange};

pub const ACLS_FILE: &str = "sediment-acls.json";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileForm {
    version: u32,
    acls: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    resource_type: String,
    pattern_type: String,
    name: String,
    principal: String,
    host: String,
    operation: String,
    permission: String,
}

impl Entry {
    fn of(b: &AclBinding) -> Self {
        let (p, e) = (b.pattern(), b.entry());
        Self {
            resource_type: p.resource_type().name().into(),
            pattern_type: p.pattern_type().name().into(),
            name: p.name().into(),
            principal: e.principal().into(),
            host: e.host().into(),
            operation: e.operation().name().into(),
            permission: e.permission_type().name().into(),
        }
    }

    fn binding(&self) -> Result<AclBinding, String> {
        AclBinding::new(
            ResourceType::from_name(&self.resource_type),
            self.name.clone(),
            PatternType::from_name(&self.pattern_type),
            self.principal.clone(),
            self.host.clone(),
            AclOperation::from_name(&self.operation),
            AclPermissionType::from_name(&self.permission),
        )
        .map_err(|e| e.to_string())
    }
}

fn parse(text: &[u8]) -> Result<AclCache, String> {
    let form: FileForm = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    if form.version != 1 {
        return Err(format!("version {} (only 1 is known)", form.version));
    }
    let mut acls = AclCache::new();
    for (i, e) in form.acls.iter().enumerate() {
        let name = || format!("entry {i} ({} {:?} for {})", e.resource_type, e.name, e.principal);
        let binding = e.binding().map_err(|r| format!("{}: {r}", name()))?;
        if !acls.add(binding) {
            return Err(format!("{}: duplicate", name()));
        }
    }
    Ok(acls)
}

fn render(acls: &AclCache) -> Vec<u8> {
    let acls = acls.iter().map(Entry::of).collect();
    let mut out = serde_json::to_vec_pretty(&FileForm { version: 1, acls }).unwrap_or_default();
    out.push(b'\n');
    out
}

/// The ACLs one etcd key holds: the file's form, limited to one pattern.
fn render_bindings<'a>(bindings: impl Iterator<Item = &'a AclBinding>) -> Vec<u8> {
    let acls = bindings.map(Entry::of).collect();
    serde_json::to_vec(&FileForm { version: 1, acls }).unwrap_or_default()
}

/// The key of `b`'s resource pattern.
fn key_of(keys: &ClusterKeys, b: &AclBinding) -> String {
    let p = b.pattern();
    keys.acl(p.resource_type().name(), p.pattern_type().name(), p.name())
}

/// The ACLs of an image's keys.
///
/// # Errors
/// A key that does not parse or holds a binding of another pattern, named:
/// leaving it out could drop a DENY, so nothing of that image is used.
fn acls_of(keys: &ClusterKeys, stored: &StoredKeys) -> Result<AclCache, StoreError> {
    let mut acls = AclCache::new();
    for (key, v) in stored {
        let damaged = |reason: String| StoreError::Damaged { path: PathBuf::from(key), reason };
        let one = parse(&v.value).map_err(damaged)?;
        if !one.iter().all(|b| key_of(keys, b) == *key) {
            return Err(damaged("holds ACLs of another resource pattern".into()));
        }
        for b in one.iter() {
            acls.add(b.clone());
        }
    }
    Ok(acls)
}

/// The keys whose ACLs differ between `from` and `to`, with their new value.
fn changed_keys(keys: &ClusterKeys, from: &AclCache, to: &AclCache) -> Vec<KeyChange> {
    let group = |acls: &AclCache| {
        let mut by_key: BTreeMap<String, Vec<AclBinding>> = BTreeMap::new();
        for b in acls.iter() {
            by_key.entry(key_of(keys, b)).or_default().push(b.clone());
        }
        by_key
    };
    let (before, after) = (group(from), group(to));
    let touched: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    touched
        .into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| (k.clone(), after.get(k).map(|bs| render_bindings(bs.iter()))))
        .collect()
}

/// The ACLs in etcd: one key per resource pattern.
const CLUSTER_FORM: ClusterForm<AclCache> =
    ClusterForm { stored: |image| &image.acls, read: acls_of, changed: changed_keys };

/// The authorizer of a broker that has `authorizer.class.name` set, and
/// where its ACLs are kept: the file, or etcd in a cluster.
#[derive(Debug)]
pub struct AclStore {
    path: PathBuf,
    writer: Mutex<()>,
    authorizer: StandardAuthorizer,
    cluster: OnceLock<Arc<ClusterSecurityStore>>,
    /// In a cluster, the image revision and keys the ACLs in force came from.
    installed: Mutex<Option<(i64, Arc<StoredKeys>)>>,
}

impl AclStore {
    /// Load the ACLs of `dir` into `authorizer`.
    ///
    /// # Errors
    /// I/O errors, or a damaged file (the entry named).
    pub fn open(dir: &Path, authorizer: StandardAuthorizer) -> Result<Self, StoreError> {
        let path = dir.join(ACLS_FILE);
        if let Some(text) = read_bounded(&path)? {
            let acls = parse(&text)
                .map_err(|reason| StoreError::Damaged { path: path.clone(), reason })?;
            authorizer.set_acls(Arc::new(acls));
        }
        Ok(Self {
            path,
            writer: Mutex::new(()),
            authorizer,
            cluster: OnceLock::new(),
            installed: Mutex::new(None),
        })
    }

    /// Keep the ACLs in etcd from now on (module doc): install the image's
    /// and follow every new one. The file's ACLs, if any, are not used.
    ///
    /// # Errors
    /// A damaged ACL key in etcd (named): the broker must not start with
    /// fewer ACLs than the cluster has.
    pub fn use_cluster(
        self: &Arc<Self>,
        cluster: Arc<ClusterSecurityStore>,
    ) -> Result<(), StoreError> {
        let local = self.authorizer.acls().len();
        if local > 0 {
            tracing::warn!(
                path = %self.path.display(),
                local,
                "the ACL file is not used in a cluster: etcd holds the cluster's ACLs"
            );
        }
        self.install(cluster.keys(), &cluster.image())?;
        cluster.follow(self, |store: &Self, keys, image| {
            if let Err(e) = store.install(keys, image) {
                tracing::error!("ACLs in etcd damaged; the ACLs in force stay as they were: {e}");
            }
        });
        let _ = self.cluster.set(cluster);
        Ok(())
    }

    /// Make `image`'s ACLs the ones in force, unless a newer image's are.
    ///
    /// # Errors
    /// A damaged key: the ACLs in force stay as they were.
    fn install(&self, keys: &ClusterKeys, image: &MetadataImage) -> Result<(), StoreError> {
        let mut installed = self.installed.lock();
        if let Some((revision, acls)) = installed.as_ref() {
            if *revision >= image.revision || Arc::ptr_eq(acls, &image.acls) {
                return Ok(());
            }
        }
        self.authorizer.set_acls(Arc::new(acls_of(keys, &image.acls)?));
        *installed = Some((image.revision, Arc::clone(&image.acls)));
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn authorizer(&self) -> &StandardAuthorizer {
        &self.authorizer
    }

    /// Apply `change` to a copy of the current ACLs, write them durably, then
    /// install them. `change` returns the answer and whether anything
    /// changed; nothing is written when nothing did.
    ///
    /// # Errors
    /// The write failed; the ACLs in force are unchanged.
    pub fn update<T>(
        &self,
        mut change: impl FnMut(&mut AclCache) -> (T, bool),
    ) -> Result<T, StoreError> {
        let _writer = self.writer.lock();
        if let Some(cluster) = self.cluster.get() {
            // A damaged key is refused (`acls_of`), never overwritten.
            let (answer, image) = update_in_cluster(cluster, &CLUSTER_FORM, change)?;
            if let Some(image) = image {
                self.install(cluster.keys(), &image)?;
            }
            return Ok(answer);
        }
        let mut next = (*self.authorizer.acls()).clone();
        let (answer, changed) = change(&mut next);
        if changed {
            write_atomically(&self.path, &render(&next), 0o600)?;
            self.authorizer.set_acls(Arc::new(next));
        }
        Ok(answer)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::security::authorizer::{AuthorizationResult, Requester};
    use crate::security::KafkaPrincipal;

    fn write_orders(alice: &str) -> AclBinding {
        AclBinding::new(
            ResourceType::Topic,
            "orders-",
            PatternType::Prefixed,
            alice,
            "*",
            AclOperation::Write,
            AclPermissionType::Allow,
        )
        .expect("valid")
    }

    fn open(dir: &Path) -> Result<AclStore, StoreError> {
        AclStore::open(dir, StandardAuthorizer::new(HashSet::new(), false))
    }

    #[test]
    fn a_change_survives_reopening_and_is_enforced() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = open(dir.path()).expect("open");
        assert!(store.authorizer().acls().is_empty());
        store.update(|acls| ((), acls.add(write_orders("User:alice")))).expect("write");
        let again = open(dir.path()).expect("reopen");
        let alice = Requester::new(
            KafkaPrincipal { principal_type: "User".into(), name: "alice".into() },
            "127.0.0.1".parse().expect("ip"),
        );
        let check = |name| {
            again.authorizer().authorize(&alice, AclOperation::Write, ResourceType::Topic, name)
        };
        assert_eq!(check("orders-eu"), AuthorizationResult::Allowed);
        assert_eq!(check("billing"), AuthorizationResult::Denied);
    }

    /// A broker's view of the cluster `c`: its own image of it.
    pub(crate) async fn cluster_view(
        c: &Arc<crate::cluster::MemCoordination>,
    ) -> Arc<ClusterSecurityStore> {
        use crate::cluster::{image::ImageWatcher, Coordination};
        let keys = ClusterKeys::new("/t");
        let coordination: Arc<dyn Coordination> = Arc::clone(c) as _;
        let retry = std::time::Duration::from_millis(10);
        let image = ImageWatcher::start(Arc::clone(&coordination), keys.clone(), retry);
        let image = Arc::new(image.await.expect("image"));
        let rt = tokio::runtime::Handle::current();
        Arc::new(ClusterSecurityStore::new(coordination, image, keys, rt))
    }

    /// Wait up to 10 s for `done`.
    pub(crate) async fn eventually(mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "not within 10 s");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_a_cluster_one_brokers_change_is_enforced_by_another_and_races_merge() {
        let c = Arc::new(crate::cluster::MemCoordination::new(Arc::new(crate::clock::SystemClock)));
        let (dir_a, dir_b) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
        let (a, b) =
            (Arc::new(open(dir_a.path()).expect("a")), Arc::new(open(dir_b.path()).expect("b")));
        a.use_cluster(cluster_view(&c).await).expect("a joins");
        b.use_cluster(cluster_view(&c).await).expect("b joins");
        let (alice, bob) = (write_orders("User:alice"), write_orders("User:bob"));
        // Same resource pattern, one key: b's base may lack alice's ACL, and
        // its write is then rebuilt on the newer image.
        tokio::task::block_in_place(|| {
            a.update(|acls| ((), acls.add(alice.clone()))).expect("a writes");
            b.update(|acls| ((), acls.add(bob.clone()))).expect("b writes");
        });
        let both = |s: &AclStore| {
            let acls = s.authorizer().acls();
            acls.len() == 2 && acls.contains(&alice) && acls.contains(&bob)
        };
        assert!(both(&b), "b answered after its image held both");
        eventually(|| both(&a)).await;
        assert!(!a.path().exists() && !b.path().exists(), "no file is written in a cluster");
        tokio::task::block_in_place(|| {
            a.update(|acls| ((), acls.remove(&alice))).expect("remove");
        });
        eventually(|| b.authorizer().acls().len() == 1).await;
        assert!(b.authorizer().acls().contains(&bob));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_damaged_key_in_etcd_keeps_the_acls_in_force_and_stops_a_start() {
        use crate::cluster::coordination::{Coordination, Op, Txn};
        let c = Arc::new(crate::cluster::MemCoordination::new(Arc::new(crate::clock::SystemClock)));
        let dir = tempfile::tempdir().expect("tmp");
        let a = Arc::new(open(dir.path()).expect("a"));
        a.use_cluster(cluster_view(&c).await).expect("a joins");
        let alice = write_orders("User:alice");
        tokio::task::block_in_place(|| a.update(|acls| ((), acls.add(alice.clone()))))
            .expect("add");
        let key = ClusterKeys::new("/t").acl("TOPIC", "PREFIXED", "orders-");
        let junk = Txn {
            success: vec![Op::put(key.clone(), b"{\"version\":2,\"acls\":[]}".to_vec())],
            ..Txn::default()
        };
        let revision = c.txn(junk).await.expect("put").revision;
        let view = cluster_view(&c).await;
        assert!(view.image().revision >= revision);
        // The running broker keeps what it had; a starting one refuses.
        let a_view = Arc::clone(a.cluster.get().expect("in a cluster"));
        eventually(|| a_view.image().revision >= revision).await;
        tokio::task::yield_now().await;
        assert!(a.installed.lock().as_ref().is_some_and(|(r, _)| *r < revision));
        assert!(a.authorizer().acls().contains(&alice));
        let b = Arc::new(open(tempfile::tempdir().expect("tmp").path()).expect("b"));
        let err = b.use_cluster(Arc::clone(&view)).expect_err("damaged").to_string();
        assert!(err.contains(&key) && err.contains("version 2"), "{err}");
        // Nor is the damaged key overwritten by a change.
        let refused = tokio::task::block_in_place(|| a.update(|acls| ((), acls.remove(&alice))));
        assert!(refused.is_err(), "{refused:?}");
        assert!(a.authorizer().acls().contains(&alice));
    }

    #[test]
    fn no_change_writes_nothing_and_a_leftover_tmp_is_ignored() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("sediment-acls.json.tmp"), "junk").expect("write");
        let store = open(dir.path()).expect("open");
        store.update(|_| ((), false)).expect("noop");
        assert!(!store.path().exists());
    }

    #[test]
    fn a_damaged_file_stops_the_load_naming_the_entry() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = open(dir.path()).expect("open");
        store.update(|acls| ((), acls.add(write_orders("User:alice")))).expect("write");
        let good = std::fs::read_to_string(store.path()).expect("read");
        let mut form: serde_json::Value = serde_json::from_str(&good).expect("json");
        let first = form["acls"][0].clone();
        form["acls"].as_array_mut().expect("array").push(first);
        let dup = form.to_string();
        let cases = [
            (good.replace("User:alice", "alice"), "entry 0 (TOPIC \"orders-\" for alice)"),
            (good.replace("\"WRITE\"", "\"SCRIBBLE\""), "Invalid operation UNKNOWN"),
            (good.replace("\"version\": 1", "\"version\": 2"), "version 2"),
            (good.replace("\"host\"", "\"extra\": 1, \"host\""), "unknown field"),
            (good[..good.len() / 2].to_string(), "EOF"),
            (dup, "duplicate"),
        ];
        for (text, expected) in cases {
            std::fs::write(store.path(), &text).expect("write");
            let err = open(dir.path()).expect_err("damaged").to_string();
            assert!(err.contains(expected) && err.contains(ACLS_FILE), "{expected}: {err}");
        }
    }
}

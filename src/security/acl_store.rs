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

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::acl::{AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType};
use super::acl_cache::AclCache;
use super::authorizer::StandardAuthorizer;
use super::store::{read_bounded, write_atomically, StoreError};

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

/// The authorizer of a broker that has `authorizer.class.name` set, and the
/// file that keeps its ACLs.
#[derive(Debug)]
pub struct AclStore {
    path: PathBuf,
    writer: Mutex<()>,
    authorizer: StandardAuthorizer,
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
        Ok(Self { path, writer: Mutex::new(()), authorizer })
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
        change: impl FnOnce(&mut AclCache) -> (T, bool),
    ) -> Result<T, StoreError> {
        let _writer = self.writer.lock();
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
mod tests {
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

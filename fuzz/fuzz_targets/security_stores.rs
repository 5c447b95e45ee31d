//! Any bytes as each of the JSON stores the first log dir keeps: the ACLs
//! (`sediment-acls.json`), the SCRAM credentials
//! (`sediment-scram-credentials.json`) and the dynamic broker configs
//! (`sediment-dynamic-broker-configs.json`). Opening never panics: a store
//! loads or is refused as damaged (the dynamic configs drop what no longer
//! validates). What loads is written back by the store's own writer and
//! loads again to the same ACLs, credentials or layers; loaded ACLs answer
//! authorization questions for the principals they name without panicking,
//! and a super user is always allowed.
#![no_main]

mod common;

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

use libfuzzer_sys::fuzz_target;
use sediment::config::dynamic::{DynamicBrokerConfig, DynamicLevel, DYNAMIC_CONFIG_FILE};
use sediment::config::BrokerConfig;
use sediment::security::acl::{parse_principal, AclBinding, AclOperation};
use sediment::security::acl_store::{AclStore, ACLS_FILE};
use sediment::security::authorizer::{AuthorizationResult, Requester, StandardAuthorizer};
use sediment::security::credentials::{CredentialStore, SCRAM_CREDENTIALS_FILE};
use sediment::security::KafkaPrincipal;

fn authorizer() -> StandardAuthorizer {
    StandardAuthorizer::new(HashSet::from(["User:admin".to_string()]), false)
}

fn sorted(store: &AclStore) -> Vec<AclBinding> {
    let mut acls: Vec<AclBinding> = store.authorizer().acls().iter().cloned().collect();
    acls.sort();
    acls
}

fn acls(dir: &std::path::Path, data: &[u8]) {
    std::fs::write(dir.join(ACLS_FILE), data).expect("write");
    let Ok(store) = AclStore::open(dir, authorizer()) else { return };
    let loaded = sorted(&store);
    let peer = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let admin = KafkaPrincipal { principal_type: "User".into(), name: "admin".into() };
    for binding in loaded.iter().take(8) {
        let pattern = binding.pattern();
        let name = pattern.name();
        let principal = parse_principal(binding.entry().principal())
            .unwrap_or_else(|_| KafkaPrincipal::anonymous());
        for op in [
            AclOperation::Read,
            AclOperation::Write,
            AclOperation::Describe,
            binding.entry().operation(),
        ] {
            let a = store.authorizer();
            let _ = a.authorize(
                &Requester::new(principal.clone(), peer),
                op,
                pattern.resource_type(),
                name,
            );
            let _ = a.authorize_by_resource_type(
                &Requester::new(principal.clone(), peer),
                op,
                pattern.resource_type(),
            );
            let allowed = a.authorize(
                &Requester::new(admin.clone(), peer),
                op,
                pattern.resource_type(),
                name,
            );
            assert_eq!(allowed, AuthorizationResult::Allowed, "a super user is refused");
        }
    }
    // Force a write of what was loaded, then load it again.
    store.update(|_| ((), true)).expect("write back");
    let again = AclStore::open(dir, authorizer()).expect("what the store wrote loads");
    assert_eq!(sorted(&again), loaded);
}

fn credentials(dir: &std::path::Path, data: &[u8]) {
    std::fs::write(dir.join(SCRAM_CREDENTIALS_FILE), data).expect("write");
    let Ok(store) = CredentialStore::open(dir) else { return };
    let loaded = store.snapshot();
    store.update(|_| ((), true)).expect("write back");
    let again = CredentialStore::open(dir).expect("what the store wrote loads");
    assert!(*again.snapshot() == *loaded, "credentials changed on a reload");
}

fn dynamic(dir: &std::path::Path, data: &[u8]) {
    std::fs::write(dir.join(DYNAMIC_CONFIG_FILE), data).expect("write");
    let mut config = BrokerConfig::default();
    config.set("log.dirs", &dir.display().to_string()).expect("log.dirs");
    let Ok(store) = DynamicBrokerConfig::open(config.clone()) else { return };
    let layers = store.layers();
    let _ = store.current();
    for level in [DynamicLevel::ClusterDefault, DynamicLevel::PerBroker] {
        let _ = store.describe(level);
    }
    // What was kept, written by the store and read back, is kept whole.
    store
        .alter(DynamicLevel::PerBroker, layers.per_broker.clone(), false, |_, _| Ok(()), |_| Ok(()))
        .expect("the layers that loaded are written back");
    let again = DynamicBrokerConfig::open(config).expect("what the store wrote loads");
    assert_eq!(again.layers(), layers);
}

fuzz_target!(|data: &[u8]| {
    let dir = common::scratch_dir();
    acls(dir, data);
    credentials(dir, data);
    dynamic(dir, data);
});

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;

use super::*;
use crate::security::sasl::scram_credential::CredentialLookup;

fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
    ScramCredentialUpsertion::default()
        .with_name(str_bytes(name))
        .with_mechanism(mechanism)
        .with_iterations(iterations)
        .with_salt(bytes::Bytes::from_static(b"salt"))
        .with_salted_password(bytes::Bytes::from(vec![7u8; 32]))
}

fn delete(name: &str, mechanism: i8) -> ScramCredentialDeletion {
    ScramCredentialDeletion::default().with_name(str_bytes(name)).with_mechanism(mechanism)
}

fn codes(r: &AlterUserScramCredentialsResponse) -> Vec<(String, i16)> {
    r.results.iter().map(|x| (x.user.to_string(), x.error_code)).collect()
}

#[test]
fn alter_validates_each_user_as_kafka_and_writes_the_rest() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = CredentialStore::open(dir.path()).expect("open");
    let request = AlterUserScramCredentialsRequest::default()
        .with_upsertions(vec![
            upsert("alice", 1, 8192),
            upsert("bob", 2, 4096),
            upsert("dup", 1, 4096),
            upsert("low", 1, 4095),
            upsert("high", 1, 16385),
            upsert("mech", 3, 4096),
            upsert("", 1, 4096),
        ])
        .with_deletions(vec![delete("dup", 1), delete("ghost", 1)]);
    let r = alter(&store, &request);
    let mut got = codes(&r);
    got.sort();
    let mut want = vec![
        ("".to_string(), 93),
        ("alice".into(), 0),
        ("bob".into(), 0),
        ("dup".into(), 92),
        ("ghost".into(), 91),
        ("high".into(), 93),
        ("low".into(), 93),
        ("mech".into(), 33),
    ];
    want.sort();
    assert_eq!(got, want);
    let alice = store.lookup("alice", ScramMechanism::Sha256).expect("alice");
    assert_eq!(alice.iterations, 8192);
    // The stored keys are derived from the salted password, which is not kept.
    assert_eq!(
        alice,
        ScramCredential::from_salted_password(
            ScramMechanism::Sha256,
            b"salt".to_vec(),
            &[7u8; 32],
            8192
        )
    );
    assert!(store.lookup("low", ScramMechanism::Sha256).is_none());
    let reopened = CredentialStore::open(dir.path()).expect("reopen");
    assert_eq!(reopened.snapshot().keys().cloned().collect::<Vec<_>>(), ["alice", "bob"]);

    let r = alter(
        &store,
        &AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![delete("alice", 1), delete("bob", 1)]),
    );
    assert_eq!(codes(&r), [("alice".to_string(), 0), ("bob".to_string(), 91)]);
    assert!(store.lookup("alice", ScramMechanism::Sha256).is_none());
    assert!(store.lookup("bob", ScramMechanism::Sha512).is_some());
}

#[test]
fn describe_lists_mechanisms_and_iterations_only() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = CredentialStore::open(dir.path()).expect("open");
    let request =
        AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsert("alice", 1, 8192)]);
    alter(&store, &request);
    alter(
        &store,
        &AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![upsert("alice", 2, 4096)]),
    );
    let all = describe(&store, &DescribeUserScramCredentialsRequest::default());
    assert_eq!(all.results.len(), 1);
    let infos: Vec<(i8, i32)> =
        all.results[0].credential_infos.iter().map(|c| (c.mechanism, c.iterations)).collect();
    assert_eq!(infos, [(1, 8192), (2, 4096)]);
    let name = |n: &str| UserName::default().with_name(str_bytes(n));
    let some = describe(
        &store,
        &DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
            name("alice"),
            name("nobody"),
            name("twice"),
            name("twice"),
        ])),
    );
    let got: Vec<(String, i16)> =
        some.results.iter().map(|r| (r.user.to_string(), r.error_code)).collect();
    assert_eq!(got, [("alice".into(), 0), ("nobody".into(), 91), ("twice".into(), 92)]);
}

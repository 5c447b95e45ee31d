use std::collections::HashSet;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::RequestHeader;

use super::*;
use crate::metrics::DenialRecorder;
use crate::security::authorizer::StandardAuthorizer;
use crate::security::{KafkaPrincipal, Session};

const ALTER_CLUSTER: AclOperation = AclOperation::Alter;

fn session(user: &str) -> Session {
    let mut s = Session::plaintext("SASL_PLAINTEXT", "127.0.0.1".parse().expect("ip"));
    s.principal = KafkaPrincipal { principal_type: "User".into(), name: user.into() };
    s
}

fn store(dir: &std::path::Path) -> AclStore {
    let supers: HashSet<String> = ["User:admin".to_string()].into();
    AclStore::open(dir, StandardAuthorizer::new(supers, false)).expect("open")
}

fn ctx<'a>(
    key: i16,
    session: &'a Session,
    store: Option<&'a AclStore>,
    denials: &'a DenialRecorder,
) -> RequestContext<'a> {
    let header = RequestHeader::default().with_request_api_key(key).with_request_api_version(3);
    RequestContext::new(header, session, store).with_denials(denials)
}

fn creation(rt: i8, name: &str, pt: i8, principal: &str, op: i8, perm: i8) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(str_bytes(name))
        .with_resource_pattern_type(pt)
        .with_principal(str_bytes(principal))
        .with_host(str_bytes("*"))
        .with_operation(op)
        .with_permission_type(perm)
}

/// WRITE ALLOW on PREFIXED topic `name` for `principal`.
fn write_prefixed(name: &str, principal: &str) -> AclCreation {
    creation(2, name, 4, principal, 4, 3)
}

fn create(c: &RequestContext<'_>, creations: Vec<AclCreation>) -> Vec<(i16, Option<String>)> {
    let r =
        create_acls(c, &CreateAclsRequest::default().with_creations(creations)).expect("answer");
    r.results
        .iter()
        .map(|x| (x.error_code, x.error_message.as_ref().map(|m| m.to_string())))
        .collect()
}

fn any_filter() -> DeleteAclsFilter {
    DeleteAclsFilter::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1)
}

/// A request with no name, principal or host filter (the message's
/// defaults are empty strings, which select only empty values).
fn describe_request() -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
}

fn describe_all(c: &RequestContext<'_>) -> DescribeAclsResponse {
    let r = describe_request()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    describe_acls(c, &r).expect("answer")
}

#[test]
fn creations_are_validated_each_and_a_duplicate_adds_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = store(dir.path());
    let (admin, denials) = (session("admin"), DenialRecorder::default());
    let c = ctx(30, &admin, Some(&store), &denials);
    let results = create(
        &c,
        vec![
            write_prefixed("orders-", "User:alice"),
            write_prefixed("orders-", "User:alice"),
            creation(99, "t", 3, "User:alice", 3, 3),
            creation(1, "t", 3, "User:alice", 3, 3),
            creation(2, "t", 2, "User:alice", 3, 3),
            creation(4, "cluster", 3, "User:alice", 7, 3),
            creation(2, "", 3, "User:alice", 3, 3),
            creation(2, "t", 3, "alice", 3, 3),
            creation(2, "t", 3, "User:alice", 1, 3),
            creation(2, "t", 3, "User:alice", 3, 1),
        ],
    );
    let expect = |m: &str| (42, Some(m.to_string()));
    assert_eq!(
        results,
        [
            (0, None),
            (0, None),
            expect("Invalid resourceType UNKNOWN"),
            expect("Invalid resourceType ANY"),
            expect("Invalid patternType MATCH"),
            expect("The only valid name for the CLUSTER resource is kafka-cluster"),
            expect("Invalid empty resource name"),
            expect("expected a string in format principalType:principalName but got alice"),
            expect("Invalid operation ANY"),
            expect("Invalid permissionType ANY"),
        ]
    );
    assert_eq!(store.authorizer().acls().len(), 1);
    // A repeated request (a retry after a lost answer) succeeds and adds nothing.
    assert_eq!(create(&c, vec![write_prefixed("orders-", "User:alice")]), [(0, None)]);
    assert_eq!(store.authorizer().acls().len(), 1);
    let file = std::fs::read_to_string(store.path()).expect("written");
    assert_eq!(file.matches("User:alice").count(), 1, "{file}");
}

#[test]
fn a_request_naming_code_zero_closes_the_connection() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = store(dir.path());
    let (admin, denials) = (session("admin"), DenialRecorder::default());
    let c = ctx(30, &admin, Some(&store), &denials);
    for zero in [
        creation(0, "t", 3, "User:a", 3, 3),
        creation(2, "t", 0, "User:a", 3, 3),
        creation(2, "t", 3, "User:a", 0, 3),
        creation(2, "t", 3, "User:a", 3, 0),
    ] {
        let request =
            CreateAclsRequest::default().with_creations(vec![write_prefixed("x", "User:a"), zero]);
        assert_eq!(create_acls(&c, &request).err(), Some(Close));
    }
    assert!(store.authorizer().acls().is_empty(), "nothing of a closed request is applied");
    let zero_filter = any_filter().with_operation(0);
    let request = DeleteAclsRequest::default().with_filters(vec![any_filter(), zero_filter]);
    assert_eq!(delete_acls(&c, &request).err(), Some(Close));
    let request = describe_request()
        .with_resource_type_filter(0)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    assert_eq!(describe_acls(&c, &request).err(), Some(Close));
}

#[test]
fn without_an_authorizer_every_api_answers_security_disabled() {
    let (anyone, denials) = (session("ANONYMOUS"), DenialRecorder::default());
    let c = ctx(30, &anyone, None, &denials);
    let msg = |m: &str| Some(m.to_string());
    assert_eq!(
        create(&c, vec![write_prefixed("a", "User:a"), write_prefixed("b", "User:a")]),
        [(54, msg("No Authorizer is configured.")), (54, msg("No Authorizer is configured."))]
    );
    let described = describe_all(&c);
    assert_eq!(described.error_code, 54);
    assert_eq!(
        described.error_message.as_ref().map(|m| m.to_string()).as_deref(),
        Some("No Authorizer is configured on the broker")
    );
    let request = DeleteAclsRequest::default().with_filters(vec![any_filter(), any_filter()]);
    let deleted = delete_acls(&c, &request).expect("answer");
    assert!(deleted.filter_results.iter().all(|f| f.error_code == 54));
    assert_eq!(deleted.filter_results.len(), 2);
}

#[test]
fn a_principal_without_cluster_acls_is_refused_and_the_denial_counted() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = store(dir.path());
    let (alice, denials) = (session("alice"), DenialRecorder::default());
    let c = ctx(30, &alice, Some(&store), &denials);
    assert_eq!(create(&c, vec![write_prefixed("orders-", "User:alice")]), [(31, None)]);
    assert!(store.authorizer().acls().is_empty());
    assert_eq!(denials.count("CreateAcls", "CLUSTER", "ALTER"), 1);
    let c = ctx(29, &alice, Some(&store), &denials);
    assert_eq!(describe_all(&c).error_code, 31);
    assert_eq!(denials.count("DescribeAcls", "CLUSTER", "DESCRIBE"), 1);
    let c = ctx(31, &alice, Some(&store), &denials);
    let request = DeleteAclsRequest::default().with_filters(vec![any_filter()]);
    let deleted = delete_acls(&c, &request).expect("answer");
    assert_eq!(deleted.filter_results[0].error_code, 31);
    assert_eq!(denials.count("DeleteAcls", "CLUSTER", "ALTER"), 1);
    // An ALTER ACL on the cluster lets alice manage ACLs (DESCRIBE is implied).
    let admin = session("admin");
    let a = ctx(30, &admin, Some(&store), &denials);
    assert_eq!(
        create(&a, vec![creation(4, CLUSTER_NAME, 3, "User:alice", ALTER_CLUSTER.code(), 3)]),
        [(0, None)]
    );
    let c = ctx(29, &alice, Some(&store), &denials);
    assert_eq!(describe_all(&c).error_code, 0);
}

#[test]
fn describe_groups_the_selected_bindings_by_resource() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = store(dir.path());
    let (admin, denials) = (session("admin"), DenialRecorder::default());
    let c = ctx(30, &admin, Some(&store), &denials);
    let created = create(
        &c,
        vec![
            write_prefixed("orders-", "User:alice"),
            write_prefixed("orders-", "User:bob"),
            creation(2, "orders-eu", 3, "User:carol", 3, 2),
            creation(3, "g", 3, "User:alice", 3, 3),
        ],
    );
    assert!(created.iter().all(|r| r.0 == 0), "{created:?}");
    let all = describe_all(&c);
    let shape: Vec<(i8, String, i8, usize)> = all
        .resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.to_string(), r.pattern_type, r.acls.len()))
        .collect();
    assert_eq!(
        shape,
        [(2, "orders-".into(), 4, 2), (2, "orders-eu".into(), 3, 1), (3, "g".into(), 3, 1)]
    );
    // MATCH on a topic name: what applies to it (the LITERAL and the prefix).
    let matched = describe_acls(
        &c,
        &describe_request()
            .with_resource_type_filter(2)
            .with_resource_name_filter(Some(str_bytes("orders-eu")))
            .with_pattern_type_filter(2)
            .with_operation(1)
            .with_permission_type(1),
    )
    .expect("answer");
    assert_eq!(matched.resources.len(), 2);
    let denies: Vec<_> =
        matched.resources.iter().flat_map(|r| &r.acls).filter(|a| a.permission_type == 2).collect();
    assert_eq!(denies.len(), 1);
    assert_eq!(denies[0].principal.as_str(), "User:carol");
}

#[test]
fn deletion_filters_select_from_the_acls_before_the_request() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = store(dir.path());
    let (admin, denials) = (session("admin"), DenialRecorder::default());
    let c = ctx(31, &admin, Some(&store), &denials);
    create(&c, vec![write_prefixed("orders-", "User:alice"), write_prefixed("x", "User:bob")]);
    let by_name = any_filter()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(str_bytes("orders-")))
        .with_pattern_type_filter(4);
    let by_principal = any_filter().with_principal_filter(Some(str_bytes("User:alice")));
    let unknown = any_filter().with_pattern_type_filter(99);
    let request = DeleteAclsRequest::default().with_filters(vec![by_name, by_principal, unknown]);
    let r = delete_acls(&c, &request).expect("answer");
    let listed: Vec<(i16, Vec<String>)> = r
        .filter_results
        .iter()
        .map(|f| (f.error_code, f.matching_acls.iter().map(|m| m.principal.to_string()).collect()))
        .collect();
    assert_eq!(
        listed,
        [(0, vec!["User:alice".into()]), (0, vec!["User:alice".into()]), (42, vec![])]
    );
    assert_eq!(
        r.filter_results[2].error_message.as_ref().map(|m| m.to_string()).as_deref(),
        Some("Unknown patternFilter.")
    );
    let m = &r.filter_results[0].matching_acls[0];
    assert_eq!((m.resource_type, m.pattern_type, m.operation, m.permission_type), (2, 4, 4, 3));
    assert_eq!((m.resource_name.as_str(), m.host.as_str(), m.error_code), ("orders-", "*", 0));
    let left: Vec<_> =
        store.authorizer().acls().iter().map(|b| b.entry().principal().to_string()).collect();
    assert_eq!(left, ["User:bob"]);
    let again = delete_acls(
        &c,
        &DeleteAclsRequest::default()
            .with_filters(vec![any_filter().with_principal_filter(Some(str_bytes("User:alice")))]),
    )
    .expect("answer");
    assert!(
        again.filter_results[0].matching_acls.is_empty(),
        "a repeated deletion matches nothing"
    );
}

#[test]
fn more_than_ten_thousand_acls_in_one_request_change_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = store(dir.path());
    let (admin, denials) = (session("admin"), DenialRecorder::default());
    let c = ctx(30, &admin, Some(&store), &denials);
    let names = |range: std::ops::Range<usize>| -> Vec<AclCreation> {
        range.map(|i| write_prefixed(&format!("t{i}"), "User:alice")).collect()
    };
    let mut too_many = names(0..MAX_RECORDS_PER_USER_OP + 1);
    too_many.push(creation(2, "", 3, "User:alice", 3, 3));
    let results = create(&c, too_many);
    let policy = (44, Some("Unable to perform excessively large batch operation.".to_string()));
    assert!(results[..MAX_RECORDS_PER_USER_OP + 1].iter().all(|r| *r == policy));
    assert_eq!(results.last().map(|r| r.0), Some(42), "an invalid creation keeps its error");
    assert!(store.authorizer().acls().is_empty() && !store.path().exists());
    // Duplicates do not count: 10000 new ACLs and one repeated are accepted.
    let mut exactly = names(0..MAX_RECORDS_PER_USER_OP);
    exactly.push(write_prefixed("t0", "User:alice"));
    assert!(create(&c, exactly).iter().all(|r| r.0 == 0));
    assert!(create(&c, names(MAX_RECORDS_PER_USER_OP..MAX_RECORDS_PER_USER_OP + 1))
        .iter()
        .all(|r| r.0 == 0));
    assert_eq!(store.authorizer().acls().len(), MAX_RECORDS_PER_USER_OP + 1);
    let request = DeleteAclsRequest::default().with_filters(vec![any_filter(), any_filter()]);
    let r = delete_acls(&c, &request).expect("answer");
    assert!(r.filter_results.iter().all(|f| f.error_code == -1 && f.matching_acls.is_empty()));
    assert_eq!(store.authorizer().acls().len(), MAX_RECORDS_PER_USER_OP + 1);
}

#[test]
fn a_failed_write_answers_a_storage_error_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = store(dir.path());
    let (admin, denials) = (session("admin"), DenialRecorder::default());
    let c = ctx(30, &admin, Some(&store), &denials);
    assert_eq!(create(&c, vec![write_prefixed("a", "User:alice")]), [(0, None)]);
    // A directory where the file is: the rename over it fails, even as root.
    std::fs::remove_file(store.path()).expect("rm");
    std::fs::create_dir(store.path()).expect("mkdir");
    std::fs::write(store.path().join("keep"), "x").expect("write");
    let results =
        create(&c, vec![write_prefixed("b", "User:alice"), creation(2, "t", 3, "alice", 3, 3)]);
    assert_eq!(results[0].0, ResponseError::KafkaStorageError.code());
    assert_eq!(results[1].0, 42);
    assert_eq!(store.authorizer().acls().len(), 1);
    let unknown = any_filter().with_resource_type_filter(42);
    let request = DeleteAclsRequest::default().with_filters(vec![any_filter(), unknown]);
    let r = delete_acls(&c, &request).expect("answer");
    let codes: Vec<i16> = r.filter_results.iter().map(|f| f.error_code).collect();
    assert_eq!(codes, [ResponseError::KafkaStorageError.code(), 42]);
    assert!(r.filter_results[0].matching_acls.is_empty());
    assert_eq!(store.authorizer().acls().len(), 1);
}

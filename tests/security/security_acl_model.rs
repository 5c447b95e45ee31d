//! Property test of the authorizer's index against a linear scan: random ACL
//! sets over a small alphabet of resource names, prefixes, principals, hosts
//! and operations (with removals and a DeleteAcls filter applied to both),
//! then random checks. The oracle below restates Kafka's `StandardAuthorizer`
//! rules and its `ResourcePatternFilter`/`AccessControlEntryFilter` matching
//! over plain tuples, without the crate's matching code: rule by rule, every
//! ACL looked at.

use std::net::IpAddr;
use std::sync::Arc;

use proptest::prelude::*;
use sediment::security::acl::{
    AccessControlEntryFilter, AclBinding, AclBindingFilter, AclOperation as Op,
    AclPermissionType as Perm, PatternType as Pt, ResourcePatternFilter, ResourceType as Rt,
};
use sediment::security::authorizer::{
    parse_super_users, AclCache, AuthorizationResult, Requester, StandardAuthorizer,
};
use sediment::security::KafkaPrincipal;

/// ACL resource names; `h`, `hard` and `hardcode` reach the by-type probe.
const ACL_NAMES: &[&str] = &["a", "ab", "abc", "b", "*", "*a", "é", "éa", "h", "hardcode"];
const QUERY_NAMES: &[&str] = &["a", "ab", "abc", "abd", "b", "ba", "*", "*a", "é", "éab", "x"];
const ACL_PRINCIPALS: &[&str] = &["User:alice", "User:bob", "User:*", "Group:alice", "Group:*"];
const REQUESTERS: &[(&str, &str)] =
    &[("User", "alice"), ("User", "bob"), ("User", "carol"), ("Group", "alice")];
const ACL_HOSTS: &[&str] = &["*", "10.0.0.1", "10.0.0.2", "0:0:0:0:0:0:0:1", "::1"];
const PEERS: &[&str] = &["10.0.0.1", "10.0.0.2", "::1", "::ffff:10.0.0.1"];
const TYPES: &[Rt] = &[Rt::Topic, Rt::Group, Rt::TransactionalId];
const ACL_OPS: &[Op] = &[
    Op::All,
    Op::Read,
    Op::Write,
    Op::Create,
    Op::Delete,
    Op::Alter,
    Op::Describe,
    Op::ClusterAction,
    Op::DescribeConfigs,
    Op::AlterConfigs,
    Op::IdempotentWrite,
];
const QUERY_OPS: &[Op] = &[
    Op::Read,
    Op::Write,
    Op::Create,
    Op::Delete,
    Op::Alter,
    Op::Describe,
    Op::DescribeConfigs,
    Op::AlterConfigs,
    Op::IdempotentWrite,
];

/// An ACL as plain values: type, name, literal?, principal, host, op, allow?
type M = (Rt, &'static str, bool, &'static str, &'static str, Op, bool);

fn pick<T: Copy + std::fmt::Debug + 'static>(items: &'static [T]) -> impl Strategy<Value = T> {
    proptest::sample::select(items)
}

fn model_acl() -> impl Strategy<Value = M> {
    (
        pick(TYPES),
        pick(ACL_NAMES),
        any::<bool>(),
        pick(ACL_PRINCIPALS),
        pick(ACL_HOSTS),
        pick(ACL_OPS),
        any::<bool>(),
    )
}

fn to_binding(m: &M) -> AclBinding {
    let (rt, name, literal, principal, host, op, allow) = *m;
    let pt = if literal { Pt::Literal } else { Pt::Prefixed };
    let perm = if allow { Perm::Allow } else { Perm::Deny };
    AclBinding::new(rt, name, pt, principal, host, op, perm).expect("valid by construction")
}

/// How Java prints the peers of `PEERS`.
fn java_text(peer: &str) -> &'static str {
    match peer {
        "::1" => "0:0:0:0:0:0:0:1",
        "::ffff:10.0.0.1" => "10.0.0.1",
        "10.0.0.1" => "10.0.0.1",
        _ => "10.0.0.2",
    }
}

#[derive(Debug, Clone, Copy)]
struct Query {
    who: (&'static str, &'static str),
    peer: &'static str,
    op: Op,
    rt: Rt,
    name: &'static str,
}

fn oracle_matches_request(m: &M, q: &Query) -> bool {
    let who = format!("{}:{}", q.who.0, q.who.1);
    (m.3 == who || m.3 == "User:*") && (m.4 == "*" || m.4 == java_text(q.peer))
}

fn oracle_authorize(acls: &[M], supers: &[&str], open: bool, q: &Query) -> bool {
    if supers.contains(&format!("{}:{}", q.who.0, q.who.1).as_str()) {
        return true;
    }
    let mut applicable = 0;
    let mut allow = false;
    let mut deny = false;
    for m in acls {
        let name_applies = if m.2 { m.1 == q.name || m.1 == "*" } else { q.name.starts_with(m.1) };
        if m.0 != q.rt || !name_applies {
            continue;
        }
        applicable += 1;
        if !oracle_matches_request(m, q) {
            continue;
        }
        let implied = m.6
            && ((q.op == Op::Describe
                && [Op::Read, Op::Write, Op::Delete, Op::Alter].contains(&m.5))
                || (q.op == Op::DescribeConfigs && m.5 == Op::AlterConfigs));
        if m.5 == Op::All || m.5 == q.op || implied {
            if m.6 {
                allow = true;
            } else {
                deny = true;
            }
        }
    }
    !deny && (allow || (applicable == 0 && open))
}

fn oracle_by_type(acls: &[M], supers: &[&str], open: bool, q: &Query) -> bool {
    let probe = Query { name: "hardcode", ..*q };
    if oracle_authorize(acls, supers, open, &probe) {
        return true;
    }
    let live: Vec<&M> = acls
        .iter()
        .filter(|m| m.0 == q.rt && oracle_matches_request(m, q) && (m.5 == q.op || m.5 == Op::All))
        .collect();
    if live.iter().any(|m| !m.6 && m.2 && m.1 == "*") {
        return false;
    }
    if live.iter().any(|m| m.6 && m.2 && m.1 == "*") {
        return true;
    }
    live.iter().filter(|a| a.6).any(|a| {
        !live
            .iter()
            .filter(|d| !d.6)
            .any(|d| (a.2 && d.2 && d.1 == a.1) || (!d.2 && a.1.starts_with(d.1)))
    })
}

/// A DeleteAcls filter as plain values: type, name, pattern type, principal.
type F = (Rt, Option<&'static str>, Pt, Option<&'static str>);

fn model_filter() -> impl Strategy<Value = F> {
    (
        pick(&[Rt::Any, Rt::Topic, Rt::Group]),
        proptest::option::of(pick(QUERY_NAMES)),
        pick(&[Pt::Any, Pt::Match, Pt::Literal, Pt::Prefixed]),
        proptest::option::of(pick(ACL_PRINCIPALS)),
    )
}

fn oracle_filter(f: &F, m: &M) -> bool {
    let (rt, name, pt, principal) = *f;
    let m_pt = if m.2 { Pt::Literal } else { Pt::Prefixed };
    let type_ok = rt == Rt::Any || rt == m.0;
    let pattern_ok = match (pt, name) {
        (Pt::Any, None) | (Pt::Match, None) => true,
        (Pt::Any, Some(n)) => n == m.1,
        (Pt::Match, Some(n)) => {
            if m.2 {
                n == m.1 || m.1 == "*"
            } else {
                n.starts_with(m.1)
            }
        }
        (p, n) => p == m_pt && n.is_none_or(|n| n == m.1),
    };
    type_ok && pattern_ok && principal.is_none_or(|p| p == m.3)
}

fn to_filter(f: &F) -> AclBindingFilter {
    let mut entry = AccessControlEntryFilter::any();
    entry.principal = f.3.map(String::from);
    AclBindingFilter {
        pattern: ResourcePatternFilter {
            resource_type: f.0,
            name: f.1.map(String::from),
            pattern_type: f.2,
        },
        entry,
    }
}

fn query() -> impl Strategy<Value = Query> {
    (pick(REQUESTERS), pick(PEERS), pick(QUERY_OPS), pick(TYPES), pick(QUERY_NAMES))
        .prop_map(|(who, peer, op, rt, name)| Query { who, peer, op, rt, name })
}

fn requester(q: &Query) -> Requester {
    let principal = KafkaPrincipal { principal_type: q.who.0.into(), name: q.who.1.into() };
    Requester::new(principal, q.peer.parse::<IpAddr>().expect("peer"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn index_agrees_with_linear_scan(
        added in proptest::collection::vec(model_acl(), 0..24),
        removed in proptest::collection::vec(any::<proptest::sample::Index>(), 0..6),
        delete in proptest::option::of(model_filter()),
        supers in proptest::sample::subsequence(vec!["User:bob", "Group:alice"], 0..=2),
        open in any::<bool>(),
        queries in proptest::collection::vec(query(), 40),
    ) {
        let mut cache = AclCache::new();
        let mut model: Vec<M> = Vec::new();
        for m in &added {
            let fresh = !model.contains(m);
            prop_assert_eq!(cache.add(to_binding(m)), fresh);
            if fresh {
                model.push(*m);
            }
        }
        for index in &removed {
            if model.is_empty() {
                break;
            }
            let m = model.remove(index.index(model.len()));
            prop_assert!(cache.remove(&to_binding(&m)));
        }
        if let Some(f) = &delete {
            let deleted = cache.delete(&[to_filter(f)]).remove(0).expect("known filter");
            let expected: Vec<M> = model.iter().copied().filter(|m| oracle_filter(f, m)).collect();
            prop_assert_eq!(deleted.len(), expected.len());
            for m in &expected {
                prop_assert!(deleted.contains(&to_binding(m)));
            }
            model.retain(|m| !oracle_filter(f, m));
        }
        prop_assert_eq!(cache.len(), model.len());
        let authorizer = StandardAuthorizer::new(parse_super_users(&supers.join(";")).unwrap(), open);
        authorizer.set_acls(Arc::new(cache));
        for q in &queries {
            let r = requester(q);
            let got = authorizer.authorize(&r, q.op, q.rt, q.name) == AuthorizationResult::Allowed;
            prop_assert_eq!(got, oracle_authorize(&model, &supers, open, q),
                "authorize {:?} {} from {} on {:?}:{} over {:?}", q.who, q.op, q.peer, q.rt, q.name, model);
            let got = authorizer.authorize_by_resource_type(&r, q.op, q.rt) == AuthorizationResult::Allowed;
            prop_assert_eq!(got, oracle_by_type(&model, &supers, open, q),
                "by type {:?} {} from {} {:?} over {:?}", q.who, q.op, q.peer, q.rt, model);
        }
    }
}

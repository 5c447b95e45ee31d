//! Kafka's `StandardAuthorizer`: whether a principal connected from a host
//! may perform an operation on a resource, by the ACLs in an [`AclCache`].
//!
//! The rules, as `StandardAuthorizerData.authorize`/`findResult` and
//! `Authorizer.authorizeByResourceType` apply them in Kafka 4.1.2:
//! 1. A principal whose `Type:name` text is in `super.users` is allowed
//!    everything, before any ACL is looked at.
//! 2. An ACL applies to the resource when its type is the resource's and its
//!    pattern is LITERAL with the resource's name, LITERAL `*`, or PREFIXED
//!    with a prefix of the name (the whole name included).
//! 3. An applicable ACL matches the request when its principal is the
//!    request's (type and name) or `User:*` (whatever the request's type:
//!    Kafka always adds `User:*` to the matching principals), its host is
//!    `*` or the client's address in Java's text form
//!    ([`java_host_address`]), and its operation
//!    is ALL or the requested one, where an **ALLOW** for READ, WRITE,
//!    DELETE or ALTER also matches DESCRIBE and an ALLOW for ALTER_CONFIGS
//!    also matches DESCRIBE_CONFIGS. A DENY matches only its own operation
//!    (or ALL): a DENY READ does not deny DESCRIBE.
//! 4. Any matching DENY: denied. Else any matching ALLOW: allowed. Else, if
//!    no ACL applies to the resource at all (whatever its principal, host or
//!    operation), `allow.everyone.if.no.acl.found` decides; otherwise denied.
//!
//! [`StandardAuthorizer::authorize_by_resource_type`] is rule 5, Kafka's
//! `authorizeByResourceType` (the idempotent producer's WRITE-on-any-topic
//! fallback): allowed if a check of the made-up literal name `hardcode` is
//! allowed (super users and the no-ACL default); else, over the matching
//! ACLs of the type (principal and host as in rule 3, operation equal or
//! ALL, **no** implied operations): a LITERAL `*` DENY denies; a LITERAL `*`
//! ALLOW allows; an ALLOW of another name allows unless it is dominated: a
//! LITERAL ALLOW by a LITERAL DENY of the same name, any ALLOW by a PREFIXED
//! DENY whose name is a prefix of the ALLOW's name (the whole name
//! included). Nothing left: denied.
//!
//! Invariants:
//! * An [`AclCache`] is an immutable value once installed: writers build a
//!   new one from a clone and swap the `Arc` ([`StandardAuthorizer::set_acls`]),
//!   so a check sees one consistent set and never waits for a writer beyond
//!   the swap. The ACL store (one writer at a time) does the read, the
//!   durable write and the swap in that order.
//! * A check does not scan every ACL: it looks only at the entries
//!   [`AclCache::applicable`] finds through the cache's index (Kafka walks an
//!   ordered set instead; the result is the same, which the property test in
//!   `tests/security_acl_model.rs` checks against a linear scan). Only rule
//!   5 reads every ACL of one type, as Kafka's does.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::RwLock;

pub use super::acl_cache::AclCache;

use super::acl::{
    parse_principal, AccessControlEntry, AclError, AclOperation, AclPermissionType, PatternType,
    ResourceType, WILDCARD_RESOURCE,
};
use super::{KafkaPrincipal, Session};

/// The literal name `authorizeByResourceType` checks first.
const BY_TYPE_PROBE_NAME: &str = "hardcode";

/// Kafka's `AuthorizationResult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthorizationResult {
    Allowed,
    Denied,
}

/// Who asks: the principal and the client address in Java's text form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    pub principal: KafkaPrincipal,
    pub host: String,
}

impl Requester {
    pub fn new(principal: KafkaPrincipal, peer: IpAddr) -> Self {
        Self { principal, host: java_host_address(peer) }
    }

    pub fn from_session(session: &Session) -> Self {
        Self::new(session.principal.clone(), session.peer)
    }
}

/// The address as Java's `InetAddress.getHostAddress()` writes it, which is
/// what Kafka compares an ACL's host with: IPv4 dotted; an IPv4-mapped IPv6
/// address as IPv4 (Java makes it an `Inet4Address`); other IPv6 as eight
/// lower-case hex groups without leading zeros and without `::`
/// compression (`0:0:0:0:0:0:0:1`).
pub fn java_host_address(peer: IpAddr) -> String {
    match peer {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.segments().iter().map(|s| format!("{s:x}")).collect::<Vec<_>>().join(":"),
        },
    }
}

/// `super.users` as Kafka's `StandardAuthorizer.getConfiguredSuperUsers`
/// reads it: split at `;`, each trimmed, empty ones skipped, each a
/// `Type:name` principal kept as its text.
///
/// # Errors
/// [`AclError::InvalidPrincipal`] for an entry without a colon.
pub fn parse_super_users(value: &str) -> Result<HashSet<String>, AclError> {
    let mut users = HashSet::new();
    for user in value.split(';').map(str::trim).filter(|u| !u.is_empty()) {
        parse_principal(user)?;
        users.insert(user.to_string());
    }
    Ok(users)
}

/// Rules 2-4 for a non-super user.
fn check(
    acls: &AclCache,
    requester: &Requester,
    operation: AclOperation,
    resource_type: ResourceType,
    name: &str,
    default_result: AuthorizationResult,
) -> AuthorizationResult {
    let mut any_applicable = false;
    let mut allowed = false;
    for entry in acls.applicable(resource_type, name) {
        any_applicable = true;
        match entry_result(entry, requester, operation) {
            Some(AuthorizationResult::Denied) => return AuthorizationResult::Denied,
            Some(AuthorizationResult::Allowed) => allowed = true,
            None => {}
        }
    }
    if allowed {
        AuthorizationResult::Allowed
    } else if any_applicable {
        AuthorizationResult::Denied
    } else {
        default_result
    }
}

/// Rule 3 for one applicable entry: `None` if it does not match the request.
fn entry_result(
    entry: &AccessControlEntry,
    requester: &Requester,
    operation: AclOperation,
) -> Option<AuthorizationResult> {
    if !entry.matches_principal(&requester.principal) || !entry.matches_host(&requester.host) {
        return None;
    }
    let allow = entry.permission_type() == AclPermissionType::Allow;
    let acl_op = entry.operation();
    let op_matches =
        acl_op == AclOperation::All || acl_op == operation || (allow && implies(acl_op, operation));
    if !op_matches {
        return None;
    }
    Some(if allow { AuthorizationResult::Allowed } else { AuthorizationResult::Denied })
}

/// Whether an ALLOW for `granted` also allows `requested`.
fn implies(granted: AclOperation, requested: AclOperation) -> bool {
    use AclOperation::{Alter, AlterConfigs, Delete, Describe, DescribeConfigs, Read, Write};
    match requested {
        Describe => matches!(granted, Read | Write | Delete | Alter),
        DescribeConfigs => granted == AlterConfigs,
        _ => false,
    }
}

/// Kafka's `StandardAuthorizer` over one node's ACLs.
#[derive(Debug)]
pub struct StandardAuthorizer {
    super_users: HashSet<String>,
    /// `allow.everyone.if.no.acl.found`.
    default_result: AuthorizationResult,
    acls: RwLock<Arc<AclCache>>,
}

impl StandardAuthorizer {
    pub fn new(super_users: HashSet<String>, allow_everyone_if_no_acl_found: bool) -> Self {
        let default_result = if allow_everyone_if_no_acl_found {
            AuthorizationResult::Allowed
        } else {
            AuthorizationResult::Denied
        };
        Self { super_users, default_result, acls: RwLock::new(Arc::new(AclCache::new())) }
    }

    /// The current ACLs.
    pub fn acls(&self) -> Arc<AclCache> {
        self.acls.read().clone()
    }

    /// Install a new set of ACLs; checks already running finish on the old one.
    pub fn set_acls(&self, acls: Arc<AclCache>) {
        *self.acls.write() = acls;
    }

    pub fn is_super_user(&self, principal: &KafkaPrincipal) -> bool {
        !self.super_users.is_empty() && self.super_users.contains(&principal.to_string())
    }

    /// Rules 1-4: may `requester` perform `operation` on the resource
    /// `resource_type`/`name` (a literal name, as every request names it)?
    pub fn authorize(
        &self,
        requester: &Requester,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> AuthorizationResult {
        if self.is_super_user(&requester.principal) {
            return AuthorizationResult::Allowed;
        }
        let acls = self.acls();
        check(&acls, requester, operation, resource_type, name, self.default_result)
    }

    /// Rule 5, Kafka's `authorizeByResourceType`. UNKNOWN or ANY as the
    /// operation or type (Kafka throws for them; no caller passes them) is
    /// denied.
    pub fn authorize_by_resource_type(
        &self,
        requester: &Requester,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> AuthorizationResult {
        use AuthorizationResult::{Allowed, Denied};
        if matches!(operation, AclOperation::Any | AclOperation::Unknown)
            || matches!(resource_type, ResourceType::Any | ResourceType::Unknown)
        {
            return Denied;
        }
        if self.authorize(requester, operation, resource_type, BY_TYPE_PROBE_NAME) == Allowed {
            return Allowed;
        }
        let acls = self.acls();
        let mut deny_literal = HashSet::new();
        let mut deny_prefixed = HashSet::new();
        let mut allows = Vec::new();
        let mut wildcard_allow = false;
        for (pattern_type, name, entry) in acls.of_type(resource_type) {
            if !entry.matches_host(&requester.host)
                || !entry.matches_principal(&requester.principal)
                || (entry.operation() != operation && entry.operation() != AclOperation::All)
            {
                continue;
            }
            let literal = pattern_type == PatternType::Literal;
            match entry.permission_type() {
                AclPermissionType::Deny if literal && name == WILDCARD_RESOURCE => return Denied,
                AclPermissionType::Deny if literal => {
                    deny_literal.insert(name);
                }
                AclPermissionType::Deny => {
                    deny_prefixed.insert(name);
                }
                _ if literal && name == WILDCARD_RESOURCE => wildcard_allow = true,
                _ => allows.push((literal, name)),
            }
        }
        if wildcard_allow {
            return Allowed;
        }
        let dominated = |literal: bool, name: &str| {
            (literal && deny_literal.contains(name))
                || name
                    .char_indices()
                    .map(|(i, c)| &name[..i + c.len_utf8()])
                    .any(|prefix| deny_prefixed.contains(prefix))
        };
        if allows.iter().any(|(literal, name)| !dominated(*literal, name)) {
            Allowed
        } else {
            Denied
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::AclBinding;
    use AclOperation as Op;
    use AclPermissionType as Perm;
    use AuthorizationResult::{Allowed, Denied};
    use PatternType as Pt;
    use ResourceType as Rt;

    fn acl(rt: Rt, name: &str, pt: Pt, who: &str, host: &str, op: Op, perm: Perm) -> AclBinding {
        AclBinding::new(rt, name, pt, who, host, op, perm).unwrap()
    }

    fn topic(name: &str, pt: Pt, who: &str, op: Op, perm: Perm) -> AclBinding {
        acl(Rt::Topic, name, pt, who, "*", op, perm)
    }

    fn authorizer(
        acls: &[AclBinding],
        super_users: &str,
        allow_if_none: bool,
    ) -> StandardAuthorizer {
        let a = StandardAuthorizer::new(parse_super_users(super_users).unwrap(), allow_if_none);
        let mut cache = AclCache::new();
        for b in acls {
            cache.add(b.clone());
        }
        a.set_acls(Arc::new(cache));
        a
    }

    fn user(name: &str) -> Requester {
        Requester::new(parse_principal(&format!("User:{name}")).unwrap(), [10, 0, 0, 1].into())
    }

    fn can(a: &StandardAuthorizer, who: &Requester, op: Op, name: &str) -> bool {
        a.authorize(who, op, Rt::Topic, name) == Allowed
    }

    #[test]
    fn literal_prefixed_and_wildcard_patterns() {
        let a = authorizer(
            &[
                topic("orders", Pt::Literal, "User:alice", Op::Write, Perm::Allow),
                topic("logs-", Pt::Prefixed, "User:alice", Op::Write, Perm::Allow),
                topic("*", Pt::Prefixed, "User:alice", Op::Read, Perm::Allow),
                topic("*", Pt::Literal, "User:bob", Op::Read, Perm::Allow),
            ],
            "",
            false,
        );
        let alice = user("alice");
        assert!(can(&a, &alice, Op::Write, "orders"));
        assert!(!can(&a, &alice, Op::Write, "orders2"), "a literal is not a prefix");
        assert!(!can(&a, &alice, Op::Write, "order"));
        assert!(can(&a, &alice, Op::Write, "logs-eu"));
        assert!(can(&a, &alice, Op::Write, "logs-"), "a prefix includes the whole name");
        assert!(!can(&a, &alice, Op::Write, "logs"));
        assert!(!can(&a, &alice, Op::Read, "orders"), "PREFIXED * is not a wildcard");
        assert!(can(&a, &alice, Op::Read, "*star"));
        let bob = user("bob");
        assert!(can(&a, &bob, Op::Read, "anything") && can(&a, &bob, Op::Read, "orders"));
        assert!(!can(&a, &bob, Op::Write, "anything"));
        assert_eq!(a.authorize(&bob, Op::Read, Rt::Group, "orders"), Denied, "types are separate");
    }

    #[test]
    fn principals_match_by_type_and_name_or_user_wildcard() {
        let a = authorizer(
            &[
                topic("t", Pt::Literal, "User:*", Op::Read, Perm::Allow),
                topic("u", Pt::Literal, "Group:*", Op::Read, Perm::Allow),
                topic("v", Pt::Literal, "User:Alice", Op::Read, Perm::Allow),
            ],
            "",
            false,
        );
        let alice = user("alice");
        assert!(can(&a, &alice, Op::Read, "t"));
        let other_type = Requester::new(parse_principal("Svc:x").unwrap(), [10, 0, 0, 1].into());
        assert!(can(&a, &other_type, Op::Read, "t"), "User:* matches every principal type");
        assert!(!can(&a, &alice, Op::Read, "u"), "Group:* is no wildcard");
        assert!(!can(&a, &alice, Op::Read, "v"), "names are case-sensitive");
        assert!(can(&a, &user("Alice"), Op::Read, "v"));
    }

    #[test]
    fn hosts_are_compared_in_javas_text_form() {
        assert_eq!(java_host_address("::1".parse().unwrap()), "0:0:0:0:0:0:0:1");
        assert_eq!(java_host_address("fe80::AB:1".parse().unwrap()), "fe80:0:0:0:0:0:ab:1");
        assert_eq!(java_host_address("::ffff:10.1.2.3".parse().unwrap()), "10.1.2.3");
        assert_eq!(java_host_address("10.1.2.3".parse().unwrap()), "10.1.2.3");
        let a = authorizer(
            &[
                acl(Rt::Topic, "t", Pt::Literal, "User:a", "10.0.0.1", Op::Read, Perm::Allow),
                acl(Rt::Topic, "u", Pt::Literal, "User:a", "::1", Op::Read, Perm::Allow),
                acl(
                    Rt::Topic,
                    "u",
                    Pt::Literal,
                    "User:a",
                    "0:0:0:0:0:0:0:1",
                    Op::Write,
                    Perm::Allow,
                ),
            ],
            "",
            false,
        );
        let at = |ip: &str| Requester::new(parse_principal("User:a").unwrap(), ip.parse().unwrap());
        assert!(can(&a, &at("10.0.0.1"), Op::Read, "t"));
        assert!(can(&a, &at("::ffff:10.0.0.1"), Op::Read, "t"));
        assert!(!can(&a, &at("10.0.0.2"), Op::Read, "t"));
        assert!(!can(&a, &at("::1"), Op::Read, "u"), "Kafka never writes ::1");
        assert!(can(&a, &at("::1"), Op::Write, "u"));
    }

    #[test]
    fn deny_beats_allow_from_any_pattern() {
        let a = authorizer(
            &[
                topic("orders", Pt::Literal, "User:alice", Op::All, Perm::Allow),
                topic("ord", Pt::Prefixed, "User:alice", Op::Write, Perm::Deny),
                topic("*", Pt::Literal, "User:*", Op::Delete, Perm::Deny),
                acl(
                    Rt::Topic,
                    "orders",
                    Pt::Literal,
                    "User:alice",
                    "10.0.0.9",
                    Op::Read,
                    Perm::Deny,
                ),
            ],
            "",
            false,
        );
        let alice = user("alice");
        assert!(!can(&a, &alice, Op::Write, "orders"), "prefixed DENY over literal ALLOW");
        assert!(!can(&a, &alice, Op::Delete, "orders"), "wildcard DENY over literal ALLOW");
        assert!(can(&a, &alice, Op::Read, "orders"), "a DENY for another host does not apply");
        assert!(can(&a, &alice, Op::Alter, "orders"));
    }

    #[test]
    fn implied_operations_only_from_allow() {
        let a = authorizer(
            &[
                topic("r", Pt::Literal, "User:a", Op::Read, Perm::Allow),
                topic("r", Pt::Literal, "User:a", Op::Read, Perm::Deny),
                topic("w", Pt::Literal, "User:a", Op::Write, Perm::Allow),
                topic("d", Pt::Literal, "User:a", Op::Delete, Perm::Allow),
                topic("al", Pt::Literal, "User:a", Op::Alter, Perm::Allow),
                topic("c", Pt::Literal, "User:a", Op::Create, Perm::Allow),
                topic("ac", Pt::Literal, "User:a", Op::AlterConfigs, Perm::Allow),
                topic("ds", Pt::Literal, "User:a", Op::Describe, Perm::Allow),
                topic("all", Pt::Literal, "User:a", Op::All, Perm::Allow),
                topic("x", Pt::Literal, "User:a", Op::All, Perm::Allow),
                topic("x", Pt::Literal, "User:a", Op::Alter, Perm::Deny),
            ],
            "",
            false,
        );
        let u = user("a");
        assert!(!can(&a, &u, Op::Read, "r"));
        assert!(can(&a, &u, Op::Describe, "r"), "DENY READ does not deny DESCRIBE");
        for name in ["w", "d", "al"] {
            assert!(can(&a, &u, Op::Describe, name), "{name} implies DESCRIBE");
        }
        assert!(!can(&a, &u, Op::Describe, "c"), "CREATE does not imply DESCRIBE");
        assert!(!can(&a, &u, Op::DescribeConfigs, "w"));
        assert!(can(&a, &u, Op::DescribeConfigs, "ac"));
        assert!(!can(&a, &u, Op::Describe, "ac"));
        assert!(!can(&a, &u, Op::Read, "ds"), "DESCRIBE implies nothing");
        for op in [Op::Read, Op::Write, Op::IdempotentWrite, Op::TwoPhaseCommit] {
            assert!(can(&a, &u, op, "all"));
        }
        assert!(!can(&a, &u, Op::Alter, "x"));
        assert!(can(&a, &u, Op::Describe, "x"), "DENY ALTER does not deny DESCRIBE");
        let deny_all = authorizer(
            &[
                topic("t", Pt::Literal, "User:a", Op::Read, Perm::Allow),
                topic("t", Pt::Literal, "User:a", Op::All, Perm::Deny),
            ],
            "",
            true,
        );
        assert!(!can(&deny_all, &u, Op::Describe, "t"), "DENY ALL denies every operation");
    }

    #[test]
    fn super_users_before_any_acl() {
        assert_eq!(
            parse_super_users(" User:admin ;; User:CN=x,O=y ;").unwrap(),
            HashSet::from(["User:admin".to_string(), "User:CN=x,O=y".to_string()])
        );
        assert!(parse_super_users("User:a;admin").is_err());
        let a = authorizer(
            &[topic("*", Pt::Literal, "User:*", Op::All, Perm::Deny)],
            "User:admin;User:CN=x,O=y",
            false,
        );
        assert!(can(&a, &user("admin"), Op::Delete, "t"));
        assert!(can(&a, &user("CN=x,O=y"), Op::Write, "t"));
        assert!(!can(&a, &user("Admin"), Op::Write, "t"));
        let a = Requester::new(parse_principal("Svc:admin").unwrap(), [1, 2, 3, 4].into());
        assert!(!authorizer(&[], "User:admin", false).is_super_user(&a.principal));
    }

    #[test]
    fn default_applies_only_when_no_acl_applies_to_the_resource() {
        let acls = [
            topic("owned", Pt::Literal, "User:bob", Op::Read, Perm::Allow),
            topic("pre-", Pt::Prefixed, "User:bob", Op::Read, Perm::Allow),
            acl(Rt::Group, "free", Pt::Literal, "User:bob", "*", Op::Read, Perm::Allow),
        ];
        let open = authorizer(&acls, "", true);
        let alice = user("alice");
        assert!(can(&open, &alice, Op::Write, "free"), "no topic ACL on it");
        assert!(!can(&open, &alice, Op::Read, "owned"), "bob's ACL makes the resource governed");
        assert!(!can(&open, &alice, Op::Write, "pre-x"));
        assert!(can(&open, &alice, Op::Write, "pre"));
        let closed = authorizer(&acls, "", false);
        assert!(!can(&closed, &alice, Op::Write, "free"));
        assert!(can(&closed, &user("bob"), Op::Describe, "owned"));
        assert_eq!(
            authorizer(&[], "", true).authorize(&alice, Op::Alter, Rt::Cluster, "kafka-cluster"),
            Allowed
        );
    }

    #[test]
    fn by_resource_type_follows_kafkas_dominance_rules() {
        let by_type = |acls: &[AclBinding], who: &str| {
            authorizer(acls, "User:admin", false).authorize_by_resource_type(
                &user(who),
                Op::Write,
                Rt::Topic,
            )
        };
        let w = |name: &str, pt: Pt, perm: Perm| topic(name, pt, "User:a", Op::Write, perm);
        assert_eq!(by_type(&[], "a"), Denied);
        assert_eq!(by_type(&[], "admin"), Allowed, "super user through the probe");
        let open = authorizer(&[], "", true);
        assert_eq!(open.authorize_by_resource_type(&user("a"), Op::Write, Rt::Topic), Allowed);
        assert_eq!(by_type(&[w("hard", Pt::Prefixed, Perm::Allow)], "a"), Allowed);
        assert_eq!(by_type(&[w("orders", Pt::Literal, Perm::Allow)], "a"), Allowed);
        assert_eq!(by_type(&[w("orders", Pt::Literal, Perm::Allow)], "b"), Denied);
        let dominated_literal =
            [w("orders", Pt::Literal, Perm::Allow), w("orders", Pt::Literal, Perm::Deny)];
        assert_eq!(by_type(&dominated_literal, "a"), Denied);
        let by_prefix = [w("orders", Pt::Literal, Perm::Allow), w("ord", Pt::Prefixed, Perm::Deny)];
        assert_eq!(by_type(&by_prefix, "a"), Denied);
        let whole = [w("ord", Pt::Prefixed, Perm::Allow), w("ord", Pt::Prefixed, Perm::Deny)];
        assert_eq!(by_type(&whole, "a"), Denied, "a prefix includes the whole name");
        let narrower = [w("ord", Pt::Prefixed, Perm::Allow), w("orders", Pt::Prefixed, Perm::Deny)];
        assert_eq!(by_type(&narrower, "a"), Allowed, "a narrower DENY does not dominate");
        let lit_vs_pre = [w("ord", Pt::Prefixed, Perm::Allow), w("ord", Pt::Literal, Perm::Deny)];
        assert_eq!(by_type(&lit_vs_pre, "a"), Allowed);
        let one_free = [
            w("a", Pt::Literal, Perm::Allow),
            w("a", Pt::Literal, Perm::Deny),
            w("b", Pt::Literal, Perm::Allow),
        ];
        assert_eq!(by_type(&one_free, "a"), Allowed);
        let wild = [w("*", Pt::Literal, Perm::Allow), w("*", Pt::Literal, Perm::Deny)];
        assert_eq!(by_type(&wild, "a"), Denied, "a wildcard DENY wins");
        let wild_allow = [w("*", Pt::Literal, Perm::Allow), w("x", Pt::Prefixed, Perm::Deny)];
        assert_eq!(by_type(&wild_allow, "a"), Allowed);
        let all = [topic("t", Pt::Literal, "User:*", Op::All, Perm::Allow)];
        assert_eq!(by_type(&all, "a"), Allowed, "ALL and User:* count");
        let implied = [topic("t", Pt::Literal, "User:a", Op::Write, Perm::Allow)];
        let a = authorizer(&implied, "", false);
        assert_eq!(a.authorize(&user("a"), Op::Describe, Rt::Topic, "t"), Allowed);
        assert_eq!(
            a.authorize_by_resource_type(&user("a"), Op::Describe, Rt::Topic),
            Denied,
            "no implied operations by type"
        );
        let host = [acl(Rt::Topic, "t", Pt::Literal, "User:a", "10.9.9.9", Op::Write, Perm::Allow)];
        assert_eq!(by_type(&host, "a"), Denied);
        let open = authorizer(&[], "", true);
        assert_eq!(open.authorize_by_resource_type(&user("a"), Op::Any, Rt::Topic), Denied);
        assert_eq!(open.authorize_by_resource_type(&user("a"), Op::Write, Rt::Any), Denied);
    }

    #[test]
    fn installed_sets_are_swapped_whole() {
        let a = authorizer(&[topic("t", Pt::Literal, "User:a", Op::Read, Perm::Allow)], "", false);
        let before = a.acls();
        let mut next = (*before).clone();
        next.remove(&topic("t", Pt::Literal, "User:a", Op::Read, Perm::Allow));
        assert!(can(&a, &user("a"), Op::Read, "t"), "a clone being changed is not installed");
        a.set_acls(Arc::new(next));
        assert!(!can(&a, &user("a"), Op::Read, "t"));
        assert_eq!(before.len(), 1, "a snapshot taken before stays whole");
    }
}

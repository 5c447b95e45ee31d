//! ACLs as Kafka names them: the enums with their wire codes, the
//! [`AclBinding`] (a [`ResourcePattern`] and an [`AccessControlEntry`]) and
//! the filters DescribeAcls and DeleteAcls select bindings with.
//!
//! Invariants:
//! * Every [`AclBinding`] is one Kafka's CreateAcls would store: it is only
//!   built by [`AclBinding::new`], which applies `AclControlManager.validateNewAcl`
//!   (a specific resource type, LITERAL or PREFIXED, an operation other than
//!   UNKNOWN/ANY, ALLOW or DENY, a non-empty name) and the checks of Kafka's
//!   `AclApis.handleCreateAcls` (the CLUSTER resource is named
//!   `kafka-cluster`). One addition: the principal must parse as `Type:name`
//!   (`SecurityUtils.parseKafkaPrincipal`). Kafka stores a principal without a
//!   colon and then fails every later check that meets it
//!   (`StandardAcl.kafkaPrincipal`); refusing it up front is the only safe
//!   choice here.
//! * Names and hosts are compared as exact strings, case-sensitively, as
//!   Kafka does. A LITERAL `*` is the wildcard resource; a PREFIXED `*` is
//!   not a wildcard (it matches names that start with `*`). `User:*` is the
//!   wildcard principal and `*` the wildcard host.
//! * Filters match exactly as Kafka's `ResourcePatternFilter.matches`,
//!   `AccessControlEntryFilter.matches` and `AclBindingFilter.matches`:
//!   a filter pattern type ANY with a name selects bindings of that exact
//!   name whatever their pattern type; MATCH with a name selects the LITERAL
//!   binding of that name, the LITERAL wildcard and every PREFIXED binding
//!   the name starts with; LITERAL or PREFIXED select that pattern type and
//!   name exactly (so a LITERAL `*` filter selects only the wildcard
//!   binding); a null name, principal or host selects any.

use std::fmt;

use thiserror::Error;

use super::KafkaPrincipal;

/// The literal resource name that matches every resource of its type.
pub const WILDCARD_RESOURCE: &str = "*";
/// The principal that matches every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The host that matches every host.
pub const WILDCARD_HOST: &str = "*";
/// The only name of the CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// Why a binding or filter is refused; each is Kafka's INVALID_REQUEST.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AclError {
    #[error("Invalid resourceType {0}")]
    InvalidResourceType(ResourceType),
    #[error("Invalid patternType {0}")]
    InvalidPatternType(PatternType),
    #[error("Invalid operation {0}")]
    InvalidOperation(AclOperation),
    #[error("Invalid permissionType {0}")]
    InvalidPermissionType(AclPermissionType),
    #[error("Resource name should not be empty")]
    EmptyResourceName,
    #[error("The only valid name for the CLUSTER resource is kafka-cluster")]
    InvalidClusterName,
    #[error("expected a string in format principalType:principalName but got {0}")]
    InvalidPrincipal(String),
    #[error("Unknown patternFilter.")]
    UnknownPatternFilter,
    #[error("Unknown entryFilter.")]
    UnknownEntryFilter,
}

/// Declares a Kafka enum with its byte codes and names: `from_code` maps a
/// code Kafka does not know to UNKNOWN (Kafka's `fromCode`), `from_name`
/// compares case-insensitively and also yields UNKNOWN (Kafka's `fromString`
/// for these enums).
macro_rules! kafka_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($variant,)*
        }

        impl $name {
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant,)*];

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            /// The value of a wire code; UNKNOWN for a code Kafka does not have.
            pub fn from_code(code: i8) -> Self {
                match code {
                    $($code => $name::$variant,)*
                    _ => $name::Unknown,
                }
            }

            /// Kafka's name of the value.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// The value of a name, compared case-insensitively; UNKNOWN if none.
            pub fn from_name(name: &str) -> Self {
                Self::ALL_VALUES
                    .iter()
                    .copied()
                    .find(|v| v.name().eq_ignore_ascii_case(name))
                    .unwrap_or($name::Unknown)
            }

            /// UNKNOWN: a code or name this broker does not know.
            pub fn is_unknown(self) -> bool {
                self == $name::Unknown
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum!(
    /// Kafka's `AclOperation`. UNKNOWN and ANY occur only in filters.
    AclOperation {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
        TwoPhaseCommit = 15, "TWO_PHASE_COMMIT";
    }
);

kafka_enum!(
    /// Kafka's `AclPermissionType`. UNKNOWN and ANY occur only in filters.
    AclPermissionType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
);

kafka_enum!(
    /// Kafka's `PatternType`. A binding is LITERAL or PREFIXED; ANY and
    /// MATCH occur only in filters.
    PatternType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Match = 2, "MATCH";
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
);

kafka_enum!(
    /// Kafka's `ResourceType`. UNKNOWN and ANY occur only in filters.
    ResourceType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
);

/// Split `Type:name` at the first colon, as Kafka's
/// `SecurityUtils.parseKafkaPrincipal` does (`User:` and `:x` parse).
///
/// # Errors
/// [`AclError::InvalidPrincipal`] for an empty string or one without a colon.
pub fn parse_principal(text: &str) -> Result<KafkaPrincipal, AclError> {
    match text.split_once(':') {
        Some((principal_type, name)) => {
            Ok(KafkaPrincipal { principal_type: principal_type.into(), name: name.into() })
        }
        None => Err(AclError::InvalidPrincipal(text.into())),
    }
}

/// A resource name pattern: LITERAL (the name, or `*` for every name) or
/// PREFIXED (every name that starts with it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourcePattern {
    resource_type: ResourceType,
    name: String,
    pattern_type: PatternType,
}

impl ResourcePattern {
    pub fn resource_type(&self) -> ResourceType {
        self.resource_type
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pattern_type(&self) -> PatternType {
        self.pattern_type
    }

    /// Whether the pattern names the resource `name` of its type.
    pub fn matches_name(&self, name: &str) -> bool {
        match self.pattern_type {
            PatternType::Literal => self.name == name || self.name == WILDCARD_RESOURCE,
            PatternType::Prefixed => name.starts_with(self.name.as_str()),
            _ => false,
        }
    }
}

impl fmt::Display for ResourcePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            self.resource_type, self.name, self.pattern_type
        )
    }
}

/// Who, from where, may or may not do what.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessControlEntry {
    principal: String,
    host: String,
    operation: AclOperation,
    permission_type: AclPermissionType,
}

impl AccessControlEntry {
    /// `Type:name`, or `User:*`.
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// The client address in Java's text form, or `*`.
    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn operation(&self) -> AclOperation {
        self.operation
    }

    pub fn permission_type(&self) -> AclPermissionType {
        self.permission_type
    }

    /// Whether the entry's principal is `principal` or the wildcard: the
    /// parsed type and name compared with the request's, as Kafka's
    /// `StandardAuthorizerData.findResult` compares `KafkaPrincipal`s.
    pub fn matches_principal(&self, principal: &KafkaPrincipal) -> bool {
        if self.principal == WILDCARD_PRINCIPAL {
            return true;
        }
        match self.principal.split_once(':') {
            Some((t, n)) => t == principal.principal_type && n == principal.name,
            None => false,
        }
    }

    /// Whether the entry's host is `host` (Java's text form) or the wildcard.
    pub fn matches_host(&self, host: &str) -> bool {
        self.host == WILDCARD_HOST || self.host == host
    }
}

/// One ACL: a resource pattern and an entry. Built only by [`AclBinding::new`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pattern: ResourcePattern,
    entry: AccessControlEntry,
}

impl AclBinding {
    /// A binding Kafka's CreateAcls would store (see the module invariants).
    ///
    /// # Errors
    /// The first rule the binding breaks, in Kafka's order.
    pub fn new(
        resource_type: ResourceType,
        name: impl Into<String>,
        pattern_type: PatternType,
        principal: impl Into<String>,
        host: impl Into<String>,
        operation: AclOperation,
        permission_type: AclPermissionType,
    ) -> Result<Self, AclError> {
        let name = name.into();
        let principal = principal.into();
        if resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
            return Err(AclError::InvalidClusterName);
        }
        if matches!(resource_type, ResourceType::Unknown | ResourceType::Any) {
            return Err(AclError::InvalidResourceType(resource_type));
        }
        if !matches!(pattern_type, PatternType::Literal | PatternType::Prefixed) {
            return Err(AclError::InvalidPatternType(pattern_type));
        }
        if matches!(operation, AclOperation::Unknown | AclOperation::Any) {
            return Err(AclError::InvalidOperation(operation));
        }
        if !matches!(permission_type, AclPermissionType::Allow | AclPermissionType::Deny) {
            return Err(AclError::InvalidPermissionType(permission_type));
        }
        if name.is_empty() {
            return Err(AclError::EmptyResourceName);
        }
        parse_principal(&principal)?;
        Ok(Self {
            pattern: ResourcePattern { resource_type, name, pattern_type },
            entry: AccessControlEntry { principal, host: host.into(), operation, permission_type },
        })
    }

    pub fn pattern(&self) -> &ResourcePattern {
        &self.pattern
    }

    pub fn entry(&self) -> &AccessControlEntry {
        &self.entry
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = &self.entry;
        write!(
            f,
            "(pattern={}, entry=(principal={}, host={}, operation={}, permissionType={}))",
            self.pattern, e.principal, e.host, e.operation, e.permission_type
        )
    }
}

/// Kafka's `ResourcePatternFilter`: `None` name means any name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePatternFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern_type: PatternType,
}

impl ResourcePatternFilter {
    /// Any resource of any type.
    pub fn any() -> Self {
        Self { resource_type: ResourceType::Any, name: None, pattern_type: PatternType::Any }
    }

    /// A filter with an UNKNOWN field matches nothing useful; DeleteAcls
    /// refuses it (`AclControlManager.validateFilter`).
    pub fn is_unknown(&self) -> bool {
        self.resource_type.is_unknown() || self.pattern_type.is_unknown()
    }

    /// Kafka's `ResourcePatternFilter.matches`.
    pub fn matches(&self, pattern: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != pattern.resource_type {
            return false;
        }
        let any_or_match = matches!(self.pattern_type, PatternType::Any | PatternType::Match);
        if !any_or_match && self.pattern_type != pattern.pattern_type {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == pattern.pattern_type {
            return *name == pattern.name;
        }
        // MATCH: the patterns that would apply to a resource of this name.
        pattern.matches_name(name)
    }

    /// Kafka's `findIndefiniteField`: why the filter may match more than
    /// one pattern, or `None` if it names exactly one.
    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        match (self.resource_type, &self.name, self.pattern_type) {
            (ResourceType::Any, _, _) => Some("Resource type is ANY."),
            (ResourceType::Unknown, _, _) => Some("Resource type is UNKNOWN."),
            (_, None, _) => Some("Resource name is NULL."),
            (_, _, PatternType::Match) => Some("Resource pattern type is MATCH."),
            (_, _, PatternType::Unknown) => Some("Resource pattern type is UNKNOWN."),
            _ => None,
        }
    }
}

/// Kafka's `AccessControlEntryFilter`: `None` principal or host means any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessControlEntryFilter {
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

impl AccessControlEntryFilter {
    /// Any entry.
    pub fn any() -> Self {
        Self {
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission_type: AclPermissionType::Any,
        }
    }

    pub fn is_unknown(&self) -> bool {
        self.operation.is_unknown() || self.permission_type.is_unknown()
    }

    /// Kafka's `AccessControlEntryFilter.matches`: exact strings, no
    /// wildcard expansion (a `User:*` filter selects only `User:*` entries).
    pub fn matches(&self, entry: &AccessControlEntry) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == entry.principal)
            && self.host.as_ref().is_none_or(|h| *h == entry.host)
            && (self.operation == AclOperation::Any || self.operation == entry.operation)
            && (self.permission_type == AclPermissionType::Any
                || self.permission_type == entry.permission_type)
    }

    /// Kafka's `AccessControlEntryData.findIndefiniteField`.
    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        if self.principal.is_none() {
            Some("Principal is NULL")
        } else if self.host.is_none() {
            Some("Host is NULL")
        } else if self.operation == AclOperation::Any {
            Some("Operation is ANY")
        } else if self.operation == AclOperation::Unknown {
            Some("Operation is UNKNOWN")
        } else if self.permission_type == AclPermissionType::Any {
            Some("Permission type is ANY")
        } else if self.permission_type == AclPermissionType::Unknown {
            Some("Permission type is UNKNOWN")
        } else {
            None
        }
    }
}

/// Kafka's `AclBindingFilter`, one DescribeAcls request or one DeleteAcls filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    pub pattern: ResourcePatternFilter,
    pub entry: AccessControlEntryFilter,
}

impl AclBindingFilter {
    /// Every binding.
    pub fn any() -> Self {
        Self { pattern: ResourcePatternFilter::any(), entry: AccessControlEntryFilter::any() }
    }

    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.pattern.matches(&binding.pattern) && self.entry.matches(&binding.entry)
    }

    /// `AclControlManager.validateFilter`: a DeleteAcls filter with an
    /// UNKNOWN field is refused.
    ///
    /// # Errors
    /// [`AclError::UnknownPatternFilter`] or [`AclError::UnknownEntryFilter`].
    pub fn validate(&self) -> Result<(), AclError> {
        if self.pattern.is_unknown() {
            return Err(AclError::UnknownPatternFilter);
        }
        if self.entry.is_unknown() {
            return Err(AclError::UnknownEntryFilter);
        }
        Ok(())
    }

    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        self.pattern.find_indefinite_field().or_else(|| self.entry.find_indefinite_field())
    }

    /// Whether the filter can select at most one binding.
    pub fn matches_at_most_one(&self) -> bool {
        self.find_indefinite_field().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AclOperation as Op;
    use AclPermissionType as Perm;
    use PatternType as Pt;
    use ResourceType as Rt;

    fn binding(rt: Rt, name: &str, pt: Pt) -> AclBinding {
        AclBinding::new(rt, name, pt, "User:alice", "*", Op::Read, Perm::Allow).unwrap()
    }

    fn pattern_filter(rt: Rt, name: Option<&str>, pt: Pt) -> ResourcePatternFilter {
        ResourcePatternFilter { resource_type: rt, name: name.map(String::from), pattern_type: pt }
    }

    #[test]
    fn codes_and_names_are_kafkas() {
        assert_eq!(Op::TwoPhaseCommit.code(), 15);
        assert_eq!(Op::IdempotentWrite.code(), 12);
        assert_eq!(Rt::TransactionalId.code(), 5);
        assert_eq!(Rt::User.code(), 7);
        assert_eq!(Pt::Prefixed.code(), 4);
        assert_eq!(Perm::Allow.code(), 3);
        for op in Op::ALL_VALUES {
            assert_eq!(Op::from_code(op.code()), *op);
            assert_eq!(Op::from_name(&op.name().to_lowercase()), *op);
        }
        for rt in Rt::ALL_VALUES {
            assert_eq!(Rt::from_code(rt.code()), *rt);
        }
        assert_eq!(Op::from_code(16), Op::Unknown);
        assert_eq!(Rt::from_code(-1), Rt::Unknown);
        assert_eq!(Pt::from_code(5), Pt::Unknown);
        assert_eq!(Perm::from_name("maybe"), Perm::Unknown);
        assert_eq!(Rt::from_name("transactional_id"), Rt::TransactionalId);
    }

    #[test]
    fn principals_split_at_the_first_colon() {
        let p = parse_principal("User:CN=a,O=b:c").unwrap();
        assert_eq!((p.principal_type.as_str(), p.name.as_str()), ("User", "CN=a,O=b:c"));
        assert_eq!(parse_principal("User:").unwrap().name, "");
        assert!(matches!(parse_principal("alice"), Err(AclError::InvalidPrincipal(_))));
        assert!(parse_principal("").is_err());
    }

    #[test]
    fn bindings_are_validated_as_create_acls_does() {
        let new = |rt, name: &str, pt, principal: &str, op, perm| {
            AclBinding::new(rt, name, pt, principal, "*", op, perm)
        };
        let ok = new(Rt::Topic, "t", Pt::Prefixed, "User:a", Op::All, Perm::Deny);
        assert!(ok.is_ok());
        let cluster =
            new(Rt::Cluster, "kafka-cluster", Pt::Literal, "User:a", Op::Alter, Perm::Allow);
        assert!(cluster.is_ok());
        let cases = [
            (
                new(Rt::Cluster, "c", Pt::Literal, "User:a", Op::Alter, Perm::Allow),
                AclError::InvalidClusterName,
            ),
            (
                new(Rt::Any, "t", Pt::Literal, "User:a", Op::Read, Perm::Allow),
                AclError::InvalidResourceType(Rt::Any),
            ),
            (
                new(Rt::Unknown, "t", Pt::Literal, "User:a", Op::Read, Perm::Allow),
                AclError::InvalidResourceType(Rt::Unknown),
            ),
            (
                new(Rt::Topic, "t", Pt::Match, "User:a", Op::Read, Perm::Allow),
                AclError::InvalidPatternType(Pt::Match),
            ),
            (
                new(Rt::Topic, "t", Pt::Any, "User:a", Op::Read, Perm::Allow),
                AclError::InvalidPatternType(Pt::Any),
            ),
            (
                new(Rt::Topic, "t", Pt::Literal, "User:a", Op::Any, Perm::Allow),
                AclError::InvalidOperation(Op::Any),
            ),
            (
                new(Rt::Topic, "t", Pt::Literal, "User:a", Op::Unknown, Perm::Allow),
                AclError::InvalidOperation(Op::Unknown),
            ),
            (
                new(Rt::Topic, "t", Pt::Literal, "User:a", Op::Read, Perm::Any),
                AclError::InvalidPermissionType(Perm::Any),
            ),
            (
                new(Rt::Topic, "", Pt::Literal, "User:a", Op::Read, Perm::Allow),
                AclError::EmptyResourceName,
            ),
            (
                new(Rt::Topic, "t", Pt::Literal, "alice", Op::Read, Perm::Allow),
                AclError::InvalidPrincipal("alice".into()),
            ),
        ];
        for (result, error) in cases {
            assert_eq!(result, Err(error));
        }
    }

    #[test]
    fn pattern_filters_match_as_kafka() {
        let lit = binding(Rt::Topic, "orders", Pt::Literal);
        let wild = binding(Rt::Topic, "*", Pt::Literal);
        let pre = binding(Rt::Topic, "ord", Pt::Prefixed);
        let pre_star = binding(Rt::Topic, "*", Pt::Prefixed);
        let group = binding(Rt::Group, "orders", Pt::Literal);
        let all = [&lit, &wild, &pre, &pre_star, &group];
        let selected = |f: &ResourcePatternFilter| -> Vec<bool> {
            all.iter().map(|b| f.matches(b.pattern())).collect()
        };
        // ANY type, ANY pattern, no name: everything.
        assert_eq!(selected(&ResourcePatternFilter::any()), [true; 5]);
        // ANY pattern with a name: that exact name, whatever its pattern type.
        assert_eq!(
            selected(&pattern_filter(Rt::Topic, Some("orders"), Pt::Any)),
            [true, false, false, false, false]
        );
        assert_eq!(
            selected(&pattern_filter(Rt::Any, Some("*"), Pt::Any)),
            [false, true, false, true, false]
        );
        // MATCH: what would apply to a resource of that name.
        assert_eq!(
            selected(&pattern_filter(Rt::Topic, Some("orders"), Pt::Match)),
            [true, true, true, false, false]
        );
        assert_eq!(
            selected(&pattern_filter(Rt::Any, Some("orders"), Pt::Match)),
            [true, true, true, false, true]
        );
        assert_eq!(
            selected(&pattern_filter(Rt::Topic, Some("or"), Pt::Match)),
            [false, true, false, false, false]
        );
        assert_eq!(
            selected(&pattern_filter(Rt::Topic, Some("*x"), Pt::Match)),
            [false, true, false, true, false]
        );
        assert_eq!(
            selected(&pattern_filter(Rt::Topic, None, Pt::Match)),
            [true, true, true, true, false]
        );
        // LITERAL / PREFIXED: that pattern type, exact name; `*` is not expanded.
        assert_eq!(
            selected(&pattern_filter(Rt::Topic, Some("*"), Pt::Literal)),
            [false, true, false, false, false]
        );
        assert_eq!(
            selected(&pattern_filter(Rt::Topic, None, Pt::Literal)),
            [true, true, false, false, false]
        );
        assert_eq!(
            selected(&pattern_filter(Rt::Topic, Some("ord"), Pt::Prefixed)),
            [false, false, true, false, false]
        );
        assert_eq!(selected(&pattern_filter(Rt::Topic, Some("orders"), Pt::Prefixed)), [false; 5]);
        assert_eq!(selected(&pattern_filter(Rt::Cluster, None, Pt::Any)), [false; 5]);
    }

    #[test]
    fn entry_filters_compare_exact_strings() {
        let b = AclBinding::new(
            Rt::Topic,
            "t",
            Pt::Literal,
            "User:*",
            "10.0.0.1",
            Op::Write,
            Perm::Deny,
        )
        .unwrap();
        let mut f = AccessControlEntryFilter::any();
        assert!(f.matches(b.entry()));
        f.principal = Some("User:alice".into());
        assert!(!f.matches(b.entry()), "a filter does not expand the wildcard principal");
        f.principal = Some("User:*".into());
        f.host = Some("*".into());
        assert!(!f.matches(b.entry()), "nor the wildcard host");
        f.host = Some("10.0.0.1".into());
        assert!(f.matches(b.entry()));
        f.operation = Op::Describe;
        assert!(!f.matches(b.entry()), "a filter implies no operation");
        f.operation = Op::Write;
        f.permission_type = Perm::Allow;
        assert!(!f.matches(b.entry()));
        f.permission_type = Perm::Deny;
        assert!(f.matches(b.entry()));
        let full = AclBindingFilter {
            pattern: pattern_filter(Rt::Topic, Some("t"), Pt::Literal),
            entry: f.clone(),
        };
        assert!(full.matches(&b) && full.matches_at_most_one() && full.validate().is_ok());
        let mut other = full.clone();
        other.pattern.resource_type = Rt::Group;
        assert!(!other.matches(&b));
    }

    #[test]
    fn indefinite_and_unknown_filters() {
        let mut f = AclBindingFilter::any();
        assert_eq!(f.find_indefinite_field(), Some("Resource type is ANY."));
        f.pattern = pattern_filter(Rt::Topic, Some("t"), Pt::Match);
        assert_eq!(f.find_indefinite_field(), Some("Resource pattern type is MATCH."));
        f.pattern.pattern_type = Pt::Literal;
        assert_eq!(f.find_indefinite_field(), Some("Principal is NULL"));
        f.entry.principal = Some("User:a".into());
        f.entry.host = Some("*".into());
        assert_eq!(f.find_indefinite_field(), Some("Operation is ANY"));
        f.entry.operation = Op::Read;
        assert_eq!(f.find_indefinite_field(), Some("Permission type is ANY"));
        f.entry.permission_type = Perm::Allow;
        assert!(f.matches_at_most_one());
        f.entry.operation = Op::Unknown;
        assert_eq!(f.validate(), Err(AclError::UnknownEntryFilter));
        f.pattern.pattern_type = Pt::Unknown;
        assert_eq!(f.validate(), Err(AclError::UnknownPatternFilter));
    }
}

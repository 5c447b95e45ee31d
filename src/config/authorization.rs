//! The authorization keys: `authorizer.class.name`, `super.users`,
//! `allow.everyone.if.no.acl.found` (docs/design/security.md, "Configuration").
//!
//! Rules:
//! * `authorizer.class.name` is empty (no authorization: every request is
//!   allowed and the ACL APIs answer SECURITY_DISABLED) or Kafka's
//!   `org.apache.kafka.metadata.authorizer.StandardAuthorizer`, so a Kafka
//!   config carries over unchanged. ZooKeeper-era `AclAuthorizer`, gone in
//!   Kafka 4.0, is refused with the class to use.
//! * `super.users` is semicolon separated `Type:name` principals, checked
//!   when it is set.

use super::broker_defs::{ALLOW_EVERYONE_IF_NO_ACL_FOUND, AUTHORIZER_CLASS_NAME, SUPER_USERS};
use super::{invalid, BrokerConfig, ConfigError};
use crate::config_def::ConfigValues;
use crate::security::authorizer::{parse_super_users, StandardAuthorizer};

/// The one authorizer class sediment has (Kafka's KRaft authorizer).
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
const ACL_AUTHORIZER: &str = "kafka.security.authorizer.AclAuthorizer";

/// Check the value of one of the keys above (the others pass).
///
/// # Errors
/// An unknown authorizer class or an unparsable super user, naming the key.
pub fn validate(key: &str, v: &str) -> Result<(), ConfigError> {
    if key == AUTHORIZER_CLASS_NAME.name {
        if v == ACL_AUTHORIZER {
            return Err(invalid(
                key,
                format!("{ACL_AUTHORIZER} was removed in Kafka 4.0; use {STANDARD_AUTHORIZER}"),
            ));
        }
        if !v.is_empty() && v != STANDARD_AUTHORIZER {
            return Err(invalid(
                key,
                format!("{v:?} is not known: the only authorizer is {STANDARD_AUTHORIZER}"),
            ));
        }
    }
    if key == SUPER_USERS.name {
        return parse_super_users(v).map(drop).map_err(|e| invalid(key, e.to_string()));
    }
    Ok(())
}

impl BrokerConfig {
    /// The authorizer `authorizer.class.name` asks for, with no ACLs yet, or
    /// `None` when authorization is off.
    pub fn authorizer(&self) -> Option<StandardAuthorizer> {
        if self.value(&AUTHORIZER_CLASS_NAME).is_empty() {
            return None;
        }
        // Validated on set.
        let super_users = parse_super_users(self.value(&SUPER_USERS)).unwrap_or_default();
        Some(StandardAuthorizer::new(super_users, self.boolean(&ALLOW_EVERYONE_IF_NO_ACL_FOUND)))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::checked;

    #[test]
    fn the_standard_authorizer_is_the_only_one() {
        assert!(checked(&[]).expect("default").authorizer().is_none());
        let on = checked(&[
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin;User:CN=ops,O=acme",
        ])
        .expect("standard");
        assert!(on.authorizer().is_some());
        let err = checked(&["authorizer.class.name=kafka.security.authorizer.AclAuthorizer"])
            .expect_err("gone")
            .to_string();
        assert!(
            err.contains("removed in Kafka 4.0") && err.contains("StandardAuthorizer"),
            "{err}"
        );
        let err = checked(&["authorizer.class.name=com.acme.Mine"]).expect_err("unknown");
        assert!(err.to_string().contains("authorizer.class.name"), "{err}");
        let err = checked(&["super.users=admin"]).expect_err("no type").to_string();
        assert!(
            err.contains("super.users") && err.contains("principalType:principalName"),
            "{err}"
        );
    }
}

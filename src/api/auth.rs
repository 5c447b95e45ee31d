//! Authorization of requests (Kafka's `AuthHelper`): the checks handlers
//! make against the broker's [`StandardAuthorizer`], through the request's
//! [`RequestContext`].
//!
//! Invariants:
//! * With no authorizer (`authorizer.class.name` unset) every check allows
//!   and authorized-operation fields carry every supported bit, as on Kafka.
//! * A check is made before the resource's existence is looked at, so a
//!   denied principal cannot learn whether a topic or group exists
//!   (docs/design/security.md, "Per-API checks").
//! * `authorize` records a denial (metric and rate-limited log);
//!   `is_authorized` does not: it is for checks that only filter what a
//!   principal sees (Metadata of all topics, ListGroups), Kafka's
//!   `logIfDenied = false`.

use std::collections::HashMap;

use kafka_protocol::messages::ApiKey;

use super::RequestContext;
use crate::metrics::Denial;
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use crate::security::authorizer::{AuthorizationResult, Requester, StandardAuthorizer};

/// The operations Kafka reports in authorized-operations fields, per type.
fn supported_operations(resource_type: ResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
    match resource_type {
        ResourceType::Topic => {
            &[Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs]
        }
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write],
        _ => &[],
    }
}

impl RequestContext<'_> {
    fn authorizer(&self) -> Option<(&StandardAuthorizer, &Requester)> {
        Some((self.authorizer?.authorizer(), self.requester.as_ref()?))
    }

    /// Whether authorization is on for this broker.
    pub fn authorization_enabled(&self) -> bool {
        self.authorizer.is_some()
    }

    /// May this request's principal perform `operation` on the resource? A
    /// denial is recorded.
    pub fn authorize(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let allowed = self.is_authorized(operation, resource_type, name);
        if !allowed {
            self.record_denial(operation, resource_type, name);
        }
        allowed
    }

    /// As [`Self::authorize`], but a denial is not recorded (filtering).
    pub fn is_authorized(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        match self.authorizer() {
            None => true,
            Some((a, who)) => {
                a.authorize(who, operation, resource_type, name) == AuthorizationResult::Allowed
            }
        }
    }

    /// `operation` on the cluster resource (`kafka-cluster`).
    pub fn authorize_cluster(&self, operation: AclOperation) -> bool {
        self.authorize(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// One check per distinct name: the names among `names` the principal
    /// may perform `operation` on. Denials are recorded once per name.
    pub fn filter_authorized<'n>(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        names: impl IntoIterator<Item = &'n str>,
    ) -> HashMap<&'n str, bool> {
        let mut seen = HashMap::new();
        for name in names {
            seen.entry(name).or_insert_with(|| self.authorize(operation, resource_type, name));
        }
        seen
    }

    /// Kafka's `authorizeByResourceType`: may the principal perform
    /// `operation` on some resource of the type (InitProducerId without a
    /// transactional id asks it for WRITE on topics).
    pub fn authorize_by_resource_type(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        match self.authorizer() {
            None => true,
            Some((a, who)) => {
                a.authorize_by_resource_type(who, operation, resource_type)
                    == AuthorizationResult::Allowed
            }
        }
    }

    /// The authorized-operations bit field of Metadata, DescribeGroups and
    /// DescribeCluster: bit `code` set for each supported operation allowed.
    pub fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        supported_operations(resource_type)
            .iter()
            .filter(|op| self.is_authorized(**op, resource_type, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }

    /// Count the denial and log it, rate-limited per (principal, operation,
    /// resource) by the broker's [`DenialRecorder`](crate::metrics::DenialRecorder).
    fn record_denial(&self, operation: AclOperation, resource_type: ResourceType, name: &str) {
        let key = self.header.request_api_key;
        let api = ApiKey::try_from(key).map_or_else(|()| key.to_string(), |k| format!("{k:?}"));
        let principal = self.requester.as_ref().map(|r| r.principal.to_string());
        let denial = Denial {
            api: &api,
            resource_type: resource_type.name(),
            operation: operation.name(),
            principal: principal.as_deref().unwrap_or(""),
            resource_name: name,
            peer: self.session.peer,
        };
        match self.denials {
            Some(recorder) => {
                recorder.record(&denial);
            }
            None => tracing::info!(
                principal = denial.principal,
                operation = denial.operation,
                resource = %format_args!("{}:{name}", denial.resource_type),
                api = denial.api,
                peer = %denial.peer,
                "authorization denied"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorized_operation_bits_match_kafka_codes() {
        let bits = |t| supported_operations(t).iter().fold(0, |b, op| b | (1 << op.code()));
        // Kafka's MetadataResponse for a topic with every operation allowed.
        assert_eq!(bits(ResourceType::Topic), 0b1101_1111_1000);
        assert_eq!(bits(ResourceType::TransactionalId), (1 << 8) | (1 << 4));
    }
}

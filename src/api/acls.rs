//! CreateAcls, DescribeAcls and DeleteAcls (v1-3) over the broker's
//! [`AclStore`], with Kafka's checks and answers (`AclApis`,
//! `AclControlManager`, the request classes' validation).
//!
//! Invariants:
//! * Authorization comes first: CreateAcls and DeleteAcls need ALTER on the
//!   cluster, DescribeAcls DESCRIBE; a denied request learns nothing about
//!   the ACLs (every entry, or the whole DescribeAcls, answers
//!   CLUSTER_AUTHORIZATION_FAILED). With no authorizer the check passes and
//!   the request answers SECURITY_DISABLED, as Kafka does.
//! * A request naming the code 0 (UNKNOWN) in any of its four enum fields
//!   closes the connection: Kafka's request classes refuse it while parsing
//!   (`normalizeAndValidate`/`validate`), before any handler runs. Any other
//!   code Kafka does not know reads as UNKNOWN (`fromCode`) and gets the
//!   per-entry answer.
//! * One request is one store write (`AclStore::update`), made before the
//!   answer; a failed write changes nothing and answers the storage error
//!   for every entry that would have been applied.
//! * A request may add or remove at most [`MAX_RECORDS_PER_USER_OP`] ACLs
//!   (Kafka's controller limit); above it nothing changes.

use std::net::IpAddr;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::error::store_error_code;
use super::{str_bytes, Close, RequestContext};
use crate::security::acl::{
    AccessControlEntryFilter, AclBinding, AclBindingFilter, AclError, AclOperation,
    AclPermissionType, PatternType, ResourcePatternFilter, ResourceType, CLUSTER_NAME,
};
use crate::security::acl_store::AclStore;

/// Kafka's `QuorumController.MAX_RECORDS_PER_USER_OP`: the most ACLs one
/// CreateAcls may add or one DeleteAcls may remove.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// An entry's error: code and message.
type Failure = (ResponseError, Option<String>);

/// Whether the four enum fields name code 0, which Kafka's request classes
/// refuse while parsing.
fn names_code_zero(codes: [i8; 4]) -> bool {
    codes.contains(&0)
}

fn refused(api: &str, peer: IpAddr) -> Close {
    tracing::debug!(api, %peer, "request names UNKNOWN (code 0): closing, as Kafka's parser does");
    Close
}

fn opt_str(s: Option<&StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}

/// The store to change or read, or the answer for every entry when the
/// request may not go on: no ALTER/DESCRIBE on the cluster, or no authorizer.
fn store_or_failure<'c>(
    ctx: &RequestContext<'c>,
    operation: AclOperation,
    disabled_message: &str,
) -> Result<&'c AclStore, Failure> {
    if !ctx.authorize_cluster(operation) {
        return Err((ResponseError::ClusterAuthorizationFailed, None));
    }
    ctx.authorizer.ok_or((ResponseError::SecurityDisabled, Some(disabled_message.into())))
}

fn creation_result(outcome: &Result<(), Failure>) -> AclCreationResult {
    match outcome {
        Ok(()) => AclCreationResult::default().with_error_message(None),
        Err((code, message)) => AclCreationResult::default()
            .with_error_code(code.code())
            .with_error_message(message.clone().map(str_bytes)),
    }
}

/// How CreateAcls judged one creation before the store.
enum Creation {
    /// Refused: by `AclApis` (CLUSTER name, empty name), by
    /// `AclControlManager.validateNewAcl` or by the principal rule.
    Invalid(Failure),
    Valid(AclBinding),
}

fn invalid(e: &AclError) -> Failure {
    (ResponseError::InvalidRequest, Some(e.to_string()))
}

fn judge(c: &kafka_protocol::messages::create_acls_request::AclCreation) -> Creation {
    let resource_type = ResourceType::from_code(c.resource_type);
    let name = c.resource_name.as_str();
    // AclApis checks these two before the controller validates the rest.
    if resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
        return Creation::Invalid(invalid(&AclError::InvalidClusterName));
    }
    if name.is_empty() {
        let message = "Invalid empty resource name".to_string();
        return Creation::Invalid((ResponseError::InvalidRequest, Some(message)));
    }
    match AclBinding::new(
        resource_type,
        name,
        PatternType::from_code(c.resource_pattern_type),
        c.principal.as_str(),
        c.host.as_str(),
        AclOperation::from_code(c.operation),
        AclPermissionType::from_code(c.permission_type),
    ) {
        Ok(binding) => Creation::Valid(binding),
        Err(e) => Creation::Invalid(invalid(&e)),
    }
}

/// CreateAcls: each valid binding added (a binding already present is a
/// success that adds nothing), all in one write.
///
/// # Errors
/// `Close` for a creation naming code 0.
pub fn create_acls(
    ctx: &RequestContext<'_>,
    request: &CreateAclsRequest,
) -> Result<CreateAclsResponse, Close> {
    let zero = request.creations.iter().any(|c| {
        names_code_zero([c.resource_type, c.resource_pattern_type, c.operation, c.permission_type])
    });
    if zero {
        return Err(refused("CreateAcls", ctx.session.peer));
    }
    let store = match store_or_failure(ctx, AclOperation::Alter, "No Authorizer is configured.") {
        Ok(store) => store,
        Err(failure) => {
            let results = request.creations.iter().map(|_| creation_result(&Err(failure.clone())));
            return Ok(CreateAclsResponse::default().with_results(results.collect()));
        }
    };
    let creations: Vec<Creation> = request.creations.iter().map(judge).collect();
    let written = store.update(|acls| {
        let mut added = 0;
        for c in &creations {
            if let Creation::Valid(binding) = c {
                added += usize::from(acls.add(binding.clone()));
            }
        }
        if added > MAX_RECORDS_PER_USER_OP {
            // Kafka's controller refuses the whole operation.
            let message = "Unable to perform excessively large batch operation.".to_string();
            return (Some((ResponseError::PolicyViolation, Some(message))), false);
        }
        (None, added > 0)
    });
    let whole_failure = match written {
        Ok(too_many) => too_many,
        Err(e) => {
            tracing::error!("cannot write the ACLs: {e}");
            let message = "The ACL store could not be written".to_string();
            Some((store_error_code(&e), Some(message)))
        }
    };
    let results = creations.iter().map(|c| {
        creation_result(&match (c, &whole_failure) {
            (Creation::Invalid(f), _) => Err(f.clone()),
            (Creation::Valid(_), Some(f)) => Err(f.clone()),
            (Creation::Valid(_), None) => Ok(()),
        })
    });
    Ok(CreateAclsResponse::default().with_results(results.collect()))
}

fn description_filter(r: &DescribeAclsRequest) -> AclBindingFilter {
    AclBindingFilter {
        pattern: ResourcePatternFilter {
            resource_type: ResourceType::from_code(r.resource_type_filter),
            name: opt_str(r.resource_name_filter.as_ref()),
            pattern_type: PatternType::from_code(r.pattern_type_filter),
        },
        entry: AccessControlEntryFilter {
            principal: opt_str(r.principal_filter.as_ref()),
            host: opt_str(r.host_filter.as_ref()),
            operation: AclOperation::from_code(r.operation),
            permission_type: AclPermissionType::from_code(r.permission_type),
        },
    }
}

/// DescribeAcls: the bindings the filter selects, one entry per resource
/// pattern.
///
/// # Errors
/// `Close` for a filter naming code 0.
pub fn describe_acls(
    ctx: &RequestContext<'_>,
    request: &DescribeAclsRequest,
) -> Result<DescribeAclsResponse, Close> {
    let r = request;
    if names_code_zero([
        r.resource_type_filter,
        r.pattern_type_filter,
        r.operation,
        r.permission_type,
    ]) {
        return Err(refused("DescribeAcls", ctx.session.peer));
    }
    let message = "No Authorizer is configured on the broker";
    let store = match store_or_failure(ctx, AclOperation::Describe, message) {
        Ok(store) => store,
        Err((code, message)) => {
            return Ok(DescribeAclsResponse::default()
                .with_error_code(code.code())
                .with_error_message(message.map(str_bytes)))
        }
    };
    let selected = store.authorizer().acls().describe(&description_filter(r));
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    // `describe` returns bindings ordered by pattern first, so each
    // resource's entries are consecutive.
    let mut last = None;
    for b in &selected {
        let (p, e) = (b.pattern(), b.entry());
        if last != Some(p) {
            resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(p.resource_type().code())
                    .with_resource_name(str_bytes(p.name()))
                    .with_pattern_type(p.pattern_type().code()),
            );
            last = Some(p);
        }
        if let Some(resource) = resources.last_mut() {
            resource.acls.push(
                AclDescription::default()
                    .with_principal(str_bytes(e.principal()))
                    .with_host(str_bytes(e.host()))
                    .with_operation(e.operation().code())
                    .with_permission_type(e.permission_type().code()),
            );
        }
    }
    Ok(DescribeAclsResponse::default().with_error_message(None).with_resources(resources))
}

fn deletion_filter(f: &DeleteAclsFilter) -> AclBindingFilter {
    AclBindingFilter {
        pattern: ResourcePatternFilter {
            resource_type: ResourceType::from_code(f.resource_type_filter),
            name: opt_str(f.resource_name_filter.as_ref()),
            pattern_type: PatternType::from_code(f.pattern_type_filter),
        },
        entry: AccessControlEntryFilter {
            principal: opt_str(f.principal_filter.as_ref()),
            host: opt_str(f.host_filter.as_ref()),
            operation: AclOperation::from_code(f.operation),
            permission_type: AclPermissionType::from_code(f.permission_type),
        },
    }
}

fn matching_acl(b: &AclBinding) -> DeleteAclsMatchingAcl {
    let (p, e) = (b.pattern(), b.entry());
    DeleteAclsMatchingAcl::default()
        .with_error_message(None)
        .with_resource_type(p.resource_type().code())
        .with_resource_name(str_bytes(p.name()))
        .with_pattern_type(p.pattern_type().code())
        .with_principal(str_bytes(e.principal()))
        .with_host(str_bytes(e.host()))
        .with_operation(e.operation().code())
        .with_permission_type(e.permission_type().code())
}

fn filter_failure((code, message): &Failure) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(code.code())
        .with_error_message(message.clone().map(str_bytes))
}

/// DeleteAcls: each filter validated on its own and matched against the
/// ACLs as they were before the request (a binding two filters select is
/// reported under both); every selected binding removed in one write.
///
/// # Errors
/// `Close` for a filter naming code 0.
pub fn delete_acls(
    ctx: &RequestContext<'_>,
    request: &DeleteAclsRequest,
) -> Result<DeleteAclsResponse, Close> {
    let zero = request.filters.iter().any(|f| {
        names_code_zero([
            f.resource_type_filter,
            f.pattern_type_filter,
            f.operation,
            f.permission_type,
        ])
    });
    if zero {
        return Err(refused("DeleteAcls", ctx.session.peer));
    }
    let store = match store_or_failure(ctx, AclOperation::Alter, "No Authorizer is configured.") {
        Ok(store) => store,
        Err(failure) => {
            let results = request.filters.iter().map(|_| filter_failure(&failure));
            return Ok(DeleteAclsResponse::default().with_filter_results(results.collect()));
        }
    };
    let filters: Vec<AclBindingFilter> = request.filters.iter().map(deletion_filter).collect();
    let written = store.update(|acls| {
        let before = acls.len();
        let selected = acls.delete(&filters);
        let removed = before - acls.len();
        if removed > MAX_RECORDS_PER_USER_OP {
            // Kafka's controller cannot commit the batch: the whole request
            // fails with UNKNOWN_SERVER_ERROR and nothing is removed.
            return (Err((ResponseError::UnknownServerError, None)), false);
        }
        (Ok(selected), removed > 0)
    });
    let outcome = written.unwrap_or_else(|e| {
        tracing::error!("cannot write the ACLs: {e}");
        let message = "The ACL store could not be written".to_string();
        Err((store_error_code(&e), Some(message)))
    });
    let results = match outcome {
        Ok(selected) => selected
            .iter()
            .map(|r| match r {
                Ok(bindings) => DeleteAclsFilterResult::default()
                    .with_error_message(None)
                    .with_matching_acls(bindings.iter().map(matching_acl).collect()),
                Err(e) => filter_failure(&invalid(e)),
            })
            .collect(),
        Err(failure) => filters
            .iter()
            .map(|f| match f.validate() {
                Err(e) => filter_failure(&invalid(&e)),
                Ok(()) => filter_failure(&failure),
            })
            .collect(),
    };
    Ok(DeleteAclsResponse::default().with_filter_results(results))
}

#[cfg(test)]
#[path = "acls_tests.rs"]
mod tests;

//! AlterUserScramCredentials v0 and DescribeUserScramCredentials v0 over the
//! credential store (`security::credentials`), with Kafka's validation
//! (`ScramControlManager`). DescribeClientQuotas, which `kafka-configs
//! --describe --entity-type users` asks for beside them, is in
//! `describe_client_quotas`.
//!
//! Invariants:
//! * Only salts, iterations and keys derived from the request's
//!   SaltedPassword reach the store; the SaltedPassword itself is dropped
//!   with the request and never logged.
//! * The valid part of an Alter request is one store write, made before the
//!   answer; a user with an error changes nothing. A failed write answers
//!   every user of the valid part with the storage error.
//! * Describe never returns salts or keys: only (mechanism, iterations).
//! * Authorization comes first (`handle_*`): ALTER on the cluster for Alter,
//!   DESCRIBE for Describe; a denial is CLUSTER_AUTHORIZATION_FAILED shaped
//!   as Kafka's error responses (Alter: per distinct user, sorted; Describe:
//!   top-level and one nameless result per named user).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::error::store_error_code;
use super::{str_bytes, RequestContext};
use crate::security::acl::AclOperation;
use crate::security::credentials::CredentialStore;
use crate::security::sasl::scram_credential::{
    ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS,
};

type Outcome = Result<(), (ResponseError, &'static str)>;

enum Change {
    Delete(ScramMechanism),
    Upsert(ScramCredential),
}

fn result(user: &str, outcome: &Outcome) -> AlterUserScramCredentialsResult {
    let r = AlterUserScramCredentialsResult::default().with_user(str_bytes(user));
    match outcome {
        Ok(()) => r,
        Err((code, message)) => {
            r.with_error_code(code.code()).with_error_message(Some(str_bytes(*message)))
        }
    }
}

fn mechanism(t: i8) -> Result<ScramMechanism, (ResponseError, &'static str)> {
    ScramMechanism::from_kafka_type(t)
        .ok_or((ResponseError::UnsupportedSaslMechanism, "Unknown SCRAM mechanism."))
}

/// The users named more than once in the request (deletions and upsertions
/// together), which Kafka refuses as a whole.
fn duplicated(request: &AlterUserScramCredentialsRequest) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let names = request.deletions.iter().map(|d| d.name.to_string());
    names
        .chain(request.upsertions.iter().map(|u| u.name.to_string()))
        .filter(|n| !seen.insert(n.clone()))
        .collect()
}

/// Why a user named in the request cannot be altered at all, checked
/// before its mechanism (Kafka's order).
fn user_refusal(
    name: &str,
    duplicated: &BTreeSet<String>,
) -> Result<(), (ResponseError, &'static str)> {
    if duplicated.contains(name) {
        Err((
            ResponseError::DuplicateResource,
            "A user credential cannot be altered twice in the same request",
        ))
    } else if name.is_empty() {
        Err((ResponseError::UnacceptableCredential, "Username must not be empty"))
    } else {
        Ok(())
    }
}

/// Validate one user's entries into changes.
fn validate(
    request: &AlterUserScramCredentialsRequest,
) -> BTreeMap<String, Result<Change, (ResponseError, &'static str)>> {
    let dup = duplicated(request);
    let mut out = BTreeMap::new();
    for d in &request.deletions {
        let name = d.name.to_string();
        let change = user_refusal(&name, &dup).and_then(|()| mechanism(d.mechanism));
        out.insert(name, change.map(Change::Delete));
    }
    for u in &request.upsertions {
        let name = u.name.to_string();
        let change =
            user_refusal(&name, &dup).and_then(|()| mechanism(u.mechanism)).and_then(|m| {
                if u.iterations < MIN_ITERATIONS as i32 {
                    Err((ResponseError::UnacceptableCredential, "Too few iterations"))
                } else if u.iterations > MAX_ITERATIONS as i32 {
                    Err((ResponseError::UnacceptableCredential, "Too many iterations"))
                } else if u.salt.is_empty() || u.salted_password.is_empty() {
                    Err((ResponseError::UnacceptableCredential, "Empty salt or salted password"))
                } else {
                    Ok(Change::Upsert(ScramCredential::from_salted_password(
                        m,
                        u.salt.to_vec(),
                        &u.salted_password,
                        u.iterations as u32,
                    )))
                }
            });
        out.insert(name, change);
    }
    out
}

/// Kafka's message of CLUSTER_AUTHORIZATION_FAILED.
pub(super) const CLUSTER_DENIED: &str = "Cluster authorization failed.";

/// AlterUserScramCredentials as the principal may: ALTER on the cluster.
pub fn handle_alter(
    ctx: &RequestContext<'_>,
    store: &CredentialStore,
    request: &AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    if ctx.authorize_cluster(AclOperation::Alter) {
        return alter(store, request);
    }
    let users: BTreeSet<String> = (request.deletions.iter().map(|d| d.name.to_string()))
        .chain(request.upsertions.iter().map(|u| u.name.to_string()))
        .collect();
    let denied = Err((ResponseError::ClusterAuthorizationFailed, CLUSTER_DENIED));
    let results = users.iter().map(|u| result(u, &denied)).collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// DescribeUserScramCredentials as the principal may: DESCRIBE on the cluster.
pub fn handle_describe(
    ctx: &RequestContext<'_>,
    store: &CredentialStore,
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if ctx.authorize_cluster(AclOperation::Describe) {
        return describe(store, request);
    }
    let code = ResponseError::ClusterAuthorizationFailed.code();
    // Kafka's error response names no user in its per-user results.
    let results = request
        .users
        .iter()
        .flatten()
        .map(|_| {
            DescribeUserScramCredentialsResult::default()
                .with_error_code(code)
                .with_error_message(Some(str_bytes(CLUSTER_DENIED)))
        })
        .collect();
    DescribeUserScramCredentialsResponse::default()
        .with_error_code(code)
        .with_error_message(Some(str_bytes(CLUSTER_DENIED)))
        .with_results(results)
}

pub fn alter(
    store: &CredentialStore,
    request: &AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let changes = validate(request);
    let written = store.update(|map| {
        let mut outcomes: Vec<(String, Outcome)> = Vec::new();
        let mut changed = false;
        for (user, change) in &changes {
            let outcome = match change {
                Err(e) => Err(*e),
                Ok(Change::Delete(m)) => {
                    match map.get_mut(user).map(|b| (b.remove(m), b.is_empty())) {
                        Some((Some(_), empty)) => {
                            if empty {
                                map.remove(user);
                            }
                            changed = true;
                            Ok(())
                        }
                        _ => Err((
                            ResponseError::ResourceNotFound,
                            "Attempt to delete a user credential that does not exist",
                        )),
                    }
                }
                Ok(Change::Upsert(c)) => {
                    map.entry(user.clone()).or_default().insert(c.mechanism, c.clone());
                    changed = true;
                    Ok(())
                }
            };
            outcomes.push((user.clone(), outcome));
        }
        (outcomes, changed)
    });
    let results = match written {
        Ok(outcomes) => outcomes.iter().map(|(u, o)| result(u, o)).collect(),
        Err(e) => {
            tracing::error!("cannot write the SCRAM credentials: {e}");
            let code = store_error_code(&e);
            changes
                .iter()
                .map(|(user, change)| match change {
                    Err(err) => result(user, &Err(*err)),
                    Ok(_) => {
                        result(user, &Err((code, "The credential store could not be written")))
                    }
                })
                .collect()
        }
    };
    AlterUserScramCredentialsResponse::default().with_results(results)
}

pub fn describe(
    store: &CredentialStore,
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let snapshot = store.snapshot();
    let info = |user: &str| -> Vec<CredentialInfo> {
        snapshot.get(user).map_or_else(Vec::new, |by_mech| {
            by_mech
                .values()
                .map(|c| {
                    CredentialInfo::default()
                        .with_mechanism(c.mechanism.kafka_type())
                        .with_iterations(c.iterations as i32)
                })
                .collect()
        })
    };
    let found = |user: &str| {
        DescribeUserScramCredentialsResult::default()
            .with_user(str_bytes(user))
            .with_credential_infos(info(user))
    };
    let results = match request.users.as_deref() {
        None | Some([]) => snapshot.keys().map(|u| found(u)).collect(),
        Some(users) => {
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for u in users {
                *counts.entry(u.name.to_string()).or_default() += 1;
            }
            counts
                .iter()
                .map(|(user, n)| {
                    let fail = |code: ResponseError, message: &str| {
                        DescribeUserScramCredentialsResult::default()
                            .with_user(str_bytes(user.as_str()))
                            .with_error_code(code.code())
                            .with_error_message(Some(str_bytes(message)))
                    };
                    if *n > 1 {
                        fail(ResponseError::DuplicateResource, "Cannot describe SCRAM credentials for the same user twice in a single request")
                    } else if !snapshot.contains_key(user) {
                        fail(ResponseError::ResourceNotFound, "Attempt to describe a user credential that does not exist")
                    } else {
                        found(user)
                    }
                })
                .collect()
        }
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

#[cfg(test)]
#[path = "scram_credentials_tests.rs"]
mod tests;

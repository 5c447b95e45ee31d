//! Joining the cluster (docs/design/multi-broker.md, 3.2 and 3.5): the
//! namespace's cluster id checked against `meta.properties` (or written by
//! the first broker of an empty namespace), and the broker's registration
//! put on its session's lease, whose create revision is its broker epoch.
//!
//! A `node.id` already registered is refused (Kafka's
//! DUPLICATE_BROKER_REGISTRATION), unless the registration names this
//! broker's own data directory: then it is a dead predecessor's (the log
//! dir's lock proves no live process holds the directory), whose lease is
//! revoked before registering again.

use super::coordination::{Compare, CoordinationError, KeyRange, Op, Txn};
use super::keys::{self, BrokerRegistration, ClusterIdValue, ClusterKeys};
use super::session::BrokerSession;

/// Why a broker cannot join.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    #[error(transparent)]
    Coordination(#[from] CoordinationError),
    #[error("the etcd namespace {namespace} belongs to cluster {theirs}, this broker's meta.properties to {ours}")]
    OtherCluster { namespace: String, theirs: String, ours: String },
    #[error("node.id {node_id} is registered by another broker (directory {holder}): DUPLICATE_BROKER_REGISTRATION")]
    DuplicateRegistration { node_id: i32, holder: String },
}

/// Check the namespace's cluster id, writing `ours` into an empty one;
/// returns the id in force. A broker whose log dirs hold no data
/// (`may_adopt`) takes another id the namespace holds, as a broker
/// formatted with the cluster's id would; one with data must match.
///
/// # Errors
/// `OtherCluster` for a namespace of another cluster; etcd's errors.
pub async fn ensure_cluster_id(
    session: &BrokerSession,
    keys: &ClusterKeys,
    ours: &str,
    may_adopt: bool,
) -> Result<String, JoinError> {
    let key = keys.cluster_id();
    let value = keys::to_json(&ClusterIdValue { version: 1, id: ours.to_string() });
    let txn = Txn {
        compares: vec![Compare::CreateRevision(key.clone(), 0)],
        success: vec![Op::put(&key, value)],
        failure: vec![Op::Get(KeyRange::Key(key.clone()))],
    };
    let r = session.coordination().txn(txn).await?;
    if r.succeeded {
        tracing::info!(
            namespace = keys.namespace(),
            cluster_id = ours,
            "cluster id written to an empty namespace"
        );
        return Ok(ours.to_string());
    }
    let theirs = r
        .reads
        .first()
        .and_then(|kvs| kvs.first())
        .and_then(|kv| keys::parse::<ClusterIdValue>(&kv.value));
    match theirs {
        Some(v) if v.id == ours => Ok(v.id),
        Some(v) if may_adopt => {
            tracing::info!(namespace = keys.namespace(), cluster_id = %v.id, "a broker without data takes the cluster's id");
            Ok(v.id)
        }
        other => Err(JoinError::OtherCluster {
            namespace: keys.namespace().to_string(),
            theirs: other.map_or_else(|| "(unreadable)".into(), |v| v.id),
            ours: ours.to_string(),
        }),
    }
}

/// Put `registration` at `brokers/ids/<node_id>` on the session's lease;
/// returns the broker epoch (the key's create revision).
///
/// # Errors
/// `DuplicateRegistration`; etcd's errors.
pub async fn register(
    session: &BrokerSession,
    keys: &ClusterKeys,
    node_id: i32,
    registration: &BrokerRegistration,
) -> Result<i64, JoinError> {
    let key = keys.broker(node_id);
    // A predecessor revoked lets the next round create.
    for _ in 0..3 {
        let lease = session.lease();
        let txn = Txn {
            compares: vec![Compare::CreateRevision(key.clone(), 0)],
            success: vec![Op::put_on_lease(&key, registration.to_json(), lease)],
            failure: vec![Op::Get(KeyRange::Key(key.clone()))],
        };
        let r = session.coordination().txn(txn).await?;
        if r.succeeded {
            tracing::info!(
                node_id,
                broker_epoch = r.revision,
                lease = format!("{lease:x}"),
                "registered in the cluster"
            );
            return Ok(r.revision);
        }
        let Some(existing) = r.reads.first().and_then(|kvs| kvs.first()).cloned() else { continue };
        if existing.lease == lease {
            return Ok(existing.create_revision);
        }
        let holder = keys::parse::<BrokerRegistration>(&existing.value);
        let holder_dir =
            holder.as_ref().map_or_else(|| "(unreadable)".to_string(), |h| h.directory_id.clone());
        if holder_dir != registration.directory_id {
            return Err(JoinError::DuplicateRegistration { node_id, holder: holder_dir });
        }
        tracing::warn!(
            node_id,
            lease = format!("{:x}", existing.lease),
            "revoking the session of this broker's dead predecessor"
        );
        session.coordination().revoke(existing.lease).await?;
    }
    Err(JoinError::Coordination(CoordinationError::Unavailable(
        "the registration key kept changing".into(),
    )))
}

/// Change this broker's registration to `registration` (its state), while
/// the key is still the one of `broker_epoch` on the session's lease.
/// Whether it was written.
///
/// # Errors
/// etcd's errors.
pub async fn update(
    session: &BrokerSession,
    keys: &ClusterKeys,
    node_id: i32,
    broker_epoch: i64,
    registration: &BrokerRegistration,
) -> Result<bool, CoordinationError> {
    let key = keys.broker(node_id);
    let txn = Txn {
        compares: vec![Compare::CreateRevision(key.clone(), broker_epoch)],
        success: vec![Op::put_on_lease(&key, registration.to_json(), session.lease())],
        failure: vec![],
    };
    Ok(session.coordination().txn(txn).await?.succeeded)
}

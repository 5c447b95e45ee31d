//! The cluster's keys (docs/design/multi-broker.md, 3.2 and 11): how to
//! reach etcd, and Kafka's session keys. With no endpoint the broker runs
//! alone, as it always did, and reaches for no etcd.

use std::time::Duration;

use super::etcd::{EtcdSettings, EtcdTls};
use super::session::SessionConfig;
use crate::config_def::{broker_key, ConfigDef, ConfigTable, ConfigValues, InvalidValue};

pub const SEDIMENT_CLUSTER_ETCD_ENDPOINTS: ConfigDef = broker_key!("sediment.cluster.etcd.endpoints", String, "", None,
    "sediment: etcd's client URLs, comma-separated (http://h1:2379,http://h2:2379), which make this broker one of a cluster; empty: a single node, with no etcd");
pub const SEDIMENT_CLUSTER_ETCD_NAMESPACE: ConfigDef = broker_key!(
    "sediment.cluster.etcd.namespace",
    String,
    "/sediment",
    None,
    "sediment: the prefix of this cluster's keys in etcd; one cluster per namespace"
);
pub const SEDIMENT_CLUSTER_ETCD_CONNECTION_TIMEOUT_MS: ConfigDef = broker_key!(
    "sediment.cluster.etcd.connection.timeout.ms",
    Long,
    "10000",
    Some(1.0),
    "sediment: the longest connecting to etcd may take, at start and after a loss"
);
pub const SEDIMENT_CLUSTER_ETCD_REQUEST_TIMEOUT_MS: ConfigDef = broker_key!(
    "sediment.cluster.etcd.request.timeout.ms",
    Long,
    "5000",
    Some(1.0),
    "sediment: the longest one etcd read, transaction or lease request may take"
);
pub const SEDIMENT_CLUSTER_ETCD_USER: ConfigDef = broker_key!(
    "sediment.cluster.etcd.user",
    String,
    "",
    None,
    "sediment: the etcd user brokers authenticate as, where etcd's authentication is on (it needs read and write on the namespace); empty: none"
);
pub const SEDIMENT_CLUSTER_ETCD_PASSWORD: ConfigDef = broker_key!(
    "sediment.cluster.etcd.password",
    Password,
    "",
    None,
    "sediment: sediment.cluster.etcd.user's password"
);
pub const SEDIMENT_CLUSTER_ETCD_SSL_CA_LOCATION: ConfigDef = broker_key!(
    "sediment.cluster.etcd.ssl.ca.location",
    String,
    "",
    None,
    "sediment: PEM file of the CA certificates etcd's server certificate must chain to, for https:// endpoints (required with them: there are no system roots)"
);
pub const SEDIMENT_CLUSTER_ETCD_SSL_CERTIFICATE_LOCATION: ConfigDef = broker_key!(
    "sediment.cluster.etcd.ssl.certificate.location",
    String,
    "",
    None,
    "sediment: PEM file of the client certificate (chain) brokers present to an etcd run with --client-cert-auth; with sediment.cluster.etcd.ssl.key.location"
);
pub const SEDIMENT_CLUSTER_ETCD_SSL_KEY_LOCATION: ConfigDef = broker_key!(
    "sediment.cluster.etcd.ssl.key.location",
    String,
    "",
    None,
    "sediment: PEM file of that client certificate's private key"
);
pub const SEDIMENT_CLUSTER_LEASE_SAFETY_MARGIN_MS: ConfigDef = broker_key!("sediment.cluster.lease.safety.margin.ms", Long, "1000", Some(0.0),
    "sediment: how long before etcd could expire its session a broker stops leading when etcd does not answer");
pub const BROKER_SESSION_TIMEOUT_MS: ConfigDef = broker_key!("broker.session.timeout.ms", Int, "9000", Some(1.0),
    "cluster: how long a broker's session lasts without a heartbeat before etcd ends it (the TTL of its lease, in whole seconds)");
pub const BROKER_HEARTBEAT_INTERVAL_MS: ConfigDef = broker_key!(
    "broker.heartbeat.interval.ms",
    Int,
    "2000",
    Some(1.0),
    "cluster: how often a broker renews its session"
);
pub const INITIAL_BROKER_REGISTRATION_TIMEOUT_MS: ConfigDef = broker_key!(
    "initial.broker.registration.timeout.ms",
    Int,
    "60000",
    Some(1.0),
    "cluster: how long a starting broker tries to reach etcd and register before it gives up"
);

pub const CONTROLLED_SHUTDOWN_ENABLE: ConfigDef = broker_key!("controlled.shutdown.enable", Boolean, "true", None,
    "cluster: at a clean stop, the broker first has its leaderships moved to other in-sync replicas");
pub const SEDIMENT_CLUSTER_CONTROLLED_SHUTDOWN_TIMEOUT_MS: ConfigDef = broker_key!("sediment.cluster.controlled.shutdown.timeout.ms", Long, "20000", Some(0.0),
    "sediment: the longest a clean stop waits for the broker's leaderships to move before it stops anyway");

pub const AUTO_LEADER_REBALANCE_ENABLE: ConfigDef = broker_key!("auto.leader.rebalance.enable", Boolean, "true", None,
    "cluster: the controller gives each partition back to its preferred replica (the first) when that one is in sync and not leading");
pub const LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS: ConfigDef = broker_key!(
    "leader.imbalance.check.interval.seconds",
    Long,
    "300",
    Some(1.0),
    "cluster: how often the controller looks for partitions not led by their preferred replica"
);

pub const BROKER_RACK: ConfigDef = broker_key!("broker.rack", String, "", None,
    "cluster: this broker's rack, registered with it and shown to clients: consumers with the same client.rack may read from it (replica.selector.class); empty: none");
pub const INTER_BROKER_LISTENER_NAME: ConfigDef = broker_key!("inter.broker.listener.name", String, "", None,
    "cluster: the listener other brokers reach this one at, and that it uses to reach them (its protocol's TLS and SASL keys too); empty: the listener named as security.inter.broker.protocol");
pub const SECURITY_INTER_BROKER_PROTOCOL: ConfigDef = broker_key!("security.inter.broker.protocol", String, "PLAINTEXT", None,
    "cluster: the inter-broker listener by its protocol (the listener of that name), when inter.broker.listener.name is not set; set only one of the two");
pub const SASL_MECHANISM_INTER_BROKER_PROTOCOL: ConfigDef = broker_key!("sasl.mechanism.inter.broker.protocol", String, "GSSAPI", None,
    "cluster: the SASL mechanism brokers authenticate to each other with on a SASL inter-broker listener (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's default GSSAPI is not served), with the username and password of the listener's JAAS config for it");

/// The cluster's keys, as the template and the reference show them.
pub const CLUSTER_CONFIGS: ConfigTable = ConfigTable {
    title: "Cluster",
    note: "With sediment.cluster.etcd.endpoints set, brokers form a cluster coordinated by etcd (docs/design/multi-broker.md).",
    keys: &[
        &SEDIMENT_CLUSTER_ETCD_ENDPOINTS,
        &SEDIMENT_CLUSTER_ETCD_NAMESPACE,
        &SEDIMENT_CLUSTER_ETCD_CONNECTION_TIMEOUT_MS,
        &SEDIMENT_CLUSTER_ETCD_REQUEST_TIMEOUT_MS,
        &SEDIMENT_CLUSTER_ETCD_USER,
        &SEDIMENT_CLUSTER_ETCD_PASSWORD,
        &SEDIMENT_CLUSTER_ETCD_SSL_CA_LOCATION,
        &SEDIMENT_CLUSTER_ETCD_SSL_CERTIFICATE_LOCATION,
        &SEDIMENT_CLUSTER_ETCD_SSL_KEY_LOCATION,
        &SEDIMENT_CLUSTER_LEASE_SAFETY_MARGIN_MS,
        &BROKER_SESSION_TIMEOUT_MS,
        &BROKER_HEARTBEAT_INTERVAL_MS,
        &INITIAL_BROKER_REGISTRATION_TIMEOUT_MS,
        &CONTROLLED_SHUTDOWN_ENABLE,
        &AUTO_LEADER_REBALANCE_ENABLE,
        &LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS,
        &SEDIMENT_CLUSTER_CONTROLLED_SHUTDOWN_TIMEOUT_MS,
        &BROKER_RACK,
        &INTER_BROKER_LISTENER_NAME,
        &SECURITY_INTER_BROKER_PROTOCOL,
        &SASL_MECHANISM_INTER_BROKER_PROTOCOL,
    ],
};

/// A cluster member's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    pub etcd: EtcdSettings,
    pub namespace: String,
    pub session: SessionConfig,
    pub registration_timeout: Duration,
    /// How long a clean stop waits for leaderships to move (`None`:
    /// `controlled.shutdown.enable=false`).
    pub controlled_shutdown: Option<Duration>,
    /// How often the controller restores preferred leaders (`None`:
    /// `auto.leader.rebalance.enable=false`).
    pub leader_rebalance: Option<Duration>,
    /// The broker's `unclean.leader.election.enable`: whether a topic that
    /// does not set it may elect a leader outside its ISR.
    pub unclean_leader_election: bool,
}

/// The TLS of https endpoints: the CA's PEM and the client's certificate
/// and key, read now so a missing file stops the start naming its key.
/// Endpoints are all https (then a CA is required) or all http (then no
/// TLS file may be set).
fn etcd_tls(
    values: &dyn ConfigValues,
    endpoints: &[String],
) -> Result<Option<EtcdTls>, InvalidValue> {
    let path =
        |def: &ConfigDef| Some(values.value(def).trim().to_string()).filter(|p| !p.is_empty());
    let read = |def: &ConfigDef| -> Result<Option<Vec<u8>>, InvalidValue> {
        let Some(p) = path(def) else { return Ok(None) };
        std::fs::read(&p)
            .map(Some)
            .map_err(|e| InvalidValue::new(def, format!("cannot read {p}: {e}")))
    };
    let https = endpoints.iter().filter(|e| e.starts_with("https://")).count();
    if https != 0 && https != endpoints.len() {
        let reason = "mixes http:// and https:// endpoints; etcd's members are reached one way";
        return Err(InvalidValue::new(&SEDIMENT_CLUSTER_ETCD_ENDPOINTS, reason));
    }
    let (ca, cert, key) = (
        read(&SEDIMENT_CLUSTER_ETCD_SSL_CA_LOCATION)?,
        read(&SEDIMENT_CLUSTER_ETCD_SSL_CERTIFICATE_LOCATION)?,
        read(&SEDIMENT_CLUSTER_ETCD_SSL_KEY_LOCATION)?,
    );
    if https == 0 {
        if ca.is_some() || cert.is_some() || key.is_some() {
            let reason = "TLS files are set but the endpoints are http://; use https:// endpoints";
            return Err(InvalidValue::new(&SEDIMENT_CLUSTER_ETCD_ENDPOINTS, reason));
        }
        return Ok(None);
    }
    let ca = ca.ok_or_else(|| {
        InvalidValue::new(
            &SEDIMENT_CLUSTER_ETCD_SSL_CA_LOCATION,
            "https:// endpoints need the CA that signed etcd's certificate",
        )
    })?;
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(InvalidValue::new(
                &SEDIMENT_CLUSTER_ETCD_SSL_KEY_LOCATION,
                "a client certificate needs its key",
            ))
        }
        (None, Some(_)) => {
            return Err(InvalidValue::new(
                &SEDIMENT_CLUSTER_ETCD_SSL_CERTIFICATE_LOCATION,
                "a key needs its client certificate",
            ))
        }
    };
    Ok(Some(EtcdTls { ca, identity }))
}

impl ClusterConfig {
    /// The settings of `values`; `None` for a single node (no endpoint).
    ///
    /// # Errors
    /// An endpoint that is not an http(s) URL, a namespace not starting
    /// with `/`, a heartbeat that does not fit the session twice.
    pub fn from_values(values: &dyn ConfigValues) -> Result<Option<Self>, InvalidValue> {
        let endpoints: Vec<String> = values
            .value(&SEDIMENT_CLUSTER_ETCD_ENDPOINTS)
            .split(',')
            .map(|e| e.trim().to_string())
            .filter(|e| !e.is_empty())
            .collect();
        if endpoints.is_empty() {
            return Ok(None);
        }
        if let Some(bad) =
            endpoints.iter().find(|e| !e.starts_with("http://") && !e.starts_with("https://"))
        {
            let reason = format!("{bad:?} is not an etcd client URL (http://host:port)");
            return Err(InvalidValue::new(&SEDIMENT_CLUSTER_ETCD_ENDPOINTS, reason));
        }
        let namespace = values.value(&SEDIMENT_CLUSTER_ETCD_NAMESPACE).trim().to_string();
        if !namespace.starts_with('/') || namespace.len() < 2 {
            let reason = format!("{namespace:?} must start with '/' and name something");
            return Err(InvalidValue::new(&SEDIMENT_CLUSTER_ETCD_NAMESPACE, reason));
        }
        let user = values.value(&SEDIMENT_CLUSTER_ETCD_USER).trim().to_string();
        let password = values.value(&SEDIMENT_CLUSTER_ETCD_PASSWORD).to_string();
        if user.is_empty() && !password.is_empty() {
            let reason = "a password without sediment.cluster.etcd.user".to_string();
            return Err(InvalidValue::new(&SEDIMENT_CLUSTER_ETCD_PASSWORD, reason));
        }
        let user = (!user.is_empty()).then_some((user, password));
        let tls = etcd_tls(values, &endpoints)?;
        let ms = |def: &ConfigDef| Duration::from_millis(values.int(def).max(1) as u64);
        let session = SessionConfig {
            session_timeout_ms: values.int(&BROKER_SESSION_TIMEOUT_MS),
            heartbeat_interval_ms: values.int(&BROKER_HEARTBEAT_INTERVAL_MS),
            safety_margin_ms: values.int(&SEDIMENT_CLUSTER_LEASE_SAFETY_MARGIN_MS),
        };
        session.check().map_err(|r| InvalidValue::new(&BROKER_HEARTBEAT_INTERVAL_MS, r))?;
        Ok(Some(Self {
            etcd: EtcdSettings {
                endpoints,
                connection_timeout: ms(&SEDIMENT_CLUSTER_ETCD_CONNECTION_TIMEOUT_MS),
                request_timeout: ms(&SEDIMENT_CLUSTER_ETCD_REQUEST_TIMEOUT_MS),
                user,
                tls,
            },
            namespace,
            session,
            registration_timeout: ms(&INITIAL_BROKER_REGISTRATION_TIMEOUT_MS),
            leader_rebalance: values.boolean(&AUTO_LEADER_REBALANCE_ENABLE).then(|| {
                let secs = values.int(&LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS).max(1);
                Duration::from_secs(secs as u64)
            }),
            unclean_leader_election: crate::log::manager_config::topic_defaults(values)
                .get("unclean.leader.election.enable")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            controlled_shutdown: values.boolean(&CONTROLLED_SHUTDOWN_ENABLE).then(|| {
                let ms = values.int(&SEDIMENT_CLUSTER_CONTROLLED_SHUTDOWN_TIMEOUT_MS).max(0);
                Duration::from_millis(ms as u64)
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Values(BTreeMap<&'static str, &'static str>);
    impl ConfigValues for Values {
        fn explicit_value(&self, def: &ConfigDef) -> Option<&str> {
            self.0.get(def.name).copied()
        }
    }

    fn config(
        pairs: &[(&'static str, &'static str)],
    ) -> Result<Option<ClusterConfig>, InvalidValue> {
        ClusterConfig::from_values(&Values(pairs.iter().copied().collect()))
    }

    #[test]
    fn no_endpoint_is_a_single_node() {
        assert_eq!(config(&[]).unwrap(), None);
        assert_eq!(config(&[("sediment.cluster.etcd.endpoints", " , ")]).unwrap(), None);
    }

    #[test]
    fn endpoints_namespace_and_session_are_read_and_checked() {
        let endpoints = ("sediment.cluster.etcd.endpoints", "http://a:2379, http://b:2379");
        let c = config(&[endpoints]).unwrap().unwrap();
        assert_eq!(c.etcd.endpoints, vec!["http://a:2379", "http://b:2379"]);
        assert_eq!(c.etcd.tls, None);
        assert_eq!((c.namespace.as_str(), c.session.ttl_secs()), ("/sediment", 9));
        assert_eq!(c.session.heartbeat_interval_ms, 2000);
        assert!(config(&[("sediment.cluster.etcd.endpoints", "a:2379")]).is_err(), "not a URL");
        let ns = ("sediment.cluster.etcd.namespace", "sediment");
        assert!(config(&[endpoints, ns]).is_err(), "a namespace starts with /");
        // Two heartbeats must fit in the session less the margin.
        let slow = ("broker.heartbeat.interval.ms", "4500");
        assert!(config(&[endpoints, slow]).is_err());
        let ok = ("broker.heartbeat.interval.ms", "3900");
        assert!(config(&[endpoints, ok]).is_ok());
    }

    #[test]
    fn https_endpoints_need_a_ca_and_all_or_none_are_https() {
        let key = |r: Result<Option<ClusterConfig>, InvalidValue>| r.unwrap_err().key;
        let mixed = ("sediment.cluster.etcd.endpoints", "http://a:2379,https://b:2379");
        assert_eq!(key(config(&[mixed])), "sediment.cluster.etcd.endpoints");
        let https = ("sediment.cluster.etcd.endpoints", "https://a:2379");
        assert_eq!(key(config(&[https])), "sediment.cluster.etcd.ssl.ca.location");
        let dir = tempfile::tempdir().unwrap();
        let ca_path = dir.path().join("ca.pem");
        std::fs::write(&ca_path, "-----BEGIN CERTIFICATE-----\n").unwrap();
        // The helper takes 'static pairs, as the key tables are.
        let path: &'static str = Box::leak(ca_path.display().to_string().into_boxed_str());
        let ca = ("sediment.cluster.etcd.ssl.ca.location", path);
        let c = config(&[https, ca]).unwrap().unwrap();
        let tls = c.etcd.tls.expect("TLS");
        assert_eq!((tls.ca.len(), tls.identity.is_none()), (28, true));
        let cert = ("sediment.cluster.etcd.ssl.certificate.location", path);
        assert_eq!(key(config(&[https, ca, cert])), "sediment.cluster.etcd.ssl.key.location");
        let http = ("sediment.cluster.etcd.endpoints", "http://a:2379");
        assert_eq!(key(config(&[http, ca])), "sediment.cluster.etcd.endpoints");
        let missing = ("sediment.cluster.etcd.ssl.ca.location", "/nonexistent/ca.pem");
        assert_eq!(key(config(&[https, missing])), "sediment.cluster.etcd.ssl.ca.location");
    }
}

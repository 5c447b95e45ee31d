//! DescribeConfigs for topics (every topic key with its value and where it
//! comes from: the topic, a dynamic broker value, the config file or Kafka's
//! default) and for this broker (every broker key with Kafka's sources
//! DYNAMIC_BROKER_CONFIG > DYNAMIC_DEFAULT_BROKER_CONFIG >
//! STATIC_BROKER_CONFIG > DEFAULT_CONFIG and its synonyms in that order; the
//! keys that are not dynamic read-only; an empty resource name describes the
//! cluster-wide dynamic defaults only, as Kafka; secrets and per-listener keys
//! with a null value, marked sensitive).
//!
//! Authorization (Kafka's `ConfigHelper`): DESCRIBE_CONFIGS on the topic for
//! a topic (TOPIC_AUTHORIZATION_FAILED), on the cluster for a broker or a
//! broker logger (CLUSTER_AUTHORIZATION_FAILED), on the group for a group
//! (GROUP_AUTHORIZATION_FAILED), checked per resource before its existence;
//! a refused resource carries no configs. AlterConfigs and
//! IncrementalAlterConfigs map ALTER_CONFIGS the same way
//! ([`config_resource_refusal`]).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::config::dynamic::{BrokerConfigSource, BrokerEntry, DynamicBrokerConfig, DynamicLevel};
use crate::config::LISTENER_PREFIX;
use crate::config_def::ConfigType;
use crate::config_def::ConfigValues;
use crate::log::config::{ConfigSource, LOG_CONFIGS};
use crate::log::LogConfig;
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

/// Kafka's `ConfigResource.Type` codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;
pub const RESOURCE_GROUP: i8 = 32;

/// The refusal of `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
/// resource, with Kafka's message, or `None` when allowed. A type with no ACL
/// resource (unknown, client metrics) has no check here: it is refused as
/// unsupported by the handler.
pub fn config_resource_refusal(
    ctx: &RequestContext<'_>,
    operation: AclOperation,
    resource_type: i8,
    name: &str,
) -> Option<(ResponseError, &'static str)> {
    use ResponseError::{ClusterAuthorizationFailed, GroupAuthorizationFailed};
    let (acl_type, acl_name, code, message) = match resource_type {
        RESOURCE_TOPIC => (
            ResourceType::Topic,
            name,
            ResponseError::TopicAuthorizationFailed,
            "Topic authorization failed.",
        ),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => (
            ResourceType::Cluster,
            CLUSTER_NAME,
            ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        ),
        RESOURCE_GROUP => {
            (ResourceType::Group, name, GroupAuthorizationFailed, "Group authorization failed.")
        }
        _ => return None,
    };
    (!ctx.authorize(operation, acl_type, acl_name)).then_some((code, message))
}

/// Kafka's ConfigSource codes.
pub const SOURCE_DYNAMIC_TOPIC: i8 = 1;
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;
/// Kafka's `GROUP_CONFIG`: a group's own config.
pub const SOURCE_GROUP: i8 = 8;

/// Kafka's ConfigType codes in DescribeConfigs v3+.
pub fn type_code(kind: ConfigType) -> i8 {
    match kind {
        ConfigType::Boolean => 1,
        ConfigType::String => 2,
        ConfigType::Int => 3,
        ConfigType::Long => 5,
        ConfigType::Double => 6,
        ConfigType::List => 7,
        ConfigType::Password => 9,
    }
}

/// Kafka's code of a broker value's source.
pub fn broker_source_code(source: BrokerConfigSource) -> i8 {
    match source {
        BrokerConfigSource::DynamicBroker => SOURCE_DYNAMIC_BROKER,
        BrokerConfigSource::DynamicDefault => SOURCE_DYNAMIC_DEFAULT_BROKER,
        BrokerConfigSource::Static => SOURCE_STATIC_BROKER,
        BrokerConfigSource::Default => SOURCE_DEFAULT,
    }
}

/// The topic entries of `config` with the broker's layers behind them: an
/// inherited key's source and synonyms are those of its broker key.
pub fn topic_entries_layered(
    config: &LogConfig,
    broker_defaults: &BTreeMap<String, String>,
    dynamic: &DynamicBrokerConfig,
) -> Vec<TopicEntry> {
    let mut entries = topic_entries(config, broker_defaults);
    for (t, def) in entries
        .iter_mut()
        .zip(LOG_CONFIGS.iter().filter(|d| config.value_of(d.name, broker_defaults).is_some()))
    {
        let mut synonyms: Vec<(String, String, i8)> = config
            .overrides
            .get(def.name)
            .map(|v| (def.name.to_string(), v.clone(), SOURCE_DYNAMIC_TOPIC))
            .into_iter()
            .collect();
        let broker = dynamic.synonyms_of(def.broker_key, true);
        if t.source != SOURCE_DYNAMIC_TOPIC {
            if let Some((_, _, source)) = broker.first() {
                t.source = broker_source_code(*source);
            }
        }
        synonyms.extend(broker.into_iter().map(|(n, v, s)| (n, v, broker_source_code(s))));
        t.synonyms = synonyms;
    }
    entries
}

/// One described topic key.
pub struct TopicEntry {
    pub name: &'static str,
    pub value: String,
    pub source: i8,
    pub kind: ConfigType,
    pub doc: &'static str,
    /// (name, value, source), most specific first, as Kafka lists synonyms.
    pub synonyms: Vec<(String, String, i8)>,
}

/// Every topic key of `config` with its effective value and source.
pub fn topic_entries(
    config: &LogConfig,
    broker_defaults: &BTreeMap<String, String>,
) -> Vec<TopicEntry> {
    LOG_CONFIGS
        .iter()
        .filter_map(|def| {
            let (value, source) = config.value_of(def.name, broker_defaults)?;
            let source = match source {
                ConfigSource::TopicOverride => SOURCE_DYNAMIC_TOPIC,
                ConfigSource::BrokerDefault => SOURCE_STATIC_BROKER,
                ConfigSource::Default => SOURCE_DEFAULT,
            };
            let mut synonyms = Vec::new();
            if let Some(v) = config.overrides.get(def.name) {
                synonyms.push((def.name.to_string(), v.clone(), SOURCE_DYNAMIC_TOPIC));
            }
            // A key no broker key defaults (the throttled-replica lists) has
            // only the topic's own synonym, as on Kafka.
            if !def.broker_key.is_empty() {
                if let Some(v) = broker_defaults.get(def.name) {
                    synonyms.push((def.broker_key.to_string(), v.clone(), SOURCE_STATIC_BROKER));
                }
                synonyms.push((
                    def.broker_key.to_string(),
                    def.default.to_string(),
                    SOURCE_DEFAULT,
                ));
            }
            Some(TopicEntry {
                name: def.name,
                value,
                source,
                kind: def.kind,
                doc: def.doc,
                synonyms,
            })
        })
        .collect()
}

/// A secret, or a key Kafka cannot type (a per-listener one, Kafka's
/// `maybeSensitive`): described with a null value and `is_sensitive`, as
/// Kafka does, also in its synonyms.
fn hide_value(mut e: DescribeConfigsResourceResult) -> DescribeConfigsResourceResult {
    e.value = None;
    e.is_sensitive = true;
    for s in &mut e.synonyms {
        s.value = None;
    }
    e
}

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    mut request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    // Each resource's refusal, in request order; the others are described.
    let mut refusals = Vec::with_capacity(request.resources.len());
    let mut allowed = Vec::with_capacity(request.resources.len());
    for resource in std::mem::take(&mut request.resources) {
        let refusal = config_resource_refusal(
            ctx,
            AclOperation::DescribeConfigs,
            resource.resource_type,
            resource.resource_name.as_str(),
        );
        refusals.push(refusal.map(|(code, message)| {
            DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(message)))
        }));
        if refusals.last().is_some_and(Option::is_none) {
            allowed.push(resource);
        }
    }
    request.resources = allowed;
    let mut described = describe(broker, request).into_iter();
    let results = refusals.into_iter().filter_map(|r| r.or_else(|| described.next())).collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// The broker's keys as described for resource name `name` (empty: the
/// cluster-wide dynamic defaults).
fn broker_entries(broker: &KafkaApis, name: &str) -> Vec<BrokerEntry> {
    let level =
        if name.is_empty() { DynamicLevel::ClusterDefault } else { DynamicLevel::PerBroker };
    if let Some(dynamic) = &broker.dynamic {
        return dynamic.describe(level);
    }
    // A broker built by hand: its file only, no dynamic defaults.
    if level == DynamicLevel::ClusterDefault {
        return Vec::new();
    }
    broker
        .config
        .describe()
        .into_iter()
        .map(|(name, value, explicit, doc, kind)| {
            let source =
                if explicit { BrokerConfigSource::Static } else { BrokerConfigSource::Default };
            let synonyms = vec![(name.clone(), value.clone(), source)];
            BrokerEntry { name, value, source, read_only: true, kind, doc, synonyms }
        })
        .collect()
}

/// `entry` of `describe`: one described key.
type Entry<'a> = dyn Fn(
        &str,
        String,
        bool,
        i8,
        ConfigType,
        &str,
        Vec<(String, String, i8)>,
    ) -> DescribeConfigsResourceResult
    + 'a;

/// A BROKER resource: this node's id or empty (the cluster-wide defaults).
fn describe_broker(
    broker: &KafkaApis,
    result: DescribeConfigsResult,
    name: &str,
    wanted: &dyn Fn(&str) -> bool,
    entry: &Entry<'_>,
) -> DescribeConfigsResult {
    if !name.is_empty() && name != broker.node_id.to_string() {
        result.with_error_code(ResponseError::InvalidRequest.code()).with_error_message(Some(
            str_bytes(format!("this broker is node {}, not {name}", broker.node_id)),
        ))
    } else {
        let configs = broker_entries(broker, name)
            .into_iter()
            .filter(|b| wanted(&b.name))
            .map(|b| {
                let hidden =
                    crate::config::is_sensitive(&b.name) || b.name.starts_with(LISTENER_PREFIX);
                let synonyms =
                    b.synonyms.into_iter().map(|(n, v, s)| (n, v, broker_source_code(s))).collect();
                let source = broker_source_code(b.source);
                let e = entry(&b.name, b.value, b.read_only, source, b.kind, b.doc, synonyms);
                if hidden {
                    hide_value(e)
                } else {
                    e
                }
            })
            .collect();
        result.with_configs(configs)
    }
}

/// A GROUP resource: its own configs (source GROUP_CONFIG) and, for the
/// keys it does not set, the broker's (its static or default source), as
/// Kafka describes them whether or not the group exists. Synonyms: the
/// group's own value, then the broker key's chain.
fn describe_group(
    broker: &KafkaApis,
    result: DescribeConfigsResult,
    name: &str,
    wanted: &dyn Fn(&str) -> bool,
    entry: &Entry<'_>,
) -> DescribeConfigsResult {
    let Some(configs) = broker.groups.group_configs().filter(|_| !name.is_empty()) else {
        let e = result.with_error_code(ResponseError::InvalidRequest.code());
        return e.with_error_message(Some(str_bytes("Group name must not be empty")));
    };
    let static_config = broker.dynamic.as_ref().map(|d| d.static_config());
    let configs = configs
        .describe(name)
        .into_iter()
        .filter(|d| wanted(d.key))
        .map(|d| {
            let def = d.synonym;
            let file = static_config.and_then(|c| ConfigValues::explicit_value(c, def));
            let mut synonyms = Vec::with_capacity(3);
            if let Some(v) = &d.own {
                synonyms.push((d.key.to_string(), v.clone(), SOURCE_GROUP));
            }
            if let Some(v) = file {
                synonyms.push((def.name.to_string(), v.to_string(), SOURCE_STATIC_BROKER));
            }
            synonyms.push((def.name.to_string(), def.default.to_string(), SOURCE_DEFAULT));
            let source = synonyms[0].2;
            entry(d.key, d.value().to_string(), false, source, ConfigType::Int, d.doc, synonyms)
        })
        .collect();
    result.with_configs(configs)
}

/// The results of resources the principal may describe, in request order.
fn describe(broker: &KafkaApis, request: DescribeConfigsRequest) -> Vec<DescribeConfigsResult> {
    let mut results = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        // Null and an empty list both mean every key (Kafka's `ConfigHelper`).
        let wanted = |name: &str| {
            resource
                .configuration_keys
                .as_ref()
                .filter(|keys| !keys.is_empty())
                .is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
        };
        let result = DescribeConfigsResult::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        let entry = |name: &str,
                     value: String,
                     read_only: bool,
                     source: i8,
                     kind: ConfigType,
                     doc: &str,
                     synonyms: Vec<(String, String, i8)>| {
            let mut e = DescribeConfigsResourceResult::default()
                .with_name(str_bytes(name))
                .with_value(Some(str_bytes(value)))
                .with_read_only(read_only)
                .with_config_source(source)
                .with_config_type(type_code(kind));
            if request.include_synonyms {
                e.synonyms = synonyms
                    .into_iter()
                    .map(|(n, v, s)| {
                        DescribeConfigsSynonym::default()
                            .with_name(str_bytes(n))
                            .with_value(Some(str_bytes(v)))
                            .with_source(s)
                    })
                    .collect();
            }
            if request.include_documentation {
                e.documentation = Some(str_bytes(doc));
            }
            e
        };
        let result = match resource.resource_type {
            RESOURCE_TOPIC => match broker.topic_config(resource.resource_name.as_str()) {
                None => result
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    .with_error_message(Some(str_bytes(format!(
                        "topic {} does not exist",
                        resource.resource_name.as_str()
                    )))),
                Some(config) => {
                    let defaults = &broker.logs.topic_defaults();
                    let entries = match &broker.dynamic {
                        Some(dynamic) => topic_entries_layered(&config, defaults, dynamic),
                        None => topic_entries(&config, defaults),
                    };
                    let configs = entries
                        .into_iter()
                        .filter(|t| wanted(t.name))
                        .map(|t| entry(t.name, t.value, false, t.source, t.kind, t.doc, t.synonyms))
                        .collect();
                    result.with_configs(configs)
                }
            },
            RESOURCE_BROKER => {
                describe_broker(broker, result, resource.resource_name.as_str(), &wanted, &entry)
            }
            RESOURCE_GROUP => {
                describe_group(broker, result, resource.resource_name.as_str(), &wanted, &entry)
            }
            other => {
                result.with_error_code(ResponseError::InvalidRequest.code()).with_error_message(
                    Some(str_bytes(format!("resource type {other} is not supported"))),
                )
            }
        };
        results.push(result);
    }
    results
}

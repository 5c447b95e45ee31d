//! AlterConfigs (replace a resource's settings) and IncrementalAlterConfigs
//! (SET / DELETE / APPEND / SUBTRACT on single keys), for topics and for the
//! broker. Changes are validated as a whole before anything is applied and
//! take effect at once: a topic's on its live logs; a broker's (the dynamic
//! keys of `config::dynamic`, at the cluster-default level for an empty
//! resource name or per broker for this node's id) on the topic defaults and
//! the cleaner's threads, after the dynamic config file is written.
//! Each resource needs ALTER_CONFIGS, mapped to an ACL resource and a refusal
//! code as DescribeConfigs maps DESCRIBE_CONFIGS, checked before anything
//! else about it (Kafka's `ControllerApis.authorizeAlterResource`).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{alter_configs_response, incremental_alter_configs_response};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};

use super::describe_configs::{
    config_resource_refusal, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_GROUP,
    RESOURCE_TOPIC,
};
use super::error::cluster_error_code;
use super::error::{dynamic_config_error_code, error_code, store_error_code};
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::config::dynamic::{key_kind, DynamicConfigError, DynamicLevel};
use crate::config_def::ConfigType;
use crate::group::group_config_manager::{GroupConfigError, GroupConfigManager};
use crate::log::config::config_def;
use crate::log::LogError;
use crate::security::acl::AclOperation;

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

type Refusal = (ResponseError, String);
type Outcome = Result<(), Refusal>;

/// What a change is computed against: the resource's own settings, and the
/// value and type of any key (for APPEND and SUBTRACT).
struct Target<'a> {
    current: BTreeMap<String, String>,
    effective: &'a dyn Fn(&str) -> Option<String>,
    kind: &'a dyn Fn(&str) -> Result<ConfigType, Refusal>,
}

type Build<'a> = Box<dyn FnOnce(&Target<'_>) -> Result<BTreeMap<String, String>, Refusal> + 'a>;

fn apply(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    legacy: bool,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    build: Build<'_>,
) -> Outcome {
    // Legacy AlterConfigs knows no broker loggers: INVALID_REQUEST below
    // before any check, as on Kafka.
    let checked = !(legacy && resource_type == RESOURCE_BROKER_LOGGER);
    if let Some((code, message)) = checked
        .then(|| config_resource_refusal(ctx, AclOperation::AlterConfigs, resource_type, name))
        .flatten()
    {
        return Err((code, message.into()));
    }
    match resource_type {
        RESOURCE_TOPIC => apply_topic(broker, name, validate_only, build),
        RESOURCE_BROKER => apply_broker(broker, name, validate_only, build),
        RESOURCE_GROUP => apply_group(broker, name, validate_only, build),
        other => {
            Err((ResponseError::InvalidRequest, format!("resource type {other} is not supported")))
        }
    }
}

fn apply_topic(broker: &KafkaApis, name: &str, validate_only: bool, build: Build<'_>) -> Outcome {
    let config = broker.topic_config(name).ok_or_else(|| {
        (ResponseError::UnknownTopicOrPartition, format!("topic {name} does not exist"))
    })?;
    let defaults = broker.logs.topic_defaults();
    let effective = |key: &str| config.value_of(key, &defaults).map(|(v, _)| v);
    let kind = |key: &str| {
        config_def(key).map(|d| d.kind).ok_or_else(|| {
            (ResponseError::InvalidConfig, format!("invalid config {key}: unknown topic config"))
        })
    };
    let overrides =
        build(&Target { current: config.overrides.clone(), effective: &effective, kind: &kind })?;
    let map_err = |e: LogError| (error_code(&e), e.to_string());
    if validate_only {
        broker.logs.resolve_config(overrides).map(|_| ()).map_err(map_err)
    } else if let Some(topics) = &broker.topics {
        // Into etcd; every broker with a copy applies it from its image.
        broker.logs.resolve_config(overrides.clone()).map_err(map_err)?;
        crate::blocking::off_worker(|| {
            tokio::runtime::Handle::current().block_on(topics.set_config(name, overrides))
        })
        .map_err(|e| (cluster_error_code(&e), e.to_string()))?;
        tracing::info!(topic = %name, "topic config altered in the cluster");
        Ok(())
    } else {
        broker.logs.alter_topic_config(name, overrides).map(|_| ()).map_err(map_err)?;
        tracing::info!(topic = %name, "topic config altered");
        Ok(())
    }
}

/// A group's own configs (`group::group_config_manager`): the change is
/// built on the keys set for it, then validated whole and stored.
fn apply_group(broker: &KafkaApis, name: &str, validate_only: bool, build: Build<'_>) -> Outcome {
    if name.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "Default group resources are not allowed.".into(),
        ));
    }
    let Some(configs) = broker.groups.group_configs() else {
        return Err((ResponseError::InvalidRequest, "this broker has no group configs".into()));
    };
    let described = configs.describe(name);
    let effective =
        |key: &str| described.iter().find(|d| d.key == key).map(|d| d.value().to_string());
    let kind = |key: &str| {
        if GroupConfigManager::is_group_key(key) {
            Ok(ConfigType::Int)
        } else {
            Err((ResponseError::InvalidConfig, GroupConfigManager::refusal(key)))
        }
    };
    let build = |current| build(&Target { current, effective: &effective, kind: &kind });
    configs.alter(name, validate_only, build, |e| match e {
        GroupConfigError::Invalid(m) => (ResponseError::InvalidConfig, m),
        GroupConfigError::Store(e) => (store_error_code(&e), e.to_string()),
    })
}

/// The dynamic level of a broker resource name (Kafka's
/// `validateResourceNameIsCurrentNodeId`).
fn broker_level(broker: &KafkaApis, name: &str) -> Result<DynamicLevel, Refusal> {
    if name.is_empty() {
        return Ok(DynamicLevel::ClusterDefault);
    }
    let id: i32 = name.parse().map_err(|_| {
        (ResponseError::InvalidRequest, format!("Node id must be an integer, but it is: {name}"))
    })?;
    if id != broker.node_id {
        return Err((
            ResponseError::InvalidRequest,
            format!("Unexpected broker id, expected {}, but received {name}", broker.node_id),
        ));
    }
    Ok(DynamicLevel::PerBroker)
}

fn apply_broker(broker: &KafkaApis, name: &str, validate_only: bool, build: Build<'_>) -> Outcome {
    let level = broker_level(broker, name)?;
    let Some(dynamic) = &broker.dynamic else {
        return Err((ResponseError::InvalidRequest, "this broker has no dynamic configs".into()));
    };
    let current = dynamic.current();
    let effective = |key: &str| current.get(key);
    let kind = |key: &str| {
        key_kind(key).ok_or_else(|| {
            (ResponseError::InvalidConfig, DynamicConfigError::Unknown(key.into()).to_string())
        })
    };
    let entries = build(&Target {
        current: dynamic.layers().level(level).clone(),
        effective: &effective,
        kind: &kind,
    })?;
    // Everything `apply` could refuse is checked before the file is written.
    let check = |_: &crate::config::BrokerConfig, new: &crate::config::BrokerConfig| {
        let invalid = |e: String| DynamicConfigError::Invalid(e);
        broker
            .logs
            .check_topic_defaults(&new.topic_defaults())
            .map_err(|e| invalid(e.to_string()))?;
        new.cleaner_config().validate().map_err(|e| invalid(e.to_string()))
    };
    let apply = |new: &crate::config::BrokerConfig| {
        apply_effective((&broker.logs, &broker.replica), broker.cleaner.as_ref(), new)
    };
    dynamic
        .alter(level, entries, validate_only, check, apply)
        .map_err(|e| (dynamic_config_error_code(&e), e.to_string()))?;
    if !validate_only {
        tracing::info!(broker = %name, "broker config altered");
    }
    Ok(())
}

/// Make `new` the broker's effective config: its topic defaults on the
/// live logs, its replication throttles' bounds, its cleaner pool settings
/// on the cleaner.
///
/// # Errors
/// The logs or the cleaner refused it.
pub fn apply_effective(
    (logs, replica): (&crate::log::LogManager, &crate::replica::ReplicaManager),
    cleaner: Option<&std::sync::Arc<crate::cleaner::LogCleanerHandle>>,
    new: &crate::config::BrokerConfig,
) -> Result<(), DynamicConfigError> {
    logs.set_topic_defaults(new.topic_defaults())
        .map_err(|e| DynamicConfigError::Invalid(e.to_string()))?;
    replica.quotas().set_bounds(new);
    if let Some(cleaner) = cleaner {
        cleaner
            .reconfigure(new.cleaner_config())
            .map_err(|e| DynamicConfigError::Invalid(e.to_string()))?;
    }
    Ok(())
}

pub fn handle_alter(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let responses = request
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let configs = r.configs;
            let build: Build<'_> = Box::new(move |_| {
                // The legacy API replaces the whole set; a null value is
                // refused, as Kafka's ConfigAdminManager does.
                let mut out = BTreeMap::new();
                let nulls: Vec<String> = configs
                    .iter()
                    .filter(|c| c.value.is_none())
                    .map(|c| c.name.to_string())
                    .collect();
                if !nulls.is_empty() {
                    return Err((
                        ResponseError::InvalidRequest,
                        format!("Null value not supported for : {}", nulls.join(", ")),
                    ));
                }
                for c in &configs {
                    if let Some(v) = &c.value {
                        out.insert(c.name.to_string(), v.to_string());
                    }
                }
                Ok(out)
            });
            let outcome =
                apply(broker, ctx, true, r.resource_type, &name, request.validate_only, build);
            let resp = alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name);
            match outcome {
                Ok(()) => resp,
                Err((code, msg)) => {
                    resp.with_error_code(code.code()).with_error_message(Some(str_bytes(msg)))
                }
            }
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

fn list_items(v: &str) -> Vec<String> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

/// One incremental operation on `out`.
fn incremental_op(
    target: &Target<'_>,
    out: &mut BTreeMap<String, String>,
    key: String,
    op: i8,
    value: Option<String>,
) -> Result<(), Refusal> {
    // A DELETE leaves the key unset, known or not (Kafka checks only the
    // keys a change sets): `kafka-reassign-partitions --verify` deletes
    // throttle keys that were never set.
    if op == OP_DELETE {
        out.remove(&key);
        return Ok(());
    }
    let kind = (target.kind)(&key)?;
    match op {
        OP_SET => {
            let v = value.ok_or_else(|| {
                (ResponseError::InvalidRequest, format!("SET of {key} needs a value"))
            })?;
            out.insert(key, v);
        }
        OP_APPEND | OP_SUBTRACT => {
            if kind != ConfigType::List {
                return Err((
                    ResponseError::InvalidConfig,
                    format!("invalid config {key}: APPEND and SUBTRACT apply to list configs only"),
                ));
            }
            let base =
                out.get(&key).cloned().or_else(|| (target.effective)(&key)).unwrap_or_default();
            let mut items = list_items(&base);
            let given = list_items(&value.unwrap_or_default());
            if op == OP_APPEND {
                for g in given {
                    if !items.contains(&g) {
                        items.push(g);
                    }
                }
            } else {
                items.retain(|i| !given.contains(i));
            }
            out.insert(key, items.join(","));
        }
        other => {
            return Err((
                ResponseError::InvalidRequest,
                format!("unknown config operation {other}"),
            ))
        }
    }
    Ok(())
}

pub fn handle_incremental(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let responses = request
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let configs = r.configs;
            let build: Build<'_> = Box::new(move |target| {
                let mut out = target.current.clone();
                for c in configs {
                    let value = c.value.as_ref().map(|v| v.to_string());
                    incremental_op(
                        target,
                        &mut out,
                        c.name.to_string(),
                        c.config_operation,
                        value,
                    )?;
                }
                Ok(out)
            });
            let outcome =
                apply(broker, ctx, false, r.resource_type, &name, request.validate_only, build);
            let resp = incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name);
            match outcome {
                Ok(()) => resp,
                Err((code, msg)) => {
                    resp.with_error_code(code.code()).with_error_message(Some(str_bytes(msg)))
                }
            }
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

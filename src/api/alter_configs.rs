//! AlterConfigs (replace a topic's overrides) and IncrementalAlterConfigs
//! (SET / DELETE / APPEND / SUBTRACT on single keys). Changes are validated as
//! a whole before anything is applied and take effect on the live logs at once.
//! Broker configs are static (the TOML file): altering them is refused.
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
    config_resource_refusal, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC,
};
use super::error::error_code;
use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::log::config::{config_def, ConfigType};
use crate::log::LogError;
use crate::security::acl::AclOperation;

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

type Outcome = Result<(), (ResponseError, String)>;

fn apply(
    broker: &Broker,
    ctx: &RequestContext<'_>,
    legacy: bool,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    build: impl FnOnce(
        &BTreeMap<String, String>,
        &crate::log::LogConfig,
    ) -> Result<BTreeMap<String, String>, (ResponseError, String)>,
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
        RESOURCE_TOPIC => {}
        RESOURCE_BROKER => {
            return Err((
                ResponseError::InvalidRequest,
                "broker configs are static in sediment: edit the config file and restart".into(),
            ))
        }
        other => {
            return Err((
                ResponseError::InvalidRequest,
                format!("resource type {other} is not supported"),
            ))
        }
    }
    let info = broker.logs.topic(name).ok_or_else(|| {
        (ResponseError::UnknownTopicOrPartition, format!("topic {name} does not exist"))
    })?;
    let overrides = build(&info.config.overrides, &info.config)?;
    let map_err = |e: LogError| (error_code(&e), e.to_string());
    if validate_only {
        broker.logs.resolve_config(overrides).map(|_| ()).map_err(map_err)
    } else {
        broker.logs.alter_topic_config(name, overrides).map(|_| ()).map_err(map_err)?;
        tracing::info!(topic = %name, "topic config altered");
        Ok(())
    }
}

pub fn handle_alter(
    broker: &Broker,
    ctx: &RequestContext<'_>,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let responses = request
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let outcome =
                apply(broker, ctx, true, r.resource_type, &name, request.validate_only, |_, _| {
                    // The legacy API replaces the whole set of overrides.
                    let mut out = BTreeMap::new();
                    for c in &r.configs {
                        if let Some(v) = &c.value {
                            out.insert(c.name.to_string(), v.to_string());
                        }
                    }
                    Ok(out)
                });
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

pub fn handle_incremental(
    broker: &Broker,
    ctx: &RequestContext<'_>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let defaults = broker.logs.config().topic_defaults.clone();
    let responses = request
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let outcome = apply(broker, ctx, false, r.resource_type, &name, request.validate_only, |current, config| {
                let mut out = current.clone();
                for c in &r.configs {
                    let key = c.name.to_string();
                    let def = config_def(&key).ok_or_else(|| (ResponseError::InvalidConfig, format!("invalid config {key}: unknown topic config")))?;
                    let value = c.value.as_ref().map(|v| v.to_string());
                    match c.config_operation {
                        OP_SET => {
                            let v = value.ok_or_else(|| (ResponseError::InvalidRequest, format!("SET of {key} needs a value")))?;
                            out.insert(key, v);
                        }
                        OP_DELETE => {
                            out.remove(&key);
                        }
                        OP_APPEND | OP_SUBTRACT => {
                            if def.kind != ConfigType::List {
                                return Err((ResponseError::InvalidConfig, format!("invalid config {key}: APPEND and SUBTRACT apply to list configs only")));
                            }
                            let base = out.get(&key).cloned().or_else(|| config.value_of(&key, &defaults).map(|(v, _)| v)).unwrap_or_default();
                            let mut items = list_items(&base);
                            let given = list_items(&value.unwrap_or_default());
                            if c.config_operation == OP_APPEND {
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
                        other => return Err((ResponseError::InvalidRequest, format!("unknown config operation {other}"))),
                    }
                }
                Ok(out)
            });
            let resp = incremental_alter_configs_response::AlterConfigsResourceResponse::default().with_resource_type(r.resource_type).with_resource_name(r.resource_name);
            match outcome {
                Ok(()) => resp,
                Err((code, msg)) => resp.with_error_code(code.code()).with_error_message(Some(str_bytes(msg))),
            }
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

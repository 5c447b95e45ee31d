//! TOML files: dotted keys and nested tables both flatten to Kafka's dotted
//! key names, values to strings in Kafka's syntax (lists comma-separated).

use std::collections::BTreeMap;

use super::{invalid, ConfigError};

fn toml_scalar(key: &str, value: &toml::Value) -> Result<String, ConfigError> {
    Ok(match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(items) => {
            let parts: Result<Vec<_>, _> = items.iter().map(|v| toml_scalar(key, v)).collect();
            parts?.join(",")
        }
        toml::Value::Datetime(_) | toml::Value::Table(_) => {
            return Err(invalid(key, "expected a string, number, boolean or list"))
        }
    })
}

pub(super) fn flatten(
    prefix: &str,
    table: &toml::Table,
    out: &mut BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    for (k, v) in table {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out)?,
            other => {
                out.insert(key.clone(), toml_scalar(&key, other)?);
            }
        }
    }
    Ok(())
}

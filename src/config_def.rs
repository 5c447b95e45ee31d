//! What a config key is (Kafka's `ConfigDef`) and how a module reads the
//! keys it declares, below every module that has keys.
//!
//! Each module declares its broker keys as named [`ConfigDef`] constants
//! gathered in a [`ConfigTable`] (the cleaner's in `cleaner::config`, the
//! group coordinator's in `group::config`, ...) and builds its typed config
//! from [`ConfigValues`], reading each key by its constant. `config` merges
//! the tables, reads files and checks values; it is the one implementation
//! of [`ConfigValues`]. A key is never looked up by a string literal outside
//! the table that declares it (a test in `tests/ops` checks the tree).
//!
//! Invariant: a value read through [`ConfigValues`] was validated against
//! its definition when it was set (type, bounds, allowed values), and a
//! default is valid by construction, so the typed getters do not fail.

/// Value type of a config key, as DescribeConfigs reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    Int,
    Long,
    Double,
    String,
    List,
    /// A secret: never printed, described with a null value (broker keys only).
    Password,
}

/// One key: a topic key with the broker key that supplies its default
/// (`segment.bytes` and `log.segment.bytes`), or a broker key (both names
/// the same).
#[derive(Debug)]
pub struct ConfigDef {
    /// The topic key, e.g. `segment.bytes`; for a broker key, the key.
    pub name: &'static str,
    /// The broker key, e.g. `log.segment.bytes`.
    pub broker_key: &'static str,
    pub kind: ConfigType,
    /// Kafka's default, as a string in the key's own syntax.
    pub default: &'static str,
    /// Inclusive lower bound for numbers.
    pub min: Option<f64>,
    /// Inclusive upper bound for numbers.
    pub max: Option<f64>,
    /// Allowed values for strings and list items (empty: any).
    pub one_of: &'static [&'static str],
    pub doc: &'static str,
}

/// A broker key's [`ConfigDef`]: name, type, default, lower bound, allowed
/// values (optional) and doc.
macro_rules! broker_key {
    ($name:literal, $kind:ident, $default:expr, $min:expr, $doc:literal) => {
        $crate::config_def::broker_key!($name, $kind, $default, $min, &[], $doc)
    };
    ($name:literal, $kind:ident, $default:expr, $min:expr, $one_of:expr, $doc:literal) => {
        $crate::config_def::ConfigDef {
            name: $name,
            broker_key: $name,
            kind: $crate::config_def::ConfigType::$kind,
            default: $default,
            min: $min,
            max: None,
            one_of: $one_of,
            doc: $doc,
        }
    };
}
pub(crate) use broker_key;

/// One module's broker keys, as the generated template and reference show
/// them: a section with a title and a note.
#[derive(Debug)]
pub struct ConfigTable {
    pub title: &'static str,
    /// Shown under the title (empty: none).
    pub note: &'static str,
    pub keys: &'static [&'static ConfigDef],
}

/// A value out of place, found while a module builds its typed config from
/// values that each passed their own key's checks (a rule across keys, an
/// address that does not resolve).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid config {key}: {reason}")]
pub struct InvalidValue {
    pub key: &'static str,
    pub reason: String,
}

impl InvalidValue {
    pub fn new(def: &ConfigDef, reason: impl Into<String>) -> Self {
        Self { key: def.broker_key, reason: reason.into() }
    }
}

/// The broker's values, read by key definition.
pub trait ConfigValues {
    /// The value set for `def`'s broker key, if one was.
    fn explicit_value(&self, def: &ConfigDef) -> Option<&str>;

    /// The effective value: set, else the default.
    fn value(&self, def: &ConfigDef) -> &str {
        self.explicit_value(def).unwrap_or(def.default)
    }

    /// An Int or Long key (0 for an empty value: a key unset by default).
    fn int(&self, def: &ConfigDef) -> i64 {
        self.value(def).trim().parse().unwrap_or(0)
    }

    fn double(&self, def: &ConfigDef) -> f64 {
        self.value(def).trim().parse().unwrap_or(0.0)
    }

    fn boolean(&self, def: &ConfigDef) -> bool {
        self.value(def).trim() == "true"
    }

    /// A List key's items, trimmed, empty ones left out.
    fn list(&self, def: &ConfigDef) -> Vec<String> {
        self.value(def)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }
}

//! The nearest known key to a mistyped one, for the "did you mean" of an
//! unknown-key error (`strsim`'s optimal-string-alignment distance, so a
//! swapped pair of letters counts as one edit).

use super::{broker_keys, ignored::IGNORED_KEYS};
use crate::log::config::broker_defaulted;

/// The known key closest to `key`, when it is close enough to be a typo: at
/// most a third of the key's length in edits (and at most 4).
pub fn nearest_key(key: &str) -> Option<&'static str> {
    let known = broker_keys()
        .map(|d| d.name)
        .chain(broker_defaulted().map(|d| d.broker_key))
        .chain(IGNORED_KEYS.iter().map(|(k, _)| *k));
    let limit = (key.chars().count() / 3).clamp(1, 4);
    known
        .map(|k| (strsim::osa_distance(key, k), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, k)| (*d, *k))
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_key() {
        assert_eq!(nearest_key("log.retension.hours"), Some("log.retention.hours"));
        assert_eq!(nearest_key("num.partitons"), Some("num.partitions"));
        assert_eq!(nearest_key("log.cleaner.thread"), Some("log.cleaner.threads"));
        assert_eq!(nearest_key("num.netwrok.threads"), Some("num.network.threads"));
        assert_eq!(nearest_key("completely.different"), None);
    }
}

//! Java properties files (Kafka's `server.properties`), read with the
//! `java-properties` crate: `=`, `:` or blank separators, `#`/`!` comments,
//! backslash continuations and escapes, ISO-8859-1 as `Properties.load`.
//! A key given twice keeps the last value, as Java's `Properties`.

use std::collections::BTreeMap;
use std::path::Path;

use super::ConfigError;

/// Every key and value of `text`.
///
/// # Errors
/// A malformed line (a bad `\u` escape), with its line number.
pub(super) fn parse(text: &[u8], path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut out = BTreeMap::new();
    for line in java_properties::PropertiesIter::new(text) {
        let line = line.map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: format!(
                "not a Java properties file (read as one for its .properties extension): {e}"
            ),
        })?;
        if let java_properties::LineContent::KVPair(k, v) = line.consume_content() {
            out.insert(k, v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_syntax() {
        let text = b"# comment\n! also a comment\nlog.dirs=/tmp/a\nnum.partitions : 3\nlisteners PLAINTEXT://:9092\nlistener.security.protocol.map=PLAINTEXT:PLAINTEXT,\\\n    CONTROLLER:PLAINTEXT\nmetrics.listen=\nsasl.jaas.config=a\\=b\\u0041\nnum.partitions=4\n";
        let m = parse(text, Path::new("s.properties")).unwrap();
        assert_eq!(m["log.dirs"], "/tmp/a");
        assert_eq!(m["num.partitions"], "4");
        assert_eq!(m["listeners"], "PLAINTEXT://:9092");
        assert_eq!(m["listener.security.protocol.map"], "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT");
        assert_eq!(m["metrics.listen"], "");
        assert_eq!(m["sasl.jaas.config"], "a=bA");
        assert_eq!(m.len(), 6);
    }

    #[test]
    fn a_bad_escape_names_the_file_and_the_format() {
        let e = parse(b"a=\\uZZZZ\n", Path::new("s.properties")).unwrap_err().to_string();
        assert!(e.contains("s.properties") && e.contains("Java properties"), "{e}");
    }
}

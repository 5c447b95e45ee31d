//! Each module owns its config keys: a broker key's name appears, as a
//! string literal of its own, only in the file whose table declares it
//! (`broker_key!("<key>", ...)`); everywhere else it is read through its
//! constant. Unit tests, which set keys as an operator would, are left out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `text` with the whitespace after each `broker_key!(` removed, so a
/// declaration reads `broker_key!("<key>"` however it is formatted.
fn declarations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("broker_key!(") {
        let end = at + "broker_key!(".len();
        out.push_str(&rest[..end]);
        rest = rest[end..].trim_start();
    }
    out.push_str(rest);
    out
}

/// `text` without its `#[cfg(test)]` items (unit tests sit at the end of a
/// file, so everything from the first one on).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

#[test]
fn broker_keys_are_read_only_through_their_tables() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files: Vec<(PathBuf, String)> = crate::broker::files_under(&src, "rs")
        .into_iter()
        .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().ends_with("tests.rs")))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read");
            (p, declarations(&text))
        })
        .collect();
    let mut declared: BTreeMap<&str, &Path> = BTreeMap::new();
    for def in sediment::config::broker_keys() {
        let declaration = format!("broker_key!(\"{}\"", def.name);
        let owners: Vec<&Path> = files
            .iter()
            .filter(|(_, text)| text.contains(&declaration))
            .map(|(p, _)| p.as_path())
            .collect();
        assert_eq!(owners.len(), 1, "{} is declared in {owners:?}", def.name);
        declared.insert(def.name, owners[0]);
    }
    let mut strays = Vec::new();
    for (path, text) in &files {
        let code = without_tests(text);
        for (key, owner) in &declared {
            if path.as_path() != *owner && code.contains(&format!("\"{key}\"")) {
                strays.push(format!("{}: \"{key}\"", path.display()));
            }
        }
    }
    assert!(
        strays.is_empty(),
        "broker keys named by string outside their table:\n{}",
        strays.join("\n")
    );
    println!("{} broker keys, each named only by its table", declared.len());
}

//! Every link in the README, the changelog and `docs/` resolves: a relative
//! Markdown link names a file that exists (and, with `#anchor`, a heading in
//! it), and a path in a code span that names a file or directory of this
//! repository (`src/...`, `tests/...`, `docs/...`, ...) exists. Docs that
//! point at moved files fail here instead of misleading a reader.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::broker::{files_under, repo_root};

/// The top-level directories whose paths a code span may name.
const REPO_DIRS: &[&str] =
    &["src/", "tests/", "docs/", "scripts/", "config/", "docker/", "bench/", "benches/", "fuzz/"];

fn markdown_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut out = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    out.extend(files_under(&root.join("docs"), "md"));
    out
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as '-'.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The text outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter_map(|l| l.trim_start_matches('#').strip_prefix(' ').filter(|_| l.starts_with('#')))
        .map(slug)
        .collect()
}

/// `](target)` of every inline link in the prose.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

/// Code spans of the prose that are repository paths (no globs or
/// placeholders), without a `:line` suffix.
fn repo_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        for span in line.split('`').skip(1).step_by(2) {
            let path = span.split(':').next().unwrap_or("");
            let plain = !path.contains(['*', '<', '{', ' ', '$']);
            if plain && REPO_DIRS.iter().any(|d| path.starts_with(d)) {
                out.push(path.to_string());
            }
        }
    }
    out
}

fn broken_in(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("read");
    let dir = file.parent().expect("dir");
    let mut broken = Vec::new();
    for target in link_targets(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
        let resolved = if path.is_empty() { file.to_path_buf() } else { dir.join(path) };
        if !resolved.exists() {
            broken.push(format!("link {target}: no {}", resolved.display()));
        } else if !anchor.is_empty() && resolved.is_file() {
            let there = std::fs::read_to_string(&resolved).expect("read target");
            if !anchors(&there).contains(anchor) {
                broken.push(format!("link {target}: no heading #{anchor}"));
            }
        }
    }
    for path in repo_paths(&text) {
        if !repo_root().join(path.trim_end_matches('/')).exists() {
            broken.push(format!("path `{path}` does not exist"));
        }
    }
    broken
}

#[test]
fn every_link_and_path_in_the_docs_resolves() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let shown = file.strip_prefix(repo_root()).unwrap_or(&file).display().to_string();
        broken.extend(broken_in(&file).into_iter().map(|b| format!("{shown}: {b}")));
    }
    assert!(broken.is_empty(), "{} broken:\n{}", broken.len(), broken.join("\n"));
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README");
    let lines = readme.lines().count();
    assert!(lines <= 300, "the README has {lines} lines; the manual belongs in docs/");
    assert!(readme.contains("scripts/test.sh") && readme.contains("cargo run --release -- serve"));
}

#[test]
fn the_checker_finds_what_it_should() {
    let text = "see [a](x.md#top) and `src/lib.rs:12`, not `tests/*.rs`\n```\n[b](nowhere)\n```\n## A Heading, too\n";
    assert_eq!(link_targets(text), ["x.md#top"]);
    assert_eq!(repo_paths(text), ["src/lib.rs"]);
    assert!(anchors(text).contains("a-heading-too"));
}

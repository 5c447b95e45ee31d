//! The import graph between `src/`'s top-level modules has no cycle: the
//! layering of `docs` (main → broker → server → api → coordinators → … →
//! log) holds only if nothing imports upward. Every `crate::<module>` path
//! in a module's files is an edge, in doc comments too (a doc
//! naming a module above is a dependency on it as well); the graph is printed
//! (`cargo test --test ops module_graph -- --nocapture`, which the test
//! command runs) and a cycle fails with the path around it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeMap<String, usize>>;

/// The top-level modules: `src/<name>.rs` and `src/<name>/`, without the
/// crate roots.
fn top_modules(src: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(src).expect("src") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).expect("name").to_string();
        if path.is_dir() || path.extension().is_some_and(|e| e == "rs") {
            out.insert(name);
        }
    }
    out.remove("lib");
    out.remove("main");
    out
}

/// The first path segment of every `crate::` path in `code`, including each
/// entry of a `crate::{a::x, b}` group (nested braces allowed).
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let mut depth = 1;
            let mut entry_start = true;
            let mut ident = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => entry_start = true,
                    c if entry_start && (c.is_alphanumeric() || c == '_') => ident.push(c),
                    _ if entry_start && !ident.is_empty() => {
                        out.push(std::mem::take(&mut ident));
                        entry_start = false;
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
            if !ident.is_empty() {
                out.push(ident);
            }
        } else {
            let ident: String =
                after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            out.push(ident);
        }
        rest = after;
    }
    out
}

fn graph(src: &Path) -> Graph {
    let tops = top_modules(src);
    let mut g = Graph::new();
    for top in &tops {
        let dir = src.join(top);
        let mut files =
            if dir.is_dir() { crate::broker::files_under(&dir, "rs") } else { Vec::new() };
        let file = src.join(format!("{top}.rs"));
        if file.is_file() {
            files.push(file);
        }
        let edges = g.entry(top.clone()).or_default();
        for f in files {
            let code = std::fs::read_to_string(&f).expect("read");
            for target in crate_paths(&code) {
                if target != *top && tops.contains(&target) {
                    *edges.entry(target).or_default() += 1;
                }
            }
        }
    }
    g
}

/// A cycle as the modules around it (first repeated last), if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in g.get(node).into_iter().flat_map(|e| e.keys()) {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys().find_map(|n| visit(g, n, &mut Vec::new(), &mut done))
}

fn render(g: &Graph) -> String {
    g.iter()
        .map(|(from, to)| {
            let to: Vec<String> = to.iter().map(|(t, n)| format!("{t} ({n})")).collect();
            format!("{from:>9} -> {}", to.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_top_level_modules_import_one_way() {
    let g = graph(&crate::broker::repo_root().join("src"));
    let shown = render(&g);
    println!("imports between src/'s top-level modules (paths per edge):\n{shown}");
    if let Some(cycle) = find_cycle(&g) {
        panic!("import cycle {}\n{shown}", cycle.join(" -> "));
    }
}

#[test]
fn the_scanner_sees_groups_and_doc_links() {
    let code =
        "use crate::{log::{A, B}, clock};\n/// see `crate::server`\nlet x = crate::api::f();";
    assert_eq!(crate_paths(code), ["log", "clock", "server", "api"]);
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into(), 1);
    g.entry("b".into()).or_default().insert("a".into(), 1);
    assert_eq!(find_cycle(&g), Some(vec!["a".to_string(), "b".into(), "a".into()]));
    g.get_mut("b").expect("b").clear();
    assert_eq!(find_cycle(&g), None);
}

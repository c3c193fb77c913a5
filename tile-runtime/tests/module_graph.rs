//! The runtime's modules depend on each other without cycles: every `crate::X` path in a
//! top-level module (its submodules folded into it, comments ignored) is an edge, and
//! the graph of those edges is acyclic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the top-level modules its code names.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read src").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let module_of = |p: &Path| -> String {
        let rel = p.strip_prefix(&src).expect("under src");
        let first = rel.components().next().expect("a component");
        let name = first.as_os_str().to_string_lossy();
        name.trim_end_matches(".rs").to_string()
    };
    let modules: BTreeSet<String> = files.iter().map(|p| module_of(p)).collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &files {
        let from = module_of(p);
        if from == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(p).expect("read a source file");
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::") {
                let to: String = code[i + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if to != from && modules.contains(&to) {
                    out.entry(from.clone()).or_default().insert(to);
                }
            }
        }
    }
    out
}

/// A cycle through `node`, if the walk from it finds one.
fn cycle_from(
    node: &str,
    edges: &BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(i) = path.iter().position(|n| n == node) {
        let mut cycle = path[i..].to_vec();
        cycle.push(node.to_string());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node.to_string());
    for next in edges.get(node).into_iter().flatten() {
        if let Some(c) = cycle_from(next, edges, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(node.to_string());
    None
}

#[test]
fn runtime_modules_form_no_cycle() {
    let edges = edges();
    assert!(edges.contains_key("launch"), "no edges found: {edges:?}");
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        if let Some(c) = cycle_from(node, &edges, &mut Vec::new(), &mut done) {
            panic!("module cycle: {}", c.join(" -> "));
        }
    }
}

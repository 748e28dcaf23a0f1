//! The engine's modules form layers (docs/architecture.md, "Inside the engine"): no
//! top-level module of `core` may reach, through `crate::` paths in its code, a module
//! that reaches it back. A cycle is what let turn, handlers, compaction, the session and
//! the thread manager all depend on each other; this keeps it from coming back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The code of a source file without its test module and comments (doc links are not
/// dependencies).
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `crate::NAME` paths in `code`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
            .collect();
        if !name.is_empty() {
            found.insert(name);
        }
    }
    found
}

fn collect(dir: &Path, top: Option<&str>, graph: &mut BTreeMap<String, BTreeSet<String>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            collect(&path, Some(top.unwrap_or(&stem)), graph);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let module = top.map_or(stem.clone(), str::to_string);
        if module == "lib" {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&path).unwrap());
        let deps = graph.entry(module.clone()).or_default();
        deps.extend(crate_paths(&code).into_iter().filter(|d| *d != module));
    }
}

/// A dependency path from `from` back to `to`, if there is one.
fn path_back(
    graph: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    to: &str,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if from == to {
        return Some(vec![to.to_string()]);
    }
    if !seen.insert(from.to_string()) {
        return None;
    }
    for next in graph.get(from).into_iter().flatten() {
        if let Some(mut path) = path_back(graph, next, to, seen) {
            path.insert(0, from.to_string());
            return Some(path);
        }
    }
    None
}

#[test]
fn core_modules_have_no_dependency_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    collect(&src, None, &mut graph);
    // Only edges between the crate's own modules count.
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| modules.contains(d));
    }
    assert!(graph.contains_key("session") && graph.contains_key("turn"));
    let mut cycles = Vec::new();
    for (module, deps) in &graph {
        for dep in deps {
            if let Some(back) = path_back(&graph, dep, module, &mut BTreeSet::new()) {
                cycles.push(format!("{module} -> {}", back.join(" -> ")));
            }
        }
    }
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}

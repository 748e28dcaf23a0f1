//! A crate's modules and the `crate::` paths between them, read from its sources: what
//! the layering tests check (no cycle; each module only above what it uses).
//!
//! A source-level reading, on purpose: it needs no compiler plug-in, sees every
//! `crate::a::b` path and every `use crate::{a, b}` group, and ignores comments and test
//! modules (a doc link or a test's helper is not a dependency).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module name → the crate's modules it names.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// How modules are told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    /// Top-level modules: a directory module and its files are one.
    TopLevel,
    /// Each file is its own module, named by its path under `src` (`a/b` for
    /// `src/a/b.rs`, `a` for `src/a/mod.rs`); a path names the file it reaches first.
    File,
}

/// The graph of the crate whose sources are under `src` (`lib.rs`/`main.rs` left out).
pub fn graph_of(src: &Path, granularity: Granularity) -> std::io::Result<Graph> {
    let mut graph = Graph::new();
    collect(src, granularity, &mut graph)?;
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (module, deps) in graph.iter_mut() {
        let resolved: BTreeSet<String> = deps
            .iter()
            .filter_map(|dep| resolve(dep, &modules))
            .filter(|dep| dep != module)
            .collect();
        *deps = resolved;
    }
    Ok(graph)
}

/// Every cycle through an edge of `graph`, as `a -> b -> … -> a` lines.
pub fn cycles(graph: &Graph) -> Vec<String> {
    let mut found = Vec::new();
    for (module, deps) in graph {
        for dep in deps {
            if let Some(back) = path_back(graph, dep, module, &mut BTreeSet::new()) {
                found.push(format!("{module} -> {}", back.join(" -> ")));
            }
        }
    }
    found
}

/// A path of `crate::a::b::c` segments names the longest module prefix known.
fn resolve(path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let segments: Vec<&str> = path.split("::").collect();
    (1..=segments.len())
        .rev()
        .map(|n| segments[..n].join("/"))
        .find(|candidate| modules.contains(candidate))
}

/// Every `.rs` file below `dir`, in path order, leaving out the directories named in
/// `skip_dirs`: the one walk over a tree of sources that the source-reading tests share.
pub fn rust_files(dir: &Path, skip_dirs: &[&str]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|entry| entry.path());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            let skipped = path
                .file_name()
                .is_some_and(|name| skip_dirs.iter().any(|skip| name == *skip));
            if !skipped {
                files.extend(rust_files(&path, skip_dirs)?);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    Ok(files)
}

fn collect(src: &Path, granularity: Granularity, graph: &mut Graph) -> std::io::Result<()> {
    for path in rust_files(src, &[])? {
        let Ok(relative) = path.strip_prefix(src) else {
            continue;
        };
        let mut parts: Vec<String> = relative
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|last| last == "mod") {
            parts.pop();
        }
        if matches!(parts.as_slice(), [only] if only == "lib" || only == "main") {
            continue;
        }
        let module = match granularity {
            Granularity::TopLevel => parts.first().cloned().unwrap_or_default(),
            Granularity::File => parts.join("/"),
        };
        let code = code_of(&std::fs::read_to_string(&path)?);
        let deps = graph.entry(module).or_default();
        deps.extend(crate_paths(&code).into_iter().map(|p| match granularity {
            Granularity::TopLevel => p.split("::").next().unwrap_or_default().to_string(),
            Granularity::File => p,
        }));
    }
    Ok(())
}

/// The code of a source file without its test module and comments.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths (`a::b`) that `crate::` paths in `code` name, groups included:
/// `crate::{a, b::{c, d}}` names `a`, `b::c` and `b::d`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        paths_at(rest, String::new(), &mut found);
    }
    found
}

/// Reads one path (or group) at the start of `text`, below `prefix`.
fn paths_at(text: &str, prefix: String, found: &mut BTreeSet<String>) {
    let text = text.trim_start();
    if let Some(group) = text.strip_prefix('{') {
        for member in split_group(group) {
            paths_at(member, prefix.clone(), found);
        }
        return;
    }
    let name: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() || name == "self" {
        if !prefix.is_empty() {
            found.insert(prefix);
        }
        return;
    }
    let path = if prefix.is_empty() {
        name.clone()
    } else {
        format!("{prefix}::{name}")
    };
    let after = &text[name.len()..];
    match after.strip_prefix("::") {
        Some(more) => paths_at(more, path, found),
        None => {
            found.insert(path);
        }
    }
}

/// The members of a `{…}` group whose text starts just after the `{`.
fn split_group(text: &str) -> Vec<&str> {
    let mut members = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                members.push(&text[start..i]);
                return members;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                members.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    members
}

/// A dependency path from `from` back to `to`, if there is one.
fn path_back(
    graph: &Graph,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_nested_paths_are_read() {
        let paths = crate_paths(
            "use crate::{mapping, turns};\nuse crate::protocol::{v1, v2::{self, Turn}};\nlet x = crate::wire::item(y);",
        );
        let expected: BTreeSet<String> = [
            "mapping",
            "turns",
            "protocol::v1",
            "protocol::v2",
            "protocol::v2::Turn",
            "wire::item",
        ]
        .into_iter()
        .map(str::to_string)
        .collect();
        assert_eq!(paths, expected);
    }
}

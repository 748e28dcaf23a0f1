//! The crate layers docs/architecture.md states, checked against the manifests: every
//! crate depends only on crates of lower layers, so the engine never reaches up into a
//! front end and no front end into another (but the MCP server, which mounts the
//! app-server's methods).

#![cfg(test)]
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

use interpreter_test_support::module_graph::rust_files;

/// Each workspace crate's layer, lowest first; a crate may depend only on lower layers.
const LAYERS: &[(&str, u32)] = &[
    ("private-fs", 0),
    ("protocol", 0),
    ("telemetry", 0),
    ("test-support", 0),
    ("transport", 1),
    ("model-client", 1),
    ("tools", 1),
    ("mcp-client", 1),
    ("core", 2),
    ("app-server", 3),
    ("acp", 3),
    ("mcp-server", 4),
    ("cli", 5),
    ("fuzz-targets", 5),
];

fn layer(name: &str) -> u32 {
    LAYERS
        .iter()
        .find(|(crate_name, _)| *crate_name == name)
        .map(|(_, layer)| *layer)
        .unwrap_or_else(|| {
            panic!("crate `{name}` has no layer in LAYERS (and docs/architecture.md)")
        })
}

#[test]
fn every_crate_depends_only_on_lower_layers() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).expect("crates/") {
        let dir = entry.expect("entry").path();
        let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let manifest: toml::Table = text.parse().expect("manifest");
        let own = layer(&name);
        let dependencies = manifest
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default();
        for dependency in dependencies.keys() {
            let Some(other) = dependency.strip_prefix("interpreter-") else {
                continue;
            };
            assert!(
                layer(other) < own,
                "{name} (layer {own}) depends on {other} (layer {}): the layers are upside down",
                layer(other)
            );
        }
        checked += 1;
    }
    assert_eq!(
        checked,
        LAYERS.len(),
        "every crate of the workspace has a layer"
    );
}

/// The process environment is read in one place, `main` (and the sandbox helper's own
/// entry, which hands its environment to the command it runs), and injected from there:
/// a library that reads it behind the caller's back ignores what a front end passed it.
#[test]
fn the_environment_is_read_only_in_main() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let allowed = ["cli/src/main.rs", "cli/src/sandbox_cmd.rs"];
    let needles = [
        "env::var(",
        "env::var_os(",
        "env::vars(",
        "env::vars_os(",
        "env::home_dir(",
    ];
    // Sources only: tests, examples, fuzz targets and test helpers set up their own.
    let skipped = [
        "tests",
        "examples",
        "benches",
        "test-support",
        "fuzz-targets",
        "target",
    ];
    let mut readers = Vec::new();
    for path in rust_files(&crates, &skipped).expect("read the sources") {
        let relative = path
            .strip_prefix(&crates)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if allowed.contains(&relative.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read source");
        if text.contains("#![cfg(test)]") {
            continue;
        }
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or_default();
            if needles.iter().any(|needle| line.contains(needle)) {
                readers.push(format!("{relative}:{}", n + 1));
            }
        }
    }
    assert!(
        readers.is_empty(),
        "the environment is read outside main: {readers:?}"
    );
}

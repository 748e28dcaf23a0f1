//! The crate layers docs/architecture.md states, checked against the manifests: every
//! crate depends only on crates of lower layers, so the engine never reaches up into a
//! front end and no front end into another (but the MCP server, which mounts the
//! app-server's methods).

#![cfg(test)]
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

/// Each workspace crate's layer, lowest first; a crate may depend only on lower layers.
const LAYERS: &[(&str, u32)] = &[
    ("private-fs", 0),
    ("protocol", 0),
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

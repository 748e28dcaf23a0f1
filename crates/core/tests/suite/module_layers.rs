//! The engine's modules form layers (docs/architecture.md, "Inside the engine"): each
//! module uses only modules of its own layer or below, and no module reaches, through
//! `crate::` paths in its code, a module that reaches it back. A cycle is what let turn,
//! handlers, compaction, the session and the thread manager all depend on each other;
//! this keeps it from coming back, and keeps the documented order true.

use std::path::Path;

use interpreter_test_support::module_graph::{Granularity, Graph, cycles, graph_of};

/// The layers docs/architecture.md names, highest first; every other module is below
/// them all ("below all"). `fuzzing` is the fuzz targets' door into the engine, above it.
const LAYERS: &[(&str, u32)] = &[
    ("fuzzing", 7),
    ("thread_manager", 6),
    ("op_loop", 5),
    ("turn", 4),
    ("handlers", 3),
    ("hook_runs", 3),
    ("user_requests", 3),
    ("session", 2),
];

fn layer(module: &str) -> u32 {
    LAYERS
        .iter()
        .find(|(name, _)| *name == module)
        .map_or(1, |(_, layer)| *layer)
}

fn core_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    graph_of(&src, Granularity::TopLevel).expect("read core's sources")
}

#[test]
fn core_modules_have_no_dependency_cycle() {
    let graph = core_graph();
    assert!(graph.contains_key("session") && graph.contains_key("turn"));
    let found = cycles(&graph);
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}

#[test]
fn core_modules_use_only_their_layer_and_below() {
    let graph = core_graph();
    for (name, _) in LAYERS {
        assert!(graph.contains_key(*name), "no module `{name}` any more");
    }
    let upward: Vec<String> = graph
        .iter()
        .flat_map(|(module, deps)| {
            deps.iter()
                .filter(|dep| layer(dep) > layer(module))
                .map(move |dep| {
                    format!(
                        "{module} (layer {}) -> {dep} (layer {})",
                        layer(module),
                        layer(dep)
                    )
                })
        })
        .collect();
    assert!(
        upward.is_empty(),
        "modules reaching up (docs/architecture.md, \"Inside the engine\"):\n{}",
        upward.join("\n")
    );
}

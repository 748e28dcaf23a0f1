//! The crate's files form layers: the method families (handlers) use the server state,
//! never the other way round, and no file reaches, through `crate::` paths, a file that
//! reaches it back.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;

use interpreter_test_support::module_graph::{Granularity, cycles, graph_of};

#[test]
fn no_file_reaches_back_to_a_file_that_uses_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph_of(&src, Granularity::File).expect("read the sources");
    assert!(graph.contains_key("state") && graph.contains_key("driver"));
    let found = cycles(&graph);
    assert!(found.is_empty(), "file cycles:\n{}", found.join("\n"));
}

#[test]
fn the_server_state_uses_only_what_lies_below_the_handlers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph_of(&src, Granularity::File).expect("read the sources");
    let below: BTreeSet<&str> = [
        "connection",
        "error",
        "mapping",
        "protocol",
        "protocol/common",
        "protocol/notification_names",
        "protocol/v1",
        "protocol/v2",
    ]
    .into_iter()
    .collect();
    let reached: Vec<&String> = graph["state"]
        .iter()
        .filter(|dep| !below.contains(dep.as_str()))
        .collect();
    assert!(
        reached.is_empty(),
        "the server state reaches up into {reached:?}"
    );
}

//! Entry points for the fuzz targets and their corpus replay (`crates/fuzz-targets`),
//! not an API: the production readers of files written outside this process, driven from
//! bytes in memory. Config loading is fuzzed through the public
//! [`crate::config::load_config`].

use std::path::Path;

use crate::store::rollout::{
    history_from_rollout, items_through_turn, parse_rollout_bytes, summary_from_reader,
    turns_from_rollout,
};

/// Reads `content` as a rollout file, every way a rollout is read: in full (as resume,
/// `threads show` and rebuilding turns do, including the history sent to the model and a
/// fork at every turn), and as the index's head-only summary. Returns how many records
/// were readable.
pub fn read_rollout_content(content: &[u8]) -> usize {
    let path = Path::new("rollout.jsonl");
    let (items, skipped) = parse_rollout_bytes(path, content);
    if let Some(skipped) = skipped {
        // The warning shown on resume is built from untrusted line numbers and errors.
        let _warning = skipped.to_string();
    }
    let _history = history_from_rollout(&items);
    for turn in turns_from_rollout(&items) {
        let _forked = items_through_turn(&items, &turn.id);
    }
    let _summary = summary_from_reader(path, content);
    items.len()
}

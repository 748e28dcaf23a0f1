//! Warnings about the configuration itself (an unknown key, a flag that has no effect).
//!
//! The configuration is loaded again for every thread, call and slash command of a
//! long-running front end (`mcp-server`, `app-server`, the interactive mode), and once
//! more by `--oss`; the same file would otherwise produce the same warning each time.
//! Each distinct warning is logged once per process.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

static REPORTED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();

/// Logs `message` at warn level unless this process already logged it.
pub(crate) fn warn_once(message: String) {
    let reported = REPORTED.get_or_init(Mutex::default);
    // A poisoned set only means a panic elsewhere while inserting; the set is still usable.
    let first = reported
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(message.clone());
    if first {
        tracing::warn!("{message}");
    }
}

//! Lifecycle hooks, compatible with Codex's: programs the user configures to run at
//! `SessionStart`, `UserPromptSubmit`, `PreToolUse`, `PermissionRequest`, `PostToolUse`,
//! `PreCompact`, `PostCompact` and `Stop`, with the event as JSON on stdin, deciding by
//! exit status or JSON output (block a tool call or a prompt, answer an approval, add
//! context for the model, keep a turn going).
//!
//! [`config`] says which hooks exist and which may run (project hooks only once trusted);
//! [`run`] runs one and reads its answer; `hook_runs::run_event` (a layer up, beside the
//! tool handlers, since it needs the session) is the one place the engine runs an event's
//! hooks.

pub mod config;
mod matcher;
pub(crate) mod run;

use interpreter_protocol::HookRunStatus;

pub use config::{HookHandler, HookSet, HookSources, TrustStatus, event_config_name, trust};

/// What people read about a finished run: a headline (`PreToolUse hook blocked`) and what
/// the hook said (its entries, joined), or `None` for a run that passed silently. What
/// front ends without hook events show.
pub fn run_report(run: &interpreter_protocol::HookRunSummary) -> Option<(String, String)> {
    let verdict = match run.status {
        HookRunStatus::Blocked => "blocked",
        HookRunStatus::Stopped => "stopped the turn",
        HookRunStatus::Failed => "failed",
        HookRunStatus::Completed | HookRunStatus::Running => {
            if run.entries.is_empty() {
                return None;
            }
            "ran"
        }
    };
    let said = run
        .entries
        .iter()
        .map(|entry| entry.text.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    Some((
        format!("{} hook {verdict}", event_config_name(run.event_name)),
        said,
    ))
}

/// [`run_report`] as one line (`PreToolUse hook blocked: no rm -rf`).
pub fn run_line(run: &interpreter_protocol::HookRunSummary) -> Option<String> {
    let (headline, said) = run_report(run)?;
    Some(if said.is_empty() {
        headline
    } else {
        format!("{headline}: {said}")
    })
}

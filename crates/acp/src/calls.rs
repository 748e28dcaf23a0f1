//! Engine commands, patches and MCP calls as the tool calls an editor shows: one
//! rendering for live turns and for replayed history.

use std::path::Path;

use interpreter_protocol::{FileChange, FileChanges, McpInvocation, ParsedCommand, UpdatePlanArgs};
use interpreter_tools::display_command;

use interpreter_core::items::ItemStatus;

use crate::update::{PlanEntry, PlanStatus, ToolCall, ToolContent, ToolKind, ToolStatus};

/// Command output kept in a tool call's content: the tail, since the end of a build or a
/// test run is what tells how it went.
const OUTPUT_SHOWN_BYTES: usize = 64 * 1024;

/// A shell command: `read`/`search` when every part of it only reads, else `execute`.
pub(crate) fn command_call(
    call_id: &str,
    command: &[String],
    cwd: &Path,
    parsed: &[ParsedCommand],
    status: ToolStatus,
) -> ToolCall {
    let only = |pred: fn(&ParsedCommand) -> bool| !parsed.is_empty() && parsed.iter().all(pred);
    let kind = if only(|p| matches!(p, ParsedCommand::Read { .. })) {
        ToolKind::Read
    } else if only(|p| {
        matches!(
            p,
            ParsedCommand::Search { .. } | ParsedCommand::ListFiles { .. }
        )
    }) {
        ToolKind::Search
    } else {
        ToolKind::Execute
    };
    let locations = parsed
        .iter()
        .filter_map(|p| match p {
            ParsedCommand::Read { path, .. } => Some(cwd.join(path)),
            _ => None,
        })
        .collect();
    ToolCall {
        id: call_id.to_string(),
        title: display_command(command),
        kind,
        status,
        content: Vec::new(),
        locations,
        raw_input: Some(serde_json::json!({
            "command": command,
            "cwd": cwd,
        })),
        raw_output: None,
    }
}

/// An item's status as a tool call's: a declined one did not do what it was for.
pub(crate) fn item_status(status: ItemStatus) -> ToolStatus {
    match status {
        ItemStatus::InProgress => ToolStatus::InProgress,
        ItemStatus::Completed => ToolStatus::Completed,
        ItemStatus::Failed | ItemStatus::Declined => ToolStatus::Failed,
    }
}

/// Output as a fenced block (its tail when long), or nothing for no output.
pub(crate) fn output_content(output: &str) -> Vec<ToolContent> {
    if output.is_empty() {
        return Vec::new();
    }
    let shown = tail(output, OUTPUT_SHOWN_BYTES);
    let fence = fence_for(shown);
    vec![ToolContent::Text(format!("{fence}\n{shown}\n{fence}"))]
}

/// A patch: `edit`, titled with the files it touches.
pub(crate) fn patch_call(call_id: &str, changes: &FileChanges, status: ToolStatus) -> ToolCall {
    let names: Vec<String> = changes
        .keys()
        .map(|path| {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string())
        })
        .collect();
    ToolCall {
        id: call_id.to_string(),
        title: if names.is_empty() {
            "Edit files".to_string()
        } else {
            format!("Edit {}", names.join(", "))
        },
        kind: ToolKind::Edit,
        status,
        content: diff_content(changes),
        locations: changes
            .iter()
            .flat_map(|(path, change)| {
                let moved = match change {
                    FileChange::Update {
                        move_path: Some(dest),
                        ..
                    } => Some(dest.clone()),
                    _ => None,
                };
                std::iter::once(path.clone()).chain(moved)
            })
            .collect(),
        raw_input: None,
        raw_output: None,
    }
}

/// One diff block per file. An update's old and new text come from the file as it is
/// now (before the patch is applied) and the engine's diff of it; when the file no
/// longer matches (a replay after later edits), the diff itself is shown.
pub(crate) fn diff_content(changes: &FileChanges) -> Vec<ToolContent> {
    changes
        .iter()
        .map(|(path, change)| match change {
            FileChange::Add { content } => ToolContent::Diff {
                path: path.clone(),
                old_text: None,
                new_text: content.clone(),
            },
            FileChange::Delete { content } => ToolContent::Diff {
                path: path.clone(),
                old_text: Some(content.clone()),
                new_text: String::new(),
            },
            FileChange::Update {
                unified_diff,
                move_path,
            } => {
                let shown_path = move_path.clone().unwrap_or_else(|| path.clone());
                // Not blocking on a FIFO, nor reading a device or a huge file, whatever the
                // path became since the patch was planned.
                let old = interpreter_tools::regular_file::read_capped(
                    path,
                    interpreter_tools::apply_patch::MAX_FILE_BYTES,
                )
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok());
                let rebuilt = old.and_then(|old| {
                    interpreter_tools::apply_patch::apply_unified_diff(&old, unified_diff)
                        .map(|new| (old, new))
                });
                match rebuilt {
                    Some((old, new)) => ToolContent::Diff {
                        path: shown_path,
                        old_text: Some(old),
                        new_text: new,
                    },
                    None => ToolContent::Text(format!("```diff\n{unified_diff}\n```")),
                }
            }
        })
        .collect()
}

/// An MCP tool call: `fetch` (it reaches outside the agent), titled `server/tool`.
pub(crate) fn mcp_call(call_id: &str, invocation: &McpInvocation, status: ToolStatus) -> ToolCall {
    ToolCall {
        id: call_id.to_string(),
        title: format!("{}/{}", invocation.server, invocation.tool),
        kind: ToolKind::Fetch,
        status,
        content: Vec::new(),
        locations: Vec::new(),
        raw_input: invocation.arguments.clone(),
        raw_output: None,
    }
}

/// An MCP result's text parts (or the error) as content.
pub(crate) fn mcp_result_content(result: &Result<serde_json::Value, String>) -> Vec<ToolContent> {
    match result {
        Ok(value) => {
            let texts: Vec<String> = value
                .get("content")
                .and_then(|c| c.as_array())
                .into_iter()
                .flatten()
                .filter_map(|part| part.get("text").and_then(|t| t.as_str()))
                .map(str::to_string)
                .collect();
            if texts.is_empty() {
                Vec::new()
            } else {
                output_content(&texts.join("\n"))
            }
        }
        Err(message) => vec![ToolContent::Text(message.clone())],
    }
}

pub(crate) fn mcp_status(result: &Result<serde_json::Value, String>) -> ToolStatus {
    let is_error = |value: &serde_json::Value| {
        value
            .get("isError")
            .and_then(|e| e.as_bool())
            .unwrap_or(false)
    };
    match result {
        Ok(value) if !is_error(value) => ToolStatus::Completed,
        _ => ToolStatus::Failed,
    }
}

/// What the editor is told when the conversation was compacted (live or replayed).
/// A finished hook run the editor should see: one that blocked, stopped, failed or said
/// something, as a finished tool call of its own (ACP has no hook notion). A run that
/// passed silently is not shown.
pub(crate) fn hook_call(run: &interpreter_protocol::HookRunSummary) -> Option<ToolCall> {
    let (title, said) = interpreter_core::hooks::run_report(run)?;
    let text = if said.is_empty() {
        Vec::new()
    } else {
        vec![ToolContent::Text(said)]
    };
    Some(ToolCall {
        id: format!("hook:{}", run.id),
        title,
        kind: ToolKind::Execute,
        status: if run.status == interpreter_protocol::HookRunStatus::Failed {
            ToolStatus::Failed
        } else {
            ToolStatus::Completed
        },
        content: text,
        locations: vec![run.source_path.clone()],
        raw_input: None,
        raw_output: None,
    })
}

pub(crate) fn compaction_text(items_before: usize, items_after: usize) -> String {
    format!("Compacted the conversation: {items_before} items of history are now {items_after}.")
}

pub(crate) fn plan_entries(plan: &UpdatePlanArgs) -> Vec<PlanEntry> {
    plan.plan
        .iter()
        .map(|item| PlanEntry {
            content: item.step.clone(),
            status: match item.status {
                interpreter_protocol::StepStatus::Pending => PlanStatus::Pending,
                interpreter_protocol::StepStatus::InProgress => PlanStatus::InProgress,
                interpreter_protocol::StepStatus::Completed => PlanStatus::Completed,
            },
        })
        .collect()
}

fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// A backtick fence longer than any run of backticks in `text`, so output cannot close
/// it early.
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn output_with_backticks_cannot_close_its_fence() {
        let content = output_content("a ``` b");
        assert_eq!(
            content,
            vec![ToolContent::Text("````\na ``` b\n````".to_string())]
        );
    }

    #[test]
    fn long_output_keeps_its_tail_on_a_char_boundary() {
        let text = format!("{}é", "x".repeat(OUTPUT_SHOWN_BYTES));
        assert!(tail(&text, OUTPUT_SHOWN_BYTES).ends_with('é'));
        assert!(tail(&text, OUTPUT_SHOWN_BYTES).len() <= OUTPUT_SHOWN_BYTES);
    }

    #[test]
    fn a_command_that_only_reads_is_a_read() {
        let parsed = vec![ParsedCommand::Read {
            cmd: "cat a.txt".into(),
            name: "a.txt".into(),
            path: PathBuf::from("a.txt"),
        }];
        let call = command_call(
            "c1",
            &["cat".into(), "a.txt".into()],
            Path::new("/w"),
            &parsed,
            ToolStatus::Pending,
        );
        assert_eq!(call.kind, ToolKind::Read);
        assert_eq!(call.locations, vec![PathBuf::from("/w/a.txt")]);
        assert_eq!(call.title, "cat a.txt");
    }
}

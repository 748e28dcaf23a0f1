//! Engine values → wire values: threads from the index, turns and items from rollouts and
//! events, policies, command actions and file changes.

use interpreter_core::items::{CommandItem, ItemStatus, McpCallItem, TurnItem};
use interpreter_core::store::{ThreadRecord, TurnEntry, TurnOutcome, TurnRecord};
use interpreter_protocol as core;
use interpreter_protocol::{ExecCommandSource, FileChange, FileChanges, ParsedCommand};
use interpreter_tools::display_command;

use crate::protocol::v2::{
    self, CommandAction, CommandExecutionSource, CommandExecutionStatus, FileUpdateChange,
    ItemsView, McpToolCallStatus, PatchApplyStatus, PatchChangeKind, SessionSource,
    SessionSourceValue, Thread, ThreadItem, ThreadStatus, Turn, TurnError, TurnStatus, UserInput,
};

pub fn session_source(source: core::SessionSource) -> SessionSource {
    SessionSource::Known(match source {
        core::SessionSource::Cli => SessionSourceValue::Cli,
        core::SessionSource::Exec => SessionSourceValue::Exec,
        core::SessionSource::AppServer => SessionSourceValue::AppServer,
        core::SessionSource::Unknown => SessionSourceValue::Unknown,
        core::SessionSource::Mcp => {
            return SessionSource::Custom {
                custom: "mcp".to_string(),
            };
        }
        core::SessionSource::Acp => {
            return SessionSource::Custom {
                custom: "acp".to_string(),
            };
        }
    })
}

/// Core form (`mcp`, `app_server`, …), for v1 payloads.
pub fn core_source_name(source: core::SessionSource) -> String {
    serde_json::to_value(source)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string())
}

/// The engine's source for a `thread/list` source kind; `None` for kinds no thread here
/// has (sub-agents).
pub fn source_kind(kind: v2::ThreadSourceKind) -> Option<core::SessionSource> {
    match kind {
        v2::ThreadSourceKind::Cli | v2::ThreadSourceKind::Vscode => Some(core::SessionSource::Cli),
        v2::ThreadSourceKind::Exec => Some(core::SessionSource::Exec),
        v2::ThreadSourceKind::AppServer => Some(core::SessionSource::AppServer),
        v2::ThreadSourceKind::Mcp => Some(core::SessionSource::Mcp),
        v2::ThreadSourceKind::Unknown => Some(core::SessionSource::Unknown),
        v2::ThreadSourceKind::SubAgent
        | v2::ThreadSourceKind::SubAgentReview
        | v2::ThreadSourceKind::SubAgentCompact
        | v2::ThreadSourceKind::SubAgentThreadSpawn
        | v2::ThreadSourceKind::SubAgentOther => None,
    }
}

pub fn approval_policy(policy: core::AskForApproval) -> v2::AskForApproval {
    match policy {
        core::AskForApproval::Untrusted => v2::AskForApproval::Untrusted,
        // v2 has no on-failure; it is on-request's config alias there.
        core::AskForApproval::OnFailure | core::AskForApproval::OnRequest => {
            v2::AskForApproval::OnRequest
        }
        core::AskForApproval::Never => v2::AskForApproval::Never,
        core::AskForApproval::Granular(granular) => v2::AskForApproval::Granular(granular),
    }
}

pub fn approval_policy_in(policy: v2::AskForApproval) -> core::AskForApproval {
    match policy {
        v2::AskForApproval::Untrusted => core::AskForApproval::Untrusted,
        v2::AskForApproval::OnRequest => core::AskForApproval::OnRequest,
        v2::AskForApproval::Never => core::AskForApproval::Never,
        v2::AskForApproval::Granular(granular) => core::AskForApproval::Granular(granular),
    }
}

pub fn sandbox_mode_in(mode: v2::SandboxMode) -> core::SandboxMode {
    match mode {
        v2::SandboxMode::ReadOnly => core::SandboxMode::ReadOnly,
        v2::SandboxMode::WorkspaceWrite => core::SandboxMode::WorkspaceWrite,
        v2::SandboxMode::DangerFullAccess => core::SandboxMode::DangerFullAccess,
    }
}

pub fn sandbox_policy(policy: &core::SandboxPolicy) -> v2::SandboxPolicy {
    match policy {
        core::SandboxPolicy::DangerFullAccess => v2::SandboxPolicy::DangerFullAccess,
        core::SandboxPolicy::ExternalSandbox { network_access } => {
            v2::SandboxPolicy::ExternalSandbox {
                network_access: if *network_access {
                    v2::NetworkAccess::Enabled
                } else {
                    v2::NetworkAccess::Restricted
                },
            }
        }
        core::SandboxPolicy::ReadOnly { network_access } => v2::SandboxPolicy::ReadOnly {
            network_access: *network_access,
        },
        core::SandboxPolicy::WorkspaceWrite {
            writable_roots,
            network_access,
            exclude_tmpdir_env_var,
            exclude_slash_tmp,
        } => v2::SandboxPolicy::WorkspaceWrite {
            writable_roots: writable_roots
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            network_access: *network_access,
            exclude_tmpdir_env_var: *exclude_tmpdir_env_var,
            exclude_slash_tmp: *exclude_slash_tmp,
        },
    }
}

/// The engine's sandbox policy from the wire's (the inverse of [`sandbox_policy`]).
pub fn sandbox_policy_in(policy: &v2::SandboxPolicy) -> core::SandboxPolicy {
    match policy {
        v2::SandboxPolicy::DangerFullAccess => core::SandboxPolicy::DangerFullAccess,
        v2::SandboxPolicy::ExternalSandbox { network_access } => {
            core::SandboxPolicy::ExternalSandbox {
                network_access: *network_access == v2::NetworkAccess::Enabled,
            }
        }
        v2::SandboxPolicy::ReadOnly { network_access } => core::SandboxPolicy::ReadOnly {
            network_access: *network_access,
        },
        v2::SandboxPolicy::WorkspaceWrite {
            writable_roots,
            network_access,
            exclude_tmpdir_env_var,
            exclude_slash_tmp,
        } => core::SandboxPolicy::WorkspaceWrite {
            writable_roots: writable_roots
                .iter()
                .map(std::path::PathBuf::from)
                .collect(),
            network_access: *network_access,
            exclude_tmpdir_env_var: *exclude_tmpdir_env_var,
            exclude_slash_tmp: *exclude_slash_tmp,
        },
    }
}

/// A stored thread, as `thread/list` and `thread/read` show it.
pub fn thread_from_record(record: &ThreadRecord, status: ThreadStatus) -> Thread {
    Thread {
        id: record.id.to_string(),
        session_id: record.id.to_string(),
        forked_from_id: None,
        parent_thread_id: None,
        preview: record.preview.clone().unwrap_or_default(),
        ephemeral: false,
        model_provider: record.model_provider.clone().unwrap_or_default(),
        created_at: record.created_at.timestamp(),
        updated_at: record.updated_at.timestamp(),
        recency_at: None,
        status,
        path: record
            .rollout_path
            .as_ref()
            .map(|path| path.to_string_lossy().into_owned()),
        cwd: record.cwd.to_string_lossy().into_owned(),
        cli_version: env!("CARGO_PKG_VERSION").to_string(),
        source: session_source(record.source),
        thread_source: None,
        agent_nickname: None,
        agent_role: None,
        git_info: record.git_info.as_ref().map(|info| v2::GitInfo {
            sha: info.sha.clone(),
            branch: info.branch.clone(),
            origin_url: info.origin_url.clone(),
        }),
        name: record.name.clone(),
        project_id: None,
        history_mode: v2::ThreadHistoryMode::Legacy,
        turns: Vec::new(),
    }
}

pub fn command_actions(parsed: &[ParsedCommand]) -> Vec<CommandAction> {
    parsed
        .iter()
        .map(|p| match p {
            ParsedCommand::Read { cmd, name, path } => CommandAction::Read {
                command: cmd.clone(),
                name: name.clone(),
                path: path.to_string_lossy().into_owned(),
            },
            ParsedCommand::ListFiles { cmd, path } => CommandAction::ListFiles {
                command: cmd.clone(),
                path: path.clone(),
            },
            ParsedCommand::Search { cmd, query, path } => CommandAction::Search {
                command: cmd.clone(),
                query: query.clone(),
                path: path.clone(),
            },
            ParsedCommand::Unknown { cmd } => CommandAction::Unknown {
                command: cmd.clone(),
            },
        })
        .collect()
}

pub fn file_changes(changes: &FileChanges) -> Vec<FileUpdateChange> {
    changes
        .iter()
        .map(|(path, change)| {
            let (kind, diff) = match change {
                FileChange::Add { content } => (PatchChangeKind::Add, content.clone()),
                FileChange::Delete { content } => (PatchChangeKind::Delete, content.clone()),
                FileChange::Update {
                    unified_diff,
                    move_path,
                } => (
                    PatchChangeKind::Update {
                        move_path: move_path.as_ref().map(|p| p.to_string_lossy().into_owned()),
                    },
                    unified_diff.clone(),
                ),
            };
            FileUpdateChange {
                path: path.to_string_lossy().into_owned(),
                kind,
                diff,
            }
        })
        .collect()
}

/// An item of the engine's model as the wire's: the one place app-server decides how
/// an item looks, live (`item/started`, `item/completed`) and read back (`thread/read`).
/// `client_id` is the id the client gave the user message it sent (`turn/start`), which
/// only that live item carries.
pub fn thread_item(item: &TurnItem, client_id: Option<String>) -> ThreadItem {
    match item {
        TurnItem::UserMessage { id, text } => ThreadItem::UserMessage {
            id: id.clone(),
            client_id,
            content: vec![UserInput::Text {
                text: text.clone(),
                text_elements: Vec::new(),
            }],
        },
        TurnItem::AgentMessage { id, text } => ThreadItem::AgentMessage {
            id: id.clone(),
            text: text.clone(),
            phase: None,
            memory_citation: None,
        },
        TurnItem::Reasoning {
            id,
            text,
            summary,
            content,
        } => {
            // `text` stands in for the raw parts of rollouts written before the two were
            // kept apart.
            let content = if summary.is_empty() && content.is_empty() && !text.is_empty() {
                vec![text.clone()]
            } else {
                content.clone()
            };
            ThreadItem::Reasoning {
                id: id.clone(),
                summary: summary.clone(),
                content,
            }
        }
        TurnItem::Plan { id, text } => ThreadItem::Plan {
            id: id.clone(),
            text: text.clone(),
        },
        TurnItem::EnteredReview { id, review } => ThreadItem::EnteredReviewMode {
            id: id.clone(),
            review: review.clone(),
        },
        TurnItem::ExitedReview { id, review } => ThreadItem::ExitedReviewMode {
            id: id.clone(),
            review: review.clone(),
        },
        TurnItem::Command(command) => command_item(command),
        TurnItem::FileChange(change) => ThreadItem::FileChange {
            id: change.id.clone(),
            changes: file_changes(&change.changes),
            status: match change.status {
                ItemStatus::InProgress => PatchApplyStatus::InProgress,
                ItemStatus::Completed => PatchApplyStatus::Completed,
                ItemStatus::Failed => PatchApplyStatus::Failed,
                ItemStatus::Declined => PatchApplyStatus::Declined,
            },
        },
        TurnItem::McpToolCall(call) => mcp_call_item(call),
        TurnItem::Compaction { id, .. } => ThreadItem::ContextCompaction { id: id.clone() },
    }
}

fn command_item(command: &CommandItem) -> ThreadItem {
    ThreadItem::CommandExecution {
        id: command.id.clone(),
        plugin_id: None,
        script_path: None,
        command: display_command(&command.command),
        cwd: command.cwd.to_string_lossy().into_owned(),
        process_id: None,
        source: match command.source {
            ExecCommandSource::Agent => CommandExecutionSource::Agent,
            ExecCommandSource::UserShell => CommandExecutionSource::UserShell,
        },
        status: match command.status {
            ItemStatus::InProgress => CommandExecutionStatus::InProgress,
            ItemStatus::Completed => CommandExecutionStatus::Completed,
            ItemStatus::Failed => CommandExecutionStatus::Failed,
            ItemStatus::Declined => CommandExecutionStatus::Declined,
        },
        command_actions: command_actions(&command.parsed),
        aggregated_output: Some(command.output.clone()).filter(|o| !o.is_empty()),
        exit_code: command.exit_code,
        duration_ms: command.duration_ms.and_then(|d| i64::try_from(d).ok()),
    }
}

fn mcp_call_item(call: &McpCallItem) -> ThreadItem {
    let (result, error) = match &call.result {
        Some(Ok(value)) => (
            Some(v2::McpToolCallResult {
                content: value
                    .get("content")
                    .and_then(|c| c.as_array().cloned())
                    .unwrap_or_default(),
                structured_content: value.get("structuredContent").cloned(),
                meta: value.get("_meta").cloned(),
            }),
            None,
        ),
        Some(Err(message)) => (
            None,
            Some(v2::McpToolCallError {
                message: message.clone(),
            }),
        ),
        None => (None, None),
    };
    ThreadItem::McpToolCall {
        id: call.id.clone(),
        server: call.invocation.server.clone(),
        tool: call.invocation.tool.clone(),
        status: match call.status {
            ItemStatus::InProgress => McpToolCallStatus::InProgress,
            ItemStatus::Completed => McpToolCallStatus::Completed,
            ItemStatus::Failed | ItemStatus::Declined => McpToolCallStatus::Failed,
        },
        arguments: call.invocation.arguments.clone().unwrap_or_default(),
        result,
        error,
        duration_ms: call.duration_ms.and_then(|d| i64::try_from(d).ok()),
    }
}

pub fn turn_error(message: String, kind: Option<core::ErrorKind>) -> TurnError {
    let info = kind.map(|kind| match kind {
        core::ErrorKind::ContextWindowExceeded => v2::CodexErrorInfo::ContextWindowExceeded,
        core::ErrorKind::Unauthorized => v2::CodexErrorInfo::Unauthorized,
        core::ErrorKind::BadRequest => v2::CodexErrorInfo::BadRequest,
        core::ErrorKind::ServerOverloaded => v2::CodexErrorInfo::ServerOverloaded,
        // No connection at all (refused, unresolvable, TLS) is not a stream that broke;
        // HTTP statuses have their own kinds above, so neither carries a status code.
        core::ErrorKind::Connection => v2::CodexErrorInfo::HttpConnectionFailed {
            http_status_code: None,
        },
        core::ErrorKind::StreamIdle => v2::CodexErrorInfo::ResponseStreamDisconnected {
            http_status_code: None,
        },
        core::ErrorKind::Internal => v2::CodexErrorInfo::InternalServerError,
    });
    TurnError {
        message,
        codex_error_info: info,
        additional_details: None,
    }
}

/// Codex's collaboration mode → the engine's. The mode's settings (model, effort) are
/// turn settings, applied with the others.
pub fn collaboration_mode_in(mode: &v2::CollaborationMode) -> core::CollaborationMode {
    core::CollaborationMode {
        kind: match mode.mode {
            v2::ModeKind::Plan => core::CollaborationModeKind::Plan,
            v2::ModeKind::Default => core::CollaborationModeKind::Default,
        },
        developer_instructions: mode.settings.developer_instructions.clone(),
    }
}

/// Codex's review target → the engine's.
pub fn review_target_in(target: v2::ReviewTarget) -> core::ReviewTarget {
    match target {
        v2::ReviewTarget::UncommittedChanges => core::ReviewTarget::UncommittedChanges,
        v2::ReviewTarget::BaseBranch { branch } => core::ReviewTarget::BaseBranch { branch },
        v2::ReviewTarget::Commit { sha, title } => core::ReviewTarget::Commit { sha, title },
        v2::ReviewTarget::Custom { instructions } => core::ReviewTarget::Custom { instructions },
    }
}

/// A recorded turn with its items (`thread/read includeTurns`, `thread/resume`).
pub fn turn_from_record(record: &TurnRecord) -> Turn {
    let items = record
        .entries
        .iter()
        .filter_map(|entry| match entry {
            TurnEntry::Item(item) => Some(thread_item(item, None)),
            // Errors are not items; they live in the turn's `error`.
            TurnEntry::Error { .. } => None,
        })
        .collect();
    let status = match record.outcome {
        TurnOutcome::InProgress => TurnStatus::InProgress,
        TurnOutcome::Completed => TurnStatus::Completed,
        TurnOutcome::Interrupted => TurnStatus::Interrupted,
        TurnOutcome::Failed => TurnStatus::Failed,
    };
    Turn {
        id: record.id.clone(),
        items,
        items_view: ItemsView::Full,
        status,
        // As the live driver reports a failed turn: with what it did before it stopped.
        error: record.error.clone().map(|message| {
            let mut error = turn_error(message, record.error_kind);
            error.additional_details = Some(record.recap.render());
            error
        }),
        started_at: None,
        completed_at: None,
        duration_ms: None,
    }
}

/// A goal as the wire shows it.
pub(crate) fn wire_goal(thread_id: core::ThreadId, goal: core::ThreadGoal) -> v2::ThreadGoal {
    v2::ThreadGoal {
        thread_id: thread_id.to_string(),
        objective: goal.objective,
        status: match goal.status {
            core::GoalStatus::Active => v2::ThreadGoalStatus::Active,
            core::GoalStatus::Paused => v2::ThreadGoalStatus::Paused,
            core::GoalStatus::Blocked => v2::ThreadGoalStatus::Blocked,
            core::GoalStatus::UsageLimited => v2::ThreadGoalStatus::UsageLimited,
            core::GoalStatus::BudgetLimited => v2::ThreadGoalStatus::BudgetLimited,
            core::GoalStatus::Complete => v2::ThreadGoalStatus::Complete,
        },
        token_budget: goal.token_budget,
        tokens_used: goal.tokens_used,
        time_used_seconds: goal.time_used_seconds,
        created_at: goal.created_at,
        updated_at: goal.updated_at,
    }
}

#[cfg(test)]
mod tests {
    use interpreter_core::items::FileChangeItem;
    use interpreter_protocol::McpInvocation;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn wire(item: &TurnItem) -> serde_json::Value {
        serde_json::to_value(thread_item(item, None)).unwrap_or_default()
    }

    #[test]
    fn reasoning_from_before_parts_were_kept_apart_reads_as_its_raw_content() {
        let legacy = TurnItem::Reasoning {
            id: "1-0".into(),
            text: "thought".into(),
            summary: Vec::new(),
            content: Vec::new(),
        };
        assert_eq!(
            wire(&legacy),
            json!({"type": "reasoning", "id": "1-0", "summary": [], "content": ["thought"]})
        );
        let split = TurnItem::Reasoning {
            id: "1-reasoning-2".into(),
            text: "raw".into(),
            summary: vec!["sum".into()],
            content: vec!["raw".into()],
        };
        assert_eq!(wire(&split)["summary"], json!(["sum"]));
        assert_eq!(wire(&split)["content"], json!(["raw"]));
    }

    #[test]
    fn every_item_status_has_its_wire_status() {
        let change = |status| {
            wire(&TurnItem::FileChange(FileChangeItem {
                id: "call_p".into(),
                changes: FileChanges::new(),
                status,
                output: String::new(),
            }))["status"]
                .clone()
        };
        assert_eq!(change(ItemStatus::InProgress), "inProgress");
        assert_eq!(change(ItemStatus::Completed), "completed");
        assert_eq!(change(ItemStatus::Failed), "failed");
        assert_eq!(change(ItemStatus::Declined), "declined");
        let call = |status, result| {
            wire(&TurnItem::McpToolCall(McpCallItem {
                id: "call_m".into(),
                invocation: McpInvocation {
                    server: "s".into(),
                    tool: "t".into(),
                    arguments: None,
                },
                status,
                result,
                duration_ms: None,
            }))
        };
        let running = call(ItemStatus::InProgress, None);
        assert_eq!(running["status"], "inProgress");
        assert!(running["result"].is_null() && running["error"].is_null());
        let failed = call(ItemStatus::Failed, Some(Err("gone".into())));
        assert_eq!(failed["status"], "failed");
        assert_eq!(failed["error"]["message"], "gone");
        let done = call(
            ItemStatus::Completed,
            Some(Ok(json!({"content": [{"type": "text", "text": "r"}]}))),
        );
        assert_eq!(done["result"]["content"][0]["text"], "r");
    }

    #[test]
    fn a_recorded_turn_shows_its_items_and_keeps_errors_out_of_them() {
        let record = TurnRecord {
            id: "3".into(),
            outcome: TurnOutcome::Failed,
            error: Some("boom".into()),
            entries: vec![
                TurnEntry::Item(TurnItem::UserMessage {
                    id: "3-user-1".into(),
                    text: "hi".into(),
                }),
                TurnEntry::Error {
                    message: "boom".into(),
                },
            ],
            error_kind: None,
            recap: Default::default(),
            last_agent_message: None,
            output_limit: false,
        };
        let turn = serde_json::to_value(turn_from_record(&record)).unwrap_or_default();
        assert_eq!(turn["status"], "failed");
        assert_eq!(turn["error"]["message"], "boom");
        assert_eq!(turn["items"].as_array().map(Vec::len), Some(1));
        assert_eq!(turn["items"][0]["id"], "3-user-1");
    }
}

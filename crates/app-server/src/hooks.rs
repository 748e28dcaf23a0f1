//! Hooks on the wire: the engine's hook runs and configured hooks as Codex's v2 shapes
//! (`hook/started`, `hook/completed`, `hooks/list`). Pure mappings; the engine decides
//! what runs and what it decided.

use interpreter_core::hooks::{HookHandler, HookSet, TrustStatus};
use interpreter_protocol as core;

use crate::protocol::v2;

pub(crate) fn event_name(event: core::HookEventName) -> v2::HookEventName {
    match event {
        core::HookEventName::SessionStart => v2::HookEventName::SessionStart,
        core::HookEventName::UserPromptSubmit => v2::HookEventName::UserPromptSubmit,
        core::HookEventName::PreToolUse => v2::HookEventName::PreToolUse,
        core::HookEventName::PermissionRequest => v2::HookEventName::PermissionRequest,
        core::HookEventName::PostToolUse => v2::HookEventName::PostToolUse,
        core::HookEventName::PreCompact => v2::HookEventName::PreCompact,
        core::HookEventName::PostCompact => v2::HookEventName::PostCompact,
        core::HookEventName::Stop => v2::HookEventName::Stop,
    }
}

fn source(source: core::HookSource) -> v2::HookSource {
    match source {
        core::HookSource::User => v2::HookSource::User,
        core::HookSource::Project => v2::HookSource::Project,
    }
}

/// A run, for `hook/started` / `hook/completed`.
pub(crate) fn run_notification(
    thread_id: &str,
    event: core::HookRunEvent,
) -> v2::HookRunNotification {
    let run = event.run;
    v2::HookRunNotification {
        thread_id: thread_id.to_string(),
        turn_id: event.turn_id,
        run: v2::HookRunSummary {
            id: run.id,
            event_name: event_name(run.event_name),
            handler_type: v2::HookHandlerType::Command,
            execution_mode: v2::HookExecutionMode::Sync,
            scope: match run.scope {
                core::HookScope::Thread => v2::HookScope::Thread,
                core::HookScope::Turn => v2::HookScope::Turn,
            },
            source: source(run.source),
            source_path: run.source_path.to_string_lossy().into_owned(),
            display_order: run.display_order,
            status: match run.status {
                core::HookRunStatus::Running => v2::HookRunStatus::Running,
                core::HookRunStatus::Completed => v2::HookRunStatus::Completed,
                core::HookRunStatus::Failed => v2::HookRunStatus::Failed,
                core::HookRunStatus::Blocked => v2::HookRunStatus::Blocked,
                core::HookRunStatus::Stopped => v2::HookRunStatus::Stopped,
            },
            status_message: run.status_message,
            started_at: run.started_at,
            completed_at: run.completed_at,
            duration_ms: run.duration_ms,
            entries: run
                .entries
                .into_iter()
                .map(|entry| v2::HookOutputEntry {
                    kind: match entry.kind {
                        core::HookOutputEntryKind::Warning => v2::HookOutputEntryKind::Warning,
                        core::HookOutputEntryKind::Stop => v2::HookOutputEntryKind::Stop,
                        core::HookOutputEntryKind::Feedback => v2::HookOutputEntryKind::Feedback,
                        core::HookOutputEntryKind::Context => v2::HookOutputEntryKind::Context,
                        core::HookOutputEntryKind::Error => v2::HookOutputEntryKind::Error,
                    },
                    text: entry.text,
                })
                .collect(),
        },
    }
}

fn metadata(handler: &HookHandler) -> v2::HookMetadata {
    v2::HookMetadata {
        key: handler.key.clone(),
        event_name: event_name(handler.event),
        handler_type: v2::HookHandlerType::Command,
        command: handler.command.clone(),
        run_async: handler.background,
        matcher: handler.matcher.clone(),
        timeout_sec: handler.timeout.as_secs(),
        status_message: handler.status_message.clone(),
        source: source(handler.source),
        source_path: handler.source_path.to_string_lossy().into_owned(),
        display_order: handler.display_order,
        enabled: handler.enabled,
        is_managed: false,
        current_hash: handler.current_hash.clone(),
        trust_status: match handler.trust {
            TrustStatus::Trusted => v2::HookTrustStatus::Trusted,
            TrustStatus::Untrusted => v2::HookTrustStatus::Untrusted,
            TrustStatus::Modified => v2::HookTrustStatus::Modified,
        },
    }
}

/// One directory's entry of `hooks/list`.
pub(crate) fn list_entry(cwd: String, set: &HookSet) -> v2::HooksListEntry {
    v2::HooksListEntry {
        cwd,
        hooks: set.handlers.iter().map(metadata).collect(),
        errors: set
            .errors
            .iter()
            .map(|(path, message)| v2::HookErrorInfo {
                path: path.to_string_lossy().into_owned(),
                message: message.clone(),
            })
            .collect(),
        warnings: set.warnings.clone(),
    }
}

//! Approvals asked of the MCP client: the elicitation we send for a command or a patch,
//! and how a legacy-era client is asked (`elicitation/create`, with a deadline).
//!
//! Answers are decoded by [`decode_approval_answer`], the one fail-closed decoder every
//! front end shares. The 2026-07-28 path (MRTR) reuses the same elicitation params inside
//! an `InputRequiredResult`; see [`crate::mrtr`].
//!
//! Deliberate fixes over the reference: the requested schema is a real, flat form with a
//! `decision` enum (the reference sent an empty one and expected a non-spec answer), the
//! spec answer `{action, content}` is understood, a client error or a deadline denies
//! instead of leaving the turn blocked forever, and we only elicit from clients that
//! declared the capability.

use std::path::PathBuf;
use std::time::Duration;

use interpreter_protocol::approval_answer::approval_form_schema;
use interpreter_protocol::{
    ApplyPatchApprovalRequestEvent, ExecApprovalRequestEvent, ReviewDecision, ThreadId,
};
use interpreter_tools::display_command;
use rmcp::model::{CancelledNotificationParam, CustomRequest, ServerRequest};
use rmcp::service::{PeerRequestOptions, RequestHandle};
use rmcp::{Peer, RoleServer};
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::turns::Answer;

/// `elicitation/create` params for an exec approval. The `codex_*` fields are the
/// reference's correlation fields, kept for clients that read them.
#[derive(Debug, Serialize)]
pub struct ExecApprovalParams {
    pub message: String,
    #[serde(rename = "requestedSchema")]
    pub requested_schema: Value,
    #[serde(rename = "threadId")]
    pub thread_id: String,
    pub codex_elicitation: &'static str,
    pub codex_mcp_tool_call_id: String,
    pub codex_event_id: String,
    pub codex_call_id: String,
    pub codex_command: Vec<String>,
    pub codex_cwd: PathBuf,
    pub codex_parsed_cmd: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_reason: Option<String>,
}

/// `elicitation/create` params for a patch approval.
#[derive(Debug, Serialize)]
pub struct PatchApprovalParams {
    pub message: String,
    #[serde(rename = "requestedSchema")]
    pub requested_schema: Value,
    #[serde(rename = "threadId")]
    pub thread_id: String,
    pub codex_elicitation: &'static str,
    pub codex_mcp_tool_call_id: String,
    pub codex_event_id: String,
    pub codex_call_id: String,
    pub codex_changes: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_grant_root: Option<PathBuf>,
}

/// The params of the elicitation for an exec approval.
pub fn exec_params(
    event: &ExecApprovalRequestEvent,
    event_id: &str,
    thread_id: ThreadId,
    tool_call_id: &str,
) -> Value {
    let mut message = format!(
        "Allow the agent to run `{}` in `{}`?",
        display_command(&event.command),
        event.cwd.display()
    );
    if let Some(reason) = &event.reason {
        message = format!("{reason}\n{message}");
    }
    let params = ExecApprovalParams {
        message,
        requested_schema: approval_form_schema(),
        thread_id: thread_id.to_string(),
        codex_elicitation: "exec-approval",
        codex_mcp_tool_call_id: tool_call_id.to_string(),
        codex_event_id: event_id.to_string(),
        codex_call_id: event.call_id.clone(),
        codex_command: event.command.clone(),
        codex_cwd: event.cwd.clone(),
        codex_parsed_cmd: serde_json::to_value(&event.parsed_cmd).unwrap_or(Value::Null),
        codex_reason: event.reason.clone(),
    };
    serde_json::to_value(params).unwrap_or(Value::Null)
}

/// The params of the elicitation for a patch approval.
pub fn patch_params(
    event: &ApplyPatchApprovalRequestEvent,
    event_id: &str,
    thread_id: ThreadId,
    tool_call_id: &str,
) -> Value {
    let files: Vec<String> = event
        .changes
        .keys()
        .map(|p| p.display().to_string())
        .collect();
    let mut message = format!(
        "Allow the agent to apply changes to {}?",
        if files.is_empty() {
            "no files".to_string()
        } else {
            files.join(", ")
        }
    );
    if let Some(reason) = &event.reason {
        message = format!("{reason}\n{message}");
    }
    let params = PatchApprovalParams {
        message,
        requested_schema: approval_form_schema(),
        thread_id: thread_id.to_string(),
        codex_elicitation: "patch-approval",
        codex_mcp_tool_call_id: tool_call_id.to_string(),
        codex_event_id: event_id.to_string(),
        codex_call_id: event.call_id.clone(),
        codex_changes: serde_json::to_value(&event.changes).unwrap_or(Value::Null),
        codex_reason: event.reason.clone(),
        codex_grant_root: event.grant_root.clone(),
    };
    serde_json::to_value(params).unwrap_or(Value::Null)
}

/// The spec-only subset of our params (`message`, `requestedSchema`), as a 2026-07-28
/// `ElicitRequest` carries them inside `inputRequests`. A downstream server's own question
/// (`is_question`) is passed as it came.
pub fn spec_elicitation_params(params: &Value, is_question: bool) -> Value {
    if is_question {
        return params.clone();
    }
    serde_json::json!({
        "mode": "form",
        "message": params.get("message").cloned().unwrap_or_default(),
        "requestedSchema": params.get("requestedSchema").cloned().unwrap_or_else(approval_form_schema),
    })
}

/// How an elicitation ended, for the result note.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitOutcome {
    /// The client's result, exactly as sent; the asker decodes it.
    Answered(Value),
    ClientError,
    TimedOut,
    Cancelled,
}

impl ElicitOutcome {
    pub fn answer(self) -> Answer {
        match self {
            Self::Answered(value) => Answer::Client(value),
            Self::ClientError => Answer::Decided(ReviewDecision::Denied),
            Self::TimedOut => Answer::Decided(ReviewDecision::TimedOut),
            Self::Cancelled => Answer::Decided(ReviewDecision::Abort),
        }
    }
}

/// Ask a legacy-era client with `elicitation/create` and wait at most `deadline`, or
/// until `cancel` fires. The request goes out as a custom request so the reference's
/// `codex_*` correlation fields survive, and the answer comes back untyped so the one
/// decoder sees exactly what the client sent.
pub async fn elicit(
    peer: &Peer<RoleServer>,
    params: Value,
    deadline: Duration,
    cancel: &CancellationToken,
) -> ElicitOutcome {
    let request =
        ServerRequest::CustomRequest(CustomRequest::new("elicitation/create", Some(params)));
    let mut options = PeerRequestOptions::no_options();
    // rmcp's own timeout would also fire; ours below decides and sends the cancel.
    options.timeout = Some(deadline + Duration::from_secs(1));
    let handle: RequestHandle<RoleServer> =
        match peer.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            Err(e) => {
                tracing::warn!("could not send elicitation/create: {e}");
                return ElicitOutcome::ClientError;
            }
        };
    let request_id = handle.id.clone();
    let outcome = tokio::select! {
        answer = handle.await_response() => match answer {
            Ok(result) => match serde_json::to_value(&result) {
                Ok(value) => ElicitOutcome::Answered(value),
                Err(_) => ElicitOutcome::ClientError,
            },
            Err(e) => {
                tracing::warn!("the client answered elicitation/create with an error: {e}");
                ElicitOutcome::ClientError
            }
        },
        () = tokio::time::sleep(deadline) => ElicitOutcome::TimedOut,
        () = cancel.cancelled() => ElicitOutcome::Cancelled,
    };
    if matches!(outcome, ElicitOutcome::TimedOut | ElicitOutcome::Cancelled) {
        // Tell the client to close its dialog; a late answer is then ignored.
        let reason = if matches!(outcome, ElicitOutcome::TimedOut) {
            "approval timed out"
        } else {
            "tool call cancelled"
        };
        let param = CancelledNotificationParam::new(Some(request_id), Some(reason.to_string()));
        if let Err(e) = peer.notify_cancelled(param).await {
            tracing::debug!("could not cancel the elicitation: {e}");
        }
    }
    outcome
}

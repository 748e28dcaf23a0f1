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
use rmcp::model::{
    CancelledNotificationParam, CustomRequest, GetExtensions, RequestId, ServerRequest,
};
use rmcp::service::{OriginatingRequestId, PeerRequestOptions, RequestHandle};
use rmcp::{Peer, RoleServer};
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::turns::Answer;

/// `elicitation/create` params for an exec approval. The `codex_*` fields are the
/// reference's correlation fields, kept for clients that read them.
#[derive(Debug, Serialize)]
pub(crate) struct ExecApprovalParams {
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
pub(crate) struct PatchApprovalParams {
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
pub(crate) fn exec_params(
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
pub(crate) fn patch_params(
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
pub(crate) fn spec_elicitation_params(params: &Value, is_question: bool) -> Value {
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
pub(crate) enum ElicitOutcome {
    /// The client's result, exactly as sent; the asker decodes it.
    Answered(Value),
    ClientError,
    TimedOut,
    Cancelled,
}

impl ElicitOutcome {
    pub(crate) fn answer(self) -> Answer {
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
///
/// `origin` is the `tools/call` asking. Over streamable HTTP the question then goes on
/// that call's SSE response stream (the spec's SHOULD), not only on the optional GET
/// stream a client MAY never open. rmcp ties a request to its origin by itself only while
/// the handler's own task sends it; ours is sent from the turn's follower task, so the
/// marker is set here.
pub(crate) async fn elicit(
    peer: &Peer<RoleServer>,
    origin: RequestId,
    params: Value,
    expired: &CancellationToken,
    deadline: Duration,
    cancel: &CancellationToken,
) -> ElicitOutcome {
    let mut request =
        ServerRequest::CustomRequest(CustomRequest::new("elicitation/create", Some(params)));
    request
        .extensions_mut()
        .insert(OriginatingRequestId(origin));
    let mut options = PeerRequestOptions::no_options();
    // The engine's expiry decides and sends the cancel; rmcp's own timeout, past the
    // engine's deadline, only keeps its request table bounded.
    options.timeout = Some(deadline + Duration::from_secs(5));
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
        () = expired.cancelled() => ElicitOutcome::TimedOut,
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

/// The error answer that stands in for a client's unreadable answer to one of our own
/// requests, or `None` when `message` is not such an answer.
///
/// A message with an `id`, no `method`, that does not decode as a JSON-RPC response (say,
/// both `result` and `error`) is refused by rmcp's decoder, and the request it answers
/// would then wait for its deadline: a ten-minute hang for an approval. Turned into an
/// error answer for the same id, it settles the request at once, and an approval that got
/// an error is denied (fail closed: an answer we cannot read is a "no").
pub(crate) fn unreadable_answer_as_error(message: &Value, why: &str) -> Option<Value> {
    let object = message.as_object()?;
    if object.contains_key("method") {
        return None;
    }
    let id = object
        .get("id")
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64())?;
    Some(serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": rmcp::model::ErrorCode::INVALID_REQUEST.0,
            "message": format!("unreadable answer: {why}"),
        },
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_answers_with_an_id_are_replaced() {
        let both =
            json!({"jsonrpc": "2.0", "id": 3, "result": {}, "error": {"code": 1, "message": "x"}});
        let replaced =
            unreadable_answer_as_error(&both, "both result and error").unwrap_or_default();
        assert_eq!(replaced["id"], 3);
        assert_eq!(replaced["error"]["code"], -32600);
        let decoded: Result<rmcp::model::ClientJsonRpcMessage, _> =
            serde_json::from_value(replaced);
        assert!(decoded.is_ok(), "{decoded:?}");
        assert!(
            unreadable_answer_as_error(&json!({"jsonrpc": "2.0", "id": 3, "method": "x"}), "")
                .is_none()
        );
        assert!(unreadable_answer_as_error(&json!({"jsonrpc": "2.0", "result": {}}), "").is_none());
        assert!(unreadable_answer_as_error(&json!([1]), "").is_none());
    }
}

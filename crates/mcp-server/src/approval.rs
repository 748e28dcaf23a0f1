//! Approvals as `elicitation/create`: the request we send, and how any answer (spec,
//! legacy, garbage, error, silence) becomes a [`ReviewDecision`].
//!
//! Deliberate fixes over the reference: the requested schema is a real, flat form with a
//! `decision` enum (the reference sent an empty one and expected a non-spec answer), the
//! spec answer `{action, content}` is understood, a client error or a deadline denies
//! instead of leaving the turn blocked forever, and we only elicit from clients that
//! declared the capability.

use std::path::PathBuf;
use std::time::Duration;

use interpreter_protocol::{
    ApplyPatchApprovalRequestEvent, ExecApprovalRequestEvent, ReviewDecision, ThreadId,
};
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::outgoing::{Outgoing, RequestId};
use crate::rmcp_glue::{ElicitAnswer, parse_elicit_result};

/// Decisions a client may pick in the form.
const DECISIONS: [&str; 4] = ["approved", "approved_for_session", "denied", "abort"];

fn requested_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "description": "approved: run once; approved_for_session: run and stop asking for this; denied: refuse, the agent goes on; abort: refuse and stop the turn.",
                "enum": DECISIONS,
                "default": "approved"
            }
        },
        "required": ["decision"]
    })
}

/// `elicitation/create` params for an exec approval.
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

/// The tools/call id as text, as the reference's `codex_mcp_tool_call_id`.
pub fn request_id_text(id: &RequestId) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn render_command(command: &[String]) -> String {
    shlex::try_join(command.iter().map(String::as_str)).unwrap_or_else(|_| command.join(" "))
}

pub fn exec_params(
    event: &ExecApprovalRequestEvent,
    event_id: &str,
    thread_id: ThreadId,
    request_id: &RequestId,
) -> ExecApprovalParams {
    let mut message = format!(
        "Allow the agent to run `{}` in `{}`?",
        render_command(&event.command),
        event.cwd.display()
    );
    if let Some(reason) = &event.reason {
        message = format!("{reason}\n{message}");
    }
    ExecApprovalParams {
        message,
        requested_schema: requested_schema(),
        thread_id: thread_id.to_string(),
        codex_elicitation: "exec-approval",
        codex_mcp_tool_call_id: request_id_text(request_id),
        codex_event_id: event_id.to_string(),
        codex_call_id: event.call_id.clone(),
        codex_command: event.command.clone(),
        codex_cwd: event.cwd.clone(),
        codex_parsed_cmd: serde_json::to_value(&event.parsed_cmd).unwrap_or(Value::Null),
        codex_reason: event.reason.clone(),
    }
}

pub fn patch_params(
    event: &ApplyPatchApprovalRequestEvent,
    event_id: &str,
    thread_id: ThreadId,
    request_id: &RequestId,
) -> PatchApprovalParams {
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
    PatchApprovalParams {
        message,
        requested_schema: requested_schema(),
        thread_id: thread_id.to_string(),
        codex_elicitation: "patch-approval",
        codex_mcp_tool_call_id: request_id_text(request_id),
        codex_event_id: event_id.to_string(),
        codex_call_id: event.call_id.clone(),
        codex_changes: serde_json::to_value(&event.changes).unwrap_or(Value::Null),
        codex_reason: event.reason.clone(),
        codex_grant_root: event.grant_root.clone(),
    }
}

fn decision_from_str(s: &str) -> Option<ReviewDecision> {
    serde_json::from_value(Value::String(s.to_string())).ok()
}

/// Interpret a client's `elicitation/create` result. Anything we cannot read denies.
pub fn decision_from_answer(result: &Value) -> ReviewDecision {
    if let Some(answer) = parse_elicit_result(result) {
        return match answer {
            ElicitAnswer::Accept(content) => match content.as_ref().and_then(|c| c.get("decision"))
            {
                None => ReviewDecision::Approved,
                Some(Value::String(s)) => decision_from_str(s).unwrap_or(ReviewDecision::Denied),
                Some(_) => ReviewDecision::Denied,
            },
            ElicitAnswer::Decline | ElicitAnswer::Cancel => ReviewDecision::Denied,
        };
    }
    match result.get("decision") {
        Some(Value::String(s)) => decision_from_str(s).unwrap_or(ReviewDecision::Denied),
        // Reference-era object decisions: `{"denied": {...}}`, `{"approved_execpolicy_amendment": ...}`.
        Some(Value::Object(map)) if map.contains_key("approved_execpolicy_amendment") => {
            ReviewDecision::Approved
        }
        _ => ReviewDecision::Denied,
    }
}

/// How an elicitation ended, for logs and the result note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitOutcome {
    Answered(ReviewDecision),
    ClientError(ReviewDecision),
    TimedOut,
    Cancelled,
}

impl ElicitOutcome {
    pub fn decision(&self) -> ReviewDecision {
        match self {
            Self::Answered(d) | Self::ClientError(d) => *d,
            Self::TimedOut => ReviewDecision::TimedOut,
            Self::Cancelled => ReviewDecision::Abort,
        }
    }
}

/// Send `elicitation/create` and wait for the answer, at most `deadline`, or until
/// `cancel` fires. Never waits longer.
pub async fn elicit(
    outgoing: &Outgoing,
    params: Value,
    deadline: Duration,
    cancel: &CancellationToken,
) -> ElicitOutcome {
    let (id, answer) = outgoing.request("elicitation/create", &params);
    let outcome = tokio::select! {
        answer = answer => match answer {
            Ok(Ok(result)) => ElicitOutcome::Answered(decision_from_answer(&result)),
            Ok(Err(error)) => {
                tracing::warn!("client answered elicitation {id} with an error: {}", error.message);
                ElicitOutcome::ClientError(ReviewDecision::Denied)
            }
            Err(_) => ElicitOutcome::ClientError(ReviewDecision::Denied),
        },
        () = tokio::time::sleep(deadline) => ElicitOutcome::TimedOut,
        () = cancel.cancelled() => ElicitOutcome::Cancelled,
    };
    if matches!(outcome, ElicitOutcome::TimedOut | ElicitOutcome::Cancelled) {
        outgoing.forget_request(id);
        // Tell the client to close its dialog; a late answer is then ignored.
        outgoing.notify(
            "notifications/cancelled",
            &json!({"requestId": id, "reason": if outcome == ElicitOutcome::TimedOut {
                "approval timed out"
            } else {
                "tool call cancelled"
            }}),
        );
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_map_to_decisions() {
        let cases = [
            (json!({"action": "accept"}), ReviewDecision::Approved),
            (
                json!({"action": "accept", "content": {}}),
                ReviewDecision::Approved,
            ),
            (
                json!({"action": "accept", "content": {"decision": "approved_for_session"}}),
                ReviewDecision::ApprovedForSession,
            ),
            (
                json!({"action": "accept", "content": {"decision": "bogus"}}),
                ReviewDecision::Denied,
            ),
            (json!({"action": "decline"}), ReviewDecision::Denied),
            (json!({"action": "cancel"}), ReviewDecision::Denied),
            (json!({"decision": "approved"}), ReviewDecision::Approved),
            (json!({"decision": "abort"}), ReviewDecision::Abort),
            (
                json!({"decision": {"denied": {"rejection": "no"}}}),
                ReviewDecision::Denied,
            ),
            (json!("allow"), ReviewDecision::Denied),
            (json!({"whatever": 1}), ReviewDecision::Denied),
        ];
        for (answer, expected) in cases {
            assert_eq!(decision_from_answer(&answer), expected, "{answer}");
        }
    }

    #[test]
    fn schema_is_flat_primitive_form() {
        let schema = requested_schema();
        assert_eq!(schema["type"], "object");
        for (_, prop) in schema["properties"].as_object().into_iter().flatten() {
            assert_eq!(prop["type"], "string");
        }
    }
}

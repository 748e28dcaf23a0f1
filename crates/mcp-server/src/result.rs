//! Building `tools/call` results: the one place that decides their shape.
//!
//! Every result, success or failure, carries `structuredContent {threadId, content,
//! status?}` so it validates against the tools' `outputSchema` (strict clients reject a
//! result without it), and the same text as a `TextContent` block for clients that read
//! only `content`. `threadId` is empty when no thread exists yet.
//!
//! When a thread exists, a second `TextContent` block carries `{"threadId", "status"}` as
//! JSON: hosts that hand their model only the text blocks (Gemini CLI drops
//! `structuredContent`) would otherwise never let it call `codex-reply`. The spec asks a
//! tool with structured output to serialize it into a text block too; the answer itself is
//! not repeated there, so a long answer is not sent twice.

use interpreter_core::items::TurnRecap;
use interpreter_protocol::ThreadId;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;

/// Where a thread's turn stands, as the tools report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TurnStatus {
    Running,
    WaitingForApproval,
    Completed,
    Failed,
    Interrupted,
    Idle,
}

impl TurnStatus {
    fn is_error(self) -> bool {
        matches!(self, Self::Failed | Self::Interrupted)
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Structured<'a> {
    thread_id: String,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<TurnStatus>,
    /// What a turn that stopped short did before it stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    recap: Option<&'a TurnRecap>,
}

/// The second text block: what a text-only host's model needs to continue the thread.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ThreadTrailer {
    thread_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<TurnStatus>,
}

fn build(
    thread_id: Option<ThreadId>,
    text: &str,
    status: Option<TurnStatus>,
    recap: Option<&TurnRecap>,
) -> CallToolResult {
    let structured = Structured {
        thread_id: thread_id.map(|t| t.to_string()).unwrap_or_default(),
        content: text,
        status,
        recap,
    };
    let mut blocks = vec![ContentBlock::text(text)];
    if let Some(thread_id) = thread_id {
        let trailer = ThreadTrailer {
            thread_id: thread_id.to_string(),
            status,
        };
        if let Ok(trailer) = serde_json::to_string(&trailer) {
            blocks.push(ContentBlock::text(trailer));
        }
    }
    let structured = serde_json::to_value(structured).unwrap_or_default();
    let mut result = if status.is_none_or(TurnStatus::is_error) {
        CallToolResult::error(blocks)
    } else {
        CallToolResult::success(blocks)
    };
    result.structured_content = Some(structured);
    result
}

/// The text and status of a finished turn: its last message, and the failure (if any)
/// after it. One rule for a turn that ends live and one read back from its rollout.
pub(crate) fn turn_outcome(
    last_message: Option<&str>,
    failure: Option<&str>,
) -> (String, TurnStatus) {
    let text = last_message.unwrap_or_default();
    match failure {
        None => (text.to_string(), TurnStatus::Completed),
        Some(failure) if text.is_empty() => (failure.to_string(), TurnStatus::Failed),
        Some(failure) => (
            format!("{text}\n\nThe turn failed: {failure}"),
            TurnStatus::Failed,
        ),
    }
}

/// A turn's outcome, or a thread's state, with its status.
pub(crate) fn with_status(thread_id: ThreadId, text: &str, status: TurnStatus) -> CallToolResult {
    build(Some(thread_id), text, Some(status), None)
}

/// A finished turn's result. One that stopped short (failed, interrupted, cut off) comes
/// with its `recap`: the text then says what it did before it stopped, which is also
/// `structuredContent.recap`. One rule for a live result and one read back from the
/// rollout.
pub(crate) fn finished_turn(
    thread_id: ThreadId,
    text: &str,
    status: TurnStatus,
    recap: Option<&TurnRecap>,
) -> CallToolResult {
    let Some(recap) = recap else {
        return with_status(thread_id, text, status);
    };
    let rendered = recap.render();
    let text = if text.is_empty() {
        rendered
    } else {
        format!("{text}\n\n{rendered}")
    };
    build(Some(thread_id), &text, Some(status), Some(recap))
}

/// An agent-level failure on a known thread (bad state, resume failure).
pub(crate) fn thread_error(thread_id: ThreadId, text: &str) -> CallToolResult {
    build(Some(thread_id), text, Some(TurnStatus::Failed), None)
}

/// A failure before any thread exists (bad arguments, bad config).
pub(crate) fn error(text: &str) -> CallToolResult {
    build(None, text, None, None)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Hand check of the tools' `outputSchema`: string `threadId` and `content` required.
    fn validates(result: &Value) -> bool {
        let Some(sc) = result.get("structuredContent").and_then(Value::as_object) else {
            return false;
        };
        sc.get("threadId").is_some_and(Value::is_string)
            && sc.get("content").is_some_and(Value::is_string)
    }

    #[test]
    fn every_shape_validates_and_mirrors_text() {
        let id = ThreadId::new();
        for (result, is_error) in [
            (with_status(id, "done", TurnStatus::Completed), false),
            (with_status(id, "", TurnStatus::Running), false),
            (with_status(id, "aborted", TurnStatus::Interrupted), true),
            (thread_error(id, "boom"), true),
            (error("bad args"), true),
        ] {
            let value = serde_json::to_value(&result).unwrap_or_default();
            assert!(validates(&value), "{value}");
            assert_eq!(
                value["content"][0]["text"],
                value["structuredContent"]["content"]
            );
            assert_eq!(value["isError"] == Value::Bool(true), is_error, "{value}");
        }
        let value =
            serde_json::to_value(with_status(id, "x", TurnStatus::Completed)).unwrap_or_default();
        assert_eq!(value["structuredContent"]["threadId"], id.to_string());
        assert_eq!(value["structuredContent"]["status"], "completed");
    }

    /// Found by Gemini CLI, which hands its model only the text blocks: the thread id
    /// must be readable there, or the model can never call `codex-reply`.
    #[test]
    fn gemini_cli_text_only_hosts_see_the_thread_id() {
        let id = ThreadId::new();
        let value =
            serde_json::to_value(with_status(id, "x", TurnStatus::Completed)).unwrap_or_default();
        let trailer: Value = value["content"][1]["text"]
            .as_str()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        assert_eq!(trailer["threadId"], id.to_string(), "{value}");
        assert_eq!(trailer["status"], "completed", "{value}");
        // Before any thread exists there is nothing to continue: one block only.
        let value = serde_json::to_value(error("bad args")).unwrap_or_default();
        assert_eq!(
            value["content"].as_array().map(Vec::len),
            Some(1),
            "{value}"
        );
    }
}

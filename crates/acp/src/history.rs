//! A saved thread replayed as the updates a live session would have sent: what
//! `session/load` sends before it answers, so the editor shows the whole conversation,
//! tool calls included, after a restart.

use interpreter_core::store::{self, ThreadStore, TurnEntry};
use interpreter_protocol::ThreadId;

use crate::calls;
use crate::error::AcpError;
use crate::update::{ToolStatus, Update};

pub(crate) async fn replay(store: &dyn ThreadStore, id: ThreadId) -> Result<Vec<Update>, AcpError> {
    let items = store
        .read(id)
        .await?
        .map(|read| read.items)
        .unwrap_or_default();
    Ok(store::turns_from_rollout(&items)
        .iter()
        .flat_map(|turn| turn.entries.iter().filter_map(update_of))
        .collect())
}

fn update_of(entry: &TurnEntry) -> Option<Update> {
    Some(match entry {
        TurnEntry::UserMessage { text } => Update::UserText(text.clone()),
        TurnEntry::AgentMessage { text } => Update::AgentText(text.clone()),
        TurnEntry::Reasoning { text, .. } => Update::Thought(text.clone()),
        // ACP's `plan` update is a list of steps with statuses; a proposed plan is prose,
        // so the editor shows it as the agent's text.
        TurnEntry::Plan { text, .. } => Update::AgentText(text.clone()),
        // ACP has no review items: the review reads as the agent's answer.
        TurnEntry::EnteredReview { .. } => return None,
        TurnEntry::ExitedReview { review, .. } => Update::AgentText(review.clone()),
        TurnEntry::Command {
            call_id,
            command,
            cwd,
            output,
            status,
            ..
        } => {
            let mut call =
                calls::command_call(call_id, command, cwd, &[], calls::command_status(*status));
            call.content = calls::output_content(output);
            Update::ToolCall(call)
        }
        TurnEntry::FileChange {
            call_id,
            changes,
            success,
        } => {
            let status = if *success {
                ToolStatus::Completed
            } else {
                ToolStatus::Failed
            };
            Update::ToolCall(calls::patch_call(call_id, changes, status))
        }
        TurnEntry::McpToolCall(end) => {
            let mut call = calls::mcp_call(
                &end.call_id,
                &end.invocation,
                calls::mcp_status(&end.result),
            );
            call.content = calls::mcp_result_content(&end.result);
            Update::ToolCall(call)
        }
        TurnEntry::Compaction {
            items_before,
            items_after,
        } => Update::AgentText(calls::compaction_text(*items_before, *items_after)),
        // The turn's error was the prompt's error answer; it is not part of the talk.
        TurnEntry::Error { .. } => return None,
    })
}

//! The engine's items as ACP session updates: live, from the projector's item events,
//! and replayed on `session/load`, from the stored items. Both end in the same editor
//! view: a card's final form is built by one function for both.

use std::collections::{HashMap, HashSet};

use interpreter_core::items::{
    CommandItem, DeltaKind, ItemDelta, ItemEvent, ItemStatus, McpCallItem, TurnItem,
};

use crate::calls;
use crate::update::{ToolCall, ToolCallUpdate, ToolContent, ToolStatus, Update};

/// What a card shows for a command that was not run.
pub(crate) const NOT_RUN: &str = "Not run: permission denied.";

/// What the editor has been sent of a turn's items.
#[derive(Debug, Default)]
pub(crate) struct LiveItems {
    /// Text items (answers, reasoning, plans) whose pieces were sent as they streamed:
    /// their completion sends nothing more.
    streamed: HashSet<String>,
    /// Output of each command so far: a card's content is replaced as a whole.
    output: HashMap<String, String>,
    /// Calls waiting for the editor's permission, with why it is asked.
    awaiting: HashMap<String, Option<String>>,
}

impl LiveItems {
    /// Call `call_id` is about to be announced for a permission question: its card
    /// starts `pending`, with the reason.
    pub(crate) fn awaiting_permission(&mut self, call_id: &str, reason: Option<String>) {
        self.awaiting.insert(call_id.to_string(), reason);
    }

    /// A call started running; a card that waited for permission moves on.
    pub(crate) fn began(&mut self, call_id: &str) -> Option<Update> {
        self.awaiting.remove(call_id)?;
        Some(Update::ToolCallUpdate(ToolCallUpdate {
            id: call_id.to_string(),
            status: Some(ToolStatus::InProgress),
            ..ToolCallUpdate::default()
        }))
    }

    /// The card of a call waiting for permission, as the question shows it.
    fn pending_card(&self, item: &TurnItem) -> Option<ToolCall> {
        let reason = self.awaiting.get(item.id())?;
        let mut call = started_card(item)?;
        call.status = ToolStatus::Pending;
        if let Some(reason) = reason {
            call.content.push(ToolContent::Text(reason.clone()));
        }
        Some(call)
    }

    /// The updates announcing `event`.
    pub(crate) fn updates(&mut self, event: ItemEvent) -> Vec<Update> {
        match event {
            ItemEvent::Started(item) => match self.pending_card(&item) {
                Some(card) => vec![Update::ToolCall(card)],
                None => started_card(&item)
                    .map(Update::ToolCall)
                    .into_iter()
                    .collect(),
            },
            ItemEvent::Delta(delta) => self.delta(delta).into_iter().collect(),
            ItemEvent::Completed(item) => self.completed(&item).into_iter().collect(),
            // What streamed of it was shown as it came; it is not an answer to repeat.
            ItemEvent::Unfinished(item) => {
                self.streamed.remove(item.id());
                Vec::new()
            }
        }
    }

    fn delta(&mut self, delta: ItemDelta) -> Option<Update> {
        let ItemDelta {
            item_id,
            kind,
            text,
        } = delta;
        match kind {
            // A proposed plan is prose: the editor shows it as the agent's text.
            DeltaKind::AgentText | DeltaKind::PlanText => (!text.is_empty()).then(|| {
                self.streamed.insert(item_id);
                Update::AgentText(text)
            }),
            // A summary is what the server shows of its reasoning: the editor's thought.
            DeltaKind::ReasoningText | DeltaKind::ReasoningSummaryText { .. } => (!text.is_empty())
                .then(|| {
                    self.streamed.insert(item_id);
                    Update::Thought(text)
                }),
            DeltaKind::CommandOutput => {
                let output = self.output.entry(item_id.clone()).or_default();
                output.push_str(&text);
                Some(Update::ToolCallUpdate(ToolCallUpdate {
                    id: item_id,
                    content: Some(calls::output_content(output)),
                    ..ToolCallUpdate::default()
                }))
            }
            // A new summary part starts nothing visible; a patch's printed text is on
            // its finished card; an MCP server's progress line has no place on a card.
            DeltaKind::ReasoningSummaryPart { .. }
            | DeltaKind::FileChangeOutput
            | DeltaKind::McpProgress => None,
        }
    }

    fn completed(&mut self, item: &TurnItem) -> Option<Update> {
        self.awaiting.remove(item.id());
        self.output.remove(item.id());
        if self.streamed.remove(item.id()) {
            return None;
        }
        match item {
            // The editor sent it.
            TurnItem::UserMessage { .. } => None,
            TurnItem::Command(_) | TurnItem::FileChange(_) | TurnItem::McpToolCall(_) => {
                finished_card(item).map(Update::ToolCallUpdate)
            }
            TurnItem::AgentMessage { .. }
            | TurnItem::Reasoning { .. }
            | TurnItem::Plan { .. }
            | TurnItem::EnteredReview { .. }
            | TurnItem::ExitedReview { .. }
            | TurnItem::Compaction { .. } => text_update(item),
        }
    }
}

/// A stored item as `session/load` sends it: text once, a card in its final form.
pub(crate) fn replayed(item: &TurnItem) -> Option<Update> {
    match item {
        TurnItem::UserMessage { text, .. } => Some(Update::UserText(text.clone())),
        TurnItem::Command(_) | TurnItem::FileChange(_) | TurnItem::McpToolCall(_) => {
            let mut card = started_card(item)?;
            let finished = finished_card(item)?;
            if let Some(status) = finished.status {
                card.status = status;
            }
            if let Some(content) = finished.content {
                card.content = content;
            }
            card.raw_output = finished.raw_output;
            Some(Update::ToolCall(card))
        }
        TurnItem::AgentMessage { .. }
        | TurnItem::Reasoning { .. }
        | TurnItem::Plan { .. }
        | TurnItem::EnteredReview { .. }
        | TurnItem::ExitedReview { .. }
        | TurnItem::Compaction { .. } => text_update(item),
    }
}

/// What a finished text item says, when the editor shows it.
fn text_update(item: &TurnItem) -> Option<Update> {
    let update = match item {
        TurnItem::AgentMessage { text, .. } | TurnItem::Plan { text, .. } => {
            Update::AgentText(text.clone())
        }
        TurnItem::Reasoning { text, .. } => Update::Thought(text.clone()),
        // ACP has no review items: the review reads as the agent's answer.
        TurnItem::ExitedReview { review, .. } => Update::AgentText(review.clone()),
        TurnItem::Compaction {
            items_before,
            items_after,
            ..
        } => Update::AgentText(calls::compaction_text(*items_before, *items_after)),
        TurnItem::EnteredReview { .. }
        | TurnItem::UserMessage { .. }
        | TurnItem::Command(_)
        | TurnItem::FileChange(_)
        | TurnItem::McpToolCall(_) => return None,
    };
    match &update {
        Update::AgentText(text) | Update::Thought(text) if text.is_empty() => None,
        _ => Some(update),
    }
}

/// A call's card as first announced.
fn started_card(item: &TurnItem) -> Option<ToolCall> {
    let status = |status: ItemStatus| match status {
        ItemStatus::InProgress => ToolStatus::InProgress,
        finished => calls::item_status(finished),
    };
    Some(match item {
        TurnItem::Command(command) => calls::command_call(
            &command.id,
            &command.command,
            &command.cwd,
            &command.parsed,
            status(command.status),
        ),
        TurnItem::FileChange(change) => {
            calls::patch_call(&change.id, &change.changes, status(change.status))
        }
        TurnItem::McpToolCall(call) => {
            calls::mcp_call(&call.id, &call.invocation, status(call.status))
        }
        TurnItem::UserMessage { .. }
        | TurnItem::AgentMessage { .. }
        | TurnItem::Reasoning { .. }
        | TurnItem::Plan { .. }
        | TurnItem::EnteredReview { .. }
        | TurnItem::ExitedReview { .. }
        | TurnItem::Compaction { .. } => return None,
    })
}

/// How a finished call's card ends: its status, its whole content, what it returned.
fn finished_card(item: &TurnItem) -> Option<ToolCallUpdate> {
    Some(match item {
        TurnItem::Command(command) => command_finished(command),
        TurnItem::FileChange(change) => {
            let mut content = calls::diff_content(&change.changes);
            if change.status != ItemStatus::Completed && !change.output.is_empty() {
                content.push(ToolContent::Text(change.output.clone()));
            }
            ToolCallUpdate {
                id: change.id.clone(),
                status: Some(calls::item_status(change.status)),
                content: Some(content),
                raw_output: None,
            }
        }
        TurnItem::McpToolCall(call) => mcp_finished(call),
        TurnItem::UserMessage { .. }
        | TurnItem::AgentMessage { .. }
        | TurnItem::Reasoning { .. }
        | TurnItem::Plan { .. }
        | TurnItem::EnteredReview { .. }
        | TurnItem::ExitedReview { .. }
        | TurnItem::Compaction { .. } => return None,
    })
}

fn command_finished(command: &CommandItem) -> ToolCallUpdate {
    let content = match command.status {
        ItemStatus::Declined => vec![ToolContent::Text(NOT_RUN.to_string())],
        ItemStatus::InProgress | ItemStatus::Completed | ItemStatus::Failed => {
            calls::output_content(&command.output)
        }
    };
    ToolCallUpdate {
        id: command.id.clone(),
        status: Some(calls::item_status(command.status)),
        content: Some(content),
        raw_output: Some(serde_json::json!({
            "exitCode": command.exit_code,
            "durationMs": command.duration_ms,
        })),
    }
}

fn mcp_finished(call: &McpCallItem) -> ToolCallUpdate {
    let (status, content, raw_output) = match &call.result {
        Some(result) => (
            calls::mcp_status(result),
            calls::mcp_result_content(result),
            result.clone().ok(),
        ),
        None => (calls::item_status(call.status), Vec::new(), None),
    };
    ToolCallUpdate {
        id: call.id.clone(),
        status: Some(status),
        content: Some(content),
        raw_output,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use interpreter_core::items::FileChangeItem;
    use interpreter_protocol::{ExecCommandSource, FileChange, FileChanges};

    use super::*;

    fn command(status: ItemStatus, output: &str) -> TurnItem {
        TurnItem::Command(CommandItem {
            id: "call_1".into(),
            command: vec!["make".into()],
            cwd: PathBuf::from("/w"),
            parsed: Vec::new(),
            source: ExecCommandSource::Agent,
            status,
            output: output.into(),
            exit_code: (status == ItemStatus::Completed).then_some(0),
            duration_ms: Some(4),
        })
    }

    /// The editor's view after `updates`: text runs joined, cards merged by id.
    fn view(updates: Vec<Update>) -> Vec<Update> {
        let mut out: Vec<Update> = Vec::new();
        for update in updates {
            match (out.last_mut(), update) {
                (Some(Update::AgentText(text)), Update::AgentText(more))
                | (Some(Update::Thought(text)), Update::Thought(more)) => text.push_str(&more),
                (_, Update::ToolCallUpdate(change)) => {
                    let card = out.iter_mut().find_map(|u| match u {
                        Update::ToolCall(call) if call.id == change.id => Some(call),
                        _ => None,
                    });
                    let card = card.expect("an update of an announced card");
                    if let Some(status) = change.status {
                        card.status = status;
                    }
                    if let Some(content) = change.content {
                        card.content = content;
                    }
                    if change.raw_output.is_some() {
                        card.raw_output = change.raw_output;
                    }
                }
                (_, update) => out.push(update),
            }
        }
        out
    }

    fn live(events: Vec<ItemEvent>) -> Vec<Update> {
        let mut items = LiveItems::default();
        events
            .into_iter()
            .flat_map(|event| items.updates(event))
            .collect()
    }

    #[test]
    fn a_streamed_answer_is_sent_once() {
        let item = TurnItem::AgentMessage {
            id: "1-msg-1".into(),
            text: "done".into(),
        };
        let updates = live(vec![
            ItemEvent::Started(item.clone()),
            ItemEvent::Delta(ItemDelta {
                item_id: "1-msg-1".into(),
                kind: DeltaKind::AgentText,
                text: "do".into(),
            }),
            ItemEvent::Delta(ItemDelta {
                item_id: "1-msg-1".into(),
                kind: DeltaKind::AgentText,
                text: "ne".into(),
            }),
            ItemEvent::Completed(item.clone()),
        ]);
        assert_eq!(view(updates), view(replayed(&item).into_iter().collect()));
    }

    #[test]
    fn a_command_card_ends_the_same_live_and_replayed() {
        let done = command(ItemStatus::Completed, "hi\n");
        let updates = live(vec![
            ItemEvent::Started(command(ItemStatus::InProgress, "")),
            ItemEvent::Delta(ItemDelta {
                item_id: "call_1".into(),
                kind: DeltaKind::CommandOutput,
                text: "hi\n".into(),
            }),
            ItemEvent::Completed(done.clone()),
        ]);
        assert_eq!(view(updates), view(replayed(&done).into_iter().collect()));
    }

    #[test]
    fn a_declined_command_waits_pending_with_its_reason_then_says_it_did_not_run() {
        let mut items = LiveItems::default();
        items.awaiting_permission("call_1", Some("it writes".into()));
        let started = items.updates(ItemEvent::Started(command(ItemStatus::InProgress, "")));
        match &started[..] {
            [Update::ToolCall(card)] => {
                assert_eq!(card.status, ToolStatus::Pending);
                assert_eq!(card.content, [ToolContent::Text("it writes".into())]);
            }
            other => panic!("{other:?}"),
        }
        let declined = command(ItemStatus::Declined, "");
        let mut all = started;
        all.extend(items.updates(ItemEvent::Completed(declined.clone())));
        let shown = view(all);
        assert_eq!(shown, view(replayed(&declined).into_iter().collect()));
        match &shown[..] {
            [Update::ToolCall(card)] => {
                assert_eq!(card.status, ToolStatus::Failed);
                assert_eq!(card.content, [ToolContent::Text(NOT_RUN.into())]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_approved_call_moves_to_in_progress_once() {
        let mut items = LiveItems::default();
        items.awaiting_permission("call_1", None);
        assert!(items.began("call_1").is_some());
        assert!(items.began("call_1").is_none());
        assert!(items.began("call_2").is_none());
    }

    #[test]
    fn a_failed_patch_shows_why_after_its_diff() {
        let mut changes = FileChanges::new();
        changes.insert(
            PathBuf::from("/w/a.txt"),
            FileChange::Add {
                content: "a\n".into(),
            },
        );
        let failed = TurnItem::FileChange(FileChangeItem {
            id: "call_p".into(),
            changes,
            status: ItemStatus::Failed,
            output: "patch rejected: outside the workspace".into(),
        });
        match replayed(&failed) {
            Some(Update::ToolCall(card)) => {
                assert_eq!(card.status, ToolStatus::Failed);
                assert_eq!(
                    card.content.last(),
                    Some(&ToolContent::Text(
                        "patch rejected: outside the workspace".into()
                    ))
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_users_own_message_is_sent_only_on_replay() {
        let item = TurnItem::UserMessage {
            id: "1-user-1".into(),
            text: "hi".into(),
        };
        assert!(
            live(vec![
                ItemEvent::Started(item.clone()),
                ItemEvent::Completed(item.clone())
            ])
            .is_empty()
        );
        assert_eq!(replayed(&item), Some(Update::UserText("hi".into())));
    }
}

//! A thread's conversation rebuilt from its rollout, turn by turn: what the user said, what
//! the agent answered, which commands ran and which files changed. Every front end that
//! shows a past thread (app-server `thread/read` and `thread/resume`, `interpreter threads
//! show`) reads it through here, so they agree on what a turn held.

use std::path::PathBuf;

use interpreter_protocol::{
    EventMsg, ExecCommandSource, ExecCommandStatus, FileChanges, McpToolCallEndEvent,
};

use super::item::RolloutItem;

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    /// No end was recorded: the turn is running, or the process died mid-turn.
    InProgress,
    Completed,
    Interrupted,
    Failed,
}

/// One item of a turn, in the order it happened.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEntry {
    UserMessage {
        text: String,
    },
    AgentMessage {
        text: String,
    },
    Reasoning {
        text: String,
        /// The summary's parts and the raw text's parts, when the rollout kept them apart.
        summary: Vec<String>,
        content: Vec<String>,
    },
    /// The plan a Plan-mode answer proposed (its `<proposed_plan>` block).
    Plan {
        item_id: String,
        text: String,
    },
    /// A review turn started; `review` says what it reviews.
    EnteredReview {
        item_id: String,
        review: String,
    },
    /// A review turn ended with this review.
    ExitedReview {
        item_id: String,
        review: String,
    },
    Command {
        call_id: String,
        command: Vec<String>,
        cwd: PathBuf,
        exit_code: Option<i32>,
        output: String,
        duration_ms: u64,
        status: ExecCommandStatus,
        source: ExecCommandSource,
    },
    FileChange {
        call_id: String,
        changes: FileChanges,
        success: bool,
    },
    /// A call to an MCP server's tool (recorded since rollouts keep them; older ones
    /// have none).
    McpToolCall(McpToolCallEndEvent),
    /// The conversation so far was replaced by a summary.
    Compaction {
        items_before: usize,
        items_after: usize,
    },
    Error {
        message: String,
    },
}

/// One turn of a past thread.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRecord {
    /// The engine's turn id (its submission id), unique within the thread.
    pub id: String,
    pub outcome: TurnOutcome,
    /// Why the turn failed, when it did.
    pub error: Option<String>,
    pub entries: Vec<TurnEntry>,
}

/// The turns recorded in `items`, oldest first. Items outside any turn (a user message
/// recorded before its turn's start) open a turn of their own.
pub fn turns_from_rollout(items: &[RolloutItem]) -> Vec<TurnRecord> {
    let mut turns: Vec<TurnRecord> = Vec::new();
    let mut open: Option<TurnRecord> = None;
    let mut implicit = 0usize;
    for item in items {
        let RolloutItem::EventMsg(msg) = item else {
            continue;
        };
        match msg {
            EventMsg::TaskStarted(started) => {
                if let Some(turn) = open.take() {
                    // A turn that started without the previous one ending: the process
                    // died mid-turn, or it is the previous turn's user message.
                    if turn.id.starts_with("unrecorded-") && turn.outcome == TurnOutcome::InProgress
                    {
                        open = Some(TurnRecord {
                            id: started.turn_id.clone(),
                            ..turn
                        });
                        continue;
                    }
                    turns.push(turn);
                }
                open = Some(TurnRecord {
                    id: started.turn_id.clone(),
                    outcome: TurnOutcome::InProgress,
                    error: None,
                    entries: Vec::new(),
                });
            }
            EventMsg::UserMessage(m) => {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::UserMessage {
                        text: m.message.clone(),
                    })
            }
            EventMsg::AgentMessage(m) => {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::AgentMessage {
                        text: m.message.clone(),
                    })
            }
            EventMsg::AgentReasoning(m) => {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::Reasoning {
                        text: m.text.clone(),
                        summary: m.summary.clone(),
                        content: m.content.clone(),
                    })
            }
            EventMsg::ProposedPlan(p) => {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::Plan {
                        item_id: p.item_id.clone(),
                        text: p.text.clone(),
                    })
            }
            EventMsg::EnteredReviewMode(e) => {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::EnteredReview {
                        item_id: e.item_id.clone(),
                        review: e.review.clone(),
                    })
            }
            EventMsg::ExitedReviewMode(e) => {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::ExitedReview {
                        item_id: e.item_id.clone(),
                        review: e.review.clone(),
                    })
            }
            EventMsg::ExecCommandEnd(e) => {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::Command {
                        call_id: e.call_id.clone(),
                        command: e.command.clone(),
                        cwd: e.cwd.clone(),
                        exit_code: e.exit_code,
                        output: e.aggregated_output.clone(),
                        duration_ms: e.duration_ms,
                        status: e.status,
                        source: e.source,
                    })
            }
            EventMsg::PatchApplyEnd(e) => {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::FileChange {
                        call_id: e.call_id.clone(),
                        changes: e.changes.clone(),
                        success: e.success,
                    })
            }
            EventMsg::McpToolCallEnd(e) => current(&mut open, &mut implicit)
                .entries
                .push(TurnEntry::McpToolCall(e.clone())),
            EventMsg::ContextCompacted(c) => {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::Compaction {
                        items_before: c.items_before,
                        items_after: c.items_after,
                    })
            }
            EventMsg::Error(e) => {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::Error {
                        message: e.message.clone(),
                    })
            }
            EventMsg::TaskComplete(done) => {
                let mut turn = open.take().unwrap_or_else(|| TurnRecord {
                    id: done.turn_id.clone(),
                    outcome: TurnOutcome::InProgress,
                    error: None,
                    entries: Vec::new(),
                });
                turn.outcome = if done.error.is_some() {
                    TurnOutcome::Failed
                } else {
                    TurnOutcome::Completed
                };
                turn.error = done.error.clone();
                turns.push(turn);
            }
            EventMsg::TurnAborted(aborted) => {
                let mut turn = open.take().unwrap_or_else(|| TurnRecord {
                    id: aborted.turn_id.clone(),
                    outcome: TurnOutcome::InProgress,
                    error: None,
                    entries: Vec::new(),
                });
                turn.outcome = TurnOutcome::Interrupted;
                turns.push(turn);
            }
            _ => {}
        }
    }
    turns.extend(open);
    turns
}

fn current<'a>(open: &'a mut Option<TurnRecord>, implicit: &mut usize) -> &'a mut TurnRecord {
    open.get_or_insert_with(|| {
        *implicit += 1;
        TurnRecord {
            id: format!("unrecorded-{implicit}"),
            outcome: TurnOutcome::InProgress,
            error: None,
            entries: Vec::new(),
        }
    })
}

/// The rollout items up to and including the end of turn `turn_id` (for forking a thread
/// at a turn). `None` when that turn is not recorded as ended.
pub fn items_through_turn(items: &[RolloutItem], turn_id: &str) -> Option<Vec<RolloutItem>> {
    let end = items.iter().position(|item| match item {
        RolloutItem::EventMsg(EventMsg::TaskComplete(done)) => done.turn_id == turn_id,
        RolloutItem::EventMsg(EventMsg::TurnAborted(aborted)) => aborted.turn_id == turn_id,
        _ => false,
    })?;
    Some(items[..=end].to_vec())
}

#[cfg(test)]
mod tests {
    use interpreter_protocol::{
        AgentMessageEvent, TaskCompleteEvent, TaskStartedEvent, TurnAbortReason, TurnAbortedEvent,
        UserMessageEvent,
    };

    use super::*;

    fn ev(msg: EventMsg) -> RolloutItem {
        RolloutItem::EventMsg(msg)
    }

    #[test]
    fn turns_group_items_and_outcomes() {
        let items = vec![
            ev(EventMsg::TaskStarted(TaskStartedEvent {
                turn_id: "1".into(),
                model_context_window: None,
            })),
            ev(EventMsg::UserMessage(UserMessageEvent {
                message: "hi".into(),
            })),
            ev(EventMsg::AgentMessage(AgentMessageEvent {
                message: "hello".into(),
            })),
            ev(EventMsg::TaskComplete(TaskCompleteEvent {
                turn_id: "1".into(),
                last_agent_message: Some("hello".into()),
                error: None,
                output_limit: false,
            })),
            ev(EventMsg::TaskStarted(TaskStartedEvent {
                turn_id: "2".into(),
                model_context_window: None,
            })),
            ev(EventMsg::TurnAborted(TurnAbortedEvent {
                turn_id: "2".into(),
                reason: TurnAbortReason::Interrupted,
            })),
        ];
        let turns = turns_from_rollout(&items);
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].outcome, TurnOutcome::Completed);
        assert_eq!(turns[0].entries.len(), 2);
        assert_eq!(turns[1].outcome, TurnOutcome::Interrupted);
        assert_eq!(items_through_turn(&items, "1").map(|i| i.len()), Some(4));
        assert_eq!(items_through_turn(&items, "3"), None);
    }
}

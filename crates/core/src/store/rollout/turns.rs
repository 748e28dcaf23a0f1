//! A thread's conversation rebuilt from its rollout, turn by turn: what the user said, what
//! the agent answered, which commands ran and which files changed. Every front end that
//! shows a past thread (app-server `thread/read` and `thread/resume`, `interpreter threads
//! show`) reads it through here, so they agree on what a turn held.

use interpreter_protocol::EventMsg;

use super::item::RolloutItem;
use crate::items::{ItemEvent, ItemProjector, TurnItem, TurnRecap};

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    /// No end was recorded: the turn is running, or the process died mid-turn.
    InProgress,
    Completed,
    Interrupted,
    Failed,
}

/// What a turn recorded, in the order it happened: its items, and the errors it reported.
// Nearly every entry is an item; boxing them would cost an allocation each to save
// space on the rare error.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEntry {
    Item(TurnItem),
    Error { message: String },
}

/// One turn of a past thread.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRecord {
    /// The engine's turn id (its submission id), unique within the thread.
    pub id: String,
    pub outcome: TurnOutcome,
    /// Why the turn failed, when it did.
    pub error: Option<String>,
    /// The engine's class of that failure (as the live error event carried it).
    pub error_kind: Option<interpreter_protocol::ErrorKind>,
    pub entries: Vec<TurnEntry>,
    /// What the turn did, from the same events a live front end's recap folds.
    pub recap: TurnRecap,
}

/// The turns recorded in `items`, oldest first: the stored events folded through the
/// same [`ItemProjector`] live front ends use, so an item read back has the id, the
/// place and the content it had live. Items outside any turn (a user message recorded
/// before its turn's start) open a turn of their own.
pub fn turns_from_rollout(items: &[RolloutItem]) -> Vec<TurnRecord> {
    let mut turns: Vec<TurnRecord> = Vec::new();
    let mut open: Option<TurnRecord> = None;
    let mut implicit = 0usize;
    let mut projector = ItemProjector::new();
    let mut recap = TurnRecap::default();
    for item in items {
        let RolloutItem::EventMsg(msg) = item else {
            continue;
        };
        if matches!(msg, EventMsg::TaskStarted(_)) {
            recap = TurnRecap::default();
        }
        recap.observe(msg);
        // Items a turn that never ended left open are completed into it, before the
        // next turn starts.
        for event in projector.push(msg) {
            if let ItemEvent::Completed(item) = event {
                current(&mut open, &mut implicit)
                    .entries
                    .push(TurnEntry::Item(item));
            }
        }
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
                    error_kind: None,
                    entries: Vec::new(),
                    recap: TurnRecap::default(),
                });
            }
            EventMsg::Error(e) => {
                let turn = current(&mut open, &mut implicit);
                turn.error_kind = e.kind.or(turn.error_kind);
                turn.entries.push(TurnEntry::Error {
                    message: e.message.clone(),
                })
            }
            EventMsg::TaskComplete(done) => {
                let mut turn = open.take().unwrap_or_else(|| TurnRecord {
                    id: done.turn_id.clone(),
                    outcome: TurnOutcome::InProgress,
                    error: None,
                    error_kind: None,
                    entries: Vec::new(),
                    recap: TurnRecap::default(),
                });
                turn.outcome = if done.error.is_some() {
                    TurnOutcome::Failed
                } else {
                    TurnOutcome::Completed
                };
                turn.error = done.error.clone();
                turn.recap = std::mem::take(&mut recap).finished();
                turns.push(turn);
            }
            EventMsg::TurnAborted(aborted) => {
                let mut turn = open.take().unwrap_or_else(|| TurnRecord {
                    id: aborted.turn_id.clone(),
                    outcome: TurnOutcome::InProgress,
                    error: None,
                    error_kind: None,
                    entries: Vec::new(),
                    recap: TurnRecap::default(),
                });
                turn.outcome = TurnOutcome::Interrupted;
                turn.recap = std::mem::take(&mut recap).finished();
                turns.push(turn);
            }
            // Items come from the projector above; the rest is not part of a turn's
            // record.
            EventMsg::SessionConfigured(_)
            | EventMsg::Warning(_)
            | EventMsg::StreamError(_)
            | EventMsg::UserMessage(_)
            | EventMsg::AgentMessageDelta(_)
            | EventMsg::AgentMessage(_)
            | EventMsg::AgentReasoningDelta(_)
            | EventMsg::AgentReasoningSummaryPartAdded(_)
            | EventMsg::AgentReasoningSummaryDelta(_)
            | EventMsg::AgentReasoning(_)
            | EventMsg::ExecCommandBegin(_)
            | EventMsg::ExecCommandOutputDelta(_)
            | EventMsg::ExecCommandEnd(_)
            | EventMsg::ExecApprovalRequest(_)
            | EventMsg::ApplyPatchApprovalRequest(_)
            | EventMsg::PatchApplyBegin(_)
            | EventMsg::PatchApplyEnd(_)
            | EventMsg::GoalUpdated(_)
            | EventMsg::GoalCleared(_)
            | EventMsg::TurnDiff(_)
            | EventMsg::PlanUpdate(_)
            | EventMsg::ProposedPlanDelta(_)
            | EventMsg::ProposedPlan(_)
            | EventMsg::EnteredReviewMode(_)
            | EventMsg::ExitedReviewMode(_)
            | EventMsg::McpToolCallBegin(_)
            | EventMsg::McpToolCallProgress(_)
            | EventMsg::McpToolCallEnd(_)
            | EventMsg::McpStartupUpdate(_)
            | EventMsg::ElicitationRequest(_)
            | EventMsg::UserInputRequest(_)
            | EventMsg::PermissionsRequest(_)
            | EventMsg::RequestExpired(_)
            | EventMsg::TokenCount(_)
            | EventMsg::ContextCompacted(_)
            | EventMsg::ShutdownComplete => {}
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
            error_kind: None,
            entries: Vec::new(),
            recap: TurnRecap::default(),
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
                item_id: String::new(),
                message: "hi".into(),
            })),
            ev(EventMsg::AgentMessage(AgentMessageEvent {
                item_id: String::new(),
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

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
    /// What the turn did, from the same events a live front end's recap folds (for a
    /// turn with no recorded end, what it did until the record stops).
    pub recap: TurnRecap,
    /// The turn's final answer, as its end event carried it.
    pub last_agent_message: Option<String>,
    /// The final answer stopped at the model's output limit.
    pub output_limit: bool,
}

impl TurnRecord {
    /// A turn with nothing recorded yet but its id.
    fn started(id: String) -> Self {
        Self {
            id,
            outcome: TurnOutcome::InProgress,
            error: None,
            error_kind: None,
            entries: Vec::new(),
            recap: TurnRecap::default(),
            last_agent_message: None,
            output_limit: false,
        }
    }

    /// The failure that ended the turn: its end event's, else the last error it reported.
    pub fn failure(&self) -> Option<String> {
        self.error.clone().or_else(|| {
            self.entries.iter().rev().find_map(|entry| match entry {
                TurnEntry::Error { message } => Some(message.clone()),
                TurnEntry::Item(_) => None,
            })
        })
    }
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
        // What the turn before did, should it have no recorded end.
        let previous_recap =
            matches!(msg, EventMsg::TaskStarted(_)).then(|| std::mem::take(&mut recap).finished());
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
                    turns.push(unfinished(turn, previous_recap.unwrap_or_default()));
                }
                open = Some(TurnRecord::started(started.turn_id.clone()));
            }
            EventMsg::Error(e) => {
                let turn = current(&mut open, &mut implicit);
                turn.error_kind = e.kind.or(turn.error_kind);
                turn.entries.push(TurnEntry::Error {
                    message: e.message.clone(),
                })
            }
            EventMsg::TaskComplete(done) => {
                let mut turn = open
                    .take()
                    .unwrap_or_else(|| TurnRecord::started(done.turn_id.clone()));
                turn.outcome = if done.error.is_some() {
                    TurnOutcome::Failed
                } else {
                    TurnOutcome::Completed
                };
                turn.error = done.error.clone();
                turn.last_agent_message = done.last_agent_message.clone();
                turn.output_limit = done.output_limit;
                turn.recap = std::mem::take(&mut recap).finished();
                turns.push(turn);
            }
            EventMsg::TurnAborted(aborted) => {
                let mut turn = open
                    .take()
                    .unwrap_or_else(|| TurnRecord::started(aborted.turn_id.clone()));
                turn.outcome = TurnOutcome::Interrupted;
                turn.recap = std::mem::take(&mut recap).finished();
                turns.push(turn);
            }
            // Items come from the projector above; the rest is not part of a turn's
            // record.
            EventMsg::SessionConfigured(_)
            | EventMsg::Warning(_)
            | EventMsg::HookStarted(_)
            | EventMsg::HookCompleted(_)
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
    turns.extend(open.map(|turn| unfinished(turn, recap.finished())));
    turns
}

/// A turn the record leaves open keeps what it did so far.
fn unfinished(mut turn: TurnRecord, recap: TurnRecap) -> TurnRecord {
    if turn.outcome == TurnOutcome::InProgress {
        turn.recap = recap;
    }
    turn
}

fn current<'a>(open: &'a mut Option<TurnRecord>, implicit: &mut usize) -> &'a mut TurnRecord {
    open.get_or_insert_with(|| {
        *implicit += 1;
        TurnRecord::started(format!("unrecorded-{implicit}"))
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

    /// What mcp-server's Tasks read-back needs of a turn: a turn with no recorded end
    /// keeps what it did, its failure falls back to the last error it reported, and an
    /// ended turn carries its answer and whether it was cut at the output limit.
    #[test]
    fn a_turn_read_back_keeps_its_recap_failure_answer_and_cut_off() {
        let started = |id: &str| {
            ev(EventMsg::TaskStarted(TaskStartedEvent {
                turn_id: id.into(),
                model_context_window: None,
            }))
        };
        let said = |text: &str| {
            ev(EventMsg::AgentMessage(AgentMessageEvent {
                item_id: String::new(),
                message: text.into(),
            }))
        };
        let items = vec![
            started("1"),
            said("working on it"),
            ev(EventMsg::Error(interpreter_protocol::ErrorEvent {
                message: "boom".into(),
                kind: None,
            })),
            started("2"),
            said("partial"),
            ev(EventMsg::TaskComplete(TaskCompleteEvent {
                turn_id: "2".into(),
                last_agent_message: Some("partial".into()),
                error: None,
                output_limit: true,
            })),
            started("3"),
            said("still going"),
        ];
        let turns = turns_from_rollout(&items);
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[0].outcome, TurnOutcome::InProgress);
        assert_eq!(
            turns[0].recap.last_message.as_deref(),
            Some("working on it")
        );
        assert_eq!(turns[0].failure().as_deref(), Some("boom"));
        assert_eq!(turns[1].outcome, TurnOutcome::Completed);
        assert_eq!(turns[1].last_agent_message.as_deref(), Some("partial"));
        assert!(turns[1].output_limit);
        assert_eq!(turns[1].failure(), None);
        assert_eq!(turns[2].outcome, TurnOutcome::InProgress);
        assert_eq!(turns[2].recap.last_message.as_deref(), Some("still going"));
    }
}

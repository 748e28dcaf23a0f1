//! The engine's side of the item model: ids stamped on events as they are emitted, and
//! the events that close a turn's open items before its end.

use interpreter_protocol::EventMsg;

use super::{ItemProjector, closing_event};

/// One thread's item bookkeeping, owned by its session: every event goes through
/// [`ItemLedger::stamp`] on its way out.
#[derive(Debug, Default)]
pub(crate) struct ItemLedger {
    projector: ItemProjector,
    /// The turn the counter counts for.
    turn: String,
    next: u64,
}

impl ItemLedger {
    /// The events to send for `msg`, in order, stamped: when `msg` ends a turn, first
    /// the events closing what the turn left open ([`Self::closing_events`]).
    pub(crate) fn prepare(&mut self, sub_id: &str, msg: EventMsg) -> Vec<EventMsg> {
        let mut events = self.closing_events(sub_id, &msg);
        events.push(msg);
        for msg in &mut events {
            self.stamp(sub_id, msg);
        }
        events
    }

    /// Gives `msg` its item id if it needs one, and follows what it opens and closes.
    /// Ids are `<turn>-<kind>-<n>`, `n` counting the turn's items from 1; a delta and
    /// the event that finishes its item share the item's id.
    fn stamp(&mut self, sub_id: &str, msg: &mut EventMsg) {
        match msg {
            EventMsg::UserMessage(m) => self.fill(sub_id, &mut m.item_id, "user"),
            EventMsg::AgentMessageDelta(d) => self.fill_message(sub_id, &mut d.item_id),
            EventMsg::AgentMessage(m) => self.fill_message(sub_id, &mut m.item_id),
            EventMsg::AgentReasoningDelta(d) => self.fill_reasoning(sub_id, &mut d.item_id),
            EventMsg::AgentReasoningSummaryPartAdded(p) => {
                self.fill_reasoning(sub_id, &mut p.item_id)
            }
            EventMsg::AgentReasoningSummaryDelta(d) => self.fill_reasoning(sub_id, &mut d.item_id),
            EventMsg::AgentReasoning(r) => self.fill_reasoning(sub_id, &mut r.item_id),
            EventMsg::ContextCompacted(c) => self.fill(sub_id, &mut c.item_id, "compaction"),
            // Their ids are the engine's already (tool call ids, plan and review ids),
            // or they are not items.
            EventMsg::SessionConfigured(_)
            | EventMsg::TaskStarted(_)
            | EventMsg::TaskComplete(_)
            | EventMsg::TurnAborted(_)
            | EventMsg::Error(_)
            | EventMsg::Warning(_)
            | EventMsg::HookStarted(_)
            | EventMsg::HookCompleted(_)
            | EventMsg::StreamError(_)
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
            | EventMsg::ShutdownComplete => {}
        }
        self.projector.push(msg);
    }

    /// The events that close the tool calls turn `sub_id` left open, to emit (and
    /// record) before `msg` when it ends the turn: a command that never ran as declined,
    /// a patch or MCP call as failed. A turn's calls then all have an end in the
    /// rollout, so a client reading the thread later sees what a live one saw.
    fn closing_events(&self, sub_id: &str, msg: &EventMsg) -> Vec<EventMsg> {
        let ends_turn = matches!(
            msg,
            EventMsg::TaskComplete(_) | EventMsg::TurnAborted(_) | EventMsg::ShutdownComplete
        );
        if !ends_turn {
            return Vec::new();
        }
        self.projector
            .open_items()
            .into_iter()
            .filter_map(|item| closing_event(sub_id, &item))
            .collect()
    }

    /// The next id of turn `sub_id`. Only events of a turn get ids, and a thread runs
    /// one turn at a time, so a new turn id is where the count starts again.
    fn next_id(&mut self, sub_id: &str, kind: &str) -> String {
        if self.turn != sub_id {
            self.turn = sub_id.to_string();
            self.next = 0;
        }
        self.next += 1;
        format!("{}-{kind}-{}", self.turn, self.next)
    }

    fn fill(&mut self, sub_id: &str, slot: &mut String, kind: &str) {
        if slot.is_empty() {
            *slot = self.next_id(sub_id, kind);
        }
    }

    fn fill_message(&mut self, sub_id: &str, slot: &mut String) {
        if slot.is_empty() {
            *slot = match self.projector.open_message_id() {
                Some(id) => id.to_string(),
                None => self.next_id(sub_id, "msg"),
            };
        }
    }

    fn fill_reasoning(&mut self, sub_id: &str, slot: &mut String) {
        if slot.is_empty() {
            *slot = match self.projector.open_reasoning_id() {
                Some(id) => id.to_string(),
                None => self.next_id(sub_id, "reasoning"),
            };
        }
    }
}

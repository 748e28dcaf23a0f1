//! Engine events → item events: the pure fold every front end and replay share.

use std::collections::HashSet;

use interpreter_protocol::{EventMsg, ExecCommandStatus};

use super::{
    CommandItem, DeltaKind, FileChangeItem, ItemDelta, ItemEvent, ItemStatus, McpCallItem,
    TurnItem, closing_event,
};

/// The reasoning item streaming now.
#[derive(Debug, Clone)]
struct OpenReasoning {
    id: String,
    raw: String,
    summary: Vec<String>,
}

/// Follows one thread's events and says which items start, stream and complete. It holds
/// what is open and nothing else; it never reads a clock or does I/O.
#[derive(Debug, Default)]
pub struct ItemProjector {
    /// The turn the events belong to (from its `task_started`), for the ids of events
    /// recorded before items had ids.
    turn_id: String,
    /// How many id-less items this turn had (see [`Self::legacy_id`]).
    legacy: u64,
    /// The agent message streaming now: its id and text so far.
    message: Option<(String, String)>,
    reasoning: Option<OpenReasoning>,
    /// The proposed plan streaming now: its id and text so far.
    plan: Option<(String, String)>,
    /// Tool calls started and not completed, in the order they started.
    calls: Vec<TurnItem>,
    /// Tool calls of this turn already completed, by id: a late event of one (an
    /// output delta, a duplicate end) is not shown again.
    completed: HashSet<String>,
}

impl ItemProjector {
    pub fn new() -> Self {
        Self::default()
    }

    /// The items `msg` starts, streams or completes, in order. A turn's end
    /// (`task_complete`, `turn_aborted`, the thread's shutdown) first completes whatever
    /// the turn left open, so every item started is completed before its turn ends.
    pub fn push(&mut self, msg: &EventMsg) -> Vec<ItemEvent> {
        let mut out = Vec::new();
        match msg {
            EventMsg::TaskStarted(started) => {
                // Whatever a turn that never ended (its process died) left open ends here.
                self.sweep(&mut out);
                self.turn_id = started.turn_id.clone();
                self.legacy = 0;
                self.completed.clear();
            }
            EventMsg::TaskComplete(_) | EventMsg::TurnAborted(_) | EventMsg::ShutdownComplete => {
                self.sweep(&mut out);
            }
            EventMsg::UserMessage(m) => {
                let item = TurnItem::UserMessage {
                    id: self.id_or_legacy(&m.item_id),
                    text: m.message.clone(),
                };
                out.push(ItemEvent::Started(item.clone()));
                out.push(ItemEvent::Completed(item));
            }
            EventMsg::AgentMessageDelta(delta) => {
                let id = self.open_message(&delta.item_id, &mut out);
                if let Some((_, text)) = &mut self.message {
                    text.push_str(&delta.delta);
                }
                out.push(delta_of(id, DeltaKind::AgentText, &delta.delta));
            }
            EventMsg::AgentMessage(m) => {
                let id = self.open_message(&m.item_id, &mut out);
                self.message = None;
                out.push(ItemEvent::Completed(TurnItem::AgentMessage {
                    id,
                    text: m.message.clone(),
                }));
            }
            EventMsg::AgentReasoningDelta(delta) => {
                let id = self.open_reasoning(&delta.item_id, &mut out);
                if let Some(open) = &mut self.reasoning {
                    open.raw.push_str(&delta.delta);
                }
                out.push(delta_of(id, DeltaKind::ReasoningText, &delta.delta));
            }
            EventMsg::AgentReasoningSummaryPartAdded(part) => {
                let id = self.open_reasoning(&part.item_id, &mut out);
                if let Some(open) = &mut self.reasoning {
                    open.summary.push(String::new());
                }
                let kind = DeltaKind::ReasoningSummaryPart {
                    index: part.summary_index,
                };
                out.push(delta_of(id, kind, ""));
            }
            EventMsg::AgentReasoningSummaryDelta(delta) => {
                let id = self.open_reasoning(&delta.item_id, &mut out);
                if let Some(open) = &mut self.reasoning {
                    match open.summary.last_mut() {
                        Some(part) => part.push_str(&delta.delta),
                        None => open.summary.push(delta.delta.clone()),
                    }
                }
                let kind = DeltaKind::ReasoningSummaryText {
                    index: delta.summary_index,
                };
                out.push(delta_of(id, kind, &delta.delta));
            }
            EventMsg::AgentReasoning(reasoning) => {
                let id = self.open_reasoning(&reasoning.item_id, &mut out);
                self.reasoning = None;
                out.push(ItemEvent::Completed(TurnItem::Reasoning {
                    id,
                    text: reasoning.text.clone(),
                    summary: reasoning.summary.clone(),
                    content: reasoning.content.clone(),
                }));
            }
            EventMsg::ProposedPlanDelta(delta) => {
                self.open_plan(&delta.item_id, &mut out);
                if let Some((_, text)) = &mut self.plan {
                    text.push_str(&delta.delta);
                }
                out.push(delta_of(
                    delta.item_id.clone(),
                    DeltaKind::PlanText,
                    &delta.delta,
                ));
            }
            EventMsg::ProposedPlan(plan) => {
                self.open_plan(&plan.item_id, &mut out);
                self.plan = None;
                out.push(ItemEvent::Completed(TurnItem::Plan {
                    id: plan.item_id.clone(),
                    text: plan.text.clone(),
                }));
            }
            EventMsg::EnteredReviewMode(review) => {
                let item = TurnItem::EnteredReview {
                    id: review.item_id.clone(),
                    review: review.review.clone(),
                };
                out.push(ItemEvent::Started(item.clone()));
                out.push(ItemEvent::Completed(item));
            }
            EventMsg::ExitedReviewMode(review) => {
                let item = TurnItem::ExitedReview {
                    id: review.item_id.clone(),
                    review: review.review.clone(),
                };
                out.push(ItemEvent::Started(item.clone()));
                out.push(ItemEvent::Completed(item));
            }
            EventMsg::ExecApprovalRequest(request) => {
                self.start_call(
                    TurnItem::Command(CommandItem {
                        id: request.call_id.clone(),
                        command: request.command.clone(),
                        cwd: request.cwd.clone(),
                        parsed: request.parsed_cmd.clone(),
                        source: interpreter_protocol::ExecCommandSource::Agent,
                        status: ItemStatus::InProgress,
                        output: String::new(),
                        exit_code: None,
                        duration_ms: None,
                    }),
                    &mut out,
                );
            }
            EventMsg::ExecCommandBegin(begin) => {
                self.start_call(
                    TurnItem::Command(CommandItem {
                        id: begin.call_id.clone(),
                        command: begin.command.clone(),
                        cwd: begin.cwd.clone(),
                        parsed: begin.parsed_cmd.clone(),
                        source: begin.source,
                        status: ItemStatus::InProgress,
                        output: String::new(),
                        exit_code: None,
                        duration_ms: None,
                    }),
                    &mut out,
                );
            }
            EventMsg::ExecCommandOutputDelta(delta) => {
                if !self.completed.contains(&delta.call_id) {
                    out.push(delta_of(
                        delta.call_id.clone(),
                        DeltaKind::CommandOutput,
                        &delta.chunk,
                    ));
                }
            }
            EventMsg::ExecCommandEnd(end) => {
                // Rollouts written before ends carried the parsed command have it only
                // in the begin event.
                let parsed = if end.parsed_cmd.is_empty() {
                    self.started_call(&end.call_id)
                        .and_then(|item| match item {
                            TurnItem::Command(command) => Some(command.parsed.clone()),
                            _ => None,
                        })
                        .unwrap_or_default()
                } else {
                    end.parsed_cmd.clone()
                };
                let item = TurnItem::Command(CommandItem {
                    id: end.call_id.clone(),
                    command: end.command.clone(),
                    cwd: end.cwd.clone(),
                    parsed,
                    source: end.source,
                    status: match end.status {
                        ExecCommandStatus::Completed => ItemStatus::Completed,
                        ExecCommandStatus::Failed => ItemStatus::Failed,
                        ExecCommandStatus::Declined => ItemStatus::Declined,
                    },
                    output: end.aggregated_output.clone(),
                    exit_code: end.exit_code,
                    duration_ms: Some(end.duration_ms),
                });
                self.end_call(item, &mut out);
            }
            EventMsg::ApplyPatchApprovalRequest(request) => self.start_call(
                TurnItem::FileChange(FileChangeItem {
                    id: request.call_id.clone(),
                    changes: request.changes.clone(),
                    status: ItemStatus::InProgress,
                    output: String::new(),
                }),
                &mut out,
            ),
            EventMsg::PatchApplyBegin(begin) => self.start_call(
                TurnItem::FileChange(FileChangeItem {
                    id: begin.call_id.clone(),
                    changes: begin.changes.clone(),
                    status: ItemStatus::InProgress,
                    output: String::new(),
                }),
                &mut out,
            ),
            EventMsg::PatchApplyEnd(end) => {
                let printed = [end.stdout.as_str(), end.stderr.as_str()]
                    .into_iter()
                    .filter(|text| !text.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n");
                let item = TurnItem::FileChange(FileChangeItem {
                    id: end.call_id.clone(),
                    changes: end.changes.clone(),
                    status: if end.success {
                        ItemStatus::Completed
                    } else {
                        ItemStatus::Failed
                    },
                    output: printed.clone(),
                });
                self.start_call(item.clone(), &mut out);
                if !printed.is_empty() && !self.completed.contains(&end.call_id) {
                    out.push(delta_of(
                        end.call_id.clone(),
                        DeltaKind::FileChangeOutput,
                        &printed,
                    ));
                }
                self.end_call(item, &mut out);
            }
            EventMsg::McpToolCallBegin(begin) => self.start_call(
                TurnItem::McpToolCall(McpCallItem {
                    id: begin.call_id.clone(),
                    invocation: begin.invocation.clone(),
                    status: ItemStatus::InProgress,
                    result: None,
                    duration_ms: None,
                }),
                &mut out,
            ),
            EventMsg::McpToolCallProgress(progress) => {
                if !self.completed.contains(&progress.call_id) {
                    out.push(delta_of(
                        progress.call_id.clone(),
                        DeltaKind::McpProgress,
                        &progress.message,
                    ));
                }
            }
            EventMsg::McpToolCallEnd(end) => {
                let item = TurnItem::McpToolCall(McpCallItem {
                    id: end.call_id.clone(),
                    invocation: end.invocation.clone(),
                    status: if end.result.is_ok() {
                        ItemStatus::Completed
                    } else {
                        ItemStatus::Failed
                    },
                    result: Some(end.result.clone()),
                    duration_ms: Some(end.duration_ms),
                });
                self.end_call(item, &mut out);
            }
            EventMsg::ContextCompacted(compacted) => {
                let item = TurnItem::Compaction {
                    id: self.id_or_legacy(&compacted.item_id),
                    items_before: compacted.items_before,
                    items_after: compacted.items_after,
                };
                out.push(ItemEvent::Started(item.clone()));
                out.push(ItemEvent::Completed(item));
            }
            // Not items: the turn's and thread's own events, and requests to the client.
            EventMsg::SessionConfigured(_)
            | EventMsg::Error(_)
            | EventMsg::Warning(_)
            | EventMsg::HookStarted(_)
            | EventMsg::HookCompleted(_)
            | EventMsg::StreamError(_)
            | EventMsg::GoalUpdated(_)
            | EventMsg::GoalCleared(_)
            | EventMsg::TurnDiff(_)
            | EventMsg::PlanUpdate(_)
            | EventMsg::McpStartupUpdate(_)
            | EventMsg::ElicitationRequest(_)
            | EventMsg::UserInputRequest(_)
            | EventMsg::PermissionsRequest(_)
            | EventMsg::RequestExpired(_)
            | EventMsg::TokenCount(_) => {}
        }
        out
    }

    /// Completes whatever is open, for a front end whose stream of events stopped short
    /// of the turn's end (the thread stopped, an interrupt went unconfirmed).
    pub fn finish(&mut self) -> Vec<ItemEvent> {
        let mut out = Vec::new();
        self.sweep(&mut out);
        out
    }

    /// The items open now, in the order the end-of-turn sweep completes them, as they
    /// stand (text so far; calls still in progress).
    pub(crate) fn open_items(&self) -> Vec<TurnItem> {
        let mut open = Vec::new();
        if let Some((id, text)) = &self.message {
            open.push(TurnItem::AgentMessage {
                id: id.clone(),
                text: text.clone(),
            });
        }
        if let Some(reasoning) = &self.reasoning {
            open.push(reasoning_so_far(reasoning));
        }
        if let Some((id, text)) = &self.plan {
            open.push(TurnItem::Plan {
                id: id.clone(),
                text: text.clone(),
            });
        }
        open.extend(self.calls.iter().cloned());
        open
    }

    /// The id of the agent message streaming now.
    pub(crate) fn open_message_id(&self) -> Option<&str> {
        self.message.as_ref().map(|(id, _)| id.as_str())
    }

    /// The id of the reasoning item streaming now.
    pub(crate) fn open_reasoning_id(&self) -> Option<&str> {
        self.reasoning.as_ref().map(|open| open.id.as_str())
    }

    /// Ends everything open. Messages, reasoning and plans are unfinished, with what
    /// streamed; a call ends as the engine's closing event would end it
    /// ([`closing_event`]). The engine closes its calls with real events before a turn
    /// ends, so for calls this acts only on a stream that stopped short (the thread died).
    fn sweep(&mut self, out: &mut Vec<ItemEvent>) {
        let turn_id = self.turn_id.clone();
        for item in self.open_items() {
            match closing_event(&turn_id, &item) {
                Some(end) => out.extend(self.push(&end)),
                None => out.push(ItemEvent::Unfinished(item)),
            }
        }
        self.message = None;
        self.reasoning = None;
        self.plan = None;
        self.calls.clear();
    }

    /// `id`, or for an event recorded before items had ids, `<turn>-<n>`.
    fn id_or_legacy(&mut self, id: &str) -> String {
        if !id.is_empty() {
            return id.to_string();
        }
        self.legacy_id()
    }

    fn legacy_id(&mut self) -> String {
        let n = self.legacy;
        self.legacy += 1;
        format!("{}-{n}", self.turn_id)
    }

    /// The id of the agent message `id` belongs to (the one streaming when the event
    /// has none), announcing it when it is new; another message streaming is completed
    /// first (unfinished).
    fn open_message(&mut self, id: &str, out: &mut Vec<ItemEvent>) -> String {
        match &self.message {
            Some((open, _)) if id.is_empty() || open == id => return open.clone(),
            Some((open, text)) => out.push(ItemEvent::Unfinished(TurnItem::AgentMessage {
                id: open.clone(),
                text: text.clone(),
            })),
            None => {}
        }
        let id = self.id_or_legacy(id);
        out.push(ItemEvent::Started(TurnItem::AgentMessage {
            id: id.clone(),
            text: String::new(),
        }));
        self.message = Some((id.clone(), String::new()));
        id
    }

    /// As [`Self::open_message`], for the reasoning item.
    fn open_reasoning(&mut self, id: &str, out: &mut Vec<ItemEvent>) -> String {
        match &self.reasoning {
            Some(open) if id.is_empty() || open.id == id => return open.id.clone(),
            Some(open) => out.push(ItemEvent::Unfinished(reasoning_so_far(open))),
            None => {}
        }
        let id = self.id_or_legacy(id);
        out.push(ItemEvent::Started(TurnItem::Reasoning {
            id: id.clone(),
            text: String::new(),
            summary: Vec::new(),
            content: Vec::new(),
        }));
        self.reasoning = Some(OpenReasoning {
            id: id.clone(),
            raw: String::new(),
            summary: Vec::new(),
        });
        id
    }

    /// Announces the plan `id` unless it is the one streaming.
    fn open_plan(&mut self, id: &str, out: &mut Vec<ItemEvent>) {
        match &self.plan {
            Some((open, _)) if open == id => return,
            Some((open, text)) => out.push(ItemEvent::Unfinished(TurnItem::Plan {
                id: open.clone(),
                text: text.clone(),
            })),
            None => {}
        }
        out.push(ItemEvent::Started(TurnItem::Plan {
            id: id.to_string(),
            text: String::new(),
        }));
        self.plan = Some((id.to_string(), String::new()));
    }

    fn started_call(&self, id: &str) -> Option<&TurnItem> {
        self.calls.iter().find(|item| item.id() == id)
    }

    /// Announces a tool call once (its approval request and its begin both start it).
    fn start_call(&mut self, item: TurnItem, out: &mut Vec<ItemEvent>) {
        if self.started_call(item.id()).is_some() || self.completed.contains(item.id()) {
            return;
        }
        out.push(ItemEvent::Started(item.clone()));
        self.calls.push(item);
    }

    /// Completes a tool call once, announcing it first when nothing did (its end is all
    /// a rollout keeps).
    fn end_call(&mut self, item: TurnItem, out: &mut Vec<ItemEvent>) {
        if self.completed.contains(item.id()) {
            return;
        }
        self.start_call(item.clone(), out);
        self.calls.retain(|open| open.id() != item.id());
        self.completed.insert(item.id().to_string());
        out.push(ItemEvent::Completed(item));
    }
}

fn delta_of(item_id: String, kind: DeltaKind, text: &str) -> ItemEvent {
    ItemEvent::Delta(ItemDelta {
        item_id,
        kind,
        text: text.to_string(),
    })
}

/// A reasoning item as far as it streamed: the raw text when there is any, else the
/// summary's parts.
fn reasoning_so_far(open: &OpenReasoning) -> TurnItem {
    let summary: Vec<String> = open
        .summary
        .iter()
        .filter(|part| !part.is_empty())
        .cloned()
        .collect();
    let content: Vec<String> = (!open.raw.is_empty())
        .then(|| open.raw.clone())
        .into_iter()
        .collect();
    let text = if open.raw.trim().is_empty() {
        summary.join("\n")
    } else {
        open.raw.clone()
    };
    TurnItem::Reasoning {
        id: open.id.clone(),
        text,
        summary,
        content,
    }
}

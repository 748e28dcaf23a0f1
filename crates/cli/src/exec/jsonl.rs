//! The `exec --json` event stream: engine events in, JSONL lines out.
//!
//! This module owns the wire shapes the TypeScript SDK parses (`thread.started`,
//! `turn.*`, `item.*`, `error`) and the stateful translation from [`EventMsg`] to them:
//! the per-process `item_<n>` id counter, pairing of begin/end events on one id, the
//! todo list's started/updated/completed life cycle and the token usage reported at turn
//! end. It does no I/O; the caller writes the returned lines.

use std::collections::HashMap;

use interpreter_core::items::{ItemEvent, ItemProjector, ItemStatus, TurnItem};
use interpreter_protocol::{
    EventMsg, FileChanges, McpInvocation, McpStartupStatus, StepStatus, TokenUsage,
    TurnAbortReason, UpdatePlanArgs,
};
use serde::Serialize;

/// One line of the JSONL stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub(crate) enum ThreadEvent {
    #[serde(rename = "thread.started")]
    ThreadStarted { thread_id: String },
    #[serde(rename = "turn.started")]
    TurnStarted,
    #[serde(rename = "turn.completed")]
    TurnCompleted { usage: Usage },
    #[serde(rename = "turn.failed")]
    TurnFailed { error: ThreadError },
    #[serde(rename = "item.started")]
    ItemStarted { item: ThreadItem },
    #[serde(rename = "item.updated")]
    ItemUpdated { item: ThreadItem },
    #[serde(rename = "item.completed")]
    ItemCompleted { item: ThreadItem },
    #[serde(rename = "error")]
    Error { message: String },
}

/// Token counts of `turn.completed`; cumulative for the thread, as the SDK expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub(crate) struct Usage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    /// Tokens written to the server's prompt cache (reported on the Messages wire).
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_output_tokens: u64,
}

impl From<&TokenUsage> for Usage {
    fn from(total: &TokenUsage) -> Self {
        Self {
            input_tokens: total.input_tokens,
            cached_input_tokens: total.cached_input_tokens,
            cache_write_input_tokens: total.cache_write_input_tokens,
            output_tokens: total.output_tokens,
            reasoning_output_tokens: total.reasoning_output_tokens,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ThreadError {
    pub message: String,
}

/// An item with its exec-assigned id (`item_<n>`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ThreadItem {
    pub id: String,
    #[serde(flatten)]
    pub details: ItemDetails,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ItemDetails {
    AgentMessage {
        text: String,
    },
    Reasoning {
        text: String,
    },
    CommandExecution {
        command: String,
        aggregated_output: String,
        exit_code: Option<i32>,
        status: CommandExecutionStatus,
    },
    FileChange {
        changes: Vec<FileUpdateChange>,
        status: PatchApplyStatus,
    },
    McpToolCall {
        server: String,
        tool: String,
        arguments: serde_json::Value,
        /// Boxed: JSON values are large where maps keep insertion order, and this variant
        /// would dwarf the others.
        result: Option<Box<McpToolCallResult>>,
        error: Option<ThreadError>,
        status: McpToolCallStatus,
    },
    /// One MCP server of the thread starting: `item.started` with `in_progress`, then
    /// `item.completed` with `ready` (and its tool count) or `failed` (and the error).
    McpServerStartup {
        server: String,
        status: McpServerStartupStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        tools: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ThreadError>,
    },
    TodoList {
        items: Vec<TodoItem>,
    },
    Error {
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CommandExecutionStatus {
    InProgress,
    Completed,
    Failed,
    Declined,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PatchApplyStatus {
    InProgress,
    Completed,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum McpServerStartupStatus {
    InProgress,
    Ready,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum McpToolCallStatus {
    InProgress,
    Completed,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct FileUpdateChange {
    pub path: String,
    pub kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct McpToolCallResult {
    pub content: Vec<serde_json::Value>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
    pub structured_content: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TodoItem {
    pub text: String,
    pub completed: bool,
}

/// The todo list of the running turn: its id and whether `item.started` went out.
#[derive(Debug, Clone)]
struct RunningTodoList {
    id: String,
    items: Vec<TodoItem>,
}

/// Stateful translator from engine events to JSONL events.
#[derive(Debug, Default)]
pub(crate) struct JsonlTranslator {
    next_item: u64,
    /// Which items are open: the engine's projector, the one every front end uses.
    projector: ItemProjector,
    /// Item id of each begun-but-not-ended tool call, by engine `call_id`.
    running_calls: HashMap<String, String>,
    todo_list: Option<RunningTodoList>,
    last_total_usage: Option<TokenUsage>,
    last_error_message: Option<String>,
}

impl JsonlTranslator {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn allocate_id(&mut self) -> String {
        let id = format!("item_{}", self.next_item);
        self.next_item += 1;
        id
    }

    /// Id for the end of a call: the one its begin got, or a fresh one when the begin was
    /// never seen (so the item still appears).
    fn id_for_end(&mut self, call_id: &str) -> String {
        match self.running_calls.remove(call_id) {
            Some(id) => id,
            None => self.allocate_id(),
        }
    }

    fn id_for_begin(&mut self, call_id: &str) -> String {
        let id = self.allocate_id();
        self.running_calls.insert(call_id.to_string(), id.clone());
        id
    }

    /// The `thread.started` line; emitted by the caller once the thread is live.
    pub(crate) fn thread_started(thread_id: &str) -> ThreadEvent {
        ThreadEvent::ThreadStarted {
            thread_id: thread_id.to_string(),
        }
    }

    /// A non-fatal notice from exec itself (for example a refused approval request).
    pub(crate) fn warning_item(&mut self, message: String) -> ThreadEvent {
        ThreadEvent::ItemCompleted {
            item: ThreadItem {
                id: self.allocate_id(),
                details: ItemDetails::Error { message },
            },
        }
    }

    /// Translate one engine event into zero or more JSONL events: its items (through
    /// the engine's projector, the one every front end uses), then what it says of the
    /// turn.
    pub(crate) fn translate(&mut self, msg: &EventMsg) -> Vec<ThreadEvent> {
        let mut out: Vec<ThreadEvent> = self
            .projector
            .push(msg)
            .into_iter()
            .filter_map(|event| self.item_line(event))
            .collect();
        out.extend(self.turn_lines(msg));
        out
    }

    /// The line an item event makes: tool calls start and complete under one
    /// `item_<n>`; answers and reasoning appear once, complete.
    fn item_line(&mut self, event: ItemEvent) -> Option<ThreadEvent> {
        match event {
            ItemEvent::Started(item) => {
                let details = match &item {
                    TurnItem::Command(command) => ItemDetails::CommandExecution {
                        command: interpreter_tools::display_command(&command.command),
                        aggregated_output: String::new(),
                        exit_code: None,
                        status: CommandExecutionStatus::InProgress,
                    },
                    TurnItem::FileChange(change) => ItemDetails::FileChange {
                        changes: file_changes(&change.changes),
                        status: PatchApplyStatus::InProgress,
                    },
                    TurnItem::McpToolCall(call) => mcp_details(&call.invocation, None),
                    // Shown once, complete.
                    TurnItem::UserMessage { .. }
                    | TurnItem::AgentMessage { .. }
                    | TurnItem::Reasoning { .. }
                    | TurnItem::Plan { .. }
                    | TurnItem::EnteredReview { .. }
                    | TurnItem::ExitedReview { .. }
                    | TurnItem::Compaction { .. } => return None,
                };
                let id = self.id_for_begin(item.id());
                Some(ThreadEvent::ItemStarted {
                    item: ThreadItem { id, details },
                })
            }
            ItemEvent::Completed(item) => {
                let details = completed_details(&item)?;
                let id = match &item {
                    TurnItem::Command(_) | TurnItem::FileChange(_) | TurnItem::McpToolCall(_) => {
                        self.id_for_end(item.id())
                    }
                    TurnItem::UserMessage { .. }
                    | TurnItem::AgentMessage { .. }
                    | TurnItem::Reasoning { .. }
                    | TurnItem::Plan { .. }
                    | TurnItem::EnteredReview { .. }
                    | TurnItem::ExitedReview { .. }
                    | TurnItem::Compaction { .. } => self.allocate_id(),
                };
                Some(ThreadEvent::ItemCompleted {
                    item: ThreadItem { id, details },
                })
            }
            // The SDK's items have no deltas; an answer that never finished is not an
            // answer (the SDK takes the last agent message as the turn's response).
            ItemEvent::Delta(_) | ItemEvent::Unfinished(_) => None,
        }
    }

    /// What `msg` says of the turn (and the thread's MCP servers, and the plan).
    fn turn_lines(&mut self, msg: &EventMsg) -> Vec<ThreadEvent> {
        match msg {
            EventMsg::TaskStarted(_) => vec![ThreadEvent::TurnStarted],
            EventMsg::McpStartupUpdate(ev) => {
                let key = format!("mcp-startup:{}", ev.server);
                let (status, tools, error) = match &ev.status {
                    McpStartupStatus::Starting => {
                        let id = self.id_for_begin(&key);
                        return vec![ThreadEvent::ItemStarted {
                            item: ThreadItem {
                                id,
                                details: ItemDetails::McpServerStartup {
                                    server: ev.server.clone(),
                                    status: McpServerStartupStatus::InProgress,
                                    tools: None,
                                    error: None,
                                },
                            },
                        }];
                    }
                    McpStartupStatus::Ready { tools } => {
                        (McpServerStartupStatus::Ready, Some(*tools), None)
                    }
                    McpStartupStatus::Failed { error } => (
                        McpServerStartupStatus::Failed,
                        None,
                        Some(ThreadError {
                            message: error.clone(),
                        }),
                    ),
                };
                let id = self.id_for_end(&key);
                vec![ThreadEvent::ItemCompleted {
                    item: ThreadItem {
                        id,
                        details: ItemDetails::McpServerStartup {
                            server: ev.server.clone(),
                            status,
                            tools,
                            error,
                        },
                    },
                }]
            }
            EventMsg::PlanUpdate(args) => vec![self.plan_update(args)],
            EventMsg::Warning(ev) => vec![self.warning_item(ev.message.clone())],
            // The SDK has no hook item: a run that decided or said something is a
            // warning item; one that passed silently is not shown.
            EventMsg::HookCompleted(ev) => interpreter_core::hooks::run_line(&ev.run)
                .map(|line| self.warning_item(line))
                .into_iter()
                .collect(),
            EventMsg::HookStarted(_) => Vec::new(),
            EventMsg::Error(ev) => {
                self.last_error_message = Some(ev.message.clone());
                vec![ThreadEvent::Error {
                    message: ev.message.clone(),
                }]
            }
            // Codex's wording for a retry notice, with the failure as its details.
            EventMsg::StreamError(ev) => vec![ThreadEvent::Error {
                message: format!(
                    "Reconnecting... {}/{} ({})",
                    ev.attempt, ev.max_attempts, ev.message
                ),
            }],
            EventMsg::TokenCount(ev) => {
                if let Some(info) = &ev.info {
                    self.last_total_usage = Some(info.total_token_usage);
                }
                Vec::new()
            }
            EventMsg::TaskComplete(ev) => {
                let mut out = Vec::new();
                if let Some(todo) = self.todo_list.take() {
                    out.push(ThreadEvent::ItemCompleted {
                        item: ThreadItem {
                            id: todo.id,
                            details: ItemDetails::TodoList { items: todo.items },
                        },
                    });
                }
                self.running_calls.clear();
                match &ev.error {
                    Some(message) => {
                        let message = if message.trim().is_empty() {
                            self.last_error_message
                                .clone()
                                .unwrap_or_else(|| "turn failed".to_string())
                        } else {
                            message.clone()
                        };
                        out.push(ThreadEvent::TurnFailed {
                            error: ThreadError { message },
                        });
                    }
                    None => out.push(ThreadEvent::TurnCompleted {
                        usage: self
                            .last_total_usage
                            .as_ref()
                            .map(Usage::from)
                            .unwrap_or_default(),
                    }),
                }
                out
            }
            // An interrupted turn ends the stream like a failed one, so a consumer
            // waiting for a terminal line is never left hanging.
            EventMsg::TurnAborted(ev) => {
                self.running_calls.clear();
                let reason = match ev.reason {
                    TurnAbortReason::Interrupted => "interrupted",
                    TurnAbortReason::Replaced => "replaced by a newer turn",
                };
                vec![ThreadEvent::TurnFailed {
                    error: ThreadError {
                        message: format!("turn {reason}"),
                    },
                }]
            }
            // Items: above, from the projector.
            EventMsg::UserMessage(_)
            | EventMsg::AgentMessageDelta(_)
            | EventMsg::AgentMessage(_)
            | EventMsg::AgentReasoningDelta(_)
            | EventMsg::AgentReasoningSummaryPartAdded(_)
            | EventMsg::AgentReasoningSummaryDelta(_)
            | EventMsg::AgentReasoning(_)
            | EventMsg::ExecCommandBegin(_)
            | EventMsg::ExecCommandOutputDelta(_)
            | EventMsg::ExecCommandEnd(_)
            | EventMsg::PatchApplyBegin(_)
            | EventMsg::PatchApplyEnd(_)
            | EventMsg::McpToolCallBegin(_)
            | EventMsg::McpToolCallProgress(_)
            | EventMsg::McpToolCallEnd(_)
            | EventMsg::ProposedPlanDelta(_)
            | EventMsg::ProposedPlan(_)
            | EventMsg::EnteredReviewMode(_)
            | EventMsg::ExitedReviewMode(_)
            | EventMsg::ContextCompacted(_)
            | EventMsg::SessionConfigured(_)
            | EventMsg::ExecApprovalRequest(_)
            | EventMsg::ApplyPatchApprovalRequest(_)
            // exec declines it at once and says so in a notice.
            | EventMsg::ElicitationRequest(_)
            | EventMsg::UserInputRequest(_)
            | EventMsg::PermissionsRequest(_)
            // exec answers every request at once; the engine's warning says the rest.
            | EventMsg::RequestExpired(_)
            // The SDK has no turn diff; each `file_change` item carries its own changes.
            | EventMsg::TurnDiff(_)
            // Goals are set through app-server; exec has no way to set one.
            | EventMsg::GoalUpdated(_)
            | EventMsg::GoalCleared(_)
            | EventMsg::ShutdownComplete => Vec::new(),
        }
    }

    fn plan_update(&mut self, args: &UpdatePlanArgs) -> ThreadEvent {
        let items: Vec<TodoItem> = args
            .plan
            .iter()
            .map(|step| TodoItem {
                text: step.step.clone(),
                completed: step.status == StepStatus::Completed,
            })
            .collect();
        match &mut self.todo_list {
            Some(todo) => {
                todo.items = items.clone();
                ThreadEvent::ItemUpdated {
                    item: ThreadItem {
                        id: todo.id.clone(),
                        details: ItemDetails::TodoList { items },
                    },
                }
            }
            None => {
                let id = self.allocate_id();
                self.todo_list = Some(RunningTodoList {
                    id: id.clone(),
                    items: items.clone(),
                });
                ThreadEvent::ItemStarted {
                    item: ThreadItem {
                        id,
                        details: ItemDetails::TodoList { items },
                    },
                }
            }
        }
    }
}

/// A completed item as the SDK's item, when the SDK has a shape for it.
fn completed_details(item: &TurnItem) -> Option<ItemDetails> {
    Some(match item {
        TurnItem::AgentMessage { text, .. } => ItemDetails::AgentMessage { text: text.clone() },
        TurnItem::Reasoning { text, .. } if !text.trim().is_empty() => {
            ItemDetails::Reasoning { text: text.clone() }
        }
        // Codex's exec JSONL has no review items: the review is the turn's agent
        // message, as the answer of any other turn.
        TurnItem::ExitedReview { review, .. } => ItemDetails::AgentMessage {
            text: review.clone(),
        },
        TurnItem::Command(command) => ItemDetails::CommandExecution {
            command: interpreter_tools::display_command(&command.command),
            aggregated_output: command.output.clone(),
            exit_code: command.exit_code,
            status: match command.status {
                ItemStatus::InProgress => CommandExecutionStatus::InProgress,
                ItemStatus::Completed => CommandExecutionStatus::Completed,
                ItemStatus::Failed => CommandExecutionStatus::Failed,
                ItemStatus::Declined => CommandExecutionStatus::Declined,
            },
        },
        TurnItem::FileChange(change) => ItemDetails::FileChange {
            changes: file_changes(&change.changes),
            status: match change.status {
                ItemStatus::InProgress => PatchApplyStatus::InProgress,
                ItemStatus::Completed => PatchApplyStatus::Completed,
                ItemStatus::Failed | ItemStatus::Declined => PatchApplyStatus::Failed,
            },
        },
        // Every completed call carries its end's result (the projector ends a call only
        // through an end event, the engine's or its own closing one).
        TurnItem::McpToolCall(call) => mcp_details(&call.invocation, call.result.as_ref()),
        // The user's own words, an empty reasoning, Plan mode's plan (exec never runs a
        // turn in Plan mode), the start of a review, a compaction: no SDK item.
        TurnItem::Reasoning { .. }
        | TurnItem::UserMessage { .. }
        | TurnItem::Plan { .. }
        | TurnItem::EnteredReview { .. }
        | TurnItem::Compaction { .. } => return None,
    })
}

fn file_changes(changes: &FileChanges) -> Vec<FileUpdateChange> {
    changes
        .iter()
        .map(|(path, change)| FileUpdateChange {
            path: path.display().to_string(),
            kind: change.kind(),
        })
        .collect()
}

fn mcp_details(
    invocation: &McpInvocation,
    outcome: Option<&Result<serde_json::Value, String>>,
) -> ItemDetails {
    let (result, error, status) = match outcome {
        None => (None, None, McpToolCallStatus::InProgress),
        Some(Ok(value)) => {
            let is_error = value
                .get("isError")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false);
            let result = McpToolCallResult {
                content: value
                    .get("content")
                    .and_then(serde_json::Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                meta: value.get("_meta").cloned(),
                structured_content: value
                    .get("structuredContent")
                    .or_else(|| value.get("structured_content"))
                    .cloned(),
            };
            let status = if is_error {
                McpToolCallStatus::Failed
            } else {
                McpToolCallStatus::Completed
            };
            (Some(Box::new(result)), None, status)
        }
        Some(Err(message)) => (
            None,
            Some(ThreadError {
                message: message.clone(),
            }),
            McpToolCallStatus::Failed,
        ),
    };
    ItemDetails::McpToolCall {
        server: invocation.server.clone(),
        tool: invocation.tool.clone(),
        arguments: invocation
            .arguments
            .clone()
            .unwrap_or(serde_json::Value::Null),
        result,
        error,
        status,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use interpreter_protocol::{
        AgentMessageEvent, AgentReasoningEvent, ErrorEvent, ExecCommandBeginEvent,
        ExecCommandEndEvent, ExecCommandStatus, FileChange, McpToolCallBeginEvent,
        McpToolCallEndEvent, PatchApplyBeginEvent, PatchApplyEndEvent, PlanItem, TaskCompleteEvent,
        TaskStartedEvent, TokenCountEvent, TokenUsageInfo, WarningEvent,
    };
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn lines(events: Vec<ThreadEvent>) -> Vec<serde_json::Value> {
        events
            .into_iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect()
    }

    fn command() -> Vec<String> {
        vec!["bash".into(), "-lc".into(), "echo hi > out.txt".into()]
    }

    #[test]
    fn command_begin_and_end_share_an_id() {
        let mut t = JsonlTranslator::new();
        assert_eq!(
            lines(t.translate(&EventMsg::TaskStarted(TaskStartedEvent {
                turn_id: "1".into(),
                model_context_window: None,
            }))),
            vec![json!({"type": "turn.started"})]
        );
        let begin = t.translate(&EventMsg::ExecCommandBegin(ExecCommandBeginEvent {
            call_id: "call_1".into(),
            turn_id: "1".into(),
            command: command(),
            cwd: PathBuf::from("/w"),
            parsed_cmd: vec![],
            source: Default::default(),
        }));
        assert_eq!(
            lines(begin),
            vec![json!({"type": "item.started", "item": {
                "id": "item_0", "type": "command_execution",
                "command": "bash -lc 'echo hi > out.txt'", "aggregated_output": "",
                "exit_code": null, "status": "in_progress"}})]
        );
        let end = t.translate(&EventMsg::ExecCommandEnd(ExecCommandEndEvent {
            parsed_cmd: Vec::new(),
            call_id: "call_1".into(),
            turn_id: "1".into(),
            command: command(),
            cwd: PathBuf::from("/w"),
            exit_code: Some(0),
            aggregated_output: "hi\n".into(),
            duration_ms: 3,
            status: ExecCommandStatus::Completed,
            source: Default::default(),
        }));
        assert_eq!(
            lines(end),
            vec![json!({"type": "item.completed", "item": {
                "id": "item_0", "type": "command_execution",
                "command": "bash -lc 'echo hi > out.txt'", "aggregated_output": "hi\n",
                "exit_code": 0, "status": "completed"}})]
        );
        let declined = t.translate(&EventMsg::ExecCommandEnd(ExecCommandEndEvent {
            parsed_cmd: Vec::new(),
            call_id: "never_began".into(),
            turn_id: "1".into(),
            command: vec!["rm".into(), "-rf".into(), "/".into()],
            cwd: PathBuf::from("/w"),
            exit_code: None,
            aggregated_output: String::new(),
            duration_ms: 0,
            status: ExecCommandStatus::Declined,
            source: Default::default(),
        }));
        // A command that never began still starts and completes, under one id.
        let declined = lines(declined);
        assert_eq!(declined[0]["type"], "item.started");
        assert_eq!(declined[0]["item"]["id"], "item_1");
        assert_eq!(
            declined[1]["item"],
            json!({"id": "item_1", "type": "command_execution", "command": "rm -rf /",
                   "aggregated_output": "", "exit_code": null, "status": "declined"})
        );
    }

    #[test]
    fn file_change_and_messages() {
        let mut t = JsonlTranslator::new();
        let mut changes: FileChanges = BTreeMap::new();
        changes.insert(
            PathBuf::from("/w/a.txt"),
            FileChange::Add {
                content: "x\n".into(),
            },
        );
        changes.insert(
            PathBuf::from("/w/b.txt"),
            FileChange::Update {
                unified_diff: String::new(),
                move_path: None,
            },
        );
        let begin = t.translate(&EventMsg::PatchApplyBegin(PatchApplyBeginEvent {
            call_id: "p".into(),
            turn_id: "1".into(),
            auto_approved: true,
            changes: changes.clone(),
        }));
        let end = t.translate(&EventMsg::PatchApplyEnd(PatchApplyEndEvent {
            call_id: "p".into(),
            turn_id: "1".into(),
            stdout: String::new(),
            stderr: String::new(),
            success: false,
            changes,
        }));
        let expected_changes = json!([{"path": "/w/a.txt", "kind": "add"},
                                      {"path": "/w/b.txt", "kind": "update"}]);
        assert_eq!(
            lines(begin)[0],
            json!({"type": "item.started", "item": {"id": "item_0", "type": "file_change",
                   "changes": expected_changes, "status": "in_progress"}})
        );
        assert_eq!(
            lines(end)[0],
            json!({"type": "item.completed", "item": {"id": "item_0", "type": "file_change",
                   "changes": expected_changes, "status": "failed"}})
        );
        let reasoning = t.translate(&EventMsg::AgentReasoning(AgentReasoningEvent {
            item_id: String::new(),
            text: "thinking".into(),
            summary: Vec::new(),
            content: vec!["thinking".into()],
        }));
        assert_eq!(
            lines(reasoning)[0],
            json!({"type": "item.completed",
                   "item": {"id": "item_1", "type": "reasoning", "text": "thinking"}})
        );
        assert!(
            t.translate(&EventMsg::AgentReasoning(AgentReasoningEvent {
                item_id: String::new(),
                text: "  \n".into(),
                summary: Vec::new(),
                content: Vec::new(),
            }))
            .is_empty()
        );
        let message = t.translate(&EventMsg::AgentMessage(AgentMessageEvent {
            item_id: String::new(),
            message: "Done.".into(),
        }));
        assert_eq!(
            lines(message)[0],
            json!({"type": "item.completed",
                   "item": {"id": "item_2", "type": "agent_message", "text": "Done."}})
        );
        let warning = t.translate(&EventMsg::Warning(WarningEvent {
            message: "careful".into(),
        }));
        assert_eq!(
            lines(warning)[0],
            json!({"type": "item.completed",
                   "item": {"id": "item_3", "type": "error", "message": "careful"}})
        );
    }

    #[test]
    fn todo_list_lifecycle_and_usage() {
        let mut t = JsonlTranslator::new();
        let plan = |done: bool| {
            EventMsg::PlanUpdate(UpdatePlanArgs {
                explanation: None,
                plan: vec![PlanItem {
                    step: "write code".into(),
                    status: if done {
                        StepStatus::Completed
                    } else {
                        StepStatus::InProgress
                    },
                }],
            })
        };
        assert_eq!(
            lines(t.translate(&plan(false)))[0],
            json!({"type": "item.started", "item": {"id": "item_0", "type": "todo_list",
                   "items": [{"text": "write code", "completed": false}]}})
        );
        assert_eq!(
            lines(t.translate(&plan(true)))[0],
            json!({"type": "item.updated", "item": {"id": "item_0", "type": "todo_list",
                   "items": [{"text": "write code", "completed": true}]}})
        );
        let usage = TokenUsage {
            input_tokens: 100,
            cached_input_tokens: 40,
            cache_write_input_tokens: 3,
            output_tokens: 7,
            reasoning_output_tokens: 2,
            total_tokens: 107,
        };
        assert!(
            t.translate(&EventMsg::TokenCount(TokenCountEvent {
                info: Some(TokenUsageInfo {
                    total_token_usage: usage,
                    last_token_usage: usage,
                    model_context_window: None,
                }),
            }))
            .is_empty()
        );
        let end = t.translate(&EventMsg::TaskComplete(TaskCompleteEvent {
            turn_id: "1".into(),
            last_agent_message: None,
            error: None,
            output_limit: false,
        }));
        assert_eq!(
            lines(end),
            vec![
                json!({"type": "item.completed", "item": {"id": "item_0", "type": "todo_list",
                       "items": [{"text": "write code", "completed": true}]}}),
                json!({"type": "turn.completed", "usage": {"input_tokens": 100,
                       "cached_input_tokens": 40, "cache_write_input_tokens": 3,
                       "output_tokens": 7, "reasoning_output_tokens": 2}}),
            ]
        );
    }

    #[test]
    fn failed_turn_and_errors() {
        let mut t = JsonlTranslator::new();
        let error = t.translate(&EventMsg::Error(ErrorEvent {
            message: "stream idle".into(),
            kind: None,
        }));
        assert_eq!(
            lines(error),
            vec![json!({"type": "error", "message": "stream idle"})]
        );
        let end = t.translate(&EventMsg::TaskComplete(TaskCompleteEvent {
            turn_id: "1".into(),
            last_agent_message: None,
            error: Some(String::new()),
            output_limit: false,
        }));
        assert_eq!(
            lines(end),
            vec![json!({"type": "turn.failed", "error": {"message": "stream idle"}})]
        );
        assert_eq!(
            serde_json::to_value(JsonlTranslator::thread_started("abc")).unwrap(),
            json!({"type": "thread.started", "thread_id": "abc"})
        );
    }

    #[test]
    fn mcp_tool_call_shapes() {
        let mut t = JsonlTranslator::new();
        let invocation = McpInvocation {
            server: "docs".into(),
            tool: "search".into(),
            arguments: Some(json!({"q": "x"})),
        };
        let begin = t.translate(&EventMsg::McpToolCallBegin(McpToolCallBeginEvent {
            call_id: "m".into(),
            invocation: invocation.clone(),
        }));
        assert_eq!(
            lines(begin)[0]["item"],
            json!({"id": "item_0", "type": "mcp_tool_call", "server": "docs", "tool": "search",
                   "arguments": {"q": "x"}, "result": null, "error": null,
                   "status": "in_progress"})
        );
        let end = t.translate(&EventMsg::McpToolCallEnd(McpToolCallEndEvent {
            call_id: "m".into(),
            invocation: invocation.clone(),
            duration_ms: 1,
            result: Ok(json!({"content": [{"type": "text", "text": "r"}]})),
        }));
        assert_eq!(
            lines(end)[0]["item"],
            json!({"id": "item_0", "type": "mcp_tool_call", "server": "docs", "tool": "search",
                   "arguments": {"q": "x"},
                   "result": {"content": [{"type": "text", "text": "r"}],
                              "structured_content": null},
                   "error": null, "status": "completed"})
        );
        let failed = t.translate(&EventMsg::McpToolCallEnd(McpToolCallEndEvent {
            call_id: "m2".into(),
            invocation,
            duration_ms: 1,
            result: Err("boom".into()),
        }));
        assert_eq!(
            lines(failed)[1]["item"]["error"],
            json!({"message": "boom"})
        );
    }
}

//! A turn, driven: the thread's events become notifications for every connection that
//! follows the thread, and approval requests become server→client requests.
//!
//! Order on the wire for one turn (see docs/app-server.md):
//! `turn/started` → per item `item/started` → its deltas → `item/completed` →
//! `turn/completed`. A command or patch that needs approval is `item/started`, then the
//! approval request, then `serverRequest/resolved`, then (when it runs) output deltas,
//! then `item/completed`. `error` precedes the `turn/completed` of a failed turn.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use interpreter_core::config::ElicitationFallback;
use interpreter_protocol::approval_answer::decode_approval_answer;
use interpreter_protocol::{
    ApplyPatchApprovalRequestEvent, Event, EventMsg, ExecApprovalRequestEvent, ExecCommandSource,
    Op, ReviewDecision,
};
use tokio::sync::OwnedMutexGuard;
use tokio_util::sync::CancellationToken;

use crate::connection::{ClientAnswer, Connection};
use crate::mapping;
use crate::protocol::v1;
use crate::protocol::v2::{
    self, CommandExecutionStatus, ItemsView, McpToolCallStatus, PatchApplyStatus, ThreadItem,
    ThreadStatus, Turn, TurnStatus,
};
use crate::protocol::{METHOD_NOT_FOUND, RequestId, now_ms};
use crate::state::{LoadedThread, ServerState};

/// Per-turn mapping state: which items are open.
struct TurnItems {
    thread_id: String,
    turn_id: String,
    next: u64,
    agent_message: Option<(String, String)>,
    /// The reasoning item streaming now, by id.
    reasoning: Option<String>,
    /// The proposed plan streaming in (Plan mode): its id and text so far.
    plan: Option<(String, String)>,
    /// Commands and patches started (by approval request or begin event), by call id.
    started: HashMap<String, ThreadItem>,
    completed: HashSet<String>,
    started_at: i64,
    client_user_message_id: Option<String>,
}

impl TurnItems {
    fn next_id(&mut self, kind: &str) -> String {
        self.next += 1;
        format!("{}-{kind}-{}", self.turn_id, self.next)
    }
}

/// The reasoning item that deltas belong to: the one streaming, or a new one announced
/// with `item/started`.
fn open_reasoning(loaded: &LoadedThread, items: &mut TurnItems) -> String {
    if let Some(id) = &items.reasoning {
        return id.clone();
    }
    let id = items.next_id("reasoning");
    let empty = mapping::reasoning_item(id.clone(), "", Vec::new(), Vec::new());
    item_started(loaded, items, &empty);
    items.reasoning = Some(id.clone());
    id
}

/// Read the thread's events until this turn ends. The turn slot is held throughout, so
/// no other front end reads this thread's events meanwhile.
pub(crate) async fn drive(
    state: &Arc<ServerState>,
    loaded: &Arc<LoadedThread>,
    turn_id: &str,
    client_user_message_id: Option<String>,
    _slot: OwnedMutexGuard<()>,
) {
    let thread_id = loaded.id().to_string();
    let mut items = TurnItems {
        thread_id: thread_id.clone(),
        turn_id: turn_id.to_string(),
        next: 0,
        agent_message: None,
        reasoning: None,
        plan: None,
        started: HashMap::new(),
        completed: HashSet::new(),
        started_at: now_ms(),
        client_user_message_id,
    };
    // Ends the approval waits of this turn when it ends.
    let turn_over = CancellationToken::new();
    let _end_waits = turn_over.clone().drop_guard();
    let mut last_error: Option<v2::TurnError> = None;
    let mut interrupted_at: Option<tokio::time::Instant> = None;
    loop {
        let drain_deadline =
            interrupted_at.map(|at| at + interpreter_core::Thread::INTERRUPT_CONFIRM_DEADLINE);
        let event = tokio::select! {
            biased;
            () = state.shutdown.cancelled(), if interrupted_at.is_none() => {
                interrupted_at = Some(tokio::time::Instant::now());
                if let Err(e) = loaded.thread.submit(Op::Interrupt).await {
                    tracing::warn!("interrupting thread {thread_id} failed: {e}");
                }
                continue;
            }
            () = sleep_until_opt(drain_deadline) => {
                tracing::warn!("thread {thread_id} did not confirm the interrupt in time");
                finish(loaded, &mut items, TurnStatus::Interrupted, None);
                return;
            }
            event = loaded.thread.next_event() => event,
        };
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                let error = mapping::turn_error(format!("the thread stopped: {e}"), None);
                emit_error(loaded, &items, error.clone(), false);
                finish(loaded, &mut items, TurnStatus::Failed, Some(error));
                return;
            }
        };
        let Event {
            id: event_turn,
            msg,
        } = event;
        match msg {
            EventMsg::TaskStarted(started) => {
                // A follow-up turn (input that arrived as the previous turn ended) is
                // announced under its own id.
                items.turn_id = started.turn_id.clone();
                items.started_at = now_ms();
                loaded.broadcast(
                    "thread/status/changed",
                    &v2::ThreadStatusChangedNotification {
                        thread_id: thread_id.clone(),
                        status: ThreadStatus::Active {
                            active_flags: Vec::new(),
                        },
                    },
                );
                loaded.broadcast(
                    "turn/started",
                    &v2::TurnStartedNotification {
                        thread_id: thread_id.clone(),
                        turn: turn_object(&items.turn_id, TurnStatus::InProgress, None, None),
                    },
                );
            }
            EventMsg::UserMessage(message) => {
                let id = items.next_id("user");
                let item = mapping::user_message_item(
                    id,
                    &message.message,
                    items.client_user_message_id.take(),
                );
                item_started(loaded, &items, &item);
                item_completed(loaded, &items, &item);
            }
            EventMsg::AgentMessageDelta(delta) => {
                let item_id = match &items.agent_message {
                    Some((id, _)) => id.clone(),
                    None => {
                        let id = items.next_id("msg");
                        item_started(loaded, &items, &mapping::agent_message_item(id.clone(), ""));
                        items.agent_message = Some((id.clone(), String::new()));
                        id
                    }
                };
                if let Some((_, text)) = &mut items.agent_message {
                    text.push_str(&delta.delta);
                }
                loaded.broadcast(
                    "item/agentMessage/delta",
                    &v2::ItemDeltaNotification {
                        thread_id: thread_id.clone(),
                        turn_id: items.turn_id.clone(),
                        item_id,
                        delta: delta.delta,
                    },
                );
            }
            EventMsg::AgentMessage(message) => {
                let id = match items.agent_message.take() {
                    Some((id, _)) => id,
                    None => {
                        let id = items.next_id("msg");
                        item_started(loaded, &items, &mapping::agent_message_item(id.clone(), ""));
                        id
                    }
                };
                item_completed(
                    loaded,
                    &items,
                    &mapping::agent_message_item(id, &message.message),
                );
            }
            EventMsg::ProposedPlanDelta(delta) => {
                if items
                    .plan
                    .as_ref()
                    .is_none_or(|(id, _)| *id != delta.item_id)
                {
                    item_started(loaded, &items, &plan_item(&delta.item_id, ""));
                    items.plan = Some((delta.item_id.clone(), String::new()));
                }
                if let Some((_, text)) = &mut items.plan {
                    text.push_str(&delta.delta);
                }
                loaded.broadcast(
                    "item/plan/delta",
                    &v2::PlanDeltaNotification {
                        thread_id: thread_id.clone(),
                        turn_id: items.turn_id.clone(),
                        item_id: delta.item_id,
                        delta: delta.delta,
                    },
                );
            }
            EventMsg::ProposedPlan(plan) => {
                if items.plan.take().is_none_or(|(id, _)| id != plan.item_id) {
                    item_started(loaded, &items, &plan_item(&plan.item_id, ""));
                }
                item_completed(loaded, &items, &plan_item(&plan.item_id, &plan.text));
            }
            EventMsg::EnteredReviewMode(entered) => {
                let item = ThreadItem::EnteredReviewMode {
                    id: entered.item_id,
                    review: entered.review,
                };
                item_started(loaded, &items, &item);
                item_completed(loaded, &items, &item);
            }
            EventMsg::ExitedReviewMode(exited) => {
                let item = ThreadItem::ExitedReviewMode {
                    id: exited.item_id,
                    review: exited.review,
                };
                item_started(loaded, &items, &item);
                item_completed(loaded, &items, &item);
            }
            EventMsg::AgentReasoningDelta(delta) => {
                let item_id = open_reasoning(loaded, &mut items);
                loaded.broadcast(
                    "item/reasoning/textDelta",
                    &v2::ReasoningTextDeltaNotification {
                        thread_id: thread_id.clone(),
                        turn_id: items.turn_id.clone(),
                        item_id,
                        delta: delta.delta,
                        content_index: 0,
                    },
                );
            }
            EventMsg::AgentReasoningSummaryPartAdded(part) => {
                let item_id = open_reasoning(loaded, &mut items);
                loaded.broadcast(
                    "item/reasoning/summaryPartAdded",
                    &v2::ReasoningSummaryPartAddedNotification {
                        thread_id: thread_id.clone(),
                        turn_id: items.turn_id.clone(),
                        item_id,
                        summary_index: part.summary_index,
                    },
                );
            }
            EventMsg::AgentReasoningSummaryDelta(delta) => {
                let item_id = open_reasoning(loaded, &mut items);
                loaded.broadcast(
                    "item/reasoning/summaryTextDelta",
                    &v2::ReasoningSummaryTextDeltaNotification {
                        thread_id: thread_id.clone(),
                        turn_id: items.turn_id.clone(),
                        item_id,
                        delta: delta.delta,
                        summary_index: delta.summary_index,
                    },
                );
            }
            EventMsg::AgentReasoning(reasoning) => {
                let id = open_reasoning(loaded, &mut items);
                items.reasoning = None;
                item_completed(
                    loaded,
                    &items,
                    &mapping::reasoning_item(
                        id,
                        &reasoning.text,
                        reasoning.summary,
                        reasoning.content,
                    ),
                );
            }
            EventMsg::ExecApprovalRequest(request) => {
                let item = mapping::command_item(
                    &request.call_id,
                    &request.command,
                    &request.cwd,
                    &request.parsed_cmd,
                    CommandExecutionStatus::InProgress,
                    None,
                    None,
                    None,
                    ExecCommandSource::Agent,
                );
                start_once(loaded, &mut items, &request.call_id, item);
                ask_exec_approval(loaded, &items, request, &turn_over);
            }
            EventMsg::ExecCommandBegin(begin) => {
                let item = mapping::command_item(
                    &begin.call_id,
                    &begin.command,
                    &begin.cwd,
                    &begin.parsed_cmd,
                    CommandExecutionStatus::InProgress,
                    None,
                    None,
                    None,
                    begin.source,
                );
                start_once(loaded, &mut items, &begin.call_id, item);
            }
            EventMsg::ExecCommandOutputDelta(delta) => {
                loaded.broadcast(
                    "item/commandExecution/outputDelta",
                    &v2::ItemDeltaNotification {
                        thread_id: thread_id.clone(),
                        turn_id: items.turn_id.clone(),
                        item_id: delta.call_id,
                        delta: delta.chunk,
                    },
                );
            }
            EventMsg::ExecCommandEnd(end) => {
                let parsed = match items.started.get(&end.call_id) {
                    Some(ThreadItem::CommandExecution {
                        command_actions, ..
                    }) => command_actions.clone(),
                    _ => Vec::new(),
                };
                let mut item = mapping::command_item(
                    &end.call_id,
                    &end.command,
                    &end.cwd,
                    &[],
                    mapping::command_status(end.status),
                    Some(&end.aggregated_output),
                    end.exit_code,
                    Some(end.duration_ms),
                    end.source,
                );
                if let ThreadItem::CommandExecution {
                    command_actions, ..
                } = &mut item
                {
                    *command_actions = parsed;
                }
                start_once(loaded, &mut items, &end.call_id, item.clone());
                complete_once(loaded, &mut items, &end.call_id, item);
            }
            EventMsg::ApplyPatchApprovalRequest(request) => {
                let item = ThreadItem::FileChange {
                    id: request.call_id.clone(),
                    changes: mapping::file_changes(&request.changes),
                    status: PatchApplyStatus::InProgress,
                };
                start_once(loaded, &mut items, &request.call_id, item);
                ask_patch_approval(loaded, &items, request, &turn_over);
            }
            EventMsg::PatchApplyBegin(begin) => {
                let item = ThreadItem::FileChange {
                    id: begin.call_id.clone(),
                    changes: mapping::file_changes(&begin.changes),
                    status: PatchApplyStatus::InProgress,
                };
                start_once(loaded, &mut items, &begin.call_id, item);
            }
            EventMsg::PatchApplyEnd(end) => {
                let item = ThreadItem::FileChange {
                    id: end.call_id.clone(),
                    changes: mapping::file_changes(&end.changes),
                    status: if end.success {
                        PatchApplyStatus::Completed
                    } else {
                        PatchApplyStatus::Failed
                    },
                };
                start_once(loaded, &mut items, &end.call_id, item.clone());
                let output = [end.stdout.as_str(), end.stderr.as_str()]
                    .iter()
                    .filter(|text| !text.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join("\n");
                if !output.is_empty() && !items.completed.contains(&end.call_id) {
                    loaded.broadcast(
                        "item/fileChange/outputDelta",
                        &v2::FileChangeOutputDeltaNotification {
                            thread_id: thread_id.clone(),
                            turn_id: items.turn_id.clone(),
                            item_id: end.call_id.clone(),
                            delta: output,
                        },
                    );
                }
                complete_once(loaded, &mut items, &end.call_id, item);
            }
            EventMsg::McpToolCallBegin(begin) => {
                let item = ThreadItem::McpToolCall {
                    id: begin.call_id.clone(),
                    server: begin.invocation.server,
                    tool: begin.invocation.tool,
                    status: McpToolCallStatus::InProgress,
                    arguments: begin.invocation.arguments.unwrap_or_default(),
                    result: None,
                    error: None,
                    duration_ms: None,
                };
                start_once(loaded, &mut items, &begin.call_id, item);
            }
            EventMsg::McpToolCallProgress(progress) => {
                if !items.completed.contains(&progress.call_id) {
                    loaded.broadcast(
                        "item/mcpToolCall/progress",
                        &v2::McpToolCallProgressNotification {
                            thread_id: thread_id.clone(),
                            turn_id: items.turn_id.clone(),
                            item_id: progress.call_id,
                            message: progress.message,
                        },
                    );
                }
            }
            EventMsg::McpToolCallEnd(end) => {
                let item = mapping::mcp_call_item(&end);
                start_once(loaded, &mut items, &end.call_id, item.clone());
                complete_once(loaded, &mut items, &end.call_id, item);
            }
            EventMsg::PlanUpdate(plan) => loaded.broadcast(
                "turn/plan/updated",
                &v2::TurnPlanUpdatedNotification {
                    thread_id: thread_id.clone(),
                    turn_id: items.turn_id.clone(),
                    explanation: plan.explanation,
                    plan: plan
                        .plan
                        .into_iter()
                        .map(|item| v2::PlanStep {
                            step: item.step,
                            status: match item.status {
                                interpreter_protocol::StepStatus::Pending => "pending",
                                interpreter_protocol::StepStatus::InProgress => "inProgress",
                                interpreter_protocol::StepStatus::Completed => "completed",
                            }
                            .to_string(),
                        })
                        .collect(),
                },
            ),
            // Changes this turn made to the goal; those recorded for a client's
            // `thread/goal/set` were announced by that method and are skipped here.
            EventMsg::GoalUpdated(updated) if event_turn == items.turn_id => loaded.broadcast(
                "thread/goal/updated",
                &v2::ThreadGoalUpdatedNotification {
                    thread_id: thread_id.clone(),
                    turn_id: Some(items.turn_id.clone()),
                    goal: crate::goals::wire_goal(loaded.id(), updated.goal),
                },
            ),
            EventMsg::GoalUpdated(_) | EventMsg::GoalCleared(_) => {}
            EventMsg::TurnDiff(diff) => loaded.broadcast(
                "turn/diff/updated",
                &v2::TurnDiffUpdatedNotification {
                    thread_id: thread_id.clone(),
                    turn_id: items.turn_id.clone(),
                    diff: diff.unified_diff,
                },
            ),
            EventMsg::TokenCount(count) => {
                if let Some(info) = count.info {
                    let breakdown =
                        |u: &interpreter_protocol::TokenUsage| v2::TokenUsageBreakdown {
                            total_tokens: clamp(u.total_tokens),
                            input_tokens: clamp(u.input_tokens),
                            cached_input_tokens: clamp(u.cached_input_tokens),
                            cache_write_input_tokens: 0,
                            output_tokens: clamp(u.output_tokens),
                            reasoning_output_tokens: clamp(u.reasoning_output_tokens),
                        };
                    loaded.broadcast(
                        "thread/tokenUsage/updated",
                        &v2::ThreadTokenUsageUpdatedNotification {
                            thread_id: thread_id.clone(),
                            turn_id: items.turn_id.clone(),
                            token_usage: v2::ThreadTokenUsage {
                                total: breakdown(&info.total_token_usage),
                                last: breakdown(&info.last_token_usage),
                                model_context_window: info.model_context_window.map(clamp),
                            },
                        },
                    );
                }
            }
            EventMsg::ContextCompacted(_) => {
                let item = ThreadItem::ContextCompaction {
                    id: items.next_id("compaction"),
                };
                item_started(loaded, &items, &item);
                item_completed(loaded, &items, &item);
                loaded.broadcast(
                    "thread/compacted",
                    &v2::ContextCompactedNotification {
                        thread_id: thread_id.clone(),
                        turn_id: items.turn_id.clone(),
                    },
                );
            }
            EventMsg::Error(error) => {
                let error = mapping::turn_error(error.message, error.kind);
                emit_error(loaded, &items, error.clone(), false);
                last_error = Some(error);
            }
            EventMsg::StreamError(error) => {
                let error = mapping::turn_error(
                    format!(
                        "{} (retry {}/{})",
                        error.message, error.attempt, error.max_attempts
                    ),
                    None,
                );
                emit_error(loaded, &items, error, true);
            }
            EventMsg::Warning(warning) => loaded.broadcast(
                "warning",
                &v2::WarningNotification {
                    thread_id: Some(thread_id.clone()),
                    message: warning.message,
                },
            ),
            EventMsg::TaskComplete(done) => {
                let error = done.error.map(|message| {
                    last_error
                        .take()
                        .unwrap_or_else(|| mapping::turn_error(message, None))
                });
                let status = if error.is_some() {
                    TurnStatus::Failed
                } else {
                    TurnStatus::Completed
                };
                items.turn_id = done.turn_id;
                finish(loaded, &mut items, status, error);
                // A follow-up turn left over from before ours (input that arrived as an
                // earlier turn ended) was announced and finished; ours goes on.
                if items.turn_id == turn_id {
                    return;
                }
            }
            EventMsg::TurnAborted(aborted) => {
                items.turn_id = aborted.turn_id;
                finish(loaded, &mut items, TurnStatus::Interrupted, None);
                if items.turn_id == turn_id {
                    return;
                }
            }
            EventMsg::ShutdownComplete => {
                let error = mapping::turn_error("the thread shut down".into(), None);
                finish(loaded, &mut items, TurnStatus::Failed, Some(error));
                return;
            }
            EventMsg::SessionConfigured(_) => {}
            EventMsg::McpStartupUpdate(update) => loaded.broadcast(
                "mcpServer/startupStatus/updated",
                &crate::mcp_api::startup_notification(&thread_id, &update),
            ),
            EventMsg::UserInputRequest(request) => crate::user_requests::ask_user_input(
                loaded,
                approver(loaded),
                &items.turn_id,
                request,
                &turn_over,
            ),
            EventMsg::PermissionsRequest(request) => crate::user_requests::ask_permissions(
                loaded,
                approver(loaded),
                &items.turn_id,
                request,
                &turn_over,
            ),
            // The engine's deadline passed: its request is resolved (timed out); the
            // task asking the client withdraws it.
            EventMsg::RequestExpired(expired) => loaded.open_requests.expire(&expired.id),
            EventMsg::ElicitationRequest(request) => {
                crate::mcp_api::ask_elicitation(
                    loaded,
                    approver(loaded),
                    &items.turn_id,
                    request,
                    &turn_over,
                );
            }
        }
    }
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn turn_object(
    id: &str,
    status: TurnStatus,
    error: Option<v2::TurnError>,
    started_at_ms: Option<i64>,
) -> Turn {
    let now = now_ms();
    let done = status != TurnStatus::InProgress;
    Turn {
        id: id.to_string(),
        items: Vec::new(),
        items_view: ItemsView::NotLoaded,
        status,
        error,
        started_at: started_at_ms.map(|ms| ms / 1000),
        completed_at: done.then_some(now / 1000),
        duration_ms: started_at_ms.filter(|_| done).map(|ms| now - ms),
    }
}

fn plan_item(id: &str, text: &str) -> ThreadItem {
    ThreadItem::Plan {
        id: id.to_string(),
        text: text.to_string(),
    }
}

fn item_started(loaded: &LoadedThread, items: &TurnItems, item: &ThreadItem) {
    loaded.broadcast(
        "item/started",
        &v2::ItemStartedNotification {
            item: item.clone(),
            thread_id: items.thread_id.clone(),
            turn_id: items.turn_id.clone(),
            started_at_ms: now_ms(),
        },
    );
}

fn item_completed(loaded: &LoadedThread, items: &TurnItems, item: &ThreadItem) {
    loaded.broadcast(
        "item/completed",
        &v2::ItemCompletedNotification {
            item: item.clone(),
            thread_id: items.thread_id.clone(),
            turn_id: items.turn_id.clone(),
            completed_at_ms: now_ms(),
        },
    );
}

fn start_once(loaded: &LoadedThread, items: &mut TurnItems, call_id: &str, item: ThreadItem) {
    if items.started.contains_key(call_id) {
        return;
    }
    item_started(loaded, items, &item);
    items.started.insert(call_id.to_string(), item);
}

fn complete_once(loaded: &LoadedThread, items: &mut TurnItems, call_id: &str, item: ThreadItem) {
    if items.completed.insert(call_id.to_string()) {
        item_completed(loaded, items, &item);
    }
}

fn emit_error(loaded: &LoadedThread, items: &TurnItems, error: v2::TurnError, will_retry: bool) {
    loaded.broadcast(
        "error",
        &v2::ErrorNotification {
            error,
            will_retry,
            thread_id: items.thread_id.clone(),
            turn_id: items.turn_id.clone(),
        },
    );
}

/// Close what is still open (a declined patch never reports an end; an interrupted
/// command may not), then `turn/completed`.
fn finish(
    loaded: &LoadedThread,
    items: &mut TurnItems,
    status: TurnStatus,
    error: Option<v2::TurnError>,
) {
    if let Some((id, text)) = items.agent_message.take() {
        item_completed(loaded, items, &mapping::agent_message_item(id, &text));
    }
    if let Some(id) = items.reasoning.take() {
        let empty = mapping::reasoning_item(id, "", Vec::new(), Vec::new());
        item_completed(loaded, items, &empty);
    }
    if let Some((id, text)) = items.plan.take() {
        item_completed(loaded, items, &plan_item(&id, &text));
    }
    let open: Vec<(String, ThreadItem)> = items
        .started
        .iter()
        .filter(|(id, _)| !items.completed.contains(*id))
        .map(|(id, item)| (id.clone(), item.clone()))
        .collect();
    for (call_id, mut item) in open {
        match &mut item {
            ThreadItem::CommandExecution { status: s, .. } => {
                *s = CommandExecutionStatus::Declined;
            }
            ThreadItem::FileChange { status: s, .. } => *s = PatchApplyStatus::Declined,
            ThreadItem::McpToolCall { status: s, .. } => *s = McpToolCallStatus::Failed,
            _ => {}
        }
        complete_once(loaded, items, &call_id, item);
    }
    // Idle before the client hears it: a request sent on `turn/completed` (the next
    // turn, a compaction) must not find this turn still running.
    loaded.end_turn(&items.turn_id);
    loaded.broadcast(
        "turn/completed",
        &v2::TurnCompletedNotification {
            thread_id: items.thread_id.clone(),
            turn: turn_object(&items.turn_id, status, error, Some(items.started_at)),
        },
    );
    loaded.broadcast(
        "thread/status/changed",
        &v2::ThreadStatusChangedNotification {
            thread_id: items.thread_id.clone(),
            status: ThreadStatus::Idle,
        },
    );
}

/// Who is asked: the connection that started the turn, else any live follower.
pub(crate) fn approver(loaded: &LoadedThread) -> Option<Arc<Connection>> {
    let owner = loaded
        .active_turn()
        .map(|turn| turn.owner)
        .filter(|c| !c.is_closed());
    owner.or_else(|| loaded.subscribers().into_iter().next())
}

fn ask_exec_approval(
    loaded: &Arc<LoadedThread>,
    items: &TurnItems,
    request: ExecApprovalRequestEvent,
    turn_over: &CancellationToken,
) {
    let Some(connection) = approver(loaded) else {
        answer_later(loaded, None, ReviewDecision::Denied, move |d| {
            Op::ExecApproval {
                id: request.call_id,
                decision: d,
            }
        });
        return;
    };
    let (method, params) = if connection.legacy_approvals() {
        (
            "execCommandApproval",
            serde_json::to_value(v1::ExecCommandApprovalParams {
                conversation_id: items.thread_id.clone(),
                call_id: request.call_id.clone(),
                approval_id: None,
                command: request.command.clone(),
                cwd: request.cwd.to_string_lossy().into_owned(),
                reason: request.reason.clone(),
                parsed_cmd: request
                    .parsed_cmd
                    .iter()
                    .filter_map(|p| serde_json::to_value(p).ok())
                    .collect(),
            }),
        )
    } else {
        (
            "item/commandExecution/requestApproval",
            serde_json::to_value(v2::CommandExecutionRequestApprovalParams {
                thread_id: items.thread_id.clone(),
                turn_id: items.turn_id.clone(),
                item_id: request.call_id.clone(),
                started_at_ms: now_ms(),
                environment_id: None,
                reason: request.reason.clone(),
                command: Some(interpreter_tools::display_command(&request.command)),
                cwd: Some(request.cwd.to_string_lossy().into_owned()),
                command_actions: Some(mapping::command_actions(&request.parsed_cmd)),
            }),
        )
    };
    let params = params.unwrap_or_default();
    let op = |id, decision| Op::ExecApproval { id, decision };
    spawn_approval(
        loaded,
        connection,
        (method, params),
        turn_over,
        request.call_id,
        op,
    );
}

fn ask_patch_approval(
    loaded: &Arc<LoadedThread>,
    items: &TurnItems,
    request: ApplyPatchApprovalRequestEvent,
    turn_over: &CancellationToken,
) {
    let Some(connection) = approver(loaded) else {
        answer_later(loaded, None, ReviewDecision::Denied, move |d| {
            Op::PatchApproval {
                id: request.call_id,
                decision: d,
            }
        });
        return;
    };
    let grant_root = request
        .grant_root
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned());
    let (method, params) = if connection.legacy_approvals() {
        (
            "applyPatchApproval",
            serde_json::to_value(v1::ApplyPatchApprovalParams {
                conversation_id: items.thread_id.clone(),
                call_id: request.call_id.clone(),
                file_changes: request
                    .changes
                    .iter()
                    .filter_map(|(path, change)| {
                        serde_json::to_value(change)
                            .ok()
                            .map(|v| (path.to_string_lossy().into_owned(), v))
                    })
                    .collect(),
                reason: request.reason.clone(),
                grant_root,
            }),
        )
    } else {
        (
            "item/fileChange/requestApproval",
            serde_json::to_value(v2::FileChangeRequestApprovalParams {
                thread_id: items.thread_id.clone(),
                turn_id: items.turn_id.clone(),
                item_id: request.call_id.clone(),
                started_at_ms: now_ms(),
                reason: request.reason.clone(),
                grant_root,
            }),
        )
    };
    let params = params.unwrap_or_default();
    let op = |id, decision| Op::PatchApproval { id, decision };
    spawn_approval(
        loaded,
        connection,
        (method, params),
        turn_over,
        request.call_id,
        op,
    );
}

/// Ask `connection`, wait (until the engine expires request `call_id`, the turn's end
/// or the connection's end), decode with the shared fail-closed decoder, answer the
/// engine, and tell followers the request is resolved.
fn spawn_approval(
    loaded: &Arc<LoadedThread>,
    connection: Arc<Connection>,
    (method, params): (&'static str, serde_json::Value),
    turn_over: &CancellationToken,
    call_id: String,
    answer: fn(String, ReviewDecision) -> Op,
) {
    let config = loaded.thread.config();
    let expired = loaded.open_requests.open(&call_id);
    let fallback = match config.app_server.approval_fallback {
        ElicitationFallback::Deny => ReviewDecision::Denied,
        ElicitationFallback::Approve => ReviewDecision::Approved,
    };
    let (request_id, reply) = connection.request(method, &params);
    let turn_over = turn_over.clone();
    let loaded = loaded.clone();
    tokio::spawn(async move {
        let decision = tokio::select! {
            answer = reply => match answer {
                Ok(answer) => decide(answer, fallback),
                // The connection closed under us.
                Err(_) => ReviewDecision::Denied,
            },
            () = expired.cancelled() => {
                tracing::info!("approval request {request_id} got no answer before the engine's deadline (approval_timeout_sec); timed out");
                ReviewDecision::TimedOut
            }
            () = turn_over.cancelled() => ReviewDecision::Abort,
            () = connection.closed.cancelled() => ReviewDecision::Denied,
        };
        loaded.open_requests.close(&call_id);
        connection.forget_request(&request_id);
        answer_later(&loaded, Some(request_id), decision, move |d| {
            answer(call_id, d)
        });
    });
}

fn decide(answer: ClientAnswer, fallback: ReviewDecision) -> ReviewDecision {
    match answer {
        Ok(value) => decode_approval_answer(&value),
        // The client does not implement approvals: the configured fallback, which is
        // not the user declining.
        Err(error) if error.code == METHOD_NOT_FOUND => fallback,
        Err(_) => ReviewDecision::Denied,
    }
}

fn answer_later(
    loaded: &Arc<LoadedThread>,
    request_id: Option<RequestId>,
    decision: ReviewDecision,
    answer: impl FnOnce(ReviewDecision) -> Op + Send + 'static,
) {
    // A request the engine expired is already decided (timed out) there.
    let answer = (decision != ReviewDecision::TimedOut).then(|| answer(decision));
    settle_request(
        loaded.clone(),
        request_id,
        answer,
        "submitting an approval decision",
    );
}

/// A server request is settled: its followers hear `serverRequest/resolved` (when it
/// went out as one), then the thread gets `answer` (none when the engine resolved the
/// request itself, at its deadline). `what` words the log line if the thread is gone.
pub(crate) fn settle_request(
    loaded: Arc<LoadedThread>,
    request_id: Option<RequestId>,
    answer: Option<Op>,
    what: &'static str,
) {
    tokio::spawn(async move {
        if let Some(request_id) = request_id {
            loaded.broadcast(
                "serverRequest/resolved",
                &v2::ServerRequestResolvedNotification {
                    thread_id: loaded.id().to_string(),
                    request_id,
                },
            );
        }
        if let Some(answer) = answer
            && let Err(e) = loaded.thread.submit(answer).await
        {
            tracing::debug!("{what} failed: {e}");
        }
    });
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

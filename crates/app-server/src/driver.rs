//! A turn, driven: the thread's events become notifications for every connection that
//! follows the thread, and approval requests become server→client requests.
//!
//! Order on the wire for one turn (see docs/app-server.md):
//! `turn/started` → per item `item/started` → its deltas → `item/completed` →
//! `turn/completed`. A command or patch that needs approval is `item/started`, then the
//! approval request, then `serverRequest/resolved`, then (when it runs) output deltas,
//! then `item/completed`. `error` precedes the `turn/completed` of a failed turn.

use std::sync::Arc;

use interpreter_core::items::TurnRecap;
use interpreter_core::items::{ItemEvent, ItemProjector, TurnItem};
use interpreter_protocol::{Event, EventMsg, Op};
use tokio::sync::OwnedMutexGuard;
use tokio_util::sync::CancellationToken;

use crate::approvals::{self, TurnRef};
use crate::mapping;
use crate::protocol::notification_names;
use crate::protocol::now_ms;
use crate::protocol::v2::{self, ItemsView, ThreadStatus, Turn, TurnStatus};
use crate::state::{LoadedThread, ServerState};
use crate::wire::{ItemContext, item_notification};

/// The turn being driven, as the wire names it.
struct TurnWire {
    thread_id: String,
    turn_id: String,
    started_at: i64,
    /// The id the client gave the turn's user message, until that message is seen.
    client_user_message_id: Option<String>,
    /// The engine's id of that message, with the client's.
    client_user_message: Option<(String, String)>,
    /// Which items are open: the engine's projector, the same one replay uses.
    projector: ItemProjector,
}

impl TurnWire {
    /// Sends what `events` announce.
    fn send_items(&mut self, loaded: &LoadedThread, events: Vec<ItemEvent>) {
        for event in events {
            if let ItemEvent::Started(TurnItem::UserMessage { id, .. }) = &event
                && let Some(client_id) = self.client_user_message_id.take()
            {
                self.client_user_message = Some((id.clone(), client_id));
            }
            let context = ItemContext {
                thread_id: &self.thread_id,
                turn_id: &self.turn_id,
                client_user_message: self
                    .client_user_message
                    .as_ref()
                    .map(|(id, client)| (id.as_str(), client.as_str())),
                now_ms: now_ms(),
            };
            let (method, params) = item_notification(&context, event);
            loaded.broadcast(method, &params);
        }
    }
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
    let mut items = TurnWire {
        thread_id: thread_id.clone(),
        turn_id: turn_id.to_string(),
        started_at: now_ms(),
        client_user_message_id,
        client_user_message: None,
        projector: ItemProjector::new(),
    };
    // Ends the approval waits of this turn when it ends.
    let turn_over = CancellationToken::new();
    let _end_waits = turn_over.clone().drop_guard();
    let mut last_error: Option<v2::TurnError> = None;
    let mut recap = TurnRecap::default();
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
        // Items first: a command's `item/started` precedes its approval request, and a
        // turn's items all complete before `turn/completed`.
        let item_events = items.projector.push(&msg);
        items.send_items(loaded, item_events);
        recap.observe(&msg);
        match msg {
            EventMsg::TaskStarted(started) => {
                recap = TurnRecap::default();
                // A follow-up turn (input that arrived as the previous turn ended) is
                // announced under its own id.
                items.turn_id = started.turn_id.clone();
                items.started_at = now_ms();
                loaded.broadcast(
                    notification_names::THREAD_STATUS_CHANGED,
                    &v2::ThreadStatusChangedNotification {
                        thread_id: thread_id.clone(),
                        status: ThreadStatus::Active {
                            active_flags: Vec::new(),
                        },
                    },
                );
                loaded.broadcast(
                    notification_names::TURN_STARTED,
                    &v2::TurnStartedNotification {
                        thread_id: thread_id.clone(),
                        turn: turn_object(&items.turn_id, TurnStatus::InProgress, None, None),
                    },
                );
            }
            EventMsg::ExecApprovalRequest(request) => {
                let turn = TurnRef {
                    thread_id: &items.thread_id,
                    turn_id: &items.turn_id,
                };
                approvals::ask_exec_approval(loaded, &turn, request, &turn_over);
            }
            EventMsg::ApplyPatchApprovalRequest(request) => {
                let turn = TurnRef {
                    thread_id: &items.thread_id,
                    turn_id: &items.turn_id,
                };
                approvals::ask_patch_approval(loaded, &turn, request, &turn_over);
            }
            // Items: sent above, from the projector.
            EventMsg::UserMessage(_)
            | EventMsg::AgentMessageDelta(_)
            | EventMsg::AgentMessage(_)
            | EventMsg::ProposedPlanDelta(_)
            | EventMsg::ProposedPlan(_)
            | EventMsg::EnteredReviewMode(_)
            | EventMsg::ExitedReviewMode(_)
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
            | EventMsg::McpToolCallEnd(_) => {}
            EventMsg::HookStarted(run) => loaded.broadcast(
                notification_names::HOOK_STARTED,
                &crate::hooks::run_notification(&thread_id, run),
            ),
            EventMsg::HookCompleted(run) => loaded.broadcast(
                notification_names::HOOK_COMPLETED,
                &crate::hooks::run_notification(&thread_id, run),
            ),
            EventMsg::PlanUpdate(plan) => loaded.broadcast(
                notification_names::TURN_PLAN_UPDATED,
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
                notification_names::THREAD_GOAL_UPDATED,
                &v2::ThreadGoalUpdatedNotification {
                    thread_id: thread_id.clone(),
                    turn_id: Some(items.turn_id.clone()),
                    goal: mapping::wire_goal(loaded.id(), updated.goal),
                },
            ),
            EventMsg::GoalUpdated(_) | EventMsg::GoalCleared(_) => {}
            EventMsg::TurnDiff(diff) => loaded.broadcast(
                notification_names::TURN_DIFF_UPDATED,
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
                            cache_write_input_tokens: clamp(u.cache_write_input_tokens),
                            output_tokens: clamp(u.output_tokens),
                            reasoning_output_tokens: clamp(u.reasoning_output_tokens),
                        };
                    loaded.broadcast(
                        notification_names::THREAD_TOKEN_USAGE_UPDATED,
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
            EventMsg::ContextCompacted(_) => loaded.broadcast(
                notification_names::THREAD_COMPACTED,
                &v2::ContextCompactedNotification {
                    thread_id: thread_id.clone(),
                    turn_id: items.turn_id.clone(),
                },
            ),
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
                notification_names::WARNING,
                &v2::WarningNotification {
                    thread_id: Some(thread_id.clone()),
                    message: warning.message,
                },
            ),
            EventMsg::TaskComplete(done) => {
                // A failed turn's error says what the turn did before it stopped (the
                // same recap the MCP tools give), in `additionalDetails`.
                let done_recap = std::mem::take(&mut recap).finished();
                let error = done.error.map(|message| {
                    let mut error = last_error
                        .take()
                        .unwrap_or_else(|| mapping::turn_error(message, None));
                    error.additional_details = Some(done_recap.render());
                    error
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
                notification_names::MCP_SERVER_STARTUP_STATUS_UPDATED,
                &crate::mcp_api::startup_notification(&thread_id, &update),
            ),
            EventMsg::UserInputRequest(request) => crate::user_requests::ask_user_input(
                loaded,
                approvals::approver(loaded),
                &items.turn_id,
                request,
                &turn_over,
            ),
            EventMsg::PermissionsRequest(request) => crate::user_requests::ask_permissions(
                loaded,
                approvals::approver(loaded),
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
                    approvals::approver(loaded),
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

fn emit_error(loaded: &LoadedThread, items: &TurnWire, error: v2::TurnError, will_retry: bool) {
    loaded.broadcast(
        notification_names::ERROR,
        &v2::ErrorNotification {
            error,
            will_retry,
            thread_id: items.thread_id.clone(),
            turn_id: items.turn_id.clone(),
        },
    );
}

/// Completes what the engine's events left open (none, unless the stream stopped short
/// of the turn's end), then `turn/completed`.
fn finish(
    loaded: &LoadedThread,
    items: &mut TurnWire,
    status: TurnStatus,
    error: Option<v2::TurnError>,
) {
    let leftovers = items.projector.finish();
    items.send_items(loaded, leftovers);
    // Idle before the client hears it: a request sent on `turn/completed` (the next
    // turn, a compaction) must not find this turn still running.
    loaded.end_turn(&items.turn_id);
    loaded.broadcast(
        notification_names::TURN_COMPLETED,
        &v2::TurnCompletedNotification {
            thread_id: items.thread_id.clone(),
            turn: turn_object(&items.turn_id, status, error, Some(items.started_at)),
        },
    );
    loaded.broadcast(
        notification_names::THREAD_STATUS_CHANGED,
        &v2::ThreadStatusChangedNotification {
            thread_id: items.thread_id.clone(),
            status: ThreadStatus::Idle,
        },
    );
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

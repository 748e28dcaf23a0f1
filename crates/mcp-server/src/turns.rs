//! Turns that outlive the request that started them.
//!
//! A [`TurnRun`] is one turn on one thread, driven by its own task: it reads the thread's
//! events, publishes them to whoever follows the turn, parks approval requests until a
//! follower resolves them (or their deadline denies them), and ends with the
//! `tools/call` result. A follower ([`crate::follow`]) is a `codex` / `codex-reply` /
//! `codex-wait` call; it may come and go (background runs, MRTR retries, client
//! timeouts) without disturbing the turn.
//!
//! The [`Registry`] keeps the latest run per thread. One turn at a time per thread, each
//! thread's settings, and retiring idle threads are the core thread manager's rules.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use interpreter_core::config::{ConfigInputs, McpServerSettings};
use interpreter_core::items::TurnRecap;
use interpreter_core::open_requests::OpenRequests;
use interpreter_core::{CoreError, Thread, ThreadManager};
use interpreter_protocol::approval_answer::decode_approval_answer;
use interpreter_protocol::{
    ElicitationAction, ElicitationResponse, Event, EventMsg, ExecCommandStatus, Op, ReviewDecision,
    ThreadId, UserInput,
};
use interpreter_tools::display_command;
use rmcp::model::CallToolResult;
use serde_json::Value;
use tokio::sync::{OwnedMutexGuard, broadcast, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::approval;
use crate::result::{self, TurnStatus};
use crate::tools::{CallOverrides, build_session_config};

/// Events buffered for a follower that reads slowly; past this it skips ahead.
const EVENT_BUFFER: usize = 1024;

/// How a question the turn asked was answered.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// What the client sent (an `ElicitResult`, or a legacy approval answer), decoded by
    /// whoever asked: the shared approval decoder, or the elicitation shape.
    Client(Value),
    /// Decided without the client (fallback, deadline, error, shutdown).
    Decided(ReviewDecision),
}

/// A question the turn waits for: a command or patch approval, or a downstream MCP
/// server's elicitation passed up to our client.
pub(crate) struct PendingApproval {
    /// One-time id within this process (the MRTR `requestState` names it).
    pub id: u64,
    /// The elicitation params to send (for approvals: ours, with the reference's `codex_*`
    /// fields; for a downstream question: the server's own).
    pub params: Value,
    /// "run `make test`", for notes.
    pub what: String,
    /// Fires when the engine's deadline on the request passes (it then decided it).
    pub expired: CancellationToken,
    /// A downstream server's question, not an approval: never answered by the approval
    /// fallback, only declined.
    pub is_question: bool,
    reply: std::sync::Mutex<Option<oneshot::Sender<Answer>>>,
}

impl PendingApproval {
    /// Answer the turn. Only the first answer counts; later ones return `false`.
    pub(crate) fn resolve(&self, answer: Answer) -> bool {
        let sender = self.reply.lock().ok().and_then(|mut s| s.take());
        sender.is_some_and(|s| s.send(answer).is_ok())
    }
}

/// Where the turn stands.
#[derive(Clone)]
pub(crate) enum RunState {
    Running {
        step: String,
        last_message: Option<String>,
        waiting_for_approval: bool,
    },
    Finished {
        result: CallToolResult,
        status: TurnStatus,
    },
}

/// One turn on one thread, driven in the background.
pub(crate) struct TurnRun {
    pub thread_id: ThreadId,
    pub settings: McpServerSettings,
    /// The engine's deadline on its requests (`approval_timeout_sec`): it alone times
    /// them; this is for the words of a note and the life of an MRTR state.
    pub approval_timeout: Duration,
    /// The engine's requests parked here, withdrawn when the engine expires them.
    open_requests: OpenRequests,
    state: watch::Sender<RunState>,
    events: broadcast::Sender<Arc<Event>>,
    /// Approvals no follower has taken yet.
    pending: std::sync::Mutex<VecDeque<Arc<PendingApproval>>>,
    /// Approvals handed to a 2026 client as MRTR, waiting for its retry.
    offered: std::sync::Mutex<HashMap<u64, Arc<PendingApproval>>>,
    notes: std::sync::Mutex<Vec<String>>,
    interrupt: CancellationToken,
    /// The request that started the turn, as the reference's `codex_mcp_tool_call_id`.
    pub tool_call_id: String,
    /// The engine's id of this turn (its submission id).
    pub turn_id: String,
    pub created: chrono::DateTime<chrono::Utc>,
}

impl TurnRun {
    pub(crate) fn subscribe_events(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    pub(crate) fn watch_state(&self) -> watch::Receiver<RunState> {
        self.state.subscribe()
    }

    pub(crate) fn state(&self) -> RunState {
        self.state.borrow().clone()
    }

    /// The next approval nobody has taken, if any.
    pub(crate) fn take_pending(&self) -> Option<Arc<PendingApproval>> {
        self.pending.lock().ok().and_then(|mut p| p.pop_front())
    }

    /// Park an approval for an MRTR retry.
    pub(crate) fn offer(&self, approval: Arc<PendingApproval>) {
        if let Ok(mut offered) = self.offered.lock() {
            offered.insert(approval.id, approval);
        }
    }

    /// Approvals offered and not yet answered.
    pub(crate) fn offered_approvals(&self) -> Vec<Arc<PendingApproval>> {
        let mut offered: Vec<_> = self
            .offered
            .lock()
            .map(|o| o.values().cloned().collect())
            .unwrap_or_default();
        offered.sort_by_key(|a| a.id);
        offered
    }

    /// Take back an approval offered as MRTR; `None` if it was redeemed, expired or never
    /// existed (a replayed or forged state).
    pub(crate) fn redeem(&self, id: u64) -> Option<Arc<PendingApproval>> {
        self.offered.lock().ok().and_then(|mut o| o.remove(&id))
    }

    pub(crate) fn note(&self, note: String) {
        if let Ok(mut notes) = self.notes.lock() {
            notes.push(note);
        }
    }

    /// Ask the turn to stop (`Op::Interrupt`); the run ends once the engine confirms.
    pub(crate) fn interrupt(&self) {
        self.interrupt.cancel();
    }

    /// Fires when the turn is asked to stop; bounds work done on its behalf.
    pub(crate) fn stopping(&self) -> CancellationToken {
        self.interrupt.clone()
    }

    fn notes_text(&self) -> String {
        let notes = self.notes.lock().map(|n| n.clone()).unwrap_or_default();
        if notes.is_empty() {
            return String::new();
        }
        let mut text = "Approvals:".to_string();
        for note in notes {
            text.push_str("\n- ");
            text.push_str(&note);
        }
        text
    }

    fn set_step(&self, step: String) {
        self.state.send_modify(|state| {
            if let RunState::Running { step: current, .. } = state {
                *current = step;
            }
        });
    }

    fn finish(&self, text: String, status: TurnStatus) {
        self.finish_with(text, status, None);
    }

    /// A turn that stopped short (failed, interrupted, cut off): the result also says what
    /// it did before it stopped, in the text and as `structuredContent.recap`.
    fn finish_short(&self, text: String, status: TurnStatus, recap: TurnRecap) {
        self.finish_with(text, status, Some(recap.finished()));
    }

    fn finish_with(&self, text: String, status: TurnStatus, recap: Option<TurnRecap>) {
        let mut text = text;
        let notes = self.notes_text();
        if !notes.is_empty() {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&notes);
        }
        let result = result::finished_turn(self.thread_id, &text, status, recap.as_ref());
        self.state
            .send_replace(RunState::Finished { result, status });
    }
}

/// A human line for progress messages and `codex-status`.
pub(crate) fn step_of(msg: &EventMsg) -> Option<String> {
    Some(match msg {
        EventMsg::TaskStarted(_) => "turn started; waiting for the model".to_string(),
        EventMsg::AgentMessage(_) => "the agent wrote a message".to_string(),
        EventMsg::AgentReasoning(_) => "the agent is reasoning".to_string(),
        EventMsg::ExecCommandBegin(e) => format!("running `{}`", display_command(&e.command)),
        EventMsg::ExecCommandEnd(e) => match (e.status, e.exit_code) {
            (ExecCommandStatus::Declined, _) => {
                format!(
                    "`{}` was declined; it did not run",
                    display_command(&e.command)
                )
            }
            (_, Some(code)) => format!("`{}` finished (exit {code})", display_command(&e.command)),
            (_, None) => format!(
                "`{}` ended without an exit code (killed or timed out)",
                display_command(&e.command)
            ),
        },
        EventMsg::ExecApprovalRequest(e) => format!(
            "waiting for approval to run `{}`",
            display_command(&e.command)
        ),
        EventMsg::ApplyPatchApprovalRequest(e) => {
            format!("waiting for approval to change {} file(s)", e.changes.len())
        }
        EventMsg::PatchApplyBegin(e) => format!("editing {} file(s)", e.changes.len()),
        EventMsg::PatchApplyEnd(e) => if e.success {
            "edit applied"
        } else {
            "edit failed"
        }
        .to_string(),
        EventMsg::PlanUpdate(_) => "plan updated".to_string(),
        EventMsg::EnteredReviewMode(e) => format!("reviewing {}", e.review),
        EventMsg::McpToolCallBegin(e) => {
            format!("calling tool {}/{}", e.invocation.server, e.invocation.tool)
        }
        EventMsg::StreamError(e) => {
            format!("retrying ({}/{}): {}", e.attempt, e.max_attempts, e.message)
        }
        EventMsg::Warning(e) => format!("warning: {}", e.message),
        EventMsg::Error(e) => format!("error: {}", e.message),
        EventMsg::ContextCompacted(_) => "compacted the conversation".to_string(),
        EventMsg::McpToolCallProgress(e) => format!("tool: {}", e.message),
        EventMsg::UserInputRequest(_) => "the model asked the user a question".to_string(),
        EventMsg::PermissionsRequest(_) => "waiting for a permission decision".to_string(),
        EventMsg::ElicitationRequest(e) => {
            format!("waiting for an answer to MCP server `{}`", e.server)
        }
        EventMsg::ExitedReviewMode(_) => "review written".to_string(),
        EventMsg::ProposedPlan(_) => "plan proposed".to_string(),
        EventMsg::HookStarted(e) => format!(
            "running a {} hook",
            interpreter_core::hooks::event_config_name(e.run.event_name)
        ),
        EventMsg::HookCompleted(e) => interpreter_core::hooks::run_line(&e.run)?,
        // Pieces of what the lines above announce, or nothing a caller waits on.
        EventMsg::SessionConfigured(_)
        | EventMsg::TaskComplete(_)
        | EventMsg::TurnAborted(_)
        | EventMsg::UserMessage(_)
        | EventMsg::AgentMessageDelta(_)
        | EventMsg::AgentReasoningDelta(_)
        | EventMsg::AgentReasoningSummaryPartAdded(_)
        | EventMsg::AgentReasoningSummaryDelta(_)
        | EventMsg::ExecCommandOutputDelta(_)
        | EventMsg::ProposedPlanDelta(_)
        | EventMsg::GoalUpdated(_)
        | EventMsg::GoalCleared(_)
        | EventMsg::TurnDiff(_)
        | EventMsg::McpToolCallEnd(_)
        | EventMsg::McpStartupUpdate(_)
        | EventMsg::RequestExpired(_)
        | EventMsg::TokenCount(_)
        | EventMsg::ShutdownComplete => return None,
    })
}

/// State shared by every connection of one server process.
pub(crate) struct Registry {
    pub thread_manager: Arc<ThreadManager>,
    pub inputs: ConfigInputs,
    /// The app-server's v2 methods over the same threads (see [`crate::app`]).
    pub app: interpreter_app_server::MessageProcessor,
    runs: std::sync::Mutex<HashMap<ThreadId, Arc<TurnRun>>>,
    next_approval_id: AtomicU64,
    /// Fires on server shutdown: every run is interrupted.
    pub shutdown: CancellationToken,
    /// The thread store the server's config names, opened on first use.
    store: tokio::sync::OnceCell<Arc<dyn interpreter_core::store::ThreadStore>>,
    /// How this replica forwards to the others of its fleet; unset off a fleet.
    pub peers: std::sync::OnceLock<crate::fleet::Peers>,
}

impl Registry {
    pub(crate) fn new(thread_manager: Arc<ThreadManager>, inputs: ConfigInputs) -> Self {
        let app = interpreter_app_server::MessageProcessor::new(
            interpreter_app_server::ProcessorOptions {
                config_inputs: inputs.clone(),
                session_source: interpreter_protocol::SessionSource::Mcp,
            },
            thread_manager.clone(),
        );
        Self {
            thread_manager,
            inputs,
            app,
            runs: std::sync::Mutex::default(),
            next_approval_id: AtomicU64::new(1),
            shutdown: CancellationToken::new(),
            store: tokio::sync::OnceCell::new(),
            peers: std::sync::OnceLock::new(),
        }
    }

    /// The latest run on a thread (running or finished), if this process has one.
    pub(crate) fn latest_run(&self, thread_id: ThreadId) -> Option<Arc<TurnRun>> {
        self.runs
            .lock()
            .ok()
            .and_then(|r| r.get(&thread_id).cloned())
    }

    /// The thread store the server's config names (shared with the engine).
    pub(crate) async fn store(
        &self,
    ) -> Result<Arc<dyn interpreter_core::store::ThreadStore>, CoreError> {
        self.store
            .get_or_try_init(|| async {
                let config = build_session_config(&self.inputs, CallOverrides::default())
                    .await
                    .map_err(|e| {
                        CoreError::Internal(format!("failed to load configuration: {e}"))
                    })?;
                self.thread_manager.store(&config).await
            })
            .await
            .cloned()
    }

    /// A live thread, or the saved one loaded from disk.
    pub(crate) async fn live_or_resumed(
        &self,
        thread_id: ThreadId,
    ) -> Result<Arc<Thread>, CoreError> {
        self.thread_manager
            .get_or_resume(thread_id, async || {
                build_session_config(&self.inputs, CallOverrides::default())
                    .await
                    .map_err(|e| CoreError::Internal(format!("failed to load configuration: {e}")))
            })
            .await
    }

    /// Wait for the thread's turn slot (a previous turn must end first), submit `prompt`,
    /// and start driving the turn. `None` if `cancel` fired while waiting.
    pub(crate) async fn start_turn(
        self: &Arc<Self>,
        thread: Arc<Thread>,
        prompt: String,
        tool_call_id: String,
        trace: Option<interpreter_telemetry::W3cTraceContext>,
        cancel: &CancellationToken,
    ) -> Option<Result<Arc<TurnRun>, CallToolResult>> {
        let thread_id = thread.id();
        let guard = tokio::select! {
            guard = thread.turn_slot() => guard,
            () = cancel.cancelled() => return None,
        };
        let submission_id = match thread
            .submit_traced(
                Op::UserInput {
                    items: vec![UserInput::Text { text: prompt }],
                },
                trace,
            )
            .await
        {
            Ok(id) => id,
            Err(e) => {
                return Some(Err(result::thread_error(
                    thread_id,
                    &format!("Failed to submit user input: {e}"),
                )));
            }
        };
        let (state, _) = watch::channel(RunState::Running {
            step: "prompt submitted".to_string(),
            last_message: None,
            waiting_for_approval: false,
        });
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let run = Arc::new(TurnRun {
            thread_id,
            settings: thread.config().mcp_server.clone(),
            approval_timeout: thread.config().approval_timeout,
            open_requests: OpenRequests::default(),
            state,
            events,
            pending: std::sync::Mutex::default(),
            offered: std::sync::Mutex::default(),
            notes: std::sync::Mutex::default(),
            interrupt: self.shutdown.child_token(),
            tool_call_id,
            turn_id: submission_id.clone(),
            created: chrono::Utc::now(),
        });
        if let Ok(mut runs) = self.runs.lock() {
            runs.insert(thread_id, run.clone());
        }
        let registry = self.clone();
        let driven = run.clone();
        tokio::spawn(async move {
            drive(&registry, &driven, thread, submission_id, guard).await;
            let retired = registry.thread_manager.retire_idle(driven.thread_id).await;
            if let Ok(mut runs) = registry.runs.lock() {
                for id in retired {
                    runs.remove(&id);
                }
            }
        });
        Some(Ok(run))
    }

    fn next_approval_id(&self) -> u64 {
        self.next_approval_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// Park a question on the run and answer the engine when a follower resolves it, or deny
/// at the deadline.
#[allow(clippy::too_many_arguments)]
fn park_approval(
    registry: &Registry,
    run: &Arc<TurnRun>,
    thread: &Arc<Thread>,
    engine_id: &str,
    params: Value,
    what: String,
    is_question: bool,
    answer: impl FnOnce(Answer) -> Op + Send + 'static,
) {
    let (reply, decision) = oneshot::channel();
    let expired = run.open_requests.open(engine_id);
    let engine_id = engine_id.to_string();
    let approval = Arc::new(PendingApproval {
        id: registry.next_approval_id(),
        params,
        what: what.clone(),
        expired: expired.clone(),
        is_question,
        reply: std::sync::Mutex::new(Some(reply)),
    });
    if let Ok(mut pending) = run.pending.lock() {
        pending.push_back(approval.clone());
    }
    run.state.send_modify(|state| {
        if let RunState::Running {
            waiting_for_approval,
            ..
        } = state
        {
            *waiting_for_approval = true;
        }
    });
    let run = run.clone();
    let thread = thread.clone();
    tokio::spawn(async move {
        let decision = tokio::select! {
            decision = decision => decision.unwrap_or(Answer::Decided(ReviewDecision::Denied)),
            () = expired.cancelled() => {
                run.note(format!(
                    "the request to {what} timed out: no answer within {}s (approval_timeout_sec)",
                    run.approval_timeout.as_secs()
                ));
                Answer::Decided(ReviewDecision::TimedOut)
            }
            () = run.interrupt.cancelled() => Answer::Decided(ReviewDecision::Abort),
        };
        run.open_requests.close(&engine_id);
        // Whatever answered, the approval is no longer takeable or redeemable.
        if let Ok(mut pending) = run.pending.lock() {
            pending.retain(|p| p.id != approval.id);
        }
        run.redeem(approval.id);
        let still_waiting = run.pending.lock().map(|p| !p.is_empty()).unwrap_or(false)
            || run.offered.lock().map(|o| !o.is_empty()).unwrap_or(false);
        run.state.send_modify(|state| {
            if let RunState::Running {
                waiting_for_approval,
                ..
            } = state
            {
                *waiting_for_approval = still_waiting;
            }
        });
        // A request the engine expired is already decided there.
        if !expired.is_cancelled()
            && let Err(e) = thread.submit(answer(decision)).await
        {
            tracing::debug!("submitting an approval decision failed: {e}");
        }
    });
}

/// An approval decision from an answer: the client's through the shared fail-closed
/// decoder, or the one decided without the client.
pub(crate) fn decision_of(answer: &Answer) -> ReviewDecision {
    match answer {
        Answer::Client(value) => decode_approval_answer(value),
        Answer::Decided(decision) => *decision,
    }
}

/// A downstream server's answer from ours: the client's `ElicitResult` passed through when
/// well formed; anything else, and anything decided without the client, declines.
pub(crate) fn elicitation_response_of(answer: &Answer) -> ElicitationResponse {
    let decline = ElicitationResponse {
        action: ElicitationAction::Decline,
        content: None,
    };
    let Answer::Client(value) = answer else {
        return decline;
    };
    let Some(object) = value.as_object() else {
        return decline;
    };
    if object
        .keys()
        .any(|k| !matches!(k.as_str(), "action" | "content" | "_meta"))
    {
        return decline;
    }
    match serde_json::from_value::<ElicitationResponse>(value.clone()) {
        Ok(response)
            if response.action == ElicitationAction::Accept || response.content.is_none() =>
        {
            response
        }
        _ => decline,
    }
}

fn turn_id_of(msg: &EventMsg) -> Option<&str> {
    match msg {
        EventMsg::TaskComplete(e) => Some(&e.turn_id),
        EventMsg::TurnAborted(e) => Some(&e.turn_id),
        _ => None,
    }
}

/// Read the thread's events until the turn ends; the slot guard is held throughout.
async fn drive(
    registry: &Registry,
    run: &Arc<TurnRun>,
    thread: Arc<Thread>,
    submission_id: String,
    _slot: OwnedMutexGuard<()>,
) {
    let thread_id = run.thread_id;
    let mut our_turn_id: Option<String> = None;
    let mut last_error: Option<String> = None;
    let mut interrupted_at: Option<tokio::time::Instant> = None;
    // What the turn did, for a result that must say it when the turn stops short.
    let mut recap = TurnRecap::default();
    loop {
        let drain_deadline = interrupted_at.map(|at| at + Thread::INTERRUPT_CONFIRM_DEADLINE);
        let event = tokio::select! {
            biased;
            () = run.interrupt.cancelled(), if interrupted_at.is_none() => {
                interrupted_at = Some(tokio::time::Instant::now());
                if let Err(e) = thread.submit(Op::Interrupt).await {
                    tracing::warn!("interrupting thread {thread_id} failed: {e}");
                    run.finish_short(
                        "The turn was interrupted.".to_string(),
                        TurnStatus::Interrupted,
                        recap,
                    );
                    return;
                }
                continue;
            }
            () = sleep_until_opt(drain_deadline) => {
                tracing::warn!("thread {thread_id} did not confirm the interrupt in time");
                run.finish_short(
                    "The turn was interrupted.".to_string(),
                    TurnStatus::Interrupted,
                    recap,
                );
                return;
            }
            event = thread.next_event() => event,
        };
        let event = match event {
            Ok(event) => Arc::new(event),
            Err(e) => {
                run.finish_short(format!("Runtime error: {e}"), TurnStatus::Failed, recap);
                return;
            }
        };
        let ours = event.id == submission_id
            || our_turn_id
                .as_deref()
                .is_some_and(|t| turn_id_of(&event.msg) == Some(t));
        if ours {
            recap.observe(&event.msg);
        }
        // Nobody following is fine: the turn goes on.
        let _ = run.events.send(event.clone());
        if let Some(step) = step_of(&event.msg) {
            run.set_step(step);
        }
        match &event.msg {
            EventMsg::TaskStarted(started) if event.id == submission_id => {
                our_turn_id = Some(started.turn_id.clone());
            }
            EventMsg::AgentMessage(message) => {
                let text = message.message.clone();
                run.state.send_modify(|state| {
                    if let RunState::Running { last_message, .. } = state {
                        *last_message = Some(text);
                    }
                });
            }
            EventMsg::ExecApprovalRequest(request) => {
                let params =
                    approval::exec_params(request, &event.id, thread_id, &run.tool_call_id);
                let call_id = request.call_id.clone();
                park_approval(
                    registry,
                    run,
                    &thread,
                    &request.call_id,
                    params,
                    format!("run `{}`", display_command(&request.command)),
                    false,
                    move |answer| Op::ExecApproval {
                        id: call_id,
                        decision: decision_of(&answer),
                    },
                );
            }
            EventMsg::ApplyPatchApprovalRequest(request) => {
                let params =
                    approval::patch_params(request, &event.id, thread_id, &run.tool_call_id);
                let call_id = request.call_id.clone();
                park_approval(
                    registry,
                    run,
                    &thread,
                    &request.call_id,
                    params,
                    format!("change {} file(s)", request.changes.len()),
                    false,
                    move |answer| Op::PatchApproval {
                        id: call_id,
                        decision: decision_of(&answer),
                    },
                );
            }
            EventMsg::ElicitationRequest(request) => {
                let id = request.id.clone();
                park_approval(
                    registry,
                    run,
                    &thread,
                    &request.id,
                    request.request.clone(),
                    format!("answer a question from MCP server `{}`", request.server),
                    true,
                    move |answer| Op::ResolveElicitation {
                        id,
                        response: elicitation_response_of(&answer),
                    },
                );
            }
            // The engine's deadline passed: withdraw what waits on its client.
            EventMsg::RequestExpired(expired) => run.open_requests.expire(&expired.id),
            EventMsg::Error(error) if ours => last_error = Some(error.message.clone()),
            EventMsg::TaskComplete(done) if ours => {
                let failure = done.error.clone().or_else(|| last_error.take());
                let (text, status) =
                    result::turn_outcome(done.last_agent_message.as_deref(), failure.as_deref());
                // A failed turn, or an answer cut off at the output limit, says what the
                // turn did; a finished answer speaks for itself.
                if failure.is_some() || done.output_limit {
                    run.finish_short(text, status, recap);
                } else {
                    run.finish(text, status);
                }
                return;
            }
            EventMsg::TurnAborted(aborted) if ours => {
                let reason = serde_json::to_value(aborted.reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                run.finish_short(
                    format!(
                        "The turn was aborted ({reason}). Send `codex-reply` with threadId {thread_id} to continue."
                    ),
                    TurnStatus::Interrupted,
                    recap,
                );
                return;
            }
            EventMsg::ShutdownComplete => {
                run.finish_short(
                    "The thread shut down before the turn finished.".to_string(),
                    TurnStatus::Failed,
                    recap,
                );
                return;
            }
            _ => {}
        }
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use interpreter_protocol::ExecCommandEndEvent;

    use super::*;

    fn ended(status: ExecCommandStatus, exit_code: Option<i32>) -> EventMsg {
        EventMsg::ExecCommandEnd(ExecCommandEndEvent {
            parsed_cmd: Vec::new(),
            call_id: "c".into(),
            turn_id: "t".into(),
            command: vec!["rm".into(), "-rf".into(), "build".into()],
            cwd: "/w".into(),
            exit_code,
            aggregated_output: String::new(),
            duration_ms: 0,
            status,
            source: Default::default(),
        })
    }

    /// Found running Codex CLI, which declines every approval: the progress line said the
    /// command "finished (no exit code)" when it never ran.
    #[test]
    fn codex_cli_declined_commands_are_reported_as_declined() {
        let step = step_of(&ended(ExecCommandStatus::Declined, None)).unwrap_or_default();
        assert_eq!(step, "`rm -rf build` was declined; it did not run");
        let step = step_of(&ended(ExecCommandStatus::Completed, Some(0))).unwrap_or_default();
        assert_eq!(step, "`rm -rf build` finished (exit 0)");
        let step = step_of(&ended(ExecCommandStatus::Failed, None)).unwrap_or_default();
        assert!(step.contains("without an exit code"), "{step}");
    }
}

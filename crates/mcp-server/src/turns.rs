//! One `tools/call` from arguments to result: build the session config, start or resume
//! the thread, run one turn, forward its events (`codex/event`, `notifications/progress`),
//! bridge approvals, and turn the end of the turn into a result.
//!
//! Each call runs on its own task. Calls on different threads share nothing but the
//! [`ThreadManager`]; calls on the same thread take turns through a per-thread slot, so a
//! thread's event stream always has exactly one reader.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use interpreter_core::config::{ConfigInputs, ElicitationFallback, McpServerSettings};
use interpreter_core::{CoreError, Thread, ThreadManager};
use interpreter_protocol::{
    Event, EventMsg, Op, ReviewDecision, SessionSource, ThreadId, UserInput,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::approval::{self, ElicitOutcome, render_command};
use crate::outgoing::{Outgoing, RequestId};
use crate::result;
use crate::tools::{CallOverrides, CodexArgs, CodexReplyArgs, build_session_config};

/// How long a cancelled turn may take to report `turn_aborted` before the call lets go
/// of the thread anyway.
const CANCEL_DRAIN: Duration = Duration::from_secs(5);

/// Idle threads kept live after their turn, so a quick `codex-reply` skips the reload from
/// disk. Past this many, the least recently used idle ones are shut down and dropped from
/// memory (a long-running server would otherwise grow with every thread it ever ran); a
/// later `codex-reply` resumes them from their rollout.
const MAX_LIVE_IDLE_THREADS: usize = 32;

/// State shared by all calls of one server.
pub struct Shared {
    pub thread_manager: Arc<ThreadManager>,
    pub inputs: ConfigInputs,
    /// Settings of the server-level config, for threads we did not start ourselves.
    pub default_settings: McpServerSettings,
    thread_settings: std::sync::Mutex<HashMap<ThreadId, McpServerSettings>>,
    turn_slots: std::sync::Mutex<HashMap<ThreadId, Arc<tokio::sync::Mutex<()>>>>,
    /// Live threads, least recently used first.
    recently_used: std::sync::Mutex<std::collections::VecDeque<ThreadId>>,
}

impl Shared {
    pub fn new(
        thread_manager: Arc<ThreadManager>,
        inputs: ConfigInputs,
        default_settings: McpServerSettings,
    ) -> Self {
        Self {
            thread_manager,
            inputs,
            default_settings,
            thread_settings: std::sync::Mutex::new(HashMap::new()),
            turn_slots: std::sync::Mutex::new(HashMap::new()),
            recently_used: std::sync::Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// Mark `just_used` as the most recent thread, then shut down and drop the least
    /// recently used idle threads beyond [`MAX_LIVE_IDLE_THREADS`]. A thread whose turn is
    /// running, or that has no rollout to come back from (ephemeral), stays.
    async fn retire_idle_threads(&self, just_used: ThreadId) {
        let candidates: Vec<ThreadId> = {
            let Ok(mut recent) = self.recently_used.lock() else {
                return;
            };
            recent.retain(|id| *id != just_used);
            recent.push_back(just_used);
            let excess = recent.len().saturating_sub(MAX_LIVE_IDLE_THREADS);
            recent.iter().take(excess).copied().collect()
        };
        for id in candidates {
            let slot = self.turn_slot(id);
            let Ok(_idle) = slot.try_lock() else {
                continue;
            };
            if let Some(thread) = self.thread_manager.get_thread(id).await {
                if thread.rollout_path().is_none() {
                    continue;
                }
                self.thread_manager.remove_thread(id).await;
                if let Err(e) = thread.submit(Op::Shutdown).await {
                    tracing::debug!("thread {id} was already closed: {e}");
                }
                tracing::info!("retired idle thread {id} from memory; it resumes from disk");
            }
            if let Ok(mut recent) = self.recently_used.lock() {
                recent.retain(|other| *other != id);
            }
            if let Ok(mut slots) = self.turn_slots.lock() {
                slots.remove(&id);
            }
        }
    }

    fn settings_for(&self, thread_id: ThreadId) -> McpServerSettings {
        self.thread_settings
            .lock()
            .ok()
            .and_then(|m| m.get(&thread_id).cloned())
            .unwrap_or_else(|| self.default_settings.clone())
    }

    fn remember_settings(&self, thread_id: ThreadId, settings: McpServerSettings) {
        if let Ok(mut m) = self.thread_settings.lock() {
            m.insert(thread_id, settings);
        }
    }

    fn turn_slot(&self, thread_id: ThreadId) -> Arc<tokio::sync::Mutex<()>> {
        match self.turn_slots.lock() {
            Ok(mut slots) => slots.entry(thread_id).or_default().clone(),
            // A poisoned map only means another call panicked; a fresh slot is safe.
            Err(_) => Arc::default(),
        }
    }
}

/// The per-call context the dispatcher hands over.
pub struct CallContext {
    pub request_id: RequestId,
    pub progress_token: Option<Value>,
    /// Fires on `notifications/cancelled` for this request, or on server shutdown.
    pub cancel: CancellationToken,
    pub outgoing: Outgoing,
    /// The client can answer `elicitation/create` on this connection.
    pub can_elicit: bool,
}

/// A tool's arguments, or the error result that tells the calling model what was wrong.
fn parse_arguments<T: serde::de::DeserializeOwned>(
    tool: &str,
    arguments: Option<Value>,
    missing: &str,
) -> Result<T, Value> {
    let arguments = arguments.ok_or_else(|| result::error(missing))?;
    serde_json::from_value(arguments)
        .map_err(|e| result::error(&format!("Invalid arguments for `{tool}`: {e}")))
}

/// Run `codex`. `None` means the call was cancelled and must get no response.
pub async fn run_codex(
    shared: Arc<Shared>,
    ctx: CallContext,
    arguments: Option<Value>,
) -> Option<Value> {
    let args: CodexArgs = match parse_arguments(
        "codex",
        arguments,
        "Missing arguments for codex tool-call; the `prompt` field is required.",
    ) {
        Ok(args) => args,
        Err(error) => return Some(error),
    };
    let overrides = match args.overrides() {
        Ok(o) => o,
        Err(e) => {
            return Some(result::error(&format!(
                "Invalid arguments for `codex`: {e}"
            )));
        }
    };
    let config = match build_session_config(&shared.inputs, overrides).await {
        Ok(config) => config,
        Err(e) => return Some(result::error(&format!("Failed to load configuration: {e}"))),
    };
    let settings = config.mcp_server.clone();
    let started = tokio::select! {
        started = shared.thread_manager.start_thread(config, SessionSource::Mcp) => started,
        () = ctx.cancel.cancelled() => return None,
    };
    let started = match started {
        Ok(started) => started,
        Err(e) => return Some(result::error(&format!("Failed to start session: {e}"))),
    };
    shared.remember_settings(started.thread_id, settings.clone());
    if settings.events {
        let event = Event {
            id: String::new(),
            msg: EventMsg::SessionConfigured(started.session_configured.clone()),
        };
        send_codex_event(&ctx, started.thread_id, &event);
    }
    let result = drive_turn(
        &shared,
        &ctx,
        started.thread,
        started.thread_id,
        args.prompt,
        &settings,
    )
    .await;
    shared.retire_idle_threads(started.thread_id).await;
    result
}

/// Run `codex-reply`. `None` means the call was cancelled and must get no response.
pub async fn run_codex_reply(
    shared: Arc<Shared>,
    ctx: CallContext,
    arguments: Option<Value>,
) -> Option<Value> {
    let args: CodexReplyArgs = match parse_arguments(
        "codex-reply",
        arguments,
        "Missing arguments for codex-reply tool-call; the `threadId` and `prompt` fields are required.",
    ) {
        Ok(args) => args,
        Err(error) => return Some(error),
    };
    let thread_id = match args.thread_id() {
        Ok(id) => id,
        Err(e) => return Some(result::error(&format!("Invalid threadId: {e}"))),
    };
    let thread = tokio::select! {
        thread = live_or_resumed(&shared, thread_id) => thread,
        () = ctx.cancel.cancelled() => return None,
    };
    let thread = match thread {
        Ok(thread) => thread,
        Err(CoreError::ThreadNotFound(_)) => {
            return Some(result::thread_error(
                thread_id,
                &format!(
                    "Session not found for thread_id: {thread_id} (no live thread and no saved thread with this id; start a new one with `codex`)"
                ),
            ));
        }
        Err(e) => {
            return Some(result::thread_error(
                thread_id,
                &format!("Failed to resume thread {thread_id}: {e}"),
            ));
        }
    };
    let settings = shared.settings_for(thread_id);
    let result = drive_turn(&shared, &ctx, thread, thread_id, args.prompt, &settings).await;
    shared.retire_idle_threads(thread_id).await;
    result
}

async fn live_or_resumed(shared: &Shared, thread_id: ThreadId) -> Result<Arc<Thread>, CoreError> {
    if let Some(thread) = shared.thread_manager.get_thread(thread_id).await {
        return Ok(thread);
    }
    let config = build_session_config(&shared.inputs, CallOverrides::default())
        .await
        .map_err(|e| CoreError::Internal(format!("failed to load configuration: {e}")))?;
    let settings = config.mcp_server.clone();
    match shared.thread_manager.resume_thread(config, thread_id).await {
        Ok(resumed) => {
            shared.remember_settings(thread_id, settings);
            Ok(resumed.thread)
        }
        // Another call resumed it first.
        Err(CoreError::ThreadAlreadyLive(_)) => shared
            .thread_manager
            .get_thread(thread_id)
            .await
            .ok_or(CoreError::ThreadNotFound(thread_id)),
        Err(e) => Err(e),
    }
}

fn send_codex_event(ctx: &CallContext, thread_id: ThreadId, event: &Event) {
    let msg = match serde_json::to_value(&event.msg) {
        Ok(msg) => msg,
        Err(e) => {
            tracing::warn!("failed to serialize event: {e}");
            return;
        }
    };
    ctx.outgoing.notify(
        "codex/event",
        &json!({
            "_meta": {"requestId": ctx.request_id, "threadId": thread_id.to_string()},
            "id": event.id,
            "msg": msg,
        }),
    );
}

/// `notifications/progress` for one call: strictly increasing, human message.
struct Progress {
    token: Option<Value>,
    count: u64,
    last_step: String,
    started: Instant,
}

impl Progress {
    fn new(token: Option<Value>) -> Self {
        Self {
            token,
            count: 0,
            last_step: "starting".to_string(),
            started: Instant::now(),
        }
    }

    fn step(&mut self, ctx: &CallContext, step: String) {
        self.last_step = step;
        self.send(ctx, self.last_step.clone());
    }

    fn heartbeat(&mut self, ctx: &CallContext) {
        let message = format!(
            "{} (turn running for {}s)",
            self.last_step,
            self.started.elapsed().as_secs()
        );
        self.send(ctx, message);
    }

    fn send(&mut self, ctx: &CallContext, message: String) {
        let Some(token) = &self.token else {
            return;
        };
        self.count += 1;
        ctx.outgoing.notify(
            "notifications/progress",
            &json!({"progressToken": token, "progress": self.count, "message": message}),
        );
    }
}

fn progress_step(msg: &EventMsg) -> Option<String> {
    Some(match msg {
        EventMsg::TaskStarted(_) => "turn started; waiting for the model".to_string(),
        EventMsg::AgentMessage(_) => "the agent wrote a message".to_string(),
        EventMsg::AgentReasoning(_) => "the agent is reasoning".to_string(),
        EventMsg::ExecCommandBegin(e) => format!("running `{}`", render_command(&e.command)),
        EventMsg::ExecCommandEnd(e) => format!(
            "`{}` finished ({})",
            render_command(&e.command),
            e.exit_code
                .map_or_else(|| "no exit code".to_string(), |c| format!("exit {c}"))
        ),
        EventMsg::ExecApprovalRequest(e) => {
            format!(
                "waiting for approval to run `{}`",
                render_command(&e.command)
            )
        }
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
        EventMsg::McpToolCallBegin(e) => {
            format!("calling tool {}/{}", e.invocation.server, e.invocation.tool)
        }
        EventMsg::StreamError(e) => format!(
            "model stream failed, retrying ({}/{}): {}",
            e.attempt, e.max_attempts, e.message
        ),
        EventMsg::Warning(e) => format!("warning: {}", e.message),
        EventMsg::Error(e) => format!("error: {}", e.message),
        _ => return None,
    })
}

/// Notes about approvals decided without the user, appended to the result.
type Notes = Arc<std::sync::Mutex<Vec<String>>>;

fn push_note(notes: &Notes, note: String) {
    if let Ok(mut n) = notes.lock() {
        n.push(note);
    }
}

async fn drive_turn(
    shared: &Shared,
    ctx: &CallContext,
    thread: Arc<Thread>,
    thread_id: ThreadId,
    prompt: String,
    settings: &McpServerSettings,
) -> Option<Value> {
    let mut progress = Progress::new(ctx.progress_token.clone());
    let slot = shared.turn_slot(thread_id);
    let _turn_guard = tokio::select! {
        guard = slot.lock_owned() => guard,
        () = ctx.cancel.cancelled() => return None,
    };
    let submission_id = match thread
        .submit(Op::UserInput {
            items: vec![UserInput::Text { text: prompt }],
        })
        .await
    {
        Ok(id) => id,
        Err(e) => {
            return Some(result::thread_error(
                thread_id,
                &format!("Failed to submit user input: {e}"),
            ));
        }
    };
    progress.step(ctx, "prompt submitted".to_string());

    // Approval waiters stop when the turn ends, whatever ended it.
    let turn_scope = ctx.cancel.child_token();
    let _stop_waiters = turn_scope.clone().drop_guard();
    let notes: Notes = Arc::default();
    let heartbeat_every = Duration::from_secs(settings.progress_interval_sec.max(1));
    let mut heartbeat = tokio::time::interval_at(
        tokio::time::Instant::now() + heartbeat_every,
        heartbeat_every,
    );
    let mut our_turn_id: Option<String> = None;
    let mut last_error: Option<String> = None;
    let mut cancelled_at: Option<tokio::time::Instant> = None;

    loop {
        let drain_deadline = cancelled_at.map(|at| at + CANCEL_DRAIN);
        let event = tokio::select! {
            biased;
            () = ctx.cancel.cancelled(), if cancelled_at.is_none() => {
                cancelled_at = Some(tokio::time::Instant::now());
                if let Err(e) = thread.submit(Op::Interrupt).await {
                    tracing::warn!("interrupting thread {thread_id} failed: {e}");
                    return None;
                }
                continue;
            }
            () = sleep_until_opt(drain_deadline) => {
                tracing::warn!("thread {thread_id} did not confirm the interrupt in time");
                return None;
            }
            _ = heartbeat.tick(), if cancelled_at.is_none() => {
                progress.heartbeat(ctx);
                continue;
            }
            event = thread.next_event() => event,
        };
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                if cancelled_at.is_some() {
                    return None;
                }
                return Some(result::thread_error(
                    thread_id,
                    &format!("Runtime error: {e}"),
                ));
            }
        };
        let ours = event.id == submission_id
            || our_turn_id
                .as_deref()
                .is_some_and(|t| turn_id_of(&event.msg) == Some(t));
        if cancelled_at.is_some() {
            // The request is over for the client; only wait for the engine to settle.
            if ours
                && matches!(
                    event.msg,
                    EventMsg::TurnAborted(_) | EventMsg::TaskComplete(_)
                )
            {
                return None;
            }
            continue;
        }
        if settings.events {
            send_codex_event(ctx, thread_id, &event);
        }
        if let Some(step) = progress_step(&event.msg) {
            progress.step(ctx, step);
        }
        match &event.msg {
            EventMsg::TaskStarted(started) if event.id == submission_id => {
                our_turn_id = Some(started.turn_id.clone());
            }
            EventMsg::ExecApprovalRequest(request) => {
                let params = approval::exec_params(request, &event.id, thread_id, &ctx.request_id);
                let what = format!("run `{}`", render_command(&request.command));
                let call_id = request.call_id.clone();
                spawn_approval(
                    ctx,
                    settings,
                    &turn_scope,
                    &notes,
                    thread.clone(),
                    serde_json::to_value(params).unwrap_or(Value::Null),
                    what,
                    move |decision| Op::ExecApproval {
                        id: call_id,
                        decision,
                    },
                );
            }
            EventMsg::ApplyPatchApprovalRequest(request) => {
                let params = approval::patch_params(request, &event.id, thread_id, &ctx.request_id);
                let what = format!("change {} file(s)", request.changes.len());
                let call_id = request.call_id.clone();
                spawn_approval(
                    ctx,
                    settings,
                    &turn_scope,
                    &notes,
                    thread.clone(),
                    serde_json::to_value(params).unwrap_or(Value::Null),
                    what,
                    move |decision| Op::PatchApproval {
                        id: call_id,
                        decision,
                    },
                );
            }
            EventMsg::Error(error) if ours => last_error = Some(error.message.clone()),
            EventMsg::TaskComplete(done) if ours => {
                let mut text = done.last_agent_message.clone().unwrap_or_default();
                let failure = done.error.clone().or_else(|| last_error.take());
                if let Some(failure) = &failure {
                    text = if text.is_empty() {
                        failure.clone()
                    } else {
                        format!("{text}\n\nThe turn failed: {failure}")
                    };
                }
                append_notes(&mut text, &notes);
                return Some(if failure.is_some() {
                    result::thread_error(thread_id, &text)
                } else {
                    result::success(thread_id, &text)
                });
            }
            EventMsg::TurnAborted(aborted) if ours => {
                let mut text = format!(
                    "The turn was aborted ({}). Send `codex-reply` with threadId {thread_id} to continue.",
                    serde_json::to_value(aborted.reason)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                );
                append_notes(&mut text, &notes);
                return Some(result::thread_error(thread_id, &text));
            }
            EventMsg::ShutdownComplete => {
                return Some(result::thread_error(
                    thread_id,
                    "The thread shut down before the turn finished.",
                ));
            }
            _ => {}
        }
    }
}

fn turn_id_of(msg: &EventMsg) -> Option<&str> {
    match msg {
        EventMsg::TaskComplete(e) => Some(&e.turn_id),
        EventMsg::TurnAborted(e) => Some(&e.turn_id),
        _ => None,
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn append_notes(text: &mut String, notes: &Notes) {
    let notes = notes.lock().map(|n| n.clone()).unwrap_or_default();
    if notes.is_empty() {
        return;
    }
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str("Approvals:\n");
    for note in notes {
        text.push_str("- ");
        text.push_str(&note);
        text.push('\n');
    }
    let trimmed = text.trim_end().len();
    text.truncate(trimmed);
}

#[allow(clippy::too_many_arguments)]
fn spawn_approval(
    ctx: &CallContext,
    settings: &McpServerSettings,
    turn_scope: &CancellationToken,
    notes: &Notes,
    thread: Arc<Thread>,
    params: Value,
    what: String,
    answer: impl FnOnce(ReviewDecision) -> Op + Send + 'static,
) {
    let outgoing = ctx.outgoing.clone();
    let can_elicit = ctx.can_elicit;
    let deadline = Duration::from_secs(settings.approval_timeout_sec);
    let fallback = settings.elicitation_fallback;
    let scope = turn_scope.clone();
    let notes = notes.clone();
    tokio::spawn(async move {
        let decision = if can_elicit {
            let outcome = approval::elicit(&outgoing, params, deadline, &scope).await;
            match outcome {
                ElicitOutcome::Answered(_) => {}
                ElicitOutcome::ClientError(_) => push_note(
                    &notes,
                    format!(
                        "the request to {what} was denied: the client could not answer the approval request"
                    ),
                ),
                ElicitOutcome::TimedOut => push_note(
                    &notes,
                    format!(
                        "the request to {what} was denied: no answer within {}s (mcp_server.approval_timeout_sec)",
                        deadline.as_secs()
                    ),
                ),
                ElicitOutcome::Cancelled => return,
            }
            outcome.decision()
        } else {
            let (decision, verb) = match fallback {
                ElicitationFallback::Deny => (ReviewDecision::Denied, "denied"),
                ElicitationFallback::Approve => (ReviewDecision::Approved, "approved"),
            };
            push_note(
                &notes,
                format!(
                    "the request to {what} was {verb} automatically: this client does not support elicitation (mcp_server.elicitation_fallback = \"{}\")",
                    match fallback {
                        ElicitationFallback::Deny => "deny",
                        ElicitationFallback::Approve => "approve",
                    }
                ),
            );
            decision
        };
        if let Err(e) = thread.submit(answer(decision)).await {
            tracing::warn!("submitting an approval decision failed: {e}");
        }
    });
}

//! One `session/prompt`: a turn on the session's thread, its events as session updates,
//! its approvals as permission requests, and a stop reason that tells how it ended.
//!
//! Cancel: the engine is told to interrupt (which kills the running command's process
//! group); the turn's last updates (the killed command's card) are sent, then the prompt
//! answers `cancelled`. An engine that does not confirm within
//! [`Thread::INTERRUPT_CONFIRM_DEADLINE`] gets the answer sent anyway, and a background
//! task holds the thread until it confirms, so the next prompt starts clean.

use std::sync::Arc;

use interpreter_core::Thread;
use interpreter_core::items::TurnRecap;
use interpreter_core::items::{ItemEvent, ItemProjector};
use interpreter_core::open_requests::OpenRequests;
use interpreter_protocol::{
    ElicitationResponse, Event, EventMsg, Op, PermissionsDecision, ReviewDecision, TurnAbortReason,
    UserInput, UserInputResponse,
};
use tokio::sync::OwnedMutexGuard;
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::calls;
use crate::error::AcpError;
use crate::sdk::Editor;
use crate::update::COMPACT_COMMAND;
use crate::update::{Permission, StopReason, ToolCall, ToolStatus, Update};
use crate::wire::LiveItems;

pub(crate) async fn prompt(
    agent: &Agent,
    session_id: &str,
    input: Vec<UserInput>,
    trace: Option<interpreter_telemetry::W3cTraceContext>,
    editor: Editor,
) -> Result<StopReason, AcpError> {
    if input.is_empty() {
        return Err(AcpError::InvalidParams("the prompt is empty".into()));
    }
    let session = agent.session(session_id)?;
    let (number, cancel) = session.begin_prompt()?;
    let result = Box::pin(run(
        agent, &session, session_id, input, trace, editor, &cancel,
    ))
    .await;
    session.end_prompt(number);
    result
}

async fn run(
    agent: &Agent,
    session: &crate::agent::Session,
    session_id: &str,
    input: Vec<UserInput>,
    trace: Option<interpreter_telemetry::W3cTraceContext>,
    editor: Editor,
    cancel: &CancellationToken,
) -> Result<StopReason, AcpError> {
    // Cancelled before the turn starts: nothing ran. Once it has started, only the loop
    // below answers a cancel, after telling the engine to interrupt.
    let (thread, slot) = tokio::select! {
        got = agent.thread_for_turn(session) => got?,
        () = cancel.cancelled() => return Ok(StopReason::Cancelled),
    };
    let op = if is_command(&input, COMPACT_COMMAND) {
        Op::Compact
    } else {
        Op::UserInput {
            items: skill_command_as_mention(input, &thread.skills()),
        }
    };
    let turn_id = thread.submit_traced(op, trace).await?;
    let mut view = TurnView {
        session_id: session_id.to_string(),
        editor,
        thread: thread.clone(),
        turn_over: CancellationToken::new(),
        open_requests: OpenRequests::default(),
        projector: ItemProjector::new(),
        items: LiveItems::default(),
        last_error: None,
        recap: TurnRecap::default(),
    };
    // Ends this turn's permission questions whenever the turn ends.
    let _end_questions = view.turn_over.clone().drop_guard();
    let mut interrupted_at: Option<tokio::time::Instant> = None;
    loop {
        let confirm_by = interrupted_at.map_or_else(tokio::time::Instant::now, |at| {
            at + Thread::INTERRUPT_CONFIRM_DEADLINE
        });
        let event = tokio::select! {
            biased;
            () = cancel.cancelled(), if interrupted_at.is_none() => {
                // Open questions are withdrawn; the engine stops the turn, and its last
                // updates (a killed command's card) reach the editor before the answer.
                view.turn_over.cancel();
                if let Err(e) = thread.submit(Op::Interrupt).await {
                    tracing::warn!("interrupting thread {} failed: {e}", thread.id());
                    return Ok(StopReason::Cancelled);
                }
                interrupted_at = Some(tokio::time::Instant::now());
                continue;
            }
            () = tokio::time::sleep_until(confirm_by), if interrupted_at.is_some() => {
                tracing::warn!(
                    "thread {} did not confirm the interrupt in time",
                    thread.id()
                );
                hand_back_when_confirmed(thread, turn_id, slot);
                return Ok(StopReason::Cancelled);
            }
            event = thread.next_event() => event,
        };
        let Event { id, msg } =
            event.map_err(|e| AcpError::Internal(format!("the thread stopped: {e}")))?;
        if let Some(end) = view.handle(&turn_id, &id, msg).await {
            // A cancelled prompt is cancelled, even when its turn got to finish first.
            return match interrupted_at {
                Some(_) => Ok(StopReason::Cancelled),
                None => end,
            };
        }
    }
}

/// A prompt that starts with a skill's slash command (`/<name> task`) is the prompt
/// `$<name> task`: the engine loads the skill for it. Only a skill the engine found is a
/// command; any other `/word` stays as written.
fn skill_command_as_mention(
    mut input: Vec<UserInput>,
    skills: &interpreter_core::skills::Skills,
) -> Vec<UserInput> {
    if let Some(UserInput::Text { text }) = input.first_mut() {
        let trimmed = text.trim_start();
        if let Some(command) = trimmed.strip_prefix('/') {
            let name = command.split_whitespace().next().unwrap_or_default();
            if name != COMPACT_COMMAND && skills.named(name).is_some() {
                *text = format!("${command}");
            }
        }
    }
    input
}

/// Whether the prompt is exactly the slash command `/<name>` (surrounding space allowed).
fn is_command(input: &[UserInput], name: &str) -> bool {
    match input {
        [UserInput::Text { text }] => text
            .trim()
            .strip_prefix('/')
            .is_some_and(|command| command == name),
        _ => false,
    }
}

/// Keeps the thread (its turn slot) until the engine confirms the interrupt (within a
/// second deadline), off the prompt's path, so the next prompt starts clean; the rest
/// of the turn is dropped.
fn hand_back_when_confirmed(thread: Arc<Thread>, turn_id: String, slot: OwnedMutexGuard<()>) {
    tokio::spawn(async move {
        let _slot = slot;
        let confirmed = tokio::time::timeout(Thread::INTERRUPT_CONFIRM_DEADLINE, async {
            loop {
                match thread.next_event().await {
                    Ok(Event {
                        msg: EventMsg::TurnAborted(aborted),
                        ..
                    }) if aborted.turn_id == turn_id => return,
                    Ok(Event {
                        msg: EventMsg::TaskComplete(done),
                        ..
                    }) if done.turn_id == turn_id => return,
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        })
        .await;
        if confirmed.is_err() {
            tracing::warn!(
                "thread {} still has not confirmed the interrupt; the session goes on",
                thread.id()
            );
        }
    });
}

/// Per-turn mapping state.
struct TurnView {
    session_id: String,
    editor: Editor,
    thread: Arc<Thread>,
    turn_over: CancellationToken,
    /// Permission requests out to the editor, withdrawn when the engine's clock (the
    /// only one) expires them.
    open_requests: OpenRequests,
    /// Which items are open: the engine's projector, the same one replay uses.
    projector: ItemProjector,
    /// What the editor was sent of them.
    items: LiveItems,
    last_error: Option<String>,
    /// What the turn did, for the error of a turn that fails.
    recap: TurnRecap,
}

impl TurnView {
    fn send(&self, update: Update) {
        self.editor.update(&self.session_id, update);
    }

    /// Sends what `events` announce; the card of a call announced as waiting for
    /// permission, which the question shows again.
    fn send_items(&mut self, events: Vec<ItemEvent>) -> Option<ToolCall> {
        let mut pending = None;
        for event in events {
            for update in self.items.updates(event) {
                if let Update::ToolCall(card) = &update
                    && card.status == ToolStatus::Pending
                {
                    pending = Some(card.clone());
                }
                self.send(update);
            }
        }
        pending
    }

    /// Ask the editor, then answer the engine; anything but an explicit allow denies.
    fn ask(
        &self,
        call_id: &str,
        call: ToolCall,
        answer: impl FnOnce(ReviewDecision) -> Op + Send + 'static,
    ) {
        let editor = self.editor.clone();
        let thread = self.thread.clone();
        let turn_over = self.turn_over.clone();
        let expired = self.open_requests.open(call_id);
        let open_requests = self.open_requests.clone();
        let call_id = call_id.to_string();
        let session_id = self.session_id.clone();
        tokio::spawn(async move {
            let answered = editor
                .ask_permission(&session_id, call, &turn_over, &expired)
                .await;
            open_requests.close(&call_id);
            if expired.is_cancelled() {
                // The engine's deadline passed: it decided (timed out) and the editor's
                // question was withdrawn.
                return;
            }
            let decision = match answered {
                Some(Permission::AllowOnce) => ReviewDecision::Approved,
                Some(Permission::AllowAlways) => ReviewDecision::ApprovedForSession,
                Some(Permission::Reject) => ReviewDecision::Denied,
                None if turn_over.is_cancelled() => ReviewDecision::Abort,
                None => ReviewDecision::Denied,
            };
            if let Err(e) = thread.submit(answer(decision)).await {
                tracing::debug!("submitting an approval decision failed: {e}");
            }
        });
    }

    /// Map one event; `Some` when the prompt is over.
    async fn handle(
        &mut self,
        turn_id: &str,
        event_turn: &str,
        msg: EventMsg,
    ) -> Option<Result<StopReason, AcpError>> {
        // A call asked about starts its card pending, with the reason.
        match &msg {
            EventMsg::ExecApprovalRequest(request) => self
                .items
                .awaiting_permission(&request.call_id, request.reason.clone()),
            EventMsg::ApplyPatchApprovalRequest(request) => self
                .items
                .awaiting_permission(&request.call_id, request.reason.clone()),
            _ => {}
        }
        let msg_name = msg.type_name();
        self.recap.observe(&msg);
        let item_events = self.projector.push(&msg);
        let asked = self.send_items(item_events);
        match msg {
            EventMsg::ExecApprovalRequest(request) => {
                // A second question about a call already shown (run it again without the
                // sandbox, after the sandbox stopped it) opens no new card; it is asked
                // all the same, on the call's card made pending again, or the engine
                // would wait for an answer nobody was asked for.
                let card = asked.unwrap_or_else(|| {
                    let mut card = calls::command_call(
                        &request.call_id,
                        &request.command,
                        &request.cwd,
                        &request.parsed_cmd,
                        ToolStatus::Pending,
                    );
                    if let Some(reason) = &request.reason {
                        card.content
                            .push(crate::update::ToolContent::Text(reason.clone()));
                    }
                    self.send(Update::ToolCallUpdate(crate::update::ToolCallUpdate {
                        id: request.call_id.clone(),
                        status: Some(ToolStatus::Pending),
                        content: Some(card.content.clone()),
                        ..crate::update::ToolCallUpdate::default()
                    }));
                    card
                });
                let call_id = request.call_id;
                self.ask(&call_id.clone(), card, move |decision| Op::ExecApproval {
                    id: call_id,
                    decision,
                });
            }
            EventMsg::ApplyPatchApprovalRequest(request) => {
                if let Some(card) = asked {
                    let call_id = request.call_id;
                    self.ask(&call_id.clone(), card, move |decision| Op::PatchApproval {
                        id: call_id,
                        decision,
                    });
                }
            }
            EventMsg::ExecCommandBegin(begin) => {
                if let Some(update) = self.items.began(&begin.call_id) {
                    self.send(update);
                }
            }
            EventMsg::PatchApplyBegin(begin) => {
                if let Some(update) = self.items.began(&begin.call_id) {
                    self.send(update);
                }
            }
            // Items: sent above.
            EventMsg::UserMessage(_)
            | EventMsg::AgentMessageDelta(_)
            | EventMsg::AgentMessage(_)
            | EventMsg::AgentReasoningDelta(_)
            | EventMsg::AgentReasoningSummaryPartAdded(_)
            | EventMsg::AgentReasoningSummaryDelta(_)
            | EventMsg::AgentReasoning(_)
            | EventMsg::ProposedPlanDelta(_)
            | EventMsg::ProposedPlan(_)
            | EventMsg::EnteredReviewMode(_)
            | EventMsg::ExitedReviewMode(_)
            | EventMsg::ExecCommandOutputDelta(_)
            | EventMsg::ExecCommandEnd(_)
            | EventMsg::PatchApplyEnd(_)
            | EventMsg::McpToolCallBegin(_)
            | EventMsg::McpToolCallProgress(_)
            | EventMsg::McpToolCallEnd(_)
            | EventMsg::ContextCompacted(_) => {}
            EventMsg::PlanUpdate(plan) => self.send(Update::Plan(calls::plan_entries(&plan))),
            EventMsg::Error(error) => self.last_error = Some(error.message),
            EventMsg::StreamError(error) => tracing::info!(
                "model stream failed, retrying ({}/{}): {}",
                error.attempt,
                error.max_attempts,
                error.message
            ),
            EventMsg::Warning(warning) => tracing::warn!("{}", warning.message),
            EventMsg::HookStarted(_) => {}
            EventMsg::HookCompleted(done) => {
                if let Some(call) = calls::hook_call(&done.run) {
                    self.send(Update::ToolCall(call));
                }
            }
            EventMsg::RequestExpired(expired) => self.open_requests.expire(&expired.id),
            // Questions from the agent's MCP servers are not forwarded to editors:
            // declined at once rather than left to time out.
            EventMsg::ElicitationRequest(request) => {
                let answer = Op::ResolveElicitation {
                    id: request.id,
                    response: ElicitationResponse::decline(),
                };
                if let Err(e) = self.thread.submit(answer).await {
                    tracing::debug!("declining an MCP server's question failed: {e}");
                }
            }
            EventMsg::TaskComplete(done) if done.turn_id == turn_id => {
                return Some(match done.error {
                    Some(message) => Err(AcpError::TurnFailed {
                        message: one_line(&self.last_error.take().unwrap_or(message)),
                        recap: Box::new(std::mem::take(&mut self.recap).finished()),
                    }),
                    None if done.output_limit => Ok(StopReason::MaxTokens),
                    None => Ok(StopReason::EndTurn),
                });
            }
            EventMsg::TurnAborted(aborted) if aborted.turn_id == turn_id => {
                // Stopped by the editor's cancel, or by the engine itself (an approval
                // answered with abort).
                return Some(Ok(match aborted.reason {
                    TurnAbortReason::Interrupted | TurnAbortReason::Replaced => {
                        StopReason::Cancelled
                    }
                }));
            }
            EventMsg::ShutdownComplete => {
                return Some(Err(AcpError::Internal("the thread shut down".into())));
            }
            // ACP has no question to the user of this kind: answered at once, as if the
            // user declined, rather than left to the engine's deadline.
            EventMsg::UserInputRequest(request) => {
                let answer = Op::ResolveUserInput {
                    id: request.call_id,
                    response: UserInputResponse::Declined,
                };
                if let Err(e) = self.thread.submit(answer).await {
                    tracing::debug!("declining the model's question failed: {e}");
                }
            }
            EventMsg::PermissionsRequest(request) => {
                let answer = Op::ResolvePermissions {
                    id: request.call_id,
                    decision: PermissionsDecision::Denied,
                };
                if let Err(e) = self.thread.submit(answer).await {
                    tracing::debug!("refusing a permission request failed: {e}");
                }
            }
            // Another turn's end (input that arrived as an earlier turn ended), and what
            // an editor has no place for.
            EventMsg::TaskComplete(_)
            | EventMsg::TurnAborted(_)
            | EventMsg::SessionConfigured(_)
            | EventMsg::TaskStarted(_)
            | EventMsg::TokenCount(_)
            | EventMsg::TurnDiff(_)
            | EventMsg::GoalUpdated(_)
            | EventMsg::GoalCleared(_)
            | EventMsg::McpStartupUpdate(_) => {
                tracing::trace!("turn {event_turn}: {} not shown", msg_name);
            }
        }
        None
    }
}

/// Provider messages can span lines; a JSON-RPC error message is one line.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

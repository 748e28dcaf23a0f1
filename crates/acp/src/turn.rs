//! One `session/prompt`: a turn on the session's thread, its events as session updates,
//! its approvals as permission requests, and a stop reason that tells how it ended.
//!
//! Cancel answers at once: the engine is told to interrupt (which kills the running
//! command's process group), nothing more of the turn is sent, and a background task
//! holds the thread until the engine confirms, so the next prompt starts clean.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use interpreter_core::Thread;
use interpreter_core::open_requests::OpenRequests;
use interpreter_protocol::{
    ElicitationResponse, Event, EventMsg, Op, ReviewDecision, TurnAbortReason, UserInput,
};
use tokio::sync::OwnedMutexGuard;
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::calls;
use crate::error::AcpError;
use crate::sdk::Editor;
use crate::update::{
    Permission, StopReason, ToolCall, ToolCallUpdate, ToolContent, ToolStatus, Update,
};

pub(crate) async fn prompt(
    agent: &Agent,
    session_id: &str,
    input: Vec<UserInput>,
    editor: Editor,
) -> Result<StopReason, AcpError> {
    if input.is_empty() {
        return Err(AcpError::InvalidParams("the prompt is empty".into()));
    }
    let session = agent.session(session_id)?;
    let (number, cancel) = session.begin_prompt()?;
    let result = run(agent, &session, session_id, input, editor, &cancel).await;
    session.end_prompt(number);
    result
}

async fn run(
    agent: &Agent,
    session: &crate::agent::Session,
    session_id: &str,
    input: Vec<UserInput>,
    editor: Editor,
    cancel: &CancellationToken,
) -> Result<StopReason, AcpError> {
    // Cancelled before the turn starts: nothing ran. Once it has started, only the loop
    // below answers a cancel, after telling the engine to interrupt.
    let thread = tokio::select! {
        thread = agent.current_thread(session) => thread?,
        () = cancel.cancelled() => return Ok(StopReason::Cancelled),
    };
    let slot = tokio::select! {
        slot = thread.turn_slot() => slot,
        () = cancel.cancelled() => return Ok(StopReason::Cancelled),
    };
    let op = if is_command(&input, "compact") {
        Op::Compact
    } else {
        Op::UserInput { items: input }
    };
    let turn_id = thread.submit(op).await?;
    let mut view = TurnView {
        session_id: session_id.to_string(),
        editor,
        thread: thread.clone(),
        turn_over: CancellationToken::new(),
        open_requests: OpenRequests::default(),
        text_streamed: false,
        thought_streamed: false,
        announced: HashMap::new(),
        finished: HashSet::new(),
        output: HashMap::new(),
        last_error: None,
    };
    // Ends this turn's permission questions whenever the turn ends.
    let _end_questions = view.turn_over.clone().drop_guard();
    loop {
        let event = tokio::select! {
            biased;
            () = cancel.cancelled() => {
                view.turn_over.cancel();
                hand_back_after_interrupt(thread, turn_id, slot).await;
                return Ok(StopReason::Cancelled);
            }
            event = thread.next_event() => event,
        };
        let Event { id, msg } =
            event.map_err(|e| AcpError::Internal(format!("the thread stopped: {e}")))?;
        if let Some(end) = view.handle(&turn_id, &id, msg).await {
            return end;
        }
    }
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

/// Tell the engine to stop, then keep the thread (its turn slot) until it confirms, off
/// the prompt's path; the cancelled turn's events are dropped.
async fn hand_back_after_interrupt(
    thread: Arc<Thread>,
    turn_id: String,
    slot: OwnedMutexGuard<()>,
) {
    if let Err(e) = thread.submit(Op::Interrupt).await {
        tracing::warn!("interrupting thread {} failed: {e}", thread.id());
        return;
    }
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
                "thread {} did not confirm the interrupt in time",
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
    /// Deltas of the current message (or reasoning block) were sent, so its final
    /// event must not send the text again.
    text_streamed: bool,
    thought_streamed: bool,
    /// Announced tool calls and the content they were announced with.
    announced: HashMap<String, Vec<ToolContent>>,
    finished: HashSet<String>,
    /// Output streamed so far, per command.
    output: HashMap<String, String>,
    last_error: Option<String>,
}

impl TurnView {
    fn send(&self, update: Update) {
        self.editor.update(&self.session_id, update);
    }

    /// Announce a tool call once; later calls for the same id only move its status.
    fn announce(&mut self, call: ToolCall) {
        if self.announced.contains_key(&call.id) {
            self.send(Update::ToolCallUpdate(ToolCallUpdate {
                id: call.id,
                status: Some(call.status),
                ..ToolCallUpdate::default()
            }));
            return;
        }
        self.announced.insert(call.id.clone(), call.content.clone());
        self.send(Update::ToolCall(call));
    }

    fn finish(&mut self, update: ToolCallUpdate) {
        if self.finished.insert(update.id.clone()) {
            self.send(Update::ToolCallUpdate(update));
        }
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
        match msg {
            EventMsg::AgentMessageDelta(delta) => {
                if !delta.delta.is_empty() {
                    self.text_streamed = true;
                    self.send(Update::AgentText(delta.delta));
                }
            }
            EventMsg::AgentMessage(message) => {
                if !std::mem::take(&mut self.text_streamed) && !message.message.is_empty() {
                    self.send(Update::AgentText(message.message));
                }
            }
            EventMsg::AgentReasoningDelta(delta) => {
                if !delta.delta.is_empty() {
                    self.thought_streamed = true;
                    self.send(Update::Thought(delta.delta));
                }
            }
            // A summary is what the server shows of its reasoning: the editor's thought.
            EventMsg::AgentReasoningSummaryDelta(delta) => {
                if !delta.delta.is_empty() {
                    self.thought_streamed = true;
                    self.send(Update::Thought(delta.delta));
                }
            }
            EventMsg::AgentReasoning(reasoning) => {
                if !std::mem::take(&mut self.thought_streamed) && !reasoning.text.is_empty() {
                    self.send(Update::Thought(reasoning.text));
                }
            }
            EventMsg::ExecApprovalRequest(request) => {
                let mut call = calls::command_call(
                    &request.call_id,
                    &request.command,
                    &request.cwd,
                    &request.parsed_cmd,
                    ToolStatus::Pending,
                );
                if let Some(reason) = &request.reason {
                    call.content = vec![ToolContent::Text(reason.clone())];
                }
                self.announce(call.clone());
                let call_id = request.call_id;
                self.ask(&call_id.clone(), call, move |decision| Op::ExecApproval {
                    id: call_id,
                    decision,
                });
            }
            EventMsg::ExecCommandBegin(begin) => {
                self.announce(calls::command_call(
                    &begin.call_id,
                    &begin.command,
                    &begin.cwd,
                    &begin.parsed_cmd,
                    ToolStatus::InProgress,
                ));
            }
            EventMsg::ExecCommandOutputDelta(delta) => {
                let output = self.output.entry(delta.call_id.clone()).or_default();
                output.push_str(&delta.chunk);
                let content = calls::output_content(output);
                self.send(Update::ToolCallUpdate(ToolCallUpdate {
                    id: delta.call_id,
                    content: Some(content),
                    ..ToolCallUpdate::default()
                }));
            }
            EventMsg::ExecCommandEnd(end) => {
                let status = calls::command_status(end.status);
                if !self.announced.contains_key(&end.call_id) {
                    self.announce(calls::command_call(
                        &end.call_id,
                        &end.command,
                        &end.cwd,
                        &[],
                        ToolStatus::InProgress,
                    ));
                }
                let content = match end.status {
                    interpreter_protocol::ExecCommandStatus::Declined => {
                        vec![ToolContent::Text("Not run: permission denied.".into())]
                    }
                    _ => calls::output_content(&end.aggregated_output),
                };
                self.finish(ToolCallUpdate {
                    id: end.call_id,
                    status: Some(status),
                    content: Some(content),
                    raw_output: Some(serde_json::json!({
                        "exitCode": end.exit_code,
                        "durationMs": end.duration_ms,
                    })),
                });
            }
            EventMsg::ApplyPatchApprovalRequest(request) => {
                let mut call =
                    calls::patch_call(&request.call_id, &request.changes, ToolStatus::Pending);
                // Why the person is asked (a path outside the roots, and where a symlink
                // there leads) belongs on the card they answer.
                if let Some(reason) = &request.reason {
                    call.content.push(ToolContent::Text(reason.clone()));
                }
                self.announce(call.clone());
                let call_id = request.call_id;
                self.ask(&call_id.clone(), call, move |decision| Op::PatchApproval {
                    id: call_id,
                    decision,
                });
            }
            EventMsg::PatchApplyBegin(begin) => {
                self.announce(calls::patch_call(
                    &begin.call_id,
                    &begin.changes,
                    ToolStatus::InProgress,
                ));
            }
            EventMsg::PatchApplyEnd(end) => {
                if !self.announced.contains_key(&end.call_id) {
                    self.announce(calls::patch_call(
                        &end.call_id,
                        &end.changes,
                        ToolStatus::InProgress,
                    ));
                }
                let update = if end.success {
                    ToolCallUpdate {
                        id: end.call_id,
                        status: Some(ToolStatus::Completed),
                        ..ToolCallUpdate::default()
                    }
                } else {
                    let mut content = self
                        .announced
                        .get(&end.call_id)
                        .cloned()
                        .unwrap_or_default();
                    content.push(ToolContent::Text(end.stderr));
                    ToolCallUpdate {
                        id: end.call_id,
                        status: Some(ToolStatus::Failed),
                        content: Some(content),
                        ..ToolCallUpdate::default()
                    }
                };
                self.finish(update);
            }
            EventMsg::McpToolCallBegin(begin) => {
                self.announce(calls::mcp_call(
                    &begin.call_id,
                    &begin.invocation,
                    ToolStatus::InProgress,
                ));
            }
            EventMsg::McpToolCallEnd(end) => {
                if !self.announced.contains_key(&end.call_id) {
                    self.announce(calls::mcp_call(
                        &end.call_id,
                        &end.invocation,
                        ToolStatus::InProgress,
                    ));
                }
                self.finish(ToolCallUpdate {
                    id: end.call_id,
                    status: Some(calls::mcp_status(&end.result)),
                    content: Some(calls::mcp_result_content(&end.result)),
                    raw_output: end.result.clone().ok(),
                });
            }
            EventMsg::PlanUpdate(plan) => self.send(Update::Plan(calls::plan_entries(&plan))),
            EventMsg::ContextCompacted(compacted) => self.send(Update::AgentText(
                calls::compaction_text(compacted.items_before, compacted.items_after),
            )),
            EventMsg::Error(error) => self.last_error = Some(error.message),
            EventMsg::StreamError(error) => tracing::info!(
                "model stream failed, retrying ({}/{}): {}",
                error.attempt,
                error.max_attempts,
                error.message
            ),
            EventMsg::Warning(warning) => tracing::warn!("{}", warning.message),
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
                self.fail_open_calls();
                return Some(match done.error {
                    Some(message) => Err(AcpError::TurnFailed(one_line(
                        &self.last_error.take().unwrap_or(message),
                    ))),
                    None if done.output_limit => Ok(StopReason::MaxTokens),
                    None => Ok(StopReason::EndTurn),
                });
            }
            EventMsg::TurnAborted(aborted) if aborted.turn_id == turn_id => {
                // Stopped by the engine itself (an approval answered with abort).
                self.fail_open_calls();
                return Some(Ok(match aborted.reason {
                    TurnAbortReason::Interrupted | TurnAbortReason::Replaced => {
                        StopReason::Cancelled
                    }
                }));
            }
            EventMsg::ShutdownComplete => {
                return Some(Err(AcpError::Internal("the thread shut down".into())));
            }
            other => tracing::trace!("turn {event_turn}: {} not shown", other.type_name()),
        }
        None
    }

    /// A tool call the engine never finished (a declined patch reports no end when the
    /// turn stops) is failed, so no card stays spinning.
    fn fail_open_calls(&mut self) {
        let open: Vec<String> = self
            .announced
            .keys()
            .filter(|id| !self.finished.contains(*id))
            .cloned()
            .collect();
        for id in open {
            self.finish(ToolCallUpdate {
                id,
                status: Some(ToolStatus::Failed),
                ..ToolCallUpdate::default()
            });
        }
    }
}

/// Provider messages can span lines; a JSON-RPC error message is one line.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

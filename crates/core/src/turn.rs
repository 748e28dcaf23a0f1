//! One turn: sample the model, run the tools it calls, feed the results back, repeat until
//! the model answers without calling a tool.
//!
//! Invariants the turn keeps, whatever happens (error, interrupt, bad tool arguments):
//! every tool call recorded in history gets exactly one output, in order, with its id
//! unchanged; and the turn ends with exactly one of `task_complete` (after an `error` when
//! it failed) or `turn_aborted`.

use std::sync::Arc;
use std::time::Duration;

use interpreter_model_client::{CutOff, Prompt, ProviderError, ResponseEvent, RetryNotice};
use interpreter_protocol::HookEventName;
use interpreter_protocol::{
    AgentMessageEvent, AgentReasoningEvent, CollaborationMode, CollaborationModeKind, DeltaEvent,
    ErrorEvent, ErrorKind, EventMsg, ProposedPlanDeltaEvent, ProposedPlanEvent, ReasoningSummary,
    ReasoningSummaryDeltaEvent, ReasoningSummaryPartEvent, ResponseItem, ReviewModeEvent,
    ReviewRequest, Role, StreamErrorEvent, TaskCompleteEvent, TaskStartedEvent, TokenCountEvent,
    TokenUsage, TokenUsageInfo, TurnAbortReason, TurnAbortedEvent, UserMessageEvent,
};
use interpreter_telemetry::metrics;
use interpreter_telemetry::spans::{self, TurnOutcome};
use opentelemetry::trace::FutureExt as _;
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod compact;

use crate::handlers;
use crate::hook_runs;
use crate::plan_mode::{self, Piece, PlanSplitter};
use crate::review;
use crate::session::Session;
use crate::tool_output::ToolOutcome;

/// Why a turn stopped early.
pub(crate) enum TurnStop {
    Interrupted,
    Failed(ErrorEvent),
}

/// Text recorded as the output of a tool call that never ran because the turn stopped.
const ABORTED_OUTPUT: &str = "aborted: the turn was interrupted before this tool call ran";

/// What a turn works on.
pub(crate) enum TurnKind {
    /// The user's input (and what was left over from the last turn).
    Input(Vec<ResponseItem>),
    /// A review (`Op::Review`): read-only, with the review instructions; its final
    /// answer is the review.
    Review(ReviewRequest),
}

pub(crate) async fn run_turn(
    sess: Arc<Session>,
    sub_id: String,
    kind: TurnKind,
    cancel: CancellationToken,
) -> TurnReport {
    let server_warning = learn_from_server(&sess).await;
    let review = matches!(kind, TurnKind::Review(_));
    let mode = sess.begin_turn_mode(review);
    emit_task_started(&sess, &sub_id).await;
    if let Some(message) = server_warning {
        sess.warn(&sub_id, message).await;
    }
    let input = match kind {
        TurnKind::Input(input) => input,
        TurnKind::Review(request) => {
            sess.emit(
                &sub_id,
                EventMsg::EnteredReviewMode(ReviewModeEvent {
                    item_id: format!("{sub_id}-review"),
                    review: request.description,
                }),
            )
            .await;
            vec![ResponseItem::user_text(request.prompt)]
        }
    };
    sess.persist(&[crate::session::turn_context(
        &sess.config,
        Some(sub_id.clone()),
        (mode.kind != CollaborationModeKind::Default).then_some(mode.kind),
    )])
    .await;
    *sess.turn_base_len.lock().await = sess.history.lock().await.len();
    // The mode's instructions join the turn's input (so a compaction keeps them), said
    // to the model, not shown as something the user wrote.
    let mut turn_input = Vec::new();
    let wanted = if review {
        Some(review::REVIEW_INSTRUCTIONS)
    } else {
        plan_mode::mode_instructions(&mode)
    };
    let said = plan_mode::mode_message(&sess.history.lock().await, wanted);
    if let Some(said) = said {
        sess.record_items(std::slice::from_ref(&said)).await;
        turn_input.push(said);
    }
    // Set when a hook ends the turn before the model is asked.
    let mut stopped_by_hook = false;
    if review {
        // The review request (the diff) is the model's input, not something the user
        // wrote: the entered-review event is what front ends show for it.
        sess.record_items(&input).await;
        turn_input.extend(input.iter().cloned());
    } else {
        stopped_by_hook = run_session_starts(&sess, &sub_id, &mut turn_input)
            .await
            .is_some()
            || admit_user_input(&sess, &sub_id, input, &mut turn_input).await;
    }
    let started = std::time::Instant::now();
    let tokens_before = sess.total_usage.lock().await.total_tokens;

    let outcome = if stopped_by_hook {
        Ok(TurnEnd {
            last_agent_message: None,
            output_limit: false,
        })
    } else {
        sampling_loop(&sess, &sub_id, turn_input, &mode, &cancel).await
    };
    sess.end_turn_mode();
    if review {
        let text = match &outcome {
            Ok(end) => end.last_agent_message.clone().unwrap_or_default(),
            Err(_) => String::new(),
        };
        sess.emit(
            &sub_id,
            EventMsg::ExitedReviewMode(ReviewModeEvent {
                item_id: format!("{sub_id}-review-done"),
                review: text,
            }),
        )
        .await;
    }
    // A turn that stopped early closes its input here (one that answered did already).
    sess.close_input(false).await;
    // Before the turn's end goes out, so a front end that sees the turn end already has
    // what it did to the goal.
    let tokens = sess
        .total_usage
        .lock()
        .await
        .total_tokens
        .saturating_sub(tokens_before);
    sess.account_goal_turn(
        &sub_id,
        i64::try_from(tokens).unwrap_or(i64::MAX),
        i64::try_from(started.elapsed().as_secs()).unwrap_or(i64::MAX),
        matches!(outcome, Err(TurnStop::Interrupted)),
    )
    .await;
    let end = match outcome {
        Ok(TurnEnd {
            last_agent_message,
            output_limit,
        }) => EventMsg::TaskComplete(TaskCompleteEvent {
            turn_id: sub_id.clone(),
            last_agent_message,
            error: None,
            output_limit,
        }),
        Err(TurnStop::Interrupted) => EventMsg::TurnAborted(TurnAbortedEvent {
            turn_id: sub_id.clone(),
            reason: TurnAbortReason::Interrupted,
        }),
        Err(TurnStop::Failed(error)) => {
            if error.kind == Some(ErrorKind::ContextWindowExceeded) {
                sess.roll_back_turn(format!(
                    "turn {sub_id} failed because the conversation does not fit the context window; its input was taken out of the thread"
                ))
                .await;
            }
            let message = error.message.clone();
            sess.emit(&sub_id, EventMsg::Error(error)).await;
            EventMsg::TaskComplete(TaskCompleteEvent {
                turn_id: sub_id.clone(),
                last_agent_message: None,
                error: Some(message),
                output_limit: false,
            })
        }
    };
    finish_turn(&sess, &sub_id, end).await
}

/// Emits the event that ends a turn, and reports the end it announced.
async fn finish_turn(sess: &Session, sub_id: &str, end: EventMsg) -> TurnReport {
    let report = TurnReport::of(&end);
    sess.emit(sub_id, end).await;
    report
}

/// How a turn ended, for its span and the turns metric: read off the event that ends
/// it, so the telemetry cannot disagree with what front ends were told.
pub(crate) struct TurnReport {
    pub outcome: TurnOutcome,
    pub error: Option<String>,
}

impl TurnReport {
    fn of(end: &EventMsg) -> Self {
        match end {
            EventMsg::TaskComplete(TaskCompleteEvent {
                error: Some(error), ..
            }) => Self {
                outcome: TurnOutcome::Failed,
                error: Some(error.clone()),
            },
            EventMsg::TurnAborted(_) => Self {
                outcome: TurnOutcome::Interrupted,
                error: None,
            },
            _ => Self {
                outcome: TurnOutcome::Completed,
                error: None,
            },
        }
    }
}

/// `Op::Compact`: a turn that only summarises the conversation so far.
pub(crate) async fn run_compact_turn(
    sess: Arc<Session>,
    sub_id: String,
    cancel: CancellationToken,
) -> TurnReport {
    emit_task_started(&sess, &sub_id).await;
    *sess.turn_base_len.lock().await = sess.history.lock().await.len();
    let end = match compact::compact(&sess, &sub_id, &[], &cancel).await {
        Ok(()) => EventMsg::TaskComplete(TaskCompleteEvent {
            turn_id: sub_id.clone(),
            last_agent_message: None,
            error: None,
            output_limit: false,
        }),
        Err(TurnStop::Interrupted) => EventMsg::TurnAborted(TurnAbortedEvent {
            turn_id: sub_id.clone(),
            reason: TurnAbortReason::Interrupted,
        }),
        Err(TurnStop::Failed(error)) => {
            let message = error.message.clone();
            sess.emit(&sub_id, EventMsg::Error(error)).await;
            EventMsg::TaskComplete(TaskCompleteEvent {
                turn_id: sub_id.clone(),
                last_agent_message: None,
                error: Some(message),
                output_limit: false,
            })
        }
    };
    finish_turn(&sess, &sub_id, end).await
}

/// A shell command the user asked for (`Op::RunUserShellCommand`), as a turn of its own
/// (as Codex runs it): the model is not sampled; the command and its output join the
/// history, so the model sees them in the next turn.
pub(crate) async fn run_user_shell_turn(
    sess: Arc<Session>,
    sub_id: String,
    command: String,
    timeout: Duration,
    cancel: CancellationToken,
) -> TurnReport {
    emit_task_started(&sess, &sub_id).await;
    *sess.turn_base_len.lock().await = sess.history.lock().await.len();
    let call_id = format!("user_shell_{sub_id}");
    let for_model =
        handlers::run_user_shell_command(&sess, &sub_id, &call_id, &command, timeout, &cancel)
            .await;
    sess.record_items(&[ResponseItem::user_text(for_model)])
        .await;
    let end = if cancel.is_cancelled() {
        EventMsg::TurnAborted(TurnAbortedEvent {
            turn_id: sub_id.clone(),
            reason: TurnAbortReason::Interrupted,
        })
    } else {
        EventMsg::TaskComplete(TaskCompleteEvent {
            turn_id: sub_id.clone(),
            last_agent_message: None,
            error: None,
            output_limit: false,
        })
    };
    finish_turn(&sess, &sub_id, end).await
}

async fn emit_task_started(sess: &Session, sub_id: &str) {
    let model_context_window = sess.context.lock().await.window;
    sess.emit(
        sub_id,
        EventMsg::TaskStarted(TaskStartedEvent {
            turn_id: sub_id.to_string(),
            model_context_window,
        }),
    )
    .await;
}

/// Runs the `SessionStart` hooks waiting to run (the thread started or resumed, or the
/// conversation was compacted); what they add joins the turn's input. `Some(reason)`
/// when one stopped the turn (the user was warned).
async fn run_session_starts(
    sess: &Arc<Session>,
    sub_id: &str,
    turn_input: &mut Vec<ResponseItem>,
) -> Option<String> {
    while let Some(source) = sess.take_session_start() {
        let decision = hook_runs::run_event(
            sess,
            sub_id,
            hook_runs::Occurrence {
                event: HookEventName::SessionStart,
                targets: &[source],
                fields: json!({ "source": source }),
                call_id: None,
            },
        )
        .await;
        record_hook_context(sess, decision.context, turn_input).await;
        if let Some(reason) = decision.stopped {
            sess.warn(sub_id, reason.clone()).await;
            return Some(reason);
        }
    }
    None
}

/// User messages offered to the thread, a turn's prompt or input steered into a running
/// turn, as Codex takes them: each passes the `UserPromptSubmit` hooks on its own. One
/// they block or that stops is not recorded (the user is warned, the hooks' context is
/// kept); an admitted one is recorded, then its hooks' context, then the bodies of the
/// skills it names (`$name`), all joining the turn's input. Whether the turn ends here:
/// input was refused and none admitted.
async fn admit_user_input(
    sess: &Arc<Session>,
    sub_id: &str,
    messages: Vec<ResponseItem>,
    turn_input: &mut Vec<ResponseItem>,
) -> bool {
    let mut refused = false;
    let mut admitted = false;
    for message in messages {
        let text = prompt_text(std::slice::from_ref(&message));
        let decision = hook_runs::run_event(
            sess,
            sub_id,
            hook_runs::Occurrence {
                event: HookEventName::UserPromptSubmit,
                targets: &[],
                fields: json!({ "prompt": text }),
                call_id: None,
            },
        )
        .await;
        let refusal = decision
            .blocked
            .map(|reason| format!("the prompt was blocked by a UserPromptSubmit hook: {reason}"))
            .or(decision.stopped);
        if let Some(refusal) = refusal {
            refused = true;
            record_hook_context(sess, decision.context, turn_input).await;
            sess.warn(sub_id, refusal).await;
            continue;
        }
        admitted = true;
        record_user_input(sess, sub_id, &message).await;
        turn_input.push(message);
        record_hook_context(sess, decision.context, turn_input).await;
        // Skills the message names: their bodies follow it, for the model, not shown as
        // something the user wrote.
        let (loaded, failures) = sess.skills.mentioned_in(&text);
        for failure in failures {
            sess.warn(sub_id, failure).await;
        }
        if !loaded.is_empty() {
            sess.record_items(&loaded).await;
            turn_input.extend(loaded);
        }
    }
    refused && !admitted
}

/// The prompt's text, part by part (a mention ends where its text part does).
fn prompt_text(input: &[ResponseItem]) -> String {
    input
        .iter()
        .filter_map(|item| match item {
            ResponseItem::Message { content, .. } => Some(content),
            _ => None,
        })
        .flatten()
        .filter_map(interpreter_protocol::ContentItem::text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Context hooks added, said to the model as developer messages (as Codex records it).
async fn record_hook_context(
    sess: &Session,
    context: Vec<String>,
    turn_input: &mut Vec<ResponseItem>,
) {
    let items: Vec<ResponseItem> = context
        .into_iter()
        .map(ResponseItem::developer_text)
        .collect();
    if !items.is_empty() {
        sess.record_items(&items).await;
        turn_input.extend(items);
    }
}

/// One user message: shown to front ends, then recorded.
async fn record_user_input(sess: &Session, sub_id: &str, input: &ResponseItem) {
    if let Some(message) = input.message_text() {
        sess.emit(
            sub_id,
            EventMsg::UserMessage(UserMessageEvent {
                item_id: String::new(),
                message,
            }),
        )
        .await;
    }
    sess.record_items(std::slice::from_ref(input)).await;
}

/// How a turn that did not fail ended.
struct TurnEnd {
    last_agent_message: Option<String>,
    /// The final answer stopped at the model's output limit.
    output_limit: bool,
}

/// Times `Stop` hooks may keep one turn going.
const MAX_STOP_CONTINUATIONS: u32 = 8;

async fn sampling_loop(
    sess: &Arc<Session>,
    sub_id: &str,
    mut turn_input: Vec<ResponseItem>,
    mode: &CollaborationMode,
    cancel: &CancellationToken,
) -> Result<TurnEnd, TurnStop> {
    let mut last_agent_message = None;
    let mut cut_note: Option<String> = None;
    // Compaction runs at most this often per turn: if the summary plus the request still
    // does not fit, more summarising will not help, and the error is reported instead.
    let mut compactions = 0u32;
    let mut stop_continuations = 0u32;
    loop {
        // Before the model is asked again: what a compaction's SessionStart hooks add,
        // then input steered into the turn while it ran (a guardrail sees it as it sees
        // a prompt).
        let steered = std::mem::take(&mut *sess.pending_input.lock().await);
        if (compactions > 0
            && run_session_starts(sess, sub_id, &mut turn_input)
                .await
                .is_some())
            || admit_user_input(sess, sub_id, steered, &mut turn_input).await
        {
            return Ok(TurnEnd {
                last_agent_message,
                output_limit: false,
            });
        }
        sess.prepare_mcp(cancel).await;
        if cancel.is_cancelled() {
            return Err(TurnStop::Interrupted);
        }

        let offered = handlers::tool_specs(sess);
        sess.warn_tools_left_out(sub_id, &offered.left_out).await;
        let instructions = match offered.left_out_note() {
            Some(note) => format!("{}\n\n{note}", sess.instructions),
            None => sess.instructions.clone(),
        };
        let prompt = Prompt {
            instructions,
            input: sess.history.lock().await.clone(),
            tools: offered.specs,
            output_schema: sess.config.output_schema.clone(),
            prompt_cache_key: Some(sess.thread_id.to_string()),
            max_output_tokens: max_output_tokens(sess).await,
        };
        // Before sending: a prompt estimated over the budget is compacted first, so the
        // server never has to refuse it (and servers that truncate silently never do).
        if compactions < MAX_COMPACTIONS_PER_TURN
            && let Some(over) = over_budget(sess, &prompt).await
        {
            tracing::info!(
                estimate = over.estimate,
                budget = over.budget,
                "prompt estimated over the context budget; compacting first"
            );
            compactions += 1;
            compact::compact(sess, sub_id, &turn_input, cancel).await?;
            continue;
        }
        let sample = match sample_with_retries(sess, sub_id, &prompt, cancel, true).await {
            Err(TurnStop::Failed(error))
                if error.kind == Some(ErrorKind::ContextWindowExceeded) =>
            {
                if compactions < MAX_COMPACTIONS_PER_TURN {
                    compactions += 1;
                    compact::compact(sess, sub_id, &turn_input, cancel).await?;
                    continue;
                }
                return Err(TurnStop::Failed(
                    overflow_error(sess, &error.message, compactions).await,
                ));
            }
            result => result?,
        };
        let output = sample.items;
        // Whether this answer stopped at the output limit: the turn's final answer when
        // no tool calls follow it.
        let output_limit = sample.cut_off == Some(CutOff::Length);
        if let Some(cut_off) = sample.cut_off {
            let message = cut_off_message(sess, cut_off, &prompt);
            sess.warn(sub_id, message.clone()).await;
            cut_note = Some(message);
        }
        sess.record_items(&output).await;
        if compactions == 0 && context_nearly_full(sess).await {
            compactions += 1;
            compact::compact(sess, sub_id, &turn_input, cancel).await?;
        }

        let mut calls = Vec::new();
        for item in &output {
            match item {
                ResponseItem::Message {
                    role: Role::Assistant,
                    ..
                } => {
                    let mut text = item.message_text().unwrap_or_default();
                    if mode.kind == CollaborationModeKind::Plan {
                        // What the user reads: the answer without its plan block, or
                        // the plan when that is all the answer was.
                        let split = plan_mode::split_answer(&text);
                        text = match split.plan {
                            Some(plan) if split.message.trim().is_empty() => plan,
                            _ => split.message,
                        };
                    }
                    if !text.trim().is_empty() {
                        last_agent_message = Some(text);
                    }
                }
                ResponseItem::FunctionCall {
                    name,
                    arguments,
                    call_id,
                } => calls.push((name.clone(), arguments.clone(), call_id.clone())),
                _ => {}
            }
        }

        if calls.is_empty() {
            // A Stop hook may keep the turn going with what it says; bounded, so two
            // hooks that always block cannot keep a turn alive for ever.
            if stop_continuations < MAX_STOP_CONTINUATIONS {
                let decision = hook_runs::run_event(
                    sess,
                    sub_id,
                    hook_runs::Occurrence {
                        event: HookEventName::Stop,
                        targets: &[],
                        fields: json!({
                            "stop_hook_active": stop_continuations > 0,
                            "last_assistant_message": last_agent_message,
                        }),
                        call_id: None,
                    },
                )
                .await;
                if decision.stopped.is_none() && !decision.continue_with.is_empty() {
                    stop_continuations += 1;
                    let prompt =
                        ResponseItem::user_text(hook_runs::stop_prompt(&decision.continue_with));
                    sess.record_items(std::slice::from_ref(&prompt)).await;
                    continue;
                }
            } else {
                sess.warn(
                    sub_id,
                    format!(
                        "Stop hooks kept this turn going {MAX_STOP_CONTINUATIONS} times; it ends here"
                    ),
                )
                .await;
            }
            if sess.close_input(true).await {
                // An answer that was cut off says so where the user reads it.
                if let (Some(note), Some(message)) = (&cut_note, &mut last_agent_message) {
                    message.push_str(&format!("\n\n[{note}]"));
                }
                return Ok(TurnEnd {
                    last_agent_message,
                    output_limit,
                });
            }
            continue;
        }

        let mut calls = calls.into_iter();
        while let Some((name, arguments, call_id)) = calls.next() {
            let outcome = if cancel.is_cancelled() {
                ToolOutcome::Stop(ABORTED_OUTPUT.to_string())
            } else {
                handlers::handle_call(sess, sub_id, &name, &arguments, &call_id, cancel).await
            };
            match outcome {
                ToolOutcome::Output(output) => {
                    sess.record_items(&[ResponseItem::FunctionCallOutput { call_id, output }])
                        .await;
                    // Context the call's hooks added, after its output (a tool call and
                    // its output stay adjacent on every wire).
                    let context: Vec<ResponseItem> = sess
                        .take_hook_context()
                        .into_iter()
                        .map(ResponseItem::developer_text)
                        .collect();
                    if !context.is_empty() {
                        sess.record_items(&context).await;
                    }
                }
                ToolOutcome::Stop(output) => {
                    // Context for a call that did not finish is not said later.
                    sess.take_hook_context();
                    let mut outputs = vec![ResponseItem::FunctionCallOutput { call_id, output }];
                    outputs.extend(
                        calls.map(|(_, _, call_id)| ResponseItem::FunctionCallOutput {
                            call_id,
                            output: ABORTED_OUTPUT.to_string(),
                        }),
                    );
                    sess.record_items(&outputs).await;
                    return Err(TurnStop::Interrupted);
                }
            }
        }
    }
}

/// Sample once, retrying a failed stream when [`ProviderError::is_retryable`] allows (a
/// stream that drops, goes idle, is cut off or completes empty) up to the provider's
/// `stream_max_retries`. Failures before the stream starts were already retried by the
/// client under the same rule, so they end the sample; each of the client's retries is
/// announced here as a `stream_error` event. Partial output of a failed attempt is
/// discarded: nothing of it reaches the history, so a failed turn leaves the thread
/// resumable.
/// `visible` events (deltas, messages, reasoning) are emitted only for samples the user
/// should see; a compaction summary is not one.
pub(crate) async fn sample_with_retries(
    sess: &Session,
    sub_id: &str,
    prompt: &Prompt,
    cancel: &CancellationToken,
    visible: bool,
) -> Result<Sample, TurnStop> {
    let max_attempts =
        u32::try_from(sess.config.model_provider.stream_max_retries()).unwrap_or(u32::MAX);
    let mut attempt = 0u32;
    loop {
        let (err, message) = match sample_once(sess, sub_id, prompt, cancel, visible).await {
            Ok(items) => return Ok(items),
            Err(_) if cancel.is_cancelled() => return Err(TurnStop::Interrupted),
            Err(SampleFailure::InStream(err)) if err.is_retryable() && attempt < max_attempts => {
                attempt += 1;
                sess.emit(
                    sub_id,
                    EventMsg::StreamError(StreamErrorEvent {
                        message: err.to_string(),
                        attempt,
                        max_attempts,
                    }),
                )
                .await;
                let backoff = Duration::from_millis(200u64.saturating_mul(1 << attempt.min(6)));
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = cancel.cancelled() => return Err(TurnStop::Interrupted),
                }
                continue;
            }
            Err(SampleFailure::InStream(err)) => {
                let message = err.final_message(attempt + 1);
                (err, message)
            }
            // Its message already counts the client's attempts.
            Err(SampleFailure::BeforeStream(err)) => {
                let message = err.to_string();
                (err, message)
            }
        };
        if let ProviderError::ContextWindowExceeded {
            context_window: Some(window),
            ..
        } = &err
        {
            sess.context
                .lock()
                .await
                .learn_window(*window, "the server's overflow error");
        }
        return Err(TurnStop::Failed(ErrorEvent {
            message,
            kind: Some(err.kind()),
        }));
    }
}

/// How one sample failed: before the stream started (the client has applied the retry
/// rule already) or on an established stream (the engine's to retry).
enum SampleFailure {
    BeforeStream(ProviderError),
    InStream(ProviderError),
}

impl From<ProviderError> for SampleFailure {
    fn from(err: ProviderError) -> Self {
        Self::InStream(err)
    }
}

/// Starts the model request, announcing each retry the client makes on the way.
async fn start_stream(
    sess: &Session,
    sub_id: &str,
    prompt: &Prompt,
    cancel: &CancellationToken,
) -> Result<interpreter_model_client::ResponseStream, ProviderError> {
    let (notices, mut notice_rx) = tokio::sync::mpsc::unbounded_channel::<RetryNotice>();
    let request = sess
        .client
        .stream_with_notices(prompt, cancel, Some(&notices));
    tokio::pin!(request);
    let started = loop {
        tokio::select! {
            biased;
            Some(notice) = notice_rx.recv() => announce_retry(sess, sub_id, notice).await,
            started = &mut request => break started,
        }
    };
    while let Ok(notice) = notice_rx.try_recv() {
        announce_retry(sess, sub_id, notice).await;
    }
    started
}

async fn announce_retry(sess: &Session, sub_id: &str, notice: RetryNotice) {
    let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    spans::record_retry(notice.retry, notice.delay, error_type(&notice.error));
    sess.emit(
        sub_id,
        EventMsg::StreamError(StreamErrorEvent {
            message: format!(
                "{}; retrying in {:.1}s",
                notice.error,
                notice.delay.as_secs_f64()
            ),
            attempt: count(notice.retry),
            max_attempts: count(notice.max_retries),
        }),
    )
    .await;
}

/// One model request under its `chat` span: the request carries the span's context
/// (`traceparent`), and the span ends with the tokens, finish reasons and time to the
/// first chunk, or the error's class; the GenAI client metrics record it too.
async fn sample_once(
    sess: &Session,
    sub_id: &str,
    prompt: &Prompt,
    cancel: &CancellationToken,
    visible: bool,
) -> Result<Sample, SampleFailure> {
    let provider = sess.client.provider_id();
    let model = &sess.config.model;
    let cx = spans::start_chat(provider, model);
    let started = std::time::Instant::now();
    let mut facts = ChatFacts::default();
    let result = stream_sample(sess, sub_id, prompt, cancel, visible, &mut facts, started)
        .with_context(cx.clone())
        .await;
    let usage = facts.usage.as_ref().map(span_usage).unwrap_or_default();
    let error = match &result {
        Ok(_) => None,
        Err(SampleFailure::BeforeStream(err) | SampleFailure::InStream(err)) => {
            Some((error_type(err), err.to_string()))
        }
    };
    let finish_reasons = match &result {
        Ok(sample) if sample.cut_off.is_some() => vec!["length"],
        Ok(sample)
            if sample
                .items
                .iter()
                .any(|item| matches!(item, ResponseItem::FunctionCall { .. })) =>
        {
            vec!["tool_calls"]
        }
        Ok(_) => vec!["stop"],
        Err(_) => Vec::new(),
    };
    if let Ok(sample) = &result {
        spans::record_chat_content(
            &cx,
            || serde_json::to_string(&prompt.input).unwrap_or_default(),
            &serde_json::to_string(&sample.items).unwrap_or_default(),
        );
    }
    spans::end_chat(
        &cx,
        &spans::ChatEnd {
            usage,
            finish_reasons,
            response_id: facts.response_id.as_deref(),
            response_model: facts.response_model.as_deref(),
            time_to_first_chunk: facts.first_chunk,
            error_type: error.as_ref().map(|(kind, _)| *kind),
            error_message: error.as_ref().map(|(_, message)| message.as_str()),
        },
    );
    metrics::instruments().record_chat(
        provider,
        model,
        &usage,
        started.elapsed(),
        error.as_ref().map(|(kind, _)| *kind),
    );
    result
}

/// What a model request's span reports, learnt while its stream is read.
#[derive(Default)]
struct ChatFacts {
    usage: Option<interpreter_protocol::TokenUsage>,
    response_id: Option<String>,
    response_model: Option<String>,
    first_chunk: Option<Duration>,
}

fn span_usage(usage: &interpreter_protocol::TokenUsage) -> spans::Usage {
    spans::Usage {
        input_tokens: usage.input_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        cache_write_input_tokens: usage.cache_write_input_tokens,
        output_tokens: usage.output_tokens,
        reasoning_output_tokens: usage.reasoning_output_tokens,
    }
}

/// A failed model request's `error.type`: the engine's one classification of it.
fn error_type(err: &ProviderError) -> &'static str {
    match err.kind() {
        interpreter_protocol::ErrorKind::ContextWindowExceeded => "context_window_exceeded",
        interpreter_protocol::ErrorKind::Unauthorized => "unauthorized",
        interpreter_protocol::ErrorKind::BadRequest => "bad_request",
        interpreter_protocol::ErrorKind::ServerOverloaded => "server_overloaded",
        interpreter_protocol::ErrorKind::Connection => "connection",
        interpreter_protocol::ErrorKind::StreamIdle => "stream_idle",
        interpreter_protocol::ErrorKind::Internal => "internal",
    }
}

async fn stream_sample(
    sess: &Session,
    sub_id: &str,
    prompt: &Prompt,
    cancel: &CancellationToken,
    visible: bool,
    facts: &mut ChatFacts,
    started: std::time::Instant,
) -> Result<Sample, SampleFailure> {
    let request_bytes = sess.client.request_size(prompt);
    let mut stream = start_stream(sess, sub_id, prompt, cancel)
        .await
        .map_err(SampleFailure::BeforeStream)?;
    let mut items = Vec::new();
    let mut finished = Vec::new();
    // Plan mode: the answer's `<proposed_plan>` block streams as plan deltas, the rest
    // as message deltas. A retried attempt reuses the plan's id.
    let mut plan = (visible && sess.is_plan_turn()).then(|| PlanStream {
        splitter: PlanSplitter::default(),
        item_id: sess.next_plan_id(sub_id),
        done: false,
    });
    // A review's answer comes out once, as the review (`exited_review_mode`), not also
    // as agent messages; its reasoning and commands show as in any turn.
    let messages_visible = visible && !sess.is_review_turn();
    while let Some(event) = stream.next().await {
        let event = event?;
        if facts.first_chunk.is_none() {
            facts.first_chunk = Some(started.elapsed());
        }
        match event {
            ResponseEvent::Created => {}
            ResponseEvent::OutputTextDelta(delta) => match &mut plan {
                Some(plan) => {
                    let pieces = plan.splitter.push(&delta);
                    emit_pieces(sess, sub_id, &plan.item_id, pieces).await;
                }
                None if messages_visible => {
                    sess.emit(
                        sub_id,
                        EventMsg::AgentMessageDelta(DeltaEvent {
                            item_id: String::new(),
                            delta,
                        }),
                    )
                    .await;
                }
                None => {}
            },
            ResponseEvent::ReasoningDelta(delta) => {
                if visible {
                    sess.emit(
                        sub_id,
                        EventMsg::AgentReasoningDelta(DeltaEvent {
                            item_id: String::new(),
                            delta,
                        }),
                    )
                    .await;
                }
            }
            ResponseEvent::ReasoningSummaryPartAdded { summary_index } => {
                if visible {
                    let part = ReasoningSummaryPartEvent {
                        item_id: String::new(),
                        summary_index,
                    };
                    sess.emit(sub_id, EventMsg::AgentReasoningSummaryPartAdded(part))
                        .await;
                }
            }
            ResponseEvent::ReasoningSummaryDelta {
                summary_index,
                delta,
            } => {
                if visible {
                    let delta = ReasoningSummaryDeltaEvent {
                        item_id: String::new(),
                        summary_index,
                        delta,
                    };
                    sess.emit(sub_id, EventMsg::AgentReasoningSummaryDelta(delta))
                        .await;
                }
            }
            ResponseEvent::OutputItemDone(item) => {
                match &mut plan {
                    Some(plan) => finished.extend(plan.finished_item_events(&item)),
                    None if visible => finished.extend(finished_item_event(&item).filter(|msg| {
                        messages_visible || !matches!(msg, EventMsg::AgentMessage(_))
                    })),
                    None => {}
                }
                items.push(item);
            }
            ResponseEvent::Completed {
                token_usage,
                usage_estimated,
                cut_off,
                response_id,
                response_model,
            } => {
                facts.usage = Some(token_usage);
                facts.response_id = response_id;
                facts.response_model = response_model;
                // Finished messages and reasoning are announced only once the response
                // is known to be complete: an attempt that is cut off or retried must
                // not leave a persisted `agent_message` behind (deltas are transient).
                if let Some(plan) = &mut plan {
                    let pieces = plan.splitter.finish();
                    emit_pieces(sess, sub_id, &plan.item_id, pieces).await;
                    if plan.done {
                        sess.count_plan();
                    }
                }
                for msg in finished {
                    sess.emit(sub_id, msg).await;
                }
                if !usage_estimated && request_bytes > 0 && token_usage.input_tokens > 0 {
                    sess.context.lock().await.tokens_per_byte =
                        Some(token_usage.input_tokens as f64 / request_bytes as f64);
                }
                update_usage(sess, sub_id, token_usage).await;
                return Ok(Sample { items, cut_off });
            }
        }
    }
    // A stream that ends without `Completed` was cut off.
    Err(SampleFailure::InStream(ProviderError::Truncated {
        provider: sess.client.provider_id().to_string(),
        detail: "the response stream ended without a completion event".to_string(),
    }))
}

/// A Plan-mode answer's plan as it streams.
struct PlanStream {
    splitter: PlanSplitter,
    item_id: String,
    /// The answer's plan was taken from a finished message (at most one per answer).
    done: bool,
}

impl PlanStream {
    /// The events announcing a finished item: for the answer's first message with a
    /// plan block, the plan, then the message without the block.
    fn finished_item_events(&mut self, item: &ResponseItem) -> Vec<EventMsg> {
        let is_message = matches!(
            item,
            ResponseItem::Message {
                role: Role::Assistant,
                ..
            }
        );
        if !is_message || self.done {
            return finished_item_event(item).into_iter().collect();
        }
        let split = plan_mode::split_answer(&item.message_text().unwrap_or_default());
        let Some(text) = split.plan else {
            return finished_item_event(item).into_iter().collect();
        };
        self.done = true;
        let mut events = vec![EventMsg::ProposedPlan(ProposedPlanEvent {
            item_id: self.item_id.clone(),
            text,
        })];
        if !split.message.is_empty() {
            events.push(EventMsg::AgentMessage(AgentMessageEvent {
                item_id: String::new(),
                message: split.message,
            }));
        }
        events
    }
}

async fn emit_pieces(sess: &Session, sub_id: &str, plan_id: &str, pieces: Vec<Piece>) {
    for piece in pieces {
        let msg = match piece {
            Piece::Message(delta) => EventMsg::AgentMessageDelta(DeltaEvent {
                item_id: String::new(),
                delta,
            }),
            Piece::Plan(delta) => EventMsg::ProposedPlanDelta(ProposedPlanDeltaEvent {
                item_id: plan_id.to_string(),
                delta,
            }),
        };
        sess.emit(sub_id, msg).await;
    }
}

/// One finished model answer.
pub(crate) struct Sample {
    pub items: Vec<ResponseItem>,
    /// Set when the answer stopped early (output cap or a loop).
    pub cut_off: Option<CutOff>,
}

/// How often one turn may compact.
const MAX_COMPACTIONS_PER_TURN: u32 = 2;

/// Estimated bytes per token before the server has reported any usage. Four is the
/// usual figure for English and code; it overestimates on most open-model tokenizers,
/// which is the safe side for deciding to compact.
const DEFAULT_BYTES_PER_TOKEN: f64 = 4.0;

/// Share of the window (after reserving the output cap) a prompt may fill.
const PROMPT_BUDGET_RATIO: f64 = 0.9;

/// Default output cap of local providers: this share of the window, within bounds.
const LOCAL_OUTPUT_SHARE: u64 = 4;
const LOCAL_OUTPUT_MIN: u64 = 256;
const LOCAL_OUTPUT_MAX: u64 = 16_384;

/// A prompt's estimate and the budget it exceeds.
pub(crate) struct OverBudget {
    pub estimate: u64,
    pub budget: u64,
}

/// The prompt's size in tokens, estimated from its request bytes and, once the server
/// has reported usage, calibrated by the real ratio of tokens to bytes.
pub(crate) async fn estimate_tokens(sess: &Session, prompt: &Prompt) -> u64 {
    let bytes = sess.client.request_size(prompt) as f64;
    // Before any usage: a server that counts tokens (llama.cpp) calibrates the estimate
    // once, exactly. bytes/4 is off by 2x when the template drops the tools.
    let ask = {
        let mut context = sess.context.lock().await;
        context.tokens_per_byte.is_none() && std::mem::take(&mut context.server_counts_tokens)
    };
    if ask
        && bytes > 0.0
        && let Some(tokens) = sess.client.count_prompt_tokens(prompt).await
    {
        sess.context.lock().await.tokens_per_byte = Some(tokens as f64 / bytes);
    }
    let per_byte = sess
        .context
        .lock()
        .await
        .tokens_per_byte
        .unwrap_or(1.0 / DEFAULT_BYTES_PER_TOKEN);
    (bytes * per_byte).ceil() as u64
}

/// The prompt budget: the known window less the output cap, times the budget ratio.
pub(crate) async fn prompt_budget(sess: &Session, max_output: Option<u64>) -> Option<u64> {
    let window = sess.context.lock().await.window?;
    let reserved = max_output.unwrap_or(0).min(window / 2);
    Some(((window - reserved) as f64 * PROMPT_BUDGET_RATIO) as u64)
}

/// `Some` when the prompt is estimated over the budget of a known window.
pub(crate) async fn over_budget(sess: &Session, prompt: &Prompt) -> Option<OverBudget> {
    let budget = prompt_budget(sess, prompt.max_output_tokens).await?;
    let estimate = estimate_tokens(sess, prompt).await;
    (estimate > budget).then_some(OverBudget { estimate, budget })
}

/// The output cap sent with each request: the configured one, else (for servers on this
/// machine or a private network, where a looping small model would otherwise generate
/// until the context is full) a share of the known window.
pub(crate) async fn max_output_tokens(sess: &Session) -> Option<u64> {
    if let Some(cap) = sess.config.model_max_output_tokens {
        return Some(cap);
    }
    let local = sess
        .config
        .model_provider
        .text_tool_calls_enabled(&sess.config.model_provider_id)
        || sess.config.model_provider.is_local();
    let window = sess.context.lock().await.window?;
    local.then(|| (window / LOCAL_OUTPUT_SHARE).clamp(LOCAL_OUTPUT_MIN, LOCAL_OUTPUT_MAX))
}

/// The turn's error when the conversation still does not fit after compacting.
pub(crate) async fn overflow_error(
    sess: &Session,
    server_message: &str,
    compactions: u32,
) -> ErrorEvent {
    let context = sess.context.lock().await.clone();
    let window = match (context.window, context.window_source) {
        (Some(window), Some(source)) => format!(" ({window} tokens, from {source})"),
        (Some(window), None) => format!(" ({window} tokens)"),
        _ => String::new(),
    };
    let times = match compactions {
        0 => "without compacting".to_string(),
        1 => "even after compacting once".to_string(),
        2 => "even after compacting twice".to_string(),
        n => format!("even after compacting {n} times"),
    };
    ErrorEvent {
        message: format!(
            "the conversation does not fit the model's context window{window} {times}: {server_message}. \
             The failed message was taken out of the thread, so the next one can run. \
             Send a shorter message or start a new thread, or give the model more context \
             (llama.cpp `-c`, Ollama `num_ctx`, vLLM `--max-model-len`) and set `model_context_window` to match."
        ),
        kind: Some(ErrorKind::ContextWindowExceeded),
    }
}

/// What the user is told about an answer that was cut off.
fn cut_off_message(sess: &Session, cut_off: CutOff, prompt: &Prompt) -> String {
    match cut_off {
        CutOff::Length => match prompt.max_output_tokens {
            Some(cap) => format!(
                "the answer was cut off at the output limit ({cap} tokens, finish_reason \"length\"); raise `model_max_output_tokens` if answers need to be longer"
            ),
            None => format!(
                "the answer was cut off by model provider `{}` (finish_reason \"length\"): the server's output limit or the end of the context window",
                sess.client.provider_id()
            ),
        },
        CutOff::Loop => "the model kept repeating the same text; the stream was stopped and the repetition dropped".to_string(),
    }
}

/// Asks a self-hosted server (once per thread) for its context window and whether its
/// chat template renders tools. Returns the warning to show when tools cannot work.
async fn learn_from_server(sess: &Session) -> Option<String> {
    if std::mem::replace(&mut sess.context.lock().await.probed, true) {
        return None;
    }
    let facts = sess.client.server_facts().await;
    {
        let mut context = sess.context.lock().await;
        if let Some((window, source)) = facts.context_window {
            context.learn_window(window, source);
        }
        context.server_counts_tokens = facts.counts_tokens;
    }
    (facts.supports_tools == Some(false)).then(|| {
        format!(
            "model provider `{}` reports that the model's chat template cannot render tools (llama.cpp /props: chat_template_caps.supports_tools = false): the server drops the tools from every request, so the model can only answer in text. Restart llama-server with `--jinja`, and with `--chat-template-file FILE` naming a template with tool support if the model's own has none (see docs/providers.md)",
            sess.client.provider_id()
        )
    })
}

/// The event announcing a finished assistant message or reasoning block, if it says
/// anything.
fn finished_item_event(item: &ResponseItem) -> Option<EventMsg> {
    match item {
        ResponseItem::Message {
            role: Role::Assistant,
            ..
        } => {
            let message = item.message_text().unwrap_or_default();
            (!message.is_empty()).then_some(EventMsg::AgentMessage(AgentMessageEvent {
                item_id: String::new(),
                message,
            }))
        }
        ResponseItem::Reasoning {
            content, summary, ..
        } => {
            let content: Vec<String> = content
                .iter()
                .flatten()
                .map(|part| part.text().to_string())
                .filter(|text| !text.is_empty())
                .collect();
            let summary: Vec<String> = summary
                .iter()
                .map(|ReasoningSummary::SummaryText { text }| text.clone())
                .filter(|text| !text.is_empty())
                .collect();
            // Readers see the raw reasoning when the server sends it (open models);
            // otherwise the summary (Responses API models that keep raw text private).
            let mut text: String = content.concat();
            if text.trim().is_empty() {
                text = summary.join("\n");
            }
            (!text.trim().is_empty()).then_some(EventMsg::AgentReasoning(AgentReasoningEvent {
                item_id: String::new(),
                text,
                summary,
                content,
            }))
        }
        _ => None,
    }
}

/// Whether the last prompt filled most of the known context window.
async fn context_nearly_full(sess: &Session) -> bool {
    let Some(window) = sess.context.lock().await.window else {
        return false;
    };
    let last_input = sess.last_input_tokens.lock().await.unwrap_or(0);
    window > 0 && last_input as f64 >= window as f64 * compact::PROACTIVE_COMPACTION_RATIO
}

async fn update_usage(sess: &Session, sub_id: &str, last: TokenUsage) {
    *sess.last_input_tokens.lock().await = Some(last.input_tokens);
    let total = {
        let mut total = sess.total_usage.lock().await;
        total.add(&last);
        *total
    };
    sess.emit(
        sub_id,
        EventMsg::TokenCount(TokenCountEvent {
            info: Some(TokenUsageInfo {
                total_token_usage: total,
                last_token_usage: last,
                model_context_window: sess.context.lock().await.window,
            }),
        }),
    )
    .await;
}

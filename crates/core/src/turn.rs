//! One turn: sample the model, run the tools it calls, feed the results back, repeat until
//! the model answers without calling a tool.
//!
//! Invariants the turn keeps, whatever happens (error, interrupt, bad tool arguments):
//! every tool call recorded in history gets exactly one output, in order, with its id
//! unchanged; and the turn ends with exactly one of `task_complete` (after an `error` when
//! it failed) or `turn_aborted`.

use std::sync::Arc;
use std::time::Duration;

use interpreter_model_client::{Prompt, ProviderError, ResponseEvent};
use interpreter_protocol::{
    AgentMessageEvent, AgentReasoningEvent, DeltaEvent, ErrorEvent, ErrorKind, EventMsg,
    ReasoningContent, ReasoningSummary, ResponseItem, Role, StreamErrorEvent, TaskCompleteEvent,
    TaskStartedEvent, TokenCountEvent, TokenUsage, TokenUsageInfo, TurnAbortReason,
    TurnAbortedEvent, UserMessageEvent,
};
use tokio_util::sync::CancellationToken;

use crate::compact;
use crate::handlers::{self, ToolOutcome};
use crate::rollout::{RolloutItem, TurnContextItem};
use crate::session::Session;

/// Why a turn stopped early.
pub(crate) enum TurnStop {
    Interrupted,
    Failed(ErrorEvent),
}

/// Text recorded as the output of a tool call that never ran because the turn stopped.
const ABORTED_OUTPUT: &str = "aborted: the turn was interrupted before this tool call ran";

pub(crate) async fn run_turn(
    sess: Arc<Session>,
    sub_id: String,
    input: Vec<ResponseItem>,
    cancel: CancellationToken,
) {
    sess.emit(
        &sub_id,
        EventMsg::TaskStarted(TaskStartedEvent {
            turn_id: sub_id.clone(),
            model_context_window: sess.config.model_context_window,
        }),
    )
    .await;
    sess.persist(&[RolloutItem::TurnContext(TurnContextItem {
        turn_id: Some(sub_id.clone()),
        cwd: sess.config.cwd.clone(),
        approval_policy: sess.config.approval_policy,
        sandbox_policy: sess.config.sandbox_policy.clone(),
        model: sess.config.model.clone(),
        effort: sess.config.model_reasoning_effort,
    })])
    .await;
    record_user_input(&sess, &sub_id, input.clone()).await;

    match sampling_loop(&sess, &sub_id, &input, &cancel).await {
        Ok(last_agent_message) => {
            sess.emit(
                &sub_id,
                EventMsg::TaskComplete(TaskCompleteEvent {
                    turn_id: sub_id.clone(),
                    last_agent_message,
                    error: None,
                }),
            )
            .await;
        }
        Err(TurnStop::Interrupted) => {
            sess.emit(
                &sub_id,
                EventMsg::TurnAborted(TurnAbortedEvent {
                    turn_id: sub_id.clone(),
                    reason: TurnAbortReason::Interrupted,
                }),
            )
            .await;
        }
        Err(TurnStop::Failed(error)) => {
            let message = error.message.clone();
            sess.emit(&sub_id, EventMsg::Error(error)).await;
            sess.emit(
                &sub_id,
                EventMsg::TaskComplete(TaskCompleteEvent {
                    turn_id: sub_id.clone(),
                    last_agent_message: None,
                    error: Some(message),
                }),
            )
            .await;
        }
    }
}

async fn record_user_input(sess: &Session, sub_id: &str, input: Vec<ResponseItem>) {
    for item in &input {
        if let Some(message) = item.message_text() {
            sess.emit(sub_id, EventMsg::UserMessage(UserMessageEvent { message }))
                .await;
        }
    }
    sess.record_items(&input).await;
}

async fn sampling_loop(
    sess: &Arc<Session>,
    sub_id: &str,
    turn_input: &[ResponseItem],
    cancel: &CancellationToken,
) -> Result<Option<String>, TurnStop> {
    let mut last_agent_message = None;
    // One compaction per turn: if the summary plus the request still does not fit, more
    // summarising will not help, and the error is reported instead of looping.
    let mut compacted = false;
    loop {
        let steered = std::mem::take(&mut *sess.pending_input.lock().await);
        if !steered.is_empty() {
            record_user_input(sess, sub_id, steered).await;
        }
        sess.prepare_mcp(cancel).await;
        if cancel.is_cancelled() {
            return Err(TurnStop::Interrupted);
        }

        let prompt = Prompt {
            instructions: sess.instructions.clone(),
            input: sess.history.lock().await.clone(),
            tools: handlers::tool_specs(sess),
            output_schema: sess.config.output_schema.clone(),
            prompt_cache_key: Some(sess.thread_id.to_string()),
        };
        let output = match sample_with_retries(sess, sub_id, &prompt, cancel, true).await {
            Err(TurnStop::Failed(error))
                if error.kind == Some(ErrorKind::ContextWindowExceeded) && !compacted =>
            {
                compacted = true;
                compact::compact(sess, sub_id, turn_input, cancel).await?;
                continue;
            }
            result => result?,
        };
        sess.record_items(&output).await;
        if !compacted && context_nearly_full(sess).await {
            compacted = true;
            compact::compact(sess, sub_id, turn_input, cancel).await?;
        }

        let mut calls = Vec::new();
        for item in &output {
            match item {
                ResponseItem::Message {
                    role: Role::Assistant,
                    ..
                } => {
                    let text = item.message_text().unwrap_or_default();
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
            if sess.pending_input.lock().await.is_empty() {
                return Ok(last_agent_message);
            }
            continue;
        }

        let mut calls = calls.into_iter();
        while let Some((name, arguments, call_id)) = calls.next() {
            let outcome = if cancel.is_cancelled() {
                ToolOutcome::Aborted
            } else {
                handlers::handle_call(sess, sub_id, &name, &arguments, &call_id, cancel).await
            };
            match outcome {
                ToolOutcome::Output(output) => {
                    sess.record_items(&[ResponseItem::FunctionCallOutput { call_id, output }])
                        .await;
                }
                ToolOutcome::Aborted => {
                    let mut outputs = vec![ResponseItem::FunctionCallOutput {
                        call_id,
                        output: ABORTED_OUTPUT.to_string(),
                    }];
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

/// Sample once, retrying what [`ProviderError::is_retryable`] allows (a stream that
/// drops, goes idle, is cut off or completes empty) up to the provider's
/// `stream_max_retries`. Partial output of a failed attempt is discarded: nothing of it
/// reaches the history, so a failed turn leaves the thread resumable.
/// `visible` events (deltas, messages, reasoning) are emitted only for samples the user
/// should see; a compaction summary is not one.
pub(crate) async fn sample_with_retries(
    sess: &Session,
    sub_id: &str,
    prompt: &Prompt,
    cancel: &CancellationToken,
    visible: bool,
) -> Result<Vec<ResponseItem>, TurnStop> {
    let max_attempts =
        u32::try_from(sess.config.model_provider.stream_max_retries()).unwrap_or(u32::MAX);
    let mut attempt = 0u32;
    loop {
        match sample_once(sess, sub_id, prompt, cancel, visible).await {
            Ok(items) => return Ok(items),
            Err(_) if cancel.is_cancelled() => return Err(TurnStop::Interrupted),
            Err(err) if err.is_retryable() && attempt < max_attempts => {
                attempt += 1;
                sess.emit(
                    sub_id,
                    EventMsg::StreamError(StreamErrorEvent {
                        message: format!("{err}; retrying ({attempt}/{max_attempts})"),
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
            }
            Err(err) => {
                return Err(TurnStop::Failed(ErrorEvent {
                    message: err.final_message(attempt + 1),
                    kind: Some(err.kind()),
                }));
            }
        }
    }
}

async fn sample_once(
    sess: &Session,
    sub_id: &str,
    prompt: &Prompt,
    cancel: &CancellationToken,
    visible: bool,
) -> Result<Vec<ResponseItem>, ProviderError> {
    let mut stream = sess.client.stream(prompt, cancel).await?;
    let mut items = Vec::new();
    let mut finished = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event?;
        if !visible {
            match event {
                ResponseEvent::OutputItemDone(item) => items.push(item),
                ResponseEvent::Completed { token_usage, .. } => {
                    update_usage(sess, sub_id, token_usage).await;
                    return Ok(items);
                }
                _ => {}
            }
            continue;
        }
        match event {
            ResponseEvent::Created => {}
            ResponseEvent::OutputTextDelta(delta) => {
                sess.emit(sub_id, EventMsg::AgentMessageDelta(DeltaEvent { delta }))
                    .await;
            }
            ResponseEvent::ReasoningDelta(delta) => {
                sess.emit(sub_id, EventMsg::AgentReasoningDelta(DeltaEvent { delta }))
                    .await;
            }
            ResponseEvent::OutputItemDone(item) => {
                finished.extend(finished_item_event(&item));
                items.push(item);
            }
            ResponseEvent::Completed { token_usage, .. } => {
                // Finished messages and reasoning are announced only once the response
                // is known to be complete: an attempt that is cut off or retried must
                // not leave a persisted `agent_message` behind (deltas are transient).
                for msg in finished {
                    sess.emit(sub_id, msg).await;
                }
                update_usage(sess, sub_id, token_usage).await;
                return Ok(items);
            }
        }
    }
    // A stream that ends without `Completed` was cut off.
    Err(ProviderError::Truncated {
        provider: sess.client.provider_id().to_string(),
        detail: "the response stream ended without a completion event".to_string(),
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
            (!message.is_empty()).then_some(EventMsg::AgentMessage(AgentMessageEvent { message }))
        }
        ResponseItem::Reasoning {
            content, summary, ..
        } => {
            // Raw reasoning when the server sends it (open models); otherwise the summary
            // (Responses API models that keep raw text private).
            let mut text: String = content
                .iter()
                .flatten()
                .map(ReasoningContent::text)
                .collect();
            if text.trim().is_empty() {
                text = summary
                    .iter()
                    .map(|ReasoningSummary::SummaryText { text }| text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
            }
            (!text.trim().is_empty())
                .then_some(EventMsg::AgentReasoning(AgentReasoningEvent { text }))
        }
        _ => None,
    }
}

/// Whether the last prompt filled most of the configured context window.
async fn context_nearly_full(sess: &Session) -> bool {
    let Some(window) = sess.config.model_context_window else {
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
                model_context_window: sess.config.model_context_window,
            }),
        }),
    )
    .await;
}

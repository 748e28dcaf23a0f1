//! Compaction: when the conversation no longer fits the model's context window, the model
//! summarises it and the history restarts from that summary.
//!
//! Local models often run with small windows, and a turn that dies on "context length
//! exceeded" loses the user's work. So a request estimated over the window's budget
//! before it is sent, a request the server rejects for length, or a prompt that filled
//! most of the window triggers compaction (at most twice per turn): the model is asked,
//! without tools, to summarise the conversation; the history is replaced by the initial
//! context, that summary, and the current request; and the checkpoint is written to the
//! rollout so a resumed thread continues from it.

use std::sync::Arc;

use interpreter_model_client::Prompt;
use interpreter_protocol::{
    ContextCompactedEvent, ErrorKind, EventMsg, HookEventName, ResponseItem, Role,
};
use tokio_util::sync::CancellationToken;

use crate::project_doc;
use crate::session::Session;
use crate::turn::{self, TurnStop};

/// Used when `compact_prompt` is not configured.
pub(crate) const DEFAULT_COMPACT_PROMPT: &str = "The conversation is about to be cut to fit the \
context window. Write a summary that lets you continue the work without the earlier messages: \
the user's goal and constraints, what has been done (commands run, files created or changed, \
with paths), what was learned, what is left to do, and anything the user asked you to \
remember. Be specific and brief. Reply with the summary only.";

const SUMMARY_PREFIX: &str = "Summary of the conversation so far (earlier messages were compacted to fit the context window):";

/// How often the summarisation request may itself be too long before giving up; each
/// round drops the older half of what is left.
const MAX_TRIM_ROUNDS: usize = 4;

/// Share of the known context window that a prompt may fill before the next request is
/// compacted first.
pub(crate) const PROACTIVE_COMPACTION_RATIO: f64 = 0.9;

/// Summarises the conversation under a `compaction` span (its model request is a `chat`
/// child), counted by trigger: `manual` when it is the turn (`Op::Compact`), else `auto`.
pub(crate) async fn compact(
    sess: &Arc<Session>,
    sub_id: &str,
    turn_input: &[ResponseItem],
    cancel: &CancellationToken,
) -> Result<(), TurnStop> {
    use opentelemetry::trace::FutureExt as _;
    let trigger = if turn_input.is_empty() {
        "manual"
    } else {
        "auto"
    };
    let cx = interpreter_telemetry::spans::start_internal(
        "compaction",
        false,
        vec![opentelemetry::KeyValue::new(
            "interpreter.compaction.trigger",
            trigger,
        )],
    );
    let result = async {
        let before = compaction_hooks(sess, sub_id, HookEventName::PreCompact, trigger).await;
        if let Some(reason) = before {
            return Err(TurnStop::Failed(interpreter_protocol::ErrorEvent {
                message: format!("compaction stopped by a PreCompact hook: {reason}"),
                kind: None,
            }));
        }
        summarise(sess, sub_id, turn_input, cancel).await?;
        if let Some(reason) =
            compaction_hooks(sess, sub_id, HookEventName::PostCompact, trigger).await
        {
            return Err(TurnStop::Failed(interpreter_protocol::ErrorEvent {
                message: format!("the turn was stopped by a PostCompact hook: {reason}"),
                kind: None,
            }));
        }
        // What SessionStart hooks added may be summarised away: they run again.
        sess.queue_session_start("compact");
        Ok(())
    }
    .with_context(cx.clone())
    .await;
    let error = match &result {
        Ok(()) => None,
        Err(TurnStop::Interrupted) => Some("interrupted"),
        Err(TurnStop::Failed(_)) => Some("failed"),
    };
    interpreter_telemetry::spans::end_internal(&cx, Vec::new(), error);
    if result.is_ok() {
        interpreter_telemetry::metrics::instruments().record_compaction(trigger);
    }
    result
}

/// Runs the compaction hooks of `event`; `Some(reason)` when one asked to stop.
async fn compaction_hooks(
    sess: &Arc<Session>,
    sub_id: &str,
    event: HookEventName,
    trigger: &str,
) -> Option<String> {
    crate::hook_runs::run_event(
        sess,
        sub_id,
        crate::hook_runs::Occurrence {
            event,
            targets: &[trigger],
            fields: serde_json::json!({ "trigger": trigger }),
            call_id: None,
        },
    )
    .await
    .stopped
}

async fn summarise(
    sess: &Arc<Session>,
    sub_id: &str,
    turn_input: &[ResponseItem],
    cancel: &CancellationToken,
) -> Result<(), TurnStop> {
    let history = sess.history.lock().await.clone();
    let items_before = history.len();
    let instruction = sess
        .config
        .compact_prompt
        .clone()
        .unwrap_or_else(|| DEFAULT_COMPACT_PROMPT.to_string());

    let mut conversation: &[ResponseItem] = &history;
    let mut summary = None;
    let max_output_tokens = turn::max_output_tokens(sess).await;
    for _ in 0..=MAX_TRIM_ROUNDS {
        let mut input = conversation.to_vec();
        input.push(ResponseItem::user_text(instruction.clone()));
        let prompt = Prompt {
            instructions: sess.instructions.clone(),
            input,
            tools: Vec::new(),
            output_schema: None,
            prompt_cache_key: Some(sess.thread_id.to_string()),
            max_output_tokens,
        };
        // A summarising request estimated over the budget is trimmed before it is sent.
        if conversation.len() > 1 && turn::over_budget(sess, &prompt).await.is_some() {
            conversation = &conversation[conversation.len() / 2..];
            continue;
        }
        match turn::sample_with_retries(sess, sub_id, &prompt, cancel, false).await {
            Ok(sample) => {
                summary = Some(last_assistant_text(&sample.items));
                break;
            }
            Err(TurnStop::Failed(error))
                if error.kind == Some(ErrorKind::ContextWindowExceeded)
                    && conversation.len() > 1 =>
            {
                conversation = &conversation[conversation.len() / 2..];
            }
            Err(TurnStop::Failed(error))
                if error.kind == Some(ErrorKind::ContextWindowExceeded) =>
            {
                return Err(TurnStop::Failed(
                    turn::overflow_error(sess, &error.message, 1).await,
                ));
            }
            Err(stop) => return Err(stop),
        }
    }
    let Some(summary) = summary.filter(|s| !s.trim().is_empty()) else {
        return Err(TurnStop::Failed(
            turn::overflow_error(sess, "summarising the conversation gave nothing", 1).await,
        ));
    };

    // Its warnings (a truncated AGENTS.md) were shown when the thread started.
    let mut replacement = project_doc::initial_context(&sess.config, &sess.skills).items;
    replacement.push(ResponseItem::user_text(format!(
        "{SUMMARY_PREFIX}\n\n{summary}"
    )));
    // What a failed turn rolls back to from now on: the compacted history without this
    // turn's input.
    *sess.turn_base_len.lock().await = replacement.len();
    replacement.extend(turn_input.iter().cloned());
    let items_after = replacement.len();
    sess.replace_history(summary, replacement).await;
    sess.emit(
        sub_id,
        EventMsg::ContextCompacted(ContextCompactedEvent {
            item_id: String::new(),
            items_before,
            items_after,
        }),
    )
    .await;
    Ok(())
}

fn last_assistant_text(items: &[ResponseItem]) -> String {
    items
        .iter()
        .rev()
        .find_map(|item| match item {
            ResponseItem::Message {
                role: Role::Assistant,
                ..
            } => item.message_text(),
            _ => None,
        })
        .unwrap_or_default()
}

//! The spans of a turn, in the OpenTelemetry GenAI semantic conventions:
//!
//! ```text
//! invoke_agent interpreter         one per turn (child of the caller's span)
//! ├── chat MODEL                   one per model request (retries are its events)
//! ├── execute_tool TOOL            one per tool call
//! │   └── approval                 while a person decides
//! ├── compaction
//! └── mcp.call SERVER              (inside execute_tool for an MCP tool)
//! ```
//!
//! Spans are made with the OpenTelemetry API directly rather than bridged from `tracing`:
//! a turn's parent is the caller's remote context, not the span that happens to be
//! current in the task that starts it, and most attributes are known only at the end.
//! Each `start_*` returns the [`Context`] holding the new span; run the work under it
//! (`FutureExt::with_context`) so children and outgoing requests find it, then pass it to
//! the matching `end_*`. Content (prompts, answers, tool arguments and output) is added
//! only when [`crate::capture_content`] is on.

use std::borrow::Cow;
use std::sync::OnceLock;
use std::time::Duration;

use crate::genai as semconv;
use opentelemetry::trace::{SpanBuilder, SpanKind, Status, TraceContextExt as _};
use opentelemetry::{Context, InstrumentationScope, KeyValue, global};

use crate::SCOPE;

/// Which front end this process serves (`exec`, `mcp-server`, `app-server`, `acp`,
/// `chat`), set once by the binary.
static FRONT_END: OnceLock<&'static str> = OnceLock::new();

pub fn set_front_end(name: &'static str) {
    let _ = FRONT_END.set(name);
}

pub fn front_end() -> &'static str {
    FRONT_END.get().copied().unwrap_or("library")
}

fn tracer() -> global::BoxedTracer {
    let scope = InstrumentationScope::builder(SCOPE)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    global::tracer_with_scope(scope)
}

/// The agent's name in `gen_ai.agent.name` and the `invoke_agent` span's name.
pub const AGENT_NAME: &str = "interpreter";

/// What a turn is about, known when it starts.
#[derive(Debug, Clone)]
pub struct TurnStart<'a> {
    pub thread_id: &'a str,
    pub turn_id: &'a str,
    /// `turn`, `review`, `compact` or `shell` (a command the user typed).
    pub kind: &'static str,
    pub provider: &'a str,
    pub model: &'a str,
    pub sandbox: &'a str,
    pub approval_policy: &'a str,
}

/// How a turn ended (the `interpreter.turn.outcome` attribute and the turns metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    Completed,
    Interrupted,
    Failed,
}

impl TurnOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnOutcome::Completed => "completed",
            TurnOutcome::Interrupted => "interrupted",
            TurnOutcome::Failed => "failed",
        }
    }
}

/// Token counts as the model server reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_output_tokens: u64,
}

fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn usage_attributes(usage: &Usage) -> [KeyValue; 5] {
    [
        KeyValue::new(semconv::GEN_AI_USAGE_INPUT_TOKENS, int(usage.input_tokens)),
        KeyValue::new(
            semconv::GEN_AI_USAGE_OUTPUT_TOKENS,
            int(usage.output_tokens),
        ),
        KeyValue::new(
            semconv::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
            int(usage.cached_input_tokens),
        ),
        KeyValue::new(
            semconv::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
            int(usage.cache_write_input_tokens),
        ),
        KeyValue::new(
            semconv::GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
            int(usage.reasoning_output_tokens),
        ),
    ]
}

/// Starts a turn's `invoke_agent` span under `parent` (see
/// [`crate::context::parent_context`]).
pub fn start_turn(parent: &Context, turn: &TurnStart<'_>) -> Context {
    let span = SpanBuilder::from_name(format!("invoke_agent {AGENT_NAME}"))
        .with_kind(SpanKind::Internal)
        .with_attributes([
            KeyValue::new(semconv::GEN_AI_OPERATION_NAME, "invoke_agent"),
            KeyValue::new(semconv::GEN_AI_AGENT_NAME, AGENT_NAME),
            KeyValue::new(semconv::GEN_AI_CONVERSATION_ID, turn.thread_id.to_string()),
            KeyValue::new(semconv::GEN_AI_PROVIDER_NAME, turn.provider.to_string()),
            KeyValue::new(semconv::GEN_AI_REQUEST_MODEL, turn.model.to_string()),
            KeyValue::new("interpreter.turn.id", turn.turn_id.to_string()),
            KeyValue::new("interpreter.turn.kind", turn.kind),
            KeyValue::new("interpreter.front_end", front_end()),
            KeyValue::new("interpreter.sandbox", turn.sandbox.to_string()),
            KeyValue::new(
                "interpreter.approval_policy",
                turn.approval_policy.to_string(),
            ),
        ])
        .start_with_context(&tracer(), parent);
    parent.with_span(span)
}

/// Ends the turn's span with its outcome and the tokens the whole turn used.
pub fn end_turn(cx: &Context, outcome: TurnOutcome, usage: &Usage, error: Option<&str>) {
    let span = cx.span();
    span.set_attribute(KeyValue::new("interpreter.turn.outcome", outcome.as_str()));
    for attribute in usage_attributes(usage) {
        span.set_attribute(attribute);
    }
    match (outcome, error) {
        (TurnOutcome::Failed, error) => {
            span.set_attribute(KeyValue::new("error.type", "turn_failed"));
            span.set_status(Status::error(
                error.unwrap_or("the turn failed").to_string(),
            ));
        }
        _ => span.set_status(Status::Ok),
    }
    span.end();
}

/// Starts a `chat` span (one model request, with its retries) under the current context.
pub fn start_chat(provider: &str, model: &str) -> Context {
    start_internal(
        format!("chat {model}"),
        true,
        vec![
            KeyValue::new(semconv::GEN_AI_OPERATION_NAME, "chat"),
            KeyValue::new(semconv::GEN_AI_PROVIDER_NAME, provider.to_string()),
            KeyValue::new(semconv::GEN_AI_REQUEST_MODEL, model.to_string()),
        ],
    )
}

/// How a model request ended.
#[derive(Debug, Clone, Default)]
pub struct ChatEnd<'a> {
    pub usage: Usage,
    /// `stop`, `length`, `tool_calls`, ... (empty when the request failed).
    pub finish_reasons: Vec<&'static str>,
    pub response_id: Option<&'a str>,
    /// The model the server says answered.
    pub response_model: Option<&'a str>,
    pub time_to_first_chunk: Option<Duration>,
    /// The error's class (`error.type`), when the request failed.
    pub error_type: Option<&'a str>,
    pub error_message: Option<&'a str>,
}

pub fn end_chat(cx: &Context, end: &ChatEnd<'_>) {
    let span = cx.span();
    for attribute in usage_attributes(&end.usage) {
        span.set_attribute(attribute);
    }
    if !end.finish_reasons.is_empty() {
        let reasons: Vec<opentelemetry::StringValue> = end
            .finish_reasons
            .iter()
            .map(|reason| (*reason).into())
            .collect();
        span.set_attribute(KeyValue::new(
            semconv::GEN_AI_RESPONSE_FINISH_REASONS,
            opentelemetry::Value::Array(reasons.into()),
        ));
    }
    if let Some(id) = end.response_id {
        span.set_attribute(KeyValue::new(semconv::GEN_AI_RESPONSE_ID, id.to_string()));
    }
    if let Some(model) = end.response_model {
        span.set_attribute(KeyValue::new(
            semconv::GEN_AI_RESPONSE_MODEL,
            model.to_string(),
        ));
    }
    if let Some(first) = end.time_to_first_chunk {
        span.set_attribute(KeyValue::new(
            semconv::GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
            first.as_secs_f64(),
        ));
    }
    if let Some(error_type) = end.error_type {
        span.set_attribute(KeyValue::new("error.type", error_type.to_string()));
        span.set_status(Status::error(
            end.error_message.unwrap_or(error_type).to_string(),
        ));
    }
    span.end();
}

/// Marks a retry of the current model request (an event on its `chat` span).
pub fn record_retry(attempt: u64, delay: Duration, reason: &str) {
    Context::current().span().add_event(
        "retry",
        vec![
            KeyValue::new("interpreter.retry.attempt", int(attempt)),
            KeyValue::new("interpreter.retry.delay_s", delay.as_secs_f64()),
            KeyValue::new("error.type", reason.to_string()),
        ],
    );
}

/// Adds the request's and answer's content to a `chat` span, when content capture is on.
pub fn record_chat_content(cx: &Context, input: impl FnOnce() -> String, output: &str) {
    if !crate::capture_content() {
        return;
    }
    let span = cx.span();
    span.set_attribute(KeyValue::new(semconv::GEN_AI_INPUT_MESSAGES, input()));
    span.set_attribute(KeyValue::new(
        semconv::GEN_AI_OUTPUT_MESSAGES,
        output.to_string(),
    ));
}

/// Starts an `execute_tool` span under the current context.
pub fn start_tool(name: &str, call_id: &str) -> Context {
    start_internal(
        format!("execute_tool {name}"),
        false,
        vec![
            KeyValue::new(semconv::GEN_AI_OPERATION_NAME, "execute_tool"),
            KeyValue::new(semconv::GEN_AI_TOOL_NAME, name.to_string()),
            KeyValue::new(semconv::GEN_AI_TOOL_CALL_ID, call_id.to_string()),
            KeyValue::new(semconv::GEN_AI_TOOL_TYPE, "function"),
        ],
    )
}

/// How a tool call ended.
#[derive(Debug, Clone, Default)]
pub struct ToolEnd<'a> {
    /// `completed` (the model got a result, which may report a failure) or `stopped`
    /// (the turn stops: refused, aborted or interrupted).
    pub outcome: &'a str,
    /// Content, exported only when capture is on.
    pub arguments: Option<&'a str>,
    pub result: Option<&'a str>,
}

/// A command's end, on the current (`execute_tool`) span.
pub fn record_command_end(exit_code: Option<i32>, sandbox_denied: bool) {
    let cx = Context::current();
    let span = cx.span();
    if let Some(code) = exit_code {
        span.set_attribute(KeyValue::new("process.exit.code", i64::from(code)));
    }
    if sandbox_denied {
        span.set_attribute(KeyValue::new("interpreter.sandbox.denied", true));
    }
}

pub fn end_tool(cx: &Context, end: &ToolEnd<'_>) {
    let span = cx.span();
    span.set_attribute(KeyValue::new(
        "interpreter.tool.outcome",
        end.outcome.to_string(),
    ));
    if crate::capture_content() {
        if let Some(arguments) = end.arguments {
            span.set_attribute(KeyValue::new(
                semconv::GEN_AI_TOOL_CALL_ARGUMENTS,
                arguments.to_string(),
            ));
        }
        if let Some(result) = end.result {
            span.set_attribute(KeyValue::new(
                semconv::GEN_AI_TOOL_CALL_RESULT,
                result.to_string(),
            ));
        }
    }
    span.end();
}

/// Starts an internal span (`approval`, `compaction`, `store.write`, ...) or, with
/// `client`, an outgoing call (`mcp.call SERVER`), under the current context.
pub fn start_internal(
    name: impl Into<Cow<'static, str>>,
    client: bool,
    attributes: Vec<KeyValue>,
) -> Context {
    let parent = Context::current();
    let span = SpanBuilder::from_name(name)
        .with_kind(if client {
            SpanKind::Client
        } else {
            SpanKind::Internal
        })
        .with_attributes(attributes)
        .start_with_context(&tracer(), &parent);
    parent.with_span(span)
}

/// Ends a span from [`start_internal`], with attributes learnt on the way and, for a
/// failure, its error class.
pub fn end_internal(cx: &Context, attributes: Vec<KeyValue>, error: Option<&str>) {
    let span = cx.span();
    for attribute in attributes {
        span.set_attribute(attribute);
    }
    if let Some(error) = error {
        span.set_attribute(KeyValue::new("error.type", error.to_string()));
        span.set_status(Status::error(error.to_string()));
    }
    span.end();
}

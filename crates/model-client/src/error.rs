//! The typed error every provider call ends in, worded so a user can act on it.

use std::time::Duration;

use interpreter_protocol::ErrorKind;

/// Why a request to a model provider failed. Each message is a one-liner naming the
/// provider and what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error(
        "model provider `{provider}` needs an API key: set the environment variable {env_key}{}",
        instructions.as_deref().map(|text| format!(" ({text})")).unwrap_or_default()
    )]
    MissingApiKey {
        provider: String,
        env_key: String,
        instructions: Option<String>,
    },

    #[error("model provider `{provider}` is misconfigured: {message}")]
    Config { provider: String, message: String },

    #[error("model provider `{provider}` returned {status} Unauthorized: {hint}")]
    Unauthorized {
        provider: String,
        status: u16,
        /// What the server said, when it said anything.
        message: String,
        /// Which credential to check.
        hint: String,
    },

    #[error("model provider `{provider}` rejected the request ({status}): {message}")]
    BadRequest {
        provider: String,
        status: u16,
        message: String,
    },

    /// The prompt does not fit the model's context window, as the server said (by status,
    /// error `type`/`code` or message; see [`context_overflow`]).
    #[error(
        "model provider `{provider}` says the conversation exceeds the model's context window{}: {message}",
        context_window.map(|n| format!(" ({n} tokens)")).unwrap_or_default()
    )]
    ContextWindowExceeded {
        provider: String,
        message: String,
        /// The window size, when the server named it (llama.cpp `n_ctx`, "maximum context
        /// length is N").
        context_window: Option<u64>,
        /// The prompt size the server counted, when it said.
        prompt_tokens: Option<u64>,
    },

    #[error(
        "model provider `{provider}` kept failing with HTTP {status} after {attempts} attempts: {message}"
    )]
    Retryable {
        provider: String,
        status: u16,
        message: String,
        attempts: u64,
    },

    #[error("could not reach model provider `{provider}`: {message}")]
    Connection { provider: String, message: String },

    #[error(
        "model provider `{provider}` sent nothing for {}s while streaming (stream_idle_timeout_ms)",
        idle.as_secs_f64()
    )]
    StreamIdle { provider: String, idle: Duration },

    #[error("model provider `{provider}` broke the response stream: {message}")]
    Stream { provider: String, message: String },

    /// The response completed without text, tool calls or reasoning. Ending the turn with
    /// "" would look like success to every front end, so it is a failure worth retrying.
    #[error(
        "model provider `{provider}` returned an empty answer (no text, no tool call, no reasoning)"
    )]
    EmptyAnswer { provider: String },

    /// The stream ended without a finish reason (Chat Completions) or completion event
    /// (Responses): whatever arrived is a cut-off answer.
    #[error("model provider `{provider}`: the stream ended before the model finished ({detail})")]
    Truncated { provider: String, detail: String },

    /// A `200` stream that closed without a single event (llama-cpp-python does this when
    /// the prompt overflows a streamed request). One non-streaming probe of the same
    /// request found no other explanation; `detail` says what the probe saw.
    #[error("model provider `{provider}` closed the stream without sending anything ({detail})")]
    EmptyStream { provider: String, detail: String },

    #[error("the model request was cancelled")]
    Cancelled,
}

impl ProviderError {
    /// The coarse category front ends report next to the message.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::MissingApiKey { .. } | Self::Unauthorized { .. } => ErrorKind::Unauthorized,
            Self::Config { .. } | Self::BadRequest { .. } => ErrorKind::BadRequest,
            Self::ContextWindowExceeded { .. } => ErrorKind::ContextWindowExceeded,
            Self::Retryable { .. } => ErrorKind::ServerOverloaded,
            Self::Connection { .. } => ErrorKind::Connection,
            Self::StreamIdle { .. } => ErrorKind::StreamIdle,
            Self::Stream { .. }
            | Self::EmptyAnswer { .. }
            | Self::EmptyStream { .. }
            | Self::Truncated { .. }
            | Self::Cancelled => ErrorKind::Internal,
        }
    }

    /// Whether the engine may re-issue the whole sampling request: the one retry rule
    /// for answers. Only failures of an established stream qualify (broken, idle, cut off,
    /// or complete but empty); request-level failures (connection, 429, 5xx) were already
    /// retried with backoff inside the client, and retrying them again would multiply the
    /// wait without a new chance of success.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Stream { .. }
                | Self::StreamIdle { .. }
                | Self::EmptyAnswer { .. }
                | Self::EmptyStream { .. }
                | Self::Truncated { .. }
        )
    }

    /// The message a turn fails with after `attempts` tries ended in this error. For
    /// answers that were empty or cut off every time, it says so plainly, because "the
    /// model returned nothing" is the whole story.
    pub fn final_message(&self, attempts: u32) -> String {
        let times = if attempts == 1 {
            "once".to_string()
        } else {
            format!("{attempts} times")
        };
        match self {
            Self::EmptyAnswer { provider } => format!(
                "the model returned an empty answer {times} (model provider `{provider}` sent no text, no tool call and no reasoning)"
            ),
            Self::Truncated { provider, detail } => format!(
                "the stream ended before the model finished ({times}; model provider `{provider}`: {detail})"
            ),
            _ if attempts > 1 => format!("{self} (after {attempts} attempts)"),
            _ => self.to_string(),
        }
    }
}

/// What a server said about a prompt that does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Overflow {
    pub message: String,
    pub context_window: Option<u64>,
    pub prompt_tokens: Option<u64>,
}

impl Overflow {
    pub(crate) fn into_error(self, provider: &str) -> ProviderError {
        ProviderError::ContextWindowExceeded {
            provider: provider.to_string(),
            message: self.message,
            context_window: self.context_window,
            prompt_tokens: self.prompt_tokens,
        }
    }
}

/// The error object of an error body, wherever the server family puts it: OpenAI style
/// `{"error":{...}}`, vLLM's older top-level `{"object":"error","message":...}`, or
/// `{"error":"text"}`. Only this quirk boundary looks at untyped JSON.
#[derive(Debug, Default, serde::Deserialize)]
struct ErrorFields {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// A string (`"context_length_exceeded"`, Z.AI's `"1261"`) or a number (`400`).
    #[serde(default)]
    code: Option<serde_json::Value>,
    /// llama.cpp's `exceed_context_size_error` carries both counts.
    #[serde(default)]
    n_ctx: Option<u64>,
    #[serde(default)]
    n_prompt_tokens: Option<u64>,
}

fn error_fields(body: &str) -> ErrorFields {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
        return ErrorFields {
            message: Some(body.trim().to_string()).filter(|m| !m.is_empty()),
            ..Default::default()
        };
    };
    let object = match value.get("error") {
        Some(serde_json::Value::String(text)) => {
            return ErrorFields {
                message: Some(text.clone()),
                ..Default::default()
            };
        }
        Some(error) => error.clone(),
        None => value,
    };
    serde_json::from_value(object).unwrap_or_default()
}

/// Error `type`/`code` values that mean "prompt too long", per server family:
/// llama.cpp `exceed_context_size_error`; OpenAI and llama-cpp-python
/// `context_length_exceeded`; Z.AI (GLM) business code `1261` ("Prompt exceeds max
/// length").
const OVERFLOW_CODES: &[&str] = &[
    "exceed_context_size_error",
    "context_length_exceeded",
    "string_above_max_length",
    "1261",
];

/// Message fragments that mean "prompt too long", per server family (lower case):
/// vLLM / OpenAI / DeepSeek / llama-cpp-python "maximum context length is N tokens";
/// llama.cpp "exceeds the available context size"; OpenAI Responses "exceeds the context
/// window"; Moonshot "exceeded model token limit"; Z.AI "prompt exceeds max length";
/// DashScope "range of input length should be [1, N]"; Ollama (native API, and
/// embeddings) "input length exceeds the context length"; Anthropic-style "prompt is too
/// long"; vLLM's newer "longer than the maximum model length".
const OVERFLOW_PHRASES: &[&str] = &[
    "maximum context length",
    "context length exceeded",
    "context_length_exceeded",
    "exceeds the available context size",
    "exceeds the context",
    "context window",
    "context size",
    "exceeded model token limit",
    "max length exceeded",
    "prompt exceeds max length",
    "range of input length should be",
    "input length exceeds",
    "prompt is too long",
    "prompt too long",
    "too many tokens",
    "maximum model length",
    "maximum prompt length",
];

/// Whether an error body (status 400/413, or a stream's error event) says the prompt
/// does not fit the context window, with the sizes when the server named them. The one
/// place that knows every server family's way of saying so.
pub(crate) fn context_overflow(status: u16, body: &str) -> Option<Overflow> {
    if !matches!(status, 400 | 413 | 422 | 500) {
        return None;
    }
    let fields = error_fields(body);
    let code = match &fields.code {
        Some(serde_json::Value::String(code)) => code.to_lowercase(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let kind = fields.kind.as_deref().unwrap_or("").to_lowercase();
    let message = fields.message.unwrap_or_default();
    let lower = message.to_lowercase();
    let by_code = OVERFLOW_CODES.iter().any(|c| *c == code || *c == kind);
    let by_message = OVERFLOW_PHRASES.iter().any(|p| lower.contains(p));
    // A 500 counts only when the words are unmistakable (vLLM behind some gateways).
    let matched = if status == 500 {
        by_message
    } else {
        by_code || by_message
    };
    if !matched {
        return None;
    }
    let context_window = fields.n_ctx.or_else(|| window_from_message(&lower));
    let prompt_tokens = fields
        .n_prompt_tokens
        .or_else(|| prompt_tokens_from_message(&lower));
    let message = if message.trim().is_empty() {
        if code.is_empty() { kind } else { code }
    } else {
        message
    };
    Some(Overflow {
        message,
        context_window,
        prompt_tokens,
    })
}

/// The number right after the first of `markers` found in `text`.
fn number_after(text: &str, markers: &[&str]) -> Option<u64> {
    markers.iter().find_map(|marker| {
        let start = text.find(marker)? + marker.len();
        let digits: String = text[start..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

fn window_from_message(lower: &str) -> Option<u64> {
    number_after(
        lower,
        &[
            "maximum context length is",
            "available context size (",
            "context window of",
            "maximum model length of",
            "model token limit:",
            "max length:",
            "range of input length should be [1,",
            "maximum prompt length is",
        ],
    )
}

fn prompt_tokens_from_message(lower: &str) -> Option<u64> {
    number_after(
        lower,
        &[
            "request (",
            "you requested",
            "resulted in",
            "requested:",
            "request contains",
        ],
    )
}

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

    #[error(
        "model provider `{provider}` says the conversation exceeds the model's context window: {message}; start a new thread or compact the history"
    )]
    ContextWindowExceeded { provider: String, message: String },

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

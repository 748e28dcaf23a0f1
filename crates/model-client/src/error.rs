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
            Self::Stream { .. } | Self::Cancelled => ErrorKind::Internal,
        }
    }

    /// Whether the engine may re-issue the whole sampling request. HTTP-level retries
    /// (429/5xx) already happened inside the client, so only transport and stream
    /// failures qualify.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Stream { .. } | Self::StreamIdle { .. } | Self::Connection { .. }
        )
    }
}

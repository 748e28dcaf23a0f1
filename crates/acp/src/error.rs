//! The errors of the ACP front end; `sdk` maps each to its JSON-RPC code.

use interpreter_core::CoreError;
use interpreter_core::config::ConfigError;
use interpreter_core::store::StoreError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcpError {
    /// Wrong or unusable request parameters (`-32602`).
    #[error("{0}")]
    InvalidParams(String),
    /// A request that is well formed but not acceptable now (`-32600`).
    #[error("{0}")]
    InvalidRequest(String),
    /// No session (or saved thread) with this id (`-32002`).
    #[error("session `{0}` not found")]
    SessionNotFound(String),
    /// The model call that ended the turn failed: the provider's one-line message, and
    /// what the turn did before it stopped (sent as the error's `data.recap`).
    #[error("{message}")]
    TurnFailed {
        message: String,
        recap: Box<interpreter_core::items::TurnRecap>,
    },
    #[error("error loading config: {0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Core(CoreError),
    #[error(transparent)]
    Store(StoreError),
    #[error("{0}")]
    Internal(String),
    /// The stdio connection failed.
    #[error("the editor connection failed: {0}")]
    Connection(String),
}

/// A thread the store does not have is an unknown session (`-32002`).
impl From<StoreError> for AcpError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound(id) => Self::SessionNotFound(id.to_string()),
            other => Self::Store(other),
        }
    }
}

/// A session is a thread: an unknown thread is an unknown session (`-32002`).
impl From<CoreError> for AcpError {
    fn from(err: CoreError) -> Self {
        match err {
            CoreError::ThreadNotFound(id) => Self::SessionNotFound(id.to_string()),
            other => Self::Core(other),
        }
    }
}

//! Errors at the engine's boundary.

use interpreter_protocol::ThreadId;

use crate::config::ConfigError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(StoreError),
    #[error(transparent)]
    Provider(#[from] interpreter_model_client::ProviderError),
    #[error(transparent)]
    Mcp(#[from] interpreter_mcp_client::McpClientError),
    #[error("no thread with id {0} is recorded")]
    ThreadNotFound(ThreadId),
    #[error("thread {thread_id} has no ended turn `{turn_id}`")]
    TurnNotFound {
        thread_id: ThreadId,
        turn_id: String,
    },
    #[error("thread {0} is already running in this process")]
    ThreadAlreadyLive(ThreadId),
    #[error("thread {0} has shut down")]
    ThreadClosed(ThreadId),
    #[error("thread {0} is running a turn")]
    ThreadBusy(ThreadId),
    #[error("thread {0} is ephemeral (not persisted), so it cannot be restarted")]
    ThreadNotPersisted(ThreadId),
    #[error(transparent)]
    Goal(#[from] crate::goal::GoalError),
    #[error(transparent)]
    Review(#[from] crate::review::ReviewError),
    #[error("{0}")]
    Internal(String),
}

/// A thread the store does not have is the engine's [`CoreError::ThreadNotFound`], which
/// every front end maps to its "no such thread" answer.
impl From<StoreError> for CoreError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound(id) => Self::ThreadNotFound(id),
            other => Self::Store(other),
        }
    }
}

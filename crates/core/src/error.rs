//! Errors at the engine's boundary, and what kind of failure each is.
//!
//! [`CoreError::kind`] classifies an error once, here; each front end keeps a single
//! table from [`ErrorKind`] to its wire's code (app-server, ACP, mcp-server), so a fleet
//! thread that runs elsewhere, say, is the same answer with the same retry data on all.

use interpreter_mcp_client::McpClientError;
use interpreter_protocol::ThreadId;

use crate::config::ConfigError;
use crate::review::ReviewError;
use crate::store::{RunsElsewhere, StoreError};

/// What kind of failure an error is, for the caller: whether it can fix the request,
/// should retry, or can do nothing. Deliberately exhaustive: a new kind must fail to
/// compile in every front end's table until that table says what it is on its wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The thread, turn or session the request names does not exist.
    NotFound,
    /// The request's parameters are wrong (a review target that names nothing).
    InvalidParams,
    /// Well formed, but not acceptable as things are: the config, the goal, an MCP server
    /// or tool that is not there, a thread that cannot do this.
    InvalidRequest,
    /// The thread is busy here (a turn running, already live): retry when it is idle.
    Busy,
    /// Another replica of the fleet runs the thread: nothing happened; retry there or
    /// in a moment.
    RunsElsewhere(RunsElsewhere),
    /// Something the engine depends on failed (the model's server, an MCP server, the
    /// thread store): the same request may work later.
    Unavailable,
    /// A fault of the engine itself.
    Internal,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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

impl CoreError {
    /// The kind of failure, decided here once for every front end.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::ThreadNotFound(_) | Self::TurnNotFound { .. } => ErrorKind::NotFound,
            Self::Store(error) => error.kind(),
            Self::Review(ReviewError::InvalidTarget(_) | ReviewError::UnknownRef { .. }) => {
                ErrorKind::InvalidParams
            }
            Self::Config(_)
            | Self::Goal(_)
            | Self::ThreadNotPersisted(_)
            | Self::Review(ReviewError::NotARepository(_))
            | Self::Mcp(
                McpClientError::UnknownServer(_)
                | McpClientError::UnknownTool(_)
                | McpClientError::InvalidArguments(_),
            ) => ErrorKind::InvalidRequest,
            Self::ThreadBusy(_) | Self::ThreadAlreadyLive(_) => ErrorKind::Busy,
            Self::Provider(_) | Self::Mcp(_) | Self::Review(_) | Self::ThreadClosed(_) => {
                ErrorKind::Unavailable
            }
            Self::Internal(_) => ErrorKind::Internal,
        }
    }
}

impl StoreError {
    /// The kind of failure (see [`CoreError::kind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::InvalidCursor(_) => ErrorKind::InvalidRequest,
            Self::Unsupported { .. } => ErrorKind::InvalidRequest,
            Self::OwnedElsewhere {
                thread_id, owner, ..
            } => ErrorKind::RunsElsewhere(RunsElsewhere::new(*thread_id, owner)),
            Self::Database { .. } | Self::WriteTimeout { .. } | Self::Fenced { .. } => {
                ErrorKind::Unavailable
            }
            Self::Io { .. }
            | Self::Serialize { .. }
            | Self::Index { .. }
            | Self::IndexValue { .. }
            | Self::Unusable { .. }
            | Self::WriterFailed { .. } => ErrorKind::Internal,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_one_kind() {
        let id = ThreadId::new();
        let cases = [
            (CoreError::ThreadNotFound(id), ErrorKind::NotFound),
            (
                CoreError::from(StoreError::NotFound(id)),
                ErrorKind::NotFound,
            ),
            (
                CoreError::Review(ReviewError::InvalidTarget("x".into())),
                ErrorKind::InvalidParams,
            ),
            (
                CoreError::Mcp(McpClientError::UnknownServer("s".into())),
                ErrorKind::InvalidRequest,
            ),
            (
                CoreError::from(StoreError::InvalidCursor("c".into())),
                ErrorKind::InvalidRequest,
            ),
            (CoreError::ThreadBusy(id), ErrorKind::Busy),
            (CoreError::ThreadAlreadyLive(id), ErrorKind::Busy),
            (
                CoreError::from(StoreError::OwnedElsewhere {
                    thread_id: id,
                    owner: "replica-2".into(),
                    internal_url: None,
                }),
                ErrorKind::RunsElsewhere(RunsElsewhere::new(id, "replica-2")),
            ),
            (
                CoreError::from(StoreError::Database {
                    store: "pg".into(),
                    message: "down".into(),
                }),
                ErrorKind::Unavailable,
            ),
            (CoreError::Internal("bug".into()), ErrorKind::Internal),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error}");
        }
    }
}

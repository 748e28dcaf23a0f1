//! Errors of thread stores. File and database errors carry the path or store involved,
//! because "permission denied" alone does not tell a user what to fix.

use std::path::PathBuf;

use interpreter_protocol::ThreadId;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to serialize a rollout record for {}: {source}", path.display())]
    Serialize {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("thread index {}: {source}", path.display())]
    Index {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// A listing cursor that no listing produced.
    #[error("invalid cursor: `{0}`")]
    InvalidCursor(String),
    #[error("invalid value in thread index {}: {message}", path.display())]
    IndexValue { path: PathBuf, message: String },
    /// A rollout that exists but holds no thread (0 bytes, or no readable metadata).
    #[error("rollout {} cannot be used: {reason}", path.display())]
    Unusable { path: PathBuf, reason: String },
    #[error("writing to {} did not finish within {seconds} s", path.display())]
    WriteTimeout { path: PathBuf, seconds: u64 },
    #[error("the rollout writer for {} stopped unexpectedly: {message}", path.display())]
    WriterFailed { path: PathBuf, message: String },
    /// No thread with this id is recorded.
    #[error("no thread with id {0} is recorded")]
    NotFound(ThreadId),
    /// The database refused or failed a statement, or could not be reached in time.
    #[error("thread store {store}: {message}")]
    Database { store: String, message: String },
    /// Another process took the thread over (its lease epoch moved on): this process must
    /// stop writing to it.
    #[error(
        "thread {thread_id} was taken over by another process (epoch {held} is no longer \
         current); this process stopped writing to it"
    )]
    Fenced { thread_id: ThreadId, held: i64 },
    /// Another live process runs the thread; try there, or again once it is idle.
    #[error("thread {thread_id} is running on {owner}; retry there or once its turn ends")]
    OwnedElsewhere {
        thread_id: ThreadId,
        owner: String,
        /// Where the owner takes requests from other replicas, when it said.
        internal_url: Option<String>,
    },
    #[error("{what} are not available with the {store} thread store")]
    Unsupported { store: String, what: &'static str },
}

impl StoreError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// The JSON-RPC error code front ends answer with when another live process runs the
/// thread and the request could not be forwarded there: the request did nothing and may
/// be sent again (in a moment, or to the owner). In the range JSON-RPC leaves to servers.
pub const RUNS_ELSEWHERE_CODE: i32 = -32050;

/// How long a caller should wait before retrying a thread another process runs: about a
/// heartbeat, after which an owner that died is visibly dead or the turn has moved on.
pub const RUNS_ELSEWHERE_RETRY_AFTER_MS: u64 = 2_000;

/// The `data` of a [`RUNS_ELSEWHERE_CODE`] error.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunsElsewhere {
    pub thread_id: String,
    /// The replica that holds the thread.
    pub owner: String,
    /// Always true: nothing ran.
    pub retryable: bool,
    pub retry_after_ms: u64,
}

impl RunsElsewhere {
    pub fn new(thread_id: ThreadId, owner: &str) -> Self {
        Self {
            thread_id: thread_id.to_string(),
            owner: owner.to_string(),
            retryable: true,
            retry_after_ms: RUNS_ELSEWHERE_RETRY_AFTER_MS,
        }
    }
}

impl StoreError {
    /// For [`StoreError::OwnedElsewhere`], what the wire error says about it.
    pub fn runs_elsewhere(&self) -> Option<RunsElsewhere> {
        match self {
            Self::OwnedElsewhere {
                thread_id, owner, ..
            } => Some(RunsElsewhere::new(*thread_id, owner)),
            _ => None,
        }
    }
}
